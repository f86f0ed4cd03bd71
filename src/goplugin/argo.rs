//! Argo Rollouts' metric-provider plugin interface over net/rpc: the argument types the
//! controller sends (as gob interface values), their translation into the Argo domain types of
//! [`crate::argo`], and the `Plugin` service that dispatches the seven methods to a
//! [`MetricProviderHandler`] (implemented for [`crate::argo::ArgoProvider`] in `provider`).

use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use chrono::Utc;
use futures::FutureExt;

use super::gob::{
    go_zero_time, gob_struct, Decoder, GoTime, GobError, Ignored, Interface, Registered, Seq, Step,
};
use super::netrpc::{not_found, panic_message, Outcome, Reply, Service};
use crate::argo::{completed_checks, AnalysisRunRef, ArgoMetric, IntOrString};
use crate::measurement::{Measurement, Phase};

/// The name the controller dispenses.
pub(crate) const DISPENSE_NAME: &str = "RpcMetricProviderPlugin";

/// What rollgate does for each method the controller calls.
pub(crate) trait MetricProviderHandler: Send + Sync + 'static {
    /// `InitPlugin`: once, after the plugin is dispensed. An error disables the plugin.
    fn init_plugin(&self) -> impl Future<Output = Result<(), String>> + Send;
    /// `Run`: start (or take) one measurement.
    fn run(
        &self,
        run: AnalysisRunRef,
        metric: ArgoMetric,
    ) -> impl Future<Output = Measurement> + Send;
    /// `Resume`: continue an in-flight measurement at or after its `resume_at`.
    fn resume(
        &self,
        run: AnalysisRunRef,
        metric: ArgoMetric,
        m: Measurement,
    ) -> impl Future<Output = Measurement> + Send;
    /// `Terminate`: the run is being stopped while a measurement is in flight.
    fn terminate(
        &self,
        run: AnalysisRunRef,
        metric: ArgoMetric,
        m: Measurement,
    ) -> impl Future<Output = Measurement> + Send;
    /// `GarbageCollect`: keep at most `limit` measurements' worth of state.
    fn garbage_collect(
        &self,
        run: AnalysisRunRef,
        metric: ArgoMetric,
        limit: i64,
    ) -> impl Future<Output = Result<(), String>> + Send;
    /// `Type`: the provider type name shown by the controller.
    fn type_name(&self) -> String;
    /// `GetMetadata`: metadata attached to the metric result.
    fn get_metadata(&self, metric: ArgoMetric) -> BTreeMap<String, String>;
}

gob_struct! {
    /// `metav1.ObjectMeta`, reduced.
    struct ObjectMetaWire {
        name: String = "Name",
        namespace: String = "Namespace",
        uid: String = "UID",
    }
}

gob_struct! {
    /// `v1alpha1.Measurement`, reduced to its phase (to count a metric's measurements).
    struct MeasurementPhaseWire {
        phase: String = "Phase",
    }
}

gob_struct! {
    /// `v1alpha1.MetricResult`, reduced to what places the next check.
    struct MetricResultWire {
        name: String = "Name",
        measurements: Seq<MeasurementPhaseWire> = "Measurements",
        count: i32 = "Count",
    }
}

gob_struct! {
    /// `v1alpha1.AnalysisRunStatus`, reduced.
    struct AnalysisRunStatusWire {
        metric_results: Seq<MetricResultWire> = "MetricResults",
        started_at: Option<GoTime> = "StartedAt",
    }
}

gob_struct! {
    /// `v1alpha1.AnalysisRun`, reduced to its embedded ObjectMeta and start time.
    struct AnalysisRunWire {
        meta: ObjectMetaWire = "ObjectMeta",
        status: AnalysisRunStatusWire = "Status",
    }
}

gob_struct! {
    /// `intstr.IntOrString`.
    struct IntOrStringWire {
        ty: i64 = "Type",
        int_val: i32 = "IntVal",
        str_val: String = "StrVal",
    }
}

