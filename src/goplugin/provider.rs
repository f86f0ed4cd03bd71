//! The net/rpc `Plugin` service's handler for rollgate: each of Argo's methods delegates to
//! [`ArgoProvider`], the transport-free provider both plugin protocols share.

use std::collections::BTreeMap;

use super::MetricProviderHandler;
use crate::argo::{AnalysisRunRef, ArgoMetric, ArgoProvider, PROVIDER_TYPE};
use crate::measurement::Measurement;

impl MetricProviderHandler for ArgoProvider {
    async fn init_plugin(&self) -> Result<(), String> {
        Ok(())
    }

    async fn run(&self, run: AnalysisRunRef, metric: ArgoMetric) -> Measurement {
        tracing::debug!(analysis_run = %run.name, namespace = %run.namespace, metric = %metric.name, "run");
        ArgoProvider::run(self, &run, &metric).await
    }

    async fn resume(
        &self,
        run: AnalysisRunRef,
        metric: ArgoMetric,
        previous: Measurement,
    ) -> Measurement {
        tracing::debug!(analysis_run = %run.name, metric = %metric.name, "resume");
        ArgoProvider::resume(self, &run, &metric, &previous).await
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
    }
}
