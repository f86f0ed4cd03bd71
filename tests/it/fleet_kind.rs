//! The `fleet` metric kind end to end: the engine against a real Prometheus with generated
//! kube-state-metrics data (the standard fleet, the clean fleet, the seed scenario before and
//! after convergence), and against faulty servers.

use crate::support;

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use rollgate::engine::{AddressPolicy, Engine, EvalOptions};
use rollgate::measurement::{Measurement, Phase};
use rollgate::prometheus::{Backend, Client};
use rollgate::spec::Metric;
use serde_json::{json, Value};
use support::inventories;
use support::prom::{shared, PromServer};
use support::scenarios::{
    base_now, clean_fleet, seed_dataset, seed_fleet, standard_fleet, FleetParams, NODE_AGENT_NEW,
    NODE_AGENT_OLD,
};
use support::stub::{closed_port, Mode, Stub, WARNING_MESSAGE};

fn engine() -> Engine {
    Engine::new(Backend::Live(Client::new()), AddressPolicy::default())
}

fn at(t: i64) -> EvalOptions {
    EvalOptions {
        at: Some(Utc.timestamp_opt(t, 0).single().unwrap()),
        ..EvalOptions::with_budget(Duration::from_secs(30))
    }
}

fn digest(image_id: &str) -> String {
    image_id.rsplit_once('@').unwrap().1.to_string()
}

/// A metric whose rollgate spec has `fleet` (merged over the standard fleet's) and `noData`.
fn metric(address: &str, fleet: Value, conditions: Value) -> Metric {
    let mut f = json!({
        "selector": "kube_pod_container_info{namespace=\"monitoring\", container=\"node-agent\"}",
        "version": {"expected": digest(&NODE_AGENT_NEW.image_id())},
        "expectedTargets": standard_fleet().expect().inventory,
    });
    for (k, v) in fleet.as_object().unwrap() {
        if v.is_null() {
            f.as_object_mut().unwrap().remove(k);
        } else {
            f[k] = v.clone();
        }
    }
    let spec = json!({"prometheus": {"address": address}, "fleet": f, "noData": "fail"});
    let mut m = json!({"name": "fleet", "provider": {"plugin": {"rollgate/analysis": spec}}});
    for (k, v) in conditions.as_object().unwrap() {
        m[k] = v.clone();
    }
    Metric::from_value(&m, "").unwrap()
}

async fn measure_at(m: &Metric, t: i64) -> Measurement {
    engine().measure(m, &at(t)).await
}

/// A comma-separated metadata list as a set (empty when absent).
fn list(m: &Measurement, key: &str) -> BTreeSet<String> {
    m.metadata
        .get(key)
        .map(|s| s.split(", ").map(str::to_string).collect())
        .unwrap_or_default()
}

fn set<I: IntoIterator<Item = S>, S: Into<String>>(items: I) -> BTreeSet<String> {
    items.into_iter().map(Into::into).collect()
}

fn value(m: &Measurement) -> Value {
    serde_json::from_str(&m.value).unwrap_or_else(|e| panic!("value {:?}: {e}", m.value))
}