gob_struct! {
    /// `v1alpha1.MetricProvider`, reduced to the plugin map.
    struct MetricProviderWire {
        plugin: BTreeMap<String, Vec<u8>> = "Plugin",
    }
}

gob_struct! {
    /// `v1alpha1.Metric`.
    struct MetricWire {
        name: String = "Name",
        interval: String = "Interval",
        initial_delay: String = "InitialDelay",
        count: Option<IntOrStringWire> = "Count",
        success_condition: String = "SuccessCondition",
        failure_condition: String = "FailureCondition",
        failure_limit: Option<IntOrStringWire> = "FailureLimit",
        inconclusive_limit: Option<IntOrStringWire> = "InconclusiveLimit",
        consecutive_error_limit: Option<IntOrStringWire> = "ConsecutiveErrorLimit",
        provider: MetricProviderWire = "Provider",
        consecutive_success_limit: Option<IntOrStringWire> = "ConsecutiveSuccessLimit",
    }
}

gob_struct! {
    /// `v1alpha1.Measurement`.
    struct MeasurementWire {
        phase: String = "Phase",
        message: String = "Message",
        started_at: Option<GoTime> = "StartedAt",
        finished_at: Option<GoTime> = "FinishedAt",
        value: String = "Value",
        metadata: BTreeMap<String, String> = "Metadata",
        resume_at: Option<GoTime> = "ResumeAt",
    }
}

gob_struct! {
    /// `rpc.RunArgs`.
    struct RunArgs {
        analysis_run: Option<AnalysisRunWire> = "AnalysisRun",
        metric: MetricWire = "Metric",
    }
}

gob_struct! {
    /// `rpc.TerminateAndResumeArgs`.
    struct TerminateAndResumeArgs {
        analysis_run: Option<AnalysisRunWire> = "AnalysisRun",
        metric: MetricWire = "Metric",
        measurement: MeasurementWire = "Measurement",
    }
}

gob_struct! {
    /// `rpc.GarbageCollectArgs`.
    struct GarbageCollectArgs {
        analysis_run: Option<AnalysisRunWire> = "AnalysisRun",
        metric: MetricWire = "Metric",
        limit: i64 = "Limit",
    }
}

gob_struct! {
    /// `rpc.GetMetadataArgs`.
    struct GetMetadataArgs {
        metric: MetricWire = "Metric",
    }
}

impl Registered for RunArgs {
    const NAME: &'static str = "RunArgs";
}
impl Registered for TerminateAndResumeArgs {
    const NAME: &'static str = "TerminateAndResumeArgs";
}
impl Registered for GarbageCollectArgs {
    const NAME: &'static str = "GarbageCollectArgs";
}
impl Registered for GetMetadataArgs {
    const NAME: &'static str = "GetMetadataArgs";
}

impl From<IntOrStringWire> for IntOrString {
    fn from(w: IntOrStringWire) -> Self {
        // intstr.Type: 0 = Int, 1 = String.
        if w.ty == 1 {
            IntOrString::Str(w.str_val)
        } else {
            IntOrString::Int(i64::from(w.int_val))
        }
    }
}

impl From<MetricWire> for ArgoMetric {
    fn from(w: MetricWire) -> Self {
        ArgoMetric {
            name: w.name,
            interval: w.interval,
            initial_delay: w.initial_delay,
            count: w.count.map(Into::into),
            success_condition: w.success_condition,
            failure_condition: w.failure_condition,
            failure_limit: w.failure_limit.map(Into::into),
            inconclusive_limit: w.inconclusive_limit.map(Into::into),
            consecutive_error_limit: w.consecutive_error_limit.map(Into::into),
            consecutive_success_limit: w.consecutive_success_limit.map(Into::into),
            plugin: w.provider.plugin,
        }
    }
}

