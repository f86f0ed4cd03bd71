//! `rollgate serve` as Flagger's webhook: the real binary on 127.0.0.1, driven with Flagger's
//! exact payloads for each hook type, against the real Prometheus with generated data, and
//! against fake Prometheus servers for the faults.

use crate::serve_common;
use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;
use serve_common::{
    client, compare_template, error_rate_template, flagger_payload, path_str, post, post_for_json,
    serve_templates, template_dir, ServeProcess, HOOKS,
};
use support::stub::{closed_port, Mode, Stub};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A template with two metrics: the ratio of `service`, and the ratio of the `bad` service.
fn two_metrics_template() -> String {
    let one = error_rate_template("two", "inconclusive");
    let metrics = one.split("  metrics:\n").nth(1).unwrap();
    let second = metrics
        .replace("- name: error-ratio", "- name: bad-ratio")
        .replace("{{args.service}}", "bad");
    format!("{one}{second}")
}

/// Templates over the scenario data, and a server on the shared Prometheus.
fn server_on_prometheus(extra: &[&str]) -> (tempfile::TempDir, ServeProcess) {
    let prom = support::prom::shared();
    let dir = template_dir(&[
        (
            "error-rate.yaml",
            error_rate_template("error-rate", "inconclusive"),
        ),
        ("wait.yaml", error_rate_template("error-rate-wait", "wait")),
        ("two.yaml", two_metrics_template()),
    ]);
    let mut args = vec![
        "--templates",
        path_str(dir.path()),
        "--prometheus",
        prom.url.as_str(),
    ];
    args.extend_from_slice(extra);
    let server = ServeProcess::start(&args);
    (dir, server)
}

/// The check endpoint's status for a phase, per the README's table.
fn check_status(phase: &str) -> u16 {
    match phase {
        "Successful" => 200,
        "Failed" => 412,
        "Inconclusive" | "Running" => 409,
        "Error" => 503,
        other => panic!("{other}"),
    }
}

/// The rollback endpoint's status for a phase.
fn rollback_status(phase: &str) -> u16 {
    match phase {
        "Failed" => 200,
        "Successful" | "Inconclusive" | "Running" => 409,
        "Error" => 503,
        other => panic!("{other}"),
    }
}

