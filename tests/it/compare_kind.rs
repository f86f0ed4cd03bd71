//! The `compare` metric kind against a real Prometheus with generated canary/stable pairs.

use crate::support;

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
    LATENCY_BUCKETS, LAT_SAME_CANARY, LAT_SAME_STABLE, LAT_SHIFT_CANARY, LAT_SHIFT_STABLE,
    OVERFLOW_SERVICE,
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
    // The value states the spec's guard and a readable alpha, as a reviewer would check them.
    assert_eq!(v["minRequests"], 500, "{v}");
    assert_eq!(v["alpha"], 0.05, "{v}");
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

/// The engine's run tracker, as gRPC `Analyze` uses it (no AnalysisRun): calls with the same
/// run key are the checks of one run, placed by the time since the run's first call.
#[tokio::test]
async fn tracked_calls_of_one_run_are_its_checks() {
    let spec = json!({"prometheus": {"address": shared().url}, "compare": ratio(&CMP_HEALTHY_CANARY, &CMP_HEALTHY_STABLE), "noData": "inconclusive"});
    let m = Metric::from_value(
        &json!({"name": "cmp", "interval": "1s", "count": 4, "provider": {"plugin": {"rollgate/analysis": spec}}}),
        "",
    )
    .unwrap();
    let engine = Engine::new(Backend::Live(Client::new()), AddressPolicy::default());
    let check = |run: &'static str| {
        let call = Call {
            metric: &m,
            at: None,
            deadline: Deadline::for_call(None, Duration::from_secs(30)),
            trust: Trust::NETWORK,
            position: Position::Tracked {
                run: run.into(),
                metric: "cmp".into(),
            },
            previous: None,
        };
        let engine = &engine;
        async move {
            // The position is decided before the queries, whatever the data says.
            let out = engine.call(call).await.unwrap();
            out.metadata["check"].clone()
        }
    };
    let pause = || tokio::time::sleep(Duration::from_millis(1_200));
    assert_eq!(check("a").await, "1 of 4");
    pause().await;
    assert_eq!(check("a").await, "2 of 4");
    assert_eq!(check("b").await, "1 of 4");
    pause().await;
    assert_eq!(check("a").await, "3 of 4");
    assert_eq!(check("b").await, "2 of 4");
    // Silent for more than 3 intervals: a new run.
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    assert_eq!(check("a").await, "1 of 4");
}

/// `sum by (le) (increase(http_request_duration_seconds_bucket{service, track}[10m]))`.
fn buckets_query(service: &str, track: &str) -> String {
    format!("sum by (le) (increase(http_request_duration_seconds_bucket{{service=\"{service}\",track=\"{track}\"}}[10m]))")
}

fn histogram(canary: &Latency, stable: &Latency) -> Value {
    json!({
        "histogram": {
            "canary": buckets_query(canary.service, canary.track),
            "stable": buckets_query(stable.service, stable.track),
        },
        "maxIncrease": 0.1, "confidence": 0.95, "minRequests": 1000
    })
}

/// The histogram form on promtool-backfilled classic histograms (tests/support/scenarios.rs:
/// exponential latencies, 40 req/s per side, ±15 % jitter of the mean per 15 s step; canary
/// 40 % slower on lat-shift, equal on lat-same), 24,000 requests per side in the 10m window.
#[tokio::test]
async fn histogram_form_fails_a_forty_percent_slower_canary_from_its_requests() {
    let m = measure(&metric(
        histogram(&LAT_SHIFT_CANARY, &LAT_SHIFT_STABLE),
        &[],
    ))
    .await;
    assert_eq!(m.phase, Phase::Failed, "{m:?}");
    let v = value(&m);
    assert_eq!(v["test"], "rank", "{v}");
    assert_eq!(v["buckets"], LATENCY_BUCKETS.len() + 1, "{v}");
    let requests = v["canary"]["requests"].as_u64().unwrap();
    assert!((23_000..=25_000).contains(&requests), "{v}");
    // Exponential means 70 vs 50 ms: the latency ratio is 1.4 at every quantile.
    let ratio = v["rank"]["ratioEstimate"].as_f64().unwrap();
    assert!((1.3..1.5).contains(&ratio), "{v}");
    assert!(v["rank"]["ratioLower"].as_f64().unwrap() > 1.1, "{v}");
    assert!(v["pValue"].as_f64().unwrap() < 1e-6, "{v}");
    assert!(
        m.message.starts_with("canary latency median"),
        "{}",
        m.message
    );
    assert!(
        m.message.contains("beyond the 10 % tolerance"),
        "{}",
        m.message
    );
    assert_eq!(
        m.metadata["compare.histogram.canary"],
        buckets_query("lat-shift", "canary")
    );

    let m = measure(&metric(histogram(&LAT_SAME_CANARY, &LAT_SAME_STABLE), &[])).await;
    assert_eq!(m.phase, Phase::Successful, "{m:?}");
    let v = value(&m);
    let ratio = v["rank"]["ratioEstimate"].as_f64().unwrap();
    assert!((0.95..1.05).contains(&ratio), "{v}");
}

