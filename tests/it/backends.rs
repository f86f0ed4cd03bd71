//! The same verdicts from every Prometheus-compatible backend: each query, compare and fleet
//! scenario of `query_kind.rs`, `compare_kind.rs` and `fleet_kind.rs` runs through the engine
//! against a real Prometheus (2.42, promtool-backfilled) and a real VictoriaMetrics (1.79.5,
//! single node, the same generated samples imported), each at its own data set's `base`.
//! The phases must agree, and so must the values (and, for the fleet, the target sets), unless
//! the case names a documented difference (docs/backends.md). Then the test requires exactly
//! that difference, so a change on either side is noticed.
//!
//! Also here: partial answers and info notes as VictoriaMetrics cluster and Prometheus
//! 2.50–2.54 send them (exact shapes from their source), through the engine.

use crate::support;

use std::time::Duration;

use chrono::{TimeZone, Utc};
use rollgate::engine::{AddressPolicy, Engine, EvalOptions};
use rollgate::measurement::{Measurement, Phase};
use rollgate::prometheus::{Backend, Client};
use rollgate::spec::Metric;
use serde_json::{json, Value};
use support::prom::PromServer;
use support::scenarios::{
    base_now, clean_fleet, seed_dataset, standard_fleet, Dataset, Latency, Traffic, ABSENT_SERVICE,
    BAD, CMP_6X_CANARY, CMP_6X_STABLE, CMP_BAD_CANARY, CMP_BAD_STABLE, CMP_HEALTHY_CANARY,
    CMP_HEALTHY_STABLE, CMP_LOW_CANARY, CMP_LOW_STABLE, CMP_NOCANARY_STABLE, HEALTHY, IDLE,
    LAT_SAME_CANARY, LAT_SAME_STABLE, LAT_SHIFT_CANARY, LAT_SHIFT_STABLE, LOWTRAFFIC,
    NODE_AGENT_NEW, OVERFLOW_SERVICE, P99_GAUGE, SPECIAL_METRIC, STALE,
};
use support::stub::{Mode, Stub, SAMPLE_TIME, WARNING_MESSAGE};
use support::vm::VmServer;

/// Metadata the fleet verdict is made of: they must be the same on both backends.
const FLEET_SETS: &[&str] = &[
    "stragglers",
    "silent",
    "unexpected",
    "stragglersOutsideInventory",
    "excepted",
    "expiredExceptions",
    "unlabelledTargets",
    "stalled",
];

/// A difference between the backends that docs/backends.md explains.
#[derive(Clone, Copy, Debug)]
struct Known {
    /// The phase on VictoriaMetrics (on Prometheus: the case's `phase`).
    vm: Phase,
    /// The section of docs/backends.md that explains it.
    doc: &'static str,
}

/// One scenario: a metric (with `ADDRESS` where the server's address goes) and the phase
/// Prometheus gives.
struct Case {
    name: String,
    metric: Value,
    phase: Phase,
    /// The values differ (e.g. `[NaN]` against `[]`); the phases still agree unless `known`.
    value_differs: bool,
    known: Option<Known>,
}

fn case(name: impl Into<String>, metric: Value, phase: Phase) -> Case {
    Case {
        name: name.into(),
        metric,
        phase,
        value_differs: false,
        known: None,
    }
}

impl Case {
    /// NaN (Prometheus) against no series (VictoriaMetrics): same phase, different value.
    fn nan_dropped(mut self) -> Case {
        self.value_differs = true;
        self
    }

    fn known(mut self, vm: Phase, doc: &'static str) -> Case {
        self.known = Some(Known { vm, doc });
        self.value_differs = true;
        self
    }
}

/// A rollgate metric: `spec` (without `prometheus`) and conditions.
fn rollgate(spec: Value, conditions: &[(&str, &str)]) -> Value {
    let mut spec = spec;
    spec["prometheus"] = json!({"address": "ADDRESS"});
    let mut m =
        json!({"name": "m", "interval": "1m", "provider": {"plugin": {"rollgate/analysis": spec}}});
    for (k, v) in conditions {
        m[*k] = json!(v);
    }
    m
}

