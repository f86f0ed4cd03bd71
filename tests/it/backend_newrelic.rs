//! The New Relic backend against the NerdGraph stand-in (`tests/support/newrelic_standin.py`,
//! written from New Relic's NerdGraph NRQL tutorial, usage-limits and NRQL time-range pages;
//! see its docstring): the scenario matrix the Prometheus tests run, the compare forms, Argo's
//! own provider test cases (argo-rollouts v1.9.1 `metricproviders/newrelic/newrelic_test.go`),
//! and the API key kept out of everything a measurement says.

use crate::support;

use std::time::Duration;

use chrono::{TimeZone, Utc};
use rollgate::engine::{AddressPolicy, Engine, EvalOptions};
use rollgate::measurement::{Measurement, Phase};
use rollgate::prometheus::{Backend, Client};
use rollgate::spec::Metric;
use serde_json::{json, Value};
use support::newrelic::{NewRelic, ACCOUNT, API_KEY};

/// A `newrelic` block for the stand-in's behaviour `mode` (`""`: the plain API).
fn block(mode: &str) -> Value {
    let nr = NewRelic::get();
    json!({"address": nr.address(mode), "accountId": ACCOUNT, "apiKeyFile": nr.key_file, "timeout": "2s", "retries": 0})
}

/// A rollgate metric with `spec` (its `newrelic` block added when missing) and conditions.
fn metric(spec: Value, conditions: &[(&str, &str)]) -> Value {
    let mut spec = spec;
    if spec.get("newrelic").is_none() {
        spec["newrelic"] = block("");
    }
    let mut m =
        json!({"name": "m", "interval": "1m", "provider": {"plugin": {"rollgate/analysis": spec}}});
    for (k, v) in conditions {
        m[*k] = json!(v);
    }
    m
}

fn errors(app: &str) -> String {
    format!("SELECT percentage(count(*), WHERE error IS true) FROM Transaction WHERE appName = '{app}' SINCE 10 minutes ago")
}

fn requests(app: &str) -> String {
    format!("SELECT count(*) FROM Transaction WHERE appName = '{app}' SINCE 10 minutes ago")
}

/// The error-rate query of `app`, guarded by its request count (100 needed).
fn guarded(app: &str, no_data: &str) -> Value {
    metric(
        json!({"query": errors(app), "noData": no_data,
               "minRequests": {"query": requests(app), "count": 100}}),
        &[("successCondition", "result.percentage < 5")],
    )
}

async fn measure_at(metric: &Value, at: Option<i64>) -> Measurement {
    let m = Metric::from_value(metric, "").unwrap_or_else(|e| panic!("{e}: {metric}"));
    let opts = EvalOptions {
        at: at.map(|t| Utc.timestamp_opt(t, 0).single().unwrap_or_default()),
        ..EvalOptions::with_budget(Duration::from_secs(20))
    };
    Engine::new(Backend::Live(Client::new()), AddressPolicy::default())
        .measure(&m, &opts)
        .await
}

/// A live check (the query as written, NRQL's own "now").
async fn measure(metric: &Value) -> Measurement {
    measure_at(metric, None).await
}

