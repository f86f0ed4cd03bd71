//! `fleet plan` scaling: `Engine::fleet_plan` (the gate's queries and classification, then the
//! target matrix) over N and 10 x N targets in the same run, answered by a scripted stub so that
//! only rollgate's own work is timed (decoding, classification, cohorts, the per-target states).
//! Linear work gives a time ratio near 10; a list scan per target (as `state_of` once was) gives
//! one near 100.
//!
//! `cargo bench --bench fleet_plan` (FLEET_PLAN_SMALL=1000 targets, FLEET_PLAN_ROUNDS=7).
//! The fleet: 20 cohorts over the first 90 % of the inventory (the rest in no cohort, whose
//! states the gate's message lists too), `holdFor: 10m`; every 97th target a straggler, every
//! 53rd not held, every 1009th silent.

// Test code may unwrap, panic and cast; its helpers are `pub` for the modules sharing them.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss,
    unreachable_pub
)]

#[path = "common/mod.rs"]
mod common;
#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use rollgate::engine::{AddressPolicy, Engine, EvalOptions};
use rollgate::prometheus::{Backend, Client};
use rollgate::spec::Metric;
use serde_json::json;
use support::stub::{json as reply, Stub, SAMPLE_TIME};

const NEW: &str = "sha256:35c1e11408120e3942e771102f0172aee75829d3a87f9f5909d53b5f40bfc814";
const OLD: &str = "sha256:513e5258ccf337657a74bcf99c6689575996caa51a1c92392ca920cc72be477a";
/// Steps of a 10m `holdFor` window (step 30s).
const HELD_STEPS: u32 = 20;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn name(i: usize) -> String {
    format!("edge-{i:05}")
}

/// The answers of a fleet of `n` targets, by query.
struct Answers {
    versions: String,
    held_steps: String,
    last_bad: String,
}

fn vector(items: Vec<String>) -> String {
    format!(
        r#"{{"status":"success","data":{{"resultType":"vector","result":[{}]}}}}"#,
        items.join(",")
    )
}

