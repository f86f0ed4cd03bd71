//! Conformance with Argo Rollouts v1.9.1's own answers for `successCondition` /
//! `failureCondition`.
//!
//! Every case of `tests/data/argo-conditions/cases.jsonl` (made with Argo v1.9.1's real
//! Prometheus provider and evaluator, see the README there) goes through the path of
//! `rollgate dry-run` for Argo's built-in `prometheus` provider: the metric is read from its
//! AnalysisTemplate form, the recorded Prometheus answer is replayed by the replay backend and
//! decoded by the same decoder as a live answer, and the engine turns it into `result`, the
//! conditions and a phase. The phase must be Argo's, unless the case is in `allowlist.tsv`
//! with a reason documented in `docs/conditions.md`.
//!
//! The test prints the counts by group; `cargo test --release --test it argo_conformance:: --
//! --nocapture` shows them. It also runs in debug builds (overflow checks on).
//!
//! The other tests show that one metric's broken condition errors only that metric, as in
//! Argo: through the `rollgate dry-run` binary, and through `rollgate serve`'s HTTP surface.

use crate::serve_common;
use crate::support;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::Command;

use rollgate::engine::{AddressPolicy, Engine, EvalOptions};
use rollgate::measurement::Phase;
use rollgate::prometheus::{Backend, Replay};
use rollgate::spec::Metric;
use serde_json::{json, Value};

const QUERY: &str = "conformance_case";

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/argo-conditions")
}

struct Case {
    id: String,
    group: String,
    success: String,
    failure: String,
    status: u16,
    body: String,
    argo_phase: String,
    argo_error: String,
}

fn load_cases() -> Vec<Case> {
    let text = std::fs::read_to_string(data_dir().join("cases.jsonl")).expect("cases.jsonl");
    let str_at = |v: &Value, path: &[&str]| -> String {
        let mut cur = v;
        for p in path {
            cur = &cur[*p];
        }
        cur.as_str()
            .unwrap_or_else(|| panic!("{path:?} is not a string"))
            .to_string()
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let v: Value = serde_json::from_str(line).expect("a JSON case");
            Case {
                id: str_at(&v, &["id"]),
                group: str_at(&v, &["group"]),
                success: str_at(&v, &["successCondition"]),
                failure: str_at(&v, &["failureCondition"]),
                status: v["prometheus"]["status"].as_u64().expect("status") as u16,
                body: str_at(&v, &["prometheus", "body"]),
                argo_phase: str_at(&v, &["argo_v1_9_1", "phase"]),
                argo_error: str_at(&v, &["argo_v1_9_1", "error"]),
            }
        })
        .collect()
}

/// `id -> reason`, from `allowlist.tsv` (`#` starts a comment line).
fn load_allowlist() -> HashMap<String, String> {
    let text = std::fs::read_to_string(data_dir().join("allowlist.tsv")).unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (id, reason) = l.split_once('\t').expect("id<TAB>reason");
            assert!(
                !reason.trim().is_empty(),
                "{id}: an allowlisted case needs a reason"
            );
            (id.to_string(), reason.to_string())
        })
        .collect()
}

/// The metric as an AnalysisTemplate would hold it (Argo's built-in `prometheus` provider).
fn metric_json(case: &Case) -> Value {
    let mut m = json!({
        "name": "m",
        "provider": {"prometheus": {"address": "http://127.0.0.1:9", "query": QUERY}},
    });
    if !case.success.is_empty() {
        m["successCondition"] = json!(case.success);
    }
    if !case.failure.is_empty() {
        m["failureCondition"] = json!(case.failure);
    }
    m
}