fn query(q: String, no_data: &str, success: &str, extra: Value) -> Value {
    let mut spec = json!({"query": q, "noData": no_data});
    for (k, v) in extra.as_object().into_iter().flatten() {
        spec[k] = v.clone();
    }
    rollgate(spec, &[("successCondition", success)])
}

fn guard(t: &Traffic, on: &str) -> Value {
    json!({"minRequests": {"query": t.total_query("5m"), "count": 300, "onInsufficient": on}})
}

/// Argo's built-in prometheus provider.
fn builtin(q: String, success: &str) -> Value {
    json!({"name": "b", "successCondition": success, "provider": {"prometheus": {"address": "ADDRESS", "query": q}}})
}

fn ratio(canary: &Traffic, stable: &Traffic) -> Value {
    json!({"compare": {
        "canary": {"bad": canary.bad_query("10m"), "total": canary.total_query("10m")},
        "stable": {"bad": stable.bad_query("10m"), "total": stable.total_query("10m")},
        "maxIncrease": 0.2, "margin": 0.001, "confidence": 0.95, "minRequests": 500
    }, "noData": "inconclusive"})
}

fn distribution(canary: &Latency, stable: &Latency) -> Value {
    json!({"compare": {
        "canary": canary.quantile_query(0.99, "1m"), "stable": stable.quantile_query(0.99, "1m"),
        "window": "30m", "step": "1m", "direction": "increase", "maxIncrease": 0.1,
        "confidence": 0.98, "minSamples": 20
    }, "noData": "inconclusive"})
}

/// A metric with a `count`: the distribution form needs one when it repeats at an interval.
fn counted(mut m: Value) -> Value {
    m["count"] = json!(10);
    m
}

fn digest(image_id: &str) -> String {
    image_id.rsplit_once('@').map_or("", |d| d.1).to_string()
}

/// A fleet metric over the standard fleet, `fleet` merged over the defaults (null removes).
fn fleet(over: Value, conditions: &[(&str, &str)]) -> Value {
    let mut f = json!({
        "selector": "kube_pod_container_info{namespace=\"monitoring\", container=\"node-agent\"}",
        "version": {"expected": digest(&NODE_AGENT_NEW.image_id())},
        "expectedTargets": standard_fleet().expect().inventory,
    });
    for (k, v) in over.as_object().into_iter().flatten() {
        if v.is_null() {
            f.as_object_mut().map(|o| o.remove(k));
        } else {
            f[k] = v.clone();
        }
    }
    rollgate(json!({"fleet": f, "noData": "fail"}), conditions)
}

