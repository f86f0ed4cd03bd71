//! The `compare` metric kind against a real Prometheus with generated canary/stable pairs.

// Test code may unwrap, panic and cast; its helpers are `pub` for the modules sharing them.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss,
    unreachable_pub
)]

mod support;

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use rollgate::engine::{AddressPolicy, Call, Deadline, Engine, EvalOptions, Position, Trust};
use rollgate::measurement::{Measurement, Phase};
use rollgate::prometheus::{Backend, Client};
use rollgate::spec::Metric;
use serde_json::{json, Value};
use support::prom::shared;
use support::scenarios::{
    Latency, Traffic, CMP_6X_CANARY, CMP_6X_STABLE, CMP_BAD_CANARY, CMP_BAD_STABLE,
    CMP_HEALTHY_CANARY, CMP_HEALTHY_STABLE, CMP_LOW_CANARY, CMP_LOW_STABLE, CMP_NOCANARY_STABLE,
    LAT_SAME_CANARY, LAT_SAME_STABLE, LAT_SHIFT_CANARY, LAT_SHIFT_STABLE,
};
use support::stub::{Mode, Stub, WARNING_MESSAGE};

fn at_base() -> EvalOptions {
    let base: DateTime<Utc> = Utc.timestamp_opt(shared().base, 0).single().unwrap();
    EvalOptions {
        at: Some(base),
        ..EvalOptions::with_budget(Duration::from_secs(30))
    }
}

fn metric(compare: Value, conditions: &[(&str, &str)]) -> Metric {
    let spec = json!({"prometheus": {"address": shared().url}, "compare": compare, "noData": "inconclusive"});
    let mut m = json!({"name": "cmp", "provider": {"plugin": {"rollgate/analysis": spec}}});
    for (k, v) in conditions {
        m[*k] = json!(v);
    }
    Metric::from_value(&m, "").unwrap()
}

fn ratio(canary: &Traffic, stable: &Traffic) -> Value {
    json!({
        "canary": {"bad": canary.bad_query("10m"), "total": canary.total_query("10m")},
        "stable": {"bad": stable.bad_query("10m"), "total": stable.total_query("10m")},
        "maxIncrease": 0.2, "margin": 0.001, "confidence": 0.95, "minRequests": 500
    })
}

fn distribution(canary: &Latency, stable: &Latency) -> Value {
    json!({
        "canary": canary.quantile_query(0.99, "1m"), "stable": stable.quantile_query(0.99, "1m"),
        "window": "30m", "step": "1m", "direction": "increase", "maxIncrease": 0.1,
        "confidence": 0.98, "minSamples": 20
    })
}

async fn measure(m: &Metric) -> Measurement {
    Engine::new(Backend::Live(Client::new()), AddressPolicy::default())
        .measure(m, &at_base())
        .await
}

fn value(m: &Measurement) -> Value {
    serde_json::from_str(&m.value).unwrap_or_else(|e| panic!("value is JSON ({e}): {m:?}"))
}

#[tokio::test]
async fn healthy_pair_is_successful() {
    let m = measure(&metric(
        ratio(&CMP_HEALTHY_CANARY, &CMP_HEALTHY_STABLE),
        &[],
    ))
    .await;
    assert_eq!(m.phase, Phase::Successful, "{m:?}");
    let v = value(&m);
    assert_eq!(v["canary"]["total"], 24000);
    assert_eq!(v["canary"]["bad"], 120);
    assert_eq!(v["stable"]["total"], 26400);
    assert_eq!(m.metadata["kind"], "compare");
    assert!(m.message.starts_with("canary error rate"), "{}", m.message);
}

#[tokio::test]
async fn a_worse_canary_fails_with_the_reason() {
    for (canary, stable) in [
        (&CMP_BAD_CANARY, &CMP_BAD_STABLE),
        (&CMP_6X_CANARY, &CMP_6X_STABLE),
    ] {
        let m = measure(&metric(ratio(canary, stable), &[])).await;
        assert_eq!(m.phase, Phase::Failed, "{}: {m:?}", canary.service);
        assert!(m.message.contains("beyond"), "{}", m.message);
        let v = value(&m);
        assert!(v["pValue"].as_f64().unwrap() < 0.01, "{v}");
    }
}

#[tokio::test]
async fn conditions_on_the_json_value_override_the_verdict() {
    let m = measure(&metric(
        ratio(&CMP_BAD_CANARY, &CMP_BAD_STABLE),
        &[("successCondition", "result.canary.rate < 0.05")],
    ))
    .await;
    assert_eq!(m.phase, Phase::Successful, "{m:?}");
    assert_eq!(m.metadata["verdict"], "Failed");
}

#[tokio::test]
async fn a_canary_with_no_series_is_no_data() {
    let absent = Traffic {
        track: "canary",
        ..CMP_NOCANARY_STABLE
    };
    let m = measure(&metric(ratio(&absent, &CMP_NOCANARY_STABLE), &[])).await;
    assert_eq!(m.phase, Phase::Inconclusive, "{m:?}");
    assert!(
        m.message.starts_with("no data: compare.canary.total"),
        "{}",
        m.message
    );
}

#[tokio::test]
async fn twenty_canary_requests_are_never_failed() {
    let m = measure(&metric(ratio(&CMP_LOW_CANARY, &CMP_LOW_STABLE), &[])).await;
    assert_eq!(m.phase, Phase::Inconclusive, "{m:?}");
    assert!(
        m.message
            .contains("20 canary and 24,000 stable requests seen, 500 needed"),
        "{}",
        m.message
    );
}

