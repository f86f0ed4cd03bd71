//! gRPC throughput and per-call overhead: unary `Run` on the go-plugin gRPC mode, 64 concurrent
//! streams on one HTTP/2 connection, against the net/rpc transport of the same binary measured in
//! the same run. Both are launched and driven by `grpchost load` (tests/gohost/cmd/grpchost, a
//! go-plugin host), against a fake Prometheus that answers a one-sample vector at once
//! (tests/support/stub.rs `Mode::Fixed`), so what is left is transport, decoding, the HTTP
//! client and the engine. The net/rpc calls carry the same information (an AnalysisRun with
//! name, namespace, uid, labels and start, and the metric).
//!
//! Reported per transport: calls/s, p50/p99 latency, and the plugin process's CPU time per call
//! (utime + stime from /proc around the measured calls, so the load generator's own CPU is not
//! counted). Targets: gRPC >= 15,000 calls/s on 2 cores (plain query); gRPC CPU per call within
//! 1.5x of net/rpc's. Two workloads: a plain query, and an error ratio with a regex matcher,
//! whose PromQL validation compiles a regex on every call (engine cost, on both transports).
//! Rounds alternate the order; medians over rounds are compared. The machine is shared: compare
//! figures measured in one run, not across runs.
//!
//! `cargo bench --bench grpc_run`

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
#[path = "../tests/grpc_support/mod.rs"]
mod grpc_support;
#[path = "../tests/support/mod.rs"]
mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::gohost::run_command;
use support::stub::{Mode, Stub, SAMPLE_TIME};

/// Concurrent calls in flight.
const CONCURRENCY: usize = 64;
/// Measured Runs per load run.
const CALLS: usize = 30_000;
/// Unmeasured Runs first (connections, allocator, caches).
const WARMUP: usize = 2_000;
/// Rounds; each runs both transports once, the order alternating.
const ROUNDS: usize = 3;
/// Wall-clock limit for one grpchost run.
const RUN_LIMIT: Duration = Duration::from_secs(240);

/// What one load run measured.
#[derive(Debug, Clone, Copy)]
struct Figures {
    calls_per_sec: f64,
    p50_ms: f64,
    p99_ms: f64,
    cpu_us_per_call: f64,
    host_cpu_s: f64,
}

fn num(v: &Value, path: &[&str]) -> f64 {
    let mut cur = v;
    for p in path {
        cur = &cur[*p];
    }
    cur.as_f64()
        .unwrap_or_else(|| panic!("grpchost output has no number at {path:?}: {v}"))
}

fn load(protocol: &str, spec: &str, address: &str, mtls: bool) -> Figures {
    let mut cmd = Command::new(grpc_support::grpchost());
    cmd.arg("load")
        .arg("-plugin")
        .arg(support::rollgate_bin())
        .arg("-descriptor")
        .arg(grpc_support::descriptor_file())
        .arg("-protocol")
        .arg(protocol)
        .arg("-concurrency")
        .arg(CONCURRENCY.to_string())
        .arg("-calls")
        .arg(CALLS.to_string())
        .arg("-warmup")
        .arg(WARMUP.to_string())
        .arg("-spec")
        .arg(spec)
        .arg("-address")
        .arg(address)
        .arg(format!("-mtls={mtls}"))
        .arg("-timeout")
        .arg("200s");
    if protocol == "grpc" {
        cmd.arg("-env").arg("ROLLGATE_PLUGIN_PROTOCOL=grpc");
    }
    let run = run_command(cmd, RUN_LIMIT);
    run.assert_ok();
    let v = run.value();
    assert_eq!(num(v, &["calls"]), CALLS as f64, "{v}");
    assert_eq!(num(v, &["phases", "PHASE_SUCCESSFUL"]), CALLS as f64, "{v}");
    Figures {
        calls_per_sec: num(v, &["callsPerSec"]),
        p50_ms: num(v, &["latencyMs", "p50"]),
        p99_ms: num(v, &["latencyMs", "p99"]),
        cpu_us_per_call: num(v, &["pluginCpuMicrosPerCall"]),
        host_cpu_s: num(v, &["hostCpuSeconds"]),
    }
}

