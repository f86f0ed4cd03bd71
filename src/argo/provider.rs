//! The Argo metric provider: what each of Argo's metric-provider calls does, over one engine,
//! with the cache of parsed metrics. Transports (net/rpc in `crate::goplugin`, gRPC in
//! `crate::grpc`) decode their requests into [`ArgoMetric`] and [`AnalysisRunRef`], call it, and
//! encode its answer: a measurement, or an [`ArgoError`] (net/rpc has no error reply for a
//! measurement, so it sends an Error measurement; gRPC a status). No analysis rule is decided
//! here: the engine's [`Engine::call`] applies trust, run position and the deadline.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::metric::MetricCache;
use super::{AnalysisRunRef, ArgoMetric};
use crate::engine::{Call, CallError, Deadline, Engine, Position, Trust};
use crate::measurement::Measurement;
use crate::spec::{Metric, SpecError};

/// What `Type()` answers: Argo's own name for plugin providers.
pub(crate) const PROVIDER_TYPE: &str = "RPCPlugin";

/// The overall time one measurement may take, retries included. The controller sets no
/// deadline of its own, and a hung analysis worker would stall every rollout it serves.
pub(crate) const MEASUREMENT_BUDGET: Duration = Duration::from_secs(120);

/// Why a call has no measurement to answer with.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ArgoError {
    /// The metric's spec (or its Argo fields) does not parse.
    #[error("metric {metric:?} has an invalid rollgate spec: {source}")]
    InvalidSpec {
        /// The metric's name.
        metric: String,
        /// What is wrong with it.
        #[source]
        source: SpecError,
    },
    /// The provider's trust refuses the metric, or the caller's deadline passed.
    #[error(transparent)]
    Call(#[from] CallError),
}

/// Argo's metric-provider calls over an engine, at one trust and time budget.
pub(crate) struct ArgoProvider {
    engine: Arc<Engine>,
    /// The surface's trust policy: which specs a call may bring and which credential files
    /// they may have read.
    trust: Trust,
    /// The most time one measurement may take; a caller's own deadline shortens it.
    budget: Duration,
    /// The controller sends the same metric at every interval: each is parsed once.
    metrics: MetricCache,
}

impl std::fmt::Debug for ArgoProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgoProvider")
            .field("trust", &self.trust)
            .field("budget", &self.budget)
            .field("metrics", &self.metrics)
            .finish_non_exhaustive()
    }
}

impl ArgoProvider {
    /// A provider that measures with `engine` at `trust`, each measurement within `budget`.
    pub(crate) fn new(engine: Arc<Engine>, trust: Trust, budget: Duration) -> ArgoProvider {
        ArgoProvider {
            engine,
            trust,
            budget,
            metrics: MetricCache::default(),
        }
    }

    /// The engine's metric for `argo`, refusing specs this provider may not run. A credential
    /// file outside the allowed directories passes here: the engine answers it with an Error
    /// measurement naming the argument, as Argo records it.
    fn metric(&self, argo: &ArgoMetric) -> Result<Arc<Metric>, ArgoError> {
        // Every metric of an Argo call comes with the call: a surface that takes no inline
        // specs takes none here either.
        self.trust.admit_inline()?;
        let metric = self
            .metrics
            .get(argo)
            .map_err(|source| ArgoError::InvalidSpec {
                metric: argo.name.clone(),
                source,
            })?;
        match self.trust.admit(&metric) {
            Ok(()) | Err(CallError::CredentialFile { .. }) => Ok(metric),
            Err(e) => Err(e.into()),
        }
    }

    /// Asks the engine, within `caller`'s deadline (if any) and this provider's budget.
    async fn call(
        &self,
        metric: &ArgoMetric,
        caller: Option<Duration>,
        position: Position,
        at: Option<DateTime<Utc>>,
        previous: Option<&Measurement>,
    ) -> Result<Measurement, ArgoError> {
        let deadline = Deadline::for_call(caller, self.budget);
        let metric = self.metric(metric)?;
        let call = Call {
            metric: &metric,
            at,
            deadline,
            trust: self.trust.clone(),
            position,
            previous,
        };
        Ok(self.engine.call(call).await?)
    }

    /// `Run`: measures `metric` as the check of `run` it is, within the caller's deadline.
    pub(crate) async fn run(
        &self,
        run: &AnalysisRunRef,
        metric: &ArgoMetric,
        caller: Option<Duration>,
    ) -> Result<Measurement, ArgoError> {
        self.call(metric, caller, known(run, &metric.name), None, None)
            .await
    }

    /// `Resume`: continues the in-flight measurement `previous`.
    pub(crate) async fn resume(
        &self,
        run: &AnalysisRunRef,
        metric: &ArgoMetric,
        previous: &Measurement,
        caller: Option<Duration>,
    ) -> Result<Measurement, ArgoError> {
        let position = known(run, &metric.name);
        self.call(metric, caller, position, None, Some(previous))
            .await
    }

