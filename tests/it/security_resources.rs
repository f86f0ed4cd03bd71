//! What a hostile caller, template author or upstream can do to `rollgate serve`'s resources
//! and to the text it answers with, tried against the release binary: memory under huge
//! answers, credentials echoed by the upstream, contradictory answers, idle connections.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use base64::Engine as _;

use crate::serve_common::{client, flagger_payload, path_str, post, template_dir, ServeProcess};
use crate::support::runtime;
use crate::support::stub::{self, Mode, Reply, Stub};

/// The shipped Deployment's memory limit (manifests/serve/deployment.yaml: `memory: 128Mi`).
const DEPLOYMENT_MEMORY_LIMIT: u64 = 128 << 20;

/// A Flagger check with an inline spec (`query: up` on the default Prometheus) and `extra`
/// lines of its `prometheus:` block.
fn inline_check(prometheus: &str, condition: &str) -> String {
    let mut spec = "query: up\nnoData: fail\n".to_string();
    if !prometheus.is_empty() {
        spec.push_str("prometheus:\n");
        for line in prometheus.lines() {
            spec.push_str(&format!("  {line}\n"));
        }
    }
    flagger_payload(
        "Progressing",
        &[("spec", &spec), ("successCondition", condition)],
    )
}

/// Peak resident memory (VmHWM) of process `pid`, in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("VmHWM in /proc/PID/status");
    kb * 1024
}

#[test]
fn a_spec_cannot_raise_the_operators_response_cap() {
    let upstream = Stub::start(Mode::Huge(2 << 20));
    let server = ServeProcess::start(&[
        "--prometheus",
        &upstream.url,
        "--max-response-bytes",
        "1048576",
    ]);
    let url = format!("{}/flagger/v1/check", server.url);
    runtime().block_on(async {
        let client = client();
        // A caller's 1 GiB is refused by name, before anything is asked upstream.
        let asked = upstream.requests();
        let (status, text, _) = post(
            &client,
            &url,
            inline_check("maxResponseBytes: 1073741824", "result[0] == 1"),
            false,
        )
        .await;
        assert_eq!(status, 503, "{text}");
        assert!(
            text.contains("maxResponseBytes 1073741824")
                && text.contains("1048576")
                && text.contains("--max-response-bytes"),
            "{text}"
        );
        assert_eq!(upstream.requests(), asked, "nothing was asked upstream");
        // Without the key the operator's cap applies: the 2 MiB answer is too large.
        let (status, text, _) =
            post(&client, &url, inline_check("", "result[0] == 1"), false).await;
        assert_eq!(status, 503, "{text}");
        assert!(
            text.contains("exceeds the limit of 1048576 bytes"),
            "{text}"
        );
        // A spec may lower it.
        let (status, text, _) = post(
            &client,
            &url,
            inline_check("maxResponseBytes: 4096", "result[0] == 1"),
            false,
        )
        .await;
        assert_eq!(status, 503, "{text}");
        assert!(text.contains("exceeds the limit of 4096 bytes"), "{text}");
    });
    // The environment variable sets it too; a cap above the budget cannot start.
    let env_server = ServeProcess::try_start(
        &["--prometheus", &upstream.url],
        &[("ROLLGATE_MAX_RESPONSE_BYTES", "1048576")],
    )
    .unwrap_or_else(|(s, logs)| panic!("{s:?}: {logs:?}"));
    runtime().block_on(async {
        let (status, text, _) = post(
            &client(),
            &format!("{}/flagger/v1/check", env_server.url),
            inline_check("maxResponseBytes: 2000000", "result[0] == 1"),
            false,
        )
        .await;
        assert_eq!(status, 503, "{text}");
        assert!(
            text.contains("above this server's limit of 1048576"),
            "{text}"
        );
    });
    let refused = ServeProcess::try_start(
        &[
            "--max-response-bytes",
            "2000000",
            "--max-buffered-bytes",
            "1000000",
        ],
        &[],
    );
    match refused {
        Err((Some(status), logs)) => {
            assert!(!status.success());
            assert!(logs.join("\n").contains("--max-buffered-bytes"), "{logs:?}");
        }
        Err((None, logs)) => panic!("did not exit: {logs:?}"),
        Ok(_) => panic!("started with a cap above its budget"),
    }
}