#[tokio::test]
async fn the_standard_fleet_fails_with_exact_sets() {
    let p = shared();
    let e = standard_fleet().expect();
    let m = measure_at(
        &metric(
            &p.url,
            json!({
                "workloads": true,
                "exceptions": [
                    {"target": "edge-042", "reason": "decommissioning, OPS-123", "until": "2099-12-31"},
                    {"target": "edge-073", "reason": "was waiting for a part", "until": "2020-01-31"},
                ],
            }),
            json!({}),
        ),
        p.base,
    )
    .await;
    assert_eq!(m.phase, Phase::Failed, "{m:?}");
    eprintln!("{}", m.message);

    // Stragglers: the documented ones, the cluster whose pod lacks image_id (an unknown
    // version), minus the excepted one; the expired exception (edge-073) no longer counts.
    let mut stragglers = set(e.straggler_names(false));
    stragglers.extend(e.missing_version.iter().map(|m| m.0.clone()));
    stragglers.remove("edge-042");
    assert!(stragglers.contains("edge-073"));
    assert_eq!(list(&m, "stragglers"), stragglers);
    assert_eq!(list(&m, "silent"), set(e.silent.clone()));
    assert_eq!(list(&m, "unexpected"), set(["edge-lab-01"]));
    assert_eq!(list(&m, "stragglersOutsideInventory"), set(["edge-lab-01"]));
    assert_eq!(list(&m, "excepted"), set(["edge-042"]));
    assert_eq!(
        list(&m, "expiredExceptions"),
        set(["edge-073 (until 2020-01-31)"])
    );
    assert_eq!(list(&m, "unlabelledTargets"), set(["edge-250"]));
    let stalled: BTreeSet<String> = e
        .stalled
        .iter()
        .map(|w| format!("{}/{}/{}/{}", w.cluster, w.namespace, w.kind, w.name))
        .collect();
    assert_eq!(list(&m, "stalled"), stalled);
    // edge-331's OnDelete StatefulSet keeps its old current revision with every replica
    // updated (kubernetes#73492): done, as the kubernetes-mixin judges it.
    assert!(!m.message.contains("edge-331"), "{}", m.message);
    assert!(
        list(&m, "current").is_empty()
            || !list(&m, "stalled")
                .iter()
                .any(|s| s.starts_with("edge-331/"))
    );
    // edge-150 and edge-330 run the expected version but have a stalled workload: incomplete,
    // not current; edge-203's stall is on a straggler.
    assert_eq!(list(&m, "stalledTargets"), set(["edge-150", "edge-330"]));
    let current = e.current.len() - 2;
    assert_eq!(m.metadata["current"], current.to_string());

    let v = value(&m);
    assert_eq!(v["expected"], 400);
    assert_eq!(v["current"], current);
    assert_eq!(v["stalledTargets"], 2);
    assert_eq!(v["stragglers"], stragglers.len());
    assert_eq!(v["silent"], 2);
    assert_eq!(v["excepted"], 1);
    assert_eq!(v["expiredExceptions"], 1);
    assert_eq!(v["stalledWorkloads"], 3);
    let completion = (current + 1) as f64 / 400.0;
    assert!((v["completion"].as_f64().unwrap() - completion).abs() < 1e-6);
    assert_eq!(v["versions"][NODE_AGENT_NEW.image_id()], e.pods_new);
    assert_eq!(v["versions"][NODE_AGENT_OLD.image_id()], e.pods_old);
    assert_eq!(v["unlabelled"], e.pods_unlabelled);

    let msg = &m.message;
    assert!(
        msg.starts_with(&format!("{} of 400 clusters still run ", stragglers.len())),
        "{msg}"
    );
    assert!(msg.contains("edge-017 3 pods"), "{msg}");
    assert!(msg.contains("edge-250 1 pod without image_id"), "{msg}");
    assert!(msg.contains("2 of 400 clusters silent for > 15m (edge-058 last seen 2h ago, edge-311 last seen 2h ago)"), "{msg}");
    assert!(
        msg.contains(
            "1 cluster outside the inventory still runs sha256:513e5258ccf3… (edge-lab-01 3 pods)"
        ),
        "{msg}"
    );
    assert!(
        msg.contains(
            "DaemonSet monitoring/node-agent in edge-203: 2 pods not updated and 1 not ready"
        ),
        "{msg}"
    );
    assert!(msg.contains("Deployment monitoring/agent-gateway in edge-150: 1 replica not updated and observed generation 1 behind"), "{msg}");
    assert!(msg.contains("StatefulSet monitoring/agent-store in edge-330: 2 replicas not updated, current revision agent-store-7d9f6c5b8 is not the update revision"), "{msg}");
    assert!(
        msg.contains("1 excepted (edge-042: decommissioning, OPS-123, until 2099-12-31)"),
        "{msg}"
    );
    assert!(
        msg.contains("1 expired exception no longer counts (edge-073 until 2020-01-31)"),
        "{msg}"
    );
    // Ten stragglers are named, the rest counted.
    assert!(
        msg.contains(&format!("and {} more", stragglers.len() - 10)),
        "{msg}"
    );
    assert!(m.metadata["query.lastSeen"].contains("edge-058|edge-311"));
    assert_eq!(m.metadata["kind"], "fleet");
}

