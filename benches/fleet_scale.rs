//! Fleet scale: one `fleet` measurement over 10,000 clusters x 30 pods (300k pod series, a real
//! Prometheus loaded with `big_fleet`), versus the same aggregation queries sent with plain
//! reqwest in the same run (same concurrency: the first round at once, then the last-seen
//! query). Prints both medians, their ratio (target: <= 1.5) and rollgate's own peak heap during
//! a measurement, counted by a global allocator (target: < 100 MB).
//!
//! `cargo bench --bench fleet_scale` (FLEET_CLUSTERS=2000 for a quicker run; FLEET_ROUNDS=N;
//! FLEET_PHASES=1 also loads `kube_pod_status_phase` for every pod, five series each as
//! kube-state-metrics writes them, so the cost of `ignoreTerminalPods`' join shows;
//! FLEET_IGNORE_TERMINAL=0 measures with `ignoreTerminalPods: false`; FLEET_PER_QUERY=1 first
//! times each query alone). Fleet promotion (issue
//! 16): the clusters are split into FLEET_COHORTS cohorts (default 20; 0 for none) and judged
//! with `holdFor` FLEET_HOLD_FOR (default 10m; empty for none); the plain side sends the held
//! queries too.

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

use chrono::{TimeZone, Utc};
use futures::future::join_all;
use rollgate::engine::{AddressPolicy, Engine, EvalOptions};
use rollgate::measurement::{Measurement, Phase};
use rollgate::prometheus::{Backend, Client};
use rollgate::spec::Metric;
use serde_json::json;
use support::prom::PromServer;
use support::scenarios::{base_now, big_fleet, fleet_dataset, NODE_AGENT_NEW};

#[global_allocator]
static ALLOCATOR: common::alloc::Counting = common::alloc::Counting;