fn run_ref(w: Option<AnalysisRunWire>) -> AnalysisRunRef {
    // gob omits an empty slice: a run that was sent but lists no results has taken no
    // measurement yet, which is history too. Only a nil run has none.
    let Some(w) = w else {
        return AnalysisRunRef::default();
    };
    let done = w
        .status
        .metric_results
        .0
        .into_iter()
        .map(|r| {
            let phases = r
                .measurements
                .0
                .iter()
                .filter_map(|m| Phase::parse(&m.phase));
            let n = completed_checks(i64::from(r.count), phases);
            (r.name, n)
        })
        .collect();
    AnalysisRunRef {
        name: w.meta.name,
        namespace: w.meta.namespace,
        uid: w.meta.uid,
        started_at: w.status.started_at.map(|t| t.0),
        checks_done: Some(done),
    }
}

impl TryFrom<MeasurementWire> for Measurement {
    type Error = String;

    fn try_from(w: MeasurementWire) -> Result<Self, String> {
        let phase = Phase::parse(&w.phase)
            .ok_or_else(|| format!("invalid args: unknown measurement phase {:?}", w.phase))?;
        Ok(Measurement {
            phase,
            message: w.message,
            value: w.value,
            metadata: w.metadata,
            started_at: w.started_at.map_or_else(go_zero_time, |t| t.0),
            finished_at: w.finished_at.map(|t| t.0),
            resume_at: w.resume_at.map(|t| t.0),
        })
    }
}

/// A decoded `Plugin` call.
#[derive(Debug)]
pub(crate) enum PluginCall {
    Init,
    Run(AnalysisRunRef, ArgoMetric),
    Resume(AnalysisRunRef, ArgoMetric, Measurement),
    Terminate(AnalysisRunRef, ArgoMetric, Measurement),
    GarbageCollect(AnalysisRunRef, ArgoMetric, i64),
    Type,
    GetMetadata(ArgoMetric),
}

/// The `Plugin` net/rpc service served on each dispensed stream.
pub(crate) struct PluginService<H> {
    handler: Arc<H>,
}

impl<H> PluginService<H> {
    pub(crate) fn new(handler: Arc<H>) -> Self {
        PluginService { handler }
    }
}

fn map_step<T, U>(s: Step<T>, f: impl FnOnce(T) -> U) -> Step<U> {
    match s {
        Step::Value(v) => Step::Value(f(v)),
        Step::NeedMore => Step::NeedMore,
        Step::TypeDefined => Step::TypeDefined,
    }
}

/// Argo's server answers a nil or foreign argument with `invalid args <value>`.
fn required<T>(arg: Interface<T>) -> Result<T, String> {
    arg.0.ok_or_else(|| "invalid args <nil>".to_string())
}

type CallResult = Result<PluginCall, String>;

impl<H: MetricProviderHandler> Service for PluginService<H> {
    type Call = PluginCall;

    fn feed(
        &self,
        method: &str,
        dec: &mut Decoder,
        msg: &[u8],
    ) -> Result<Step<CallResult>, GobError> {
        Ok(match method {
            "Plugin.InitPlugin" => map_step(dec.feed::<Ignored>(msg)?, |_| Ok(PluginCall::Init)),
            "Plugin.Type" => map_step(dec.feed::<Ignored>(msg)?, |_| Ok(PluginCall::Type)),
            "Plugin.Run" => map_step(dec.feed::<Interface<RunArgs>>(msg)?, |a| {
                let a = required(a)?;
                Ok(PluginCall::Run(run_ref(a.analysis_run), a.metric.into()))
            }),
            "Plugin.Resume" | "Plugin.Terminate" => {
                let resume = method == "Plugin.Resume";
                map_step(dec.feed::<Interface<TerminateAndResumeArgs>>(msg)?, |a| {
                    let a = required(a)?;
                    let m = Measurement::try_from(a.measurement)?;
                    let (run, metric) = (run_ref(a.analysis_run), a.metric.into());
                    Ok(if resume {
                        PluginCall::Resume(run, metric, m)
                    } else {
                        PluginCall::Terminate(run, metric, m)
                    })
                })
            }
            "Plugin.GarbageCollect" => {
                map_step(dec.feed::<Interface<GarbageCollectArgs>>(msg)?, |a| {
                    let a = required(a)?;
                    Ok(PluginCall::GarbageCollect(
                        run_ref(a.analysis_run),
                        a.metric.into(),
                        a.limit,
                    ))
                })
            }
            "Plugin.GetMetadata" => map_step(dec.feed::<Interface<GetMetadataArgs>>(msg)?, |a| {
                Ok(PluginCall::GetMetadata(required(a)?.metric.into()))
            }),
            _ => map_step(dec.feed::<Ignored>(msg)?, |_| {
                Err(not_found(method, &["Plugin"]))
            }),
        })
    }

