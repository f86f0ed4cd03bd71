//! A bounded load test of `rollgate serve`: 64 concurrent connections for 20 s against
//! `/flagger/v1/check` with a stub-backed analysis (a fake Prometheus answering at once).
//! Every request must get its 200; the figures are printed.
//!
//! `cargo test --test serve_load -- --nocapture`

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

use serde_json::json;
use serve_common::{flagger_payload, ServeProcess};
use support::stub::{Mode, Stub};

const CONNECTIONS: usize = 64;
const DURATION: Duration = Duration::from_secs(20);
/// Upper bound on requests per connection, whatever the speed.
const MAX_PER_CONNECTION: usize = 100_000;

#[test]
fn sixty_four_connections_for_twenty_seconds_without_an_error() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let body = json!({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {}, "value": [now, "0.001"]}
    ]}})
    .to_string();
    let stub = Stub::start(Mode::Fixed(body));
    // Access logs at info would measure the log pipe; they are covered elsewhere.
    let server = ServeProcess::start(&[
        "--prometheus",
        &stub.url,
        "--log-level",
        "warn,rollgate::serve=info,rollgate::serve::access=warn",
    ]);
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
                let url = url.clone();
                let payload = payload.clone();
                tokio::spawn(async move {
                    let mut latencies = Vec::new();
                    let mut failures = Vec::new();
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
        let mut latencies = Vec::new();
        let mut failures = Vec::new();
        for t in tasks {
            let (l, f) = t.await.unwrap();
            latencies.extend(l);
            failures.extend(f);
        }
        (latencies, failures, started.elapsed())
    });
    let mut sorted = latencies.clone();
    sorted.sort();
    let pct = |p: f64| sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)];
    println!(
        "serve load: {} connections, {:.1} s: {} requests ok, {} failed, {:.0} req/s, p50 {:?}, p99 {:?}, max {:?}",
        CONNECTIONS,
        elapsed.as_secs_f64(),
        sorted.len(),
        failures.len(),
        sorted.len() as f64 / elapsed.as_secs_f64(),
        pct(0.50),
        pct(0.99),
        sorted.last().unwrap()
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
    // The server is still healthy afterwards.
    let logs = server.logs().join("\n");
    assert!(!logs.contains("\"@level\":\"error\""), "{logs}");
}
