//! `rollgate backtest` over 7 days at `interval: 1m` (10,080 checks per metric) of a guarded
//! query metric and a ratio compare metric, against a real Prometheus with generated data:
//! batched (range queries) versus one instant query per check and query, same binary, same
//! data, same run. Prints both times, their ratio (floor >= 30x), checks per second, whether
//! the measurements are identical, and the peak resident memory of each run (an upper bound of
//! its peak heap; target <= 100 MB), read with `/usr/bin/time -f %M`. An untimed batched run
//! first warms Prometheus (a fresh server reads its blocks from disk on the first queries); the
//! batched side is the median of three runs, the instant side one run.
//!
//! `cargo bench --bench backtest`; `BPERF_OUT=/tmp/b.data cargo bench --bench backtest` records
//! the first timed batched run with `perf record` (cpu-clock, DWARF call graphs) for `perf report -i`.

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

#[path = "../tests/support/mod.rs"]
mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::prom::PromServer;
use support::scenarios::{base_now, push_sample, times, Dataset};

const DAYS: i64 = 7;
const STEP: i64 = 60;

/// `bench_requests_total{track, code}`: canary and stable at 50 ok/s and 0.25 errors/s.
fn dataset(base: i64) -> String {
    let mut ds = Dataset::new();
    let buf = ds.family("bench_requests", "counter");
    for track in ["canary", "stable"] {
        let (mut ok, mut err) = (0.0f64, 0.0f64);
        for t in times(base, -(DAYS * 86_400 + 3600), 0, STEP) {
            push_sample(
                buf,
                "bench_requests_total",
                &[("track", track), ("code", "200")],
                ok,
                t,
            );
            push_sample(
                buf,
                "bench_requests_total",
                &[("track", track), ("code", "500")],
                err,
                t,
            );
            ok += 50.0 * STEP as f64;
            err += 0.25 * STEP as f64;
        }
    }
    ds.finish()
}

fn template(address: &str) -> String {
    let q = |track: &str, bad: bool| {
        let code = if bad { ",code=\"500\"" } else { "" };
        format!("sum(increase(bench_requests_total{{track=\"{track}\"{code}}}[5m]))")
    };
    format!(
        r#"apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {{name: bench}}
spec:
  metrics:
  - name: error-rate
    interval: 1m
    failureLimit: 100000
    successCondition: result[0] < 0.02
    provider:
      plugin:
        rollgate/analysis:
          prometheus: {{address: "{address}"}}
          query: sum(rate(bench_requests_total{{track="canary",code="500"}}[5m])) / sum(rate(bench_requests_total{{track="canary"}}[5m]))
          minRequests: {{query: '{total}', count: 300}}
          noData: inconclusive
  - name: canary-vs-stable
    interval: 1m
    failureLimit: 100000
    inconclusiveLimit: 100000
    provider:
      plugin:
        rollgate/analysis:
          prometheus: {{address: "{address}"}}
          compare:
            canary: {{bad: '{cb}', total: '{ct}'}}
            stable: {{bad: '{sb}', total: '{st}'}}
            maxIncrease: 0.2
          noData: inconclusive
"#,
        total = q("canary", false),
        cb = q("canary", true),
        ct = q("canary", false),
        sb = q("stable", true),
        st = q("stable", false),
    )
}

/// One run's figures: wall time, peak RSS in MB, and rollgate's own CPU time (user + system,
/// seconds), which a loaded shared machine disturbs far less than the wall time.
struct Figures {
    wall: Duration,
    rss_mb: f64,
    cpu_s: f64,
}

/// How many times the batched side runs; its median is reported. One run is a few tenths of a
/// second, which a single scheduling hiccup on the shared machine can double; the instant side
/// runs once (it averages itself over 60,000 queries).
const BATCHED_RUNS: usize = 3;

