//! `rollgate backtest` end to end: the binary against a real Prometheus backfilled with a canary
//! that goes bad at a known time and a healthy one; batched (range queries) versus one instant
//! query per check; record/replay; bad input; Prometheus failing in the middle of the run.

use crate::support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use serde_json::Value;
use support::prom::PromServer;
use support::scenarios::{base_now, push_sample, times, Dataset};

/// Sample step of the generated counters.
const STEP: i64 = 15;
/// History: 8 h before `base`.
const FROM: i64 = -8 * 3600;
/// The `bad` service's error rate jumps at `base + BAD_AT`.
const BAD_AT: i64 = -4 * 3600;

/// `bt_requests_total{service, code}`: 100 ok/s, 0.5 errors/s; `bad` has 10 errors/s from
/// `BAD_AT` on. Counters are exact integers so every query result is deterministic.
fn dataset(base: i64) -> String {
    let mut ds = Dataset::new();
    let buf = ds.family("bt_requests", "counter");
    for service in ["good", "bad"] {
        let (mut ok, mut err) = (0.0f64, 0.0f64);
        for t in times(base, FROM, 0, STEP) {
            push_sample(
                buf,
                "bt_requests_total",
                &[("service", service), ("code", "200")],
                ok,
                t,
            );
            push_sample(
                buf,
                "bt_requests_total",
                &[("service", service), ("code", "500")],
                err,
                t,
            );
            ok += 100.0 * STEP as f64;
            let rate = if service == "bad" && t >= base + BAD_AT {
                10.0
            } else {
                0.5
            };
            err += rate * STEP as f64;
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

/// The template: a guarded rollgate query metric (failureLimit 2), Argo's own prometheus
/// provider metric, and a `web` metric rollgate skips.
fn template(dir: &Path, address: &str) -> std::path::PathBuf {
    let ratio = r#"sum(rate(bt_requests_total{service="{{args.service}}",code="500"}[5m])) / sum(rate(bt_requests_total{service="{{args.service}}"}[5m]))"#;
    let total = r#"sum(increase(bt_requests_total{service="{{args.service}}"}[5m]))"#;
    let yaml = format!(
        r#"apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {{name: error-rate}}
spec:
  args: [{{name: service}}]
  metrics:
  - name: error-rate
    interval: 5m
    failureLimit: 2
    successCondition: result[0] < 0.02
    provider:
      plugin:
        rollgate/analysis:
          prometheus: {{address: "{address}"}}
          query: '{ratio}'
          minRequests: {{query: '{total}', count: 300}}
          noData: inconclusive
  - name: builtin
    interval: 10m
    failureLimit: 5
    successCondition: len(result) == 0 || result[0] < 0.05
    provider:
      prometheus: {{address: "{address}", query: '{ratio}'}}
  - name: smoke
    provider:
      web: {{url: "http://example.invalid/"}}
"#
    );
    let path = dir.join("template.yaml");
    std::fs::write(&path, yaml).unwrap();
    path
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", self.stdout, self.stderr))
    }
}

fn backtest(args: &[&str]) -> Run {
    let out = Command::new(crate::support::rollgate_bin())
        .arg("backtest")
        .args(args)
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn window(file: &Path, service: &str, from: i64, to: i64, extra: &[&str]) -> Run {
    let (from, to) = (at(from), at(to));
    let service = format!("service={service}");
    let mut args = vec![
        "-f",
        file.to_str().unwrap(),
        "--from",
        &from,
        "--to",
        &to,
        "--arg",
        &service,
    ];
    args.extend_from_slice(extra);
    backtest(&args)
}

fn timeline_of(metric: &str, doc: &Value) -> Vec<(String, String)> {
    doc["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["metric"] == metric)
        .map(|e| {
            (
                e["time"].as_str().unwrap().to_string(),
                e["phase"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn the_bad_release_fails_at_its_third_failed_check_as_argo_would_end_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = template(dir.path(), &server().url);
    let run = window(&file, "bad", -5 * 3600, -3600, &["-o", "json"]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let doc = run.json();
    assert_eq!(doc["phase"], "Failed");
    // Checks every 5 min from -5 h: the one at -4 h still sees the old rate over [5m]; the
    // next three (-3h55, -3h50, -3h45) fail; failureLimit 2 ends the run at the third.
    assert_eq!(doc["endedAt"], at(BAD_AT + 15 * 60));
    let summary = doc["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("Failed at ")
            && summary.contains("error-rate failed 3 times, failureLimit 2"),
        "{summary}"
    );
    let error_rate = timeline_of("error-rate", &doc);
    assert_eq!(error_rate.len(), 16);
    assert_eq!(error_rate[12], (at(BAD_AT), "Successful".into()));
    assert_eq!(error_rate[13], (at(BAD_AT + 300), "Failed".into()));
    // The built-in metric (failureLimit 5) measured every 10 min until the run ended.
    assert_eq!(timeline_of("builtin", &doc).len(), 8);
    assert_eq!(doc["skipped"][0]["name"], "smoke");
    assert_eq!(doc["skipped"][0]["provider"], "web");
    // The batched path served the checks from range queries.
    // 16 error-rate checks x 2 queries + 8 builtin checks, from two range fetches.
    assert_eq!(doc["queries"]["servedFromRange"], 40, "{}", doc["queries"]);
    assert_eq!(doc["queries"]["passedThrough"], 0);
}

#[test]
fn the_table_names_time_metric_phase_and_ends_with_one_sentence() {
    let dir = tempfile::tempdir().unwrap();
    let file = template(dir.path(), &server().url);
    let run = window(&file, "bad", -5 * 3600, -3600, &[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let mut lines = run.stdout.lines();
    let header = lines.next().unwrap();
    assert!(header.starts_with("TIME") && header.contains("METRIC") && header.contains("MESSAGE"));
    assert!(run.stdout.contains("skipped: smoke (provider web"));
    let last = run.stdout.lines().last().unwrap();
    assert!(last.starts_with("Failed at "), "{last}");
}

#[test]
fn a_healthy_release_runs_until_the_window_ends_and_is_terminated_successful() {
    let dir = tempfile::tempdir().unwrap();
    let file = template(dir.path(), &server().url);
    let run = window(&file, "good", -5 * 3600, -3600, &["-o", "json"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let doc = run.json();
    assert_eq!(doc["phase"], "Successful");
    assert_eq!(doc["terminatedAtWindowEnd"], true);
    assert_eq!(doc["endedAt"], at(-3600));
    assert_eq!(timeline_of("error-rate", &doc).len(), 49);
    assert_eq!(timeline_of("builtin", &doc).len(), 25);
}

#[test]
fn batched_and_one_instant_query_per_check_give_identical_measurements() {
    let dir = tempfile::tempdir().unwrap();
    let file = template(dir.path(), &server().url);
    for service in ["bad", "good"] {
        let batched = window(&file, service, -6 * 3600, -2 * 3600, &["-o", "json"]).json();
        let instant = window(
            &file,
            service,
            -6 * 3600,
            -2 * 3600,
            &["-o", "json", "--no-batch"],
        )
        .json();
        assert_eq!(batched["timeline"], instant["timeline"], "{service}");
        assert_eq!(batched["metrics"], instant["metrics"], "{service}");
        assert_eq!(batched["summary"], instant["summary"], "{service}");
        assert!(batched["queries"]["servedFromRange"].as_u64().unwrap() > 0);
        assert_eq!(instant["queries"]["batched"], false);
    }
}

#[test]
fn a_recording_replays_the_same_run_with_no_prometheus() {
    let dir = tempfile::tempdir().unwrap();
    let file = template(dir.path(), &server().url);
    let rec = dir.path().join("rec.json");
    let live = window(
        &file,
        "bad",
        -5 * 3600,
        -3600,
        &["-o", "json", "--record", rec.to_str().unwrap()],
    );
    assert_eq!(live.code, 1, "{}", live.stderr);
    // The replayed template points at a closed port: every answer comes from the recording.
    let offline = template(dir.path(), "http://127.0.0.1:9");
    let replayed = window(
        &offline,
        "bad",
        -5 * 3600,
        -3600,
        &["-o", "json", "--replay", rec.to_str().unwrap()],
    );
    assert_eq!(replayed.code, 1, "{}", replayed.stderr);
    assert_eq!(live.json()["timeline"], replayed.json()["timeline"]);
}

#[test]
fn bad_windows_are_refused_before_any_query() {
    let dir = tempfile::tempdir().unwrap();
    let file = template(dir.path(), "http://127.0.0.1:9");
    let run = window(&file, "bad", -3600, -7200, &[]);
    // A window that ends before it starts is a usage error (64), not a verdict.
    assert_eq!(run.code, 64);
    assert!(run.stdout.is_empty());
    assert!(
        run.stderr.contains("--to (") && run.stderr.contains("must be after --from"),
        "{}",
        run.stderr
    );

    let run = window(&file, "bad", -8 * 3600, 0, &["--max-checks", "100"]);
    assert_eq!(run.code, 3);
    assert!(run.stdout.is_empty());
    // 8 h: error-rate 97 checks + builtin 49 = 146 planned.
    assert!(
        run.stderr
            .contains("needs 146 checks, more than --max-checks 100"),
        "{}",
        run.stderr
    );
}

#[test]
fn an_unreachable_prometheus_errors_the_run_after_five_errors_ten_seconds_apart() {
    let dir = tempfile::tempdir().unwrap();
    let file = template(dir.path(), &support::stub::closed_port());
    let run = window(&file, "bad", -5 * 3600, -3600, &["-o", "json"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    let doc = run.json();
    assert_eq!(doc["phase"], "Error");
    let times: Vec<String> = timeline_of("error-rate", &doc)
        .into_iter()
        .map(|t| t.0)
        .collect();
    let expected: Vec<String> = (0..5).map(|k| at(-5 * 3600 + 10 * k)).collect();
    assert_eq!(times, expected);
    assert!(doc["summary"]
        .as_str()
        .unwrap()
        .contains("5 errors in a row, consecutiveErrorLimit 4"));
}

/// A proxy in front of the real Prometheus that answers 503 to instant queries whose `time`
/// lies in `[fail_from, fail_to)` (Unix seconds) and forwards everything else.
fn failing_proxy(target: std::net::SocketAddr, fail_from: i64, fail_to: i64) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in listener.incoming().take(10_000) {
            let Ok(mut conn) = conn else { continue };
            let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
            let Some(request) = read_request(&mut conn) else {
                continue;
            };
            let text = String::from_utf8_lossy(&request).into_owned();
            let time = text
                .split(['&', '?', '\n', ' '])
                .find_map(|kv| kv.strip_prefix("time="))
                .and_then(|v| v.trim().parse::<f64>().ok());
            if time.is_some_and(|t| t >= fail_from as f64 && t < fail_to as f64) {
                let _ = conn.write_all(
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
                continue;
            }
            let Ok(mut upstream) = TcpStream::connect(target) else {
                continue;
            };
            let _ = upstream.write_all(&request);
            let mut answer = Vec::new();
            let _ = upstream.read_to_end(&mut answer);
            let _ = conn.write_all(&answer);
        }
    });
    url
}

/// Reads one HTTP request (headers and a Content-Length body), forcing `Connection: close`.
fn read_request(conn: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        let n = conn.read(&mut chunk).ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > 1 << 20 {
            return None;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < header_end + length {
        let n = conn.read(&mut chunk).ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf[..header_end]).into_owned();
    let mut out: String = head
        .lines()
        .filter(|l| !l.to_ascii_lowercase().starts_with("connection:") && !l.is_empty())
        .map(|l| format!("{l}\r\n"))
        .collect();
    out.push_str("Connection: close\r\n\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(&buf[header_end..]);
    Some(bytes)
}

#[test]
fn prometheus_failing_mid_run_gives_error_measurements_that_count_toward_the_error_limit() {
    let dir = tempfile::tempdir().unwrap();
    let base = server().base;
    let from = -5 * 3600;
    // Checks at from, +5m, +10m succeed; from +15m on, for 100 s, every query gets 503.
    let fail_from = base + from + 15 * 60;
    let url = failing_proxy(server().addr, fail_from, fail_from + 100);
    let file = template(dir.path(), &url);
    let run = window(&file, "good", from, -3600, &["-o", "json", "--no-batch"]);
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
    let doc = run.json();
    assert_eq!(doc["phase"], "Error");
    let error_rate = timeline_of("error-rate", &doc);
    let phases: Vec<&str> = error_rate.iter().map(|t| t.1.as_str()).collect();
    assert_eq!(
        phases,
        [
            "Successful",
            "Successful",
            "Successful",
            "Error",
            "Error",
            "Error",
            "Error",
            "Error"
        ]
    );
    assert_eq!(error_rate[7].0, at(from + 15 * 60 + 40));
    assert!(doc["metrics"][0]["reason"]
        .as_str()
        .unwrap()
        .contains("consecutiveErrors (5) > consecutiveErrorLimit (4)"));
}

#[test]
fn a_short_failure_is_retried_and_the_run_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let base = server().base;
    let from = -5 * 3600;
    // 25 s of 503s: errors at +15m, +15m10s, +15m20s; the retry at +15m30s succeeds.
    let fail_from = base + from + 15 * 60;
    let url = failing_proxy(server().addr, fail_from, fail_from + 25);
    let file = template(dir.path(), &url);
    let run = window(
        &file,
        "good",
        from,
        from + 3600,
        &["-o", "json", "--no-batch"],
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let doc = run.json();
    let error_rate = timeline_of("error-rate", &doc);
    assert_eq!(error_rate[3].1, "Error");
    assert_eq!(
        error_rate[6],
        (at(from + 15 * 60 + 30), "Successful".into())
    );
    // After the recovery the schedule counts from the successful check: +20m30s next.
    assert_eq!(error_rate[7].0, at(from + 20 * 60 + 30));
}

/// The shipped example's window: its data has `base` = 2026-11-30T00:00:00Z, so the bad
/// service turns bad at 2026-11-29T20:00:00Z.
const EXAMPLE_BASE: i64 = 1_795_996_800;
const EXAMPLE_FROM: &str = "2026-11-29T19:00:00Z";
const EXAMPLE_TO: &str = "2026-11-29T23:00:00Z";

/// Re-records `examples/backtest.replay.json` from a real Prometheus with the generated data.
#[test]
#[ignore = "regenerates examples/backtest.replay.json; run with ROLLGATE_RECORD_EXAMPLES=1"]
fn record_example() {
    if std::env::var_os("ROLLGATE_RECORD_EXAMPLES").is_none() {
        return;
    }
    let prom = PromServer::start(EXAMPLE_BASE, &dataset(EXAMPLE_BASE));
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let replay = examples.join("backtest.replay.json");
    let template = examples.join("backtest.yaml");
    let _ = std::fs::remove_file(&replay);
    for service in ["bad", "good"] {
        // Both services' answers go into one file: record each, then merge.
        let part = std::env::temp_dir().join(format!("rollgate-bt-{service}.json"));
        let service_arg = format!("service={service}");
        let address_arg = format!("prometheus={}", prom.url);
        let run = backtest(&[
            "-f",
            template.to_str().unwrap(),
            "--from",
            EXAMPLE_FROM,
            "--to",
            EXAMPLE_TO,
            "--arg",
            &service_arg,
            "--arg",
            &address_arg,
            "--record",
            part.to_str().unwrap(),
        ]);
        assert!(run.code < 3, "{}\n{}", run.stdout, run.stderr);
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&part).unwrap()).unwrap();
        let mut merged: Value = std::fs::read_to_string(&replay)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_else(|| serde_json::json!({"version": 1, "entries": []}));
        let entries = merged["entries"].as_array_mut().unwrap();
        entries.extend(doc["entries"].as_array().unwrap().iter().cloned());
        std::fs::write(
            &replay,
            serde_json::to_string_pretty(&merged).unwrap() + "\n",
        )
        .unwrap();
        let _ = std::fs::remove_file(&part);
    }
}

#[test]
fn the_plot_has_a_marker_per_measurement_coloured_by_phase_and_the_threshold() {
    let dir = tempfile::tempdir().unwrap();
    let file = template(dir.path(), &server().url);
    let svg = dir.path().join("run.svg");
    let run = window(
        &file,
        "bad",
        -5 * 3600,
        -3600,
        &["-o", "json", "--plot", svg.to_str().unwrap()],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    let doc = run.json();
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg"), "{}", &text[..100.min(text.len())]);
    let phases: Vec<&str> = doc["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["phase"].as_str().unwrap())
        .collect();
    let failed = phases.iter().filter(|p| **p == "Failed").count();
    let successful = phases.iter().filter(|p| **p == "Successful").count();
    // One circle per measurement plus one legend entry per phase.
    assert_eq!(text.matches("<circle").count(), phases.len() + 5);
    // Red: the failed markers, the legend, the verdict line and each panel's end label.
    assert_eq!(text.matches(r##"fill="#d62728""##).count() - 4, failed);
    assert_eq!(text.matches(r##"fill="#2e9e44""##).count() - 1, successful);
    assert!(
        text.contains("result[0] &lt; 0.02"),
        "the threshold's condition is labelled"
    );
    assert!(text.contains("error-rate failed 3 times, failureLimit 2"));
}

fn releases_file(dir: &Path, entries: &str) -> std::path::PathBuf {
    let path = dir.join("releases.yaml");
    std::fs::write(&path, format!("releases:\n{entries}")).unwrap();
    path
}

fn release(name: &str, service: &str, outcome: &str) -> String {
    format!(
        "  - name: {name}\n    start: {}\n    duration: 4h\n    args: {{service: {service}}}\n    outcome: {outcome}\n",
        at(-5 * 3600)
    )
}

#[test]
fn releases_are_scored_per_run_and_metric_with_a_row_per_alternative() {
    let dir = tempfile::tempdir().unwrap();
    let file = template(dir.path(), &server().url);
    let releases = releases_file(
        dir.path(),
        &(release("v1-bad", "bad", "bad") + &release("v2-good", "good", "good")),
    );
    let run = backtest(&[
        "-f",
        file.to_str().unwrap(),
        "--releases",
        releases.to_str().unwrap(),
        "-o",
        "json",
        "--set",
        "error-rate.failureLimit=0,5",
        "--set",
        "error-rate.successCondition=result[0] < 0.2",
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let doc = run.json();
    let row = |alt: &str, scope: &str| -> Value {
        doc["confusion"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["alternative"] == alt && r["scope"] == scope)
            .unwrap_or_else(|| panic!("no row {alt} {scope}: {doc}"))["counts"]
            .clone()
    };
    // As written: the third failure (failureLimit 2) catches the bad release 75 min in.
    let base = row("as written", "run");
    assert_eq!(
        (base["bad"].as_u64(), base["badCaught"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(base["secondsToCatch"], serde_json::json!([4500]));
    assert_eq!(base["goodFailedOrAborted"], 0);
    // failureLimit 0 catches it at the first failure (65 min), 5 at the sixth (90 min).
    assert_eq!(
        row("error-rate.failureLimit=0", "run")["secondsToCatch"],
        serde_json::json!([3900])
    );
    assert_eq!(
        row("error-rate.failureLimit=5", "run")["secondsToCatch"],
        serde_json::json!([5400])
    );
    // A 20 % threshold misses it on error-rate; the built-in metric (5 %, failureLimit 5)
    // still fails the run at its sixth failure, 2 h in.
    let loose = "error-rate.successCondition=result[0] < 0.2";
    assert_eq!(row(loose, "error-rate")["badCaught"], 0);
    assert_eq!(row(loose, "builtin")["badCaught"], 1);
    assert_eq!(
        row(loose, "run")["secondsToCatch"],
        serde_json::json!([7200])
    );
    assert_eq!(doc["runs"].as_array().unwrap().len(), 8);

    let table = backtest(&[
        "-f",
        file.to_str().unwrap(),
        "--releases",
        releases.to_str().unwrap(),
    ]);
    assert_eq!(table.code, 0, "{}", table.stderr);
    assert!(table.stdout.contains("BAD CAUGHT"), "{}", table.stdout);
}

#[test]
fn a_bad_release_entry_is_named_with_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = template(dir.path(), "http://127.0.0.1:9");
    let releases = releases_file(
        dir.path(),
        &(release("a", "good", "good") + &release("b", "bad", "meh")),
    );
    let run = backtest(&[
        "-f",
        file.to_str().unwrap(),
        "--releases",
        releases.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 3);
    assert!(run.stdout.is_empty());
    assert!(
        run.stderr.contains("releases[1].outcome") && run.stderr.contains("good or bad"),
        "{}",
        run.stderr
    );

    let releases = releases_file(
        dir.path(),
        "  - name: c\n    start: yesterday\n    duration: 1h\n    outcome: good\n",
    );
    let run = backtest(&[
        "-f",
        file.to_str().unwrap(),
        "--releases",
        releases.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 3);
    assert!(run.stderr.contains("releases[0].start"), "{}", run.stderr);

    let good = releases_file(dir.path(), &release("a", "good", "good"));
    let run = backtest(&[
        "-f",
        file.to_str().unwrap(),
        "--releases",
        good.to_str().unwrap(),
        "--set",
        "nosuch.failureLimit=1",
    ]);
    assert_eq!(run.code, 3);
    assert!(
        run.stderr.contains("no metric named \"nosuch\""),
        "{}",
        run.stderr
    );
}