#[tokio::test]
async fn histogram_threshold_form_counts_requests_slower_than_a_bucket_bound() {
    let mut c = histogram(&LAT_SHIFT_CANARY, &LAT_SHIFT_STABLE);
    c["threshold"] = json!(0.25);
    c["maxIncrease"] = json!(0.2);
    let m = measure(&metric(c, &[])).await;
    assert_eq!(m.phase, Phase::Failed, "{m:?}");
    let v = value(&m);
    assert_eq!(v["test"], "threshold", "{v}");
    // P(latency > 0.25 s): exp(-0.25/0.07) = 2.8 % on the canary, exp(-5) = 0.67 % on stable.
    let rate = v["slower"]["canary"]["rate"].as_f64().unwrap();
    assert!((0.02..0.04).contains(&rate), "{v}");
    assert!(
        m.message.contains("share of requests slower than 0.25s"),
        "{}",
        m.message
    );

    let mut c = histogram(&LAT_SAME_CANARY, &LAT_SAME_STABLE);
    c["threshold"] = json!(0.25);
    assert_eq!(measure(&metric(c, &[])).await.phase, Phase::Successful);

    let mut c = histogram(&LAT_SAME_CANARY, &LAT_SAME_STABLE);
    c["threshold"] = json!(0.3333);
    let m = measure(&metric(c, &[])).await;
    assert_eq!(m.phase, Phase::Error, "{m:?}");
    assert!(
        m.message.starts_with("compare.threshold: 0.3333 is not a bucket bound (le) of the histogram; bounds: 0.025, 0.05"),
        "{}",
        m.message
    );
}

#[tokio::test]
async fn histogram_form_names_what_is_wrong_with_the_buckets() {
    // Different bucket layouts: the overflow histogram uses Prometheus' default buckets.
    let mut c = histogram(&LAT_SAME_CANARY, &LAT_SAME_STABLE);
    c["histogram"]["canary"] = json!(buckets_query(OVERFLOW_SERVICE, "canary"));
    let m = measure(&metric(c, &[])).await;
    assert_eq!(m.phase, Phase::Error, "{m:?}");
    assert!(
        m.message.starts_with("compare.histogram: the canary and stable histograms have different buckets: le 0.005, 0.01"),
        "{}",
        m.message
    );
    // The `le` label summed away.
    let mut c = histogram(&LAT_SAME_CANARY, &LAT_SAME_STABLE);
    c["histogram"]["stable"] = json!(format!("sum({})", buckets_query("lat-same", "stable")));
    let m = measure(&metric(c, &[])).await;
    assert_eq!(m.phase, Phase::Error, "{m:?}");
    assert_eq!(
        m.message,
        "compare.histogram.stable: stable: a series has no `le` label; aggregate with `sum by (le) (...)`"
    );
    // No series: the noData policy decides.
    let mut c = histogram(&LAT_SAME_CANARY, &LAT_SAME_STABLE);
    c["histogram"]["canary"] = json!(buckets_query("no-such-service", "canary"));
    let m = measure(&metric(c, &[])).await;
    assert_eq!(m.phase, Phase::Inconclusive, "{m:?}");
    assert!(
        m.message.starts_with("no data: compare.histogram.canary"),
        "{}",
        m.message
    );
    // Too little traffic: onInsufficient decides.
    let mut c = histogram(&LAT_SAME_CANARY, &LAT_SAME_STABLE);
    c["minRequests"] = json!(1_000_000);
    let m = measure(&metric(c, &[])).await;
    assert_eq!(m.phase, Phase::Inconclusive, "{m:?}");
    assert!(m.message.contains("needed on each side"), "{}", m.message);
    // The +Inf bucket is counted: 5 % of the overflow histogram's requests are above 10 s.
    let q = buckets_query(OVERFLOW_SERVICE, "canary");
    let c = json!({"histogram": {"canary": q, "stable": q}, "threshold": 10.0, "minRequests": 100});
    let m = measure(&metric(c, &[])).await;
    assert_eq!(m.phase, Phase::Successful, "{m:?}");
    let rate = value(&m)["slower"]["canary"]["rate"].as_f64().unwrap();
    assert!((rate - 0.05).abs() < 0.002, "{m:?}");
}