/// Runs the backtest (under `perf record` when `BPERF_OUT` is set and `profile`); returns its
/// JSON and figures.
fn run(
    file: &std::path::Path,
    from: &str,
    to: &str,
    extra: &[&str],
    profile: bool,
) -> (Value, Figures) {
    let rss = tempfile::NamedTempFile::new().unwrap();
    let started = Instant::now();
    let mut cmd = match std::env::var("BPERF_OUT") {
        Ok(o) if profile => {
            let mut c = Command::new("perf");
            c.args([
                "record",
                "-e",
                "cpu-clock",
                "-F",
                "4000",
                "--call-graph",
                "dwarf,16384",
                "-o",
                &o,
                "--",
                "/usr/bin/time",
            ]);
            c
        }
        _ => Command::new("/usr/bin/time"),
    };
    let out = cmd
        .args([
            "-f",
            "%M %U %S",
            "-o",
            rss.path().to_str().unwrap(),
            support::rollgate_bin(),
            "backtest",
            "-f",
        ])
        .arg(file)
        .args(["--from", from, "--to", to, "-o", "json"])
        .args(extra)
        .output()
        .expect("run rollgate under /usr/bin/time");
    let took = started.elapsed();
    assert!(
        out.status.code().is_some_and(|c| c < 3),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(rss.path()).unwrap();
    let fields: Vec<f64> = text
        .trim()
        .lines()
        .last()
        .unwrap()
        .split_whitespace()
        .map(|f| f.parse().unwrap())
        .collect();
    let figures = Figures {
        wall: took,
        rss_mb: fields[0] / 1024.0,
        cpu_s: fields[1] + fields[2],
    };
    (serde_json::from_slice(&out.stdout).unwrap(), figures)
}

fn main() {
    let base = base_now();
    let prom = PromServer::start(base, &dataset(base));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bench.yaml");
    std::fs::write(&file, template(&prom.url)).unwrap();
    let rfc = |s: i64| {
        chrono::DateTime::from_timestamp(s, 0)
            .unwrap()
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    };
    let (from, to) = (rfc(base - DAYS * 86_400), rfc(base));

    // Warm-up, untimed: the first queries against a freshly started Prometheus read its blocks
    // from disk, a cost only whichever side ran first used to pay.
    let (warm, _) = run(&file, &from, &to, &[], false);
    let mut batched_runs: Vec<(Value, Figures)> = (0..BATCHED_RUNS)
        .map(|k| run(&file, &from, &to, &[], k == 0))
        .collect();
    let (instant, i) = run(&file, &from, &to, &["--no-batch"], false);
    let same =
        |a: &Value, b: &Value| a["timeline"] == b["timeline"] && a["metrics"] == b["metrics"];
    let identical =
        same(&warm, &instant) && batched_runs.iter().all(|(doc, _)| same(doc, &instant));
    let walls: Vec<String> = batched_runs
        .iter()
        .map(|(_, f)| format!("{:.2}", f.wall.as_secs_f64()))
        .collect();
    let peak_rss = batched_runs
        .iter()
        .map(|(_, f)| f.rss_mb)
        .fold(0.0, f64::max);
    batched_runs.sort_by_key(|(_, f)| f.wall);
    let (batched, b) = batched_runs.swap_remove(BATCHED_RUNS / 2);
    let (t_batched, t_instant) = (b.wall, i.wall);
    let checks = batched["timeline"].as_array().map_or(0, Vec::len);
    println!(
        "backtest: 7 days at 1m, 2 metrics, {checks} checks; phase {}",
        batched["phase"]
    );
    println!(
        "  batched  {:>8.2} s  {:>9.0} checks/s  peak RSS {:.1} MB  rollgate CPU {:.2} s  {}  (median of {BATCHED_RUNS} runs after a warm-up: {} s)",
        t_batched.as_secs_f64(),
        checks as f64 / t_batched.as_secs_f64(),
        b.rss_mb,
        b.cpu_s,
        batched["queries"],
        walls.join(", ")
    );
    println!(
        "  instant  {:>8.2} s  {:>9.0} checks/s  peak RSS {:.1} MB  rollgate CPU {:.2} s",
        t_instant.as_secs_f64(),
        checks as f64 / t_instant.as_secs_f64(),
        i.rss_mb,
        i.cpu_s
    );
    println!(
        "  ratio {:.1}x (floor >= 30x); identical measurements: {identical}; peak RSS (upper bound of heap) {:.1} MB (target <= 100 MB)",
        t_instant.as_secs_f64() / t_batched.as_secs_f64(),
        peak_rss
    );
    assert!(identical, "batched and instant measurements differ");
}
