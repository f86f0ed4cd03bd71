//! The `datadog:` backend end to end: the engine against the Datadog stand-in
//! (tests/support/datadog_standin.py, written from Datadog's API reference: v1 "Query
//! timeseries points" `GET /api/v1/query`, v2 "Query scalar data across multiple products"
//! `POST /api/v2/query/scalar`, v2 "Query timeseries data across multiple products"
//! `POST /api/v2/query/timeseries`, authentication and rate limits, docs.datadoghq.com/api/latest).
//!
//! - the scenario matrix of the Prometheus tests (healthy, bad, low traffic, no data, 0/0,
//!   backend down, slow, garbage) on both API versions, with the same verdicts;
//! - compare: the ratio form (counts per side) and the distribution form (ranges);
//! - Argo conformance: the cases of argo-rollouts v1.9.1 metricproviders/datadog/
//!   datadogV1_test.go (`TestRunSuite`) and datadogV2_test.go (`TestRunSuiteV2`): the bodies
//!   they feed, their conditions, the phase and value they expect, and the request they check;
//! - errors: 403 for a wrong key, 429 with a reset that fits (retried) or does not (Error),
//!   keys never in messages or metadata, even when the server echoes them.

use crate::support;

use std::time::{Duration, Instant};

use chrono::{DateTime, TimeZone, Utc};
use rollgate::engine::{AddressPolicy, Engine, EvalOptions};
use rollgate::measurement::{Measurement, Phase};
use rollgate::prometheus::{Backend, Client};
use rollgate::spec::Metric;
use serde_json::{json, Value};
use support::datadog::{shared, API_KEY, APP_KEY};
use support::stub::closed_port;

/// Argo's tests' clock (`unixNow = 1599076435`).
const NOW: i64 = 1_599_076_435;

fn at(t: i64) -> EvalOptions {
    let time: DateTime<Utc> = Utc.timestamp_opt(t, 0).single().unwrap();
    EvalOptions {
        at: Some(time),
        ..EvalOptions::with_budget(Duration::from_secs(20))
    }
}

/// A metric with a rollgate spec over the stand-in; `block` is merged into the datadog block,
/// `spec` into the spec, `top` into the metric (conditions, count).
fn metric(block: Value, spec: Value, top: Value) -> Metric {
    let mut s = json!({"datadog": shared().block(block), "noData": "inconclusive"});
    for (k, v) in spec.as_object().unwrap() {
        s[k] = v.clone();
    }
    let mut m =
        json!({"name": "m", "interval": "1m", "provider": {"plugin": {"rollgate/analysis": s}}});
    for (k, v) in top.as_object().unwrap() {
        m[k] = v.clone();
    }
    Metric::from_value(&m, "").unwrap()
}

async fn measure(m: &Metric) -> Measurement {
    measure_at(m, NOW).await
}

async fn measure_at(m: &Metric, t: i64) -> Measurement {
    Engine::new(Backend::Live(Client::new()), AddressPolicy::default())
        .measure(m, &at(t))
        .await
}

fn versions() -> [Value; 2] {
    [json!({}), json!({"apiVersion": "v2"})]
}

/// The error rate of a service and its request count, as the stand-in serves them.
fn service(name: &str, ratio: Value, total: Value) -> (String, String) {
    let dd = shared();
    let r = format!("sum:trace.http.request.errors{{service:{name}}}.as_count() / sum:trace.http.request.hits{{service:{name}}}.as_count()");
    let t = format!("sum:trace.http.request.hits{{service:{name}}}.as_count()");
    dd.series(&r, json!({"value": ratio}));
    dd.series(&t, json!({"value": total}));
    (r, t)
}

fn guarded(ratio: &str, total: &str, on: &str) -> Value {
    json!({"query": ratio, "minRequests": {"query": total, "count": 300, "onInsufficient": on}})
}

fn success(c: &str) -> Value {
    json!({"successCondition": c})
}

