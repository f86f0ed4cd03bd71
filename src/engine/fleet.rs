//! The `fleet` kind: fail while any target still runs the old version or has gone silent.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::prometheus::PrometheusConfig;
use crate::spec::{FleetSpec, Metric, NoDataPolicy};

use super::{Engine, EvalOptions, Outcome};

impl Engine {
    /// Measures a `fleet` metric.
    pub(super) async fn measure_fleet(
        &self,
        _metric: &Metric,
        _spec: &FleetSpec,
        _no_data: NoDataPolicy,
        _config: &PrometheusConfig,
        _opts: &EvalOptions,
        _started_at: DateTime<Utc>,
    ) -> Outcome {
        Outcome::new().error("the fleet kind is not available in this build yet".into())
    }
}

/// The queries a fleet metric will send, for `GetMetadata` and dry-run output.
pub(super) fn describe(_spec: &FleetSpec, _meta: &mut BTreeMap<String, String>) {}
