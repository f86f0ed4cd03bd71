//! Operations: `/healthz`, `/readyz`, and `/metrics` in the OpenMetrics text format.
//!
//! The registry is the `prometheus-client` crate's (the Prometheus project's Rust client):
//! its families and histograms are lock-light per update, and its encoder writes valid
//! exposition text, so the escaping and the format are not ours to get right.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::AppState;
use crate::measurement::Phase;
use crate::prometheus::{PrometheusConfig, QueryRequest};

/// Upper bounds (seconds) of the latency histograms' buckets.
const BUCKETS: [f64; 12] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// How long `/readyz` waits for Prometheus when asked to check it.
const READY_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The content type of the exposition.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestLabels {
    endpoint: &'static str,
    status: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct VerdictLabels {
    surface: &'static str,
    phase: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct KindPhaseLabels {
    kind: &'static str,
    phase: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct QueryLabels {
    kind: &'static str,
    outcome: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct VersionLabels {
    version: &'static str,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

fn histograms<L: Clone + std::hash::Hash + Eq>() -> Histograms<L> {
    Family::new_with_constructor(histogram)
}

/// The server's metrics. Cheap to update from every request.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    request_latency: Histograms<RequestLabels>,
    in_flight: Gauge,
    verdicts: Family<VerdictLabels, Counter>,
    measurements: Family<KindPhaseLabels, Counter>,
    measurement_latency: Histograms<KindLabels>,
    queries: Family<QueryLabels, Counter>,
    query_latency: Histograms<QueryLabels>,
    templates_loaded: Gauge,
    reloads: Family<ResultLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        let m = Metrics {
            registry: Registry::default(),
            requests: Family::default(),
            request_latency: histograms(),
            in_flight: Gauge::default(),
            verdicts: Family::default(),
            measurements: Family::default(),
            measurement_latency: histograms(),
            queries: Family::default(),
            query_latency: histograms(),
            templates_loaded: Gauge::default(),
            reloads: Family::default(),
        };
        let build_info = Family::<VersionLabels, Gauge>::default();
        build_info
            .get_or_create(&VersionLabels {
                version: env!("CARGO_PKG_VERSION"),
            })
            .set(1);
        // Both results show from the start, as 0, so that a rate() of errors has a series.
        for result in ["ok", "error"] {
            let _ = m.reloads.get_or_create(&ResultLabels { result });
        }
        let mut registry = Registry::default();
        // Counters are registered without `_total`: the encoder adds it.
        let r = &mut registry;
        r.register("rollgate_build_info", "Build information", build_info);
        r.register(
            "rollgate_http_requests",
            "HTTP requests answered, by endpoint and status code",
            m.requests.clone(),
        );
        r.register(
            "rollgate_http_request_duration_seconds",
            "Time from the request's arrival to its answer, by endpoint and status code",
            m.request_latency.clone(),
        );
        r.register(
            "rollgate_http_requests_in_flight",
            "HTTP requests being served",
            m.in_flight.clone(),
        );
        r.register(
            "rollgate_verdicts",
            "Overall verdicts answered, by surface and phase",
            m.verdicts.clone(),
        );
        r.register(
            "rollgate_measurements",
            "Metric measurements, by metric kind and phase",
            m.measurements.clone(),
        );
        r.register(
            "rollgate_measurement_duration_seconds",
            "Time to measure one metric (its Prometheus queries included), by metric kind",
            m.measurement_latency.clone(),
        );
        r.register(
            "rollgate_prometheus_queries",
            "Prometheus queries, by query kind and outcome (ok or the error's kind)",
            m.queries.clone(),
        );
        r.register(
            "rollgate_prometheus_query_duration_seconds",
            "Prometheus query latency, retries included, by query kind and outcome",
            m.query_latency.clone(),
        );
        r.register(
            "rollgate_templates_loaded",
            "Templates in use",
            m.templates_loaded.clone(),
        );
        r.register(
            "rollgate_template_reloads",
            "Template reloads (SIGHUP), by result; a failed reload keeps the templates in use",
            m.reloads.clone(),
        );
        Metrics { registry, ..m }
    }
}

/// Decrements the in-flight gauge when the request ends, however it ends.
pub(crate) struct InFlight(Arc<AppState>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.metrics.in_flight.dec();
    }
}

impl Metrics {
    /// Counts a request as in flight until the guard is dropped.
    pub(crate) fn start_request(state: &Arc<AppState>) -> InFlight {
        state.metrics.in_flight.inc();
        InFlight(state.clone())
    }

    /// One finished HTTP request.
    pub(crate) fn observe_request(&self, endpoint: &'static str, status: u16, latency: Duration) {
        let labels = RequestLabels { endpoint, status };
        self.requests.get_or_create(&labels).inc();
        self.request_latency
            .get_or_create(&labels)
            .observe(latency.as_secs_f64());
    }

    /// The overall verdict one surface answered.
    pub(crate) fn observe_verdict(&self, surface: &'static str, phase: Phase) {
        let labels = VerdictLabels {
            surface,
            phase: phase.as_str(),
        };
        self.verdicts.get_or_create(&labels).inc();
    }

    /// One metric's measurement.
    pub(crate) fn observe_measurement(&self, kind: &'static str, phase: Phase, latency: Duration) {
        let labels = KindPhaseLabels {
            kind,
            phase: phase.as_str(),
        };
        self.measurements.get_or_create(&labels).inc();
        self.measurement_latency
            .get_or_create(&KindLabels { kind })
            .observe(latency.as_secs_f64());
    }

    /// One Prometheus query: its kind (`instant`, `range`), its outcome (`ok`, or the error's
    /// kind: `connect`, `timeout`, `http`, `api`, `malformed`, ...) and how long it took.
    ///
    /// Fed by a query observer in the Prometheus backend, when one is installed.
    pub(crate) fn observe_query(
        &self,
        kind: &'static str,
        outcome: &'static str,
        latency: Duration,
    ) {
        let labels = QueryLabels { kind, outcome };
        self.queries.get_or_create(&labels).inc();
        self.query_latency
            .get_or_create(&labels)
            .observe(latency.as_secs_f64());
    }

    /// A template (re)load and the number of templates now in use.
    pub(crate) fn observe_reload(&self, ok: bool, loaded: usize) {
        let result = if ok { "ok" } else { "error" };
        self.reloads.get_or_create(&ResultLabels { result }).inc();
        self.set_templates_loaded(loaded);
    }

    /// Sets the number of templates in use (at start-up).
    pub(crate) fn set_templates_loaded(&self, loaded: usize) {
        self.templates_loaded
            .set(i64::try_from(loaded).unwrap_or(i64::MAX));
    }

    /// The exposition text.
    pub(crate) fn render(&self) -> String {
        let mut out = String::with_capacity(8192);
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// `GET /healthz`: the process is up and serving.
pub(crate) async fn healthz() -> Response {
    (StatusCode::OK, "ok\n").into_response()
}

/// `GET /readyz`: ready when not shutting down, with templates loaded (when `--templates` is
/// given) and, with `--readyz-prometheus`, the default Prometheus answering a trivial query.
pub(crate) async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    if state.is_shutting_down() {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response();
    }
    let templates = state.templates.current();
    if state.templates.dir().is_some() && templates.is_empty() {
        return (StatusCode::SERVICE_UNAVAILABLE, "no templates loaded\n").into_response();
    }
    if !templates.lint_errors.is_empty() {
        let mut body = format!(
            "not ready: {} in the templates (`rollgate lint` shows the same):\n",
            plural(templates.lint_errors.len(), "lint error", "lint errors")
        );
        for e in &templates.lint_errors {
            body.push_str("  ");
            body.push_str(e);
            body.push('\n');
        }
        return (StatusCode::SERVICE_UNAVAILABLE, body).into_response();
    }
    if let Some(address) = &state.settings.readyz_prometheus {
        let config = PrometheusConfig {
            retries: 0,
            timeout: READY_PROBE_TIMEOUT,
            ..PrometheusConfig::new(address.clone())
        };
        let request = QueryRequest::instant("vector(1)", None);
        let deadline = tokio::time::Instant::now() + READY_PROBE_TIMEOUT;
        if let Err(e) = state
            .engine
            .backend()
            .query(&config, &request, Some(deadline))
            .await
        {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("Prometheus is not answering: {e}\n"),
            )
                .into_response();
        }
    }
    (
        StatusCode::OK,
        format!(
            "ready: {} loaded\n",
            plural(templates.len(), "template", "templates")
        ),
    )
        .into_response()
}

/// "1 template", "2 templates".
fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `GET /metrics`: the Prometheus text exposition.
pub(crate) async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    (
        [(header::CONTENT_TYPE, CONTENT_TYPE)],
        state.metrics.render(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let m = Metrics::default();
        for seconds in [0.003, 0.2, 30.0] {
            m.observe_query("instant", "ok", Duration::from_secs_f64(seconds));
        }
        let text = m.render();
        let series = |le: &str| {
            let name = format!(
                "rollgate_prometheus_query_duration_seconds_bucket{{le=\"{le}\",kind=\"instant\",outcome=\"ok\"}} "
            );
            text.lines()
                .find_map(|l| l.strip_prefix(&name))
                .unwrap_or_else(|| panic!("{name} in {text}"))
                .to_string()
        };
        assert_eq!(series("0.001"), "0");
        assert_eq!(series("0.005"), "1");
        assert_eq!(series("0.25"), "2");
        assert_eq!(series("10.0"), "2", "30 s is only in +Inf");
        assert_eq!(series("+Inf"), "3");
        assert!(text.contains(
            "rollgate_prometheus_query_duration_seconds_sum{kind=\"instant\",outcome=\"ok\"} 30.203"
        ));
    }

    #[test]
    fn render_is_valid_exposition_text() {
        let m = Metrics::default();
        m.observe_request("/flagger/v1/check", 412, Duration::from_millis(7));
        m.observe_verdict("flagger_check", Phase::Failed);
        m.observe_measurement("query", Phase::Failed, Duration::from_millis(5));
        m.observe_reload(false, 3);
        m.observe_query("instant", "timeout", Duration::from_secs(2));
        let text = m.render();
        for series in [
            "rollgate_prometheus_queries_total{kind=\"instant\",outcome=\"timeout\"} 1",
            "rollgate_http_requests_total{endpoint=\"/flagger/v1/check\",status=\"412\"} 1",
            // The crate writes `le` first; Prometheus reads labels in any order.
            "rollgate_http_request_duration_seconds_bucket{le=\"0.01\",endpoint=\"/flagger/v1/check\",status=\"412\"} 1",
            "rollgate_verdicts_total{surface=\"flagger_check\",phase=\"Failed\"} 1",
            "rollgate_measurements_total{kind=\"query\",phase=\"Failed\"} 1",
            "rollgate_template_reloads_total{result=\"error\"} 1",
            "rollgate_template_reloads_total{result=\"ok\"} 0",
            "rollgate_templates_loaded 3",
            "rollgate_http_requests_in_flight 0",
            concat!("rollgate_build_info{version=\"", env!("CARGO_PKG_VERSION"), "\"} 1"),
        ] {
            assert!(text.lines().any(|l| l == series), "{series} in {text}");
        }
        assert_eq!(text.lines().last(), Some("# EOF"));
        for line in text.lines() {
            assert!(
                line.starts_with("# HELP ") || line.starts_with("# TYPE ") || line == "# EOF" || {
                    let (series, value) = line.rsplit_once(' ').unwrap();
                    value.parse::<f64>().is_ok() && series.starts_with("rollgate_")
                },
                "{line}"
            );
        }
    }
}
