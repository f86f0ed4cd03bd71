//! Argo Rollouts' metric-provider domain, shared by every transport that speaks it: the
//! controller's metric and run as rollgate keeps them ([`ArgoMetric`], [`AnalysisRunRef`]), the
//! one parser from Argo's metric to the engine's (`metric`), and the [`ArgoProvider`] (engine +
//! trust + time budget + its cache of parsed metrics) that the net/rpc plugin
//! (`crate::goplugin`) and the gRPC service (`crate::grpc`) only adapt to.
//!
//! No transport is imported here, so both can depend on it without depending on each other.

mod metric;
mod provider;

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Utc};

use crate::measurement::Phase;

pub(crate) use provider::{ArgoError, ArgoProvider, MEASUREMENT_BUDGET, PROVIDER_TYPE};

/// The part of an AnalysisRun rollgate needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AnalysisRunRef {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    /// `status.startedAt`: when the run began measuring (for the position of a repeated check).
    pub started_at: Option<DateTime<Utc>>,
    /// `status.metricResults`, when the caller sent the run's status: per metric name, how many
    /// of its measurements Argo has completed without Error (see [`AnalysisRunRef::checks_done`]).
    pub checks_done: Option<BTreeMap<String, u32>>,
}

impl AnalysisRunRef {
    /// How many measurements of `metric` the run already holds that count towards Argo's
    /// `count`: `None` when the caller sent no run history, `Some(0)` before the first.
    ///
    /// Argo Rollouts (analysis/analysis.go, v1.9.1) increments `MetricResult.Count` for every
    /// completed Successful, Failed or Inconclusive measurement, stops the metric when `Count`
    /// reaches `count`, retries an Error without counting it, and schedules the next
    /// measurement `interval` after the previous one finished. So `Count` is this check's
    /// 0-based position; wall time drifts ahead of it.
    pub(crate) fn checks_done(&self, metric: &str) -> Option<u32> {
        self.checks_done
            .as_ref()
            .map(|done| done.get(metric).copied().unwrap_or(0))
    }
}

/// Argo's `MetricResult.Count` and its listed measurements, reduced to one count: the larger of
/// `count` and the completed, non-Error measurements still listed (the list is trimmed to the
/// measurement-history limit, 10 by default, so it can only undercount; a caller that fills in
/// only the list still gets its length).
pub(crate) fn completed_checks(count: i64, phases: impl IntoIterator<Item = Phase>) -> u32 {
    let listed = phases
        .into_iter()
        .filter(|p| matches!(p, Phase::Successful | Phase::Failed | Phase::Inconclusive))
        .count();
    let count = u32::try_from(count.max(0)).unwrap_or(u32::MAX);
    count.max(u32::try_from(listed).unwrap_or(u32::MAX))
}

/// Kubernetes' `intstr.IntOrString`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum IntOrString {
    /// A number (the wire holds an int32; wider callers may send more, judged by
    /// the one rule of `count` in `crate::spec`).
    Int(i64),
    Str(String),
}

/// Argo's Metric as sent by the controller, reduced to what rollgate uses.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct ArgoMetric {
    pub name: String,
    pub interval: String,
    pub initial_delay: String,
    pub count: Option<IntOrString>,
    pub success_condition: String,
    pub failure_condition: String,
    pub failure_limit: Option<IntOrString>,
    pub inconclusive_limit: Option<IntOrString>,
    pub consecutive_error_limit: Option<IntOrString>,
    pub consecutive_success_limit: Option<IntOrString>,
    /// provider.plugin: plugin name -> raw JSON config
    pub plugin: BTreeMap<String, Vec<u8>>,
}

impl fmt::Debug for ArgoMetric {
    /// The plugin config may hold substituted secrets: only its keys and sizes are shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plugin: BTreeMap<&str, String> = self
            .plugin
            .iter()
            .map(|(k, v)| (k.as_str(), format!("<{} bytes>", v.len())))
            .collect();
        f.debug_struct("ArgoMetric")
            .field("name", &self.name)
            .field("interval", &self.interval)
            .field("initial_delay", &self.initial_delay)
            .field("count", &self.count)
            .field("success_condition", &self.success_condition)
            .field("failure_condition", &self.failure_condition)
            .field("failure_limit", &self.failure_limit)
            .field("inconclusive_limit", &self.inconclusive_limit)
            .field("consecutive_error_limit", &self.consecutive_error_limit)
            .field("consecutive_success_limit", &self.consecutive_success_limit)
            .field("plugin", &plugin)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_plugin_config() {
        let m = ArgoMetric {
            plugin: BTreeMap::from([(
                "argoproj-labs/rollgate".to_string(),
                br#"{"token":"s3cret"}"#.to_vec(),
            )]),
            ..ArgoMetric::default()
        };
        let s = format!("{m:?}");
        assert!(!s.contains("s3cret"), "{s}");
        assert!(s.contains("argoproj-labs/rollgate"));
    }
}