#[test]
fn every_verdict_maps_to_its_status_for_every_hook_type_with_and_without_its_type() {
    let (_dir, server) = server_on_prometheus(&[]);
    let down = ServeProcess::start(&[
        "--prometheus",
        &closed_port(),
        "--templates",
        path_str(_dir.path()),
    ]);
    // (server, template, service, expected phase, words of the reason)
    let cases: Vec<(&ServeProcess, &str, &str, &str, &[&str])> = vec![
        (
            &server,
            "error-rate",
            "healthy",
            "Successful",
            &["result [0.00", "holds"],
        ),
        (
            &server,
            "error-rate",
            "bad",
            "Failed",
            &["result [0.0", "failureCondition `result[0] >= 0.01` holds"],
        ),
        (
            &server,
            "error-rate",
            "lowtraffic",
            "Inconclusive",
            &["requests seen, 300 needed"],
        ),
        (
            &server,
            "error-rate-wait",
            "lowtraffic",
            "Running",
            &["requests seen, 300 needed"],
        ),
        (&down, "error-rate", "healthy", "Error", &["127.0.0.1"]),
    ];
    let client = client();
    runtime().block_on(async {
        let mut hooks = HOOKS.to_vec();
        hooks.push(("post-rollout", "Succeeded"));
        for (hook, canary_phase) in hooks {
            // Without `metadata.hook` (the codes from before hook types), and with it; the
            // rollback hook may use either endpoint when it names its type.
            let variants: &[(&str, Option<&str>)] = if hook == "rollback" {
                &[
                    ("rollback", None),
                    ("rollback", Some("rollback")),
                    ("check", Some("rollback")),
                ]
            } else {
                &[("check", None), ("check", Some(hook))]
            };
            for ((endpoint, typed), (srv, template, service, phase, words)) in variants
                .iter()
                .flat_map(|v| cases.iter().map(move |c| (v, c)))
            {
                let mut metadata = vec![("template", *template), ("args.service", *service)];
                metadata.extend(typed.map(|t| ("hook", t)));
                let body = flagger_payload(canary_phase, &metadata);
                let url = format!("{}/flagger/v1/{endpoint}", srv.url);
                let rollback = *endpoint == "rollback" || *typed == Some("rollback");
                let want = match typed {
                    Some(t) => typed_status(t, phase),
                    None if rollback => rollback_status(phase),
                    None => check_status(phase),
                };
                let (status, text, took) = post(&client, &url, body.clone(), false).await;
                let what = format!("{hook} {typed:?} {template} {service}: {status} {text}");
                assert_eq!(status, want, "{what}");
                assert!(took < Duration::from_secs(8), "{what} took {took:?}");
                // The plain-text reason: the phase, the metric and the engine's message.
                let reason = text.trim_end();
                assert!(!reason.contains('\n'), "{what}");
                let expected_start = if rollback && *phase == "Failed" {
                    format!("roll back: {phase}: error-ratio: ")
                } else if rollback {
                    format!("do not roll back: {phase}: error-ratio: ")
                } else {
                    format!("{phase}: error-ratio: ")
                };
                assert!(reason.starts_with(&expected_start), "{what}");
                for w in *words {
                    assert!(reason.contains(w), "{what}: missing {w:?}");
                }
                // JSON with Accept: application/json, same verdict.
                let (status, json, _) = post(&client, &url, body, true).await;
                assert_eq!(status, want, "{what}");
                let v: Value = serde_json::from_str(&json).unwrap();
                assert_eq!(v["verdict"], *phase, "{json}");
                assert_eq!(v["status"], want, "{json}");
                assert_eq!(v["hook"].as_str(), *typed, "{json}");
                assert_eq!(v["canary"]["name"], "podinfo");
                assert_eq!(v["canary"]["namespace"], "test");
                assert_eq!(v["canary"]["phase"], canary_phase);
                assert_eq!(v["template"], *template);
                assert_eq!(v["measurements"][0]["metric"], "error-ratio");
                assert_eq!(v["measurements"][0]["phase"], *phase);
                assert_eq!(v["measurements"][0]["kind"], "query");
                if rollback {
                    assert_eq!(v["rollback"], *phase == "Failed", "{json}");
                } else {
                    assert!(v.get("rollback").is_none(), "{json}");
                }
            }
        }
    });
}

/// The status for a verdict on a hook that names its type, per docs/serve.md ("Hook types"):
/// what Flagger v1.44 does with a failing hook of each type (`scheduler.go`,
/// `scheduler_hooks.go`) decides it.
fn typed_status(hook: &str, phase: &str) -> u16 {
    match (hook, phase) {
        (_, "Error") => 503,
        ("rollback", "Failed") => 200,
        ("rollback", _) => 409,
        (_, "Successful") => 200,
        (_, "Failed") => 412,
        ("rollout" | "pre-rollout", "Inconclusive" | "Running") => 202,
        (_, "Inconclusive" | "Running") => 409,
        other => panic!("{other:?}"),
    }
}

#[test]
fn hook_types_the_webhook_cannot_serve_are_refused_with_the_key() {
    let (_dir, server) = server_on_prometheus(&[]);
    let client = client();
    runtime().block_on(async {
        // A type the webhook cannot serve, and a check type on the rollback endpoint.
        for (endpoint, hook, words) in [
            ("check", "event", "event hooks carry Flagger's events"),
            ("check", "rolout", "unknown hook type \"rolout\""),
            (
                "rollback",
                "rollout",
                "point a rollout hook at /flagger/v1/check",
            ),
        ] {
            let (status, text, _) = post(
                &client,
                &format!("{}/flagger/v1/{endpoint}", server.url),
                flagger_payload(
                    "Progressing",
                    &[
                        ("hook", hook),
                        ("template", "error-rate"),
                        ("args.service", "healthy"),
                    ],
                ),
                false,
            )
            .await;
            assert_eq!(status, 422, "{text}");
            assert!(
                text.contains("metadata.hook: ") && text.contains(words),
                "{text}"
            );
        }
    });
}

