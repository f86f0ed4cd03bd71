//! The Graphite backend end to end: the engine against a real graphite-web (Debian's 1.1.8 over
//! whisper files, `support::graphite`) for the scenario matrix and both compare forms, against
//! stubs for faults and credentials, and Argo's own provider tests (argo-rollouts v1.9.1,
//! `metricproviders/graphite/graphite_test.go` and `api_test.go`) for conformance.

use crate::support;

use std::time::{Duration, Instant};

use chrono::{DateTime, TimeZone, Utc};
use rollgate::engine::{AddressPolicy, Engine, EvalOptions};
use rollgate::measurement::{Measurement, Phase};
use rollgate::prometheus::{Backend, Client};
use rollgate::spec::Metric;
use serde_json::{json, Value};
use support::graphite::{
    latency_path, shared, Counts, ABSENT_SERVICE, BAD, CMP_BAD_CANARY, CMP_BAD_STABLE,
    CMP_EQUAL_CANARY, CMP_EQUAL_STABLE, HEALTHY, IDLE, LATE, LOWTRAFFIC,
};
use support::stub::{closed_port, json as reply, Mode, Stub};

fn engine() -> Engine {
    Engine::new(Backend::Live(Client::new()), AddressPolicy::default())
}

fn at(base: i64) -> EvalOptions {
    let t: DateTime<Utc> = Utc.timestamp_opt(base, 0).single().unwrap();
    EvalOptions {
        at: Some(t),
        ..EvalOptions::with_budget(Duration::from_secs(20))
    }
}

/// A metric with a `graphite:` block at `address` (extra block keys in `block`), `query`, and
/// `extra` merged into the spec; `success` (if any) as its successCondition.
fn metric(block: Value, query: &str, success: &str, extra: Value) -> Metric {
    let mut spec = json!({"graphite": block, "query": query, "noData": "inconclusive"});
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    let mut m =
        json!({"name": "m", "interval": "1m", "provider": {"plugin": {"rollgate/analysis": spec}}});
    if !success.is_empty() {
        m["successCondition"] = json!(success);
    }
    Metric::from_value(&m, "").unwrap()
}

fn real(query: &str, success: &str, extra: Value) -> Metric {
    metric(json!({"address": shared().url}), query, success, extra)
}

fn guard(c: &Counts) -> Value {
    json!({"minRequests": {"query": c.sum_query("requests", 5), "count": 300}})
}

async fn at_base(m: &Metric) -> Measurement {
    engine().measure(m, &at(shared().base)).await
}

#[tokio::test]
async fn healthy_passes_the_guard_and_the_condition() {
    let m = at_base(&real(
        &HEALTHY.ratio_query(5),
        "result[0] < 0.01",
        guard(&HEALTHY),
    ))
    .await;
    assert_eq!(m.phase, Phase::Successful, "{m:?}");
    assert_eq!(m.value, "[0.001000]");
    assert_eq!(m.metadata["minRequests.seen"], "30,000");
}

#[tokio::test]
async fn a_bad_error_rate_fails() {
    let m = at_base(&real(&BAD.ratio_query(5), "result[0] < 0.01", guard(&BAD))).await;
    assert_eq!(m.phase, Phase::Failed, "{m:?}");
    assert_eq!(m.value, "[0.050000]");
}

#[tokio::test]
async fn low_traffic_is_held_by_the_guard() {
    let m = at_base(&real(
        &LOWTRAFFIC.ratio_query(5),
        "result[0] < 0.01",
        guard(&LOWTRAFFIC),
    ))
    .await;
    assert_eq!(m.phase, Phase::Inconclusive, "{m:?}");
    assert!(
        m.message.contains("15 requests seen, 300 needed"),
        "{}",
        m.message
    );
}

#[tokio::test]
async fn no_data_follows_the_policy() {
    let absent = Counts {
        service: ABSENT_SERVICE,
        ..HEALTHY
    };
    for (policy, phase) in [
        ("fail", Phase::Failed),
        ("inconclusive", Phase::Inconclusive),
        ("pass", Phase::Successful),
        ("error", Phase::Error),
    ] {
        let m = at_base(&real(
            &absent.ratio_query(5),
            "result[0] < 0.01",
            json!({"noData": policy}),
        ))
        .await;
        assert_eq!(m.phase, phase, "{policy}: {m:?}");
        assert!(m.message.starts_with("no data: query"), "{}", m.message);
        // The guard's query without data is no data too, before the main query counts.
        let m = at_base(&real(
            &HEALTHY.ratio_query(5),
            "result[0] < 0.01",
            json!({"noData": policy, "minRequests": {"query": absent.sum_query("requests", 5), "count": 300}}),
        ))
        .await;
        assert_eq!(m.phase, phase, "guard, {policy}: {m:?}");
        assert!(
            m.message.starts_with("no data: minRequests.query"),
            "{}",
            m.message
        );
    }
}

