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
