//! Prometheus API answers (instant, range, scalar, errors, warnings) through the parser and
//! through the engine's two query kinds (rollgate's `query` and Argo's built-in `prometheus`)
//! on a Replay backend. Input: one byte choosing the HTTP status, then the body.
//! Invariant: a measurement is Successful only when the status is 200, the body parses, and
//! its data holds the value the success condition needs (`result[0] == 4242.5`).
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use rollgate::engine::{AddressPolicy, Engine, EvalOptions};
use rollgate::measurement::Phase;
use rollgate::prometheus::{parse_response, Backend, QueryData, Replay};
use rollgate::spec::{Metric, Template};

const QUERY: &str = "sum(rate(errors[5m]))";
const WANT: f64 = 4242.5;

const TEMPLATE: &str = r#"
apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: fuzz}
spec:
  metrics:
    - name: rollgate-query
      successCondition: result[0] == 4242.5
      provider:
        plugin:
          rollgate/analysis:
            prometheus: {address: "http://127.0.0.1:9"}
            query: sum(rate(errors[5m]))
            noData: fail
    - name: builtin
      successCondition: result[0] == 4242.5
      provider:
        prometheus:
          address: http://127.0.0.1:9
          query: sum(rate(errors[5m]))
"#;

fn setup() -> &'static (tokio::runtime::Runtime, Vec<Metric>) {
    static S: OnceLock<(tokio::runtime::Runtime, Vec<Metric>)> = OnceLock::new();
    S.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let t = Template::parse_all(TEMPLATE, "fuzz.yaml").expect("the fuzz template");
        let metrics = t[0].metrics(&[]).expect("its metrics");
        (rt, metrics)
    })
}

/// Argo's `result[0]`: the first scalar, vector or (flattened) matrix value.
fn first_value(d: &QueryData) -> Option<f64> {
    match d {
        QueryData::Scalar(s) => Some(s.value),
        QueryData::Vector(v) => v.first().map(|s| s.sample.value),
        QueryData::Matrix(m) => m
            .iter()
            .flat_map(|s| s.samples.iter())
            .next()
            .map(|s| s.value),
    }
}

fuzz_target!(|data: &[u8]| {
    fuzz_support::caught_panics_are_not_crashes();
    let Some((&sel, body)) = data.split_first() else {
        return;
    };
    let status: u16 = [200, 200, 200, 400, 422, 500, 503][usize::from(sel) % 7];
    let body = String::from_utf8_lossy(body);
    let parsed = parse_response(body.as_bytes());
    let data_says_so = status == 200
        && parsed
            .as_ref()
            .ok()
            .and_then(|r| first_value(&r.data))
            .is_some_and(|v| v == WANT);
    let recording = serde_json::json!({
        "version": 1,
        "entries": [{"kind": "instant", "query": QUERY, "time": null, "status": status, "body": body}],
    });
    let Ok(replay) = Replay::from_json(&recording.to_string()) else {
        return;
    };
    let (rt, metrics) = setup();
    let engine = Engine::new(Backend::Replay(replay), AddressPolicy::default());
    for metric in metrics {
        let m = rt.block_on(engine.measure(metric, &EvalOptions::default()));
        if m.phase == Phase::Successful {
            assert!(
                data_says_so,
                "{}: Successful from status {status} and a body whose data does not hold {WANT}: {:?}",
                metric.name, m
            );
        }
    }
});
