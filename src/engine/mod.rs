//! The analysis engine: the one place that turns a metric into a measurement.
//!
//! Every surface (Argo plugin, gRPC, Flagger webhook, web provider, dry run) builds a
//! [`Metric`] and asks the engine, with [`Engine::call`] (a [`Call`]: metric, time, deadline,
//! trust, run position) or, for callers that bound their own time, [`Engine::measure`]. The
//! surfaces translate requests and answers; every rule is decided here:
//!
//! | rule | where |
//! |---|---|
//! | deadline → Error (or no answer for a caller that has gone), a call's deadline within a service's budget | `call`: [`Deadline`], [`Engine::call`] |
//! | a spec from the network may not name files on this machine | `call`: [`Trust::admit`] |
//! | which check of its run a call is (AnalysisRun, else the run tracker) | `call`: [`Position`]; [`runs`] |
//! | which Prometheus address a metric uses | [`AddressPolicy`], `Engine::resolve` |
//! | the request guard (`minRequests`) | `guard` |
//! | the no-data policy | `no_data` |
//! | too little data: `onInsufficient`, `wait` | `insufficient`, `wait` |
//! | the kinds: query, compare, fleet, Argo's `prometheus` | `query`, `compare`, `fleet`, `Engine::measure_argo_prometheus` |
//! | Argo's conditions, and conditions overriding a built-in verdict | `verdict` |
//! | Prometheus warnings and infos: once each, in message and metadata | `Outcome::note_warnings` |
//! | several metrics as one answer | [`combine`] |
//! | Argo's AnalysisRun phase rules (backtests) | [`run`] |
//!
//! The measurement's JSON (each surface's key set) is [`crate::measurement::Measurement::to_json`].

mod call;
pub(crate) mod combine;
mod compare;
mod compare_histogram;
pub(crate) mod dashboard;
mod fleet;
mod guard;
mod no_data;
mod open_ended;
mod query;
pub(crate) mod result;
pub mod rules;
pub(crate) mod run;
pub(crate) mod runs;
mod verdict;
mod wait;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::backends::BackendConfig;
use crate::measurement::{Measurement, Phase};
use crate::prometheus::{Backend, PrometheusConfig, PrometheusError, QueryRequest, QueryResponse};
use crate::spec::{Metric, MetricKind, NoDataPolicy, OnInsufficient, Provider};

pub use call::{
    Call, CallError, CredentialDirError, Deadline, Expiry, FileAccess, Limit, Position, Trust,
    ALLOW_CREDENTIAL_DIR,
};
pub use fleet::{FleetPlan, FleetPlanError};
pub use rules::RulePlacement;

/// The environment variable that names a Prometheus address when a spec gives none.
pub const ADDRESS_ENV: &str = "ROLLGATE_PROMETHEUS_ADDRESS";

/// Which Prometheus address a metric uses.
#[derive(Debug, Clone, Default)]
pub struct AddressPolicy {
    /// Replaces every metric's address (dry-run `--prometheus`, to go through a port-forward).
    pub override_address: Option<String>,
    /// Used when a metric names no address (`serve --prometheus`, then `ROLLGATE_PROMETHEUS_ADDRESS`).
    pub default_address: Option<String>,
}

impl AddressPolicy {
    /// A policy whose default comes from `ROLLGATE_PROMETHEUS_ADDRESS` when set.
    pub fn from_env() -> AddressPolicy {
        AddressPolicy {
            override_address: None,
            default_address: std::env::var(ADDRESS_ENV)
                .ok()
                .filter(|a| !a.trim().is_empty()),
        }
    }
}

/// When and how long one measurement may take.
#[derive(Debug, Clone, Default)]
pub struct EvalOptions {
    /// Evaluation time; `None` is now.
    pub at: Option<DateTime<Utc>>,
    /// The overall deadline for every query of the measurement (retries included).
    pub deadline: Option<tokio::time::Instant>,
    /// For a measurement resumed while waiting for traffic: when the wait began.
    pub waiting_since: Option<DateTime<Utc>>,
    /// When the analysis run began measuring, if known (the Argo plugin knows it): places a
    /// repeated check within its run, so the error budget is spent across the run.
    pub run_started_at: Option<DateTime<Utc>>,
    /// How many of this metric's measurements the run already holds that count towards Argo's
    /// `count` (completed, not Error), when the caller sent the run's history: the check's
    /// exact 0-based position. Takes precedence over `run_started_at`.
    pub checks_done: Option<u32>,
    /// Leave out the metadata that only describes the metric (its kind, name and queries, the
    /// check's position): a backtest never reads it, and over 10,000 checks building it was a
    /// measurable share of the run. Verdict-related entries are still written.
    pub skip_metadata: bool,
    /// The spec came from a caller (an inline spec, a remote gRPC call): a spec that names no
    /// address gets the operator's default (or override) address without the credentials in
    /// its userinfo, which belong to the operator's own specs alone.
    pub without_default_credentials: bool,
}

