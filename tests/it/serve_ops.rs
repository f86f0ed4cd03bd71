//! Operating `rollgate serve`: probes, /metrics, TLS, start-up errors, SIGHUP reloads, reloads
//! on file changes and SIGTERM with requests in flight — the real binary on 127.0.0.1.

use crate::serve_common;
use crate::support;

use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::json;
use serve_common::{
    client, error_rate_template, flagger_payload, path_str, post, template_dir, ServeProcess,
};
use support::stub::{closed_port, Mode, Stub};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A Prometheus answer with one sample of value 1, now.
fn one_sample() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    json!({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {}, "value": [now, "1"]}
    ]}})
    .to_string()
}

/// Flagger's payload with an inline spec that queries the server's default Prometheus.
fn inline_check() -> String {
    flagger_payload(
        "Progressing",
        &[
            ("spec", "query: up\nnoData: fail\n"),
            ("successCondition", "result[0] == 1"),
        ],
    )
}

fn get(url: &str) -> (u16, String) {
    runtime().block_on(async {
        let resp = client().get(url).send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.text().await.unwrap())
    })
}

/// The value of a series in /metrics text (0 when absent).
fn metric_value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|r| r.strip_prefix(' ')))
        .map(|v| v.parse().unwrap())
        .unwrap_or(0.0)
}

#[test]
fn probes_metrics_and_unknown_routes() {
    let prom = support::prom::shared();
    let dir = template_dir(&[("t.yaml", error_rate_template("error-rate", "inconclusive"))]);
    let server = ServeProcess::start(&[
        "--prometheus",
        &prom.url,
        "--templates",
        path_str(dir.path()),
        "--readyz-prometheus",
    ]);
    assert_eq!(
        get(&format!("{}/healthz", server.url)),
        (200, "ok\n".into())
    );
    let (status, text) = get(&format!("{}/readyz", server.url));
    assert_eq!((status, text.as_str()), (200, "ready: 1 template loaded\n"));

    let client = client();
    runtime().block_on(async {
        let url = format!("{}/flagger/v1/check", server.url);
        for service in ["healthy", "bad", "bad"] {
            post(
                &client,
                &url,
                flagger_payload(
                    "Progressing",
                    &[("template", "error-rate"), ("args.service", service)],
                ),
                false,
            )
            .await;
        }
        post(&client, &url, "{".into(), false).await;
        let resp = client.get(&url).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 405);
        assert_eq!(resp.headers()["allow"], "POST");
        let body = resp.text().await.unwrap();
        assert!(
            body.contains("/flagger/v1/check takes POST, not GET"),
            "{body}"
        );
        let resp = client
            .get(format!("{}/nope?token=x", server.url))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 404);
        assert!(resp.text().await.unwrap().contains("/flagger/v1/check"));
    });

    let (status, text) = get(&format!("{}/metrics", server.url));
    assert_eq!(status, 200);
    let check = |series: &str, want: f64| {
        assert_eq!(metric_value(&text, series), want, "{series}\n{text}");
    };
    check(
        r#"rollgate_http_requests_total{endpoint="/flagger/v1/check",status="200"}"#,
        1.0,
    );
    // Three analyses of guard + query each: six instant queries, all answered.
    check(
        r#"rollgate_prometheus_queries_total{kind="instant",outcome="ok"}"#,
        6.0,
    );
    check(
        r#"rollgate_http_requests_total{endpoint="/flagger/v1/check",status="412"}"#,
        2.0,
    );
    check(
        r#"rollgate_http_requests_total{endpoint="/flagger/v1/check",status="400"}"#,
        1.0,
    );
    check(
        r#"rollgate_http_requests_total{endpoint="/flagger/v1/check",status="405"}"#,
        1.0,
    );
    check(
        r#"rollgate_http_requests_total{endpoint="other",status="404"}"#,
        1.0,
    );
    check(
        r#"rollgate_http_requests_total{endpoint="/readyz",status="200"}"#,
        1.0,
    );
    check(
        r#"rollgate_http_request_duration_seconds_count{endpoint="/flagger/v1/check",status="412"}"#,
        2.0,
    );
    check(
        r#"rollgate_verdicts_total{surface="flagger_check",phase="Failed"}"#,
        2.0,
    );
    check(
        r#"rollgate_verdicts_total{surface="flagger_check",phase="Successful"}"#,
        1.0,
    );
    check(
        r#"rollgate_measurements_total{kind="query",phase="Failed"}"#,
        2.0,
    );
    check(
        r#"rollgate_measurement_duration_seconds_count{kind="query"}"#,
        3.0,
    );
    check("rollgate_templates_loaded", 1.0);
    check("rollgate_http_requests_in_flight", 1.0);
    // The query string of the 404 is not logged.
    assert!(!server.logs().join("\n").contains("token=x"));

    // Readiness follows Prometheus when asked to.
    let down = ServeProcess::start(&["--prometheus", &closed_port(), "--readyz-prometheus"]);
    let (status, text) = get(&format!("{}/readyz", down.url));
    assert_eq!(status, 503, "{text}");
    assert!(text.starts_with("Prometheus is not answering"), "{text}");
    assert_eq!(get(&format!("{}/healthz", down.url)).0, 200);
}