/// Every scenario of the three kind tests.
fn cases() -> Vec<Case> {
    use Phase::*;
    let absent = Traffic {
        service: ABSENT_SERVICE,
        ..HEALTHY
    };
    let cond = "result[0] < 0.01";
    let mut c = vec![
        case(
            "query: healthy passes guard and condition",
            query(
                HEALTHY.ratio_query("5m"),
                "inconclusive",
                cond,
                guard(&HEALTHY, "inconclusive"),
            ),
            Successful,
        ),
        case(
            "query: bad error rate fails",
            query(
                BAD.ratio_query("5m"),
                "inconclusive",
                cond,
                guard(&BAD, "inconclusive"),
            ),
            Failed,
        ),
    ];
    for (on, phase) in [
        ("inconclusive", Inconclusive),
        ("fail", Failed),
        ("pass", Successful),
        ("wait", Running),
    ] {
        c.push(case(
            format!("query: low traffic, onInsufficient {on}"),
            query(
                LOWTRAFFIC.ratio_query("5m"),
                "inconclusive",
                cond,
                guard(&LOWTRAFFIC, on),
            ),
            phase,
        ));
    }
    for (no_data, phase) in [
        ("fail", Failed),
        ("pass", Successful),
        ("inconclusive", Inconclusive),
        ("error", Error),
    ] {
        c.push(
            case(
                format!("query: 0/0 follows noData {no_data}"),
                query(IDLE.ratio_query("5m"), no_data, cond, json!({})),
                phase,
            )
            .nan_dropped(),
        );
    }
    c.extend([
        case(
            "query: no series is no data",
            query(absent.ratio_query("5m"), "fail", cond, json!({})),
            Failed,
        ),
        case(
            "query: stale series are no data",
            query(STALE.ratio_query("5m"), "error", cond, json!({})),
            Error,
        ),
        case(
            "query: a guard with no series is no data",
            query(
                HEALTHY.ratio_query("5m"),
                "inconclusive",
                cond,
                guard(&absent, "fail"),
            ),
            Inconclusive,
        ),
        case(
            "query: a stored NaN is no data",
            query(
                format!("{SPECIAL_METRIC}{{case=\"nan\"}}"),
                "fail",
                "result[0] < 1",
                json!({}),
            ),
            Failed,
        )
        .nan_dropped(),
        case(
            "query: +Inf reaches the condition",
            query(
                format!("{P99_GAUGE}{{service=\"{OVERFLOW_SERVICE}\"}}"),
                "pass",
                "result[0] <= 0.5",
                json!({}),
            ),
            Failed,
        ),
        case(
            "query: isInf(+Inf)",
            query(
                format!("{P99_GAUGE}{{service=\"{OVERFLOW_SERVICE}\"}}"),
                "fail",
                "isInf(result[0])",
                json!({}),
            ),
            Successful,
        ),
        case(
            "query: -Inf",
            query(
                format!("{SPECIAL_METRIC}{{case=\"neg_inf\"}}"),
                "fail",
                "result[0] < 0",
                json!({}),
            ),
            Successful,
        ),
        case(
            "query: histogram_quantile of an overflowing histogram",
            query(
                format!("histogram_quantile(0.99, sum by (le) (rate(http_request_duration_seconds_bucket{{service=\"{OVERFLOW_SERVICE}\"}}[5m])))"),
                "pass",
                "result[0] <= 0.5",
                json!({}),
            ),
            Failed,
        ),
        case(
            "query: scalar() is a number on Prometheus, a list on VictoriaMetrics",
            query(
                format!("scalar({})", HEALTHY.ratio_query("5m")),
                "fail",
                "result < 0.01",
                json!({}),
            ),
            Successful,
        )
        .known(Error, "scalar() answers"),
        case(
            "argo builtin: no series is an Error",
            builtin(absent.ratio_query("5m"), cond),
            Error,
        ),
        case(
            "argo builtin: len(result) == 0 passes no series",
            builtin(
                absent.ratio_query("5m"),
                "len(result) == 0 || result[0] < 0.01",
            ),
            Successful,
        ),
        case(
            "argo builtin: isNaN(result[0]) on 0/0",
            builtin(
                IDLE.ratio_query("5m"),
                "result[0] >= 0.9 || isNaN(result[0])",
            ),
            Successful,
        )
        .known(Error, "NaN is dropped"),
        case(
            "argo builtin: scalar()",
            builtin(format!("scalar({})", HEALTHY.ratio_query("5m")), "result < 0.01"),
            Successful,
        )
        .known(Error, "scalar() answers"),
        case(
            "compare: healthy pair",
            rollgate(ratio(&CMP_HEALTHY_CANARY, &CMP_HEALTHY_STABLE), &[]),
            Successful,
        ),
        case(
            "compare: bad canary",
            rollgate(ratio(&CMP_BAD_CANARY, &CMP_BAD_STABLE), &[]),
            Failed,
        ),
        case(
            "compare: 6x canary",
            rollgate(ratio(&CMP_6X_CANARY, &CMP_6X_STABLE), &[]),
            Failed,
        ),
        case(
            "compare: condition overrides the verdict",
            rollgate(
                ratio(&CMP_BAD_CANARY, &CMP_BAD_STABLE),
                &[("successCondition", "result.canary.rate < 0.05")],
            ),
            Successful,
        ),
        case(
            "compare: no canary series",
            rollgate(
                ratio(
                    &Traffic {
                        track: "canary",
                        ..CMP_NOCANARY_STABLE
                    },
                    &CMP_NOCANARY_STABLE,
                ),
                &[],
            ),
            Inconclusive,
        ),
        case(
            "compare: 20 canary requests",
            rollgate(ratio(&CMP_LOW_CANARY, &CMP_LOW_STABLE), &[]),
            Inconclusive,
        ),
        case(
            "compare: latency +40 %",
            counted(rollgate(distribution(&LAT_SHIFT_CANARY, &LAT_SHIFT_STABLE), &[])),
            Failed,
        ),
        case(
            "compare: equal latency",
            counted(rollgate(distribution(&LAT_SAME_CANARY, &LAT_SAME_STABLE), &[])),
            Successful,
        ),
    ]);
    c.extend(fleet_cases());
    c
}

