//! The shipped examples run on their replay files with the documented verdicts, and the replay
//! files can be re-recorded from a real Prometheus with generated data:
//! `ROLLGATE_RECORD_EXAMPLES=1 cargo test --release --test it examples:: -- --ignored`.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// (template, replay, args, expected exit code, expected overall phase)
#[rustfmt::skip]
const CASES: &[(&str, &str, &[&str], i32, &str)] = &[
    ("error-rate.yaml", "error-rate.replay.json", &[], 0, "Successful"),
    ("error-rate.yaml", "error-rate.replay.json", &["service=bad"], 1, "Failed"),
    ("error-rate.yaml", "error-rate.replay.json", &["service=lowtraffic"], 2, "Inconclusive"),
    // The built-in provider fails 0/0 as a condition failure; rollgate calls it too little traffic.
    ("error-rate.yaml", "error-rate.replay.json", &["service=idle"], 1, "Failed"),
    // The managed services' auth modes (not exercised by a replay) with the same answers.
    ("azure-managed-prometheus.yaml", "error-rate.replay.json", &[], 0, "Successful"),
    ("azure-managed-prometheus.yaml", "error-rate.replay.json", &["service=bad"], 1, "Failed"),
    ("google-managed-prometheus.yaml", "error-rate.replay.json", &[], 0, "Successful"),
    ("google-managed-prometheus.yaml", "error-rate.replay.json", &["service=lowtraffic"], 2, "Inconclusive"),
    ("latency-p99.yaml", "latency-p99.replay.json", &[], 1, "Failed"),
    ("canary-vs-stable.yaml", "canary-vs-stable.replay.json", &[], 0, "Successful"),
    ("canary-vs-stable.yaml", "canary-vs-stable.replay.json", &["service=cmp-bad"], 1, "Failed"),
    ("canary-vs-stable.yaml", "canary-vs-stable.replay.json", &["service=cmp-low"], 2, "Inconclusive"),
    // The standard fleet (stragglers, silent clusters, stalled workloads), the clean fleet, and a
    // selector that matches nothing (noData: fail).
    ("fleet-gate.yaml", "fleet-gate.replay.json", &[], 1, "Failed"),
    ("fleet-gate.yaml", "fleet-gate.replay.json", &["namespace=logging", "container=log-shipper", "digest=sha256:9375e83c1d07ce0547026065177309cddcaf29df2b84b913ef5278587b3b41e4"], 0, "Successful"),
    ("fleet-gate.yaml", "fleet-gate.replay.json", &["namespace=nowhere"], 1, "Failed"),
];

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

/// `--at` and `--run-start` for a template on the run clock (`[[run.elapsed]]`): ten minutes
/// into a run that ends at `at` (Unix seconds), the time its replay was recorded at.
fn run_clock_args(template: &str, at: i64) -> Vec<String> {
    let text = std::fs::read_to_string(examples().join(template)).unwrap();
    if !text.contains("[[run.elapsed]]") {
        return Vec::new();
    }
    let time = |t: i64| {
        chrono::DateTime::from_timestamp(t, 0)
            .unwrap()
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    };
    vec![
        "--at".into(),
        time(at),
        "--run-start".into(),
        time(at - 600),
    ]
}

/// When a replay was recorded: the evaluation time of its first instant query's answer.
fn replay_time(replay: &Path) -> i64 {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(replay).unwrap()).unwrap();
    doc["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "instant")
        .find_map(|e| {
            let body: Value = serde_json::from_str(e["body"].as_str()?).ok()?;
            body["data"]["result"][0]["value"][0].as_f64()
        })
        .map(|t| t.round() as i64)
        .unwrap()
}

fn dry_run(template: &str, extra: &[&str], args: &[&str]) -> Output {
    let mut cmd = Command::new(crate::support::rollgate_bin());
    cmd.arg("dry-run")
        .arg("-f")
        .arg(examples().join(template))
        .args(extra);
    for a in args {
        cmd.arg("--arg").arg(a);
    }
    cmd.output().expect("run rollgate")
}