#[test]
fn tls_from_certificate_files() {
    let stub = Stub::start(Mode::Fixed(one_sample()));
    let ck =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.key_pair.serialize_pem()).unwrap();
    let server = ServeProcess::start(&[
        "--prometheus",
        &stub.url,
        "--tls-cert",
        path_str(&cert),
        "--tls-key",
        path_str(&key),
    ]);
    assert!(server.url.starts_with("https://"));
    let https = reqwest::Client::builder()
        .no_proxy()
        .add_root_certificate(reqwest::Certificate::from_pem(ck.cert.pem().as_bytes()).unwrap())
        .build()
        .unwrap();
    runtime().block_on(async {
        let (status, text, _) = post(
            &https,
            &format!("{}/flagger/v1/check", server.url),
            inline_check(),
            false,
        )
        .await;
        assert_eq!(status, 200, "{text}");
        // Plain HTTP to the TLS port is not served.
        let plain = server.url.replace("https://", "http://");
        assert!(client()
            .get(format!("{plain}/healthz"))
            .send()
            .await
            .is_err());
    });
}

#[test]
fn startup_problems_are_named_and_exit_1() {
    let good = error_rate_template("error-rate", "inconclusive");
    let dir = template_dir(&[
        ("good.yaml", good.clone()),
        ("broken.yaml", good.replace("error-rate", "other").replace("noData: inconclusive", "noData: maybe").replace("    - name: service\n", "    - name: service\n      value: web\n")),
        ("typo.yaml", "apiVersion: argoproj.io/v1alpha1\nkind: AnalysisTemplate\nmetadata: {name: t}\nspec: {metrcs: []}\n".into()),
    ]);
    let (status, logs) = ServeProcess::try_start(&["--templates", path_str(dir.path())], &[])
        .err()
        .expect("must not start");
    assert_eq!(status.and_then(|s| s.code()), Some(1));
    let logs = logs.join("\n");
    assert!(
        logs.contains("broken.yaml") && logs.contains("noData"),
        "{logs}"
    );
    assert!(
        logs.contains("typo.yaml") && logs.contains("spec.metrics"),
        "{logs}"
    );
    assert!(!logs.contains("good.yaml:"), "{logs}");

    for (args, needle) in [
        (
            vec!["--auth-token-file", "/nonexistent/token"],
            "auth token file",
        ),
        (
            vec![
                "--tls-cert",
                "/nonexistent/c",
                "--tls-key",
                "/nonexistent/k",
            ],
            "certificate file",
        ),
        (vec!["--readyz-prometheus"], "--readyz-prometheus needs"),
        (vec!["--prometheus", "not a url"], "--prometheus"),
        (vec!["--deadline", "0s"], "--deadline"),
    ] {
        let (status, logs) = ServeProcess::try_start(&args, &[])
            .err()
            .expect("must not start");
        assert_eq!(status.and_then(|s| s.code()), Some(1), "{args:?}");
        assert!(logs.join("\n").contains(needle), "{args:?}: {logs:?}");
    }
    // A missing value is a usage error from the argument parser: 64, as everywhere.
    let out = std::process::Command::new(crate::support::rollgate_bin())
        .args(["serve", "--listen"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
}

#[test]
fn sighup_reloads_templates_and_keeps_the_old_set_when_the_new_one_is_broken() {
    let dir = template_dir(&[("a.yaml", error_rate_template("error-rate", "inconclusive"))]);
    let (server, _tokens, token) = server_with_token(dir.path(), "one", &[]);
    let url = format!("{}/flagger/v1/check", server.url);
    let check = move |template: &'static str, token: &'static str| {
        let url = url.clone();
        async move { check_status(&url, template, token).await }
    };
    let rt = runtime();
    // Requests keep flowing through every reload; none may fail.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let background = {
        let stop = stop.clone();
        let sent = sent.clone();
        let check = check.clone();
        rt.spawn(async move {
            let mut statuses = Vec::new();
            for _ in 0..2000 {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                statuses.push(check("error-rate", "one").await);
                sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            statuses
        })
    };

    std::fs::write(dir.path().join("b.yaml"), "kind: AnalysisTemplate\nspec: [").unwrap();
    server.signal("HUP");
    let failed = server
        .wait_for_log(Duration::from_secs(10), is_reload_failure)
        .expect("the failed reload is logged");
    assert_eq!(failed["@level"], "error");
    assert!(
        failed["error"].as_str().unwrap().contains("b.yaml"),
        "{failed}"
    );
    assert_eq!(failed["kept_templates"], 1);
    assert_eq!(rt.block_on(check("error-rate", "one")), 200);

    std::fs::write(
        dir.path().join("b.yaml"),
        error_rate_template("error-rate-b", "inconclusive"),
    )
    .unwrap();
    std::fs::write(&token, "two\n").unwrap();
    server.signal("HUP");
    let started = Instant::now();
    while server
        .log_json()
        .iter()
        .filter(|v| v["@message"] == "reload done")
        .count()
        < 2
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the second reload did not finish"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(server
        .log_json()
        .iter()
        .any(|v| v["@message"] == "templates reloaded"));
    assert_eq!(rt.block_on(check("error-rate-b", "two")), 200);
    assert_eq!(rt.block_on(check("error-rate", "two")), 200);
    assert_eq!(
        rt.block_on(check("error-rate", "one")),
        401,
        "the rotated token replaces the old one"
    );

    // The background requests run while the runtime is driven: give them time to pass the
    // reloads (bounded), then stop them.
    rt.block_on(async {
        let until = Instant::now() + Duration::from_secs(10);
        while sent.load(std::sync::atomic::Ordering::Relaxed) < 20 && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let statuses = rt.block_on(background).unwrap();
    assert!(statuses.len() > 5, "{} background requests", statuses.len());
    // The token rotates mid-stream: only 200 before it and 401 after it are acceptable.
    let first_401 = statuses
        .iter()
        .position(|s| *s == 401)
        .unwrap_or(statuses.len());
    assert!(
        statuses[..first_401].iter().all(|s| *s == 200),
        "{statuses:?}"
    );
    assert!(
        statuses[first_401..].iter().all(|s| *s == 401),
        "{statuses:?}"
    );

    let (_, metrics) = get(&format!("{}/metrics", server.url));
    assert_eq!(
        metric_value(
            &metrics,
            r#"rollgate_template_reloads_total{result="error"}"#
        ),
        1.0
    );
    assert_eq!(
        metric_value(&metrics, r#"rollgate_template_reloads_total{result="ok"}"#),
        1.0
    );
    assert_eq!(metric_value(&metrics, "rollgate_templates_loaded"), 2.0);
}

#[test]
fn sigterm_lets_a_request_in_flight_finish_and_refuses_new_ones() {
    let stub = Stub::start(Mode::Slow(
        Duration::from_secs(2),
        Box::new(Mode::Fixed(one_sample())),
    ));
    let mut server = ServeProcess::start(&["--prometheus", &stub.url]);
    let addr = server.url.trim_start_matches("http://").to_string();
    let rt = runtime();
    let client = client();
    let url = format!("{}/flagger/v1/check", server.url);
    let in_flight = rt.spawn(async move { post(&client, &url, inline_check(), false).await });
    // Wait until the query reached the stub, then stop the server.
    let started = Instant::now();
    while stub.requests() == 0 && started.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(stub.requests(), 1);
    server.signal("TERM");
    server
        .wait_for_log(Duration::from_secs(5), |v| {
            v["@message"]
                .as_str()
                .is_some_and(|m| m.starts_with("shutting down"))
        })
        .expect("shutdown logged");
    assert!(
        TcpStream::connect(&addr).is_err(),
        "still accepting after SIGTERM"
    );
    let (status, text, took) = rt.block_on(in_flight).unwrap();
    assert_eq!(status, 200, "{text}");
    assert!(text.starts_with("Successful: inline: "), "{text}");
    assert!(took >= Duration::from_secs(2), "{took:?}");
    let exit = server.wait_exit(Duration::from_secs(5)).expect("exited");
    assert_eq!(exit.code(), Some(0));
    assert!(server
        .log_json()
        .iter()
        .any(|v| v["@message"] == "shut down"));
}

#[test]
fn sigterm_cuts_requests_that_outlive_the_grace_period() {
    let stub = Stub::start(Mode::Slow(
        Duration::from_secs(30),
        Box::new(Mode::Fixed(one_sample())),
    ));
    let mut server = ServeProcess::start(&["--prometheus", &stub.url, "--shutdown-grace", "1s"]);
    let rt = runtime();
    let client = client();
    let url = format!("{}/flagger/v1/check", server.url);
    let in_flight = rt.spawn(async move {
        client
            .post(&url)
            .body(inline_check())
            .send()
            .await
            .map(|r| r.status().as_u16())
    });
    let started = Instant::now();
    while stub.requests() == 0 && started.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let signalled = Instant::now();
    server.signal("TERM");
    let exit = server.wait_exit(Duration::from_secs(5)).expect("exited");
    assert_eq!(exit.code(), Some(0));
    assert!(
        signalled.elapsed() < Duration::from_secs(3),
        "{:?}",
        signalled.elapsed()
    );
    assert!(
        rt.block_on(in_flight).unwrap().is_err(),
        "the cut request has no answer"
    );
    assert!(server.log_json().iter().any(|v| v["@message"]
        .as_str()
        .is_some_and(|m| m.starts_with("grace period over"))));
}

#[test]
fn a_body_that_does_not_arrive_in_time_gets_408() {
    use std::io::{Read, Write};
    let server = ServeProcess::start(&["--prometheus", &closed_port(), "--request-timeout", "1s"]);
    let addr = server.url.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let started = Instant::now();
    s.write_all(
        b"POST /flagger/v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"name\":",
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert!(out.starts_with("HTTP/1.1 408"), "{out}");
    assert!(out.contains("did not arrive within 1s"), "{out}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

/// Writes `files` into `dir` as the kubelet updates a mounted ConfigMap: into a new hidden
/// directory, then `..data` is swapped to it atomically and each key is a symlink through it.
fn configmap_update(dir: &std::path::Path, generation: u32, files: &[(&str, String)]) {
    use std::os::unix::fs::symlink;
    let version = format!("..2026_11_29_{generation:04}");
    std::fs::create_dir(dir.join(&version)).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(&version).join(name), text).unwrap();
    }
    let _ = std::fs::remove_file(dir.join("..data_tmp"));
    symlink(&version, dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    for (name, _) in files {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            symlink(format!("..data/{name}"), link).unwrap();
        }
    }
}

#[test]
fn reload_interval_picks_up_configmap_and_token_changes_without_a_signal() {
    let dir = tempfile::tempdir().unwrap();
    let a = ("a.yaml", error_rate_template("error-rate", "inconclusive"));
    configmap_update(dir.path(), 1, std::slice::from_ref(&a));
    let (server, _tokens, token) = server_with_token(
        dir.path(),
        "token-one-7f3a",
        &["--reload-interval", "100ms"],
    );
    let url = format!("{}/flagger/v1/check", server.url);
    let rt = runtime();
    let check = |template: &str, token: &str| rt.block_on(check_status(&url, template, token));
    let wait_for = |what: &str, template: &str, token: &str, status: u16| {
        let started = Instant::now();
        while check(template, token) != status {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{what}: not seen within 10 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let failures = || {
        server
            .log_json()
            .iter()
            .filter(|v| is_reload_failure(v))
            .count()
    };
    assert_eq!(check("error-rate", "token-one-7f3a"), 200);
    assert_eq!(
        check("error-rate-b", "token-one-7f3a"),
        422,
        "not loaded yet"
    );

    let b = (
        "b.yaml",
        error_rate_template("error-rate-b", "inconclusive"),
    );
    configmap_update(dir.path(), 2, &[a.clone(), b.clone()]);
    wait_for(
        "a template added to the ConfigMap",
        "error-rate-b",
        "token-one-7f3a",
        200,
    );

    let broken = ("c.yaml", "kind: AnalysisTemplate\nspec: [".to_string());
    configmap_update(dir.path(), 3, &[a, b, broken]);
    let failed = server
        .wait_for_log(Duration::from_secs(10), is_reload_failure)
        .expect("the failed reload is logged");
    assert!(
        failed["error"].as_str().unwrap().contains("c.yaml"),
        "{failed}"
    );
    assert_eq!(
        check("error-rate-b", "token-one-7f3a"),
        200,
        "the old set stays"
    );
    // A broken change is tried once, not at every interval.
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(failures(), 1);

    std::fs::write(&token, "token-two-91c2").unwrap();
    wait_for("the rotated token", "error-rate", "token-two-91c2", 200);
    assert_eq!(check("error-rate", "token-one-7f3a"), 401);
    assert!(
        !server
            .logs()
            .iter()
            .any(|l| l.contains("token-one-7f3a") || l.contains("token-two-91c2")),
        "no token in the logs"
    );
}

#[test]
fn a_reload_interval_below_100ms_is_refused() {
    for interval in ["0s", "1ms", "99ms"] {
        let (status, logs) = ServeProcess::try_start(&["--reload-interval", interval], &[])
            .err()
            .expect("must not start");
        assert_eq!(status.and_then(|s| s.code()), Some(1), "{interval}");
        assert!(
            logs.join("\n")
                .contains("--reload-interval must be at least 100ms"),
            "{interval}: {logs:?}"
        );
    }
    // Not a duration: the argument parser names the flag and the value.
    let out = std::process::Command::new(crate::support::rollgate_bin())
        .args(["serve", "--reload-interval", "often"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--reload-interval") && stderr.contains("\"often\" is not a duration"),
        "{stderr}"
    );
}

/// A server on the shared Prometheus with the templates of `templates`, requiring `token` from
/// a token file of its own (returned with its directory, which must outlive the server).
fn server_with_token(
    templates: &std::path::Path,
    token: &str,
    extra: &[&str],
) -> (ServeProcess, tempfile::TempDir, std::path::PathBuf) {
    let prom = support::prom::shared();
    let tokens = tempfile::tempdir().unwrap();
    let file = tokens.path().join("token");
    std::fs::write(&file, token).unwrap();
    let mut args = vec![
        "--prometheus",
        &prom.url,
        "--templates",
        path_str(templates),
        "--auth-token-file",
        path_str(&file),
    ];
    args.extend_from_slice(extra);
    (ServeProcess::start(&args), tokens, file)
}

/// The status of a Flagger check naming `template` for the healthy service, sent with `token`.
async fn check_status(url: &str, template: &str, token: &str) -> u16 {
    let body = flagger_payload(
        "Progressing",
        &[("template", template), ("args.service", "healthy")],
    );
    client()
        .post(url)
        .header("Authorization", format!("Bearer {token}"))
        .body(body)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Whether a log line says a template reload failed.
fn is_reload_failure(line: &serde_json::Value) -> bool {
    line["@message"]
        .as_str()
        .is_some_and(|m| m.starts_with("template reload failed"))
}

#[test]
fn slow_inline_specs_do_not_hold_the_workers_that_answer_probes() {
    // A valid 16 kB query the parser needs about 0.3 s for (long operator chains are quadratic).
    let query = vec!["1"; 8_000].join("+");
    let body = flagger_payload(
        "Progressing",
        &[("spec", &format!("query: '{query}'\nnoData: fail"))],
    );
    let server = ServeProcess::start(&["--prometheus", &closed_port()]);
    let check_url = format!("{}/flagger/v1/check", server.url);
    let health_url = format!("{}/healthz", server.url);
    let rt = runtime();
    let slowest_probe = rt.block_on(async {
        let slow: Vec<_> = (0..10)
            .map(|_| {
                let (url, body) = (check_url.clone(), body.clone());
                tokio::spawn(async move { post(&client(), &url, body, false).await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut slowest = Duration::ZERO;
        for _ in 0..10 {
            let started = Instant::now();
            let resp = client().get(&health_url).send().await.unwrap();
            assert_eq!(resp.status().as_u16(), 200);
            slowest = slowest.max(started.elapsed());
        }
        for request in slow {
            // Parsed, then judged: Prometheus is a closed port, so Error (503).
            let (status, text, _) = request.await.unwrap();
            assert_eq!(status, 503, "{text}");
        }
        slowest
    });
    assert!(
        slowest_probe < Duration::from_millis(500),
        "/healthz took {slowest_probe:?} while specs were parsed"
    );
}
