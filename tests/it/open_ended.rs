//! Open-ended `compare` runs (no `count`) end to end: `rollgate backtest` over a week of data at
//! one check a minute against a real Prometheus (promtool backfill), with `[[run.elapsed]]`
//! windows. A regression that begins on the last day fails the run within minutes; a healthy
//! canary runs the whole week without failing, and the backtest stays fast.

use crate::support;

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use serde_json::Value;
use support::prom::PromServer;
use support::scenarios::{base_now, push_sample, times, Dataset};

/// Sample step of the generated counters: three samples per one-minute cell.
const STEP: i64 = 20;
/// A week of history before `base`.
const FROM: i64 = -7 * 86_400;
/// The `bad` canary's error rate goes from 1 % to 3 % six hours before `base`.
const BAD_AT: i64 = -6 * 3600;

/// `oe_requests_total{service, track, code}`: 100 requests/s per track, 1 % errors; the `bad`
/// service's canary 3 % errors from `BAD_AT`.
fn dataset(base: i64) -> String {
    let mut ds = Dataset::new();
    let buf = ds.family("oe_requests", "counter");
    for service in ["good", "bad"] {
        for track in ["canary", "stable"] {
            let (mut ok, mut err) = (0.0f64, 0.0f64);
            for t in times(base, FROM, 0, STEP) {
                let labels = |code| [("service", service), ("track", track), ("code", code)];
                push_sample(buf, "oe_requests_total", &labels("200"), ok, t);
                push_sample(buf, "oe_requests_total", &labels("500"), err, t);
                let bad_rate = if service == "bad" && track == "canary" && t >= base + BAD_AT {
                    3.0
                } else {
                    1.0
                };
                ok += (100.0 - bad_rate) * STEP as f64;
                err += bad_rate * STEP as f64;
            }
        }
    }
    ds.finish()
}

fn server() -> &'static PromServer {
    static S: OnceLock<PromServer> = OnceLock::new();
    S.get_or_init(|| {
        let base = base_now();
        PromServer::start(base, &dataset(base))
    })
}

