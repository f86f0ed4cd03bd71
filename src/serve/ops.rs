//! Operations: `/healthz`, `/readyz`, and `/metrics` in the Prometheus text exposition format.
//!
//! The registry is written by hand rather than with a metrics crate: a handful of counters and
//! histograms with small, fixed label sets, exposed in the plain text format (version 0.0.4),
//! is less code than adapting a general registry, and adds no dependency to a static binary.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use super::AppState;
use crate::measurement::Phase;
use crate::prometheus::{PrometheusConfig, QueryRequest};

/// Upper bounds (seconds) of the latency histograms' buckets.
const BUCKETS: [f64; 12] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// How long `/readyz` waits for Prometheus when asked to check it.
const READY_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// A latency histogram with the fixed buckets.
#[derive(Debug, Clone, Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        for (bound, count) in BUCKETS.iter().zip(self.counts.iter_mut()) {
            if seconds <= *bound {
                *count += 1;
            }
        }
        self.sum += seconds;
        self.count += 1;
    }
}

#[derive(Debug, Default)]
struct Inner {
    /// (endpoint, status) → latency.
    requests: BTreeMap<(&'static str, u16), Histogram>,
    /// (surface, phase) → answered verdicts.
    verdicts: BTreeMap<(&'static str, Phase), u64>,
    /// (metric kind, phase) → measurements.
    measurements: BTreeMap<(&'static str, Phase), u64>,
    /// metric kind → measurement latency.
    measurement_latency: BTreeMap<&'static str, Histogram>,
    /// "ok" / "error" → template reloads.
    reloads: BTreeMap<&'static str, u64>,
    /// (query kind, outcome) → Prometheus query latency (fed by [`Metrics::observe_query`]).
    queries: BTreeMap<(&'static str, &'static str), Histogram>,
    templates_loaded: u64,
}

/// The server's metrics. Cheap to update from every request.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    inner: Mutex<Inner>,
    in_flight: AtomicI64,
}

/// Decrements the in-flight gauge when the request ends, however it ends.
pub(crate) struct InFlight(Arc<AppState>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.metrics.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Metrics {
    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        match self.inner.lock() {
            Ok(mut guard) => f(&mut guard),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// Counts a request as in flight until the guard is dropped.
    pub(crate) fn start_request(state: &Arc<AppState>) -> InFlight {
        state.metrics.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(state.clone())
    }

    /// One finished HTTP request.
    pub(crate) fn observe_request(&self, endpoint: &'static str, status: u16, latency: Duration) {
        self.with(|m| {
            m.requests
                .entry((endpoint, status))
                .or_default()
                .observe(latency.as_secs_f64())
        });
    }

    /// The overall verdict one surface answered.
    pub(crate) fn observe_verdict(&self, surface: &'static str, phase: Phase) {
        self.with(|m| *m.verdicts.entry((surface, phase)).or_default() += 1);
    }

    /// One metric's measurement.
    pub(crate) fn observe_measurement(&self, kind: &'static str, phase: Phase, latency: Duration) {
        self.with(|m| {
            *m.measurements.entry((kind, phase)).or_default() += 1;
            m.measurement_latency
                .entry(kind)
                .or_default()
                .observe(latency.as_secs_f64());
        });
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
        self.with(|m| {
            m.queries
                .entry((kind, outcome))
                .or_default()
                .observe(latency.as_secs_f64())
        });
    }

    /// A template (re)load and the number of templates now in use.
    pub(crate) fn observe_reload(&self, ok: bool, loaded: usize) {
        self.with(|m| {
            *m.reloads
                .entry(if ok { "ok" } else { "error" })
                .or_default() += 1;
            m.templates_loaded = loaded as u64;
        });
    }

    /// Sets the number of templates in use (at start-up).
    pub(crate) fn set_templates_loaded(&self, loaded: usize) {
        self.with(|m| m.templates_loaded = loaded as u64);
    }

    /// The exposition text.
    pub(crate) fn render(&self) -> String {
        let in_flight = self.in_flight.load(Ordering::Relaxed);
        self.with(|m| {
            let mut out = String::with_capacity(4096);
            header_lines(
                &mut out,
                "rollgate_build_info",
                "gauge",
                "Build information.",
            );
            let _ = writeln!(
                out,
                "rollgate_build_info{{version=\"{}\"}} 1",
                escape(env!("CARGO_PKG_VERSION"))
            );

            header_lines(
                &mut out,
                "rollgate_http_requests_total",
                "counter",
                "HTTP requests answered, by endpoint and status code.",
            );
            for ((endpoint, status), h) in &m.requests {
                let _ = writeln!(
                    out,
                    "rollgate_http_requests_total{{endpoint=\"{}\",status=\"{status}\"}} {}",
                    escape(endpoint),
                    h.count
                );
            }
            header_lines(
                &mut out,
                "rollgate_http_request_duration_seconds",
                "histogram",
                "Time from the request's arrival to its answer, by endpoint and status code.",
            );
            for ((endpoint, status), h) in &m.requests {
                let labels = format!("endpoint=\"{}\",status=\"{status}\"", escape(endpoint));
                histogram_lines(
                    &mut out,
                    "rollgate_http_request_duration_seconds",
                    &labels,
                    h,
                );
            }
            header_lines(
                &mut out,
                "rollgate_http_requests_in_flight",
                "gauge",
                "HTTP requests being served.",
            );
            let _ = writeln!(out, "rollgate_http_requests_in_flight {in_flight}");

            header_lines(
                &mut out,
                "rollgate_verdicts_total",
                "counter",
                "Overall verdicts answered, by surface and phase.",
            );
            for ((surface, phase), n) in &m.verdicts {
                let _ = writeln!(
                    out,
                    "rollgate_verdicts_total{{surface=\"{surface}\",phase=\"{phase}\"}} {n}"
                );
            }
            header_lines(
                &mut out,
                "rollgate_measurements_total",
                "counter",
                "Metric measurements, by metric kind and phase.",
            );
            for ((kind, phase), n) in &m.measurements {
                let _ = writeln!(
                    out,
                    "rollgate_measurements_total{{kind=\"{}\",phase=\"{phase}\"}} {n}",
                    escape(kind)
                );
            }
            header_lines(
                &mut out,
                "rollgate_measurement_duration_seconds",
                "histogram",
                "Time to measure one metric (its Prometheus queries included), by metric kind.",
            );
            for (kind, h) in &m.measurement_latency {
                let labels = format!("kind=\"{}\"", escape(kind));
                histogram_lines(
                    &mut out,
                    "rollgate_measurement_duration_seconds",
                    &labels,
                    h,
                );
            }

            header_lines(
                &mut out,
                "rollgate_prometheus_queries_total",
                "counter",
                "Prometheus queries, by query kind and outcome (ok or the error's kind).",
            );
            for ((kind, outcome), h) in &m.queries {
                let _ = writeln!(
                    out,
                    "rollgate_prometheus_queries_total{{kind=\"{}\",outcome=\"{}\"}} {}",
                    escape(kind),
                    escape(outcome),
                    h.count
                );
            }
            header_lines(
                &mut out,
                "rollgate_prometheus_query_duration_seconds",
                "histogram",
                "Prometheus query latency, retries included, by query kind and outcome.",
            );
            for ((kind, outcome), h) in &m.queries {
                let labels = format!("kind=\"{}\",outcome=\"{}\"", escape(kind), escape(outcome));
                histogram_lines(
                    &mut out,
                    "rollgate_prometheus_query_duration_seconds",
                    &labels,
                    h,
                );
            }

            header_lines(
                &mut out,
                "rollgate_templates_loaded",
                "gauge",
                "Templates in use.",
            );
            let _ = writeln!(out, "rollgate_templates_loaded {}", m.templates_loaded);
            header_lines(
                &mut out,
                "rollgate_template_reloads_total",
                "counter",
                "Template reloads (SIGHUP), by result; a failed reload keeps the templates in use.",
            );
            for result in ["ok", "error"] {
                let n = m.reloads.get(result).copied().unwrap_or(0);
                let _ = writeln!(
                    out,
                    "rollgate_template_reloads_total{{result=\"{result}\"}} {n}"
                );
            }
            out
        })
    }
}

fn header_lines(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn histogram_lines(out: &mut String, name: &str, labels: &str, h: &Histogram) {
    for (bound, count) in BUCKETS.iter().zip(h.counts.iter()) {
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound}\"}} {count}");
    }
    let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", h.count);
    let _ = writeln!(out, "{name}_sum{{{labels}}} {}", h.sum);
    let _ = writeln!(out, "{name}_count{{{labels}}} {}", h.count);
}

/// Escapes a label value for the text format.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
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
        format!("ready: {} templates loaded\n", templates.len()),
    )
        .into_response()
}

/// `GET /metrics`: the Prometheus text exposition.
pub(crate) async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let mut h = Histogram::default();
        h.observe(0.003);
        h.observe(0.2);
        h.observe(30.0);
        assert_eq!(h.count, 3);
        assert_eq!(h.counts[0], 0); // <= 0.001
        assert_eq!(h.counts[1], 1); // <= 0.005
        assert_eq!(h.counts[6], 2); // <= 0.25
        assert_eq!(h.counts[BUCKETS.len() - 1], 2); // 30 s is only in +Inf
        assert!((h.sum - 30.203).abs() < 1e-9);
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
        assert!(text
            .contains("rollgate_prometheus_queries_total{kind=\"instant\",outcome=\"timeout\"} 1"));
        assert!(text.contains(
            "rollgate_http_requests_total{endpoint=\"/flagger/v1/check\",status=\"412\"} 1"
        ));
        assert!(text.contains(
            "rollgate_http_request_duration_seconds_bucket{endpoint=\"/flagger/v1/check\",status=\"412\",le=\"0.01\"} 1"
        ));
        assert!(
            text.contains("rollgate_verdicts_total{surface=\"flagger_check\",phase=\"Failed\"} 1")
        );
        assert!(text.contains("rollgate_measurements_total{kind=\"query\",phase=\"Failed\"} 1"));
        assert!(text.contains("rollgate_template_reloads_total{result=\"error\"} 1"));
        assert!(text.contains("rollgate_templates_loaded 3"));
        for line in text.lines() {
            assert!(
                line.starts_with("# HELP ") || line.starts_with("# TYPE ") || {
                    let (series, value) = line.rsplit_once(' ').unwrap();
                    value.parse::<f64>().is_ok() && series.starts_with("rollgate_")
                },
                "{line}"
            );
        }
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
