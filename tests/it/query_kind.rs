//! The `query` metric kind end to end: the engine against a real Prometheus with generated data
//! (guard, no-data policy, conditions, every phase), and against faulty servers.

use crate::support;

use std::time::{Duration, Instant};

use chrono::{DateTime, TimeZone, Utc};
use rollgate::engine::{
    AddressPolicy, Call, CallError, Deadline, Engine, EvalOptions, Expiry, Limit, Position, Trust,
};
use rollgate::measurement::{Measurement, Phase};
use rollgate::prometheus::{Backend, Client};
use rollgate::spec::Metric;
use serde_json::{json, Value};
use support::prom::shared;
use support::scenarios::{
    Traffic, ABSENT_SERVICE, BAD, HEALTHY, IDLE, LOWTRAFFIC, OVERFLOW_SERVICE, P99_GAUGE,
    SPECIAL_METRIC, STALE,
};
use support::stub::{closed_port, Mode, Stub, WARNING_MESSAGE};

fn engine() -> Engine {
    Engine::new(Backend::Live(Client::new()), AddressPolicy::default())
}

fn at_base() -> EvalOptions {
    let base: DateTime<Utc> = Utc.timestamp_opt(shared().base, 0).single().unwrap();
    EvalOptions {
        at: Some(base),
        ..EvalOptions::with_budget(Duration::from_secs(20))
    }
}

/// A metric with a rollgate plugin spec; `extra` is merged into the spec.
fn metric(address: &str, query: &str, success: &str, extra: Value) -> Metric {
    let mut spec =
        json!({"prometheus": {"address": address}, "query": query, "noData": "inconclusive"});
    for (k, v) in extra.as_object().unwrap() {
        spec.as_object_mut().unwrap().insert(k.clone(), v.clone());
    }
    let mut m =
        json!({"name": "m", "interval": "1m", "provider": {"plugin": {"rollgate/analysis": spec}}});
    if !success.is_empty() {
        m["successCondition"] = json!(success);
    }
    Metric::from_value(&m, "").unwrap()
}

fn guard(t: &Traffic, on_insufficient: &str) -> Value {
    json!({"minRequests": {"query": t.total_query("5m"), "count": 300, "onInsufficient": on_insufficient}})
}

async fn measure(m: &Metric) -> Measurement {
    engine().measure(m, &at_base()).await
}

#[tokio::test]
async fn healthy_service_passes_the_guard_and_the_condition() {
    let url = &shared().url;
    let m = measure(&metric(
        url,
        &HEALTHY.ratio_query("5m"),
        "result[0] < 0.01",
        guard(&HEALTHY, "inconclusive"),
    ))
    .await;
    assert_eq!(m.phase, Phase::Successful, "{m:?}");
    assert_eq!(m.value, "[0.001]");
    assert_eq!(m.metadata["minRequests.seen"], "30,000");
    assert_eq!(m.metadata["kind"], "query");
    assert!(
        m.message
            .contains("successCondition `result[0] < 0.01` holds"),
        "{}",
        m.message
    );
    assert!(
        m.message.contains("30,000 requests seen, 300 needed"),
        "{}",
        m.message
    );
    assert!(m.finished_at.is_some() && m.resume_at.is_none());
}

#[tokio::test]
async fn bad_error_rate_fails() {
    let url = &shared().url;
    let m = measure(&metric(
        url,
        &BAD.ratio_query("5m"),
        "result[0] < 0.01",
        guard(&BAD, "inconclusive"),
    ))
    .await;
    assert_eq!(m.phase, Phase::Failed, "{m:?}");
    assert_eq!(m.value, "[0.05]");
    assert!(m.message.contains("does not hold"), "{}", m.message);
}

#[tokio::test]
async fn low_traffic_follows_on_insufficient() {
    let url = &shared().url;
    for (choice, phase) in [
        ("inconclusive", Phase::Inconclusive),
        ("fail", Phase::Failed),
        ("pass", Phase::Successful),
        ("wait", Phase::Running),
    ] {
        let m = measure(&metric(
            url,
            &LOWTRAFFIC.ratio_query("5m"),
            "result[0] < 0.01",
            guard(&LOWTRAFFIC, choice),
        ))
        .await;
        assert_eq!(m.phase, phase, "{choice}: {m:?}");
        assert!(
            m.message.contains("15 requests seen, 300 needed"),
            "{choice}: {}",
            m.message
        );
        assert_eq!(m.metadata["minRequests.seen"], "15");
        // The main query is not even sent below the guard.
        assert_eq!(m.value, "", "{choice}");
        if phase == Phase::Running {
            let resume = m.resume_at.expect("resumeAt");
            assert!(m.finished_at.is_none());
            let wait = (resume - m.started_at).num_seconds();
            assert!((25..=31).contains(&wait), "resumeAt {wait}s after start");
        } else {
            assert!(m.finished_at.is_some());
        }
    }
}

