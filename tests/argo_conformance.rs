//! Conformance with Argo Rollouts v1.9.1's own answers for `successCondition` /
//! `failureCondition` (issue 12).
//!
//! Every case of `tests/data/argo-conditions/cases.jsonl` (made with Argo v1.9.1's real
//! Prometheus provider and evaluator, see the README there) goes through the path of
//! `rollgate dry-run` for Argo's built-in `prometheus` provider: the metric is read from its
//! AnalysisTemplate form, the recorded Prometheus answer is replayed by the replay backend and
//! decoded by the same decoder as a live answer, and the engine turns it into `result`, the
//! conditions and a phase. The phase must be Argo's, unless the case is in `allowlist.tsv`
//! with a reason documented in `docs/conditions.md`.
//!
//! The test prints the counts by group; `cargo test --release --test argo_conformance --
//! --nocapture` shows them. It also runs in debug builds (overflow checks on).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

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