/// No requests at all: the guard holds it, and without a guard 0/0 (null from divideSeries) is
/// no data. Argo's provider would evaluate `all(result, ...)` on an empty list and pass.
#[tokio::test]
async fn zero_over_zero_is_never_a_pass() {
    let m = at_base(&real(
        &IDLE.ratio_query(5),
        "all(result, {# < 0.01})",
        guard(&IDLE),
    ))
    .await;
    assert_eq!(m.phase, Phase::Inconclusive, "{m:?}");
    assert!(m.message.contains("0 requests seen"), "{}", m.message);
    let m = at_base(&real(
        &IDLE.ratio_query(5),
        "all(result, {# < 0.01})",
        json!({"noData": "fail"}),
    ))
    .await;
    assert_eq!(m.phase, Phase::Failed, "{m:?}");
    assert!(m.message.contains("no data"), "{}", m.message);
}

/// The last points of a series are null until they are aggregated: the value at the check's
/// time is the last non-null point, so a late series is data, and `result` holds its values.
#[tokio::test]
async fn trailing_nulls_are_not_no_data() {
    let query = format!("target={}&from=-5min", LATE.path("requests"));
    let m = at_base(&real(&query, "all(result, {# == 6000})", json!({}))).await;
    assert_eq!(m.phase, Phase::Successful, "{m:?}");
    assert_eq!(m.value, "[6000.000000,6000.000000,6000.000000]");
    let m = at_base(&real(
        &LATE.ratio_query(5),
        "result[0] < 0.01",
        json!({"minRequests": {"query": LATE.sum_query("requests", 5), "count": 18000}}),
    ))
    .await;
    assert_eq!(m.phase, Phase::Successful, "{m:?}");
    assert_eq!(m.metadata["minRequests.seen"], "18,000");
}

/// The check's time decides the window (`now=`): an hour before `base` the same query sees the
/// points of that hour; the ratio is the same, the requests in 10 minutes too.
#[tokio::test]
async fn the_window_ends_at_the_check_time() {
    let s = shared();
    let query = format!(
        "target=summarize(sumSeries({}), \"10min\", \"sum\", true)&from=-10min",
        HEALTHY.path("requests")
    );
    let m = engine()
        .measure(
            &real(&query, "result[0] == 60000", json!({})),
            &at(s.base - 3600),
        )
        .await;
    assert_eq!(m.phase, Phase::Successful, "{m:?}");
    // Before the data starts there is nothing.
    let m = engine()
        .measure(
            &real(&query, "true", json!({"noData": "error"})),
            &at(s.base - 4 * 3600),
        )
        .await;
    assert_eq!(m.phase, Phase::Error, "{m:?}");
    assert!(m.message.starts_with("no data"), "{}", m.message);
}

#[tokio::test]
async fn a_closed_port_is_an_error() {
    let m = engine()
        .measure(
            &metric(
                json!({"address": closed_port(), "retries": 0}),
                "target=a.b&from=-5min",
                "true",
                json!({}),
            ),
            &EvalOptions::with_budget(Duration::from_secs(10)),
        )
        .await;
    assert_eq!(m.phase, Phase::Error, "{m:?}");
    assert!(
        m.message
            .contains("cannot reach Graphite at http://127.0.0.1:"),
        "{}",
        m.message
    );
}

