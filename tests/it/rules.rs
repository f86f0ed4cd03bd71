//! `rollgate rules` for query and compare metrics: every output is accepted by the real
//! `promtool check rules`, and the alerts fire exactly when the gate's verdict is Failed — the
//! engine and the alert expressions evaluated against the same real Prometheus (the shared
//! harness) at the same instants, and `promtool test rules` on the harness's own samples with
//! the gate's verdicts as the expected alerts.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{TimeZone, Utc};
use rollgate::engine::rules::{MetricOutput, MetricRules};
use rollgate::engine::{AddressPolicy, Engine, EvalOptions};
use rollgate::measurement::{Measurement, Phase};
use rollgate::prometheus::{Backend, Client};
use rollgate::spec::{Metric, Template};
use serde_json::{json, Value};
use support::prom::{shared, urlencode, PromServer};
use support::rules_cli::{documents, promtool, root, rules};
use support::scenarios::{Traffic, ABSENT_SERVICE, BAD, DOUBLE, HEALTHY, IDLE, LOWTRAFFIC, STALE};

const DIGEST: &str = "sha256:35c1e11408120e3942e771102f0172aee75829d3a87f9f5909d53b5f40bfc814";

/// Writes the groups of every PrometheusRule as one rule file (annotations dropped when
/// asked: `promtool test rules` compares them word for word) and runs `promtool check rules`.
fn check_rules(docs: &[Value], dir: &Path, drop_annotations: bool) {
    let mut groups = Vec::new();
    for d in docs {
        assert_eq!(d["apiVersion"], "monitoring.coreos.com/v1");
        assert_eq!(d["kind"], "PrometheusRule");
        for g in d["spec"]["groups"].as_array().unwrap() {
            let mut g = g.clone();
            if drop_annotations {
                for r in g["rules"].as_array_mut().unwrap() {
                    r.as_object_mut().unwrap().remove("annotations");
                }
            }
            groups.push(g);
        }
    }
    std::fs::write(
        dir.join("rules.yaml"),
        serde_yaml_ng::to_string(&json!({ "groups": groups })).unwrap(),
    )
    .unwrap();
    let out = promtool(&["check", "rules", "rules.yaml"], dir);
    assert!(
        out.status.success(),
        "promtool check rules:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The shipped example templates, sorted.
fn example_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_shipped_template_gives_rules_promtool_accepts() {
    let files = example_files();
    assert!(files.len() >= 4, "{files:?}");
    let mut kinds = BTreeSet::new();
    for file in &files {
        // `--arg` takes the arguments a template declares: the digest for the fleet gate only.
        let digest = format!("digest={DIGEST}");
        let declares_digest = std::fs::read_to_string(file)
            .unwrap()
            .contains("- name: digest\n");
        let arg: &[&str] = if declares_digest {
            &["--arg", &digest]
        } else {
            &[]
        };
        let out = rules(
            file,
            &[
                arg,
                &[
                    "--namespace",
                    "monitoring",
                    "--label",
                    "release=kube-prometheus-stack",
                    "--group-interval",
                    "30s",
                ],
            ]
            .concat(),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{}: {stderr}", file.display());
        let docs = documents(&out);
        assert!(!docs.is_empty(), "{}", file.display());
        for d in &docs {
            assert_eq!(d["metadata"]["namespace"], "monitoring");
            assert_eq!(d["metadata"]["labels"]["release"], "kube-prometheus-stack");
            for g in d["spec"]["groups"].as_array().unwrap() {
                assert_eq!(g["interval"], "30s", "{}", file.display());
                kinds.insert(
                    g["name"]
                        .as_str()
                        .unwrap()
                        .split('.')
                        .nth(1)
                        .unwrap()
                        .to_string(),
                );
            }
        }
        // Every note on stderr is also a comment of the output.
        let stdout = String::from_utf8_lossy(&out.stdout);
        for line in stderr.lines() {
            let note = line.strip_prefix("rollgate rules: ").unwrap();
            assert!(stdout.contains(&format!("# {note}")), "{note}");
        }
        let dir = tempfile::tempdir().unwrap();
        check_rules(&docs, dir.path(), false);
    }
    assert_eq!(
        kinds,
        BTreeSet::from(["compare".into(), "fleet".into(), "query".into()])
    );
}

#[test]
fn untranslatable_metrics_are_named_with_why() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.yaml");
    std::fs::write(
        &file,
        r#"
apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: odd}
spec:
  metrics:
    - name: every-pod
      successCondition: 'all(result, # < 0.01)'
      provider:
        plugin:
          rollgate/analysis:
            query: sum by (pod) (rate(errors_total[5m]))
            noData: fail
    - name: per-pod
      successCondition: result[0] < 0.01
      provider:
        plugin:
          rollgate/analysis:
            query: sum by (pod) (rate(errors_total[5m]))
            noData: inconclusive
    - name: builtin
      successCondition: result[0] < 0.01
      provider:
        prometheus: {address: "http://p:9090", query: "sum(x)"}
"#,
    )
    .unwrap();
    let out = rules(&file, &[]);
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    for (metric, says) in [
        ("odd/every-pod", "successCondition `all(result, # < 0.01)`"),
        ("odd/every-pod", "no condition alert"),
        ("odd/per-pod", "may return several series"),
        ("odd/builtin", "built-in prometheus provider"),
    ] {
        assert!(
            stderr
                .lines()
                .any(|l| l.contains(metric) && l.contains(says)),
            "{metric} {says}: {stderr}"
        );
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with("# ") && l.contains(metric) && l.contains(says)),
            "{metric} {says}: {stdout}"
        );
    }
    let docs = documents(&out);
    // every-pod: its recording rule and the no-data alert remain; per-pod keeps its alert.
    let alerts: Vec<String> = docs
        .iter()
        .flat_map(|d| d["spec"]["groups"][0]["rules"].as_array().unwrap().clone())
        .filter_map(|r| r["alert"].as_str().map(str::to_string))
        .collect();
    assert_eq!(alerts, vec!["RollgateQueryNoData", "RollgateQueryFailed"]);
    check_rules(&docs, dir.path(), false);

    // A bad flag value names the flag.
    let out = rules(&file, &["--group-interval", "soon"]);
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--group-interval"));
}