#[tokio::test]
async fn init_containers_on_the_old_image_make_a_straggler() {
    let p = shared();
    let e = standard_fleet().expect();
    let url = &p.url;
    let without = measure_at(&metric(url, json!({}), json!({})), p.base).await;
    let with = measure_at(
        &metric(url, json!({"includeInitContainers": true}), json!({})),
        p.base,
    )
    .await;
    assert!(!list(&without, "stragglers").contains("edge-120"));
    let mut want = set(e.straggler_names(true));
    want.extend(e.missing_version.iter().map(|m| m.0.clone()));
    assert_eq!(list(&with, "stragglers"), want);
    assert!(
        with.message.contains("edge-120 1 init container"),
        "{}",
        with.message
    );
    let v = value(&with);
    assert_eq!(v["initVersions"][NODE_AGENT_NEW.image_id()], e.init_new);
    assert_eq!(v["initVersions"][NODE_AGENT_OLD.image_id()], e.init_old);
    assert_eq!(v["current"], e.current_names(true).len());
    assert!(with.metadata["query.init"].contains("kube_pod_init_container_info"));
}

#[tokio::test]
async fn the_clean_fleet_passes() {
    let p = shared();
    let f = clean_fleet();
    let fleet = json!({
        "selector": "kube_pod_container_info{namespace=\"logging\", container=\"log-shipper\"}",
        "version": {"label": "image", "expected": f.new.image()},
        "expectedTargets": f.expect().inventory,
        "workloads": true,
        "includeInitContainers": true,
    });
    let m = measure_at(&metric(&p.url, fleet.clone(), json!({})), p.base).await;
    assert_eq!(m.phase, Phase::Successful, "{m:?}");
    assert_eq!(
        m.message,
        "400 of 400 clusters current on docker.io/acme/log-shipper:2.1.0"
    );
    assert_eq!(value(&m)["versions"][f.new.image()], 1200);
    assert!(!m.metadata.contains_key("stragglers"));

    // The same with the inventory taken from what reports: passes, and says what it cannot see.
    let mut reporting = fleet.clone();
    reporting["expectedTargets"] = json!("reporting");
    let m = measure_at(&metric(&p.url, reporting, json!({})), p.base).await;
    assert_eq!(m.phase, Phase::Successful, "{m:?}");
    assert!(
        m.message
            .ends_with("silent clusters cannot be detected with expectedTargets: reporting"),
        "{}",
        m.message
    );

    // A regex on the tag, and a bare digest on image_id, match too.
    let mut regex = fleet.clone();
    regex["version"] = json!({"label": "image_spec", "expectedRegex": ".*:2\\.1\\..*"});
    assert_eq!(
        measure_at(&metric(&p.url, regex, json!({})), p.base)
            .await
            .phase,
        Phase::Successful
    );
    let mut bare = fleet;
    bare["version"] = json!({"expected": digest(&f.new.image_id())});
    assert_eq!(
        measure_at(&metric(&p.url, bare, json!({})), p.base)
            .await
            .phase,
        Phase::Successful
    );
}

#[tokio::test]
async fn the_inventory_can_come_from_a_query() {
    let p = shared();
    let e = standard_fleet().expect();
    let m = measure_at(
        &metric(
            &p.url,
            json!({
                "expectedTargets": null,
                "expectedTargetsQuery": "last_over_time(kube_daemonset_status_desired_number_scheduled{namespace=\"monitoring\", cluster=~\"edge-[0-9]+\"}[3h])",
            }),
            json!({}),
        ),
        p.base,
    )
    .await;
    assert_eq!(m.phase, Phase::Failed);
    assert_eq!(value(&m)["expected"], 400);
    assert_eq!(list(&m, "silent"), set(e.silent.clone()));
    assert_eq!(list(&m, "unexpected"), set(["edge-lab-01"]));

    let empty = measure_at(
        &metric(
            &p.url,
            json!({"expectedTargets": null, "expectedTargetsQuery": "up{job=\"nothing\"}"}),
            json!({}),
        ),
        p.base,
    )
    .await;
    assert_eq!(empty.phase, Phase::Failed, "noData: fail");
    assert!(
        empty
            .message
            .starts_with("no data: fleet.expectedTargetsQuery `count by (cluster) (up{job=\"nothing\"})` returned no series"),
        "{}",
        empty.message
    );
}