#[test]
fn examples_give_their_documented_verdicts_from_replays() {
    for (template, replay, args, code, phase) in CASES {
        let replay = examples().join(replay);
        let clock = run_clock_args(template, replay_time(&replay));
        let mut extra = vec!["--replay", replay.to_str().unwrap(), "-o", "json"];
        extra.extend(clock.iter().map(String::as_str));
        let out = dry_run(template, &extra, args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(*code),
            "{template} {args:?}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: Value = serde_json::from_str(&stdout).expect("JSON output");
        assert_eq!(doc["phase"], *phase, "{template} {args:?}");
        for m in doc["metrics"].as_array().unwrap() {
            assert!(!m["message"].as_str().unwrap_or_default().is_empty(), "{m}");
        }
    }
}

#[test]
fn the_readme_command_prints_a_table() {
    let replay = examples().join("error-rate.replay.json");
    let out = dry_run(
        "error-rate.yaml",
        &["--replay", replay.to_str().unwrap()],
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("METRIC"), "{stdout}");
    assert!(stdout.contains("error-ratio "), "{stdout}");
    assert!(
        stdout.trim_end().ends_with("Overall: Successful"),
        "{stdout}"
    );
}

#[test]
fn a_query_missing_from_the_replay_is_an_error_that_names_it() {
    let replay = examples().join("error-rate.replay.json");
    let out = dry_run(
        "error-rate.yaml",
        &["--replay", replay.to_str().unwrap()],
        &["service=nowhere"],
    );
    assert_eq!(out.status.code(), Some(3));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("nowhere"), "{stdout}");
}

/// Re-records every replay file from the shared test Prometheus at its data's time base.
#[test]
#[ignore = "regenerates examples/*.replay.json; run with ROLLGATE_RECORD_EXAMPLES=1"]
fn record_examples() {
    if std::env::var_os("ROLLGATE_RECORD_EXAMPLES").is_none() {
        return;
    }
    let prom = support::prom::shared();
    let at = chrono::DateTime::from_timestamp(prom.base, 0)
        .unwrap()
        .to_rfc3339();
    let mut files: std::collections::BTreeMap<&str, Vec<Value>> = Default::default();
    for (template, replay, args, _, _) in CASES {
        let tmp = tempfile::NamedTempFile::new().unwrap();
        let clock = run_clock_args(template, prom.base);
        let mut extra = vec![
            "--prometheus",
            &prom.url,
            "--record",
            tmp.path().to_str().unwrap(),
        ];
        if clock.is_empty() {
            extra.extend(["--at", at.as_str()]);
        }
        extra.extend(clock.iter().map(String::as_str));
        let out = dry_run(template, &extra, args);
        assert!(
            out.status.code().is_some_and(|c| c < 3),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let doc: Value =
            serde_json::from_str(&std::fs::read_to_string(tmp.path()).unwrap()).unwrap();
        files
            .entry(replay)
            .or_default()
            .extend(doc["entries"].as_array().unwrap().iter().cloned());
    }
    for (replay, mut entries) in files {
        // A replay is looked up by query, not time: keep it readable and time-free.
        for e in &mut entries {
            e["time"] = Value::Null;
        }
        let mut seen = std::collections::HashSet::new();
        entries.retain(|e| seen.insert(e["query"].to_string()));
        let doc = serde_json::json!({"version": 1, "entries": entries});
        std::fs::write(
            examples().join(replay),
            serde_json::to_string_pretty(&doc).unwrap() + "\n",
        )
        .unwrap();
    }
}

/// The backtest example: the bad canary's run fails at its third failed check; the good one
/// runs to the window's end. Both from the replay, with no Prometheus.
#[test]
fn the_backtest_example_replays_with_its_documented_verdicts() {
    let replay = examples().join("backtest.replay.json");
    for (service, code, phase) in [("bad", 1, "Failed"), ("good", 0, "Successful")] {
        let out = Command::new(crate::support::rollgate_bin())
            .arg("backtest")
            .arg("-f")
            .arg(examples().join("backtest.yaml"))
            .args(["--replay", replay.to_str().unwrap(), "-o", "json"])
            .args([
                "--from",
                "2026-11-29T19:00:00Z",
                "--to",
                "2026-11-29T23:00:00Z",
            ])
            .args(["--arg", &format!("service={service}")])
            .output()
            .expect("run rollgate");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(code), "{service}: {stdout}");
        let doc: Value = serde_json::from_str(&stdout).expect("JSON output");
        assert_eq!(doc["phase"], phase);
        assert_eq!(
            doc["queries"]["passedThrough"], 0,
            "{service}: every check from the replay"
        );
    }
}

/// The README's `fleet versions` example is what the command prints on the shipped example.
#[test]
fn the_readme_fleet_versions_example_is_what_the_command_prints() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let start = readme
        .find("$ rollgate fleet versions")
        .expect("README has a fleet versions example");
    let block = &readme[start..];
    let block = &block[..block.find("```").expect("the example's block ends")];
    let mut lines = block.lines();
    let command = lines.next().unwrap().trim_start_matches("$ rollgate ");
    let expected: Vec<&str> = lines.collect();
    let out = Command::new(crate::support::rollgate_bin())
        .current_dir(root)
        .args(command.split_whitespace())
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        expected,
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