/// Concurrent checks whose upstream answers are as large as serve takes (8 MB each, under
/// the default cap of 8 MiB), plus callers asking for more: serve's peak RSS stays under the shipped
/// Deployment's memory limit, and answers come (a verdict, or 503 when the budget stayed
/// spent), never a crash.
#[test]
fn serve_stays_within_its_memory_limit_under_huge_answers() {
    const CONCURRENT: usize = 12;
    const ROUNDS: usize = 2;
    let upstream = Stub::start(Mode::Huge(8_000_000));
    let server = ServeProcess::start(&["--prometheus", &upstream.url, "--deadline", "8s"]);
    let url = format!("{}/flagger/v1/check", server.url);
    let statuses = runtime().block_on(async {
        let client = client();
        let mut statuses = Vec::new();
        for round in 0..ROUNDS {
            let mut calls = Vec::new();
            for i in 0..CONCURRENT {
                let prometheus = if i % 4 == 3 {
                    // Asking for 16 GiB, as the spec's own bound allows.
                    "maxResponseBytes: 17179869184"
                } else {
                    ""
                };
                let body = inline_check(prometheus, &format!("result[0] == 1 || {round} < 0"));
                let (client, url) = (client.clone(), url.clone());
                calls.push(tokio::spawn(async move {
                    post(&client, &url, body, false).await
                }));
            }
            for call in calls {
                let (status, text, _) = call.await.unwrap();
                assert!(
                    status == 200 || status == 503,
                    "{status}: {}",
                    text.chars().take(300).collect::<String>()
                );
                statuses.push(status);
            }
        }
        statuses
    });
    let peak = peak_rss(server.pid());
    eprintln!(
        "serve peak RSS {:.1} MiB over {} checks of 8 MB answers ({} answered 200)",
        peak as f64 / f64::from(1 << 20),
        statuses.len(),
        statuses.iter().filter(|&&s| s == 200).count()
    );
    assert!(
        peak < DEPLOYMENT_MEMORY_LIMIT,
        "peak RSS {peak} bytes is over the Deployment's limit"
    );
    assert!(
        statuses.contains(&200),
        "no check got its answer through: {statuses:?}"
    );
}

/// A stub that echoes each request's Authorization header back: in `warnings` for the
/// `echo_warning` query, in an API error for `echo_api_error`, in a plain-text 500 for
/// `echo_http_error`, and in a label for `echo_label`.
fn echoing_upstream() -> Stub {
    Stub::script(|req, _| {
        let auth = req.header("authorization").unwrap_or("none").to_string();
        let decoded_basic = auth
            .strip_prefix("Basic ")
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .map(|d| String::from_utf8_lossy(&d).into_owned())
            .unwrap_or_default();
        let form = String::from_utf8_lossy(&req.body).into_owned();
        let echo = format!("you sent {auth} ({decoded_basic})");
        let vector = |labels: serde_json::Value| {
            serde_json::json!({"resultType": "vector", "result": [
                {"metric": labels, "value": [1_700_000_000, "1"]}
            ]})
        };
        if form.contains("echo_warning") {
            stub::json(
                200,
                &serde_json::json!({"status": "success", "data": vector(serde_json::json!({})),
                    "warnings": [echo], "infos": [format!("PromQL info: {auth}")]})
                .to_string(),
            )
        } else if form.contains("echo_api_error") {
            stub::json(
                422,
                &serde_json::json!({"status": "error", "errorType": "execution", "error": echo})
                    .to_string(),
            )
        } else if form.contains("echo_http_error") {
            Reply::Full {
                status: 500,
                body: echo.into_bytes(),
            }
        } else {
            stub::json(
                200,
                &serde_json::json!({"status": "success",
                    "data": vector(serde_json::json!({"seen": echo}))})
                .to_string(),
            )
        }
    })
}