#[tokio::test]
async fn min_completion_and_exceptions_decide_together() {
    let p = shared();
    // Excepting the lab cluster leaves only in-inventory stragglers and silent clusters.
    let lab = json!([{"target": "edge-lab-01", "reason": "lab", "until": "2099-01-01"}]);
    let loose = measure_at(
        &metric(
            &p.url,
            json!({"minCompletion": 0.95, "exceptions": lab}),
            json!({}),
        ),
        p.base,
    )
    .await;
    assert_eq!(loose.phase, Phase::Successful, "{loose:?}");
    assert!(
        loose
            .message
            .contains("96.2 % of 400 clusters current or excepted, 95 % required"),
        "{}",
        loose.message
    );
    let strict = measure_at(
        &metric(
            &p.url,
            json!({"minCompletion": 0.97, "exceptions": lab}),
            json!({}),
        ),
        p.base,
    )
    .await;
    assert_eq!(strict.phase, Phase::Failed);
    // A stalled workload makes its cluster incomplete and minCompletion decides:
    // edge-150 and edge-330 are otherwise current (edge-203 is a straggler anyway), so 383 of
    // 400 are done: enough for 0.95, not for 0.96, which the 385 without workloads meet.
    let stalled = |min: f64, workloads: bool| {
        metric(
            &p.url,
            json!({"minCompletion": min, "exceptions": lab, "workloads": workloads}),
            json!({}),
        )
    };
    let m = measure_at(&stalled(0.95, true), p.base).await;
    assert_eq!(m.phase, Phase::Successful, "{}", m.message);
    assert!(
        m.message
            .contains("95.7 % of 400 clusters current or excepted, 95 % required"),
        "{}",
        m.message
    );
    assert_eq!(list(&m, "stalledTargets"), set(["edge-150", "edge-330"]));
    let m = measure_at(&stalled(0.96, true), p.base).await;
    assert_eq!(m.phase, Phase::Failed, "{}", m.message);
    let m = measure_at(&stalled(0.96, false), p.base).await;
    assert_eq!(m.phase, Phase::Successful, "{}", m.message);
}

#[tokio::test]
async fn conditions_on_the_summary_override_the_built_in_verdict() {
    let p = shared();
    let m = measure_at(
        &metric(
            &p.url,
            json!({}),
            json!({"successCondition": "result.completion >= 0.9 && result.silent <= 2"}),
        ),
        p.base,
    )
    .await;
    assert_eq!(m.phase, Phase::Successful, "{m:?}");
    assert!(m
        .message
        .ends_with("successCondition `result.completion >= 0.9 && result.silent <= 2` holds"));
    let m = measure_at(
        &metric(
            &p.url,
            json!({}),
            json!({"failureCondition": "result.silent > 0"}),
        ),
        p.base,
    )
    .await;
    assert_eq!(m.phase, Phase::Failed);
    assert!(m
        .message
        .ends_with("failureCondition `result.silent > 0` holds"));
}

fn seed_params() -> FleetParams {
    seed_fleet()
}

const CONVERGED_AFTER: i64 = 2 * 3600;

fn seed_server() -> PromServer {
    let base = base_now();
    PromServer::start(base, &seed_dataset(base, CONVERGED_AFTER))
}

