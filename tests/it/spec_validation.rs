//! Spec parsing and validation: every bad key or value is named, nothing panics.

use proptest::prelude::*;
use rollgate::spec::{MetricKind, MetricSpec, NoDataPolicy, OnInsufficient, Provider, Template};
use serde_json::{json, Value};

fn err(v: Value) -> String {
    MetricSpec::from_value(&v, "").unwrap_err().to_string()
}

fn good() -> Value {
    json!({
        "prometheus": {"address": "http://prom:9090", "timeout": "5s", "headers": {"X-Scope-OrgID": "team-a"}},
        "query": "sum(rate(x[5m]))",
        "minRequests": {"query": "sum(increase(x[5m]))", "count": 300, "onInsufficient": "wait"},
        "noData": "inconclusive"
    })
}

#[test]
fn a_complete_query_spec_parses() {
    let spec = MetricSpec::from_value(&good(), "").unwrap();
    assert_eq!(spec.no_data, NoDataPolicy::Inconclusive);
    assert_eq!(spec.prometheus.address, "http://prom:9090");
    assert_eq!(spec.prometheus.timeout.as_secs(), 5);
    assert_eq!(
        spec.prometheus.headers,
        vec![("X-Scope-OrgID".to_string(), "team-a".to_string())]
    );
    let MetricKind::Query(q) = &spec.kind else {
        panic!("query kind")
    };
    let guard = q.min_requests.as_ref().unwrap();
    assert_eq!(guard.count, 300.0);
    assert_eq!(guard.on_insufficient, OnInsufficient::Wait);
}

#[test]
fn missing_no_data_lists_the_four_choices() {
    let mut v = good();
    v.as_object_mut().unwrap().remove("noData");
    let e = err(v);
    assert!(e.starts_with("noData: is required"), "{e}");
    for choice in ["fail", "pass", "inconclusive", "error"] {
        assert!(e.contains(choice), "{e}");
    }
}

#[test]
fn each_bad_value_names_its_key() {
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"noData": "maybe"}),
            "noData: expected one of fail, pass, inconclusive, error, got \"maybe\"",
        ),
        (json!({"query": 5}), "query: expected a string, got 5"),
        (
            json!({"query": "sum(rate(x[5m])"}),
            "query: expected a valid PromQL query",
        ),
        (
            json!({"minRequests": {"query": "x", "count": -1}}),
            "minRequests.count: expected a number >= 0, got -1",
        ),
        (
            json!({"minRequests": {"query": "x", "count": "300"}}),
            "minRequests.count: expected a number >= 0, got \"300\"",
        ),
        (
            json!({"minRequests": {"query": "x"}}),
            "minRequests.count: is required",
        ),
        (
            json!({"minRequests": {"query": "x", "count": 1, "onInsufficient": "retry"}}),
            "minRequests.onInsufficient: expected one of inconclusive, wait, fail, pass",
        ),
        (
            json!({"prometheus": {"timeout": "10"}}),
            "prometheus.timeout: expected a duration",
        ),
        (
            json!({"prometheus": {"address": "prom:9090"}}),
            "prometheus.address: expected an http:// or https:// URL",
        ),
        (
            json!({"prometheus": {"headers": {"a": 1}}}),
            "prometheus.headers.a: expected a string, got 1",
        ),
        (
            json!({"prometheus": {"insecureSkipVerify": "yes"}}),
            "prometheus.insecureSkipVerify: expected true or false",
        ),
        (
            json!({"prometheus": {"basicAuth": {"username": "u"}}}),
            "prometheus.basicAuth.passwordFile: is required",
        ),
        (
            json!({"prometheus": {"adress": "http://x"}}),
            "prometheus.adress: unknown key (did you mean \"address\"?)",
        ),
        // The typo is the mistake, not a missing `query`.
        (
            json!({"querry": "up", "query": null}),
            "querry: unknown key (did you mean \"query\"?)",
        ),
        (
            json!({"minrequests": {}}),
            "minrequests: unknown key (did you mean \"minRequests\"?)",
        ),
    ];
    for (patch, expected) in cases {
        let mut v = good();
        for (k, val) in patch.as_object().unwrap() {
            v.as_object_mut().unwrap().insert(k.clone(), val.clone());
        }
        let e = err(v);
        assert!(e.starts_with(expected), "expected {expected:?}, got {e:?}");
    }
}

