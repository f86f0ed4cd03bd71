//! `rollgate.v1.MetricProviderService`: each method translates its request (see
//! [`super::convert`]) and asks the one Argo provider ([`ArgoProvider`]), as the net/rpc plugin
//! does; a call the provider refuses is answered with a status.
//!
//! Deadlines: a call's `grpc-timeout` bounds the engine's queries (and is itself bounded by the
//! service's budget). When it passes first, the call ends with DEADLINE_EXCEEDED and the engine's
//! future is dropped, which cancels the Prometheus requests in flight.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};

use super::convert::{self, required};
use super::pb;
use super::pb::metric_provider_service_server::{
    MetricProviderService, MetricProviderServiceServer,
};
use crate::argo::{ArgoError, ArgoProvider, MEASUREMENT_BUDGET, PROVIDER_TYPE};
use crate::engine::{CallError, Engine, Trust};
use crate::measurement::Measurement;
use crate::spec::{check_declared, placeholder_names, substitute, substitute_str, ArgValues};

/// How the service treats requests.
#[derive(Debug, Clone)]
pub struct ServiceOptions {
    /// The surface's trust policy (the engine's): a plugin host's ([`Trust::plugin`]) or the
    /// network endpoint's ([`Trust::network`]), which follows `serve --no-inline-specs`.
    pub trust: Trust,
    /// The most time one measurement may take; a call's own deadline shortens it.
    pub budget: Duration,
    /// Largest request message accepted (the transport refuses larger ones first, with
    /// RESOURCE_EXHAUSTED; this is the decoder's own bound behind it).
    pub max_message_bytes: usize,
}

impl Default for ServiceOptions {
    fn default() -> Self {
        ServiceOptions {
            trust: Trust::OPERATOR,
            budget: MEASUREMENT_BUDGET,
            max_message_bytes: super::DEFAULT_MAX_MESSAGE_BYTES,
        }
    }
}

/// The service over an engine.
#[derive(Debug)]
pub struct MetricProvider {
    provider: ArgoProvider,
    max_message_bytes: usize,
}

impl MetricProvider {
    /// A service measuring with `engine`.
    pub fn new(engine: Arc<Engine>, options: ServiceOptions) -> MetricProvider {
        MetricProvider {
            provider: ArgoProvider::new(engine, options.trust, options.budget),
            max_message_bytes: options.max_message_bytes,
        }
    }

    /// The tonic server for this service, with its message size limits applied.
    pub fn into_server(self) -> MetricProviderServiceServer<MetricProvider> {
        // The transport's frame check refuses oversized messages with RESOURCE_EXHAUSTED
        // before they are buffered; the decoder's limit sits just above it as a backstop.
        let limit = self.max_message_bytes.saturating_add(1);
        MetricProviderServiceServer::new(self)
            .max_decoding_message_size(limit)
            .max_encoding_message_size(usize::MAX)
    }
}

/// The call's own deadline, its `grpc-timeout` (the provider bounds it by its budget).
fn caller_deadline(metadata: &MetadataMap) -> Option<Duration> {
    metadata
        .get("grpc-timeout")
        .and_then(|v| v.to_str().ok())
        .and_then(parse_grpc_timeout)
}

/// The gRPC status of a call the provider answered without a measurement.
fn refused(e: ArgoError) -> Status {
    match e {
        ArgoError::InvalidSpec { .. } => Status::invalid_argument(e.to_string()),
        ArgoError::Call(e) => status(e),
    }
}

/// The gRPC status of an engine call that has no measurement.
fn status(e: CallError) -> Status {
    match e {
        CallError::ServerFile { .. } => Status::permission_denied(format!(
            "{e}; use a plugin deployment or a template for credentials"
        )),
        CallError::DeadlineExceeded => Status::deadline_exceeded(e.to_string()),
        CallError::InlineDisabled | CallError::AmbientCredentials { .. } => {
            Status::permission_denied(e.to_string())
        }
        CallError::CredentialFile { .. } => Status::permission_denied(e.to_string()),
    }
}

