//! Fleet promotion end to end against a real Prometheus with generated
//! kube-state-metrics data (`support::inventories::promotion_dataset`): cohorts 1 / 3 / the
//! rest over a 27-cluster registry, `holdFor` before and after a flap leaves the window, a
//! stall spending `minCompletion`, completion tiers before and after their deadlines, a support
//! window with N, N-1 and N-2, `rollgate fleet plan|versions` line by line, and bad input.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use rollgate::engine::{AddressPolicy, Engine, EvalOptions, FleetPlan};
use rollgate::measurement::{Measurement, Phase};
use rollgate::prometheus::{Backend, Client, Recorder};
use rollgate::spec::{FleetSpec, Metric};
use serde_json::{json, Value};
use support::inventories::{
    promotion_dataset, window_clusters, NODE_AGENT_N2, PROMO_NAMESPACE, PROMO_REGISTRY,
    STATES_NAMESPACE, STATES_REGISTRY, WINDOW_NAMESPACE,
};
use support::prom::PromServer;
use support::scenarios::{base_now, NODE_AGENT_NEW, NODE_AGENT_OLD};

const REST: &str = "promo-(0[4-9]|1[0-9]|2[0-5])";

static SERVER: OnceLock<PromServer> = OnceLock::new();

fn server() -> &'static PromServer {
    SERVER.get_or_init(|| {
        let base = base_now();
        PromServer::start(base, &promotion_dataset(base))
    })
}

fn new_digest() -> String {
    NODE_AGENT_NEW
        .image_id()
        .rsplit_once('@')
        .unwrap()
        .1
        .to_string()
}

/// The promotion fleet's spec: registry inventory, three cohorts (the second lists a cluster
/// the registry lacks unless `without_missing`), `extra` merged over it.
fn promo_fleet(extra: Value) -> Value {
    let mut f = json!({
        "selector": format!("kube_pod_container_info{{namespace=\"{PROMO_NAMESPACE}\", container=\"node-agent\"}}"),
        "version": {"expected": new_digest()},
        "expectedTargetsQuery": PROMO_REGISTRY,
        "cohorts": [
            {"name": "canary", "targets": ["promo-00"]},
            {"name": "wave-1", "targets": ["promo-01", "promo-02", "promo-03", "promo-99"]},
            {"name": "rest", "targetRegex": REST, "maxConcurrent": 2},
        ],
        "holdFor": "10m",
    });
    merge(&mut f, extra);
    f
}

fn merge(f: &mut Value, extra: Value) {
    for (k, v) in extra.as_object().unwrap() {
        if v.is_null() {
            f.as_object_mut().unwrap().remove(k);
        } else {
            f[k] = v.clone();
        }
    }
}

fn metric(fleet: Value) -> Metric {
    let spec = json!({"prometheus": {"address": server().url}, "fleet": fleet, "noData": "fail"});
    let m = json!({"name": "fleet", "provider": {"plugin": {"rollgate/analysis": spec}}});
    Metric::from_value(&m, "").unwrap_or_else(|e| panic!("{e}"))
}

async fn measure(fleet: Value, offset: i64) -> Measurement {
    let engine = Engine::new(Backend::Live(Client::new()), AddressPolicy::default());
    let opts = EvalOptions {
        at: Utc.timestamp_opt(server().base + offset, 0).single(),
        ..EvalOptions::with_budget(Duration::from_secs(30))
    };
    engine.measure(&metric(fleet), &opts).await
}