/// Peak heap above the level at the start of `f`, in bytes.
async fn peak_during<T>(f: impl std::future::Future<Output = T>) -> (T, usize) {
    let start = common::alloc::start();
    let out = f.await;
    (out, common::alloc::peak_above(start))
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let clusters = env_usize("FLEET_CLUSTERS", 10_000);
    let rounds = env_usize("FLEET_ROUNDS", 6).clamp(1, 50);
    let mut params = big_fleet(clusters, 30);
    params.phases = env_usize("FLEET_PHASES", 0) == 1;
    let ignore_terminal = env_usize("FLEET_IGNORE_TERMINAL", 1) == 1;
    let cohort_count = env_usize("FLEET_COHORTS", 20);
    let hold_for = std::env::var("FLEET_HOLD_FOR").unwrap_or_else(|_| "10m".into());
    if let Ok(h) = rollgate::spec::duration::parse_duration(&hold_for) {
        // The held window must lie over data: otherwise every cluster reads as not held and
        // the window's subqueries run over nothing, which is neither realistic nor as costly.
        params.from = params.from.min(-(h.as_secs() as i64) - params.step);
    }
    let base = base_now();
    let started = Instant::now();
    let text = fleet_dataset(&params, base);
    let size_mb = text.len() / 1_000_000;
    let prom = PromServer::start(base, &text);
    drop(text);
    eprintln!(
        "fleet {clusters} x 30: {size_mb} MB of OpenMetrics, Prometheus ready after {:?} (backfill {:?})",
        started.elapsed(),
        prom.timings.backfill
    );
    let expect = params.expect();
    let digest = NODE_AGENT_NEW
        .image_id()
        .rsplit_once('@')
        .map(|(_, d)| d.to_string())
        .unwrap_or_default();
    let mut fleet = json!({
        "selector": format!("kube_pod_container_info{{namespace=\"{}\", container=\"{}\"}}", params.namespace, params.container),
        "version": {"expected": digest},
        "expectedTargets": expect.inventory,
        "workloads": true,
        "ignoreTerminalPods": ignore_terminal,
    });
    if cohort_count > 0 {
        // Consecutive slices of the inventory, the last takes the remainder.
        let per = expect.inventory.len().div_ceil(cohort_count).max(1);
        let cohorts: Vec<serde_json::Value> = expect
            .inventory
            .chunks(per)
            .enumerate()
            .map(|(i, c)| json!({"name": format!("cohort-{i:02}"), "targets": c, "maxConcurrent": 50}))
            .collect();
        fleet["cohorts"] = json!(cohorts);
    }
    if !hold_for.is_empty() {
        fleet["holdFor"] = json!(hold_for);
    }
    let metric = Metric::from_value(
        &json!({
            "name": "fleet-scale",
            "provider": {"plugin": {"rollgate/analysis": {
                "prometheus": {"address": prom.url, "timeout": "120s"},
                "fleet": fleet,
                "noData": "fail"
            }}}
        }),
        "",
    )
    .expect("metric");
    let at = Utc.timestamp_opt(base, 0).single().expect("base time");
    let runtime = support::runtime();
    let engine = Engine::new(Backend::Live(Client::new()), AddressPolicy::default());
    let plain = reqwest::Client::new();
    let url = format!("{}/api/v1/query", prom.url);
    let time = base.to_string();

    runtime.block_on(async {
        // A budget per measurement: one made before the rounds ran out after 300 s, and the
        // later rounds failed at once.
        let opts = || EvalOptions {
            at: Some(at),
            ..EvalOptions::with_budget(Duration::from_secs(300))
        };
        // The queries the engine sent, from its own metadata.
        let first: Measurement = engine.measure(&metric, &opts()).await;
        assert_eq!(first.phase, Phase::Failed, "{}", first.message);
        let round_one: Vec<String> = first
            .metadata
            .iter()
            .filter(|(k, _)| {
                k.as_str() == "query.versions"
                    || k.as_str() == "query.terminal"
                    || k.as_str() == "query.reporting"
                    || k.as_str() == "query.held"
                    || k.as_str() == "query.heldLastChange"
                    || k.starts_with("query.stall.")
            })
            .map(|(_, q)| q.clone())
            .collect();
        let last_seen = first.metadata.get("query.lastSeen").cloned();
        let send = |q: String| {
            let req = plain
                .post(&url)
                .form(&[("query", q.as_str()), ("time", time.as_str()), ("partial_response", "false")]);
            async move {
                let body = req.send().await.expect("send").bytes().await.expect("body");
                assert!(
                    body.starts_with(b"{\"status\":\"success\""),
                    "{}: {}",
                    q.chars().take(80).collect::<String>(),
                    String::from_utf8_lossy(&body[..body.len().min(300)])
                );
                body.len()
            }
        };
        let plain_round = || async {
            let mut bytes: usize = join_all(round_one.iter().cloned().map(send)).await.into_iter().sum();
            if let Some(q) = &last_seen {
                bytes += send(q.clone()).await;
            }
            bytes
        };
        let bytes = plain_round().await;
        if std::env::var("FLEET_PER_QUERY").is_ok_and(|v| v == "1") {
            // Where Prometheus spends the time: each query alone, one after the other.
            for q in round_one.iter().chain(&last_seen) {
                let t = Instant::now();
                let n = send(q.clone()).await;
                let head: String = q.chars().take(90).collect();
                println!("  alone {:>8.2?} {n:>7} B  {head}", t.elapsed());
            }
        }

        let mut engine_times = Vec::new();
        let mut plain_times = Vec::new();
        let mut peak = 0usize;
        // Alternate which goes first, so that neither always meets a warmer server.
        for round in 0..rounds {
            if round % 2 == 1 {
                let t = Instant::now();
                plain_round().await;
                plain_times.push(t.elapsed());
            }
            let t = Instant::now();
            let (m, p) = peak_during(engine.measure(&metric, &opts())).await;
            engine_times.push(t.elapsed());
            // On a loaded machine a query can outlast its timeout: say so and go on, rather
            // than lose the run (the plain side has no timeout, so such a round is kept).
            if m.phase != Phase::Failed {
                println!("  round {round}: rollgate gave {:?}: {}", m.phase, m.message.chars().take(300).collect::<String>());
            }
            peak = peak.max(p);
            if round % 2 == 0 {
                let t = Instant::now();
                plain_round().await;
                plain_times.push(t.elapsed());
            }
        }
        let (e_min, p_min) = (
            engine_times.iter().min().copied().unwrap_or_default(),
            plain_times.iter().min().copied().unwrap_or_default(),
        );
        let (e, p) = (common::median_duration(engine_times), common::median_duration(plain_times));
        println!(
            "fleet_scale {clusters} clusters x 30 pods in {cohort_count} cohorts, holdFor {hold_for:?}, {} queries ({} kB of responses), {rounds} rounds:",
            round_one.len() + usize::from(last_seen.is_some()),
            bytes / 1000
        );
        println!("  rollgate measurement  median {e:?} (fastest {e_min:?})");
        println!("  plain reqwest         median {p:?} (fastest {p_min:?})");
        println!(
            "  ratio {:.2} (target <= 1.5); rollgate peak heap during a measurement {:.1} MB (target < 100 MB)",
            e.as_secs_f64() / p.as_secs_f64(),
            peak as f64 / 1e6
        );
        println!("  verdict: {}", first.message.chars().take(300).collect::<String>());
    });
}