#[tokio::test]
async fn a_waiting_measurement_resumes_and_gives_up_after_the_interval() {
    let url = &shared().url;
    let e = engine();
    let m = metric(
        url,
        &LOWTRAFFIC.ratio_query("5m"),
        "result[0] < 0.01",
        guard(&LOWTRAFFIC, "wait"),
    );
    let first = e.measure(&m, &at_base()).await;
    assert_eq!(first.phase, Phase::Running);
    // Before resumeAt: returned as it is.
    let same = e.resume(&m, &first, &at_base()).await;
    assert_eq!(same, first);
    // Due, and the wait began more than one interval (1m) ago: it gives up, Inconclusive.
    let mut old = first.clone();
    old.started_at = Utc::now() - chrono::Duration::seconds(90);
    old.resume_at = Some(Utc::now() - chrono::Duration::seconds(1));
    let last = e.resume(&m, &old, &at_base()).await;
    assert_eq!(last.phase, Phase::Inconclusive, "{last:?}");
    assert!(last.message.contains("after waiting"), "{}", last.message);
    assert_eq!(last.started_at, old.started_at);
    // Due and still within the interval: waits again.
    let mut recent = first.clone();
    recent.resume_at = Some(Utc::now() - chrono::Duration::seconds(1));
    let again = e.resume(&m, &recent, &at_base()).await;
    assert_eq!(again.phase, Phase::Running);
    // Terminate finishes it without a verdict.
    let t = e.terminate(&again);
    assert_eq!(t.phase, Phase::Inconclusive);
    assert!(t.finished_at.is_some());
}

#[tokio::test]
async fn nan_ratio_follows_no_data_never_the_condition() {
    let url = &shared().url;
    for (choice, phase) in [
        ("fail", Phase::Failed),
        ("pass", Phase::Successful),
        ("inconclusive", Phase::Inconclusive),
        ("error", Phase::Error),
    ] {
        let m = measure(&metric(
            url,
            &IDLE.ratio_query("5m"),
            "result[0] < 0.01",
            json!({"noData": choice}),
        ))
        .await;
        assert_eq!(m.phase, phase, "{choice}: {m:?}");
        assert_eq!(m.value, "[NaN]");
        assert!(m.message.starts_with("no data: query"), "{}", m.message);
        assert!(m.message.contains("NaN"), "{}", m.message);
        assert!(
            m.message.contains(&format!("noData: {choice}")),
            "{}",
            m.message
        );
    }
}

#[tokio::test]
async fn missing_series_are_no_data_for_query_and_guard() {
    let url = &shared().url;
    let absent = Traffic {
        service: ABSENT_SERVICE,
        ..HEALTHY
    };
    let m = measure(&metric(
        url,
        &absent.ratio_query("5m"),
        "result[0] < 0.01",
        json!({"noData": "fail"}),
    ))
    .await;
    assert_eq!(m.phase, Phase::Failed);
    assert!(m.message.contains("returned no series"), "{}", m.message);
    // Series that stopped reporting 10 minutes ago are absent at an instant query.
    let m = measure(&metric(
        url,
        &STALE.ratio_query("5m"),
        "result[0] < 0.01",
        json!({"noData": "error"}),
    ))
    .await;
    assert_eq!(m.phase, Phase::Error);
    assert!(m.message.starts_with("no data"), "{}", m.message);
    // A guard with no series is no data too (not "insufficient").
    let mut extra = guard(&absent, "fail");
    extra["noData"] = json!("inconclusive");
    let m = measure(&metric(
        url,
        &HEALTHY.ratio_query("5m"),
        "result[0] < 0.01",
        extra,
    ))
    .await;
    assert_eq!(m.phase, Phase::Inconclusive, "{m:?}");
    assert!(
        m.message.starts_with("no data: minRequests.query"),
        "{}",
        m.message
    );
}

