//! `rollgate rules`: the PrometheusRule it prints is accepted by `promtool check rules`, and its
//! alerts fire as the gate decides (`promtool test rules` on synthetic series).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::support::rules_cli::{documents, promtool, root, rules};

const NEW: &str = "sha256:35c1e11408120e3942e771102f0172aee75829d3a87f9f5909d53b5f40bfc814";
const OLD: &str = "sha256:513e5258ccf337657a74bcf99c6689575996caa51a1c92392ca920cc72be477a";

/// Writes the `spec` of every PrometheusRule as one Prometheus rule file and checks it.
fn check_rules(docs: &[Value], dir: &Path) -> PathBuf {
    let mut groups = Vec::new();
    for d in docs {
        assert_eq!(d["apiVersion"], "monitoring.coreos.com/v1");
        assert_eq!(d["kind"], "PrometheusRule");
        assert!(d["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with("rollgate-"));
        groups.extend(d["spec"]["groups"].as_array().unwrap().iter().cloned());
    }
    let path = dir.join("rules.yaml");
    std::fs::write(
        &path,
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
    path
}

#[test]
fn the_example_and_the_manifest_give_rules_promtool_accepts() {
    for file in [
        root().join("examples/fleet-gate.yaml"),
        root().join("manifests/argo-rollouts/analysis-template-fleet.yaml"),
    ] {
        let out = rules(&file, &["--arg", &format!("digest={NEW}")]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let docs = documents(&out);
        assert_eq!(docs.len(), 1, "{}", file.display());
        let alerts: Vec<&str> = docs[0]["spec"]["groups"][0]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["alert"].as_str().unwrap())
            .collect();
        assert_eq!(
            alerts,
            vec![
                "RollgateFleetTargetSilent",
                "RollgateFleetWorkloadStalled",
                "RollgateFleetOldVersionPastDeadline"
            ],
            "{}",
            file.display()
        );
        let dir = tempfile::tempdir().unwrap();
        check_rules(&docs, dir.path());
    }
}

#[test]
fn a_template_without_a_rollgate_metric_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("builtin.yaml");
    std::fs::write(
        &file,
        "apiVersion: argoproj.io/v1alpha1\nkind: AnalysisTemplate\nmetadata: {name: b}\nspec:\n  metrics:\n    - name: m\n      successCondition: result[0] < 1\n      provider:\n        prometheus: {address: 'http://p:9090', query: 'sum(x)'}\n",
    )
    .unwrap();
    let out = rules(&file, &[]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no metric gives rules"), "{err}");
    assert!(err.contains("b/m"), "{err}");
    assert!(out.stdout.is_empty());
}

const TEMPLATE: &str = r#"
apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: edge}
spec:
  metrics:
    - name: agent
      provider:
        plugin:
          rollgate/analysis:
            fleet:
              selector: kube_pod_container_info{namespace="ns", container="agent"}
              version: {expected: "NEW"}
              expectedTargets: [a, b, c, d]
              maxStaleness: 15m
              workloads: true
              completionDeadline: 1h
              exceptions:
                - {target: d, reason: lab, until: "2099-12-31"}
                - {target: b, reason: expires, until: "1970-01-01T00:30:00Z"}
            noData: fail
"#;

/// a current with a stalled DaemonSet (and an evicted pod on the old image), b old (excepted until 30 min: promtool's clock starts
/// at the Unix epoch), c silent after 30 min, d old but excepted, e old outside the inventory.
fn test_file() -> String {
    let pod = |cluster: &str, digest: &str, values: &str| {
        format!(
            "      - series: 'kube_pod_container_info{{cluster=\"{cluster}\",namespace=\"ns\",container=\"agent\",pod=\"{cluster}-1\",image_id=\"repo/agent@{digest}\"}}'\n        values: '{values}'\n"
        )
    };
    let ds = |metric: &str, cluster: &str, v: u32| {
        format!(
            "      - series: '{metric}{{cluster=\"{cluster}\",namespace=\"ns\",daemonset=\"agent\"}}'\n        values: '{v}x180'\n"
        )
    };
    let mut series = String::new();
    series += &pod("a", NEW, "1x180");
    series += &pod("b", OLD, "1x180");
    series += &pod("c", NEW, "1x30");
    series += &pod("d", OLD, "1x180");
    series += &pod("e", OLD, "1x180");
    // An evicted pod of a on the old image: phase Failed, so not an old version (as in the
    // gate, kube-state-metrics' one series per phase, 1 for the current one).
    series += "      - series: 'kube_pod_container_info{cluster=\"a\",namespace=\"ns\",container=\"agent\",pod=\"a-evicted\",image_id=\"repo/agent@OLDDIGEST\"}'\n        values: '1x180'\n".replace("OLDDIGEST", OLD).as_str();
    for (phase, v) in [("Running", 0), ("Failed", 1)] {
        series += &format!("      - series: 'kube_pod_status_phase{{cluster=\"a\",namespace=\"ns\",pod=\"a-evicted\",phase=\"{phase}\"}}'\n        values: '{v}x180'\n");
    }
    series += &ds("kube_daemonset_status_desired_number_scheduled", "a", 3);
    series += &ds("kube_daemonset_status_updated_number_scheduled", "a", 1);
    series += &ds("kube_daemonset_status_number_ready", "a", 3);
    let labels = "rollgate_template: edge\n                rollgate_metric: agent";
    format!(
        r#"rule_files: [rules.yaml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
{series}    alert_rule_test:
      - eval_time: 10m
        alertname: RollgateFleetTargetSilent
        exp_alerts: []
      - eval_time: 10m
        alertname: RollgateFleetWorkloadStalled
        exp_alerts: []
      - eval_time: 10m
        alertname: RollgateFleetOldVersionPastDeadline
        exp_alerts: []
      - eval_time: 70m
        alertname: RollgateFleetTargetSilent
        exp_alerts:
          - exp_labels:
                cluster: c
                severity: warning
                {labels}
      - eval_time: 70m
        alertname: RollgateFleetWorkloadStalled
        exp_alerts:
          - exp_labels:
                cluster: a
                namespace: ns
                daemonset: agent
                stall: daemonsetNotUpdated
                severity: warning
                {labels}
      - eval_time: 70m
        alertname: RollgateFleetOldVersionPastDeadline
        exp_alerts:
          - exp_labels:
                cluster: e
                severity: critical
                {labels}
      - eval_time: 100m
        alertname: RollgateFleetOldVersionPastDeadline
        exp_alerts:
          - exp_labels:
                cluster: b
                severity: critical
                {labels}
          - exp_labels:
                cluster: e
                severity: critical
                {labels}
"#
    )
}

#[test]
fn the_alerts_fire_as_the_gate_decides() {
    let dir = tempfile::tempdir().unwrap();
    let mut docs = rules_of(&TEMPLATE.replace("NEW", NEW), dir.path());
    check_rules(&docs, dir.path());
    test_rules(&mut docs, dir.path(), &test_file());
}

/// The PrometheusRule documents `rollgate rules` prints for template text `template` (written
/// to `dir`), which must succeed.
fn rules_of(template: &str, dir: &Path) -> Vec<Value> {
    let path = dir.join("template.yaml");
    std::fs::write(&path, template).unwrap();
    let out = rules(&path, &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    documents(&out)
}

/// Runs `promtool test rules` with `test` on the rules of `docs`. Alert tests compare
/// annotations word for word; the firing behaviour is what is tested, so they are dropped
/// (`check_rules` validates the annotation templates).
fn test_rules(docs: &mut [Value], dir: &Path, test: &str) {
    for d in docs.iter_mut() {
        for g in d["spec"]["groups"].as_array_mut().unwrap() {
            for r in g["rules"].as_array_mut().unwrap() {
                r.as_object_mut().unwrap().remove("annotations");
            }
        }
    }
    check_rules(docs, dir);
    std::fs::write(dir.join("test.yaml"), test).unwrap();
    let out = promtool(&["test", "rules", "test.yaml"], dir);
    assert!(
        out.status.success(),
        "promtool test rules:\n{}\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(dir.join("rules.yaml")).unwrap()
    );
}

#[test]
fn namespace_and_labels_place_the_rule_for_a_rule_selector() {
    let file = root().join("manifests/argo-rollouts/analysis-template-fleet.yaml");
    let out = rules(
        &file,
        &[
            "--arg",
            &format!("digest={NEW}"),
            "--namespace",
            "monitoring",
            "--label",
            "release=kube-prometheus-stack",
            "--label",
            "example.com/team=edge",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let docs = documents(&out);
    let meta = &docs[0]["metadata"];
    assert_eq!(meta["namespace"], "monitoring");
    assert_eq!(meta["labels"]["release"], "kube-prometheus-stack");
    assert_eq!(meta["labels"]["example.com/team"], "edge");
    assert_eq!(meta["labels"]["app.kubernetes.io/managed-by"], "rollgate");
    let dir = tempfile::tempdir().unwrap();
    check_rules(&docs, dir.path());
    // Without the flags: no namespace (kubectl -n decides), only the managed-by label.
    let plain = documents(&rules(&file, &["--arg", &format!("digest={NEW}")]));
    assert!(plain[0]["metadata"].get("namespace").is_none());
    assert_eq!(plain[0]["metadata"]["labels"].as_object().unwrap().len(), 1);

    for (flag, value, says) in [
        ("--namespace", "Monitoring", "expected a namespace name"),
        ("--label", "release", "expected KEY=VALUE"),
        ("--label", "bad key=x", "is not a Kubernetes label key"),
        (
            "--label",
            "release=kube prometheus",
            "is not a Kubernetes label value",
        ),
    ] {
        let out = rules(&file, &["--arg", &format!("digest={NEW}"), flag, value]);
        assert_eq!(out.status.code(), Some(64), "{flag} {value}: a usage error");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(says) && err.contains(flag),
            "{flag} {value}: {err}"
        );
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn the_gitops_manifests_give_rules_promtool_accepts() {
    for (file, args) in [
        ("analysis-template-fleet-argocd.yaml", vec![]),
        (
            "analysis-template-fleet-flux.yaml",
            vec![
                "--arg",
                "revision=main@sha1:5f1c0e3b9a7d2c4e6f8a0b1c3d5e7f9a1b2c3d4e",
            ],
        ),
    ] {
        let path = root().join("manifests/argo-rollouts").join(file);
        let out = rules(&path, &args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let docs = documents(&out);
        let rules = docs[0]["spec"]["groups"][0]["rules"].as_array().unwrap();
        let alerts: Vec<&str> = rules.iter().map(|r| r["alert"].as_str().unwrap()).collect();
        assert_eq!(
            alerts,
            vec![
                "RollgateFleetTargetSilent",
                "RollgateFleetOldVersionPastDeadline"
            ],
            "{file}"
        );
        // Not a pod metric: no pod-phase join.
        assert!(
            !rules[1]["expr"]
                .as_str()
                .unwrap()
                .contains("kube_pod_status_phase"),
            "{file}"
        );
        let dir = tempfile::tempdir().unwrap();
        check_rules(&docs, dir.path());
    }
}

const FLUX_TEMPLATE: &str = r#"
apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: flux}
spec:
  metrics:
    - name: applied
      provider:
        plugin:
          rollgate/analysis:
            fleet:
              selector: gotk_resource_info{customresource_kind="Kustomization", name="apps"}
              version:
                - {label: revision, expected: "main@sha1:new"}
                - {label: ready, expected: "True"}
              expectedTargets: [f0, f1, f2, f3]
              completionDeadline: 1h
            noData: fail
"#;

/// Several version labels: an alert for every series that misses any of them, none for a
/// series with all (f0), including one on the new revision that is not Ready (f2).
#[test]
fn the_old_version_alert_needs_every_version_label() {
    let dir = tempfile::tempdir().unwrap();
    let mut docs = rules_of(FLUX_TEMPLATE, dir.path());
    let series = |cluster: &str, revision: &str, ready: &str| {
        format!(
            "      - series: 'gotk_resource_info{{cluster=\"{cluster}\",customresource_kind=\"Kustomization\",name=\"apps\",revision=\"{revision}\",ready=\"{ready}\"}}'\n        values: '1x120'\n"
        )
    };
    let mut input = String::new();
    input += &series("f0", "main@sha1:new", "True");
    input += &series("f1", "main@sha1:old", "True");
    input += &series("f2", "main@sha1:new", "False");
    input += &series("f3", "main@sha1:new", "Unknown");
    let labels = "rollgate_template: flux\n                rollgate_metric: applied";
    let exp = |c: &str| {
        format!("          - exp_labels:\n                cluster: {c}\n                severity: critical\n                {labels}\n")
    };
    let test = format!(
        "rule_files: [rules.yaml]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n{input}    alert_rule_test:\n      - eval_time: 30m\n        alertname: RollgateFleetOldVersionPastDeadline\n        exp_alerts: []\n      - eval_time: 90m\n        alertname: RollgateFleetOldVersionPastDeadline\n        exp_alerts:\n{}{}{}",
        exp("f1"),
        exp("f2"),
        exp("f3")
    );
    test_rules(&mut docs, dir.path(), &test);
}

/// `rollgate rules … | head` closes the pipe early: the command stops quietly with success
/// instead of panicking on EPIPE (exit 101).
#[test]
fn a_reader_that_closes_the_pipe_early_is_not_a_crash() {
    use std::process::Stdio;
    let mut child = Command::new(crate::support::rollgate_bin())
        .arg("rules")
        .arg("-f")
        .arg(root().join("manifests/argo-rollouts/analysis-template-fleet.yaml"))
        .args(["--arg", &format!("digest={NEW}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start rollgate");
    // Close the read end before the child writes: its write meets EPIPE.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait for rollgate");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

/// Fleet promotion: every promotion manifest gives rules promtool accepts, with one
/// alert per completion tier and one for versions outside the support window.
#[test]
fn the_promotion_manifests_give_rules_promtool_accepts() {
    let dir_of = root().join("manifests/argo-rollouts");
    let cases: [(&str, &[&str]); 4] = [
        ("analysis-template-fleet-cohorts.yaml", &[]),
        ("analysis-template-fleet-held.yaml", &[]),
        (
            "analysis-template-fleet-completion.yaml",
            &[
                "RollgateFleetCompletionTier1",
                "RollgateFleetCompletionTier2",
            ],
        ),
        (
            "analysis-template-fleet-support-window.yaml",
            &["RollgateFleetUnsupportedVersion"],
        ),
    ];
    for (file, extra) in cases {
        let path = dir_of.join(file);
        // `--arg` takes the arguments a template declares, nothing else.
        let text = std::fs::read_to_string(&path).unwrap();
        let digest = format!("digest={NEW}");
        let mut args: Vec<&str> = Vec::new();
        for (name, arg) in [("digest", digest.as_str()), ("cohort", "cohort=wave-1")] {
            let declared = text.lines().any(|l| {
                l.trim_start()
                    .strip_prefix(&format!("- name: {name}"))
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
            });
            if declared {
                args.extend(["--arg", arg]);
            }
        }
        let out = rules(&path, &args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let docs = documents(&out);
        let alerts: Vec<String> = docs[0]["spec"]["groups"][0]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["alert"].as_str().unwrap().to_string())
            .filter(|a| a.contains("Tier") || a.contains("Unsupported"))
            .collect();
        assert_eq!(alerts, extra.to_vec(), "{file}");
        let dir = tempfile::tempdir().unwrap();
        check_rules(&docs, dir.path());
    }
}

const PROMOTION_TEMPLATE: &str = r#"
apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: edge}
spec:
  metrics:
    - name: agent
      provider:
        plugin:
          rollgate/analysis:
            fleet:
              selector: kube_pod_container_info{namespace="ns", container="agent"}
              version: {label: image, expected: "acme/agent:1.5.0", supported: ["acme/agent:1.4.2"]}
              expectedTargets: [a, b, c]
              completion: [{share: 0.6, within: 1h}, {share: 1.0, within: 2h}]
              startedAt: "1970-01-01T00:00:00Z"
            noData: fail
"#;

/// a on 1.5.0 (N), b on 1.4.2 (N-1, supported), c on 1.3.0 (N-2): one third done, so tier 1
/// (60 % within 1h) fires after 1h and tier 2 (100 % within 2h) after 2h; c is outside the
/// support window from the start (for 15m).
#[test]
fn tier_and_support_window_alerts_fire_as_the_gate_decides() {
    let pod = |cluster: &str, image: &str| {
        format!(
            "      - series: 'kube_pod_container_info{{cluster=\"{cluster}\",namespace=\"ns\",container=\"agent\",pod=\"{cluster}-1\",image=\"acme/agent:{image}\"}}'\n        values: '1x180'\n"
        )
    };
    let series = pod("a", "1.5.0") + &pod("b", "1.4.2") + &pod("c", "1.3.0");
    let labels = "severity: critical\n                rollgate_template: edge\n                rollgate_metric: agent";
    let test = format!(
        r#"rule_files: [rules.yaml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
{series}    alert_rule_test:
      - eval_time: 10m
        alertname: RollgateFleetUnsupportedVersion
        exp_alerts: []
      - eval_time: 20m
        alertname: RollgateFleetUnsupportedVersion
        exp_alerts:
          - exp_labels:
                cluster: c
                image: acme/agent:1.3.0
                {labels}
      - eval_time: 50m
        alertname: RollgateFleetCompletionTier1
        exp_alerts: []
      - eval_time: 70m
        alertname: RollgateFleetCompletionTier1
        exp_alerts:
          - exp_labels:
                {labels}
      - eval_time: 110m
        alertname: RollgateFleetCompletionTier2
        exp_alerts: []
      - eval_time: 130m
        alertname: RollgateFleetCompletionTier2
        exp_alerts:
          - exp_labels:
                {labels}
"#
    );
    let dir = tempfile::tempdir().unwrap();
    let mut docs = rules_of(PROMOTION_TEMPLATE, dir.path());
    test_rules(&mut docs, dir.path(), &test);
}

/// Two metrics on one fleet: `held` with `holdFor: 30m`, `now` without.
fn held_template() -> String {
    let metric = |name: &str, hold: &str| {
        format!(
            r#"    - name: {name}
      provider:
        plugin:
          rollgate/analysis:
            fleet:
              selector: kube_pod_container_info{{namespace="ns", container="agent"}}
              version: {{expected: "{NEW}"}}
              expectedTargets: [a, b, c]
              workloads: true
              completion: [{{share: 1.0, within: 1h}}]
              startedAt: "1970-01-01T00:00:00Z"{hold}
            noData: fail
"#
        )
    };
    format!(
        "apiVersion: argoproj.io/v1alpha1\nkind: AnalysisTemplate\nmetadata: {{name: edge}}\nspec:\n  metrics:\n{}{}",
        metric("held", "\n              holdFor: 30m"),
        metric("now", "")
    )
}

/// The tier alert counts a target done as the gate does: with `holdFor` only when current for
/// the whole window, and never while a workload is stalled. a is on the new version
/// throughout; b replaces its old pod at 70m (the old one stays visible for the 5m lookback);
/// c runs the new version with its DaemonSet not updated until 90m. The tier (100 % within
/// 1h) is due from 60m. `held` (holdFor 30m): at 80m neither b nor c is done; at 110m b has
/// been current since 75m, held, but c only since 90m; at 125m both are held. `now`: at 80m
/// b is done (its old pod is gone from the lookback) and c is stalled; at 100m both are done.
#[test]
fn tier_alerts_count_a_target_done_only_when_held_and_not_stalled() {
    let pod = |cluster: &str, pod: &str, digest: &str, values: &str| {
        format!(
            "      - series: 'kube_pod_container_info{{cluster=\"{cluster}\",namespace=\"ns\",container=\"agent\",pod=\"{pod}\",image_id=\"repo/agent@{digest}\"}}'\n        values: '{values}'\n"
        )
    };
    let ds = |metric: &str, values: &str| {
        format!(
            "      - series: '{metric}{{cluster=\"c\",namespace=\"ns\",daemonset=\"agent\"}}'\n        values: '{values}'\n"
        )
    };
    let mut series = pod("a", "a-1", NEW, "1x180");
    series += &pod("b", "b-1", OLD, "1x69");
    series += &pod("b", "b-2", NEW, "_x69 1x110");
    series += &pod("c", "c-1", NEW, "1x180");
    series += &ds("kube_daemonset_status_desired_number_scheduled", "3x180");
    series += &ds(
        "kube_daemonset_status_updated_number_scheduled",
        "1x89 3x90",
    );
    series += &ds("kube_daemonset_status_number_ready", "3x180");
    // Both metrics' alerts share the name: each time lists every one expected to fire.
    let mut cases = String::new();
    for (at, firing) in [
        ("50m", &[][..]),
        ("80m", &["held", "now"][..]),
        ("100m", &["held"][..]),
        ("110m", &["held"][..]),
        ("125m", &[][..]),
    ] {
        let alerts: String = firing
            .iter()
            .map(|metric| format!("\n          - exp_labels:\n                severity: critical\n                rollgate_template: edge\n                rollgate_metric: {metric}"))
            .collect();
        let alerts = if alerts.is_empty() {
            " []".to_string()
        } else {
            alerts
        };
        cases += &format!(
            "      - eval_time: {at}\n        alertname: RollgateFleetCompletionTier1\n        exp_alerts:{alerts}\n"
        );
    }
    let test = format!(
        "rule_files: [rules.yaml]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n{series}    alert_rule_test:\n{cases}"
    );
    let dir = tempfile::tempdir().unwrap();
    let mut docs = rules_of(&held_template(), dir.path());
    assert_eq!(docs.len(), 2);
    test_rules(&mut docs, dir.path(), &test);
}
