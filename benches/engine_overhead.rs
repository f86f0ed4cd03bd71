//! Engine overhead: a `query` metric with its guard, measured by the engine against a real
//! Prometheus, versus the same two queries sent concurrently with plain reqwest, interleaved in
//! one run.
//! Prints both medians and their ratio (target: <= 1.10).
//!
//! `cargo bench --bench engine_overhead`

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use rollgate::engine::{AddressPolicy, Engine, EvalOptions};
use rollgate::measurement::Phase;
use rollgate::prometheus::{Backend, Client};
use rollgate::spec::Metric;
use serde_json::json;
use support::scenarios::HEALTHY;

const ROUNDS: usize = 300;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let prom = support::prom::shared();
    let at = Utc.timestamp_opt(prom.base, 0).single().expect("base time");
    let ratio_q = HEALTHY.ratio_query("5m");
    let guard_q = HEALTHY.total_query("5m");
    let metric = Metric::from_value(
        &json!({
            "name": "bench",
            "successCondition": "result[0] < 0.01",
            "provider": {"plugin": {"rollgate/analysis": {
                "prometheus": {"address": prom.url},
                "query": ratio_q,
                "minRequests": {"query": guard_q, "count": 300},
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
        // The engine sends the guard and the query together; so does the baseline.
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
            futures::join!(plain_query(&guard_q), plain_query(&ratio_q));
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
        "engine_overhead: {ROUNDS} rounds, guard + query against Prometheus at {}",
        prom.url
    );
    println!(
        "  rollgate engine measure : median {:>9.3} ms",
        e.as_secs_f64() * 1e3
    );
    println!(
        "  plain reqwest, 2 queries: median {:>9.3} ms",
        p.as_secs_f64() * 1e3
    );
    println!(
        "  ratio engine / plain    : {:.3} (target <= 1.10)",
        e.as_secs_f64() / p.as_secs_f64()
    );
}