fn fleet_cases() -> Vec<Case> {
    use Phase::*;
    let clean = clean_fleet();
    let clean_spec = json!({
        "selector": "kube_pod_container_info{namespace=\"logging\", container=\"log-shipper\"}",
        "version": {"label": "image", "expected": clean.new.image()},
        "expectedTargets": clean.expect().inventory,
        "workloads": true,
        "includeInitContainers": true,
    });
    let with = |over: Value| {
        let mut f = clean_spec.clone();
        for (k, v) in over.as_object().into_iter().flatten() {
            f[k] = v.clone();
        }
        f
    };
    let lab = json!([{"target": "edge-lab-01", "reason": "lab", "until": "2099-01-01"}]);
    vec![
        case(
            "fleet: standard fleet with exceptions and workloads",
            fleet(
                json!({"workloads": true, "exceptions": [
                    {"target": "edge-042", "reason": "decommissioning", "until": "2099-12-31"},
                    {"target": "edge-073", "reason": "was waiting", "until": "2020-01-31"},
                ]}),
                &[],
            ),
            Failed,
        ),
        case(
            "fleet: init containers",
            fleet(json!({"includeInitContainers": true}), &[]),
            Failed,
        ),
        case(
            "fleet: clean fleet",
            fleet(clean_spec.clone(), &[]),
            Successful,
        ),
        case(
            "fleet: clean fleet, inventory from what reports",
            fleet(with(json!({"expectedTargets": "reporting"})), &[]),
            Successful,
        ),
        case(
            "fleet: clean fleet, regex on image_spec",
            fleet(
                with(json!({"version": {"label": "image_spec", "expectedRegex": ".*:2\\.1\\..*"}})),
                &[],
            ),
            Successful,
        ),
        case(
            "fleet: clean fleet, bare digest",
            fleet(
                with(json!({"version": {"expected": digest(&clean.new.image_id())}})),
                &[],
            ),
            Successful,
        ),
        case(
            "fleet: inventory from a query",
            fleet(
                json!({"expectedTargets": null, "expectedTargetsQuery": "last_over_time(kube_daemonset_status_desired_number_scheduled{namespace=\"monitoring\", cluster=~\"edge-[0-9]+\"}[3h])"}),
                &[],
            ),
            Failed,
        ),
        case(
            "fleet: an inventory query with no series",
            fleet(
                json!({"expectedTargets": null, "expectedTargetsQuery": "up{job=\"nothing\"}"}),
                &[],
            ),
            Failed,
        ),
        case(
            "fleet: minCompletion 95 %",
            fleet(json!({"minCompletion": 0.95, "exceptions": lab}), &[]),
            Successful,
        ),
        case(
            "fleet: minCompletion 97 %",
            fleet(json!({"minCompletion": 0.97, "exceptions": lab}), &[]),
            Failed,
        ),
        // A stalled workload makes its target incomplete and minCompletion decides:
        // 385 of 400 are current or excepted without the stalls, 383 with them.
        case(
            "fleet: stalled workloads count against minCompletion, 96 % fails",
            fleet(
                json!({"minCompletion": 0.96, "exceptions": lab, "workloads": true}),
                &[],
            ),
            Failed,
        ),
        case(
            "fleet: stalled workloads within minCompletion, 95 % passes",
            fleet(
                json!({"minCompletion": 0.95, "exceptions": lab, "workloads": true}),
                &[],
            ),
            Successful,
        ),
        case(
            "fleet: successCondition on the summary",
            fleet(
                json!({}),
                &[(
                    "successCondition",
                    "result.completion >= 0.9 && result.silent <= 2",
                )],
            ),
            Successful,
        ),
        case(
            "fleet: failureCondition on the summary",
            fleet(json!({}), &[("failureCondition", "result.silent > 0")]),
            Failed,
        ),
        case(
            "fleet: a selector matching nothing",
            fleet(
                json!({"selector": "kube_pod_container_info{namespace=\"nowhere\"}"}),
                &[],
            ),
            Failed,
        ),
        case(
            "fleet: a version label on no series",
            fleet(
                json!({"version": {"label": "image_digest", "expected": "sha256:35c1e11408120e3942e771102f0172aee75829d3a87f9f5909d53b5f40bfc814"}}),
                &[],
            ),
            Error,
        ),
    ]
}