#[test]
fn metrics_of_a_template_combine_and_one_can_be_picked() {
    let (_dir, server) = server_on_prometheus(&[]);
    let client = client();
    let url = format!("{}/flagger/v1/check", server.url);
    runtime().block_on(async {
        // healthy + bad: any Failed fails the whole.
        let (status, text, _) = post(
            &client,
            &url,
            flagger_payload(
                "Progressing",
                &[("template", "two"), ("args.service", "healthy")],
            ),
            false,
        )
        .await;
        assert_eq!(status, 412, "{text}");
        assert!(
            text.starts_with("Failed: error-ratio Successful: "),
            "{text}"
        );
        assert!(text.contains("; bad-ratio Failed: "), "{text}");
        // Only the first metric.
        let (status, text, _) = post(
            &client,
            &url,
            flagger_payload(
                "Progressing",
                &[
                    ("template", "two"),
                    ("metric", "error-ratio"),
                    ("args.service", "healthy"),
                ],
            ),
            false,
        )
        .await;
        assert_eq!(status, 200, "{text}");
        // Lowtraffic + bad: Failed still wins over Inconclusive.
        let (status, _, _) = post(
            &client,
            &url,
            flagger_payload(
                "Progressing",
                &[("template", "two"), ("args.service", "lowtraffic")],
            ),
            false,
        )
        .await;
        assert_eq!(status, 412);
        let (status, text, _) = post(
            &client,
            &url,
            flagger_payload(
                "Progressing",
                &[
                    ("template", "two"),
                    ("metric", "nope"),
                    ("args.service", "a"),
                ],
            ),
            false,
        )
        .await;
        assert_eq!(status, 422, "{text}");
        assert!(
            text.contains("no metric \"nope\"") && text.contains("bad-ratio"),
            "{text}"
        );
    });
}

#[test]
fn the_canarys_name_and_an_inline_spec_work_as_documented() {
    let (_dir, server) = server_on_prometheus(&[]);
    let client = client();
    let url = format!("{}/flagger/v1/check", server.url);
    let spec = |service: &str| {
        format!(
            "query: |\n  {}\nminRequests:\n  query: '{}'\n  count: 300\nnoData: inconclusive\n",
            support::scenarios::HEALTHY
                .ratio_query("5m")
                .replace("healthy", service),
            support::scenarios::HEALTHY
                .total_query("5m")
                .replace("healthy", service),
        )
    };
    runtime().block_on(async {
        for (service, status) in [("healthy", 200), ("bad", 412), ("lowtraffic", 409)] {
            let (got, text, _) = post(
                &client,
                &url,
                flagger_payload(
                    "Progressing",
                    &[("spec", &spec(service)), ("successCondition", "result[0] < 0.01")],
                ),
                false,
            )
            .await;
            assert_eq!(got, status, "{service}: {text}");
            assert!(text.contains(": inline: "), "{text}");
        }
        // args in an inline spec, and the canary's own name as an argument.
        let (got, text, _) = post(
            &client,
            &url,
            flagger_payload(
                "Progressing",
                &[
                    ("spec", &spec("{{args.service}}")),
                    ("successCondition", "result[0] < 0.01"),
                    ("metric", "ratio"),
                    ("args.service", "bad"),
                ],
            ),
            false,
        )
        .await;
        assert_eq!(got, 412, "{text}");
        assert!(text.starts_with("Failed: ratio: "), "{text}");
        let body = r#"{"name":"bad","namespace":"test","phase":"Progressing","checksum":"1","metadata":{"spec":"query: 'sum(rate(http_requests_total{service=\"{{args.name}}\",code=~\"5..\"}[5m])) / sum(rate(http_requests_total{service=\"{{args.name}}\"}[5m]))'\nnoData: fail\n","successCondition":"result[0] < 0.01"}}"#;
        let (got, text, _) = post(&client, &url, body.to_string(), false).await;
        assert_eq!(got, 412, "the canary named bad: {text}");
    });
}