fn at(offset: i64) -> String {
    Utc.timestamp_opt(server().base + offset, 0)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The template; `window` is each count query's range (`[[run.elapsed]]` or e.g. `10m`).
fn template(dir: &Path, address: &str, window: &str) -> std::path::PathBuf {
    let q = |track: &str, code: &str| {
        format!(
            r#"sum(increase(oe_requests_total{{service="{{{{args.service}}}}",track="{track}"{code}}}[{window}]))"#
        )
    };
    let yaml = format!(
        r#"apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {{name: open-ended}}
spec:
  args: [{{name: service}}]
  metrics:
  - name: error-rate-vs-stable
    interval: 1m
    failureLimit: 0
    inconclusiveLimit: 2
    provider:
      plugin:
        rollgate/analysis:
          prometheus: {{address: "{address}"}}
          compare:
            canary: {{bad: '{cb}', total: '{ct}'}}
            stable: {{bad: '{sb}', total: '{st}'}}
            maxIncrease: 0.2
            margin: 0.001
            confidence: 0.95
            minRequests: 500
          noData: inconclusive
"#,
        cb = q("canary", r#",code="500""#),
        ct = q("canary", ""),
        sb = q("stable", r#",code="500""#),
        st = q("stable", ""),
    );
    let path = dir.join(format!("template-{}.yaml", window.len()));
    std::fs::write(&path, yaml).unwrap();
    path
}

fn backtest(file: &Path, service: &str, from: i64, to: i64) -> (i32, Value, String) {
    let out = Command::new(support::rollgate_bin())
        .arg("backtest")
        .args([
            "-f",
            file.to_str().unwrap(),
            "--from",
            &at(from),
            "--to",
            &at(to),
        ])
        .args(["--arg", &format!("service={service}"), "-o", "json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let doc = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}\n{stderr}"));
    (out.status.code().unwrap_or(-1), doc, stderr)
}

/// With the run clock, and with a plain `[10m]` window (which the open-ended spending judged
/// before: from about 66 hours in, its checks needed p-values below the test's floor of 1e-7,
/// so this run never failed).
#[test]
fn a_regression_on_the_seventh_day_fails_the_week_long_run_within_minutes() {
    for window in ["[[run.elapsed]]", "10m"] {
        regression_fails_promptly(window);
    }
}

fn regression_fails_promptly(window: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = template(dir.path(), &server().url, window);
    let started = Instant::now();
    let (code, doc, stderr) = backtest(&file, "bad", FROM + 60, 0);
    assert_eq!(code, 1, "{doc}\n{stderr}");
    assert_eq!(doc["phase"], "Failed");
    let ended = chrono::DateTime::parse_from_rfc3339(doc["endedAt"].as_str().unwrap()).unwrap();
    let onset = server().base + BAD_AT;
    let after = ended.timestamp() - onset;
    // The first cell wholly after the onset closes a minute later; a few cells of 3 % against
    // 1 % at 6,000 requests a side carry the 2e9-fold evidence a start 6.7 days in needs.
    assert!(
        (60..=10 * 60).contains(&after),
        "failed {after} s after the onset: {doc}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_healthy_canary_runs_the_whole_week_without_failing() {
    let dir = tempfile::tempdir().unwrap();
    let file = template(dir.path(), &server().url, "[[run.elapsed]]");
    let started = Instant::now();
    let (code, doc, stderr) = backtest(&file, "good", FROM + 60, -60);
    assert_eq!(code, 0, "{doc}\n{stderr}");
    assert_eq!(doc["phase"], "Successful", "{}", doc["summary"]);
    assert_eq!(doc["terminatedAtWindowEnd"], true, "{}", doc["summary"]);
    let checks = doc["metrics"][0]["count"].as_u64().unwrap();
    assert!(checks >= 10_000, "{checks} checks: {}", doc["summary"]);
    let took = started.elapsed();
    eprintln!("healthy week: {took:?}");
    assert!(took < Duration::from_secs(120), "{took:?}");
}

// ---------------------------------------------------------------------------------------------
// The histogram form, open-ended: three days of latency buckets at one check a minute.
// ---------------------------------------------------------------------------------------------

/// Three days of latency history before the histogram server's base.
const H_FROM: i64 = -3 * 86_400;
/// Sample step of the generated buckets: two samples per one-minute cell.
const H_STEP: i64 = 30;
/// The `slow` service's canary becomes 50 % slower three hours before `base`.
const SLOW_AT: i64 = -3 * 3600;
/// Bucket bounds a factor 1.25 apart, 50 ms to 0.24 s (`ExponentialBuckets(0.05, 1.25, 8)`).
const H_BOUNDS: [&str; 8] = [
    "0.05",
    "0.0625",
    "0.078125",
    "0.09765625",
    "0.1220703125",
    "0.152587890625",
    "0.19073486328125",
    "0.2384185791015625",
];

/// `oe_latency_seconds{service, track}`: 50 requests/s per track, exponential latency with a
/// mean of 0.1 s that wanders by up to ±5 % from one sample to the next (each track on its
/// own); the `slow` service's canary's mean is 0.15 s from `SLOW_AT`.
fn histogram_dataset(base: i64) -> String {
    let mut ds = Dataset::new();
    let buf = ds.family("oe_latency_seconds", "histogram");
    let per_step = 50.0 * H_STEP as f64;
    for (s, service) in ["same", "slow"].into_iter().enumerate() {
        for (k, track) in ["canary", "stable"].into_iter().enumerate() {
            let steps: Vec<i64> = times(base, H_FROM, 0, H_STEP).collect();
            let seed = (s * 2 + k) as u64 + 17;
            let mean = |i: usize, t: i64| {
                let j = (support::scenarios::mix(seed ^ support::scenarios::mix(i as u64)) >> 11)
                    as f64
                    / (1u64 << 53) as f64;
                let slow = service == "slow" && track == "canary" && t >= base + SLOW_AT;
                0.1 * (if slow { 1.5 } else { 1.0 }) * (0.95 + 0.1 * j)
            };
            for le in H_BOUNDS.iter().copied().chain(["+Inf"]) {
                let bound: f64 = le.parse().unwrap_or(f64::INFINITY);
                let labels = [("service", service), ("track", track), ("le", le)];
                let mut total = 0.0;
                for (i, t) in steps.iter().enumerate() {
                    if i > 0 {
                        total += (per_step * (1.0 - (-bound / mean(i, *t)).exp())).round();
                    }
                    push_sample(buf, "oe_latency_seconds_bucket", &labels, total, *t);
                }
            }
            let labels = [("service", service), ("track", track)];
            for (i, t) in steps.iter().enumerate() {
                let n = per_step * i as f64;
                push_sample(buf, "oe_latency_seconds_count", &labels, n, *t);
                push_sample(buf, "oe_latency_seconds_sum", &labels, n * 0.1, *t);
            }
        }
    }
    ds.finish()
}

fn histogram_server() -> &'static PromServer {
    static S: OnceLock<PromServer> = OnceLock::new();
    S.get_or_init(|| {
        let base = base_now();
        PromServer::start(base, &histogram_dataset(base))
    })
}

fn h_at(offset: i64) -> String {
    Utc.timestamp_opt(histogram_server().base + offset, 0)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// An open-ended histogram-form template (no `count`) on the run clock.
fn histogram_template(dir: &Path, address: &str) -> std::path::PathBuf {
    let q = |track: &str| {
        format!(
            r#"sum by (le) (increase(oe_latency_seconds_bucket{{service="{{{{args.service}}}}",track="{track}"}}[[[run.elapsed]]]))"#
        )
    };
    let yaml = format!(
        r#"apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {{name: open-ended-latency}}
spec:
  args: [{{name: service}}]
  metrics:
  - name: latency-vs-stable
    interval: 1m
    failureLimit: 0
    inconclusiveLimit: 2
    provider:
      plugin:
        rollgate/analysis:
          prometheus: {{address: "{address}"}}
          compare:
            histogram: {{canary: '{c}', stable: '{s}'}}
            maxIncrease: 0.1
            confidence: 0.95
            minRequests: 500
          noData: inconclusive
"#,
        c = q("canary"),
        s = q("stable"),
    );
    let path = dir.join("histogram.yaml");
    std::fs::write(&path, yaml).unwrap();
    path
}

fn h_backtest(file: &Path, service: &str, from: i64, to: i64) -> (i32, Value, String) {
    let out = Command::new(support::rollgate_bin())
        .arg("backtest")
        .args([
            "-f",
            file.to_str().unwrap(),
            "--from",
            &h_at(from),
            "--to",
            &h_at(to),
        ])
        .args(["--arg", &format!("service={service}"), "-o", "json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let doc = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}\n{stderr}"));
    (out.status.code().unwrap_or(-1), doc, stderr)
}

/// A canary 50 % slower from the last three hours of a three-day open-ended run fails within
/// minutes of the change, and the failing measurement says why: the evidence, the threshold,
/// the bounds it counted slow requests above and the run's clock. Before the histogram form had
/// its e-detector, this run was judged by the open-ended spending on `[1m]` windows.
#[test]
fn a_late_latency_regression_fails_the_three_day_histogram_run_within_minutes() {
    let dir = tempfile::tempdir().unwrap();
    let file = histogram_template(dir.path(), &histogram_server().url);
    let started = Instant::now();
    let (code, doc, stderr) = h_backtest(&file, "slow", H_FROM + 60, 0);
    assert_eq!(code, 1, "{doc}\n{stderr}");
    assert_eq!(doc["phase"], "Failed", "{}", doc["summary"]);
    let ended = chrono::DateTime::parse_from_rfc3339(doc["endedAt"].as_str().unwrap()).unwrap();
    let after = ended.timestamp() - (histogram_server().base + SLOW_AT);
    assert!(
        (60..=10 * 60).contains(&after),
        "failed {after} s after the onset: {doc}"
    );
    let last = doc["timeline"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["phase"], "Failed", "{last}");
    let message = last["message"].as_str().unwrap();
    assert!(
        message.contains("slower than") && message.contains("needed to fail"),
        "{message}"
    );
    let value: Value = serde_json::from_str(last["value"].as_str().unwrap()).unwrap();
    assert!(value["evidence"].as_f64().unwrap() >= 20.0, "{value}");
    assert_eq!(value["threshold"], 20.0, "{value}");
    assert!(value["elapsed"].as_str().unwrap().ends_with('s'), "{value}");
    let (b_c, b_s) = (
        value["bounds"]["canary"].as_f64().unwrap(),
        value["bounds"]["stable"].as_f64().unwrap(),
    );
    assert!(b_c >= 1.1 * b_s * (1.0 - 1e-12), "{value}");
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn an_equally_fast_canary_runs_the_three_days_of_the_histogram_form() {
    let dir = tempfile::tempdir().unwrap();
    let file = histogram_template(dir.path(), &histogram_server().url);
    let (code, doc, stderr) = h_backtest(&file, "same", H_FROM + 60, -60);
    assert_eq!(code, 0, "{doc}\n{stderr}");
    assert_eq!(doc["phase"], "Successful", "{}", doc["summary"]);
    assert_eq!(doc["terminatedAtWindowEnd"], true, "{}", doc["summary"]);
    let checks = doc["metrics"][0]["count"].as_u64().unwrap();
    assert!(checks >= 4_000, "{checks} checks: {}", doc["summary"]);
}

/// Forms without a test that stays valid over an unlimited run are refused when the template
/// loads, naming the key, instead of a gate that stops being able to fail after a few days: the
/// distribution form, and a ratio metric whose counts have no window to set to the interval.
#[test]
fn open_ended_metrics_without_an_unlimited_test_are_refused_at_load() {
    let distribution = r#"
          compare:
            canary: histogram_quantile(0.99, sum by (le) (rate(x_bucket{track="canary"}[1m])))
            stable: histogram_quantile(0.99, sum by (le) (rate(x_bucket{track="stable"}[1m])))"#;
    // Recording rules with the window inside their names: nothing to set per interval.
    let ratio_without_window = r#"
          compare:
            canary: {bad: 'sum(job:errors:increase5m{track="canary"})', total: 'sum(job:requests:increase5m{track="canary"})'}
            stable: {bad: 'sum(job:errors:increase5m{track="stable"})', total: 'sum(job:requests:increase5m{track="stable"})'}"#;
    for (compare, expected) in [
        (distribution, "needs `count` or the histogram form"),
        (
            ratio_without_window,
            "count queries with one range window each",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.yaml");
        std::fs::write(
            &path,
            format!(
                r#"apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {{name: d}}
spec:
  metrics:
  - name: m
    interval: 5m
    provider:
      plugin:
        rollgate/analysis:
          prometheus: {{address: "http://127.0.0.1:9"}}{compare}
          noData: inconclusive
"#
            ),
        )
        .unwrap();
        let out = Command::new(support::rollgate_bin())
            .args(["dry-run", "-f", path.to_str().unwrap()])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{text}");
        assert!(
            text.contains("spec.metrics[0].count") && text.contains(expected),
            "{text}"
        );
    }
}