impl EvalOptions {
    /// Options with an overall time budget from now.
    pub fn with_budget(budget: Duration) -> EvalOptions {
        EvalOptions {
            deadline: Some(tokio::time::Instant::now() + budget),
            ..EvalOptions::default()
        }
    }
}

/// Told about every Prometheus query the engine sends: its kind (`instant`, `range`), its
/// outcome (`ok` or [`PrometheusError::kind_label`]) and how long it took.
pub type QueryObserver = Arc<dyn Fn(&'static str, &'static str, Duration) + Send + Sync>;

/// The analysis engine. Cheap to share behind an `Arc`.
pub struct Engine {
    backend: Backend,
    addresses: AddressPolicy,
    observer: Option<QueryObserver>,
    /// Where the calls of surfaces without a run start stand in their runs.
    runs: runs::RunClock,
    /// The e-detectors of the open-ended runs this process serves.
    detectors: open_ended::Detectors,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("backend", &self.backend)
            .field("addresses", &self.addresses)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine that sends queries to `backend`, choosing addresses by `addresses`.
    pub fn new(backend: Backend, addresses: AddressPolicy) -> Engine {
        Engine {
            backend,
            addresses,
            observer: None,
            runs: runs::RunClock::default(),
            detectors: open_ended::Detectors::default(),
        }
    }

    /// The same engine, reporting every query to `observer` (e.g. a service's `/metrics`).
    pub fn with_query_observer(mut self, observer: QueryObserver) -> Engine {
        self.observer = Some(observer);
        self
    }