#[test]
fn kinds_are_exclusive_and_required() {
    let e = err(json!({"noData": "fail"}));
    assert!(e.contains("exactly one of query, compare or fleet"), "{e}");
    let e = err(json!({"noData": "fail", "query": "up", "fleet": {}}));
    assert!(e.contains("exactly one of query, compare or fleet"), "{e}");
}

#[test]
fn secrets_in_addresses_are_not_echoed() {
    let e = err(
        json!({"noData": "fail", "query": "up", "prometheus": {"address": "ftp://user:hunter2@prom"}}),
    );
    assert!(!e.contains("hunter2"), "{e}");
}

const TEMPLATE: &str = r#"
apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: t}
spec:
  args:
    - name: service
      value: payments
    - name: window
    - name: secret
      valueFrom: {secretKeyRef: {name: s, key: k}}
  metrics:
    - name: ratio
      interval: 1m
      count: "{{args.count}}"
      successCondition: result[0] < 0.01
      failureLimit: 2
      provider:
        plugin:
          acme/anything-rollgate:
            query: sum(rate(x{svc="{{args.service}}"}[{{args.window}}]))
            noData: fail
    - name: builtin
      provider:
        prometheus:
          address: http://prom:9090
          query: up{svc="{{args.service}}"}
          timeout: 20
          headers: [{key: X-Scope-OrgID, value: t}]
    - name: web
      provider:
        web: {url: "http://x"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: ignored}
"#;