#[test]
fn invalid_histogram_specs_name_their_key() {
    let spec = |compare: Value| {
        let s = json!({"compare": compare, "noData": "fail"});
        rollgate::spec::MetricSpec::from_value(&s, "")
            .unwrap_err()
            .to_string()
    };
    let mut c = histogram(&LAT_SAME_CANARY, &LAT_SAME_STABLE);
    c["canary"] = json!("up");
    assert!(spec(c).starts_with("compare.canary: expected no canary/stable beside histogram"));
    let mut c = histogram(&LAT_SAME_CANARY, &LAT_SAME_STABLE);
    c["margin"] = json!(0.01);
    assert!(spec(c).starts_with("compare.margin: expected margin only with threshold"));
    let mut c = histogram(&LAT_SAME_CANARY, &LAT_SAME_STABLE);
    c["histogram"] = json!({"canary": "up"});
    assert!(spec(c).starts_with("compare.histogram.stable: is required"));
    let mut c = histogram(&LAT_SAME_CANARY, &LAT_SAME_STABLE);
    c["threshold"] = json!("0.5s");
    assert!(spec(c).starts_with("compare.threshold: expected a number >= 0"));
    let mut c = histogram(&LAT_SAME_CANARY, &LAT_SAME_STABLE);
    c["window"] = json!("30m");
    let e = spec(c);
    assert!(e.starts_with("compare.window: unknown key"), "{e}");
}

/// The shipped examples/latency-histogram.yaml against the real Prometheus: the 40 % slower
/// canary fails both metrics, the equal one passes both.
#[tokio::test]
async fn the_shipped_histogram_template_fails_the_slow_canary_and_passes_the_equal_one() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/latency-histogram.yaml"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let templates = rollgate::spec::Template::parse_all(&text, path).unwrap();
    for (service, expected) in [
        ("lat-shift", Phase::Failed),
        ("lat-same", Phase::Successful),
    ] {
        let args = [
            ("service".to_string(), service.to_string()),
            ("prometheus".to_string(), shared().url.clone()),
        ];
        let metrics = templates[0].metrics(&args).unwrap();
        assert_eq!(metrics.len(), 2);
        for m in &metrics {
            let got = measure(m).await;
            assert_eq!(got.phase, expected, "{service} {}: {got:?}", m.name);
        }
    }
}

/// The ratio test's cost grows with the counts (its supremum over stable's rate is searched
/// when the canary is beyond the tolerance): with a hundred billion requests a side it runs for
/// a large part of a second, in the ratio form and in the histogram form's threshold test. It
/// must not hold the async worker meanwhile: serve's other requests share that worker.
#[tokio::test]
async fn the_ratio_test_on_huge_counts_leaves_the_async_worker_free() {
    // 2 % of requests bad (slower than 0.25 s) on the canary, 1 % on stable.
    let buckets = |below: &str| {
        format!(
            r#"label_replace(vector({below}), "le", "0.25", "", "") or label_replace(vector(1e11), "le", "+Inf", "", "")"#
        )
    };
    let forms = [
        json!({
            "canary": {"bad": "vector(2e9)", "total": "vector(1e11)"},
            "stable": {"bad": "vector(1e9)", "total": "vector(1e11)"},
            "maxIncrease": 0.2, "margin": 0.001, "confidence": 0.95, "minRequests": 500
        }),
        json!({
            "histogram": {"canary": buckets("9.8e10"), "stable": buckets("9.9e10")},
            "threshold": 0.25, "maxIncrease": 0.2, "confidence": 0.95, "minRequests": 500
        }),
    ];
    for form in forms {
        let (measured, longest_gap, took) = measure_beside_a_ticker(&metric(form, &[])).await;
        assert_eq!(measured.phase, Phase::Failed, "{measured:?}");
        assert!(
            longest_gap < Duration::from_millis(100),
            "the worker was held for {longest_gap:?} of the check's {took:?}: {}",
            measured.message
        );
    }
}

/// Measures `m` on this test's single-threaded runtime beside a task ticking every 5 ms; returns
/// the measurement, the longest time the ticking task could not run, and the check's time.
async fn measure_beside_a_ticker(m: &Metric) -> (Measurement, Duration, Duration) {
    let started = std::time::Instant::now();
    let mut measuring = std::pin::pin!(measure(m));
    let mut longest_gap = Duration::ZERO;
    let mut last_tick = std::time::Instant::now();
    let measured = loop {
        tokio::select! {
            measured = &mut measuring => break measured,
            () = tokio::time::sleep(Duration::from_millis(5)) => {
                longest_gap = longest_gap.max(last_tick.elapsed());
                last_tick = std::time::Instant::now();
            }
        }
    };
    // A worker held by the check's last poll shows as the time since the last tick.
    longest_gap = longest_gap.max(last_tick.elapsed());
    (measured, longest_gap, started.elapsed())
}