/// rollgate's phase and message for one case, through the dry run's path.
async fn rollgate_phase(case: &Case) -> (Phase, String) {
    let metric = match Metric::from_value(&metric_json(case), "spec.metrics[0]") {
        Ok(m) => m,
        // A metric the template reader refuses is an Error in a dry run.
        Err(e) => return (Phase::Error, format!("refused: {e}")),
    };
    let recording = json!({"version": 1, "entries": [{
        "kind": "instant", "query": QUERY, "time": null,
        "status": case.status, "body": case.body,
    }]});
    let replay = Replay::from_json(&recording.to_string()).expect("a valid recording");
    let engine = Engine::new(Backend::Replay(replay), AddressPolicy::default());
    let m = engine.measure(&metric, &EvalOptions::default()).await;
    (m.phase, m.message)
}

#[derive(Default)]
struct Counts {
    cases: usize,
    agree: usize,
    allowlisted: usize,
    differ: usize,
}

#[tokio::test]
async fn every_case_gets_argo_v1_9_1s_phase_or_a_documented_difference() {
    let cases = load_cases();
    let allowlist = load_allowlist();
    assert!(cases.len() >= 1804, "the corpus is incomplete");
    let docs = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/conditions.md"),
    )
    .unwrap_or_default();

    let mut by_group: BTreeMap<String, Counts> = BTreeMap::new();
    let mut differences = Vec::new();
    let mut stale = Vec::new();
    for case in &cases {
        let (phase, message) = rollgate_phase(case).await;
        // The answer-shape groups (`prom/nan`, `prom/matrix-empty`, ...) count as one.
        let group = match case.group.split_once('/') {
            Some((head, _)) => format!("{head}/*"),
            None => case.group.clone(),
        };
        let counts = by_group.entry(group).or_default();
        counts.cases += 1;
        let agrees = phase.as_str() == case.argo_phase;
        match (agrees, allowlist.get(&case.id)) {
            (true, None) => counts.agree += 1,
            (true, Some(_)) => {
                counts.agree += 1;
                stale.push(case.id.clone());
            }
            (false, Some(reason)) => {
                counts.allowlisted += 1;
                assert!(
                    docs.contains(reason.trim()),
                    "{}: allowlist reason {reason:?} is not in docs/conditions.md",
                    case.id
                );
            }
            (false, None) => {
                counts.differ += 1;
                differences.push(format!(
                    "{} [{}] success={:?} failure={:?}: Argo {} ({}), rollgate {} ({})",
                    case.id,
                    case.group,
                    case.success,
                    case.failure,
                    case.argo_phase,
                    case.argo_error,
                    phase,
                    message
                ));
            }
        }
    }

    let mut total = Counts::default();
    println!(
        "{:<32} {:>6} {:>6} {:>12} {:>6}",
        "group", "cases", "agree", "allowlisted", "differ"
    );
    for (group, c) in &by_group {
        println!(
            "{group:<32} {:>6} {:>6} {:>12} {:>6}",
            c.cases, c.agree, c.allowlisted, c.differ
        );
        total.cases += c.cases;
        total.agree += c.agree;
        total.allowlisted += c.allowlisted;
        total.differ += c.differ;
    }
    println!(
        "{:<32} {:>6} {:>6} {:>12} {:>6}",
        "total", total.cases, total.agree, total.allowlisted, total.differ
    );
    for d in differences.iter().take(400) {
        println!("DIFF {d}");
    }
    assert!(
        stale.is_empty(),
        "allowlisted cases that now agree with Argo (remove them): {stale:?}"
    );
    assert!(
        differences.is_empty(),
        "{} undocumented differences from Argo v1.9.1, first: {}",
        differences.len(),
        differences.first().map(String::as_str).unwrap_or_default()
    );
}

/// A template with a healthy metric over the scenario data and one whose condition does not
/// compile; `provider` is the YAML of the provider both use, `{query}` its query.
fn template_with_a_broken_metric(name: &str, provider: &str) -> String {
    let healthy = provider.replace("{query}", "vector(1)");
    let broken = provider.replace("{query}", "vector(2)");
    format!(
        r#"apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: {name}
spec:
  metrics:
    - name: healthy
      successCondition: result[0] >= 0
{healthy}    - name: broken
      successCondition: "result[0] >>= 1"
{broken}"#
    )
}