#[tokio::test]
async fn infinity_is_data_and_reaches_the_condition() {
    let url = &shared().url;
    // A recorded p99 of an overflowing histogram is +Inf (a classic histogram_quantile would say
    // 10, the largest finite bound: see the overflow scenario).
    let q = format!("{P99_GAUGE}{{service=\"{OVERFLOW_SERVICE}\"}}");
    let m = measure(&metric(
        url,
        &q,
        "result[0] <= 0.5",
        json!({"noData": "pass"}),
    ))
    .await;
    assert_eq!(m.phase, Phase::Failed, "{m:?}");
    assert_eq!(m.value, "[+Inf]");
    let m = measure(&metric(
        url,
        &q,
        "isInf(result[0])",
        json!({"noData": "fail"}),
    ))
    .await;
    assert_eq!(m.phase, Phase::Successful, "{m:?}");
    let q = format!("{SPECIAL_METRIC}{{case=\"neg_inf\"}}");
    let m = measure(&metric(url, &q, "result[0] < 0", json!({"noData": "fail"}))).await;
    assert_eq!((m.phase, m.value.as_str()), (Phase::Successful, "[-Inf]"));
    let q = format!(
        "histogram_quantile(0.99, sum by (le) (rate(http_request_duration_seconds_bucket{{service=\"{OVERFLOW_SERVICE}\"}}[5m])))"
    );
    let m = measure(&metric(
        url,
        &q,
        "result[0] <= 0.5",
        json!({"noData": "pass"}),
    ))
    .await;
    assert_eq!((m.phase, m.value.as_str()), (Phase::Failed, "[10]"));
}

#[tokio::test]
async fn argo_builtin_provider_keeps_argo_semantics() {
    let url = &shared().url;
    let absent = Traffic {
        service: ABSENT_SERVICE,
        ..HEALTHY
    };
    let builtin = |query: String, success: &str| {
        Metric::from_value(
            &json!({"name": "b", "successCondition": success, "provider": {"prometheus": {"address": url, "query": query}}}),
            "",
        )
        .unwrap()
    };
    let m = measure(&builtin(absent.ratio_query("5m"), "result[0] < 0.01")).await;
    assert_eq!(m.phase, Phase::Error, "{m:?}");
    assert!(m.message.contains("no data"), "{}", m.message);
    assert_eq!(m.value, "[]");
    let m = measure(&builtin(
        absent.ratio_query("5m"),
        "len(result) == 0 || result[0] < 0.01",
    ))
    .await;
    assert_eq!(m.phase, Phase::Successful);
    let m = measure(&builtin(
        IDLE.ratio_query("5m"),
        "result[0] >= 0.9 || isNaN(result[0])",
    ))
    .await;
    assert_eq!(m.phase, Phase::Successful);
    let m = measure(&builtin(
        format!("scalar({})", HEALTHY.ratio_query("5m")),
        "result < 0.01",
    ))
    .await;
    assert_eq!((m.phase, m.value.as_str()), (Phase::Successful, "0.001"));
}

async fn fault(mode: Mode, prometheus: Value) -> (Measurement, Duration, usize) {
    let stub = Stub::start(mode);
    let mut p = json!({"address": stub.url});
    for (k, v) in prometheus.as_object().unwrap() {
        p[k] = v.clone();
    }
    let m = metric(
        &stub.url,
        "up",
        "result[0] < 1",
        json!({"prometheus": p, "noData": "pass"}),
    );
    // Not `measure`: the shared Prometheus (started on first use) must not count in the timing.
    let t = Instant::now();
    let out = engine()
        .measure(&m, &EvalOptions::with_budget(Duration::from_secs(20)))
        .await;
    (out, t.elapsed(), stub.requests())
}

#[tokio::test]
async fn faults_are_errors_never_successful() {
    let cases = vec![
        ("HTTP 500", Mode::Status(500, "boom".into()), "500"),
        ("HTTP 503", Mode::Status(503, "unavailable".into()), "503"),
        ("status error", Mode::ApiError, "bad_data"),
        ("malformed JSON", Mode::Garbage, "malformed"),
    ];
    for (name, mode, needle) in cases {
        let (m, _, _) = fault(mode, json!({"retries": 1})).await;
        assert_eq!(m.phase, Phase::Error, "{name}: {m:?}");
        assert!(
            m.message.to_lowercase().contains(needle),
            "{name}: {}",
            m.message
        );
    }
    let (m, _, _) = fault(Mode::Huge(200_000), json!({"maxResponseBytes": 100_000})).await;
    assert_eq!(m.phase, Phase::Error);
    assert!(
        m.message.contains("100000") || m.message.to_lowercase().contains("larger"),
        "{}",
        m.message
    );
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let (m, took, requests) =
        fault(Mode::NeverAnswer, json!({"timeout": "500ms", "retries": 1})).await;
    assert_eq!(m.phase, Phase::Error, "{m:?}");
    assert!(
        m.message.contains("did not answer within 500ms"),
        "{}",
        m.message
    );
    assert!(took < Duration::from_secs(4), "took {took:?}");
    assert_eq!(requests, 2, "one retry after the timeout");
}