fn line(name: &str, f: &Figures) {
    println!(
        "    {name:<7} {:>8.0} calls/s  p50 {:>6.2} ms  p99 {:>6.2} ms  plugin CPU {:>6.1} us/call  (host CPU {:.1} s)",
        f.calls_per_sec, f.p50_ms, f.p99_ms, f.cpu_us_per_call, f.host_cpu_s
    );
}

/// A Run workload: the query every call makes.
struct Scenario {
    name: &'static str,
    query: &'static str,
}

const SCENARIOS: [Scenario; 2] = [
    Scenario {
        name: "plain query",
        query: "sum(rate(http_requests_total[5m]))",
    },
    // Spec validation parses the PromQL of every call, and a regex matcher makes that parse
    // compile a regex: the same cost on both transports, shown for scale.
    Scenario {
        name: "error ratio with a regex matcher",
        query:
            "sum(rate(http_requests_total{code=~\"5..\"}[5m])) / sum(rate(http_requests_total[5m]))",
    },
];

fn spec(query: &str) -> String {
    json!({
        "prometheus": {"address": "{{address}}", "retries": 0},
        "query": query,
        "noData": "inconclusive",
    })
    .to_string()
}

/// Both transports, `ROUNDS` times in alternating order; prints the medians and the verdicts.
fn compare(sc: &Scenario, address: &str, target_tput: Option<f64>) {
    let spec = spec(sc.query);
    println!("\n[{}] {}", sc.name, sc.query);
    let (mut grpc, mut netrpc) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        println!("  round {}:", round + 1);
        let (g, n) = if round % 2 == 0 {
            let g = load("grpc", &spec, address, false);
            (g, load("netrpc", &spec, address, false))
        } else {
            let n = load("netrpc", &spec, address, false);
            (load("grpc", &spec, address, false), n)
        };
        line("grpc", &g);
        line("netrpc", &n);
        grpc.push(g);
        netrpc.push(n);
    }
    let g_tput = common::median(grpc.iter().map(|f| f.calls_per_sec).collect());
    let n_tput = common::median(netrpc.iter().map(|f| f.calls_per_sec).collect());
    let cpu_ratio = common::median(
        grpc.iter()
            .zip(&netrpc)
            .map(|(g, n)| g.cpu_us_per_call / n.cpu_us_per_call)
            .collect(),
    );
    let target = match target_tput {
        Some(t) => format!(" (target >= {t:.0}: {})", common::verdict(g_tput >= t)),
        None => String::new(),
    };
    println!("  median gRPC {g_tput:.0} calls/s{target}; net/rpc {n_tput:.0} calls/s");
    println!(
        "  median plugin CPU per call gRPC / net/rpc: {cpu_ratio:.2}x (target <= 1.5: {})",
        common::verdict(cpu_ratio <= 1.5)
    );
}

fn main() {
    let started = Instant::now();
    let stub = Stub::start(Mode::Fixed(
        json!({"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": {"service": "stub"}, "value": [SAMPLE_TIME, "0.004"]}
        ]}})
        .to_string(),
    ));
    println!("grpc_run: rollgate {}", support::rollgate_bin());
    println!(
        "  unary Run, {CONCURRENCY} concurrent, {CALLS} measured calls per run after {WARMUP} warm-up, instant stub {}",
        stub.url
    );
    compare(&SCENARIOS[0], &stub.url, Some(15_000.0));
    compare(&SCENARIOS[1], &stub.url, None);
    let mtls = load("grpc", &spec(SCENARIOS[0].query), &stub.url, true);
    println!(
        "\n[{}] with AutoMTLS (one run, for information):",
        SCENARIOS[0].name
    );
    line("grpc", &mtls);
    println!(
        "\ngrpc_run: done in {:.0} s",
        started.elapsed().as_secs_f64()
    );
}
