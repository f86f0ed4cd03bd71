//! The Argo Rollouts metric-provider surface: translates the controller's calls into engine
//! calls. The wire protocol lives in [`crate::goplugin`]; no analysis rule is decided here.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use chrono::Utc;

use crate::engine::{Engine, EvalOptions};
use crate::goplugin::{AnalysisRunRef, ArgoMetric, IntOrString, MetricProviderHandler};
use crate::measurement::Measurement;
use crate::spec::duration::parse_duration;
use crate::spec::{Metric, MetricSpec, SpecError};

/// What `Type()` answers: Argo's own name for plugin providers.
pub(crate) const PROVIDER_TYPE: &str = "RPCPlugin";

/// The overall time one measurement may take, retries included. The controller sets no
/// deadline of its own, and a hung analysis worker would stall every rollout it serves.
pub(crate) const MEASUREMENT_BUDGET: Duration = Duration::from_secs(120);

/// The engine behind the go-plugin transport.
pub(crate) struct RollgatePlugin {
    engine: Arc<Engine>,
}

impl RollgatePlugin {
    /// A plugin that measures with `engine`.
    pub(crate) fn new(engine: Arc<Engine>) -> RollgatePlugin {
        RollgatePlugin { engine }
    }
}

/// How many parsed metrics [`metric_from_argo`] keeps; past it the cache starts over.
const METRIC_CACHE_SIZE: usize = 4096;

/// Builds the engine's metric from the controller's: the single `provider.plugin` entry, whatever
/// its key, plus Argo's conditions and interval. The controller sends the same metric at every
/// interval, and parsing it (PromQL, regexes, conditions) costs more than the whole protocol, so
/// results are kept by the metric's wire form less its name (metrics of many runs share a spec).
pub(crate) fn metric_from_argo(metric: &ArgoMetric) -> Result<Arc<Metric>, SpecError> {
    type Cache = Mutex<HashMap<ArgoMetric, Result<Arc<Metric>, SpecError>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Cache::default);
    let key = ArgoMetric {
        name: String::new(),
        ..metric.clone()
    };
    let cached = cache.lock().ok().and_then(|c| c.get(&key).cloned());
    let parsed = match cached {
        Some(hit) => hit,
        None => {
            let parsed = parse_argo_metric(&key).map(Arc::new);
            if let Ok(mut c) = cache.lock() {
                if c.len() >= METRIC_CACHE_SIZE {
                    c.clear();
                }
                c.insert(key, parsed.clone());
            }
            parsed
        }
    };
    parsed.map(|m| {
        let mut named = Metric::clone(&m);
        named.name.clone_from(&metric.name);
        Arc::new(named)
    })
}

fn parse_argo_metric(metric: &ArgoMetric) -> Result<Metric, SpecError> {
    let mut entries = metric.plugin.iter();
    let (key, config) = match (entries.next(), entries.next()) {
        (Some(entry), None) => entry,
        _ => {
            return Err(SpecError::Conflict {
                path: "provider.plugin".into(),
                message: format!(
                    "expected exactly one plugin entry, found {}",
                    metric.plugin.len()
                ),
            })
        }
    };
    let value: serde_json::Value =
        serde_json::from_slice(config).map_err(|e| SpecError::Syntax {
            source_name: format!("provider.plugin.{key}"),
            message: format!("not valid JSON: {e}"),
        })?;
    let spec = MetricSpec::from_value(&value, &format!("provider.plugin.{key}"))?;
    let duration = |key: &str, text: &str| match text.trim() {
        "" => Ok(None),
        text => parse_duration(text)
            .map(Some)
            .map_err(|why| SpecError::Invalid {
                path: key.into(),
                expected: "a duration like 1m".into(),
                got: why,
            }),
    };
    let interval = duration("interval", &metric.interval)?;
    let mut m = Metric::with_spec(
        &metric.name,
        spec,
        &metric.success_condition,
        &metric.failure_condition,
        interval,
    )?;
    m.initial_delay = duration("initialDelay", &metric.initial_delay)?;
    m.count = match &metric.count {
        Some(IntOrString::Int(n)) => u32::try_from(*n).ok(),
        Some(IntOrString::Str(s)) => s.trim().parse().ok(),
        None => None,
    };
    Ok(m)
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

impl MetricProviderHandler for RollgatePlugin {
    async fn init_plugin(&self) -> Result<(), String> {
        Ok(())
    }

    async fn run(&self, run: AnalysisRunRef, metric: ArgoMetric) -> Measurement {
        tracing::debug!(analysis_run = %run.name, namespace = %run.namespace, metric = %metric.name, "run");
        match metric_from_argo(&metric) {
            Ok(m) => self.engine.measure(&m, &options(&run, &metric)).await,
            Err(e) => invalid_spec(&metric, &e),
        }
    }

    async fn resume(
        &self,
        run: AnalysisRunRef,
        metric: ArgoMetric,
        previous: Measurement,
    ) -> Measurement {
        tracing::debug!(analysis_run = %run.name, metric = %metric.name, "resume");
        match metric_from_argo(&metric) {
            Ok(m) => {
                self.engine
                    .resume(&m, &previous, &options(&run, &metric))
                    .await
            }
            Err(e) => invalid_spec(&metric, &e),
        }
    }

    async fn terminate(
        &self,
        run: AnalysisRunRef,
        metric: ArgoMetric,
        previous: Measurement,
    ) -> Measurement {
        tracing::debug!(analysis_run = %run.name, metric = %metric.name, "terminate");
        self.engine.terminate(&previous)
    }

    async fn garbage_collect(
        &self,
        _run: AnalysisRunRef,
        _metric: ArgoMetric,
        _limit: i64,
    ) -> Result<(), String> {
        // rollgate keeps no per-measurement state outside the measurements themselves.
        Ok(())
    }

    fn type_name(&self) -> String {
        PROVIDER_TYPE.to_string()
    }

    fn get_metadata(&self, metric: ArgoMetric) -> BTreeMap<String, String> {
        match metric_from_argo(&metric) {
            Ok(m) => self.engine.describe(&m),
            Err(e) => BTreeMap::from([("error".to_string(), e.to_string())]),
        }
    }
}
