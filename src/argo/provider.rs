//! The Argo metric provider: what each of Argo's metric-provider calls does, over one engine.
//! Transports (net/rpc in `crate::goplugin`, gRPC in `crate::grpc`) decode their requests into
//! [`ArgoMetric`] and [`AnalysisRunRef`] and call it; no analysis rule is decided here.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;

use super::{metric_from_argo, AnalysisRunRef, ArgoMetric};
use crate::engine::{Engine, EvalOptions, Trust};
use crate::measurement::Measurement;
use crate::spec::SpecError;

/// What `Type()` answers: Argo's own name for plugin providers.
pub(crate) const PROVIDER_TYPE: &str = "RPCPlugin";

/// The overall time one measurement may take, retries included. The controller sets no
/// deadline of its own, and a hung analysis worker would stall every rollout it serves.
pub(crate) const MEASUREMENT_BUDGET: Duration = Duration::from_secs(120);

/// Argo's metric-provider calls over an engine (the metric cache is [`metric_from_argo`]'s).
pub(crate) struct ArgoProvider {
    engine: Arc<Engine>,
    /// The plugin's trust policy: which credential files a template may have read.
    trust: Trust,
}

impl ArgoProvider {
    /// A provider that measures with `engine` at `trust` (the engine's policy decides).
    pub(crate) fn new(engine: Arc<Engine>, trust: Trust) -> ArgoProvider {
        ArgoProvider { engine, trust }
    }

    /// The refusal of a metric this provider's trust does not admit, as an Error measurement.
    fn refused(&self, m: &crate::spec::Metric) -> Option<Measurement> {
        self.trust
            .admit(m)
            .err()
            .map(|e| Measurement::error(e.to_string(), Utc::now()))
    }

    /// `Run`: measures `metric` as the check of `run` it is.
    pub(crate) async fn run(&self, run: &AnalysisRunRef, metric: &ArgoMetric) -> Measurement {
        match metric_from_argo(metric) {
            Ok(m) => match self.refused(&m) {
                Some(refusal) => refusal,
                None => self.engine.measure(&m, &options(run, metric)).await,
            },
            Err(e) => invalid_spec(metric, &e),
        }
    }

    /// `Resume`: continues the in-flight measurement `previous`.
    pub(crate) async fn resume(
        &self,
        run: &AnalysisRunRef,
        metric: &ArgoMetric,
        previous: &Measurement,
    ) -> Measurement {
        match metric_from_argo(metric) {
            Ok(m) => match self.refused(&m) {
                Some(refusal) => refusal,
                None => {
                    self.engine
                        .resume(&m, previous, &options(run, metric))
                        .await
                }
            },
            Err(e) => invalid_spec(metric, &e),
        }
    }

    /// `Terminate`: ends the in-flight measurement `previous`.
    pub(crate) fn terminate(&self, previous: &Measurement) -> Measurement {
        self.engine.terminate(previous)
    }

    /// `GetMetadata`: the metric's description, or the reason its spec is invalid.
    pub(crate) fn metadata(&self, metric: &ArgoMetric) -> BTreeMap<String, String> {
        match metric_from_argo(metric) {
            Ok(m) => self.engine.describe(&m),
            Err(e) => BTreeMap::from([("error".to_string(), e.to_string())]),
        }
    }
}

/// The engine's options for a call about `metric` in `run`: the time budget, and the run's
/// history of this metric (so a repeated check knows its exact place in the run; where the
/// run began, for callers that send no history).
fn options(run: &AnalysisRunRef, metric: &ArgoMetric) -> EvalOptions {
    EvalOptions {
        run_started_at: run.started_at,
        checks_done: run.checks_done(&metric.name),
        ..EvalOptions::with_budget(MEASUREMENT_BUDGET)
    }
}

fn invalid_spec(metric: &ArgoMetric, e: &SpecError) -> Measurement {
    Measurement::error(
        format!("metric {:?} has an invalid rollgate spec: {e}", metric.name),
        Utc::now(),
    )
}
