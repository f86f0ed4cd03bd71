//! Compare overhead: a `compare` metric (ratio form: four count queries and the exact test),
//! measured by the engine against a real Prometheus, versus the same four queries sent
//! concurrently with plain reqwest, interleaved in one run.
//! Prints both medians and their ratio (target: <= 1.2).
//!
//! `cargo bench --bench compare_overhead`

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use rollgate::engine::{AddressPolicy, Engine, EvalOptions};
use rollgate::measurement::Phase;
use rollgate::prometheus::{Backend, Client};
use rollgate::spec::Metric;
use serde_json::json;
use support::scenarios::{CMP_HEALTHY_CANARY as CANARY, CMP_HEALTHY_STABLE as STABLE};

const ROUNDS: usize = 300;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let prom = support::prom::shared();
    let at = Utc.timestamp_opt(prom.base, 0).single().expect("base time");
    let queries = [
        CANARY.bad_query("10m"),
        CANARY.total_query("10m"),
        STABLE.bad_query("10m"),
        STABLE.total_query("10m"),
    ];
    let metric = Metric::from_value(
        &json!({
            "name": "bench",
            "provider": {"plugin": {"rollgate/analysis": {
                "prometheus": {"address": prom.url},
                "compare": {
                    "canary": {"bad": queries[0], "total": queries[1]},
                    "stable": {"bad": queries[2], "total": queries[3]},
                    "maxIncrease": 0.2, "margin": 0.001, "minRequests": 500
                },
                "noData": "inconclusive"
            }}}
        }),
        "",
    )
    .expect("metric");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let engine = Engine::new(Backend::Live(Client::new()), AddressPolicy::default());
    let plain = reqwest::Client::new();
    let url = format!("{}/api/v1/query", prom.url);
    let time = prom.base.to_string();

    let (engine_times, plain_times) = runtime.block_on(async {
        let opts = EvalOptions {
            at: Some(at),
            ..EvalOptions::default()
        };
        // The engine sends the four count queries together; so does the baseline.
        let plain_query = |q: &str| {
            let request = plain
                .post(&url)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(format!("query={}&time={time}", support::prom::urlencode(q)));
            async move {
                let body = request
                    .send()
                    .await
                    .expect("send")
                    .bytes()
                    .await
                    .expect("body");
                let v: serde_json::Value = serde_json::from_slice(&body).expect("json");
                assert_eq!(v["status"], "success");
            }
        };
        let plain_round = || async {
            futures::join!(
                plain_query(&queries[0]),
                plain_query(&queries[1]),
                plain_query(&queries[2]),
                plain_query(&queries[3])
            );
        };
        // Warm up both paths (connections, caches).
        for _ in 0..20 {
            assert_eq!(
                engine.measure(&metric, &opts).await.phase,
                Phase::Successful
            );
            plain_round().await;
        }
        let mut e = Vec::with_capacity(ROUNDS);
        let mut p = Vec::with_capacity(ROUNDS);
        for _ in 0..ROUNDS {
            let t = Instant::now();
            let m = engine.measure(&metric, &opts).await;
            e.push(t.elapsed());
            assert_eq!(m.phase, Phase::Successful);
            let t = Instant::now();
            plain_round().await;
            p.push(t.elapsed());
        }
        (e, p)
    });
    let (e, p) = (median(engine_times), median(plain_times));
    println!(
        "compare_overhead: {ROUNDS} rounds, compare (ratio form, 4 queries) against Prometheus at {}",
        prom.url
    );
    println!(
        "  rollgate engine measure : median {:>9.3} ms",
        e.as_secs_f64() * 1e3
    );
    println!(
        "  plain reqwest, 4 queries: median {:>9.3} ms",
        p.as_secs_f64() * 1e3
    );
    println!(
        "  ratio engine / plain    : {:.3} (target <= 1.2)",
        e.as_secs_f64() / p.as_secs_f64()
    );
}