#[tokio::test]
async fn a_latency_shift_of_40_percent_fails_and_equal_latency_passes() {
    let m = measure(&metric(
        distribution(&LAT_SHIFT_CANARY, &LAT_SHIFT_STABLE),
        &[],
    ))
    .await;
    assert_eq!(m.phase, Phase::Failed, "{m:?}");
    let v = value(&m);
    assert_eq!(v["classification"], "high", "{v}");
    assert_eq!(v["canary"]["count"], 31, "{v}");
    let m = measure(&metric(
        distribution(&LAT_SAME_CANARY, &LAT_SAME_STABLE),
        &[],
    ))
    .await;
    assert_eq!(m.phase, Phase::Successful, "{m:?}");
}

#[tokio::test]
async fn invalid_compare_specs_name_their_key() {
    let spec = |compare: Value| {
        let s = json!({"compare": compare, "noData": "fail"});
        rollgate::spec::MetricSpec::from_value(&s, "")
            .unwrap_err()
            .to_string()
    };
    let mut c = ratio(&CMP_HEALTHY_CANARY, &CMP_HEALTHY_STABLE);
    c["maxIncrease"] = json!("20%");
    assert_eq!(
        spec(c),
        "compare.maxIncrease: expected a number >= 0, got \"20%\""
    );
    let mut c = ratio(&CMP_HEALTHY_CANARY, &CMP_HEALTHY_STABLE);
    c["stable"] = json!({"bad": "up"});
    assert!(spec(c).starts_with("compare.stable.total: is required"));
    let mut c = distribution(&LAT_SAME_CANARY, &LAT_SAME_STABLE);
    c["direction"] = json!("up");
    assert!(spec(c).starts_with("compare.direction: expected one of increase, decrease, either"));
    let mut c = ratio(&CMP_HEALTHY_CANARY, &CMP_HEALTHY_STABLE);
    c["windows"] = json!("growing");
    let e = spec(c);
    assert!(
        e.starts_with("compare.windows: expected sliding (") && e.contains("got \"growing\""),
        "{e}"
    );
}

/// A partial store warns on every query: the ratio form sends four and the distribution form
/// two, and the warning is reported once (the engine's one warnings policy; it was repeated
/// once per query before).
#[tokio::test]
async fn a_warning_every_query_repeats_is_reported_once() {
    let stub = Stub::start(Mode::Warnings);
    for compare in [
        ratio(&CMP_HEALTHY_CANARY, &CMP_HEALTHY_STABLE),
        distribution(&LAT_SAME_CANARY, &LAT_SAME_STABLE),
    ] {
        let spec = json!({"prometheus": {"address": stub.url}, "compare": compare, "noData": "inconclusive"});
        let m = Metric::from_value(
            &json!({"name": "cmp", "provider": {"plugin": {"rollgate/analysis": spec}}}),
            "",
        )
        .unwrap();
        let before = stub.requests();
        let out = Engine::new(Backend::Live(Client::new()), AddressPolicy::default())
            .measure(&m, &EvalOptions::with_budget(Duration::from_secs(10)))
            .await;
        assert!(stub.requests() - before >= 2, "{out:?}");
        assert_eq!(out.metadata["warnings"], WARNING_MESSAGE, "{out:?}");
        assert_eq!(
            out.message.matches(WARNING_MESSAGE).count(),
            1,
            "{}",
            out.message
        );
    }
}

/// The engine's run tracker, as gRPC `Analyze` uses it (no AnalysisRun, evaluation times given):
/// calls with the same run key are the checks of one run, placed by their evaluation times.
#[tokio::test]
async fn tracked_calls_of_one_run_are_its_checks() {
    let spec = json!({"prometheus": {"address": shared().url}, "compare": ratio(&CMP_HEALTHY_CANARY, &CMP_HEALTHY_STABLE), "noData": "inconclusive"});
    let m = Metric::from_value(
        &json!({"name": "cmp", "interval": "1m", "count": 4, "provider": {"plugin": {"rollgate/analysis": spec}}}),
        "",
    )
    .unwrap();
    let engine = Engine::new(Backend::Live(Client::new()), AddressPolicy::default());
    let base: DateTime<Utc> = Utc.timestamp_opt(shared().base, 0).single().unwrap();
    let check = |run: &'static str, minutes: i64| {
        let call = Call {
            metric: &m,
            at: Some(base + chrono::Duration::minutes(minutes)),
            deadline: Deadline::for_call(None, Duration::from_secs(30)),
            trust: Trust::Network,
            position: Position::Tracked {
                run: run.into(),
                metric: "cmp".into(),
            },
            previous: None,
        };
        let engine = &engine;
        async move {
            // The position is decided before the queries, whatever the data at that time.
            let out = engine.call(call).await.unwrap();
            out.metadata["check"].clone()
        }
    };
    assert_eq!(check("a", 0).await, "1 of 4");
    assert_eq!(check("a", 1).await, "2 of 4");
    assert_eq!(check("b", 1).await, "1 of 4");
    assert_eq!(check("a", 2).await, "3 of 4");
    // Silent for more than 3 intervals: a new run.
    assert_eq!(check("a", 6).await, "1 of 4");
    assert_eq!(check("b", 2).await, "2 of 4");
}