#[tokio::test]
async fn healthy_passes_the_guard_and_the_condition() {
    for (i, v) in versions().into_iter().enumerate() {
        let (r, t) = service(&format!("healthy{i}"), json!(0.001), json!(30000));
        let m = measure(&metric(
            v,
            guarded(&r, &t, "inconclusive"),
            success("result < 0.01"),
        ))
        .await;
        assert_eq!(m.phase, Phase::Successful, "{i}: {m:?}");
        assert_eq!(m.value, "0.001");
        assert_eq!(m.metadata["minRequests.seen"], "30,000");
        assert!(
            m.message.contains("30,000 requests seen, 300 needed"),
            "{}",
            m.message
        );
        // The window Argo asks for: [now - 5m, now], keys in their headers.
        let last = shared().last(&r);
        assert_eq!(last["keys_ok"], true, "{last}");
        assert_eq!(last["content_type"], "application/json", "{last}");
        let scale = if i == 0 { 1 } else { 1000 };
        assert_eq!(last["from"], (NOW - 300) * scale, "{last}");
        assert_eq!(last["to"], NOW * scale, "{last}");
    }
}

#[tokio::test]
async fn bad_error_rate_fails() {
    for (i, v) in versions().into_iter().enumerate() {
        let (r, t) = service(&format!("bad{i}"), json!(0.05), json!(30000));
        let m = measure(&metric(
            v,
            guarded(&r, &t, "inconclusive"),
            success("result < 0.01"),
        ))
        .await;
        assert_eq!(m.phase, Phase::Failed, "{i}: {m:?}");
        assert_eq!(m.value, "0.05");
        assert!(m.message.contains("does not hold"), "{}", m.message);
    }
}

#[tokio::test]
async fn low_traffic_follows_on_insufficient() {
    for (i, v) in versions().into_iter().enumerate() {
        let (r, t) = service(&format!("low{i}"), json!(0.0), json!(15));
        for (choice, phase) in [
            ("inconclusive", Phase::Inconclusive),
            ("fail", Phase::Failed),
            ("pass", Phase::Successful),
        ] {
            let m = measure(&metric(
                v.clone(),
                guarded(&r, &t, choice),
                success("result < 0.01"),
            ))
            .await;
            assert_eq!(m.phase, phase, "{i} {choice}: {m:?}");
            assert!(
                m.message.contains("15 requests seen, 300 needed"),
                "{}",
                m.message
            );
            assert_eq!(m.value, "", "the main query is not judged below the guard");
        }
    }
}

#[tokio::test]
async fn no_series_follows_the_no_data_policy() {
    for (i, v) in versions().into_iter().enumerate() {
        // A metric Datadog does not know: no series (v1) or an empty column (v2).
        let q = format!("avg:no.such.metric{{case:nodata{i}}}");
        for (policy, phase) in [
            ("fail", Phase::Failed),
            ("pass", Phase::Successful),
            ("inconclusive", Phase::Inconclusive),
            ("error", Phase::Error),
        ] {
            let m = measure(&metric(
                v.clone(),
                json!({"query": q, "noData": policy}),
                success("result < 0.01"),
            ))
            .await;
            assert_eq!(m.phase, phase, "{i} {policy}: {m:?}");
            assert!(m.message.starts_with("no data: query"), "{}", m.message);
            assert_eq!(m.value, "[]", "Argo's value for no data");
        }
        // The guard's query returning nothing is no data too, never a pass.
        let m = measure(&metric(
            v.clone(),
            json!({"query": q, "minRequests": {"query": q, "count": 10}}),
            success("true"),
        ))
        .await;
        assert_eq!(m.phase, Phase::Inconclusive, "{i}: {m:?}");
        assert!(m.message.contains("minRequests.query"), "{}", m.message);
    }
}

