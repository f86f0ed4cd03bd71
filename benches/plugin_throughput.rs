//! Plugin throughput and memory: the rollgate binary versus the Go baseline plugin
//! (tests/gohost/cmd/goplugin-baseline), both launched and driven by `gohost load` the way the
//! Argo Rollouts controller does (30 concurrent callers, Ping + Run, full AnalysisRun values).
//!
//! Scenarios, each run for both plugins in alternating order over a few rounds:
//! - `prometheus`: guard + query on the healthy service against the real Prometheus;
//! - `instant stub`: the same spec against a fake Prometheus that answers a one-sample vector at
//!   once, so what is left is the protocol, gob and HTTP client cost;
//! - `closed port`: connection refused at once (`"retries":0` for rollgate; the baseline's JSON
//!   decoding ignores the key and never retries).
//!
//! Prints calls/s and p99 per plugin and the median over rounds of the ratios rollgate / Go
//! (targets: throughput >= 1.0, p99 <= 1.0), then `gohost rss` against the instant stub: RSS
//! checkpoints and the final RSS (target <= 40 MB, flat after warm-up).
//! The machine is shared: compare ratios measured in one run, not absolute figures.
//!
//! `cargo bench --bench plugin_throughput`

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

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::gohost::{run_command, GoHost};
use support::scenarios::HEALTHY;
use support::stub::{closed_port, Mode, Stub, SAMPLE_TIME};

/// The controller's number of analysis workers.
const CALLERS: usize = 30;
/// Rounds per scenario; each round runs both plugins once, the order alternating.
const ROUNDS: usize = 5;
/// Runs in the RSS measurement.
const RSS_RUNS: usize = 100_000;
/// Runs in the baseline's RSS measurement (for reference only).
const BASELINE_RSS_RUNS: usize = 20_000;
/// RSS checkpoints.
const RSS_CHECKPOINTS: usize = 10;
/// Share of the RSS runs counted as warm-up.
const RSS_WARMUP: f64 = 0.2;
/// Wall-clock limit for one gohost run (gohost stops starting calls after its own `-timeout`).
const RUN_LIMIT: Duration = Duration::from_secs(150);
/// The sample value the instant stub returns: above the guard's count, so the guard passes.
const STUB_VALUE: u32 = 500;
/// The guard's minimum number of requests.
const GUARD_COUNT: u32 = 300;

/// One load scenario: where the plugins query and with what spec.
struct Scenario {
    name: &'static str,
    address: String,
    /// Plugin config template for rollgate (`{{address}}` filled in by gohost).
    rollgate_spec: String,
    /// Plugin config template for the baseline.
    baseline_spec: String,
    /// Runs per caller.
    runs: usize,
    /// The phase every call must end in, for both plugins (so both did the same work).
    phase: &'static str,
}

/// What one `gohost load` run measured.
#[derive(Clone, Copy, Debug)]
struct Figures {
    calls_per_sec: f64,
    p50_ms: f64,
    p99_ms: f64,
}

fn spec(query: &str, guard: &str, extra_prometheus: &[(&str, Value)]) -> String {
    let mut prometheus = json!({"address": "{{address}}"});
    for (k, v) in extra_prometheus {
        prometheus[*k] = v.clone();
    }
    json!({
        "prometheus": prometheus,
        "query": query,
        "minRequests": {"query": guard, "count": GUARD_COUNT},
        "noData": "inconclusive",
    })
    .to_string()
}

fn gohost(host: &GoHost, sub: &str, plugin: &Path, args: &[String]) -> support::gohost::HostRun {
    let mut cmd = host.command(sub, plugin);
    cmd.args(args);
    let run = run_command(cmd, RUN_LIMIT);
    run.assert_ok();
    run
}

fn num(v: &Value, path: &[&str]) -> f64 {
    let mut cur = v;
    for p in path {
        cur = &cur[*p];
    }
    match cur.as_f64() {
        Some(x) => x,
        None => panic!("gohost output has no number at {path:?}: {v}"),
    }
}

fn load(host: &GoHost, plugin: &Path, spec: &str, sc: &Scenario) -> Figures {
    let args = [
        "-callers".to_string(),
        CALLERS.to_string(),
        "-runs".to_string(),
        sc.runs.to_string(),
        "-spec".to_string(),
        spec.to_string(),
        "-address".to_string(),
        sc.address.clone(),
        "-timeout".to_string(),
        "120s".to_string(),
    ];
    let run = gohost(host, "load", plugin, &args);
    let v = run.value();
    let calls = num(v, &["calls"]);
    assert_eq!(
        calls,
        (CALLERS * sc.runs) as f64,
        "{}: not every call was made: {v}",
        plugin.display()
    );
    assert_eq!(
        num(v, &["phases", sc.phase]),
        calls,
        "{} on {}: every call should end {}: {v}",
        plugin.display(),
        sc.name,
        sc.phase
    );
    Figures {
        calls_per_sec: num(v, &["callsPerSec"]),
        p50_ms: num(v, &["latencyMs", "p50"]),
        p99_ms: num(v, &["latencyMs", "p99"]),
    }
}