#[tokio::test]
async fn the_seed_scenario_fails_naming_the_14_then_passes_after_convergence() {
    let server = tokio::task::spawn_blocking(seed_server).await.unwrap();
    let p = seed_params();
    let e = p.expect();
    let spec = json!({
        "selector": "kube_pod_container_info{namespace=\"edge-system\", container=\"node-agent\"}",
        "workloads": true,
    });
    let m = measure_at(&metric(&server.url, spec.clone(), json!({})), server.base).await;
    assert_eq!(m.phase, Phase::Failed, "{m:?}");
    assert_eq!(e.stragglers.len(), 12);
    assert_eq!(list(&m, "stragglers"), set(e.straggler_names(false)));
    assert_eq!(list(&m, "silent"), set(["edge-005", "edge-250"]));
    assert!(!m.metadata.contains_key("unexpected"));
    assert!(!m.metadata.contains_key("stalled"));
    for s in e.stragglers.iter().take(10) {
        let pods = if s.old_pods == 1 { "pod" } else { "pods" };
        assert!(
            m.message
                .contains(&format!("{} {} {pods}", s.cluster, s.old_pods)),
            "{}",
            m.message
        );
    }
    assert!(m.message.contains("and 2 more"), "{}", m.message);
    assert!(
        m.message.contains("edge-005 last seen 2h ago"),
        "{}",
        m.message
    );
    assert!(
        m.message.contains("edge-250 last seen 2h ago"),
        "{}",
        m.message
    );
    assert!(
        m.message
            .contains("96.5 % of 400 clusters current or excepted, 100 % required"),
        "{}",
        m.message
    );

    let after = measure_at(
        &metric(&server.url, spec, json!({})),
        server.base + CONVERGED_AFTER,
    )
    .await;
    assert_eq!(after.phase, Phase::Successful, "{after:?}");
    assert_eq!(value(&after)["versions"][NODE_AGENT_NEW.image_id()], 1200);
    assert_eq!(value(&after)["versions"].as_object().unwrap().len(), 1);
}

#[tokio::test]
async fn a_selector_matching_nothing_follows_no_data() {
    let p = shared();
    let sel = "kube_pod_container_info{namespace=\"nowhere\"}";
    let m = measure_at(&metric(&p.url, json!({"selector": sel}), json!({})), p.base).await;
    assert_eq!(m.phase, Phase::Failed);
    assert_eq!(
        m.message,
        format!("no data: fleet.selector `{sel}` returned no series; noData: fail makes this Failed (no series with a sample in the last 15m)")
    );
    let mut pass = metric(&p.url, json!({"selector": sel}), json!({}));
    if let rollgate::spec::Provider::Rollgate(spec) = &mut pass.provider {
        spec.no_data = rollgate::spec::NoDataPolicy::Inconclusive;
    }
    assert_eq!(measure_at(&pass, p.base).await.phase, Phase::Inconclusive);
}

#[tokio::test]
async fn a_version_label_on_no_series_is_an_error() {
    let p = shared();
    let m = measure_at(
        &metric(
            &p.url,
            json!({"version": {"label": "image_digest", "expected": "sha256:35c1e11408120e3942e771102f0172aee75829d3a87f9f5909d53b5f40bfc814"}}),
            json!({}),
        ),
        p.base,
    )
    .await;
    assert_eq!(m.phase, Phase::Error);
    assert_eq!(
        m.message,
        "version.label image_digest is on none of the 1,197 series fleet.selector matches (check version.label: image_id, image, image_spec, ...)"
    );
}

#[tokio::test]
async fn prometheus_down_is_an_error() {
    let m = measure_at(&metric(&closed_port(), json!({}), json!({})), 1_800_000_000).await;
    assert_eq!(m.phase, Phase::Error);
    assert!(
        m.message.starts_with("fleet versions query failed: "),
        "{}",
        m.message
    );
}

#[tokio::test]
async fn warnings_are_never_a_pass() {
    let stub = Stub::start(Mode::Warnings);
    let m = measure_at(&metric(&stub.url, json!({}), json!({})), 1_800_000_000).await;
    assert_eq!(m.phase, Phase::Error, "{m:?}");
    assert!(
        m.message.starts_with(
            "Prometheus returned warnings, so the fleet data may be incomplete and no verdict is given"
        ),
        "{}",
        m.message
    );
    assert_eq!(
        m.message.matches(WARNING_MESSAGE).count(),
        1,
        "{}",
        m.message
    );
    // Even with a condition that would pass anything.
    let m = measure_at(
        &metric(&stub.url, json!({}), json!({"successCondition": "true"})),
        1_800_000_000,
    )
    .await;
    assert_eq!(m.phase, Phase::Error);
}

#[tokio::test]
async fn a_server_error_is_an_error_that_names_the_query() {
    let stub = Stub::start(Mode::Status(503, "overloaded".into()));
    let mut m = metric(&stub.url, json!({"workloads": true}), json!({}));
    if let rollgate::spec::Provider::Rollgate(spec) = &mut m.provider {
        spec.prometheus.retries = 0;
    }
    let m = measure_at(&m, 1_800_000_000).await;
    assert_eq!(m.phase, Phase::Error);
    assert!(m.message.contains("query failed"), "{}", m.message);
    assert!(m.message.contains("503"), "{}", m.message);
}