fn expect(m: &Measurement, phase: Phase, name: &str) {
    assert_eq!(m.phase, phase, "{name}: {} (value {})", m.message, m.value);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scenario_matrix_gives_the_prometheus_verdicts() {
    let nr = NewRelic::get();
    let healthy = measure(&guarded("healthy", "fail")).await;
    expect(&healthy, Phase::Successful, "healthy");
    assert_eq!(healthy.metadata["minRequests.seen"], "299", "{healthy:?}");
    assert!(
        healthy.value.starts_with(r#"{"percentage":1."#),
        "{}",
        healthy.value
    );

    expect(
        &measure(&guarded("bad", "fail")).await,
        Phase::Failed,
        "bad",
    );
    let low = measure(&guarded("lowtraffic", "fail")).await;
    expect(&low, Phase::Inconclusive, "low traffic");
    assert!(
        // 10 events in ten minutes (9 when the window's edge has just passed one).
        low.message.contains(" requests seen, 100 needed"),
        "{}",
        low.message
    );

    // No data: an aggregate over no events is null, a FACET over none has no rows.
    for policy in [
        ("fail", Phase::Failed),
        ("inconclusive", Phase::Inconclusive),
        ("pass", Phase::Successful),
        ("error", Phase::Error),
    ] {
        let m = measure(&metric(
            json!({"query": "SELECT average(duration) FROM Transaction WHERE appName = 'nosuch' SINCE 10 minutes ago", "noData": policy.0}),
            &[("successCondition", "result['average.duration'] < 1")],
        ))
        .await;
        expect(&m, policy.1, &format!("no data, noData {}", policy.0));
        assert!(m.message.contains("no data"), "{}", m.message);
    }
    let facets = measure(&metric(
        json!({"query": "SELECT count(*) FROM Transaction WHERE appName = 'nosuch' FACET appName SINCE 10 minutes ago", "noData": "inconclusive"}),
        &[("successCondition", "result.count < 1")],
    ))
    .await;
    expect(&facets, Phase::Inconclusive, "no facet rows");

    // 0/0: no requests at all. The guard stops it; without one, NaN is no data, never a pass.
    let idle = measure(&guarded("idle", "fail")).await;
    expect(&idle, Phase::Inconclusive, "idle with guard");
    assert!(idle.message.contains("0 requests seen"), "{}", idle.message);
    let idle = measure(&metric(
        json!({"query": errors("idle"), "noData": "fail"}),
        &[("successCondition", "result.percentage < 5")],
    ))
    .await;
    expect(&idle, Phase::Failed, "idle without guard");
    assert!(idle.message.contains("NaN"), "{}", idle.message);

    // Backend down, slow, garbage: Error, never a verdict.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let down_addr = format!("http://{}/graphql", closed.local_addr().unwrap());
    drop(closed);
    let mut down = block("");
    down["address"] = json!(down_addr);
    let m = measure(&metric(
        json!({"newrelic": down, "query": errors("healthy"), "noData": "pass"}),
        &[],
    ))
    .await;
    expect(&m, Phase::Error, "down");
    assert!(m.message.contains("New Relic at"), "{}", m.message);

    let mut slow = block("slow");
    slow["timeout"] = json!("1s");
    let started = std::time::Instant::now();
    let m = measure(&metric(
        json!({"newrelic": slow, "query": errors("healthy"), "noData": "pass"}),
        &[],
    ))
    .await;
    expect(&m, Phase::Error, "slow");
    assert!(m.message.contains("did not answer within"), "{}", m.message);
    assert!(started.elapsed() < Duration::from_secs(4));

    for (mode, words) in [
        ("garbage", "malformed response"),
        ("down", "HTTP 503"),
        ("ratelimit", "rate limit reached (HTTP 429"),
    ] {
        let m = measure(&metric(
            json!({"newrelic": block(mode), "query": errors("healthy"), "noData": "pass"}),
            &[],
        ))
        .await;
        expect(&m, Phase::Error, mode);
        assert!(m.message.contains(words), "{mode}: {}", m.message);
    }
    assert!(nr.requests("/garbage/graphql") >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graphql_errors_bad_keys_and_foreign_accounts_are_errors() {
    let nr = NewRelic::get();
    let syntax = measure(&metric(
        json!({"query": "SELECT count(* FROM Transaction", "noData": "pass"}),
        &[],
    ))
    .await;
    expect(&syntax, Phase::Error, "NRQL syntax error");
    assert!(
        syntax.message.contains("NRQL Syntax Error"),
        "{}",
        syntax.message
    );

    let mut wrong_key = block("");
    wrong_key["apiKeyFile"] = json!(nr.wrong_key_file);
    for (b, name) in [
        (wrong_key, "BAD_API_KEY in a 200"),
        (block("unauthorized"), "HTTP 401"),
    ] {
        let m = measure(&metric(
            json!({"newrelic": b, "query": errors("healthy"), "noData": "pass"}),
            &[],
        ))
        .await;
        expect(&m, Phase::Error, name);
        assert!(
            m.message.contains("authentication failed")
                && m.message.contains("newrelic.apiKeyFile"),
            "{name}: {}",
            m.message
        );
    }

    let mut other = block("");
    other["accountId"] = json!(999);
    let m = measure(&metric(
        json!({"newrelic": other, "query": errors("healthy"), "noData": "pass"}),
        &[],
    ))
    .await;
    expect(&m, Phase::Error, "another account");
    assert!(
        m.message.contains("not found or not accessible"),
        "{}",
        m.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_at_a_past_time_rewrites_relative_clauses() {
    let nr = NewRelic::get();
    // An hour before the newest events, the healthy service was as healthy, and the guard
    // counted the ten minutes before that time, not before now.
    let at = nr.base - 3600;
    let m = measure_at(&guarded("healthy", "fail"), Some(at)).await;
    expect(&m, Phase::Successful, "past healthy");
    assert_eq!(m.metadata["minRequests.seen"], "300", "{m:?}");
    let m = measure_at(&guarded("bad", "fail"), Some(at)).await;
    expect(&m, Phase::Failed, "past bad");
    let rewritten = format!(
        "WHERE appName = 'bad' SINCE {} UNTIL {}",
        (at - 600) * 1000,
        at * 1000
    );
    assert!(!nr.sent(&rewritten).is_empty(), "no query {rewritten}");

    // Before any event: no requests, the guard says so.
    let m = measure_at(&guarded("healthy", "fail"), Some(nr.base - 3 * 3600)).await;
    expect(&m, Phase::Inconclusive, "before the data");

    // A calendar time does not move with the check: refused, not judged again and again.
    let m = measure_at(&metric(
        json!({"query": "SELECT count(*) FROM Transaction SINCE '2024-01-01 00:00:00'", "noData": "pass"}),
        &[],
    ), Some(at))
    .await;
    expect(&m, Phase::Error, "absolute SINCE in a backtest");
    assert!(m.message.contains("not relative"), "{}", m.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_ratio_form_fails_a_worse_canary_and_passes_an_equal_one() {
    let nr = NewRelic::get();
    let ratio = |canary: &str| {
        let bad = |app: &str| {
            format!("SELECT count(*) FROM Transaction WHERE appName = '{app}' AND error IS true SINCE 10 minutes ago")
        };
        let mut m = metric(
            json!({"compare": {
                "canary": {"bad": bad(canary), "total": requests(canary)},
                "stable": {"bad": bad("cmp-stable"), "total": requests("cmp-stable")},
                "maxIncrease": 0.2, "margin": 0.001, "confidence": 0.95, "minRequests": 500
            }, "noData": "inconclusive"}),
            &[],
        );
        m["count"] = json!(10);
        m
    };
    let at = Some(nr.base - 60);
    let worse = measure_at(&ratio("cmp-canary-bad"), at).await;
    expect(&worse, Phase::Failed, "worse canary");
    let same = measure_at(&ratio("cmp-canary-same"), at).await;
    expect(&same, Phase::Successful, "equal canary");
    let low = measure_at(&ratio("lowtraffic"), at).await;
    expect(&low, Phase::Inconclusive, "low-traffic canary");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_distribution_form_reads_timeseries_buckets() {
    let nr = NewRelic::get();
    let dist = |canary: &str| {
        let p99 = |app: &str| {
            format!("SELECT percentile(duration, 99) FROM Transaction WHERE appName = '{app}'")
        };
        let mut m = metric(
            json!({"compare": {
                "canary": p99(canary), "stable": p99("lat-stable"),
                "window": "30m", "step": "1m", "direction": "increase", "maxIncrease": 0.1,
                "confidence": 0.98, "minSamples": 20
            }, "noData": "inconclusive"}),
            &[],
        );
        m["count"] = json!(10);
        m
    };
    let at = Some(nr.base - 60);
    expect(
        &measure_at(&dist("lat-canary-slow"), at).await,
        Phase::Failed,
        "slower canary",
    );
    expect(
        &measure_at(&dist("lat-stable"), at).await,
        Phase::Successful,
        "same latency",
    );
    let sent = nr.sent("'lat-canary-slow' SINCE");
    assert!(
        sent.iter().any(|v| v["query"]
            .as_str()
            .unwrap()
            .ends_with("TIMESERIES 60 seconds")),
        "{sent:?}"
    );
}

/// argo-rollouts v1.9.1 `metricproviders/newrelic/newrelic_test.go`: the rows each case's mock
/// returns, its conditions, and the phase and value Argo expects, through rollgate's `query`
/// kind. The stand-in's `canned` behaviour answers the rows written as the query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argo_provider_test_cases_keep_their_phase_and_value() {
    let nr = NewRelic::get();
    let cases: &[(&str, Value, &str, &str, &str, Phase, &str)] = &[
        (
            "TestRunSuccessfully",
            json!([{"count": 10}]),
            "result.count == 10",
            "result.count != 10",
            "fail",
            Phase::Successful,
            r#"{"count":10}"#,
        ),
        (
            "TestRunWithTimeseries",
            json!([{"count": 10}, {"count": 20}, {"count": 30}]),
            "result[0].count == 10",
            "result[2].count < 20",
            "fail",
            Phase::Successful,
            r#"[{"count":10},{"count":20},{"count":30}]"#,
        ),
        (
            "TestRunWithFacet",
            json!([{"count": 10, "average.duration": 12.34}]),
            "result.count == 10 and result['average.duration'] < 15.0",
            "result.count != 10 or result['average.duration'] >= 15.0",
            "fail",
            Phase::Successful,
            r#"{"average.duration":12.34,"count":10}"#,
        ),
        (
            "TestRunWithMultipleSelectTerms",
            json!([{"count": 10}]),
            "result.count == 10",
            "result.count != 10",
            "fail",
            Phase::Successful,
            r#"{"count":10}"#,
        ),
        // Argo: Error "no results returned from NRQL query"; rollgate: the noData policy,
        // `error` keeping Argo's phase.
        (
            "TestRunWithEmptyResult",
            json!([{}]),
            "result.count == 10",
            "result.count != 10",
            "error",
            Phase::Error,
            "",
        ),
        (
            "TestRunWithEvaluationError",
            json!([]),
            "result == 10",
            "result != 10",
            "error",
            Phase::Error,
            "",
        ),
        // The failing side of the same conditions.
        (
            "TestRunSuccessfully (failing)",
            json!([{"count": 11}]),
            "result.count == 10",
            "result.count != 10",
            "fail",
            Phase::Failed,
            r#"{"count":11}"#,
        ),
    ];
    for (name, rows, success, failure, no_data, phase, value) in cases {
        let mut b = block("canned");
        b["timeout"] = json!("5s");
        let m = measure(&metric(
            json!({"newrelic": b, "query": rows.to_string(), "noData": no_data}),
            &[("successCondition", success), ("failureCondition", failure)],
        ))
        .await;
        expect(&m, *phase, name);
        assert_eq!(m.value, *value, "{name}: {}", m.message);
        if *phase == Phase::Error {
            assert!(m.message.contains("no data"), "{name}: {}", m.message);
        }
    }
    // TestRunWithEmptyResult under rollgate's own policy: no data is what the spec says.
    let m = measure(&metric(
        json!({"newrelic": block("canned"), "query": "[{}]", "noData": "inconclusive"}),
        &[("successCondition", "result.count == 10")],
    ))
    .await;
    expect(&m, Phase::Inconclusive, "empty result, noData inconclusive");

    // TestNewRelicClient_Query: the account id and the query go as variables, with a timeout.
    let query = format!("{} LIMIT 1", requests("healthy"));
    let _ = measure(&metric(
        json!({"newrelic": block(""), "query": query, "noData": "pass"}),
        &[],
    ))
    .await;
    assert_eq!(
        nr.sent(&query),
        vec![json!({"accountId": ACCOUNT, "query": query, "timeout": 2})]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_key_never_reaches_messages_values_or_metadata() {
    let nr = NewRelic::get();
    let echo = measure(&metric(
        json!({"newrelic": block("echo"), "query": requests("healthy"), "noData": "pass"}),
        &[("successCondition", "result.count > 0")],
    ))
    .await;
    let error = measure(&metric(
        json!({"newrelic": block("echo-error"), "query": requests("healthy"), "noData": "pass"}),
        &[],
    ))
    .await;
    expect(&echo, Phase::Successful, "echo");
    expect(&error, Phase::Error, "echo in an error");
    for m in [&echo, &error] {
        let all = format!("{} {} {:?}", m.message, m.value, m.metadata);
        assert!(!all.contains(API_KEY), "key leaked: {all}");
    }
    // As Argo's value would show it: Go's json.Marshal escapes `<` and `>`.
    assert!(
        echo.value.contains(r#""secret":"\u003credacted\u003e""#),
        "{}",
        echo.value
    );
    assert!(error.message.contains("<redacted>"), "{}", error.message);
    assert!(nr.requests("/echo/graphql") >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_file_is_read_at_each_query() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("key");
    let mut b = block("");
    b["apiKeyFile"] = json!(file);
    let m = metric(
        json!({"newrelic": b, "query": requests("healthy"), "noData": "pass"}),
        &[("successCondition", "result.count > 0")],
    );
    std::fs::write(&file, "NRAK-OLD-KEY").unwrap();
    expect(&measure(&m).await, Phase::Error, "old key");
    std::fs::write(&file, API_KEY).unwrap();
    expect(&measure(&m).await, Phase::Successful, "rotated key");
    std::fs::remove_file(&file).unwrap();
    let gone = measure(&m).await;
    expect(&gone, Phase::Error, "missing key file");
    assert!(
        gone.message.contains("newrelic.apiKeyFile"),
        "{}",
        gone.message
    );
}