/// The conditions under test: (name, successCondition, failureCondition, minRequests
/// onInsufficient or none, noData). Every translatable form appears, with every policy
/// that can make a Failed verdict and some that cannot.
const VARIANTS: &[(&str, &str, &str, &str, &str)] = &[
    ("lt", "result[0] < 0.0015", "", "fail", "fail"),
    (
        "len",
        "len(result) == 0 || result[0] < 0.01",
        "",
        "",
        "fail",
    ),
    (
        "both",
        "result[0] < 0.0015",
        "result[0] >= 0.003",
        "inconclusive",
        "inconclusive",
    ),
    (
        "band",
        "(result[0] > 0.0005 && result[0] < 0.01) || result[0] == 0",
        "",
        "fail",
        "pass",
    ),
    ("not", "", "!(result[0] <= 0.003)", "pass", "fail"),
    ("flip", "0.0015 > result[0]", "", "wait", "error"),
];

/// Services of the standard data set, and the one with no series.
fn services() -> Vec<(&'static str, Option<Traffic>)> {
    [HEALTHY, DOUBLE, BAD, LOWTRAFFIC, IDLE, STALE]
        .into_iter()
        .map(|t| (t.service, Some(t)))
        .chain([(ABSENT_SERVICE, None)])
        .collect()
}

fn ratio_query(service: &str) -> String {
    format!("sum(rate(http_requests_total{{service=\"{service}\",code=~\"5..\"}}[5m])) / sum(rate(http_requests_total{{service=\"{service}\"}}[5m]))")
}

fn total_query(service: &str) -> String {
    format!("sum(increase(http_requests_total{{service=\"{service}\"}}[5m]))")
}