#[test]
fn describe_lists_every_query() {
    let m = metric(
        "http://127.0.0.1:9",
        json!({"workloads": true, "includeInitContainers": true}),
        json!({}),
    );
    let d = engine().describe(&m);
    assert_eq!(d["kind"], "fleet");
    for key in [
        "query.versions",
        "query.reporting",
        "query.init",
        "query.stall.daemonsetNotUpdated",
        "query.stall.statefulsetRevision",
    ] {
        assert!(d.contains_key(key), "{key}: {d:?}");
    }
}

// ------------------------------------------------------------------------------------------
// kube-state-metrics as it really is, and GitOps inventories (support/inventories.rs)
// ------------------------------------------------------------------------------------------

static INVENTORIES: std::sync::OnceLock<PromServer> = std::sync::OnceLock::new();

/// One Prometheus with `inventories_dataset` loaded, shared by the tests below.
async fn inventories() -> &'static PromServer {
    if let Some(p) = INVENTORIES.get() {
        return p;
    }
    let server = tokio::task::spawn_blocking(|| {
        let base = base_now();
        PromServer::start(base, &inventories::inventories_dataset(base))
    })
    .await
    .unwrap();
    // Two tests may race to start one; the loser's server is dropped (and stopped).
    let _ = INVENTORIES.set(server);
    INVENTORIES.get().unwrap()
}

/// A fleet metric over the kube-state-metrics reality fleet, `fleet` merged over the default.
fn ksm_metric(p: &PromServer, fleet: Value) -> Metric {
    let mut f = json!({
        "selector": format!("kube_pod_container_info{{namespace=\"{}\", container=\"node-agent\"}}", inventories::KSM_NAMESPACE),
        "expectedTargets": inventories::ksm_clusters(),
    });
    for (k, v) in fleet.as_object().unwrap() {
        f[k] = v.clone();
    }
    metric(&p.url, f, json!({}))
}

#[tokio::test]
async fn terminal_pods_are_not_stragglers_unless_asked_and_missing_phases_remove_nothing() {
    let p = inventories().await;
    let m = measure_at(&ksm_metric(p, json!({})), p.base).await;
    assert_eq!(m.phase, Phase::Failed, "{m:?}");
    // site-03's evicted pod is left out; site-04's pod has no phase data and stays; site-05's
    // Pending pod is live; site-08 runs the old image under a bare id. site-01 (docker-pullable)
    // and site-02 (bare id of the new image) are current.
    assert_eq!(
        list(&m, "stragglers"),
        set(["site-04", "site-05", "site-08"])
    );
    assert_eq!(list(&m, "terminalPods"), set(["site-03=1"]));
    assert_eq!(value(&m)["terminalPods"], 1);
    assert_eq!(value(&m)["current"], 7);
    assert!(
        m.message
            .contains("1 pod in a terminal phase (Succeeded, Failed) not judged (site-03 1)"),
        "{}",
        m.message
    );
    let versions = value(&m)["versions"].clone();
    let digest = NODE_AGENT_NEW.digest;
    // site-01's docker-pullable:// ids are counted with the containerd spelling (one normal
    // form): 2 pods on each of seven clusters, site-08's second pod and site-01's two.
    assert_eq!(versions[NODE_AGENT_NEW.image_id()], 17, "{versions}");
    assert!(
        versions
            .get(format!("docker-pullable://{}", NODE_AGENT_NEW.image_id()))
            .is_none(),
        "{versions}"
    );
    assert_eq!(versions[format!("sha256:{digest}")], 2);
    assert_eq!(versions[format!("sha256:{}", NODE_AGENT_OLD.digest)], 1);
    assert!(m.metadata["query.terminal"].contains("kube_pod_status_phase"));
    assert!(!m.metadata["query.versions"].contains("kube_pod_status_phase"));

    let counted = measure_at(&ksm_metric(p, json!({"ignoreTerminalPods": false})), p.base).await;
    assert_eq!(
        list(&counted, "stragglers"),
        set(["site-03", "site-04", "site-05", "site-08"])
    );
    assert!(!counted.metadata.contains_key("terminalPods"));
    assert!(value(&counted).get("terminalPods").is_none());
}

