//! The `compare` kind: canary versus stable, judged by the statistics in [`crate::stats`].

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::prometheus::PrometheusConfig;
use crate::spec::{CompareSpec, Metric, NoDataPolicy};

use super::{Engine, EvalOptions, Outcome};

impl Engine {
    /// Measures a `compare` metric.
    pub(super) async fn measure_compare(
        &self,
        _metric: &Metric,
        _spec: &CompareSpec,
        _no_data: NoDataPolicy,
        _config: &PrometheusConfig,
        _opts: &EvalOptions,
        _started_at: DateTime<Utc>,
    ) -> Outcome {
        Outcome::new().error("the compare kind is not available in this build yet".into())
    }
}

/// The queries a compare metric will send.
pub(super) fn describe(_spec: &CompareSpec, _meta: &mut BTreeMap<String, String>) {}