#[test]
fn a_slow_or_silent_prometheus_gives_503_within_the_deadline() {
    let never = Stub::start(Mode::NeverAnswer);
    let slow = Stub::start(Mode::Slow(
        Duration::from_secs(30),
        Box::new(Mode::Warnings),
    ));
    let dir = template_dir(&[("t.yaml", error_rate_template("error-rate", "inconclusive"))]);
    let client = client();
    for stub in [&never, &slow] {
        let server = ServeProcess::start(&[
            "--prometheus",
            &stub.url,
            "--templates",
            path_str(dir.path()),
            "--deadline",
            "2s",
        ]);
        runtime().block_on(async {
            for endpoint in ["check", "rollback"] {
                let (status, text, took) = post(
                    &client,
                    &format!("{}/flagger/v1/{endpoint}", server.url),
                    flagger_payload(
                        "Progressing",
                        &[("template", "error-rate"), ("args.service", "healthy")],
                    ),
                    false,
                )
                .await;
                assert_eq!(status, 503, "{text}");
                assert!(text.contains("Error: error-ratio: "), "{text}");
                assert!(
                    took >= Duration::from_millis(1500) && took < Duration::from_millis(3000),
                    "answered after {took:?}, deadline 2s"
                );
            }
        });
    }
    assert!(never.requests() > 0 && slow.requests() > 0);
}