/// One template with a metric per (service, variant).
fn template_text(address: &str) -> String {
    let mut metrics = Vec::new();
    for (service, _) in services() {
        for (name, success, failure, on_insufficient, no_data) in VARIANTS {
            let mut spec = json!({
                "prometheus": {"address": address},
                "query": ratio_query(service),
                "noData": no_data,
            });
            if !on_insufficient.is_empty() {
                spec["minRequests"] = json!({"query": total_query(service), "count": 300, "onInsufficient": on_insufficient});
            }
            let mut m = json!({"name": format!("{service}-{name}"), "interval": "1m",
                "provider": {"plugin": {"rollgate/analysis": spec}}});
            if !success.is_empty() {
                m["successCondition"] = json!(success);
            }
            if !failure.is_empty() {
                m["failureCondition"] = json!(failure);
            }
            metrics.push(m);
        }
    }
    serde_yaml_ng::to_string(&json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisTemplate",
        "metadata": {"name": "gate"},
        "spec": {"metrics": metrics},
    }))
    .unwrap()
}

/// Minutes relative to the data's base: the stale service stops at -10 m, so its verdicts
/// move from data to no data across these.
const INSTANTS_MIN: &[i64] = &[-20, -14, -11, -9, -7, -6, -4, -2, 0];

/// Which alert of a query metric a Failed verdict corresponds to.
fn reason(m: &Measurement) -> &'static str {
    if m.metadata.contains_key("noData") {
        "RollgateQueryNoData"
    } else if m.message.starts_with("too little traffic") {
        "RollgateQueryTooFewRequests"
    } else {
        "RollgateQueryFailed"
    }
}