#[tokio::test]
async fn zero_over_zero_is_never_a_pass() {
    for (i, v) in versions().into_iter().enumerate() {
        // No requests at all: Datadog answers the ratio with null points.
        let (r, t) = service(&format!("idle{i}"), Value::Null, json!(0));
        let m = measure(&metric(
            v.clone(),
            guarded(&r, &t, "inconclusive"),
            success("result < 0.01"),
        ))
        .await;
        assert_eq!(m.phase, Phase::Inconclusive, "{i}: {m:?}");
        assert!(m.message.contains("0 requests seen"), "{}", m.message);
        // Without a guard, the null is no data (Argo's Go decoding would read it as 0 and pass).
        let m = measure(&metric(
            v.clone(),
            json!({"query": r, "noData": "fail"}),
            success("result < 0.01"),
        ))
        .await;
        assert_eq!(m.phase, Phase::Failed, "{i}: {m:?}");
        assert!(m.message.starts_with("no data: query"), "{}", m.message);
    }
}

#[tokio::test]
async fn a_closed_port_is_an_error() {
    let url = closed_port();
    let m = measure(&metric(
        json!({"address": url, "retries": 0}),
        json!({"query": "avg:x{*}"}),
        success("result < 1"),
    ))
    .await;
    assert_eq!(m.phase, Phase::Error, "{m:?}");
    assert!(
        m.message.contains("cannot reach Datadog at"),
        "{}",
        m.message
    );
}