/// The body of a raw HTTP/1.1 exchange: writes `head` then `body` (ignoring write errors, as
/// the server may close early), returns the status line and body read back.
fn raw_exchange(addr: &str, head: &str, body: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    let mut writer = s.try_clone().unwrap();
    let body = body.to_vec();
    let w = std::thread::spawn(move || {
        for chunk in body.chunks(64 * 1024) {
            if writer.write_all(chunk).is_err() {
                break;
            }
        }
    });
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                out.extend_from_slice(&buf[..n]);
                if let Some(i) = out.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&out[..i]).to_ascii_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    if out.len() >= i + 4 + len {
                        break;
                    }
                }
            }
        }
    }
    drop(s);
    let _ = w.join();
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// YAML whose last key expands to 10^10 strings through nested aliases.
fn alias_bomb() -> String {
    let mut lines = vec![r#"a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]"#.to_string()];
    for i in 1..10 {
        let refs = vec![format!("*a{}", i - 1); 10].join(",");
        lines.push(format!("a{i}: &a{i} [{refs}]"));
    }
    lines.push("query: *a9".into());
    lines.join("\n")
}

#[test]
fn bad_input_is_a_4xx_with_a_reason_and_never_hurts_the_server() {
    let token_dir = tempfile::tempdir().unwrap();
    let token_file = token_dir.path().join("token");
    std::fs::write(&token_file, "flagger-s3cret\n").unwrap();
    let (_dir, mut server) = server_on_prometheus(&["--auth-token-file", path_str(&token_file)]);
    let url = format!("{}/flagger/v1/check", server.url);
    let client = client();
    let good_md: &[(&str, &str)] = &[("template", "error-rate"), ("args.service", "healthy")];
    let authed = |body: String| {
        client
            .post(&url)
            .header("Authorization", "Bearer flagger-s3cret")
            .header("Content-Type", "application/json")
            .body(body)
    };
    runtime().block_on(async {
        let cases: Vec<(String, u16, &str)> = vec![
            ("{\"name\": \"podinfo\", ".into(), 400, "malformed JSON"),
            ("".into(), 400, "empty request body"),
            ("[]".into(), 400, "expected a JSON object"),
            (r#"{"name": 7, "namespace": "test"}"#.into(), 400, "name: expected a string, got the number 7"),
            (r#"{"namespace": "test"}"#.into(), 400, "name: is required"),
            (r#"{"name":"p","namespace":"t","metadata":{"template":"error-rate","args.count":3}}"#.into(), 400, "metadata.args.count: expected a string"),
            (r#"{"name":"p","namespace":"t","metadata":"template=x"}"#.into(), 400, "metadata: expected an object"),
            (flagger_payload("Progressing", &[("template", "nope")]), 422, "unknown template \"nope\"; loaded templates: error-rate, error-rate-wait, two"),
            (flagger_payload("Progressing", &[]), 422, "name a loaded template"),
            (flagger_payload("Progressing", &[("template", "error-rate")]), 422, "args.service"),
            (flagger_payload("Progressing", &[("spec", "query: up\n")]), 422, "noData: is required"),
            (flagger_payload("Progressing", &[("spec", "query: sum(rate(x[5m])\nnoData: fail")]), 422, "spec.query"),
            (flagger_payload("Progressing", &[("spec", "query: up\nnoData: fail"), ("successCondition", "result[0] <")]), 422, "successCondition"),
            (flagger_payload("Progressing", &[("spec", "query: up\nnoData: fail\nprometheus:\n  bearerTokenFile: /etc/passwd\n")]), 422, "may not read files"),
            (flagger_payload("Progressing", &[("tempalte", "error-rate")]), 422, "metadata.tempalte: unknown key"),
            // 750 kB of nested flow mappings: libyaml alone would take minutes over it.
            (flagger_payload("Progressing", &[("spec", &("{a: ".repeat(150_000) + &"}".repeat(150_000)))]), 422, "150000 '[' or '{' characters"),
            // 200 kB of nested parentheses: promql-parser recursing on it overflowed the stack and
            // aborted the server.
            (flagger_payload("Progressing", &[("spec", &format!("query: '{}1{}'\nnoData: fail", "(".repeat(100_000), ")".repeat(100_000)))]), 422, "at most 16384 bytes"),
            // An alias bomb (10^10 strings once expanded).
            (flagger_payload("Progressing", &[("spec", &alias_bomb())]), 422, "repetition limit exceeded"),
        ];
        for (body, want, needle) in &cases {
            let resp = authed(body.clone()).send().await.unwrap();
            let status = resp.status().as_u16();
            let text = resp.text().await.unwrap();
            assert_eq!(status, *want, "{body}: {text}");
            assert!(text.contains(needle), "{body}: {text}");
            // Same refusal as JSON.
            let resp = authed(body.clone())
                .header("Accept", "application/json")
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status().as_u16(), *want);
            let v: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
            assert!(v["error"].as_str().unwrap().contains(needle), "{v}");
        }

        // Authentication: missing, wrong, then right.
        let (status, text, _) = post(&client, &url, flagger_payload("Progressing", good_md), false).await;
        assert_eq!(status, 401, "{text}");
        assert!(text.contains("missing bearer token"), "{text}");
        let resp = client
            .post(&url)
            .header("Authorization", "Bearer wrong")
            .body(flagger_payload("Progressing", good_md))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 401);
        assert!(resp.headers()["www-authenticate"].to_str().unwrap().starts_with("Bearer"));
        assert_eq!(resp.text().await.unwrap().trim(), "invalid bearer token");
        let resp = authed(flagger_payload("Progressing", good_md)).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        // Flagger cannot send headers: the token may come in the metadata instead, and is
        // never echoed.
        let mut md = good_md.to_vec();
        md.push(("token", "flagger-s3cret"));
        let (status, text, _) = post(&client, &url, flagger_payload("Progressing", &md), true).await;
        assert_eq!(status, 200, "{text}");
        assert!(!text.contains("flagger-s3cret"), "{text}");
        md.pop();
        md.push(("token", "guess"));
        let (status, text, _) = post(&client, &url, flagger_payload("Progressing", &md), false).await;
        assert_eq!((status, text.trim()), (401, "invalid bearer token"));
    });

    // A 10 MB body: refused from its Content-Length (with and without Expect: 100-continue),
    // and while streaming when it comes chunked.
    let addr = server.url.trim_start_matches("http://").to_string();
    let big = vec![b' '; 10 * 1024 * 1024];
    for expect in ["", "Expect: 100-continue\r\n"] {
        let head = format!(
            "POST /flagger/v1/check HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer flagger-s3cret\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{expect}\r\n",
            big.len()
        );
        let (status, body) = raw_exchange(&addr, &head, &big);
        assert_eq!(status, 413, "{body}");
        assert!(
            body.contains("larger than the limit of 1048576 bytes"),
            "{body}"
        );
    }
    let mut chunked = Vec::new();
    for chunk in big.chunks(256 * 1024) {
        chunked.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        chunked.extend_from_slice(chunk);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let head = "POST /flagger/v1/check HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer flagger-s3cret\r\nTransfer-Encoding: chunked\r\n\r\n";
    let (status, body) = raw_exchange(&addr, head, &chunked);
    assert_eq!(status, 413, "{body}");

    // Still serving, never a 5xx among the refusals, and the token is in no log line.
    assert!(server.alive());
    runtime().block_on(async {
        let resp = client
            .get(format!("{}/healthz", server.url))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
    });
    let logs = server.logs().join("\n");
    assert!(
        !logs.contains("flagger-s3cret"),
        "the token leaked into the logs"
    );
    for line in server.log_json() {
        let fields = line.as_object().unwrap();
        assert!(
            fields
                .keys()
                .all(|k| !k.to_ascii_lowercase().contains("authorization")),
            "{line}"
        );
    }
    let refusals: Vec<Value> = server
        .log_json()
        .into_iter()
        .filter(|v| v["@message"] == "request" && v["status"].as_u64().is_some_and(|s| s >= 400))
        .collect();
    assert!(refusals.len() >= 30, "{} refusals logged", refusals.len());
    assert!(refusals.iter().all(|v| v["status"].as_u64().unwrap() < 500));
    assert!(refusals
        .iter()
        .any(|v| v["refusal"].as_str().unwrap().contains("unknown template")));
    // Each line names the client: this test's own connections, from the loopback address.
    for line in &refusals {
        let peer: std::net::SocketAddr = line["peer"].as_str().unwrap().parse().unwrap();
        assert_eq!(peer.ip(), std::net::Ipv4Addr::LOCALHOST, "{line}");
        assert_eq!(line["method"], "POST", "{line}");
        assert_eq!(line["@module"], "rollgate::serve::access", "{line}");
    }
}

#[test]
fn repeated_calls_for_one_canary_revision_are_the_checks_of_one_run() {
    let (_dir, server) = serve_templates(&[("compare.yaml", compare_template())]);
    let url = format!("{}/flagger/v1/check", server.url);
    let rt = runtime();
    // The `check` metadata of each metric ("2 of 4"), for a call about revision `checksum`.
    let checks = |checksum: &str| -> Vec<String> {
        let body = flagger_payload("Progressing", &[("template", "compare")])
            .replace("6d8f5cb8b7", checksum);
        let answer = rt.block_on(post_for_json(&url, body));
        answer["measurements"]
            .as_array()
            .unwrap_or_else(|| panic!("{answer}"))
            .iter()
            .map(|m| {
                m["metadata"]["check"]
                    .as_str()
                    .unwrap_or("none")
                    .to_string()
            })
            .collect()
    };
    let second = Duration::from_millis(1_000);
    assert_eq!(checks("rev-a"), ["1 of 4", "1 of 1"]);
    std::thread::sleep(second + Duration::from_millis(200));
    assert_eq!(checks("rev-a"), ["2 of 4", "1 of 1"]);
    // Another revision of the canary is another run.
    assert_eq!(checks("rev-b"), ["1 of 4", "1 of 1"]);
    // No call for more than 3 intervals: the run is over, the next call starts a new one.
    std::thread::sleep(3 * second + Duration::from_millis(500));
    assert_eq!(checks("rev-a"), ["1 of 4", "1 of 1"]);
}