    async fn call(self: Arc<Self>, call: PluginCall) -> Outcome {
        let h = &*self.handler;
        let started = Utc::now();
        let measured = |r: Result<Measurement, String>| {
            Outcome::ok(Reply::Measurement(r.unwrap_or_else(|p| {
                Measurement::error(format!("rollgate panicked: {p}"), started)
            })))
        };
        let rpc_error = |r: Result<Result<(), String>, String>| {
            Outcome::ok(Reply::RpcError(match r {
                Ok(Ok(())) => String::new(),
                Ok(Err(e)) => e,
                Err(p) => format!("rollgate panicked: {p}"),
            }))
        };
        match call {
            PluginCall::Init => rpc_error(catch(h.init_plugin()).await),
            PluginCall::Run(run, metric) => measured(catch(h.run(run, metric)).await),
            PluginCall::Resume(run, metric, m) => measured(catch(h.resume(run, metric, m)).await),
            PluginCall::Terminate(run, metric, m) => {
                measured(catch(h.terminate(run, metric, m)).await)
            }
            PluginCall::GarbageCollect(run, metric, limit) => {
                rpc_error(catch(h.garbage_collect(run, metric, limit)).await)
            }
            PluginCall::Type => match catch_sync(|| h.type_name()) {
                Ok(s) => Outcome::ok(Reply::Str(s)),
                Err(p) => Outcome::err(format!("rollgate panicked: {p}")),
            },
            PluginCall::GetMetadata(metric) => match catch_sync(|| h.get_metadata(metric)) {
                Ok(m) => Outcome::ok(Reply::StrMap(m)),
                Err(p) => Outcome::err(format!("rollgate panicked: {p}")),
            },
        }
    }
}

/// Runs a handler future, turning a panic into its message.
async fn catch<F: Future>(f: F) -> Result<F::Output, String> {
    AssertUnwindSafe(f)
        .catch_unwind()
        .await
        .map_err(|p| panic_message(&*p))
}

fn catch_sync<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(AssertUnwindSafe(f)).map_err(|p| panic_message(&*p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_or_string_follows_the_type_field() {
        let s = IntOrStringWire {
            ty: 1,
            int_val: 0,
            str_val: "50%".into(),
        };
        assert_eq!(IntOrString::from(s), IntOrString::Str("50%".into()));
        let i = IntOrStringWire {
            ty: 0,
            int_val: 3,
            str_val: String::new(),
        };
        assert_eq!(IntOrString::from(i), IntOrString::Int(3));
    }

    #[test]
    fn unknown_phase_is_refused() {
        let w = MeasurementWire {
            phase: "Pending".into(),
            ..MeasurementWire::default()
        };
        assert!(Measurement::try_from(w).is_err());
        let w = MeasurementWire {
            phase: "Running".into(),
            ..MeasurementWire::default()
        };
        let m = Measurement::try_from(w).unwrap();
        assert_eq!(m.started_at, go_zero_time());
    }
}