/// `metric` with `ADDRESS` replaced by `url`.
fn bind(metric: &Value, url: &str) -> Metric {
    let text = metric
        .to_string()
        .replace("\"ADDRESS\"", &json!(url).to_string());
    let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    Metric::from_value(&value, "").unwrap_or_else(|e| panic!("{e}: {text}"))
}

async fn measure(metric: &Value, url: &str, at: i64) -> Measurement {
    let opts = EvalOptions {
        at: Some(Utc.timestamp_opt(at, 0).single().unwrap_or_default()),
        ..EvalOptions::with_budget(Duration::from_secs(30))
    };
    Engine::new(Backend::Live(Client::new()), AddressPolicy::default())
        .measure(&bind(metric, url), &opts)
        .await
}

/// Whether two measurement values agree: equal text, or JSON equal up to float rounding (the
/// backends sum and divide in different orders: 0.3400390029042340 against ...338).
fn same_value(a: &str, b: &str) -> bool {
    fn close(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
                (Some(x), Some(y)) => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0),
                _ => x == y,
            },
            (Value::Array(x), Value::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(x, y)| close(x, y))
            }
            (Value::Object(x), Value::Object(y)) => {
                x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| close(v, w)))
            }
            _ => a == b,
        }
    }
    if a == b {
        return true;
    }
    match (
        serde_json::from_str::<Value>(a),
        serde_json::from_str::<Value>(b),
    ) {
        (Ok(x), Ok(y)) => close(&x, &y),
        _ => false,
    }
}