    /// Sends one query to its target, reporting it to the observer.
    async fn query(
        &self,
        target: Target<'_>,
        request: &QueryRequest,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<QueryResponse, PrometheusError> {
        let Some(observe) = &self.observer else {
            return self.send(target, request, deadline).await;
        };
        let started = std::time::Instant::now();
        let result = self.send(target, request, deadline).await;
        let outcome = result
            .as_ref()
            .map_or_else(PrometheusError::kind_label, |_| "ok");
        observe(request.kind(), outcome, started.elapsed());
        result
    }

    /// Prometheus queries through the backend (live, recorded, replayed or cached); another
    /// backend's through the live client, whose connections and limits they share.
    async fn send(
        &self,
        target: Target<'_>,
        request: &QueryRequest,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<QueryResponse, PrometheusError> {
        match target {
            Target::Prometheus(config) => self.backend.query(config, request, deadline).await,
            Target::Backend(backend) => match self.backend.live_client() {
                Some(client) => backend.query(client, request, deadline).await,
                None => Err(PrometheusError::Config(format!(
                    "recordings (--record, --replay) hold Prometheus answers only; this metric queries {}",
                    backend.name()
                ))),
            },
        }
    }

    /// Sends an instant query at the measurement's time (`opts.at`, else now) within its
    /// deadline.
    async fn instant(
        &self,
        config: Target<'_>,
        query: &str,
        opts: &EvalOptions,
    ) -> Result<QueryResponse, PrometheusError> {
        let request = QueryRequest::Instant {
            query: run_clocked(query, opts),
            time: opts.at,
        };
        self.query(config, &request, opts.deadline).await
    }

    /// The query backend (to save a recording after a dry run).
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// Measures one metric now (or at `opts.at`). Never panics on input; never returns
    /// Successful for a fault: every failure to judge is an Error measurement.
    pub async fn measure(&self, metric: &Metric, opts: &EvalOptions) -> Measurement {
        let started_at = Utc::now();
        let outcome = match &metric.provider {
            // A condition that does not compile errors this metric only, as in Argo.
            _ if metric.broken_condition.is_some() => Outcome::new().error(
                metric
                    .broken_condition
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default(),
            ),
            Provider::Rollgate(spec) => {
                let resolved = match &spec.backend {
                    Some(backend) => Ok(Resolved::Backend(backend)),
                    None => self
                        .resolve_with(&spec.prometheus, opts.without_default_credentials)
                        .map(Resolved::Prometheus),
                };
                match resolved {
                    Err(message) => Outcome::new().error(message),
                    Ok(resolved) => {
                        let cx = Ctx {
                            metric,
                            no_data: spec.no_data,
                            config: resolved.target(),
                            opts,
                            started_at,
                        };
                        // Compare and fleet measurements are boxed: their futures are twice a
                        // query's, and inline they would size every measurement's future (which
                        // the surfaces move, a memcpy each time) by the largest kind.
                        let mut out = match &spec.kind {
                            MetricKind::Query(q) => self.measure_query(&cx, q).await,
                            MetricKind::Compare(c) => Box::pin(self.measure_compare(&cx, c)).await,
                            MetricKind::Fleet(f) => Box::pin(self.measure_fleet(&cx, f)).await,
                        };
                        if !opts.skip_metadata {
                            out.metadata.insert("kind".into(), spec.kind.name().into());
                        }
                        out
                    }
                }
            }
            Provider::Prometheus { config, query } => {
                match self.resolve_with(config, opts.without_default_credentials) {
                    Err(message) => Outcome::new().error(message),
                    Ok(config) => {
                        self.measure_argo_prometheus(metric, &config, query, opts)
                            .await
                    }
                }
            }
            Provider::Unsupported(name) => {
                Outcome::new().error(format!("provider {name} is not one rollgate can evaluate"))
            }
        };
        let mut m = outcome.into_measurement(started_at);
        if !opts.skip_metadata {
            m.metadata.insert("metric".into(), metric.name.clone());
        }
        m
    }

    /// Argo's `Resume`: re-measures a measurement that waits for traffic once its `resumeAt`
    /// has come; returns any other measurement unchanged (still in flight, or finished).
    pub async fn resume(
        &self,
        metric: &Metric,
        previous: &Measurement,
        opts: &EvalOptions,
    ) -> Measurement {
        let in_flight = previous.phase == Phase::Running && previous.finished_at.is_none();
        let due = previous.resume_at.is_none_or(|at| at <= Utc::now());
        if !in_flight || !due {
            return previous.clone();
        }
        let opts = EvalOptions {
            waiting_since: Some(previous.started_at),
            ..opts.clone()
        };
        let mut m = self.measure(metric, &opts).await;
        m.started_at = previous.started_at;
        m
    }

    /// Argo's `Terminate`: finishes an in-flight measurement. No verdict was reached, so it is
    /// Inconclusive with a message saying so; a finished one is returned unchanged.
    pub fn terminate(&self, previous: &Measurement) -> Measurement {
        if previous.finished_at.is_some() {
            return previous.clone();
        }
        let mut m = previous.clone();
        m.phase = Phase::Inconclusive;
        m.message = format!(
            "terminated before a verdict was reached (last state: {})",
            previous.message
        );
        m.finished_at = Some(Utc::now());
        m.resume_at = None;
        m
    }

    /// What a metric will query, for `GetMetadata` and dry-run output: kind and resolved queries.
    pub fn describe(&self, metric: &Metric) -> BTreeMap<String, String> {
        let mut meta = BTreeMap::new();
        match &metric.provider {
            Provider::Rollgate(spec) => {
                meta.insert("kind".into(), spec.kind.name().into());
                match &spec.kind {
                    MetricKind::Query(q) => {
                        meta.insert("query".into(), q.query.clone());
                        if let Some(g) = &q.min_requests {
                            meta.insert("minRequests.query".into(), g.query.clone());
                            meta.insert("minRequests.count".into(), result::format_count(g.count));
                        }
                    }
                    MetricKind::Compare(c) => compare::describe(c, &mut meta),
                    MetricKind::Fleet(f) => fleet::describe(f, &mut meta),
                }
                meta.insert("noData".into(), spec.no_data.as_str().into());
            }
            Provider::Prometheus { query, .. } => {
                meta.insert("kind".into(), "prometheus".into());
                meta.insert("query".into(), query.clone());
            }
            Provider::Unsupported(name) => {
                meta.insert("kind".into(), format!("unsupported ({name})"));
            }
        }
        meta
    }

    /// The address a config will use after the override and fallback rules: the config itself
    /// when its own address stands (no copy per measurement), else a copy with the address set.
    fn resolve<'c>(
        &self,
        config: &'c PrometheusConfig,
    ) -> Result<std::borrow::Cow<'c, PrometheusConfig>, String> {
        self.resolve_with(config, false)
    }