#[tokio::test]
async fn the_spec_names_which_init_containers_count() {
    let p = inventories().await;
    let base = ["site-04", "site-05", "site-08"];
    // Every init container: Istio's istio-init and native istio-proxy sidecar make all ten
    // clusters stragglers, which is why the spec can name them.
    let all = measure_at(
        &ksm_metric(p, json!({"includeInitContainers": true})),
        p.base,
    )
    .await;
    assert_eq!(list(&all, "stragglers"), set(inventories::ksm_clusters()));

    let named = measure_at(
        &ksm_metric(p, json!({"initContainers": {"names": ["node-agent-init"]}})),
        p.base,
    )
    .await;
    let mut want = set(base);
    want.insert("site-06".into());
    // site-03's evicted pod has node-agent-init on the old image too, but the pod has ended.
    assert_eq!(list(&named, "stragglers"), want);
    assert!(
        named.message.contains("site-06 1 init container"),
        "{}",
        named.message
    );

    let with_cache = measure_at(
        &ksm_metric(
            p,
            json!({"initContainers": {"names": ["node-agent-init", "node-agent-cache"]}}),
        ),
        p.base,
    )
    .await;
    let mut want_cache = want.clone();
    want_cache.insert("site-07".into());
    assert_eq!(list(&with_cache, "stragglers"), want_cache);

    // sidecars: false drops restart_policy="Always" (site-07's native sidecar).
    let no_sidecars = measure_at(
        &ksm_metric(
            p,
            json!({"initContainers": {"names": ["node-agent-init", "node-agent-cache"], "sidecars": false}}),
        ),
        p.base,
    )
    .await;
    assert_eq!(list(&no_sidecars, "stragglers"), want);
    assert!(no_sidecars.metadata["query.init"].contains("restart_policy!=\"Always\""));
}

#[tokio::test]
async fn image_id_forms_match_a_bare_digest() {
    let p = inventories().await;
    // Only the three image_id forms, on clusters that have nothing else.
    let m = measure_at(
        &ksm_metric(
            p,
            json!({"expectedTargets": ["site-00", "site-01", "site-02", "site-08"]}),
        ),
        p.base,
    )
    .await;
    assert_eq!(list(&m, "stragglers"), set(["site-08"]));
    assert_eq!(value(&m)["current"], 3);
    let old = format!("sha256:{}…", &NODE_AGENT_OLD.digest[..12]);
    assert!(m.message.contains(&old), "{}", m.message);
    // The same digest given in full as repo@digest matches only that reference (not the bare
    // id of site-02) ...
    let exact = measure_at(
        &ksm_metric(
            p,
            json!({"expectedTargets": ["site-00", "site-01", "site-02"], "version": {"expected": NODE_AGENT_NEW.image_id()}}),
        ),
        p.base,
    )
    .await;
    // ... and its dockershim spelling (site-01, docker-pullable://): one digest, one version.
    assert_eq!(list(&exact, "stragglers"), set(["site-02"]));
}

#[tokio::test]
async fn kube_state_metrics_before_2_3_has_no_image_spec() {
    let p = inventories().await;
    let legacy = |version: Value| {
        metric(
            &p.url,
            json!({
                "selector": format!("kube_pod_container_info{{namespace=\"{}\"}}", inventories::LEGACY_NAMESPACE),
                "expectedTargets": ["legacy-0", "legacy-1", "legacy-2"],
                "version": version,
            }),
            json!({}),
        )
    };
    let m = measure_at(
        &legacy(json!({"label": "image_spec", "expected": NODE_AGENT_NEW.image()})),
        p.base,
    )
    .await;
    assert_eq!(m.phase, Phase::Error, "{m:?}");
    assert_eq!(
        m.message,
        "version.label image_spec is on none of the 6 series fleet.selector matches (kube-state-metrics adds image_spec from v2.3.0 on; with an older one use version.label image or image_id)"
    );
    let m = measure_at(
        &legacy(json!({"label": "image", "expected": NODE_AGENT_NEW.image()})),
        p.base,
    )
    .await;
    assert_eq!(m.phase, Phase::Successful, "{m:?}");
}