    /// rollgate's `Analyze` (no AnalysisRun): measures `metric` at `at`, the calls that carry
    /// the same `run` key being one run, placed by the engine's run tracker.
    pub(crate) async fn analyze(
        &self,
        metric: &ArgoMetric,
        run: String,
        at: Option<DateTime<Utc>>,
        caller: Option<Duration>,
    ) -> Result<Measurement, ArgoError> {
        let position = Position::Tracked {
            run,
            metric: metric.name.clone(),
        };
        self.call(metric, caller, position, at, None).await
    }

    /// `Terminate`: ends the in-flight measurement `previous`.
    pub(crate) fn terminate(&self, previous: &Measurement) -> Measurement {
        self.engine.terminate(previous)
    }

    /// `GetMetadata`: the metric's description.
    pub(crate) fn metadata(
        &self,
        metric: &ArgoMetric,
    ) -> Result<BTreeMap<String, String>, ArgoError> {
        let metric = self.metric(metric)?;
        Ok(self.engine.describe(&metric))
    }
}

/// Where a call of `run` about `metric` stands, from the AnalysisRun it carries: when the run
/// began and, when its history was sent, how many checks of the metric count already.
fn known(run: &AnalysisRunRef, metric: &str) -> Position {
    Position::Known {
        started_at: run.started_at,
        checks_done: run.checks_done(metric),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::engine::AddressPolicy;
    use crate::measurement::Phase;
    use crate::prometheus::{Backend, Client};

    fn provider(trust: Trust) -> ArgoProvider {
        let engine = Engine::new(Backend::Live(Client::new()), AddressPolicy::default());
        ArgoProvider::new(Arc::new(engine), trust, Duration::from_secs(5))
    }

    fn metric(name: &str, spec: &str) -> ArgoMetric {
        ArgoMetric {
            name: name.into(),
            plugin: BTreeMap::from([("argoproj-labs/rollgate".to_string(), spec.into())]),
            ..ArgoMetric::default()
        }
    }

    /// Both transports get the same refusal from the one provider; only its encoding differs.
    #[tokio::test]
    async fn refusals_are_the_providers_for_every_transport() {
        let p = provider(Trust::NETWORK);
        let run = AnalysisRunRef::default();
        let bad = metric("m", "{");
        let e = p.run(&run, &bad, None).await.unwrap_err();
        assert!(matches!(e, ArgoError::InvalidSpec { .. }), "{e:?}");
        assert!(
            e.to_string()
                .starts_with("metric \"m\" has an invalid rollgate spec: "),
            "{e}"
        );
        assert_eq!(
            p.metadata(&bad).unwrap_err().to_string(),
            e.to_string(),
            "GetMetadata says the same"
        );
        let file = metric(
            "m",
            r#"{"prometheus":{"address":"http://127.0.0.1:9","bearerTokenFile":"/etc/passwd"},"query":"up","noData":"error"}"#,
        );
        let e = p.run(&run, &file, None).await.unwrap_err();
        assert!(
            matches!(
                e,
                ArgoError::Call(CallError::ServerFile {
                    key: "bearerTokenFile"
                })
            ),
            "{e:?}"
        );
        let off = provider(Trust::network(false));
        let e = off.metadata(&metric("m", "{}")).unwrap_err();
        assert!(
            matches!(e, ArgoError::Call(CallError::InlineDisabled)),
            "{e:?}"
        );
    }

    /// A plugin-mode credential file outside the allowed directories is an Error measurement,
    /// not a refusal: Argo records it against the metric.
    #[tokio::test]
    async fn a_credential_file_outside_the_allowed_directories_is_an_error_measurement() {
        let p = provider(Trust::plugin(&[]).unwrap());
        let file = metric(
            "m",
            r#"{"prometheus":{"address":"http://127.0.0.1:9","bearerTokenFile":"/etc/passwd"},"query":"up","noData":"error"}"#,
        );
        let m = p
            .run(&AnalysisRunRef::default(), &file, None)
            .await
            .unwrap();
        assert_eq!(m.phase, Phase::Error);
        assert!(m.message.contains("bearerTokenFile"), "{}", m.message);
    }

    /// The cache is the provider's: a metric is parsed once per wire form, whatever its name,
    /// and each answer carries the caller's name.
    #[test]
    fn the_provider_parses_a_spec_once_and_names_each_metric() {
        let p = provider(Trust::OPERATOR);
        let spec = r#"{"prometheus":{"address":"http://127.0.0.1:9"},"query":"vector(1)","noData":"error"}"#;
        for name in ["a", "b", "a"] {
            let m = p.metric(&metric(name, spec)).unwrap();
            assert_eq!(m.name, name);
        }
        assert_eq!(p.metrics.len(), 1);
        assert_eq!(provider(Trust::OPERATOR).metrics.len(), 0, "not shared");
    }
}