fn answers(n: usize) -> Answers {
    let sample = |metric: String, value: String| {
        format!(r#"{{"metric":{{{metric}}},"value":[{SAMPLE_TIME},"{value}"]}}"#)
    };
    let mut versions = Vec::new();
    let mut steps = Vec::new();
    let mut bad = Vec::new();
    for i in (0..n).filter(|i| i % 1009 != 500) {
        let c = name(i);
        let pod = |digest: &str, count: u32| {
            sample(
                format!(r#""cluster":"{c}","image_id":"docker.io/acme/agent@{digest}""#),
                count.to_string(),
            )
        };
        if i % 97 == 13 {
            versions.push(pod(NEW, 29));
            versions.push(pod(OLD, 1));
        } else {
            versions.push(pod(NEW, 30));
        }
        let held = if i % 53 == 7 {
            HELD_STEPS / 2
        } else {
            HELD_STEPS
        };
        steps.push(sample(format!(r#""cluster":"{c}""#), held.to_string()));
        if held < HELD_STEPS || i % 97 == 13 {
            bad.push(sample(
                format!(r#""cluster":"{c}""#),
                (SAMPLE_TIME - 300).to_string(),
            ));
        }
    }
    Answers {
        versions: vector(versions),
        held_steps: vector(steps),
        last_bad: vector(bad),
    }
}

fn metric(n: usize, url: &str) -> Metric {
    let inventory: Vec<String> = (0..n).map(name).collect();
    let selected = n * 9 / 10;
    let per = selected.div_ceil(20).max(1);
    let cohorts: Vec<serde_json::Value> = inventory[..selected]
        .chunks(per)
        .enumerate()
        .map(|(i, c)| json!({"name": format!("cohort-{i:02}"), "targets": c, "maxConcurrent": 50}))
        .collect();
    Metric::from_value(
        &json!({
            "name": "fleet-plan-scale",
            "provider": {"plugin": {"rollgate/analysis": {
                "prometheus": {"address": url, "timeout": "60s"},
                "fleet": {
                    "selector": "kube_pod_container_info{namespace=\"m\", container=\"agent\"}",
                    "version": {"expected": NEW},
                    "expectedTargets": inventory,
                    "ignoreTerminalPods": false,
                    "cohorts": cohorts,
                    "holdFor": "10m",
                    "exceptions": [{"target": name(2), "reason": "lab", "until": "2099-01-01"}],
                },
                "noData": "fail"
            }}}
        }),
        "",
    )
    .expect("metric")
}

/// A stub answering the fleet queries of `n` targets.
fn stub(n: usize) -> Stub {
    let a = Arc::new(answers(n));
    Stub::script(move |req, _| {
        let q = req.param("query").unwrap_or_default();
        let body = if q.starts_with("count_over_time(") {
            &a.held_steps
        } else if q.starts_with("max by (cluster) (max_over_time(") {
            &a.last_bad
        } else if q.starts_with("count by (cluster, image_id) (") {
            // The versions and the reporting (last_over_time) queries: the same view.
            &a.versions
        } else {
            // The last-seen query of the silent targets: never seen.
            return reply(200, &vector(Vec::new()));
        };
        reply(200, body)
    })
}

fn main() {
    let small = env_usize("FLEET_PLAN_SMALL", 1000).max(10);
    let rounds = env_usize("FLEET_PLAN_ROUNDS", 7).clamp(1, 50);
    let sizes = [small, small * 10];
    let stubs: Vec<Stub> = sizes.iter().map(|n| stub(*n)).collect();
    let metrics: Vec<Metric> = sizes
        .iter()
        .zip(&stubs)
        .map(|(n, s)| metric(*n, &s.url))
        .collect();
    let runtime = support::runtime();
    let engine = Engine::new(Backend::Live(Client::new()), AddressPolicy::default());
    let at = Utc.timestamp_opt(SAMPLE_TIME, 0).single().expect("time");
    runtime.block_on(async {
        let opts = || EvalOptions {
            at: Some(at),
            ..EvalOptions::with_budget(Duration::from_secs(600))
        };
        let mut times = [Vec::new(), Vec::new()];
        for (n, m) in sizes.iter().zip(&metrics) {
            let plan = engine.fleet_plan(m, &opts()).await.expect("plan");
            let listed: usize =
                plan.cohorts.iter().map(|c| c.targets.len()).sum::<usize>() + plan.unselected.len();
            assert_eq!(listed, *n, "every target is in the plan");
            assert_eq!(plan.verdict, "Failed", "{}", plan.message);
        }
        // Alternate the order, so that neither size always runs on a warmer process.
        for round in 0..rounds {
            for j in 0..2 {
                let k = if round % 2 == 0 { j } else { 1 - j };
                let t = Instant::now();
                let plan = engine.fleet_plan(&metrics[k], &opts()).await.expect("plan");
                times[k].push(t.elapsed());
                assert!(!plan.cohorts.is_empty());
            }
        }
        let small_t = common::median_duration(times[0].clone());
        let large_t = common::median_duration(times[1].clone());
        println!(
            "fleet_plan {} vs {} targets (20 cohorts, holdFor 10m), {rounds} rounds each:",
            sizes[0], sizes[1]
        );
        println!(
            "  {:>6} targets median {small_t:?} (fastest {:?})",
            sizes[0],
            times[0].iter().min().copied().unwrap_or_default()
        );
        println!(
            "  {:>6} targets median {large_t:?} (fastest {:?})",
            sizes[1],
            times[1].iter().min().copied().unwrap_or_default()
        );
        println!(
            "  time ratio {:.1} for 10x the targets (linear: ~10, quadratic: ~100)",
            large_t.as_secs_f64() / small_t.as_secs_f64()
        );
    });
}