fn compare(host: &GoHost, sc: &Scenario) {
    let rollgate = Path::new(support::rollgate_bin());
    println!(
        "\n[{}] {} callers x {} runs per plugin, phase {} ({})",
        sc.name, CALLERS, sc.runs, sc.phase, sc.address
    );
    let mut tput = Vec::with_capacity(ROUNDS);
    let mut p99 = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        let run_rollgate = || load(host, rollgate, &sc.rollgate_spec, sc);
        let run_go = || load(host, &host.baseline_plugin, &sc.baseline_spec, sc);
        let (r, g) = if round % 2 == 0 {
            let r = run_rollgate();
            (r, run_go())
        } else {
            let g = run_go();
            (run_rollgate(), g)
        };
        println!(
            "  round {}: rollgate {:>8.0} runs/s  p50 {:>7.2} ms  p99 {:>7.2} ms | go {:>8.0} runs/s  p50 {:>7.2} ms  p99 {:>7.2} ms",
            round + 1,
            r.calls_per_sec,
            r.p50_ms,
            r.p99_ms,
            g.calls_per_sec,
            g.p50_ms,
            g.p99_ms
        );
        tput.push(r.calls_per_sec / g.calls_per_sec);
        p99.push(r.p99_ms / g.p99_ms);
    }
    let (t, p) = (common::median(tput), common::median(p99));
    println!(
        "  median ratio rollgate/go: throughput {t:.2}x (target >= 1.0: {}), p99 {p:.2}x (target <= 1.0: {})",
        common::verdict(t >= 1.0),
        common::verdict(p <= 1.0)
    );
}

fn rss(host: &GoHost, plugin: &Path, spec: &str, address: &str, runs: usize) {
    let args = [
        "-runs".to_string(),
        runs.to_string(),
        "-callers".to_string(),
        CALLERS.to_string(),
        "-checkpoints".to_string(),
        RSS_CHECKPOINTS.to_string(),
        "-spec".to_string(),
        spec.to_string(),
        "-address".to_string(),
        address.to_string(),
        "-timeout".to_string(),
        "140s".to_string(),
    ];
    let run = gohost(host, "rss", plugin, &args);
    let v = run.value();
    let name = plugin.file_name().map_or_else(
        || plugin.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    assert_eq!(num(v, &["rpcErrors"]), 0.0, "{name}: {v}");
    assert_eq!(num(v, &["mismatches"]), 0.0, "{name}: {v}");
    assert_eq!(
        num(v, &["phases", "Successful"]),
        runs as f64,
        "{name}: {v}"
    );
    let Some(points) = v["checkpoints"].as_array() else {
        panic!("{name}: no checkpoints: {v}")
    };
    println!(
        "\n[rss {name}] {runs} runs, {CALLERS} callers, {:.0} runs/s, instant stub",
        num(v, &["callsPerSec"])
    );
    let mut after_warmup = Vec::new();
    for p in points {
        let (n, rss_kb) = (num(p, &["runs"]), num(p, &["rssKb"]));
        println!(
            "  runs {:>7} at {:>6.1} s: RSS {:>6.1} MB, HWM {:>6.1} MB",
            n,
            num(p, &["seconds"]),
            rss_kb / 1024.0,
            num(p, &["hwmKb"]) / 1024.0
        );
        if n >= runs as f64 * RSS_WARMUP {
            after_warmup.push(rss_kb);
        }
    }
    let (Some(first), Some(last)) = (after_warmup.first(), points.last()) else {
        panic!("{name}: no checkpoint after warm-up: {v}")
    };
    let last = num(last, &["rssKb"]);
    let max = after_warmup.iter().copied().fold(f64::MIN, f64::max);
    let min = after_warmup.iter().copied().fold(f64::MAX, f64::min);
    println!(
        "  final RSS {:.1} MB (target <= 40 MB: {}); after warm-up ({:.0}% of runs): {:+.1} MB first->last, spread {:.1} MB",
        last / 1024.0,
        common::verdict(last <= 40.0 * 1024.0),
        RSS_WARMUP * 100.0,
        (last - first) / 1024.0,
        (max - min) / 1024.0
    );
}

fn main() {
    let started = Instant::now();
    let host = support::gohost::build();
    let prom = support::prom::shared();
    let stub_body = json!({
        "status": "success",
        "data": {"resultType": "vector", "result": [
            {"metric": {"service": "stub"}, "value": [SAMPLE_TIME, STUB_VALUE.to_string()]}
        ]}
    })
    .to_string();
    let stub = Stub::start(Mode::Fixed(stub_body));
    let (ratio_q, guard_q) = (HEALTHY.ratio_query("5m"), HEALTHY.total_query("5m"));
    let plain = spec(&ratio_q, &guard_q, &[]);
    let no_retries = spec(&ratio_q, &guard_q, &[("retries", json!(0))]);

    println!("plugin_throughput: rollgate {}", support::rollgate_bin());
    println!("  baseline {}", host.baseline_plugin.display());
    let scenarios = [
        Scenario {
            name: "prometheus",
            address: prom.url.clone(),
            rollgate_spec: plain.clone(),
            baseline_spec: plain.clone(),
            runs: 80,
            phase: "Successful",
        },
        Scenario {
            name: "instant stub",
            address: stub.url.clone(),
            rollgate_spec: plain.clone(),
            baseline_spec: plain.clone(),
            runs: 400,
            phase: "Successful",
        },
        Scenario {
            name: "closed port",
            address: closed_port(),
            rollgate_spec: no_retries.clone(),
            // Same bytes: the baseline ignores unknown keys and never retries.
            baseline_spec: no_retries,
            runs: 400,
            phase: "Error",
        },
    ];
    for sc in &scenarios {
        compare(&host, sc);
    }
    rss(
        &host,
        Path::new(support::rollgate_bin()),
        &plain,
        &stub.url,
        RSS_RUNS,
    );
    rss(
        &host,
        &host.baseline_plugin,
        &plain,
        &stub.url,
        BASELINE_RSS_RUNS,
    );
    println!(
        "\nplugin_throughput: done in {:.0} s",
        started.elapsed().as_secs_f64()
    );
}
