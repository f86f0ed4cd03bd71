//! The net/rpc `Plugin` service's handler for rollgate: each of Argo's methods delegates to
//! [`ArgoProvider`], the transport-free provider both plugin protocols share. net/rpc's
//! measurement calls have no error reply the controller records, so a call the provider
//! refuses is answered with an Error measurement saying why.

use std::collections::BTreeMap;

use chrono::Utc;

use super::MetricProviderHandler;
use crate::argo::{AnalysisRunRef, ArgoError, ArgoMetric, ArgoProvider, PROVIDER_TYPE};
use crate::measurement::Measurement;

/// The measurement net/rpc answers with: the provider's, or an Error saying why there is none.
fn measurement(answer: Result<Measurement, ArgoError>) -> Measurement {
    answer.unwrap_or_else(|e| Measurement::error(e.to_string(), Utc::now()))
}

impl MetricProviderHandler for ArgoProvider {
    async fn init_plugin(&self) -> Result<(), String> {
        Ok(())
    }

    async fn run(&self, run: AnalysisRunRef, metric: ArgoMetric) -> Measurement {
        tracing::debug!(analysis_run = %run.name, namespace = %run.namespace, metric = %metric.name, "run");
        // The controller sets no deadline: the provider's budget bounds the measurement.
        measurement(ArgoProvider::run(self, &run, &metric, None).await)
    }

    async fn resume(
        &self,
        run: AnalysisRunRef,
        metric: ArgoMetric,
        previous: Measurement,
    ) -> Measurement {
        tracing::debug!(analysis_run = %run.name, metric = %metric.name, "resume");
        measurement(ArgoProvider::resume(self, &run, &metric, &previous, None).await)
    }

    async fn terminate(
        &self,
        run: AnalysisRunRef,
        metric: ArgoMetric,
        previous: Measurement,
    ) -> Measurement {
        tracing::debug!(analysis_run = %run.name, metric = %metric.name, "terminate");
        ArgoProvider::terminate(self, &previous)
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
        self.metadata(&metric)
            .unwrap_or_else(|e| BTreeMap::from([("error".to_string(), e.to_string())]))
    }
}