fn fires(server: &PromServer, rules: &MetricRules, expr: &str, at: i64) -> bool {
    !server.query(&rules.inline(expr), at as f64).is_empty()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_alerts_fire_exactly_when_the_gate_fails() {
    let server = shared();
    let text = template_text(&server.url);
    let templates = Template::parse_all(&text, "gate").unwrap();
    let metrics: Vec<Metric> = templates[0].metrics(&[]).unwrap();
    assert_eq!(metrics.len(), services().len() * VARIANTS.len());
    let engine = Engine::new(Backend::Live(Client::new()), AddressPolicy::default());

    // expected[instant][alertname] = metrics whose verdict is Failed for that reason.
    let mut expected: BTreeMap<i64, BTreeMap<&str, Vec<String>>> = BTreeMap::new();
    let mut agree = 0;
    let mut failed_by = BTreeMap::<&str, usize>::new();
    let mut phases = BTreeMap::<String, usize>::new();
    for m in &metrics {
        let MetricOutput::Rules(rules) = Engine::metric_rules("gate", m) else {
            panic!("{}: no rules", m.name)
        };
        assert!(rules.exact, "{}: {:?}", m.name, rules.notes);
        assert!(rules.notes.is_empty(), "{}: {:?}", m.name, rules.notes);
        for &minutes in INSTANTS_MIN {
            let at = server.base + minutes * 60;
            let opts = EvalOptions {
                at: Some(Utc.timestamp_opt(at, 0).single().unwrap()),
                ..EvalOptions::with_budget(Duration::from_secs(20))
            };
            let measured = engine.measure(m, &opts).await;
            *phases.entry(format!("{:?}", measured.phase)).or_default() += 1;
            let want = (measured.phase == Phase::Failed).then(|| reason(&measured));
            let firing: Vec<&str> = rules
                .alerts
                .iter()
                .filter(|a| fires(server, &rules, &a.expr, at))
                .map(|a| a.alert.as_str())
                .collect();
            assert_eq!(
                firing,
                want.into_iter().collect::<Vec<_>>(),
                "{} at base{minutes:+}m: the gate says {:?} ({}); alerts firing: {firing:?}",
                m.name,
                measured.phase,
                measured.message
            );
            agree += 1;
            if let Some(r) = want {
                *failed_by.entry(r).or_default() += 1;
                expected
                    .entry(minutes)
                    .or_default()
                    .entry(r)
                    .or_default()
                    .push(m.name.clone());
            }
        }
    }
    eprintln!("gate and alerts agree at {agree} (metric, instant) pairs; Failed by reason {failed_by:?}; phases {phases:?}");
    // Not vacuous: every alert fired somewhere, and most verdicts were not Failed.
    for r in [
        "RollgateQueryFailed",
        "RollgateQueryNoData",
        "RollgateQueryTooFewRequests",
    ] {
        assert!(
            failed_by.get(r).copied().unwrap_or(0) >= 3,
            "{r}: {failed_by:?}"
        );
    }
    assert!(phases.len() >= 4, "{phases:?}");

    promtool_test(server, &text, &expected);
}

/// `promtool test rules`: the harness's samples of every service (a range selector at base
/// returns them as stored) as input series, the generated rules, and the gate's Failed
/// verdicts as the only alerts expected at each instant.
fn promtool_test(
    server: &PromServer,
    template: &str,
    expected: &BTreeMap<i64, BTreeMap<&str, Vec<String>>>,
) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("template.yaml");
    std::fs::write(&file, template).unwrap();
    let out = rules(&file, &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    check_rules(&documents(&out), dir.path(), true);

    const STEP: i64 = 15;
    let start = server.base - 40 * 60;
    let slots = (40 * 60 / STEP + 1) as usize;
    let names: Vec<&str> = services().iter().map(|s| s.0).collect();
    let selector = format!(
        "http_requests_total{{service=~\"{}\"}}[40m]",
        names.join("|")
    );
    let v = server.get_json(&format!(
        "/api/v1/query?query={}&time={}",
        urlencode(&selector),
        server.base
    ));
    let mut input = String::new();
    let result = v["data"]["result"].as_array().unwrap();
    assert!(result.len() >= 10, "{v}");
    for series in result {
        let mut values = vec!["_".to_string(); slots];
        for pair in series["values"].as_array().unwrap() {
            let ts = pair[0].as_f64().unwrap() as i64;
            assert_eq!((ts - start) % STEP, 0, "samples on the 15 s grid");
            values[((ts - start) / STEP) as usize] = pair[1].as_str().unwrap().to_string();
        }
        let labels: Vec<String> = series["metric"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| *k != "__name__")
            .map(|(k, v)| format!("{k}=\"{}\"", v.as_str().unwrap()))
            .collect();
        input += &format!(
            "      - series: 'http_requests_total{{{}}}'\n        values: '{}'\n",
            labels.join(","),
            values.join(" ")
        );
    }
    let mut tests = String::new();
    for &minutes in INSTANTS_MIN {
        let eval = minutes * 60 + 40 * 60;
        for alert in [
            "RollgateQueryFailed",
            "RollgateQueryNoData",
            "RollgateQueryTooFewRequests",
        ] {
            tests += &format!("      - eval_time: {eval}s\n        alertname: {alert}\n");
            let firing = expected.get(&minutes).and_then(|e| e.get(alert));
            match firing {
                None => tests += "        exp_alerts: []\n",
                Some(metrics) => {
                    tests += "        exp_alerts:\n";
                    for m in metrics {
                        tests += &format!("          - exp_labels: {{severity: critical, rollgate_template: gate, rollgate_metric: {m}}}\n");
                    }
                }
            }
        }
    }
    let test = format!(
        "rule_files: [rules.yaml]\nevaluation_interval: 1m\ntests:\n  - interval: {STEP}s\n    input_series:\n{input}    alert_rule_test:\n{tests}"
    );
    std::fs::write(dir.path().join("test.yaml"), &test).unwrap();
    let out = promtool(&["test", "rules", "test.yaml"], dir.path());
    assert!(
        out.status.success(),
        "promtool test rules:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Compare ratio metrics: the alert is an approximation of the exact test; on the standard
/// scenarios, whose differences are large, it agrees with the gate (canary 6x and 3 % vs
/// 0.5 % fire, equal rates do not, too little canary traffic is not a canary-worse alert).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compare_alert_agrees_with_the_gate_on_clear_cases() {
    let server = shared();
    let engine = Engine::new(Backend::Live(Client::new()), AddressPolicy::default());
    let mut checked = 0;
    for (service, gate_fails) in [
        ("cmp-healthy", false),
        ("cmp-bad", true),
        ("cmp-6x", true),
        ("cmp-low", false),
    ] {
        let side = |track: &str, bad: bool| {
            let code = if bad { ",code=~\"5..\"" } else { "" };
            format!("sum(increase(http_requests_total{{service=\"{service}\",track=\"{track}\"{code}}}[10m]))")
        };
        let spec = json!({"prometheus": {"address": server.url},
            "compare": {"canary": {"bad": side("canary", true), "total": side("canary", false)},
                        "stable": {"bad": side("stable", true), "total": side("stable", false)},
                        "minRequests": 500},
            "noData": "inconclusive"});
        let m = Metric::from_value(
            &json!({"name": service, "provider": {"plugin": {"rollgate/analysis": spec}}}),
            "",
        )
        .unwrap();
        let MetricOutput::Rules(rules) = Engine::metric_rules("cmp", &m) else {
            panic!("no rules")
        };
        assert!(!rules.exact);
        let alert = rules
            .alerts
            .iter()
            .find(|a| a.alert == "RollgateCanaryWorse")
            .unwrap();
        let opts = EvalOptions {
            at: Some(Utc.timestamp_opt(server.base, 0).single().unwrap()),
            ..EvalOptions::with_budget(Duration::from_secs(20))
        };
        let measured = engine.measure(&m, &opts).await;
        assert_eq!(
            measured.phase == Phase::Failed,
            gate_fails,
            "{service}: {measured:?}"
        );
        assert_eq!(
            fires(server, &rules, &alert.expr, server.base),
            gate_fails,
            "{service}: {}",
            rules.inline(&alert.expr)
        );
        checked += 1;
    }
    assert_eq!(checked, 4);
}

/// `--format rule-file` prints the plain rule file that `promtool check rules`, Prometheus'
/// `rule_files`, Thanos Ruler, Mimir's ruler and vmalert read, checked as printed; the default
/// and `--format prometheus-operator` print the same PrometheusRules.
#[test]
fn the_rule_file_form_is_accepted_by_promtool_as_printed() {
    let dir = tempfile::tempdir().unwrap();
    let files = example_files();
    for file in &files {
        // `--arg` takes only the arguments a template declares: the digest for the fleet gate.
        let digest = format!("digest={DIGEST}");
        let declares_digest = std::fs::read_to_string(file)
            .unwrap()
            .contains("- name: digest\n");
        let base: Vec<&str> = if declares_digest {
            vec!["--arg", digest.as_str(), "--group-interval", "30s"]
        } else {
            vec!["--group-interval", "30s"]
        };
        let out = rules(file, &[&base[..], &["--format", "rule-file"]].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{}: {stderr}", file.display());
        let docs = documents(&out);
        assert_eq!(docs.len(), 1, "{}", file.display());
        assert!(docs[0]["groups"].as_array().is_some_and(|g| !g.is_empty()));
        std::fs::write(dir.path().join("rules.yaml"), &out.stdout).unwrap();
        let checked = promtool(&["check", "rules", "rules.yaml"], dir.path());
        assert!(
            checked.status.success(),
            "{}: promtool check rules:\n{}\n{}\n{}",
            file.display(),
            String::from_utf8_lossy(&checked.stdout),
            String::from_utf8_lossy(&checked.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        let operator = rules(
            file,
            &[&base[..], &["--format", "prometheus-operator"]].concat(),
        );
        assert_eq!(operator.stdout, rules(file, &base).stdout);
        let groups: usize = documents(&operator)
            .iter()
            .map(|d| d["spec"]["groups"].as_array().unwrap().len())
            .sum();
        assert_eq!(groups, docs[0]["groups"].as_array().unwrap().len());
    }
    let out = rules(
        &files[0],
        &["--format", "rule-file", "--namespace", "monitoring"],
    );
    assert_eq!(out.status.code(), Some(64));
}
