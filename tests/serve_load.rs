//! A bounded load test of `rollgate serve`: 32 keep-alive connections for 8 s against
//! `/flagger/v1/check` with the queries answered by a stand-in Prometheus at once, the access
//! log on. Every request gets its 200, and after a SIGTERM every one of them has its access-log
//! line: the log writer drops none under load and writes out its queue before the process ends.
//!
//! `cargo test --release --test serve_load -- --nocapture` prints the figures.

// Test code may unwrap, panic and cast; its helpers are `pub` for the modules sharing them.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss,
    unreachable_pub
)]

mod serve_common;
mod support;

use std::time::{Duration, Instant};

use serve_common::{flagger_payload, ServeProcess};
use support::stub::{vector_body, Mode, Stub};

const CONNECTIONS: usize = 32;
const DURATION: Duration = Duration::from_secs(8);
/// Upper bound on requests per connection, whatever the speed.
const MAX_PER_CONNECTION: usize = 100_000;

#[test]
fn every_check_under_load_is_answered_and_logged() {
    let stub = Stub::start(Mode::Fixed(vector_body("0.001")));
    let mut server = ServeProcess::start(&["--prometheus", &stub.url, "--log-level", "info"]);
    let payload = flagger_payload(
        "Progressing",
        &[
            (
                "spec",
                "query: sum(rate(http_requests_total[5m]))\nnoData: fail\n",
            ),
            ("successCondition", "result[0] < 0.01"),
        ],
    );
    let url = format!("{}/flagger/v1/check", server.url);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (latencies, failures, elapsed) = runtime.block_on(async {
        let started = Instant::now();
        let tasks: Vec<_> = (0..CONNECTIONS)
            .map(|_| {
                // One client per task: one connection each, kept alive.
                let client = reqwest::Client::builder()
                    .no_proxy()
                    .pool_max_idle_per_host(1)
                    .timeout(Duration::from_secs(10))
                    .build()
                    .unwrap();
                let (url, payload) = (url.clone(), payload.clone());
                tokio::spawn(async move {
                    let (mut latencies, mut failures) = (Vec::new(), Vec::new());
                    for _ in 0..MAX_PER_CONNECTION {
                        if started.elapsed() >= DURATION {
                            break;
                        }
                        let t = Instant::now();
                        match client.post(&url).body(payload.clone()).send().await {
                            Ok(resp) => {
                                let status = resp.status().as_u16();
                                let text = resp.text().await.unwrap_or_default();
                                if status == 200 {
                                    latencies.push(t.elapsed());
                                } else {
                                    failures.push(format!("{status} {text}"));
                                }
                            }
                            Err(e) => failures.push(e.to_string()),
                        }
                    }
                    (latencies, failures)
                })
            })
            .collect();
        let (mut latencies, mut failures) = (Vec::new(), Vec::new());
        for t in tasks {
            let (l, f) = t.await.unwrap();
            latencies.extend(l);
            failures.extend(f);
        }
        (latencies, failures, started.elapsed())
    });
    let mut sorted = latencies;
    sorted.sort();
    let pct = |p: f64| sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)];
    println!(
        "serve load: {CONNECTIONS} connections, {:.1} s: {} ok, {} failed, {:.0} req/s, p50 {:?}, p99 {:?}",
        elapsed.as_secs_f64(),
        sorted.len(),
        failures.len(),
        sorted.len() as f64 / elapsed.as_secs_f64(),
        pct(0.50),
        pct(0.99),
    );
    assert!(
        failures.is_empty(),
        "{} failures, first: {:?}",
        failures.len(),
        failures.first()
    );
    assert!(
        sorted.len() >= CONNECTIONS * 10,
        "only {} requests",
        sorted.len()
    );
    assert!(
        stub.requests() >= sorted.len(),
        "every check queried the stub"
    );

    server.signal("TERM");
    let status = server
        .wait_exit(Duration::from_secs(15))
        .expect("exits after SIGTERM");
    assert!(status.success(), "{status:?}");
    // The pipe is read by a thread of the harness: give it a bounded moment to catch up.
    let logged = || {
        server
            .log_json()
            .iter()
            .filter(|v| v["@message"] == "request" && v["path"] == "/flagger/v1/check")
            .count()
    };
    let started = Instant::now();
    while logged() < sorted.len() && started.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(logged(), sorted.len(), "one access-log line per check");
    let logs = server.logs().join("\n");
    assert!(!logs.contains("\"@level\":\"error\""), "{logs}");
}
