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
use rollgate::engine::{AddressPolicy, Engine, EvalOptions};
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