#[tokio::test]
async fn a_slow_server_times_out() {
    let stub = Stub::start(Mode::Slow(
        Duration::from_secs(5),
        Box::new(Mode::Fixed(graphite_body(10.0))),
    ));
    let started = Instant::now();
    let m = engine()
        .measure(
            &metric(
                json!({"address": stub.url, "timeout": "500ms", "retries": 0}),
                "target=a.b&from=-5min",
                "true",
                json!({}),
            ),
            &EvalOptions::with_budget(Duration::from_secs(10)),
        )
        .await;
    assert_eq!(m.phase, Phase::Error, "{m:?}");
    assert!(m.message.contains("Graphite at"), "{}", m.message);
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn garbage_and_http_errors_are_errors() {
    for (mode, says) in [
        (Mode::Garbage, "malformed"),
        (
            Mode::Fixed("<html>login</html>".into()),
            "not a render API JSON answer",
        ),
        (
            Mode::Fixed(r#"[{"target":"t","datapoints":[[10]]}]"#.into()),
            "not [value, timestamp]",
        ),
        (Mode::Status(500, "bar".into()), "500"),
        (Mode::Status(400, "foo".into()), "400"),
        (Mode::Status(401, "no".into()), "set graphite.basicAuth"),
    ] {
        let stub = Stub::start(mode);
        let m = engine()
            .measure(
                &metric(
                    json!({"address": stub.url, "retries": 0}),
                    "target=a.b&from=-5min",
                    "true",
                    json!({"noData": "pass"}),
                ),
                &EvalOptions::with_budget(Duration::from_secs(10)),
            )
            .await;
        assert_eq!(m.phase, Phase::Error, "{says}: {m:?}");
        assert!(
            m.message.to_lowercase().contains(&says.to_lowercase()),
            "{says}: {}",
            m.message
        );
    }
}

fn ratio(canary: &Counts, stable: &Counts) -> Value {
    let side = |c: &Counts| json!({"bad": c.sum_query("errors", 10), "total": c.sum_query("requests", 10)});
    json!({
        "canary": side(canary), "stable": side(stable),
        "maxIncrease": 0.2, "margin": 0.001, "confidence": 0.95, "minRequests": 500
    })
}

fn compare(compare: Value) -> Metric {
    let spec = json!({"graphite": {"address": shared().url}, "compare": compare, "noData": "inconclusive"});
    Metric::from_value(
        &json!({"name": "cmp", "provider": {"plugin": {"rollgate/analysis": spec}}}),
        "",
    )
    .unwrap()
}

#[tokio::test]
async fn compare_ratio_form_judges_the_canary_against_stable() {
    let m = at_base(&compare(ratio(&CMP_EQUAL_CANARY, &CMP_EQUAL_STABLE))).await;
    assert_eq!(m.phase, Phase::Successful, "{m:?}");
    let m = at_base(&compare(ratio(&CMP_BAD_CANARY, &CMP_BAD_STABLE))).await;
    assert_eq!(m.phase, Phase::Failed, "{m:?}");
}

/// The distribution form asks a range: one render per step, each as of its time.
#[tokio::test]
async fn compare_distribution_form_reads_one_render_per_step() {
    let side =
        |service: &str, track: &str| format!("target={}&from=-1min", latency_path(service, track));
    let dist = |service: &str| {
        json!({
            "canary": side(service, "canary"), "stable": side(service, "stable"),
            "window": "30m", "step": "1m", "direction": "increase", "maxIncrease": 0.1,
            "confidence": 0.98, "minSamples": 20
        })
    };
    let m = at_base(&compare(dist("lat-same"))).await;
    assert_eq!(m.phase, Phase::Successful, "{m:?}");
    let m = at_base(&compare(dist("lat-shift"))).await;
    assert_eq!(m.phase, Phase::Failed, "{m:?}");
}

fn b64_decode(text: &str) -> String {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .unwrap_or_default();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A render answer with one series of these values.
fn graphite_body(value: f64) -> String {
    json!([{"target": "sumSeries(app.http.*.*.count)",
        "tags": {"aggregatedBy": "sum", "name": "sumSeries(app.http.*.*.count)"},
        "datapoints": [[value, 1621348430]]}])
    .to_string()
}

/// One of Argo's provider tests: `body` answers the render, then rollgate measures with these
/// conditions; `Err` is a spec refused at load.
async fn argo(
    body: String,
    success: &str,
    failure: &str,
    no_data: &str,
) -> Result<Measurement, String> {
    let stub = Stub::start(Mode::Fixed(body));
    let spec = json!({"graphite": {"address": stub.url, "retries": 0},
            "query": "target=sumSeries(app.http.*.*.count)&from=-2min", "noData": no_data});
    let m = Metric::from_value(
        &json!({"name": "foo", "successCondition": success, "failureCondition": failure,
                "provider": {"plugin": {"rollgate/analysis": spec}}}),
        "",
    );
    match m {
        Ok(m) => {
            let out = engine()
                .measure(&m, &EvalOptions::with_budget(Duration::from_secs(10)))
                .await;
            // Conditions that do not parse stop the check before any query.
            let Some(req) = stub.last_request() else {
                return Ok(out);
            };
            assert_eq!(req.path(), "/render");
            assert_eq!(
                req.param("target").as_deref(),
                Some("sumSeries(app.http.*.*.count)")
            );
            assert_eq!(req.param("from").as_deref(), Some("-2min"));
            assert_eq!(req.param("format").as_deref(), Some("json"));
            Ok(out)
        }
        Err(e) => Err(e.to_string()),
    }
}

/// argo-rollouts v1.9.1 `metricproviders/graphite/graphite_test.go`: the conditions of
/// `newTestingMetric` and each test's answer, phase and value, through rollgate's query kind
/// (the answer from a stub, as Argo's mock API gives it).
#[tokio::test]
async fn argo_provider_tests_keep_their_phase_and_value() {
    let (s, f) = ("10.000000 in result", "10.000000 not in result");
    // TestRunSuccessfulEvaluation.
    let m = argo(graphite_body(10.0), s, f, "error").await.unwrap();
    assert_eq!(
        (m.phase, m.value.as_str()),
        (Phase::Successful, "[10.000000]"),
        "{m:?}"
    );
    // TestRunFailedEvaluation.
    let m = argo(graphite_body(5.0), s, f, "error").await.unwrap();
    assert_eq!(
        (m.phase, m.value.as_str()),
        (Phase::Failed, "[5.000000]"),
        "{m:?}"
    );
    // TestRunMeasurementError: conditions that do not parse. Argo: phase Error, message
    // `unexpected token Number("10.000000")`, value "[10.000000]" (it queries first); rollgate:
    // phase Error naming the same token, before any query (so no value).
    let m = argo(
        graphite_body(10.0),
        "result[0] 10.000000",
        "result[0] 10.000000",
        "error",
    )
    .await
    .unwrap();
    assert_eq!(m.phase, Phase::Error, "{m:?}");
    assert!(
        m.message.contains("unexpected token `10.000000`"),
        "{}",
        m.message
    );
    // TestRunErrorEvaluationFromNilQueryResponse: no datapoints → Error "no values found",
    // value "": rollgate's noData: error gives the same phase and value.
    for body in ["[]", r#"[{"target":"t","datapoints":[]}]"#] {
        let m = argo(body.into(), s, f, "error").await.unwrap();
        assert_eq!(
            (m.phase, m.value.as_str()),
            (Phase::Error, ""),
            "{body}: {m:?}"
        );
        assert!(m.message.starts_with("no data"), "{}", m.message);
    }
    // TestRunErrorEvaluationFromErrorQueryResponse and api_test.go's error answers.
    for body in [
        "invalid JSON",
        r#"[{"datapoints":[[100,"f"]],"target":"t"}]"#,
    ] {
        let m = argo(body.into(), s, f, "pass").await.unwrap();
        assert_eq!(m.phase, Phase::Error, "{body}: {m:?}");
    }
    // api_test.go: a string value and a string timestamp decode as numbers.
    for body in [
        r#"[{"datapoints":[["10.000000",1621348430]],"target":"t"}]"#,
        r#"[{"datapoints":[[10.000000,"1621348430"]],"target":"t"}]"#,
    ] {
        let m = argo(body.into(), s, f, "error").await.unwrap();
        assert_eq!(
            (m.phase, m.value.as_str()),
            (Phase::Successful, "[10.000000]"),
            "{body}"
        );
    }
}

/// The check's time reaches graphite-web as `now` (relative `from`/`until` count from it), a
/// user's `format` is replaced, and an address prefix is kept.
#[tokio::test]
async fn the_request_carries_now_and_keeps_the_prefix() {
    let stub = Stub::start(Mode::Fixed(graphite_body(1.0)));
    let m = metric(
        json!({"address": format!("{}/graphite/", stub.url)}),
        "target=a.b&from=-5min&until=-1min&format=pickle&now=1",
        "true",
        json!({}),
    );
    let out = engine().measure(&m, &at(1_700_000_040)).await;
    assert_eq!(out.phase, Phase::Successful, "{out:?}");
    let req = stub.last_request().unwrap();
    assert_eq!(req.path(), "/graphite/render");
    assert_eq!(req.param("now").as_deref(), Some("1700000040"));
    assert_eq!(req.param("format").as_deref(), Some("json"));
    assert_eq!(req.param("until").as_deref(), Some("-1min"));
    assert_eq!(req.target.matches("now=").count(), 1, "{}", req.target);
    assert_eq!(req.target.matches("format=").count(), 1, "{}", req.target);
}

/// A server that echoes the credential back (in an error body, in target names and tags) never
/// gets it into a message, the value or metadata; the password file is read at each query.
#[tokio::test]
async fn credentials_never_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("password");
    let password = "s3cret-graphite-pass";
    std::fs::write(&file, format!("{password}\n")).unwrap();
    let stub = Stub::script(move |req, _| {
        let auth = req.header("authorization").unwrap_or("").to_string();
        let decoded = b64_decode(auth.trim_start_matches("Basic "));
        if req.param("target").as_deref() == Some("fail.me") {
            return reply(500, &format!("bad credentials {decoded} ({auth})"));
        }
        reply(
            200,
            &json!([{"target": format!("echo {decoded}"), "tags": {"name": decoded, "auth": auth},
                "datapoints": [[1.0, 1621348430]]}])
            .to_string(),
        )
    });
    let block = json!({"address": stub.url, "retries": 0,
        "basicAuth": {"username": "rollgate", "passwordFile": file}});
    for target in ["fail.me", "ok"] {
        let m = metric(
            block.clone(),
            &format!("target={target}&from=-5min"),
            "result[0] == 1",
            json!({}),
        );
        let out = engine()
            .measure(&m, &EvalOptions::with_budget(Duration::from_secs(10)))
            .await;
        let shown = format!("{} {} {:?}", out.message, out.value, out.metadata);
        assert!(!shown.contains(password), "{target}: {shown}");
        assert!(!shown.contains("czNjcmV0"), "{target}: {shown}");
        let expected = if target == "ok" {
            Phase::Successful
        } else {
            Phase::Error
        };
        assert_eq!(out.phase, expected, "{out:?}");
    }
    let sent = stub.last_request().unwrap();
    assert_eq!(
        b64_decode(
            sent.header("authorization")
                .unwrap()
                .trim_start_matches("Basic ")
        ),
        format!("rollgate:{password}")
    );
    // Rotation: the next query reads the new password.
    std::fs::write(&file, "rotated-pass").unwrap();
    let m = metric(block.clone(), "target=ok&from=-5min", "true", json!({}));
    engine()
        .measure(&m, &EvalOptions::with_budget(Duration::from_secs(10)))
        .await;
    let sent = stub.last_request().unwrap();
    assert_eq!(
        b64_decode(
            sent.header("authorization")
                .unwrap()
                .trim_start_matches("Basic ")
        ),
        "rollgate:rotated-pass"
    );
    // A 401 names the key and the file, never the content.
    let stub = Stub::start(Mode::Status(401, "rotated-pass".into()));
    let m = metric(
        json!({"address": stub.url, "basicAuth": {"username": "rollgate", "passwordFile": file}}),
        "target=a&from=-5min",
        "true",
        json!({}),
    );
    let out = engine()
        .measure(&m, &EvalOptions::with_budget(Duration::from_secs(10)))
        .await;
    assert_eq!(out.phase, Phase::Error, "{out:?}");
    assert!(out.message.contains("passwordFile"), "{}", out.message);
    assert!(!out.message.contains("rotated-pass"), "{}", out.message);
}

/// The shipped example lints, and runs against the test graphite-web (its address replaced)
/// with both metrics Successful at `base`.
#[test]
fn the_example_lints_and_runs() {
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/backends/graphite.yaml"
    );
    let lint = std::process::Command::new(support::rollgate_bin())
        .args(["lint", example])
        .output()
        .unwrap();
    assert!(
        lint.status.success(),
        "{}",
        String::from_utf8_lossy(&lint.stdout)
    );
    let s = shared();
    let text = std::fs::read_to_string(example)
        .unwrap()
        .replace("http://graphite.monitoring:8080", &s.url);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("graphite.yaml");
    std::fs::write(&file, text).unwrap();
    let at = Utc.timestamp_opt(s.base, 0).single().unwrap().to_rfc3339();
    let run = std::process::Command::new(support::rollgate_bin())
        .args(["dry-run", "-f"])
        .arg(&file)
        .args(["--at", &at])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    for name in ["error-ratio", "error-ratio-vs-stable"] {
        assert!(out.contains(name), "{out}");
    }
}