/// Runs `cases` against both servers; returns the failures (empty: all agree as documented).
async fn compare(cases: &[Case], prom: (&str, i64), vm: (&str, i64)) -> Vec<String> {
    let mut failures = Vec::new();
    for c in cases {
        let p = measure(&c.metric, prom.0, prom.1).await;
        let v = measure(&c.metric, vm.0, vm.1).await;
        let want_vm = c.known.map_or(c.phase, |k| k.vm);
        eprintln!(
            "{:<70} {:<13} {:<13} {}",
            c.name,
            format!("{:?}", p.phase),
            format!("{:?}", v.phase),
            c.known.map_or("", |k| k.doc)
        );
        if c.value_differs {
            eprintln!(
                "    Prometheus: {}\n    VictoriaMetrics: {}",
                p.message, v.message
            );
        }
        if p.phase != c.phase {
            failures.push(format!(
                "{}: Prometheus gave {:?}, expected {:?}: {}",
                c.name, p.phase, c.phase, p.message
            ));
        }
        if v.phase != want_vm {
            failures.push(format!(
                "{}: VictoriaMetrics gave {:?}, expected {want_vm:?}: {}",
                c.name, v.phase, v.message
            ));
        }
        if c.value_differs && p.value == v.value {
            failures.push(format!(
                "{}: documented to differ, but both gave the value {}",
                c.name, p.value
            ));
        }
        if !c.value_differs && !same_value(&p.value, &v.value) {
            failures.push(format!(
                "{}: values differ: Prometheus {} / VictoriaMetrics {}",
                c.name, p.value, v.value
            ));
        }
        for key in FLEET_SETS {
            if p.metadata.get(*key) != v.metadata.get(*key) {
                failures.push(format!(
                    "{}: metadata {key} differs: Prometheus {:?} / VictoriaMetrics {:?}",
                    c.name,
                    p.metadata.get(*key),
                    v.metadata.get(*key)
                ));
            }
        }
    }
    failures
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_gives_the_same_verdict_on_prometheus_and_victoria_metrics() {
    let (prom, vm) =
        tokio::task::spawn_blocking(|| (support::prom::shared(), support::vm::shared()))
            .await
            .unwrap_or_else(|e| panic!("servers: {e}"));
    let cases = cases();
    assert!(cases.len() >= 45, "{} cases", cases.len());
    let failures = compare(&cases, (&prom.url, prom.base), (&vm.url, vm.base)).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The seed scenario of fleet_kind.rs (`scenarios::seed_dataset`): 12 stragglers and 2 silent
/// clusters before convergence, none after, in one data set written to both backends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_scenario_agrees_before_and_after_convergence() {
    const CONVERGED_AFTER: i64 = 2 * 3600;
    let base = base_now();
    let text = seed_dataset(base, CONVERGED_AFTER);
    let (prom, vm) = tokio::task::spawn_blocking(move || {
        (PromServer::start(base, &text), VmServer::start(base, &text))
    })
    .await
    .unwrap_or_else(|e| panic!("servers: {e}"));
    let spec = json!({
        "selector": "kube_pod_container_info{namespace=\"edge-system\", container=\"node-agent\"}",
        "workloads": true,
    });
    let before_case = case(
        "seed: before convergence",
        fleet(spec.clone(), &[]),
        Phase::Failed,
    );
    let failures = compare(&[before_case], (&prom.url, base), (&vm.url, base)).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let after_case = case(
        "seed: after convergence",
        fleet(spec, &[]),
        Phase::Successful,
    );
    let t = base + CONVERGED_AFTER;
    let failures = compare(&[after_case], (&prom.url, t), (&vm.url, t)).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// --- partial answers and infos, in the shapes the servers send ---------------------------------

/// A current fleet of one cluster as every fleet query's answer (the stub answers all the same),
/// with `extra` fields at the top level of the body.
fn one_cluster_body(extra: &str) -> String {
    let image_id = NODE_AGENT_NEW.image_id();
    format!(
        r#"{{"status":"success",{extra}"data":{{"resultType":"vector","result":[{{"metric":{{"cluster":"edge-001","image_id":"{image_id}"}},"value":[{SAMPLE_TIME},"3"]}}]}}}}"#
    )
}

fn one_cluster_fleet() -> Value {
    fleet(json!({"expectedTargets": ["edge-001"]}), &[])
}

async fn against_stub(body: String, metric: &Value) -> Measurement {
    let stub = Stub::start(Mode::Fixed(body));
    measure(metric, &stub.url, SAMPLE_TIME).await
}

/// Prometheus 2.54 `infos` (web/api/v1/api.go v2.54.0) and 2.50–2.53 "PromQL info" entries of
/// `warnings` (util/annotations/annotations.go `AsStrings`, v2.50.0–v2.53.0).
const INFO: &str = r#"PromQL info: metric might not be a counter, name does not end in _total/_sum/_count/_bucket: \"kube_pod_container_info\" (1:21)"#;

#[tokio::test]
async fn info_notes_go_to_metadata_and_never_turn_the_fleet_verdict_into_error() {
    let plain = against_stub(one_cluster_body(""), &one_cluster_fleet()).await;
    assert_eq!(plain.phase, Phase::Successful, "{plain:?}");
    assert!(!plain.metadata.contains_key("infos"));
    for (shape, extra) in [
        ("2.54 infos", format!(r#""infos":["{INFO}"],"#)),
        ("2.50-2.53 warnings", format!(r#""warnings":["{INFO}"],"#)),
    ] {
        let m = against_stub(one_cluster_body(&extra), &one_cluster_fleet()).await;
        assert_eq!(m.phase, Phase::Successful, "{shape}: {m:?}");
        assert_eq!(m.message, plain.message, "{shape}");
        assert!(
            m.metadata["infos"].starts_with("PromQL info: metric might not be a counter"),
            "{shape}: {:?}",
            m.metadata
        );
        assert!(!m.metadata.contains_key("warnings"), "{shape}");
        // The query kind too: metadata, not the message.
        let q = query(
            "kube_pod_container_info".into(),
            "fail",
            "result[0] == 3",
            json!({}),
        );
        let m = against_stub(one_cluster_body(&extra), &q).await;
        assert_eq!(m.phase, Phase::Successful, "{shape}: {m:?}");
        assert!(m.metadata.contains_key("infos"), "{shape}");
        assert!(!m.message.contains("PromQL info"), "{}", m.message);
    }
    // A real warning next to an info still means the data may be incomplete.
    let both = format!(r#""warnings":["{INFO}","{WARNING_MESSAGE}"],"#);
    let m = against_stub(one_cluster_body(&both), &one_cluster_fleet()).await;
    assert_eq!(m.phase, Phase::Error, "{m:?}");
    assert!(m.message.contains(WARNING_MESSAGE), "{}", m.message);
    assert!(!m.message.contains("PromQL info"), "{}", m.message);
    assert!(m.metadata.contains_key("infos"));
}

#[tokio::test]
async fn a_partial_victoria_metrics_answer_is_never_a_pass() {
    // app/vmselect/prometheus/query_response.qtpl, v1.79.5-cluster.
    let partial = one_cluster_body(r#""isPartial":true,"#);
    let m = against_stub(partial.clone(), &one_cluster_fleet()).await;
    assert_eq!(m.phase, Phase::Error, "{m:?}");
    assert!(
        m.message.starts_with("fleet versions query failed: ")
            && m.message.contains("partial response (isPartial: true)"),
        "{}",
        m.message
    );
    for metric in [
        fleet(
            json!({"expectedTargets": ["edge-001"]}),
            &[("successCondition", "true")],
        ),
        query("up".into(), "pass", "true", json!({})),
        builtin("up".into(), "true"),
        rollgate(ratio(&CMP_HEALTHY_CANARY, &CMP_HEALTHY_STABLE), &[]),
    ] {
        let m = against_stub(partial.clone(), &metric).await;
        assert_eq!(m.phase, Phase::Error, "{metric}: {m:?}");
        assert!(m.message.contains("isPartial: true"), "{}", m.message);
    }
    // `isPartial: false` is a whole answer.
    let m = against_stub(
        one_cluster_body(r#""isPartial":false,"#),
        &one_cluster_fleet(),
    )
    .await;
    assert_eq!(m.phase, Phase::Successful, "{m:?}");
}

#[tokio::test]
async fn every_query_asks_victoria_metrics_and_thanos_to_deny_partial_answers() {
    let stub = Stub::start(Mode::Fixed(one_cluster_body("")));
    let m = measure(&one_cluster_fleet(), &stub.url, SAMPLE_TIME).await;
    assert_eq!(m.phase, Phase::Successful, "{m:?}");
    assert!(stub.requests() >= 2, "{} requests", stub.requests());
    let r = stub.last_request().unwrap_or_else(|| panic!("no request"));
    assert_eq!(r.param("deny_partial_response").as_deref(), Some("1"));
    assert_eq!(r.param("partial_response").as_deref(), Some("false"));
}

#[test]
fn victoria_metrics_is_stopped_and_its_data_removed_on_drop() {
    let base = base_now();
    let mut ds = Dataset::new();
    support::scenarios::push_sample(ds.family("x", "gauge"), "x", &[], 1.0, base);
    let server = VmServer::start(base, &ds.finish());
    let pid = server.pid();
    let dir = server.dir().unwrap_or_else(|| panic!("no data directory"));
    assert!(dir.join("data").is_dir(), "{}", dir.display());
    let path = format!("/api/v1/query?query=x&time={base}");
    let (_, body) = support::prom::http_get(server.addr, &path, Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    let got: Value = serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got["data"]["result"][0]["value"][1], "1", "{got}");
    drop(server);
    assert!(
        !support::prom::alive(pid),
        "victoria-metrics {pid} still runs"
    );
}