fn list(m: &Measurement, key: &str) -> BTreeSet<String> {
    m.metadata
        .get(key)
        .map(|s| s.split(", ").map(str::to_string).collect())
        .unwrap_or_default()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn value(m: &Measurement) -> Value {
    serde_json::from_str(&m.value).unwrap_or_else(|e| panic!("value {:?}: {e}", m.value))
}

fn promo_26_excepted() -> Value {
    json!([{"target": "promo-26", "reason": "lab cluster, OPS-9", "until": "2099-01-01"}])
}

#[tokio::test]
async fn an_unselected_cluster_fails_the_canary_until_excepted() {
    let m = measure(promo_fleet(json!({"cohort": "canary"})), 0).await;
    assert_eq!(m.phase, Phase::Failed, "{}", m.message);
    assert!(
        m.message
            .starts_with("1 cluster in no cohort (unselected: promo-26 straggler)"),
        "{}",
        m.message
    );
    assert_eq!(list(&m, "unselected"), set(&["promo-26"]));
    assert_eq!(m.metadata["missingFromInventory"], "promo-99 (wave-1)");
    // The canary's own scope: one cluster, current and held.
    assert_eq!(value(&m)["expected"], 1);
    assert_eq!(value(&m)["current"], 1);
    assert_eq!(value(&m)["unselected"], 1);

    let m = measure(
        promo_fleet(json!({"cohort": "canary", "exceptions": promo_26_excepted()})),
        0,
    )
    .await;
    assert_eq!(m.phase, Phase::Successful, "{}", m.message);
    assert!(
        m.message
            .contains("promoting cohort canary (1 of 3): canary 1 of 1 done"),
        "{}",
        m.message
    );
    // A later cohort's missing member is named, not failed.
    assert!(
        m.message
            .contains("1 member of later cohorts missing from the inventory (promo-99 (wave-1))"),
        "{}",
        m.message
    );
}

#[tokio::test]
async fn wave_1_waits_for_the_flap_to_leave_hold_for_and_names_the_missing_member() {
    let m = measure(
        promo_fleet(json!({"cohort": "wave-1", "exceptions": promo_26_excepted()})),
        0,
    )
    .await;
    assert_eq!(m.phase, Phase::Failed, "{}", m.message);
    assert!(
        m.message
            .starts_with("1 cohort member missing from the inventory (promo-99 (wave-1))"),
        "{}",
        m.message
    );
    // promo-02's old pod was last visible 3 minutes ago (its last sample at -8m, plus
    // Prometheus' 5m lookback): current now, not held for 10m.
    assert!(
        m.message
            .contains("1 of 5 clusters not held for 10m (promo-02 last changed 3m ago)"),
        "{}",
        m.message
    );
    assert_eq!(list(&m, "notHeld"), set(&["promo-02"]));
    assert!(m.metadata["query.held"].starts_with("count_over_time(("));
    assert!(m.metadata["query.held"].ends_with("[10m:30s])"));

    // Without the missing member: still not held now, held ten minutes later.
    let mut without = promo_fleet(json!({"cohort": "wave-1", "exceptions": promo_26_excepted()}));
    without["cohorts"][1]["targets"] = json!(["promo-01", "promo-02", "promo-03"]);
    let now = measure(without.clone(), 0).await;
    assert_eq!(now.phase, Phase::Failed, "{}", now.message);
    assert!(
        now.message.starts_with("1 of 4 clusters not held for 10m"),
        "{}",
        now.message
    );
    let later = measure(without.clone(), 600).await;
    assert_eq!(later.phase, Phase::Successful, "{}", later.message);
    assert!(
        later
            .message
            .contains("promoting cohort wave-1 (2 of 3): canary 1 of 1 done, wave-1 3 of 3 done"),
        "{}",
        later.message
    );
    // Without holdFor the flap is over as soon as the old pod is out of the instant view.
    without["holdFor"] = Value::Null;
    let plain = measure(without, 0).await;
    assert_eq!(plain.phase, Phase::Successful, "{}", plain.message);
}

#[tokio::test]
async fn the_rest_fails_on_max_concurrent_and_its_stragglers() {
    let m = measure(
        promo_fleet(json!({"cohort": "rest", "exceptions": promo_26_excepted()})),
        600,
    )
    .await;
    assert_eq!(m.phase, Phase::Failed, "{}", m.message);
    assert!(
        m.message.contains(
            "cohort rest: 3 clusters mid-change at once, maxConcurrent 2 (promo-10, promo-11, promo-12)"
        ),
        "{}",
        m.message
    );
    let stragglers: BTreeSet<String> = (10..=25).map(|i| format!("promo-{i:02}")).collect();
    assert_eq!(list(&m, "stragglers"), stragglers);
    let v = value(&m);
    assert_eq!(
        v["expected"], 27,
        "canary + wave-1 + rest in the inventory, plus promo-99"
    );
    assert_eq!(v["current"], 10);
    assert_eq!(v["cohort"], "rest");
    assert_eq!(v["missingFromInventory"], 1);
}

#[tokio::test]
async fn a_stall_makes_its_target_incomplete_and_min_completion_decides() {
    let six: Vec<String> = (4..=9).map(|i| format!("promo-{i:02}")).collect();
    let spec = |min: f64| {
        json!({
            // Scoped to the six (the others would be old versions outside the inventory).
            "selector": format!("kube_pod_container_info{{namespace=\"{PROMO_NAMESPACE}\", container=\"node-agent\", cluster=~\"promo-0[4-9]\"}}"),
            "version": {"expected": new_digest()},
            "expectedTargets": six,
            "workloads": true,
            "minCompletion": min,
        })
    };
    let strict = measure(spec(1.0), 0).await;
    assert_eq!(strict.phase, Phase::Failed, "{}", strict.message);
    assert_eq!(list(&strict, "stalledTargets"), set(&["promo-05"]));
    assert_eq!(
        list(&strict, "stalled"),
        set(&["promo-05/edge-promo/DaemonSet/node-agent"])
    );
    assert!(
        strict
            .message
            .contains("83.3 % of 6 clusters current or excepted, 100 % required"),
        "{}",
        strict.message
    );
    let lenient = measure(spec(0.8), 0).await;
    assert_eq!(lenient.phase, Phase::Successful, "{}", lenient.message);
    assert!(
        lenient
            .message
            .contains("DaemonSet edge-promo/node-agent in promo-05: 1 pod not updated"),
        "{}",
        lenient.message
    );
    assert_eq!(measure(spec(0.9), 0).await.phase, Phase::Failed);
}

fn tiers_fleet(tiers: Value, started: Option<i64>) -> Value {
    let mut f = json!({
        "selector": format!("kube_pod_container_info{{namespace=\"{PROMO_NAMESPACE}\", container=\"node-agent\"}}"),
        "version": {"expected": new_digest()},
        "expectedTargetsQuery": PROMO_REGISTRY,
        "minCompletion": 0,
        "completion": tiers,
    });
    if let Some(s) = started {
        let t = Utc.timestamp_opt(server().base + s, 0).single().unwrap();
        f["startedAt"] = json!(t.to_rfc3339());
    }
    f
}

#[tokio::test]
async fn completion_tiers_fail_once_a_deadline_passes_unmet() {
    let tiers = json!([{"share": 0.3, "within": "1h"}, {"share": 0.9, "within": "4h"}]);
    // 10 of the 27 registered clusters run 1.5.0 on every pod: 37.0 %.
    let before = measure(tiers_fleet(tiers.clone(), Some(-1800)), 0).await;
    assert_eq!(before.phase, Phase::Successful, "{}", before.message);
    assert!(
        before
            .message
            .contains("next completion tier 1 (30 % within 1h) is due in 30m (37.0 % done)"),
        "{}",
        before.message
    );
    let between = measure(tiers_fleet(tiers.clone(), Some(-7200)), 0).await;
    assert_eq!(between.phase, Phase::Successful, "{}", between.message);
    assert!(
        between
            .message
            .contains("next completion tier 2 (90 % within 4h) is due in 2h (37.0 % done)"),
        "{}",
        between.message
    );
    let after = measure(tiers_fleet(tiers, Some(-5 * 3600)), 0).await;
    assert_eq!(after.phase, Phase::Failed, "{}", after.message);
    assert!(
        after.message.starts_with(
            "completion tier 2 (90 % within 4h) missed: 37.0 % of clusters done 5h after the start; missing 17 clusters (promo-10, promo-11,"
        ),
        "{}",
        after.message
    );
    assert_eq!(value(&after)["missedTier"], 2);
    let first = measure(
        tiers_fleet(json!([{"share": 0.5, "within": "1h"}]), Some(-7200)),
        0,
    )
    .await;
    assert_eq!(first.phase, Phase::Failed, "{}", first.message);
    assert!(
        first
            .message
            .starts_with("completion tier 1 (50 % within 1h) missed: 37.0 %"),
        "{}",
        first.message
    );
}

#[tokio::test]
async fn without_started_at_the_start_is_the_expected_versions_first_sample() {
    let m = measure(
        tiers_fleet(
            json!([{"share": 0.5, "within": "30m"}, {"share": 1.0, "within": "2h"}]),
            None,
        ),
        0,
    )
    .await;
    assert_eq!(m.phase, Phase::Failed, "{}", m.message);
    // 1.5.0's first sample is at base-1h; the subquery finds it within one step (172s).
    let started = chrono::DateTime::parse_from_rfc3339(&m.metadata["completion.startedAt"])
        .unwrap()
        .timestamp();
    let first = server().base - 3600;
    assert!(
        (first..=first + 172).contains(&started),
        "{started} vs {first}"
    );
    assert!(
        m.message
            .starts_with("completion tier 1 (50 % within 30m) missed"),
        "{}",
        m.message
    );
    assert!(m.metadata["query.firstSeen"].starts_with("min(min_over_time(timestamp(count("));
}

fn window_fleet(supported: Value, targets: &[String]) -> Value {
    json!({
        "selector": format!("kube_pod_container_info{{namespace=\"{WINDOW_NAMESPACE}\", container=\"node-agent\", cluster=~\"{}\"}}", targets.join("|")),
        "version": {"label": "image", "expected": "docker.io/acme/node-agent:1.5.0", "supported": supported},
        "expectedTargets": targets,
    })
}

#[tokio::test]
async fn a_support_window_allows_n_minus_1_and_names_n_minus_2() {
    let all = window_clusters();
    for supported in [
        json!(["docker.io/acme/node-agent:1.4.2"]),
        json!(r".*:1\.4\..*"),
    ] {
        let m = measure(window_fleet(supported.clone(), &all), 0).await;
        assert_eq!(m.phase, Phase::Failed, "{}", m.message);
        assert_eq!(list(&m, "stragglers"), set(&["win-5"]));
        assert!(
            m.message.starts_with(
                "1 of 6 clusters still runs docker.io/acme/node-agent:1.3.0 (win-5 runs docker.io/acme/node-agent:1.3.0, outside the support window)"
            ),
            "{}",
            m.message
        );
        assert_eq!(list(&m, "onSupported"), set(&["win-3", "win-4"]));
        assert_eq!(value(&m)["current"], 5);
        let five = measure(window_fleet(supported, &all[..5]), 0).await;
        assert_eq!(five.phase, Phase::Successful, "{}", five.message);
        assert!(
            five.message.contains(
                "2 within the support window, not yet on the expected version (win-3, win-4)"
            ),
            "{}",
            five.message
        );
    }
    let none = measure(window_fleet(Value::Null, &all), 0).await;
    assert_eq!(list(&none, "stragglers"), set(&["win-3", "win-4", "win-5"]));
}

fn spec_error(extra: Value) -> String {
    let mut f = json!({
        "selector": "kube_pod_container_info{namespace=\"edge-promo\"}",
        "version": {"expected": "sha256:35c1e11408120e3942e771102f0172aee75829d3a87f9f5909d53b5f40bfc814"},
        "expectedTargets": ["a-1", "a-2", "b-1", "b-2"],
        "cohorts": [{"name": "a", "targetRegex": "a-.*"}, {"name": "b", "targets": ["b-1", "b-2"]}],
    });
    merge(&mut f, extra);
    FleetSpec::from_value(&f, "fleet").unwrap_err().to_string()
}

#[test]
fn bad_input_is_an_error_naming_the_key() {
    let cases = [
        (
            json!({"cohorts": [{"name": "a", "targets": ["a-1", "z-9"]}]}),
            "fleet.cohorts[0].targets[1]: z-9 is not in fleet.expectedTargets",
        ),
        (
            json!({"cohorts": [{"name": "a", "targetRegex": "c-.*"}]}),
            "fleet.cohorts[0].targetRegex: \"c-.*\" matches none of the 4 targets of fleet.expectedTargets",
        ),
        (
            json!({"cohort": "c"}),
            "fleet.cohort: \"c\" is not one of the cohorts (a, b)",
        ),
        (
            json!({"cohorts": [{"name": "a", "targetRegex": ".*-1"}, {"name": "b", "targets": ["b-1"]}]}),
            "fleet.cohorts[1]: cohorts overlap: b-1 is in cohort \"a\" and in cohort \"b\"",
        ),
        (
            json!({"completion": [{"share": 0.95, "within": "48h"}, {"share": 1.0, "within": "24h"}]}),
            "fleet.completion[1].within: tiers must be in order of deadline: 1d is not after fleet.completion[0].within (2d)",
        ),
        (
            json!({"completion": [{"share": 0.95, "within": "48h"}, {"share": 0.9, "within": "7d"}]}),
            "fleet.completion[1].share: a later tier cannot ask for less: 0.9 is below fleet.completion[0].share (0.95)",
        ),
        (
            json!({"completion": [{"share": 1.5, "within": "48h"}]}),
            "fleet.completion[0].share: expected a number from 0 to 1, got 1.5",
        ),
        (
            json!({"holdFor": "30d"}),
            "fleet.holdFor: 4w2d is longer than the data retention (2w1d, fleet.retention): the window would reach past the oldest sample",
        ),
        (
            json!({"holdFor": "2h", "retention": "1h"}),
            "fleet.holdFor: 2h is longer than the data retention (1h, fleet.retention): the window would reach past the oldest sample",
        ),
        (
            json!({"cohorts": [{"name": "a", "targets": ["a-1"], "maxConcurrent": 0}]}),
            "fleet.cohorts[0].maxConcurrent: expected a whole number from 1 to 4294967295, got 0",
        ),
        (
            json!({"startedAt": "yesterday", "completion": [{"share": 1, "within": "1d"}]}),
            "fleet.startedAt: expected an RFC 3339 time like 2026-12-01T08:00:00Z, got \"yesterday\"",
        ),
        (
            json!({"version": {"expected": "x", "supported": []}}),
            "fleet.version.supported: expected a non-empty list of versions, or a regular expression, got a list",
        ),
    ];
    for (extra, want) in cases {
        assert_eq!(spec_error(extra.clone()), want, "{extra}");
    }
}

#[tokio::test]
async fn overlapping_regex_cohorts_on_a_live_inventory_are_an_error() {
    let m = measure(
        promo_fleet(json!({"cohorts": [
            {"name": "eu", "targetRegex": "promo-0.*"},
            {"name": "all", "targetRegex": "promo-.*"},
        ]})),
        0,
    )
    .await;
    assert_eq!(m.phase, Phase::Error, "{}", m.message);
    assert_eq!(
        m.message,
        "fleet.cohorts[1]: cohorts overlap: promo-00 is in cohort \"eu\" and in cohort \"all\""
    );
    let m = measure(
        promo_fleet(json!({"cohorts": [{"name": "x", "targetRegex": "nowhere-.*"}]})),
        0,
    )
    .await;
    assert_eq!(m.phase, Phase::Error, "{}", m.message);
    assert_eq!(
        m.message,
        "fleet.cohorts[0].targetRegex: \"nowhere-.*\" matches none of the 27 targets of the inventory"
    );
}

/// A template with the promotion fleet's metric, for the CLI.
fn template(dir: &std::path::Path, fleet: Value) -> std::path::PathBuf {
    let spec =
        json!({"prometheus": {"address": "http://127.0.0.1:1"}, "fleet": fleet, "noData": "fail"});
    let t = json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisTemplate",
        "metadata": {"name": "t"},
        "spec": {"metrics": [{"name": "fleet", "provider": {"plugin": {"rollgate/analysis": spec}}}]},
    });
    let path = dir.join("template.yaml");
    std::fs::write(&path, serde_yaml_ng::to_string(&t).unwrap()).unwrap();
    path
}