#[test]
fn templates_resolve_args_and_providers() {
    let templates = Template::parse_all(TEMPLATE, "t.yaml").unwrap();
    assert_eq!(templates.len(), 1);
    let t = &templates[0];
    let e = t.metrics(&[]).unwrap_err().to_string();
    assert!(e.contains("args.count"), "{e}");
    let metrics = t
        .metrics(&[("window".into(), "5m".into()), ("count".into(), "3".into())])
        .unwrap();
    assert_eq!(metrics.len(), 3);
    assert_eq!(metrics[0].count, Some(3));
    assert_eq!(metrics[0].limits.failure_limit, Some(2));
    assert_eq!(metrics[0].interval.map(|d| d.as_secs()), Some(60));
    let Provider::Rollgate(spec) = &metrics[0].provider else {
        panic!("rollgate provider")
    };
    let MetricKind::Query(q) = &spec.kind else {
        panic!("query kind")
    };
    assert_eq!(q.query, r#"sum(rate(x{svc="payments"}[5m]))"#);
    let Provider::Prometheus { config, query } = &metrics[1].provider else {
        panic!("prometheus provider")
    };
    assert_eq!(query, r#"up{svc="payments"}"#);
    assert_eq!(config.timeout.as_secs(), 20);
    assert!(matches!(&metrics[2].provider, Provider::Unsupported(name) if name == "web"));
}

#[test]
fn template_errors_name_the_metric_path() {
    let broken = TEMPLATE.replace(
        "successCondition: result[0] < 0.01",
        "successCondition: result[0] <",
    );
    let t = &Template::parse_all(&broken, "t.yaml").unwrap()[0];
    // As in Argo, a condition that does not compile fails only its metric: the
    // template reads, and the metric carries the error to measure as Error.
    let metrics = t
        .metrics(&[("window".into(), "5m".into()), ("count".into(), "3".into())])
        .unwrap();
    let e = metrics[0].broken_condition.as_ref().unwrap().to_string();
    assert!(
        e.starts_with("successCondition `result[0] <` is not a valid condition: syntax error"),
        "{e}"
    );
    assert!(metrics[1].broken_condition.is_none());
    // Other metric errors still reject the template, naming the metric's path.
    let bad_interval = TEMPLATE.replace("interval: 1m", "interval: soon");
    assert_ne!(bad_interval, TEMPLATE);
    let t = &Template::parse_all(&bad_interval, "t.yaml").unwrap()[0];
    let e = t
        .metrics(&[("window".into(), "5m".into()), ("count".into(), "3".into())])
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("spec.metrics[0].interval:"), "{e}");
    assert!(Template::parse_all("kind: ConfigMap", "x.yaml").is_err());
    assert!(Template::parse_all("{{{", "x.yaml").is_err());
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f)
            .map(Value::Number)
            .unwrap_or(Value::Null)),
        any::<i64>().prop_map(|i| json!(i)),
        prop_oneof![
            Just("up".to_string()),
            Just("fail".to_string()),
            Just("wait".to_string()),
            Just("10s".to_string()),
            Just("http://127.0.0.1:9".to_string()),
            Just("sum(rate(x[5m]))".to_string()),
            "\\PC{0,12}",
        ]
        .prop_map(Value::String),
    ];
    let keys = prop_oneof![
        Just("query".to_string()),
        Just("noData".to_string()),
        Just("minRequests".to_string()),
        Just("count".to_string()),
        Just("onInsufficient".to_string()),
        Just("prometheus".to_string()),
        Just("address".to_string()),
        Just("timeout".to_string()),
        Just("headers".to_string()),
        Just("basicAuth".to_string()),
        "[a-zA-Z]{1,8}",
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(keys.clone(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn random_specs_never_panic(v in arb_json()) {
        let _ = MetricSpec::from_value(&v, "");
        let _ = MetricSpec::from_json_bytes(v.to_string().as_bytes());
    }
}

/// `count: 4294967297` once became 1 here (wrapped into a u32) while the plugin
/// dropped it. Argo's `Metric.Count` is an `intstr.IntOrString` holding an int32
/// (argo-rollouts v1.9.1, pkg/apis/rollouts/v1alpha1/analysis_types.go): the template is
/// refused naming the key, through the library and through `rollgate dry-run`.
#[test]
fn template_counts_outside_argos_int32_are_refused() {
    let t = &Template::parse_all(TEMPLATE, "t.yaml").unwrap()[0];
    for bad in ["4294967297", "2147483648", "-1", "three"] {
        let e = t
            .metrics(&[("window".into(), "5m".into()), ("count".into(), bad.into())])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("spec.metrics[0].count: expected a whole number from 0 to 2147483647"),
            "{bad}: {e}"
        );
    }
    let max = t
        .metrics(&[
            ("window".into(), "5m".into()),
            ("count".into(), "2147483647".into()),
        ])
        .unwrap();
    assert_eq!(max[0].count, Some(2_147_483_647));
    // A YAML number, not only a substituted string.
    let number = TEMPLATE.replace(r#"count: "{{args.count}}""#, "count: 4294967297");
    let t = &Template::parse_all(&number, "t.yaml").unwrap()[0];
    let e = t.metrics(&[("window".into(), "5m".into())]).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("spec.metrics[0].count: expected a whole number from 0 to 2147483647"),
        "{e}"
    );

    // The dry-run surface fails naming the key and the value.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.yaml");
    // `--arg` takes declared arguments only.
    let declared = TEMPLATE.replace(
        "    - name: window\n",
        "    - name: window\n    - name: count\n",
    );
    std::fs::write(&file, declared).unwrap();
    let out = std::process::Command::new(crate::support::rollgate_bin())
        .arg("dry-run")
        .arg("-f")
        .arg(&file)
        .args(["--arg", "window=5m", "--arg", "count=4294967297"])
        .args(["--prometheus", "http://127.0.0.1:9"])
        .env_remove("ARGO_ROLLOUTS_RPC_PLUGIN")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("spec.metrics[0].count"), "{err}");
    assert!(err.contains("4294967297"), "{err}");
}