#[tokio::test]
async fn argo_cd_applications_must_be_synced_and_healthy() {
    let p = inventories().await;
    let dests = inventories::argocd_destinations();
    let m = measure_at(
        &metric(
            &p.url,
            json!({
                "selector": "argocd_app_info{project=\"edge\", name=~\"node-agent-.*\"}",
                "groupBy": "dest_server",
                "version": [
                    {"label": "sync_status", "expected": "Synced"},
                    {"label": "health_status", "expected": "Healthy"},
                ],
                "expectedTargets": dests,
            }),
            json!({}),
        ),
        p.base,
    )
    .await;
    assert_eq!(m.phase, Phase::Failed, "{m:?}");
    let d = |i: usize| dests[i].clone();
    assert_eq!(list(&m, "stragglers"), set([d(2), d(3), d(4), d(6)]));
    assert_eq!(list(&m, "silent"), set([d(5)]));
    let v = value(&m);
    assert_eq!(v["current"], 3);
    assert_eq!(
        v["versions"]["sync_status=Synced, health_status=Healthy"],
        3
    );
    assert_eq!(
        v["versions"]["sync_status=OutOfSync, health_status=Healthy"],
        1
    );
    assert!(v.get("terminalPods").is_none(), "not a pod metric");
    assert!(
        m.message.starts_with("4 of 8 dest_servers still run "),
        "{}",
        m.message
    );
    assert!(
        m.message.contains(&format!("{} 1 series", d(2))),
        "{}",
        m.message
    );
    // The log-shipper applications (OutOfSync everywhere) are outside the selector.
    assert_eq!(v["versions"].as_object().unwrap().len(), 5);

    // Sync status alone passes site-03/04 (Synced but not Healthy): both labels matter.
    let synced_only = measure_at(
        &metric(
            &p.url,
            json!({
                "selector": "argocd_app_info{project=\"edge\", name=~\"node-agent-.*\"}",
                "groupBy": "dest_server",
                "version": {"label": "sync_status", "expected": "Synced"},
                "expectedTargets": dests,
            }),
            json!({}),
        ),
        p.base,
    )
    .await;
    assert_eq!(list(&synced_only, "stragglers"), set([d(2), d(6)]));
}

#[tokio::test]
async fn flux_kustomizations_must_have_the_revision_and_be_ready() {
    let p = inventories().await;
    let m = measure_at(
        &metric(
            &p.url,
            json!({
                "selector": "gotk_resource_info{customresource_kind=\"Kustomization\", exported_namespace=\"flux-system\", name=\"edge-agents\"}",
                "version": [
                    {"label": "revision", "expected": inventories::FLUX_NEW},
                    {"label": "ready", "expected": "True"},
                ],
                "expectedTargets": inventories::flux_clusters(),
            }),
            json!({}),
        ),
        p.base,
    )
    .await;
    assert_eq!(m.phase, Phase::Failed, "{m:?}");
    assert_eq!(list(&m, "stragglers"), set(["flux-1", "flux-2", "flux-3"]));
    assert_eq!(list(&m, "silent"), set(["flux-4"]));
    assert!(
        m.message.contains("flux-4 last seen 2h ago"),
        "{}",
        m.message
    );
    let v = value(&m);
    assert_eq!(v["current"], 2);
    assert_eq!(
        v["versions"][format!("revision={}, ready=True", inventories::FLUX_NEW)],
        2
    );
    assert_eq!(
        v["versions"][format!("revision={}, ready=False", inventories::FLUX_NEW)],
        1
    );
}

#[test]
fn workloads_need_a_pod_metric_selector() {
    let spec = json!({"prometheus": {"address": "http://127.0.0.1:9"}, "noData": "fail", "fleet": {
        "selector": "argocd_app_info{project=\"edge\"}",
        "groupBy": "dest_server",
        "version": {"label": "sync_status", "expected": "Synced"},
        "expectedTargets": "reporting",
        "workloads": true,
    }});
    let m = json!({"name": "fleet", "provider": {"plugin": {"rollgate/analysis": spec}}});
    let e = Metric::from_value(&m, "").unwrap_err().to_string();
    assert!(
        e.contains("fleet.workloads: needs a pod metric selector"),
        "{e}"
    );
}