/// Parses gRPC's `grpc-timeout` header: up to eight digits and a unit (H, M, S, m, u, n).
pub(crate) fn parse_grpc_timeout(value: &str) -> Option<Duration> {
    let unit = value.chars().last()?;
    let digits = value.get(..value.len().checked_sub(unit.len_utf8())?)?;
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        'H' => Duration::from_secs(n.checked_mul(3600)?),
        'M' => Duration::from_secs(n.checked_mul(60)?),
        'S' => Duration::from_secs(n),
        'm' => Duration::from_millis(n),
        'u' => Duration::from_micros(n),
        'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// The spec and conditions of `m` with `{{args.NAME}}` replaced from `args`.
fn substituted(m: &pb::Metric, args: &ArgValues) -> Result<(pb::Metric, String), Status> {
    let invalid = |e: crate::spec::SpecError| Status::invalid_argument(e.to_string());
    let value: Value = serde_json::from_str(&m.spec_json)
        .map_err(|e| Status::invalid_argument(format!("metric.spec_json: not valid JSON: {e}")))?;
    // The spec declares no arguments: its placeholders are what it accepts.
    let mut declared = placeholder_names(&value);
    for condition in [&m.success_condition, &m.failure_condition] {
        declared.extend(placeholder_names(&Value::String(condition.clone())));
    }
    check_declared(
        declared.iter().map(String::as_str),
        args.keys().map(String::as_str),
    )
    .map_err(invalid)?;
    let spec = substitute(&value, args, "metric.spec_json").map_err(invalid)?;
    let metric = pb::Metric {
        success_condition: substitute_str(&m.success_condition, args, "metric.success_condition")
            .map_err(invalid)?,
        failure_condition: substitute_str(&m.failure_condition, args, "metric.failure_condition")
            .map_err(invalid)?,
        ..m.clone()
    };
    Ok((metric, spec.to_string()))
}

fn measured<T>(m: &Measurement, wrap: impl FnOnce(Option<pb::Measurement>) -> T) -> Response<T> {
    Response::new(wrap(Some(convert::measurement_to_pb(m))))
}

#[tonic::async_trait]
impl MetricProviderService for MetricProvider {
    async fn init_plugin(
        &self,
        _request: Request<pb::InitPluginRequest>,
    ) -> Result<Response<pb::InitPluginResponse>, Status> {
        Ok(Response::new(pb::InitPluginResponse {}))
    }

    async fn run(
        &self,
        request: Request<pb::RunRequest>,
    ) -> Result<Response<pb::RunResponse>, Status> {
        let deadline = caller_deadline(request.metadata());
        let req = request.into_inner();
        let run = convert::run_ref(req.analysis_run.as_ref())?;
        let m = required("metric", req.metric.as_ref())?;
        let metric = convert::argo_metric("metric", m, &m.spec_json)?;
        tracing::debug!(analysis_run = %run.name, namespace = %run.namespace, metric = %m.name, "grpc run");
        let out = self
            .provider
            .run(&run, &metric, deadline)
            .await
            .map_err(refused)?;
        Ok(measured(&out, |measurement| pb::RunResponse {
            measurement,
        }))
    }

    async fn resume(
        &self,
        request: Request<pb::ResumeRequest>,
    ) -> Result<Response<pb::ResumeResponse>, Status> {
        let deadline = caller_deadline(request.metadata());
        let req = request.into_inner();
        let run = convert::run_ref(req.analysis_run.as_ref())?;
        let m = required("metric", req.metric.as_ref())?;
        let previous = convert::measurement_from_pb(
            "measurement",
            required("measurement", req.measurement.as_ref())?,
        )?;
        let metric = convert::argo_metric("metric", m, &m.spec_json)?;
        tracing::debug!(analysis_run = %run.name, metric = %m.name, "grpc resume");
        let out = self
            .provider
            .resume(&run, &metric, &previous, deadline)
            .await
            .map_err(refused)?;
        Ok(measured(&out, |measurement| pb::ResumeResponse {
            measurement,
        }))
    }

    async fn terminate(
        &self,
        request: Request<pb::TerminateRequest>,
    ) -> Result<Response<pb::TerminateResponse>, Status> {
        let req = request.into_inner();
        let previous = convert::measurement_from_pb(
            "measurement",
            required("measurement", req.measurement.as_ref())?,
        )?;
        tracing::debug!(metric = %req.metric.as_ref().map(|m| m.name.as_str()).unwrap_or(""), "grpc terminate");
        let out = self.provider.terminate(&previous);
        Ok(measured(&out, |measurement| pb::TerminateResponse {
            measurement,
        }))
    }

    async fn garbage_collect(
        &self,
        _request: Request<pb::GarbageCollectRequest>,
    ) -> Result<Response<pb::GarbageCollectResponse>, Status> {
        // rollgate keeps no per-measurement state outside the measurements themselves.
        Ok(Response::new(pb::GarbageCollectResponse {}))
    }

    async fn r#type(
        &self,
        _request: Request<pb::TypeRequest>,
    ) -> Result<Response<pb::TypeResponse>, Status> {
        Ok(Response::new(pb::TypeResponse {
            provider_type: PROVIDER_TYPE.to_string(),
        }))
    }

    async fn get_metadata(
        &self,
        request: Request<pb::GetMetadataRequest>,
    ) -> Result<Response<pb::GetMetadataResponse>, Status> {
        let req = request.into_inner();
        let m = required("metric", req.metric.as_ref())?;
        let metric = convert::argo_metric("metric", m, &m.spec_json)?;
        let metadata = self.provider.metadata(&metric).map_err(refused)?;
        Ok(Response::new(pb::GetMetadataResponse {
            metadata: metadata.into_iter().collect(),
        }))
    }

    async fn analyze(
        &self,
        request: Request<pb::AnalyzeRequest>,
    ) -> Result<Response<pb::AnalyzeResponse>, Status> {
        let deadline = caller_deadline(request.metadata());
        let req = request.into_inner();
        let m = required("metric", req.metric.as_ref())?;
        let at = convert::optional_time("evaluation_time", req.evaluation_time.as_ref())?;
        let args: ArgValues = req
            .args
            .iter()
            .map(|(k, v)| (k.clone(), Some(v.clone())))
            .collect();
        let (m, spec_json) = substituted(m, &args)?;
        let metric = convert::argo_metric("metric", &m, &spec_json)?;
        tracing::debug!(metric = %m.name, at = ?at, "grpc analyze");
        // An Analyze carries no AnalysisRun: the calls with the same metric (spec, conditions,
        // interval, arguments substituted) are one run, placed by the engine's run tracker.
        let run = format!("grpc {m:?} {spec_json}");
        let out = self
            .provider
            .analyze(&metric, run, at, deadline)
            .await
            .map_err(refused)?;
        Ok(measured(&out, |measurement| pb::AnalyzeResponse {
            measurement,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts_parse_in_every_unit() {
        assert_eq!(parse_grpc_timeout("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_grpc_timeout("2M"), Some(Duration::from_secs(120)));
        assert_eq!(parse_grpc_timeout("3S"), Some(Duration::from_secs(3)));
        assert_eq!(parse_grpc_timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(
            parse_grpc_timeout("99999999u"),
            Some(Duration::from_micros(99_999_999))
        );
        assert_eq!(parse_grpc_timeout("7n"), Some(Duration::from_nanos(7)));
        for bad in ["", "S", "100", "123456789S", "1x", "-1S", "1.5S", "1é"] {
            assert_eq!(parse_grpc_timeout(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn placeholders_are_substituted_in_spec_and_conditions() {
        let m = pb::Metric {
            name: "m".into(),
            spec_json: r#"{"query":"up{job=\"{{args.job}}\"}","noData":"fail"}"#.into(),
            success_condition: "result[0] >= {{ args.min }}".into(),
            ..pb::Metric::default()
        };
        let args = ArgValues::from([
            ("job".to_string(), Some("api".to_string())),
            ("min".to_string(), Some("1".to_string())),
        ]);
        let (out, spec) = substituted(&m, &args).unwrap();
        assert_eq!(out.success_condition, "result[0] >= 1");
        let v: Value = serde_json::from_str(&spec).unwrap();
        assert_eq!(v["query"], "up{job=\"api\"}");
        let missing = substituted(&m, &ArgValues::new()).unwrap_err();
        assert_eq!(missing.code(), tonic::Code::InvalidArgument);
        assert!(missing.message().contains("args.job"), "{missing:?}");
        let broken = pb::Metric {
            spec_json: "{".into(),
            ..m
        };
        let e = substituted(&broken, &args).unwrap_err();
        assert!(
            e.message().starts_with("metric.spec_json: not valid JSON"),
            "{e:?}"
        );
    }
}