#[tokio::test]
async fn a_slow_answer_times_out() {
    let q = "avg:slow{case:slow}";
    shared().series(q, json!({"value": 1}));
    shared().fault(q, json!({"delay": 3}));
    let started = Instant::now();
    let m = measure(&metric(
        json!({"timeout": "500ms", "retries": 1}),
        json!({"query": q}),
        success("result < 2"),
    ))
    .await;
    assert_eq!(m.phase, Phase::Error, "{m:?}");
    assert!(
        m.message.contains("did not answer within 500ms"),
        "{}",
        m.message
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(shared().requests(q), 2, "one retry after the timeout");
}

#[tokio::test]
async fn garbage_is_an_error() {
    for (i, v) in versions().into_iter().enumerate() {
        let q = format!("avg:garbage{{case:{i}}}");
        shared().fault(&q, json!({"garbage": true}));
        let m = measure(&metric(v, json!({"query": q}), success("result < 1"))).await;
        assert_eq!(m.phase, Phase::Error, "{i}: {m:?}");
        assert!(
            m.message.contains("malformed response from Datadog"),
            "{}",
            m.message
        );
    }
}

#[tokio::test]
async fn a_wrong_or_missing_key_is_an_error_naming_the_file() {
    let dd = shared();
    let q = "avg:auth{case:wrong}";
    dd.series(q, json!({"value": 0}));
    let m = measure(&metric(
        json!({"apiKeyFile": dd.wrong_key_file}),
        json!({"query": q}),
        success("result < 1"),
    ))
    .await;
    assert_eq!(m.phase, Phase::Error, "{m:?}");
    assert!(m.message.contains("HTTP 403"), "{}", m.message);
    assert!(m.message.contains("datadog.apiKeyFile"), "{}", m.message);
    assert!(
        m.message.contains(&dd.wrong_key_file.display().to_string()),
        "{}",
        m.message
    );
    assert!(!m.message.contains("ffffffff"), "{}", m.message);
    assert_eq!(dd.requests(q), 1, "a refused key is not retried");

    let missing = dd.dir.path().join("no-such-key");
    let m = measure(&metric(
        json!({"appKeyFile": missing}),
        json!({"query": q}),
        success("result < 1"),
    ))
    .await;
    assert_eq!(m.phase, Phase::Error, "{m:?}");
    assert!(m.message.contains("datadog.appKeyFile"), "{}", m.message);
    assert!(m.message.contains("no-such-key"), "{}", m.message);
}

#[tokio::test]
async fn a_rotated_key_is_used_at_the_next_check() {
    let dd = shared();
    let q = "avg:rotation{case:1}";
    dd.series(q, json!({"value": 0.5}));
    let file = dd.dir.path().join("rotating-api-key");
    std::fs::write(&file, "old-key-0000000000000000").unwrap();
    let m = metric(
        json!({"apiKeyFile": file, "retries": 0}),
        json!({"query": q}),
        success("result < 1"),
    );
    assert_eq!(measure(&m).await.phase, Phase::Error);
    std::fs::write(&file, format!("{API_KEY}\n")).unwrap();
    let out = measure(&m).await;
    assert_eq!(out.phase, Phase::Successful, "{out:?}");
}

#[tokio::test]
async fn a_rate_limit_that_resets_in_time_is_waited_for() {
    for (i, v) in versions().into_iter().enumerate() {
        let q = format!("avg:ratelimited{{case:fits{i}}}");
        shared().series(&q, json!({"value": 0.001}));
        shared().fault(&q, json!({"rate_limit": 1, "reset": 1}));
        let started = Instant::now();
        let m = measure(&metric(v, json!({"query": q}), success("result < 0.01"))).await;
        assert_eq!(m.phase, Phase::Successful, "{i}: {m:?}");
        assert_eq!(shared().requests(&q), 2, "the 429, then the answer");
        assert!(
            started.elapsed() >= Duration::from_millis(900),
            "waited for the reset"
        );
    }
}

#[tokio::test]
async fn a_rate_limit_past_the_deadline_is_an_error_naming_it() {
    let q = "avg:ratelimited{case:late}";
    shared().series(q, json!({"value": 0.001}));
    shared().fault(q, json!({"rate_limit": 100, "reset": 3600}));
    let started = Instant::now();
    let m = measure(&metric(
        json!({}),
        json!({"query": q}),
        success("result < 0.01"),
    ))
    .await;
    assert_eq!(m.phase, Phase::Error, "{m:?}");
    assert!(
        m.message
            .contains("rate limit reached (HTTP 429; it resets in 3600s)"),
        "{}",
        m.message
    );
    assert!(m.message.contains("Datadog at"), "{}", m.message);
    assert_eq!(shared().requests(q), 1, "no wait past the deadline");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn keys_echoed_by_the_server_never_reach_messages_or_metadata() {
    for (status, v) in [
        (400, json!({})),
        (401, json!({})),
        (400, json!({"apiVersion": "v2"})),
    ] {
        let q = format!(
            "avg:echo{{status:{status},v:{}}}",
            v.get("apiVersion").is_some()
        );
        shared().fault(&q, json!({"echo": status}));
        let m = measure(&metric(
            v.clone(),
            json!({"query": q, "minRequests": {"query": q, "count": 1}}),
            success("result < 1"),
        ))
        .await;
        assert_eq!(m.phase, Phase::Error, "{m:?}");
        let shown = format!("{} {:?} {}", m.message, m.metadata, m.value);
        assert!(shown.contains("<redacted>"), "{shown}");
        assert!(!shown.contains(API_KEY), "{shown}");
        assert!(!shown.contains(APP_KEY), "{shown}");
        assert!(!shown.contains(&API_KEY[..16]), "{shown}");
    }
}

// --- compare ---------------------------------------------------------------------------------

fn counts(name: &str, bad: f64, total: f64) -> Value {
    let dd = shared();
    let b = format!("sum:trace.http.request.errors{{service:{name}}}.as_count()");
    let t = format!("sum:trace.http.request.hits{{service:{name}}}.as_count()");
    // Counts over the window: one point carrying it (the v2 scalar API sums with `sum`).
    dd.series(&b, json!({"value": bad}));
    dd.series(&t, json!({"value": total}));
    json!({"bad": b, "total": t})
}

fn compare(canary: Value, stable: Value) -> Value {
    json!({"compare": {
        "canary": canary, "stable": stable,
        "maxIncrease": 0.2, "margin": 0.001, "confidence": 0.95, "minRequests": 500
    }})
}

#[tokio::test]
async fn compare_ratio_form_judges_the_canary_against_stable() {
    for (i, v) in versions().into_iter().enumerate() {
        let top = json!({"count": 10});
        let m = measure(&metric(
            v.clone(),
            compare(
                counts(&format!("cmp-bad-canary{i}"), 720.0, 24000.0),
                counts(&format!("cmp-bad-stable{i}"), 132.0, 26400.0),
            ),
            top.clone(),
        ))
        .await;
        assert_eq!(m.phase, Phase::Failed, "{i}: {m:?}");
        assert!(m.message.contains("beyond"), "{}", m.message);
        let m = measure(&metric(
            v.clone(),
            compare(
                counts(&format!("cmp-eq-canary{i}"), 120.0, 24000.0),
                counts(&format!("cmp-eq-stable{i}"), 132.0, 26400.0),
            ),
            top.clone(),
        ))
        .await;
        assert_eq!(m.phase, Phase::Successful, "{i}: {m:?}");
        let value: Value = serde_json::from_str(&m.value).unwrap();
        assert_eq!(value["canary"]["total"], 24000, "{value}");
        assert_eq!(value["stable"]["bad"], 132, "{value}");
        // No canary traffic yet: no data, not a verdict.
        let m = measure(&metric(
            v,
            compare(
                json!({"bad": format!("sum:none{{c:{i}}}"), "total": format!("sum:none{{c:{i}}}")}),
                counts(&format!("cmp-nd-stable{i}"), 132.0, 26400.0),
            ),
            top,
        ))
        .await;
        assert_eq!(m.phase, Phase::Inconclusive, "{i}: {m:?}");
        assert!(
            m.message.starts_with("no data: compare.canary"),
            "{}",
            m.message
        );
    }
}

#[tokio::test]
async fn compare_distribution_form_reads_ranges() {
    for (i, v) in versions().into_iter().enumerate() {
        let dd = shared();
        let stable: Vec<f64> = (0..30).map(|k| 0.20 + f64::from(k % 7) * 0.005).collect();
        let shifted: Vec<f64> = stable.iter().map(|x| x * 1.6).collect();
        let same_q = format!("p99:latency{{track:canary-same{i}}}");
        let shifted_q = format!("p99:latency{{track:canary-shift{i}}}");
        let stable_q = format!("p99:latency{{track:stable{i}}}");
        dd.series(&same_q, json!({"value": stable}));
        dd.series(&shifted_q, json!({"value": shifted}));
        dd.series(&stable_q, json!({"value": stable}));
        let spec = |canary: &str| {
            json!({"compare": {
                "canary": canary, "stable": stable_q,
                "window": "30m", "step": "1m", "direction": "increase", "maxIncrease": 0.1,
                "confidence": 0.98, "minSamples": 20
            }})
        };
        let top = json!({"count": 10});
        let m = measure(&metric(v.clone(), spec(&same_q), top.clone())).await;
        assert_eq!(m.phase, Phase::Successful, "{i}: {m:?}");
        let m = measure(&metric(v.clone(), spec(&shifted_q), top.clone())).await;
        assert_eq!(m.phase, Phase::Failed, "{i}: {m:?}");
        let last = dd.last(&stable_q);
        if i == 0 {
            assert_eq!(last["from"], NOW - 1800, "{last}");
            assert_eq!(last["to"], NOW, "{last}");
        } else {
            assert_eq!(last["path"], "/api/v2/query/timeseries", "{last}");
            assert_eq!(last["interval"], 60_000, "{last}");
            assert_eq!(last["from"], (NOW - 1800) * 1000, "{last}");
        }
    }
}

// --- Argo conformance ------------------------------------------------------------------------

/// One case of Argo's provider tests: the answer it feeds, its conditions, its interval, and
/// what Argo gives.
struct ArgoCase {
    name: &'static str,
    status: u16,
    body: &'static str,
    success: &'static str,
    failure: &'static str,
    interval: Option<&'static str>,
    aggregator: Option<&'static str>,
    phase: Phase,
    /// Argo's measurement value (Successful/Failed) or a piece of its error message.
    value: &'static str,
    /// For a no-data answer: the `noData` policy that gives Argo's phase (rollgate judges no
    /// data by the policy, not by `default()`; docs/backends.md, Datadog).
    no_data: Option<&'static str>,
}

const V1_DATA_LOW: &str = r#"{"status":"ok","series":[{"pointlist":[[1598867910000,0.0020008318672513122],[1598867925000,0.0003332881882246533]]}]}"#;
const V1_DATA_HIGH: &str = r#"{"status":"ok","series":[{"pointlist":[[1598867910000,0.0020008318672513122],[1598867925000,0.006121378742186943]]}]}"#;
const V1_EMPTY: &str = r#"{"status":"ok","series":[]}"#;

fn case(
    name: &'static str,
    status: u16,
    body: &'static str,
    conditions: (&'static str, &'static str),
    phase: Phase,
    value: &'static str,
) -> ArgoCase {
    ArgoCase {
        name,
        status,
        body,
        success: conditions.0,
        failure: conditions.1,
        interval: None,
        aggregator: None,
        phase,
        value,
        no_data: None,
    }
}

const LOW: (&str, &str) = ("result < 0.001", "result >= 0.001");

/// datadogV1_test.go `TestRunSuite` (v1.9.1), every case but the two about where keys come
/// from (Kubernetes secrets, environment variables: rollgate reads key files).
fn v1_cases() -> Vec<ArgoCase> {
    vec![
        ArgoCase {
            interval: Some("10m"),
            ..case(
                "last value matches",
                200,
                V1_DATA_LOW,
                LOW,
                Phase::Successful,
                "0.0003332881882246533",
            )
        },
        case(
            "last value does not match",
            200,
            V1_DATA_HIGH,
            LOW,
            Phase::Failed,
            "0.006121378742186943",
        ),
        case(
            "invalid request",
            400,
            r#"{"status":"error","error":"error messsage"}"#,
            LOW,
            Phase::Error,
            "HTTP 400: {\"status\":\"error\",\"error\":\"error messsage\"}",
        ),
        case(
            "authentication",
            401,
            r#"{"errors": ["No authenticated user."]}"#,
            LOW,
            Phase::Error,
            "(HTTP 401): check the API key",
        ),
        case(
            "default and data",
            200,
            V1_DATA_HIGH,
            ("default(result, 0) < 0.05", ""),
            Phase::Successful,
            "0.006121378742186943",
        ),
        ArgoCase {
            no_data: Some("error"),
            ..case(
                "no default and no data",
                200,
                V1_EMPTY,
                ("result < 0.05", ""),
                Phase::Error,
                "no data: query",
            )
        },
        ArgoCase {
            no_data: Some("pass"),
            ..case(
                "default and no data",
                200,
                V1_EMPTY,
                ("default(result, 0) < 0.05", ""),
                Phase::Successful,
                "[]",
            )
        },
        ArgoCase {
            no_data: Some("fail"),
            ..case(
                "bad default and no data",
                200,
                V1_EMPTY,
                ("default(result, 1) < 0.05", ""),
                Phase::Failed,
                "[]",
            )
        },
        case(
            "bad default and good data",
            200,
            V1_DATA_HIGH,
            ("default(result, 1) < 0.05", ""),
            Phase::Successful,
            "0.006121378742186943",
        ),
        case(
            "non-array series",
            200,
            r#"{"status":"ok","series":"invalid"}"#,
            LOW,
            Phase::Error,
            "malformed response from Datadog",
        ),
    ]
}

const V2_EMPTY: &str = r#"{"data": {"attributes": {"columns": [ {"values": []}]}}}"#;

/// datadogV2_test.go `TestRunSuiteV2` (v1.9.1), every case but those about where keys come
/// from and the `queries`/`formula` case (rollgate sends one query per request).
fn v2_cases() -> Vec<ArgoCase> {
    vec![
        ArgoCase {
            interval: Some("10m"),
            ..case(
                "simple scalar query",
                200,
                r#"{"data": {"attributes": {"columns": [ {"values": [0.0006332881882246533]}]}}}"#,
                LOW,
                Phase::Successful,
                "0.0006332881882246533",
            )
        },
        case(
            "value does not match condition then fail",
            200,
            r#"{"data": {"attributes": {"columns": [ {"values": [0.006121374442186943]}]}}}"#,
            LOW,
            Phase::Failed,
            "0.006121374442186943",
        ),
        case(
            "error for invalid request",
            400,
            r#"{"status":"error","error":"error messsage"}"#,
            LOW,
            Phase::Error,
            "HTTP 400: {\"status\":\"error\",\"error\":\"error messsage\"}",
        ),
        case(
            "no authenticated user",
            401,
            r#"{"errors": ["No authenticated user."]}"#,
            LOW,
            Phase::Error,
            "(HTTP 401): check the API key",
        ),
        case(
            "success with default and data",
            200,
            r#"{"data": {"attributes": {"columns": [ {"values": [0.006121378742186943]}]}}}"#,
            ("default(result, 0) < 0.05", ""),
            Phase::Successful,
            "0.006121378742186943",
        ),
        ArgoCase {
            no_data: Some("error"),
            ..case(
                "error with no default and no data",
                200,
                V2_EMPTY,
                ("result < 0.05", ""),
                Phase::Error,
                "no data: query",
            )
        },
        ArgoCase {
            no_data: Some("pass"),
            ..case(
                "success with default and no data",
                200,
                V2_EMPTY,
                ("default(result, 0) < 0.05", ""),
                Phase::Successful,
                "[]",
            )
        },
        ArgoCase {
            no_data: Some("fail"),
            ..case(
                "fail when bad default and no data",
                200,
                V2_EMPTY,
                ("default(result, 1) < 0.05", ""),
                Phase::Failed,
                "[]",
            )
        },
        case(
            "success bad default and good data",
            200,
            r#"{"data": {"attributes": {"columns": [ {"values": [0.006721378742186999]}]}}}"#,
            ("default(result, 1) < 0.05", ""),
            Phase::Successful,
            "0.006721378742186999",
        ),
        case(
            "error when bad values from dd",
            200,
            r#"{"data": {"attributes": {"columns": [{"values": "invalid"}]}}}"#,
            LOW,
            Phase::Error,
            "malformed response from Datadog",
        ),
        ArgoCase {
            aggregator: Some("sum"),
            ..case(
                "sum aggregator",
                200,
                r#"{"data": {"attributes": {"columns": [ {"values": [0.006121378742186943]}]}}}"#,
                ("default(result, 0) < 0.05", ""),
                Phase::Successful,
                "0.006121378742186943",
            )
        },
    ]
}

async fn run_argo_case(version: &str, n: usize, c: &ArgoCase) {
    let dd = shared();
    let q = format!("avg:kubernetes.cpu.user.total{{argo:{version}-{n}}}");
    dd.fault(&q, json!({"status": c.status, "body": c.body}));
    let mut block = json!({"apiVersion": version});
    if let Some(i) = c.interval {
        block["interval"] = json!(i);
    }
    if let Some(a) = c.aggregator {
        block["aggregator"] = json!(a);
    }
    let mut top = json!({"successCondition": c.success});
    if !c.failure.is_empty() {
        top["failureCondition"] = json!(c.failure);
    }
    let m = measure(&metric(
        block,
        json!({"query": q, "noData": c.no_data.unwrap_or("inconclusive")}),
        top,
    ))
    .await;
    let name = format!("{version} {}", c.name);
    assert_eq!(m.phase, c.phase, "{name}: {m:?}");
    match c.phase {
        Phase::Error => assert!(m.message.contains(c.value), "{name}: {}", m.message),
        _ => assert_eq!(m.value, c.value, "{name}: {m:?}"),
    }
    // The request Argo's test checks: the window, the keys, the content type, the aggregator.
    let last = dd.last(&q);
    let seconds = match c.interval {
        Some("10m") => 600,
        _ => 300,
    };
    let scale = if version == "v1" { 1 } else { 1000 };
    assert_eq!(last["from"], (NOW - seconds) * scale, "{name}: {last}");
    assert_eq!(last["to"], NOW * scale, "{name}: {last}");
    assert_eq!(last["keys_ok"], true, "{name}: {last}");
    assert_eq!(last["content_type"], "application/json", "{name}: {last}");
    if version == "v2" {
        assert_eq!(
            last["aggregator"],
            c.aggregator.unwrap_or("last"),
            "{name}: {last}"
        );
        assert_eq!(last["formulas"], json!([]), "{name}: {last}");
        assert_eq!(last["type"], "scalar_request", "{name}: {last}");
    }
}

#[tokio::test]
async fn argo_v1_provider_cases_keep_their_phase_and_value() {
    for (n, c) in v1_cases().iter().enumerate() {
        run_argo_case("v1", n, c).await;
    }
}

#[tokio::test]
async fn argo_v2_provider_cases_keep_their_phase_and_value() {
    for (n, c) in v2_cases().iter().enumerate() {
        run_argo_case("v2", n, c).await;
    }
}

#[test]
fn argo_faulty_address_and_v1_aggregator_are_refused_at_load() {
    // Argo: `parse "://wrong.schema": missing protocol scheme` at run time; here at load.
    for (block, needle) in [
        (json!({"address": "://wrong.schema"}), "datadog.address"),
        // Argo's validateIncomingProps: "Aggregator is not supported in v1".
        (
            json!({"apiVersion": "v1", "aggregator": "sum"}),
            "datadog.aggregator",
        ),
    ] {
        let mut b = json!({"apiKeyFile": "/k/api", "appKeyFile": "/k/app"});
        for (k, v) in block.as_object().unwrap() {
            b[k] = v.clone();
        }
        let m = json!({"name": "m", "provider": {"plugin": {"rollgate/analysis": {
            "datadog": b, "query": "avg:x{*}", "noData": "fail"}}}});
        let e = Metric::from_value(&m, "").unwrap_err().to_string();
        assert!(e.contains(needle), "{e}");
    }
}

#[test]
fn the_binary_never_prints_or_logs_a_key() {
    let dd = shared();
    let ok = "avg:binary{case:ok}";
    let echo = "avg:binary{case:echo}";
    dd.series(ok, json!({"value": 0.001}));
    dd.fault(echo, json!({"echo": 403}));
    let file = dd.dir.path().join("binary-template.yaml");
    let metric = |name: &str, query: &str| {
        format!(
            r#"    - name: {name}
      successCondition: result < 0.01
      provider:
        plugin:
          rollgate/analysis:
            datadog:
              address: {url}
              apiKeyFile: {api}
              appKeyFile: {app}
              retries: 0
            query: "{query}"
            noData: fail
"#,
            url = dd.url,
            api = dd.api_key_file.display(),
            app = dd.app_key_file.display(),
        )
    };
    let template = format!(
        "apiVersion: argoproj.io/v1alpha1\nkind: AnalysisTemplate\nmetadata:\n  name: dd\nspec:\n  metrics:\n{}{}",
        metric("healthy", ok),
        metric("echoed", echo)
    );
    std::fs::write(&file, template).unwrap();
    let out = std::process::Command::new(support::rollgate_bin())
        .args(["dry-run", "--log-level", "trace", "-f"])
        .arg(&file)
        .output()
        .unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(printed.contains("Successful"), "{printed}");
    assert!(printed.contains("HTTP 403"), "{printed}");
    assert!(printed.contains("<redacted>"), "{printed}");
    assert!(!printed.contains(API_KEY), "{printed}");
    assert!(!printed.contains(APP_KEY), "{printed}");
    assert!(!printed.contains(&APP_KEY[..20]), "{printed}");
}