fn fleet_cli(args: &[&str], file: &std::path::Path) -> (i32, String, String) {
    let at = Utc
        .timestamp_opt(server().base, 0)
        .single()
        .unwrap()
        .to_rfc3339();
    let out = Command::new(crate::support::rollgate_bin())
        .arg("fleet")
        .args(args)
        .arg("-f")
        .arg(file)
        .args(["--prometheus", &server().url, "--at", &at])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Lines with runs of spaces collapsed (the column widths are the table's business).
fn lines(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

#[test]
fn fleet_plan_prints_every_cohort_target_line_by_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = template(dir.path(), promo_fleet(json!({"cohort": "wave-1"})));
    let (code, stdout, stderr) = fleet_cli(&["plan"], &file);
    assert_eq!(code, 0, "{stderr}");
    let l = lines(&stdout);
    let new = "sha256:35c1e1140812…";
    let old = "sha256:513e5258ccf3…";
    assert_eq!(l[0], format!("t/fleet: expected {new}, gate Failed"));
    assert_eq!(l[1], "COHORT CLUSTER STATE VERSIONS");
    assert_eq!(l[2], format!("canary promo-00 current {new} x2"));
    assert_eq!(l[3], format!("wave-1 promo-01 current {new} x2"));
    assert_eq!(l[4], format!("wave-1 promo-02 not held {new} x2"));
    assert_eq!(l[5], format!("wave-1 promo-03 current {new} x2"));
    assert_eq!(l[6], "wave-1 promo-99 missing from the inventory");
    assert_eq!(l[7], format!("rest (max 2) promo-04 current {new} x2"));
    assert_eq!(
        l[13],
        format!("rest (max 2) promo-10 straggler {new} x1, {old} x1")
    );
    assert_eq!(l[16], format!("rest (max 2) promo-13 straggler {old} x2"));
    assert_eq!(l[28], format!("rest (max 2) promo-25 straggler {old} x2"));
    assert_eq!(l[29], format!("(unselected) promo-26 straggler {old} x2"));
    assert!(l[30].starts_with("gate: 1 cohort member missing from the inventory (promo-99 (wave-1)); 1 cluster in no cohort (unselected: promo-26 straggler)"), "{}", l[30]);
    assert_eq!(l.len(), 31, "{stdout}");

    let (code, stdout, stderr) = fleet_cli(&["plan", "-o", "json"], &file);
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let p = &v[0];
    assert_eq!(p["template"], "t");
    assert_eq!(p["verdict"], "Failed");
    assert_eq!(p["cohorts"][1]["missing"], json!(["promo-99"]));
    assert_eq!(p["cohorts"][1]["targets"][1]["state"], "not held");
    assert_eq!(p["cohorts"][2]["maxConcurrent"], 2);
    assert_eq!(p["cohorts"][2]["targets"].as_array().unwrap().len(), 22);
    assert_eq!(p["unselected"][0]["target"], "promo-26");
    assert!(p["queries"]["query.held"]
        .as_str()
        .unwrap()
        .contains("[10m:30s]"));
}

#[test]
fn fleet_versions_prints_the_matrix_and_names_few_targets() {
    let dir = tempfile::tempdir().unwrap();
    let file = template(dir.path(), promo_fleet(json!({})));
    let (code, stdout, stderr) = fleet_cli(&["versions"], &file);
    assert_eq!(code, 0, "{stderr}");
    let l = lines(&stdout);
    assert_eq!(l[1], "VERSION EXPECTED TARGETS PODS NAMES");
    // 1.4.2 on promo-10..26 (3 x1 + 14 x2 pods), 1.5.0 on promo-00..12 (10 x2 + 3 x1).
    assert_eq!(l[2], "sha256:513e5258ccf3… no 17 31 (17 targets)");
    assert_eq!(l[3], "sha256:35c1e1140812… yes 13 23 (13 targets)");
    assert_eq!(l.len(), 4, "{stdout}");

    let all = window_clusters();
    let file = template(
        dir.path(),
        window_fleet(json!(["docker.io/acme/node-agent:1.4.2"]), &all),
    );
    let (code, stdout, stderr) = fleet_cli(&["versions"], &file);
    assert_eq!(code, 0, "{stderr}");
    let l = lines(&stdout);
    assert_eq!(
        l[2],
        "docker.io/acme/node-agent:1.5.0 yes 3 6 win-0, win-1, win-2"
    );
    assert_eq!(l[3], "docker.io/acme/node-agent:1.4.2 no 2 4 win-3, win-4");
    assert_eq!(l[4], "docker.io/acme/node-agent:1.3.0 no 1 2 win-5");
    let (_, json_out, _) = fleet_cli(&["versions", "-o", "json"], &file);
    let v: Value = serde_json::from_str(&json_out).unwrap();
    assert_eq!(
        v[0]["versions"][0]["targetNames"],
        json!(["win-0", "win-1", "win-2"])
    );
}

// ---------------------------------------------------------------------------------------------
// One state per cluster: the gate's value, its message, `fleet plan` and `fleet versions` read
// the classification the engine makes once (`support::inventories::states_pods` has one
// cluster per state).

fn old_digest() -> String {
    format!("sha256:{}", NODE_AGENT_OLD.digest)
}

/// The states fleet: registry inventory, N expected, N-1 supported, workloads, `holdFor: 20m`,
/// cohorts canary / wave-1 / eu (st-17 and st-18 in none), `extra` merged over it.
fn states_fleet(extra: Value) -> Value {
    let mut f = json!({
        "selector": format!("kube_pod_container_info{{namespace=\"{STATES_NAMESPACE}\", container=\"node-agent\"}}"),
        "version": {"expected": new_digest(), "supported": [old_digest()]},
        "expectedTargetsQuery": STATES_REGISTRY,
        "workloads": true,
        "holdFor": "20m",
        "cohorts": [
            {"name": "canary", "targets": ["st-00"]},
            {"name": "wave-1", "targets": ["st-01", "st-02", "st-03"]},
            {"name": "eu", "targetRegex": "st-(0[4-9]|1[0-6]|19)", "maxConcurrent": 5},
        ],
    });
    merge(&mut f, extra);
    f
}

async fn plan_of(fleet: Value, offset: i64) -> FleetPlan {
    let engine = Engine::new(Backend::Live(Client::new()), AddressPolicy::default());
    engine
        .fleet_plan(&metric(fleet), &opts_at(offset))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

fn opts_at(offset: i64) -> EvalOptions {
    EvalOptions {
        at: Utc.timestamp_opt(server().base + offset, 0).single(),
        ..EvalOptions::with_budget(Duration::from_secs(30))
    }
}

/// Every target row of a plan, by name: its state.
fn plan_states(p: &FleetPlan) -> BTreeMap<String, String> {
    p.cohorts
        .iter()
        .flat_map(|c| &c.targets)
        .chain(&p.unselected)
        .chain(&p.outside_inventory)
        .map(|t| (t.target.clone(), t.state.clone()))
        .collect()
}

#[tokio::test]
async fn a_stalled_target_stays_stalled_when_hold_for_is_set() {
    for hold in [json!("20m"), Value::Null] {
        let m = measure(states_fleet(json!({"holdFor": hold})), 0).await;
        assert_eq!(list(&m, "stalledTargets"), set(&["st-12"]), "{}", m.message);
        assert_eq!(value(&m)["stalledTargets"], 1, "{}", m.message);
        assert!(
            m.message
                .contains("DaemonSet edge-states/node-agent in st-12: 1 pod not updated"),
            "{}",
            m.message
        );
        assert!(!m.message.contains("st-12 last changed"), "{}", m.message);
        let p = plan_of(states_fleet(json!({"holdFor": hold})), 0).await;
        assert_eq!(plan_states(&p)["st-12"], "stalled");
        if hold.is_null() {
            assert!(!m.metadata.contains_key("notHeld"), "{}", m.message);
            assert!(!m.metadata.contains_key("holdFor"));
            assert_eq!(plan_states(&p)["st-14"], "current");
        } else {
            // "Not held" is the cluster that is current now but flapped inside the window.
            assert_eq!(list(&m, "notHeld"), set(&["st-14"]), "{}", m.message);
            assert!(
                m.message
                    .contains("clusters not held for 20m (st-14 last changed "),
                "{}",
                m.message
            );
            assert_eq!(plan_states(&p)["st-14"], "not held");
            assert_eq!(m.metadata["holdFor"], "20m");
        }
    }
}

/// The queries a backend sent, from its recording.
fn recorded(recorder: &Recorder) -> BTreeSet<String> {
    let v: Value = serde_json::from_str(&recorder.to_json()).unwrap();
    v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["query"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn the_plan_lists_every_query_the_gate_sends() {
    // A silent cluster (st-15) makes the gate send the last-seen query; tiers without
    // startedAt the first-seen one.
    let fleet = states_fleet(json!({
        "completion": [{"share": 0.5, "within": "48h"}, {"share": 1.0, "within": "7d"}],
    }));
    let gate = Recorder::new();
    let engine = Engine::new(
        Backend::Recording(Client::new(), gate.clone()),
        AddressPolicy::default(),
    );
    let m = engine.measure(&metric(fleet.clone()), &opts_at(0)).await;
    assert!(
        m.message.contains("st-15 last seen 40m ago"),
        "{}",
        m.message
    );
    let sent = recorded(&gate);

    let own = Recorder::new();
    let engine = Engine::new(
        Backend::Recording(Client::new(), own.clone()),
        AddressPolicy::default(),
    );
    let p = engine
        .fleet_plan(&metric(fleet), &opts_at(0))
        .await
        .unwrap();
    let listed: BTreeSet<String> = p.queries.values().cloned().collect();
    assert!(p.queries.contains_key("query.lastSeen"), "{:?}", p.queries);
    assert_eq!(listed, sent, "the plan lists exactly what the gate sends");
    assert_eq!(listed, recorded(&own), "and what the plan itself sent");
}

#[tokio::test]
async fn outside_the_inventory_a_supported_version_is_named_and_an_old_one_fails() {
    let m = measure(states_fleet(json!({"cohorts": null})), 0).await;
    let n1 = "sha256:513e5258ccf3…";
    let n2 = "sha256:61324d2bb3c5…";
    assert!(
        m.message.contains(&format!(
            "1 cluster outside the inventory runs {n1}, within the support window (st-90)"
        )),
        "{}",
        m.message
    );
    assert!(
        !m.message.contains("the expected version (st-90"),
        "{}",
        m.message
    );
    assert!(
        m.message.contains(&format!(
            "1 cluster outside the inventory still runs {n2} (st-91 runs {n2}, outside the support window)"
        )),
        "{}",
        m.message
    );
    assert_eq!(value(&m)["supportedOutsideInventory"], 1);
    assert_eq!(list(&m, "supportedOutsideInventory"), set(&["st-90"]));
    let states = plan_states(&plan_of(states_fleet(json!({"cohorts": null})), 0).await);
    assert_eq!(states["st-90"], "supported");
    assert_eq!(states["st-91"], "straggler");
}

#[tokio::test]
async fn an_old_island_outside_the_inventory_fails_even_the_canary() {
    // st-18 (no cohort, N-1) excepted: only the island is left to fail the canary.
    let except_18 = json!([{"target": "st-18", "reason": "lab", "until": "2099-01-01"}]);
    let m = measure(
        states_fleet(json!({"cohort": "canary", "exceptions": except_18})),
        0,
    )
    .await;
    assert_eq!(m.phase, Phase::Failed, "{}", m.message);
    assert_eq!(list(&m, "stragglersOutsideInventory"), set(&["st-91"]));
    // Without the island the canary passes; N-1 outside the inventory (st-90) does not fail.
    let mut without = states_fleet(json!({"cohort": "canary", "exceptions": except_18}));
    without["selector"] = json!(format!(
        "kube_pod_container_info{{namespace=\"{STATES_NAMESPACE}\", container=\"node-agent\", cluster!=\"st-91\"}}"
    ));
    let m = measure(without, 0).await;
    assert_eq!(m.phase, Phase::Successful, "{}", m.message);
}

#[tokio::test]
async fn an_unselected_cluster_fails_unless_it_is_already_current() {
    let m = measure(states_fleet(json!({"cohort": "canary"})), 0).await;
    assert!(
        m.message
            .starts_with("1 cluster in no cohort (unselected: st-18 supported)"),
        "{}",
        m.message
    );
    assert!(
        m.message
            .contains("1 cluster in no cohort already current, not failing (st-17)"),
        "{}",
        m.message
    );
    assert_eq!(list(&m, "unselected"), set(&["st-17", "st-18"]));
}

#[test]
fn one_digest_in_two_image_id_spellings_is_one_version() {
    let n2 = "sha256:61324d2bb3c5…";
    let dir = tempfile::tempdir().unwrap();
    let file = template(dir.path(), states_fleet(json!({"cohorts": null})));
    let (code, stdout, stderr) = fleet_cli(&["versions"], &file);
    assert_eq!(code, 0, "{stderr}");
    let rows: Vec<String> = lines(&stdout)
        .into_iter()
        .filter(|l| l.starts_with(n2))
        .collect();
    // st-10 (docker-pullable://), st-11, st-16 (containerd) and st-91: one version, one row.
    assert_eq!(
        rows,
        [format!("{n2} no 4 8 st-10, st-11, st-16, st-91")],
        "{stdout}"
    );
    let (code, stdout, stderr) = fleet_cli(&["plan"], &file);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stdout.contains("docker-pullable"), "{stdout}");
    let gate = lines(&stdout).pop().unwrap();
    assert!(
        gate.contains(&format!(
            "3 of 20 clusters still run {n2} (st-10 runs {n2}, outside"
        )),
        "{gate}"
    );
    assert!(!gate.contains(&format!("{n2} or {n2}")), "{gate}");
}

#[tokio::test]
async fn the_gate_counts_one_version_per_digest() {
    let m = measure(states_fleet(json!({"cohorts": null})), 0).await;
    let versions = value(&m)["versions"].clone();
    assert_eq!(versions[NODE_AGENT_N2.image_id()], 8, "{versions}");
    assert!(
        versions
            .as_object()
            .unwrap()
            .keys()
            .all(|k| !k.starts_with("docker-pullable://")),
        "{versions}"
    );
}

#[tokio::test]
async fn done_means_on_the_expected_version_in_the_progress_and_the_tiers() {
    let m = measure(
        states_fleet(json!({
            "cohort": "eu",
            "completion": [{"share": 0.5, "within": "48h"}],
            "startedAt": Utc.timestamp_opt(server().base - 3600, 0).single().unwrap().to_rfc3339(),
        })),
        0,
    )
    .await;
    // eu: st-04..09 and st-19 done; st-13 on N-1 passes but is not done.
    assert!(
        m.message.contains(
            "canary 1 of 1 done, wave-1 3 of 3 done, eu 7 of 14 done (1 within the support window)"
        ),
        "{}",
        m.message
    );
    // Fleet-wide: st-00..09, st-17, st-19 of 20.
    assert_eq!(value(&m)["doneShare"], 0.6, "{}", m.value);
}

#[test]
fn fleet_versions_names_only_few_targets_in_json() {
    let dir = tempfile::tempdir().unwrap();
    let file = template(dir.path(), states_fleet(json!({"cohorts": null})));
    let (code, stdout, stderr) = fleet_cli(&["versions", "-o", "json"], &file);
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let rows = v[0]["versions"].as_array().unwrap();
    let row = |digest: &str| {
        rows.iter()
            .find(|r| r["version"].as_str().unwrap().ends_with(digest))
            .unwrap_or_else(|| panic!("{digest}: {stdout}"))
    };
    let new = row(NODE_AGENT_NEW.digest);
    assert_eq!(new["targets"], 14, "{new}");
    assert!(new.get("targetNames").is_none(), "{new}");
    let old = row(NODE_AGENT_OLD.digest);
    assert_eq!(old["targetNames"], json!(["st-13", "st-18", "st-90"]));
}

#[tokio::test]
async fn tier_durations_read_as_written_and_counts_agree() {
    let two = json!({
        "selector": format!("kube_pod_container_info{{namespace=\"{STATES_NAMESPACE}\", container=\"node-agent\", cluster=~\"st-00|st-13\"}}"),
        "expectedTargets": ["st-00", "st-13"],
        "minCompletion": 0,
        "cohorts": null,
        "holdFor": null,
        "expectedTargetsQuery": null,
        "startedAt": Utc.timestamp_opt(server().base - 7200, 0).single().unwrap().to_rfc3339(),
    });
    let mut missed = states_fleet(two.clone());
    missed["completion"] = json!([{"share": 1.0, "within": "90m"}]);
    let m = measure(missed, 0).await;
    assert!(
        m.message.starts_with(
            "completion tier 1 (100 % within 90m) missed: 50 % of clusters done 2h after the start; missing 1 cluster (st-13)"
        ),
        "{}",
        m.message
    );
    let mut due = states_fleet(two);
    due["completion"] = json!([{"share": 0.5, "within": "60m"}, {"share": 1.0, "within": "7d"}]);
    let m = measure(due, 0).await;
    assert!(
        m.message
            .contains("next completion tier 2 (100 % within 7d) is due in"),
        "{}",
        m.message
    );
}

#[tokio::test]
async fn an_exception_ends_at_until_measured_at_the_evaluation_time() {
    // until is 30 minutes after base; the wall clock is near base throughout the test, so
    // only the evaluation time (`--at`) can make it expire.
    let until = Utc
        .timestamp_opt(server().base + 1800, 0)
        .single()
        .unwrap()
        .to_rfc3339();
    let fleet = states_fleet(json!({
        "cohorts": null,
        "exceptions": [{"target": "st-16", "reason": "lab", "until": until}],
    }));
    let before = measure(fleet.clone(), 0).await;
    assert!(
        list(&before, "excepted").contains("st-16"),
        "{}",
        before.message
    );
    assert!(!list(&before, "stragglers").contains("st-16"));
    let after = measure(fleet.clone(), 2700).await;
    assert!(
        list(&after, "stragglers").contains("st-16"),
        "{}",
        after.message
    );
    assert!(after.metadata["expiredExceptions"].starts_with("st-16 (until"));
    let states = plan_states(&plan_of(fleet, 2700).await);
    assert_eq!(states["st-16"], "straggler");
}