    /// [`Self::resolve`], with the operator's address stripped of its userinfo when
    /// `without_credentials` (a caller's spec, see [`EvalOptions`]).
    fn resolve_with<'c>(
        &self,
        config: &'c PrometheusConfig,
        without_credentials: bool,
    ) -> Result<std::borrow::Cow<'c, PrometheusConfig>, String> {
        use std::borrow::Cow;
        let with = |address: &str| {
            let address = if without_credentials {
                crate::prometheus::redact_url(address)
            } else {
                address.to_string()
            };
            Cow::Owned(PrometheusConfig {
                address,
                ..config.clone()
            })
        };
        match (&self.addresses.override_address, &self.addresses.default_address) {
            (Some(address), _) if *address == config.address => Ok(Cow::Borrowed(config)),
            (Some(address), _) => Ok(with(address)),
            _ if !config.address.is_empty() => Ok(Cow::Borrowed(config)),
            (None, Some(address)) => Ok(with(address)),
            (None, None) => Err(format!(
                "no Prometheus address: set prometheus.address in the spec, pass --prometheus, or set {ADDRESS_ENV}"
            )),
        }
    }

    /// Argo's built-in `prometheus` provider, with Argo's semantics and no rollgate rules.
    async fn measure_argo_prometheus(
        &self,
        metric: &Metric,
        config: &PrometheusConfig,
        query: &str,
        opts: &EvalOptions,
    ) -> Outcome {
        let mut out = Outcome::new();
        out.metadata.insert("kind".into(), "prometheus".into());
        out.metadata.insert("query".into(), query.to_string());
        let request = QueryRequest::Instant {
            query: query.to_string(),
            time: opts.at,
        };
        match self
            .query(Target::Prometheus(config), &request, opts.deadline)
            .await
        {
            Err(e) => out.error(format!("query failed: {e}")),
            Ok(mut response) => {
                out.note_warnings(&response);
                result::histograms_as_zero(&mut response);
                out.value = result::argo_value_string(&response.data);
                verdict::by_conditions(out, metric, &response, "")
            }
        }
    }
}

/// `query` with its run clock filled for this check. Without a run start the tag is left for
/// the caller's up-front check ([`run_clock_missing`]) to have reported.
pub(crate) fn run_clocked(query: &str, opts: &EvalOptions) -> String {
    let at = opts.at.unwrap_or_else(Utc::now);
    match crate::spec::run_clock::fill_run_clock(query, opts.run_started_at, at) {
        Ok(q) => q.into_owned(),
        Err(_) => query.to_string(),
    }
}

/// The error of a check whose queries use the run clock when its run start is unknown.
pub(crate) fn run_clock_missing<'a>(
    queries: impl IntoIterator<Item = &'a str>,
    opts: &EvalOptions,
) -> Option<String> {
    if opts.run_started_at.is_some() {
        return None;
    }
    queries
        .into_iter()
        .any(crate::spec::run_clock::uses_run_clock)
        .then(|| crate::spec::run_clock::RunClockError::NoRunStart.to_string())
}

/// Where a measurement's queries go: a Prometheus-compatible API (its resolved config), or
/// another backend.
#[derive(Debug, Clone, Copy)]
enum Target<'a> {
    Prometheus(&'a PrometheusConfig),
    Backend(&'a BackendConfig),
}

impl Target<'_> {
    /// The Prometheus config, for what only PromQL can do (fleet, open-ended windows: the
    /// spec refuses them with another backend); else the error saying so.
    fn prometheus(&self) -> Result<&PrometheusConfig, String> {
        match self {
            Target::Prometheus(config) => Ok(config),
            Target::Backend(backend) => Err(format!(
                "this analysis needs a Prometheus-compatible API; the metric queries {}",
                backend.name()
            )),
        }
    }
}

/// A metric's target once the address rules have been applied.
// One per measurement, on the stack for its length: boxing the config would cost an allocation
// per check for nothing.
#[allow(clippy::large_enum_variant)]
enum Resolved<'a> {
    Prometheus(std::borrow::Cow<'a, PrometheusConfig>),
    Backend(&'a BackendConfig),
}

impl Resolved<'_> {
    fn target(&self) -> Target<'_> {
        match self {
            Resolved::Prometheus(config) => Target::Prometheus(config),
            Resolved::Backend(backend) => Target::Backend(backend),
        }
    }
}