#[test]
fn credentials_echoed_by_the_upstream_never_reach_the_caller() {
    let upstream = echoing_upstream();
    let secrets = tempfile::tempdir().unwrap();
    let token = "tok-8f2a91c4e7";
    let password = "pw-5d1e7b3a90";
    std::fs::write(secrets.path().join("token"), format!("{token}\n")).unwrap();
    std::fs::write(secrets.path().join("password"), format!("{password}\n")).unwrap();
    let port = upstream.addr.port();
    let blocks = [
        (
            "bearer",
            format!(
                "address: http://127.0.0.1:{port}\n        bearerTokenFile: {}",
                secrets.path().join("token").display()
            ),
        ),
        (
            "basic",
            format!(
                "address: http://127.0.0.1:{port}\n        basicAuth:\n          username: alice\n          passwordFile: {}",
                secrets.path().join("password").display()
            ),
        ),
        (
            "userinfo",
            format!("address: http://bob:{password}@127.0.0.1:{port}"),
        ),
    ];
    let mut files = Vec::new();
    for (name, prometheus) in &blocks {
        let metrics: String = ["echo_warning", "echo_api_error", "echo_http_error", "echo_label"]
            .iter()
            .map(|q| {
                format!(
                    "    - name: {q}\n      successCondition: result[0] == 1\n      provider:\n        plugin:\n          rollgate/analysis:\n            query: {q}\n            noData: fail\n            prometheus:\n              {}\n",
                    prometheus.replace("\n        ", "\n              ")
                )
            })
            .collect();
        files.push((
            format!("{name}.yaml"),
            format!(
                "apiVersion: argoproj.io/v1alpha1\nkind: AnalysisTemplate\nmetadata:\n  name: {name}\nspec:\n  metrics:\n{metrics}"
            ),
        ));
    }
    let files: Vec<(&str, String)> = files.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let dir = template_dir(&files);
    let server =
        ServeProcess::start(&["--templates", path_str(dir.path()), "--log-level", "debug"]);
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let forbidden = [
        token.to_string(),
        password.to_string(),
        b64(&format!("alice:{password}")),
        b64(&format!("bob:{password}")),
    ];
    runtime().block_on(async {
        let client = client();
        for (name, _) in &blocks {
            for json in [false, true] {
                let (status, text, _) = post(
                    &client,
                    &format!("{}/flagger/v1/check", server.url),
                    flagger_payload("Progressing", &[("template", name)]),
                    json,
                )
                .await;
                assert_ne!(status, 200, "{name}: {text}");
                for secret in &forbidden {
                    assert!(
                        !text.contains(secret.as_str()),
                        "{name} leaked {secret}: {text}"
                    );
                }
                assert!(
                    text.contains("you sent") && text.contains("<redacted>"),
                    "{name}: the echo did not come back: {text}"
                );
            }
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    let logs = server.logs().join("\n");
    for secret in &forbidden {
        assert!(!logs.contains(secret.as_str()), "the log leaked {secret}");
    }
}

#[test]
fn a_contradictory_answer_is_an_error_not_a_verdict() {
    let upstream = Stub::start(Mode::Fixed(
        r#"{"status":"error","errorType":"execution","error":"query failed","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000,"0.001"]}]},"status":"success"}"#
            .into(),
    ));
    let server = ServeProcess::start(&["--prometheus", &upstream.url]);
    runtime().block_on(async {
        let (status, text, _) = post(
            &client(),
            &format!("{}/flagger/v1/check", server.url),
            inline_check("", "result[0] < 0.01"),
            false,
        )
        .await;
        assert_eq!(status, 503, "{text}");
        assert!(text.contains("duplicate key `status`"), "{text}");
    });
}

/// Reads from `stream` until it is closed (or `limit` passes: then false).
fn closed_within(stream: &mut TcpStream, limit: Duration) -> bool {
    let started = Instant::now();
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut buf = [0u8; 4096];
    while started.elapsed() < limit {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return true,
        }
    }
    false
}

#[test]
fn connections_that_send_no_request_are_closed() {
    let grpc_port = crate::support::prom::free_port();
    let grpc = format!("127.0.0.1:{grpc_port}");
    let server = ServeProcess::start(&["--request-timeout", "1s", "--grpc-listen", &grpc]);
    let http = server.url.trim_start_matches("http://").to_string();
    std::thread::sleep(Duration::from_millis(300));
    let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    for (what, addr, send) in [
        ("HTTP, nothing", http.as_str(), &b""[..]),
        (
            "HTTP, half a head",
            http.as_str(),
            &b"POST /flagger/v1/check HTTP/1.1\r\nHost: x\r\n"[..],
        ),
        ("HTTP, h2c preface", http.as_str(), &preface[..]),
        ("gRPC, nothing", grpc.as_str(), &b""[..]),
        ("gRPC, h2c preface", grpc.as_str(), &preface[..]),
    ] {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.write_all(send).unwrap();
        assert!(
            closed_within(&mut stream, Duration::from_secs(6)),
            "{what}: still open after 6s with a 1s request timeout"
        );
    }
}

#[test]
fn flagger_and_web_endpoints_authenticate_before_reading_the_body() {
    let dir = template_dir(&[]);
    std::fs::write(dir.path().join("token"), "s3cret-token\n").unwrap();
    let server = ServeProcess::start(&["--auth-token-file", path_str(&dir.path().join("token"))]);
    runtime().block_on(async {
        for path in [
            "/flagger/v1/check",
            "/flagger/v1/rollback",
            "/argo/v1/measure",
        ] {
            for body in ["{not json", "", "[]"] {
                let (status, text, _) = post(
                    &client(),
                    &format!("{}{path}", server.url),
                    body.to_string(),
                    false,
                )
                .await;
                assert_eq!(status, 401, "{path} {body:?}: {text}");
                assert!(!text.to_lowercase().contains("json"), "{path}: {text}");
            }
        }
    });
}