#[tokio::test]
async fn connection_refused_is_an_error() {
    let url = closed_port();
    let m = measure(&metric(
        &url,
        "up",
        "result[0] < 1",
        json!({"prometheus": {"address": url, "retries": 0}}),
    ))
    .await;
    assert_eq!(m.phase, Phase::Error);
    assert!(m.message.contains("cannot reach"), "{}", m.message);
}

#[tokio::test]
async fn warnings_are_reported_in_message_and_metadata() {
    let (m, _, _) = fault(Mode::Warnings, json!({})).await;
    assert_eq!(m.phase, Phase::Successful, "{m:?}");
    assert!(m.message.contains(WARNING_MESSAGE), "{}", m.message);
    assert_eq!(m.metadata["warnings"], WARNING_MESSAGE);
}

#[tokio::test]
async fn no_address_anywhere_is_an_error_that_says_how_to_set_one() {
    let spec = json!({"query": "up", "noData": "fail"});
    let m = Metric::from_value(
        &json!({"name": "x", "provider": {"plugin": {"rollgate/analysis": spec}}}),
        "",
    )
    .unwrap();
    let out = engine().measure(&m, &EvalOptions::default()).await;
    assert_eq!(out.phase, Phase::Error);
    assert!(
        out.message.contains("ROLLGATE_PROMETHEUS_ADDRESS"),
        "{}",
        out.message
    );
}

/// One call into the engine, as a surface makes it, measured on its own.
fn call(metric: &Metric, deadline: Deadline, trust: Trust) -> Call<'_> {
    Call {
        metric,
        at: None,
        deadline,
        trust,
        position: Position::Single,
        previous: None,
    }
}

#[tokio::test]
async fn a_spec_from_the_network_may_not_name_server_files() {
    let url = closed_port();
    for (key, prometheus) in [
        (
            "bearerTokenFile",
            json!({"bearerTokenFile": "/etc/hostname"}),
        ),
        ("caFile", json!({"caFile": "/etc/hostname"})),
        (
            "basicAuth",
            json!({"basicAuth": {"username": "u", "passwordFile": "/etc/hostname"}}),
        ),
    ] {
        let mut p = prometheus;
        p["address"] = json!(url);
        p["retries"] = json!(0);
        let m = metric(&url, "up", "", json!({ "prometheus": p }));
        let budget = || Deadline::for_call(None, Duration::from_secs(5));
        let e = engine()
            .call(call(&m, budget(), Trust::NETWORK))
            .await
            .unwrap_err();
        assert_eq!(e, CallError::ServerFile { key }, "{key}");
        assert!(
            e.to_string().starts_with(&format!(
                "prometheus.{key}: specs sent over the network may not read files"
            )),
            "{e}"
        );
        // The operator's spec is measured (and fails on the closed port, not on trust).
        let out = engine()
            .call(call(&m, budget(), Trust::OPERATOR))
            .await
            .unwrap();
        assert_eq!(out.phase, Phase::Error, "{out:?}");
        assert!(!out.message.contains("may not read files"), "{out:?}");
    }
}

#[tokio::test]
async fn past_its_deadline_a_call_is_an_error_or_no_answer() {
    let stub = Stub::start(Mode::NeverAnswer);
    let m = metric(
        &stub.url,
        "up",
        "result[0] < 1",
        json!({"prometheus": {"address": stub.url, "retries": 0, "timeout": "60s"}}),
    );
    // The queries are not bounded here: only the cut-off ends the call.
    let cut_off = |on_expiry: Expiry| {
        let now = tokio::time::Instant::now();
        Deadline {
            queries_by: now + Duration::from_secs(60),
            cut_off_at: now + Duration::from_millis(300),
            on_expiry,
        }
    };
    let t = Instant::now();
    let out = engine()
        .call(call(
            &m,
            cut_off(Expiry::Error(Limit::Budget(Duration::from_secs(7)))),
            Trust::OPERATOR,
        ))
        .await
        .unwrap();
    assert_eq!(
        (out.phase, out.message.as_str()),
        (
            Phase::Error,
            "no verdict within the measurement budget of 7 s"
        )
    );
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let e = engine()
        .call(call(&m, cut_off(Expiry::CallerGone), Trust::OPERATOR))
        .await
        .unwrap_err();
    assert_eq!(e, CallError::DeadlineExceeded);
    // A server's deadline: the queries get 90 % of it and the engine's own Error says why.
    let t = Instant::now();
    let server = Deadline::answer_within(Duration::from_secs(1), "deadline (--deadline)");
    let out = engine()
        .call(call(&m, server, Trust::OPERATOR))
        .await
        .unwrap();
    assert_eq!(out.phase, Phase::Error, "{out:?}");
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
}