/// What every kind's measurement reads: the metric, its no-data policy, where its queries go,
/// the options and when the measurement started. One struct instead of six arguments.
struct Ctx<'a> {
    metric: &'a Metric,
    no_data: NoDataPolicy,
    config: Target<'a>,
    opts: &'a EvalOptions,
    started_at: DateTime<Utc>,
}

/// Too little data to judge (below `minRequests` / `minSamples`): the spec's `onInsufficient`
/// decides, and `wait` asks Argo to come back within the metric's interval. `why` says what was
/// seen and what was needed.
fn insufficient(out: Outcome, on: OnInsufficient, why: &str, cx: &Ctx<'_>) -> Outcome {
    let (metric, opts, now) = (cx.metric, cx.opts, cx.started_at);
    let fixed = |phase: Phase| {
        format!(
            "too little traffic: {why}; onInsufficient: {} makes this {phase}",
            on.as_str()
        )
    };
    match on {
        OnInsufficient::Inconclusive => out.finish(Phase::Inconclusive, fixed(Phase::Inconclusive)),
        OnInsufficient::Fail => out.finish(Phase::Failed, fixed(Phase::Failed)),
        OnInsufficient::Pass => out.finish(Phase::Successful, fixed(Phase::Successful)),
        OnInsufficient::Wait => match wait::decide(metric.interval, opts.waiting_since, now) {
            wait::WaitDecision::WaitUntil(resume_at) => {
                let mut out = out;
                out.resume_at = Some(resume_at);
                let when = resume_at.format("%H:%M:%S UTC");
                out.finish(Phase::Running, format!("waiting for traffic: {why}; asking again at {when}"))
            }
            wait::WaitDecision::GiveUp(waited) => out.finish(
                Phase::Inconclusive,
                format!("too little traffic after waiting {waited}: {why}; the wait is bounded by the metric's interval"),
            ),
        },
    }
}

/// A measurement being built: the pieces before times are stamped.
#[derive(Debug, Default)]
struct Outcome {
    phase: Option<Phase>,
    message: String,
    value: String,
    metadata: BTreeMap<String, String>,
    resume_at: Option<DateTime<Utc>>,
    warnings: Vec<String>,
    /// Info-level server notes: kept in metadata, never in the verdict.
    infos: Vec<String>,
}

impl Outcome {
    fn new() -> Outcome {
        Outcome::default()
    }

    fn finish(mut self, phase: Phase, message: String) -> Outcome {
        self.phase = Some(phase);
        self.message = message;
        self
    }

    fn error(self, message: String) -> Outcome {
        self.finish(Phase::Error, message)
    }

    /// Keeps a response's warnings and infos once each: the queries of one measurement often
    /// go to the same partial store and carry the same text (the one warnings policy of every
    /// kind).
    fn note_warnings(&mut self, response: &QueryResponse) {
        self.note_warning_texts(&response.warnings);
        self.note_infos(response);
    }

    /// Keeps warning texts once each.
    fn note_warning_texts(&mut self, warnings: &[String]) {
        for w in warnings {
            if !self.warnings.contains(w) {
                self.warnings.push(w.clone());
            }
        }
    }

    /// Keeps a response's infos once each (every query of a run may carry the same note).
    fn note_infos(&mut self, response: &QueryResponse) {
        for info in &response.infos {
            if !self.infos.contains(info) {
                self.infos.push(info.clone());
            }
        }
    }

    fn into_measurement(mut self, started_at: DateTime<Utc>) -> Measurement {
        let phase = self.phase.unwrap_or(Phase::Error);
        if !self.infos.is_empty() {
            self.metadata.insert("infos".into(), self.infos.join("; "));
        }
        if !self.warnings.is_empty() {
            self.metadata
                .insert("warnings".into(), self.warnings.join("; "));
            self.message = format!(
                "{} (Prometheus warned: {})",
                self.message,
                self.warnings.join("; ")
            );
        }
        let running = phase == Phase::Running;
        Measurement {
            phase,
            message: self.message,
            value: self.value,
            metadata: self.metadata,
            started_at,
            finished_at: (!running).then(Utc::now),
            resume_at: if running { self.resume_at } else { None },
        }
    }
}
