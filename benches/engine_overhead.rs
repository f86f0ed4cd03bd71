//! Engine overhead against a real Prometheus, interleaved in one run, for two metric kinds,
//! each versus the same queries sent concurrently with plain reqwest (the engine sends them
//! together too). Prints both medians and their ratio.
//!
//! - `query` with its guard (two queries): target <= 1.10;
//! - `compare`, ratio form (four count queries and the exact test): target <= 1.2.
//!
//! `cargo bench --bench engine_overhead`

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

#[path = "common/mod.rs"]
mod common;
#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use chrono::{DateTime, TimeZone, Utc};
use rollgate::engine::{AddressPolicy, Engine, EvalOptions};
use rollgate::measurement::Phase;
use rollgate::prometheus::{Backend, Client};
use rollgate::spec::Metric;
use serde_json::{json, Value};
use support::prom::PromServer;
use support::scenarios::{CMP_HEALTHY_CANARY, CMP_HEALTHY_STABLE, HEALTHY};

const ROUNDS: usize = 300;

fn main() {
    let prom = support::prom::shared();
    let at = Utc.timestamp_opt(prom.base, 0).single().expect("base time");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");

    let (ratio_q, guard_q) = (HEALTHY.ratio_query("5m"), HEALTHY.total_query("5m"));
    let query_spec = json!({
        "prometheus": {"address": prom.url},
        "query": ratio_q,
        "minRequests": {"query": guard_q, "count": 300},
        "noData": "inconclusive"
    });
    let (c, s) = (&CMP_HEALTHY_CANARY, &CMP_HEALTHY_STABLE);
    let counts = [
        c.bad_query("10m"),
        c.total_query("10m"),
        s.bad_query("10m"),
        s.total_query("10m"),
    ];
    let compare_spec = json!({
        "prometheus": {"address": prom.url},
        "compare": {
            "canary": {"bad": counts[0], "total": counts[1]},
            "stable": {"bad": counts[2], "total": counts[3]},
            "maxIncrease": 0.2, "margin": 0.001, "minRequests": 500
        },
        "noData": "inconclusive"
    });
    let cases = [
        ("query + guard", query_spec, vec![guard_q, ratio_q], 1.10),
        ("compare (ratio form)", compare_spec, counts.to_vec(), 1.2),
    ];
    for (label, spec, queries, target) in cases {
        let (e, p) = runtime.block_on(overhead(prom, at, spec, &queries));
        println!(
            "engine_overhead: {label}, {ROUNDS} rounds against Prometheus at {}",
            prom.url
        );
        println!(
            "  rollgate engine measure : median {:>9.3} ms",
            e.as_secs_f64() * 1e3
        );
        println!(
            "  plain reqwest, {} queries: median {:>8.3} ms",
            queries.len(),
            p.as_secs_f64() * 1e3
        );
        println!(
            "  ratio engine / plain    : {:.3} (target <= {target})",
            e.as_secs_f64() / p.as_secs_f64()
        );
    }
}

/// Median times of the engine measuring `spec` and of `queries` sent concurrently by hand.
async fn overhead(
    prom: &PromServer,
    at: DateTime<Utc>,
    spec: Value,
    queries: &[String],
) -> (Duration, Duration) {
    let metric = Metric::from_value(
        &json!({"name": "bench", "provider": {"plugin": {"rollgate/analysis": spec}}}),
        "",
    )
    .expect("metric");
    let engine = Engine::new(Backend::Live(Client::new()), AddressPolicy::default());
    let opts = EvalOptions {
        at: Some(at),
        ..EvalOptions::default()
    };
    let plain = reqwest::Client::new();
    let url = format!("{}/api/v1/query", prom.url);
    let time = prom.base.to_string();
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
            let v: Value = serde_json::from_slice(&body).expect("json");
            assert_eq!(v["status"], "success");
        }
    };
    let plain_round = || futures::future::join_all(queries.iter().map(|q| plain_query(q)));
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
    (common::median_duration(e), common::median_duration(p))
}