#[test]
fn a_broken_condition_errors_only_its_metric_in_a_dry_run() {
    let dir = tempfile::tempdir().unwrap();
    let provider = "      provider:\n        prometheus:\n          address: http://127.0.0.1:9\n          query: \"{query}\"\n";
    let template = dir.path().join("t.yaml");
    std::fs::write(&template, template_with_a_broken_metric("t", provider)).unwrap();
    let answer = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1"]}]}}"#;
    let entry = |q: &str| json!({"kind": "instant", "query": q, "time": null, "status": 200, "body": answer});
    let replay = dir.path().join("replay.json");
    let recording = json!({"version": 1, "entries": [entry("vector(1)"), entry("vector(2)")]});
    std::fs::write(&replay, recording.to_string()).unwrap();

    let out = Command::new(crate::support::rollgate_bin())
        .args(["dry-run", "-o", "json", "-f"])
        .arg(&template)
        .arg("--replay")
        .arg(&replay)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let doc: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    // Any Error (and no Failed) is an Error overall: exit code 3.
    assert_eq!(out.status.code(), Some(3), "{doc}");
    assert_eq!(doc["phase"], "Error");
    let metrics = doc["metrics"].as_array().unwrap();
    let row = |name: &str| metrics.iter().find(|m| m["name"] == name).unwrap();
    assert_eq!(row("healthy")["phase"], "Successful", "{doc}");
    assert_eq!(row("healthy")["value"], "[1]");
    assert_eq!(row("broken")["phase"], "Error", "{doc}");
    let message = row("broken")["message"].as_str().unwrap();
    assert!(
        message.starts_with("successCondition `result[0] >>= 1` is not a valid condition: syntax error at line 1, column"),
        "{message}"
    );

    // The table names it too.
    let out = Command::new(crate::support::rollgate_bin())
        .args(["dry-run", "-f"])
        .arg(&template)
        .arg("--replay")
        .arg(&replay)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    let line = table.lines().find(|l| l.starts_with("broken")).unwrap();
    assert!(
        line.contains("Error") && line.contains("`result[0] >>= 1`"),
        "{table}"
    );
}

#[test]
fn a_template_with_a_broken_condition_loads_in_serve_and_that_metric_answers_error() {
    let prom = support::prom::shared();
    let provider = "      provider:\n        plugin:\n          rollgate/analysis:\n            query: \"{query}\"\n            noData: fail\n";
    let dir =
        serve_common::template_dir(&[("t.yaml", template_with_a_broken_metric("mixed", provider))]);
    let server = serve_common::ServeProcess::start(&[
        "--templates",
        serve_common::path_str(dir.path()),
        "--prometheus",
        prom.url.as_str(),
    ]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let url = format!("{}/flagger/v1/check", server.url);
    let client = serve_common::client();
    runtime.block_on(async {
        let check = |metadata: &'static [(&'static str, &'static str)]| {
            serve_common::post(
                &client,
                &url,
                serve_common::flagger_payload("Progressing", metadata),
                false,
            )
        };
        // The healthy metric alone is evaluated and passes.
        let (status, text, _) = check(&[("template", "mixed"), ("metric", "healthy")]).await;
        assert_eq!(status, 200, "{text}");
        // The broken one answers Error (503), naming the condition and the compile error.
        let (status, text, _) = check(&[("template", "mixed"), ("metric", "broken")]).await;
        assert_eq!(status, 503, "{text}");
        assert!(
            text.contains(
                "successCondition `result[0] >>= 1` is not a valid condition: syntax error"
            ),
            "{text}"
        );
        // Both: the Error wins over the Successful one, which is still reported.
        let (status, text, _) = check(&[("template", "mixed")]).await;
        assert_eq!(status, 503, "{text}");
        assert!(text.contains("healthy Successful"), "{text}");
    });
}
