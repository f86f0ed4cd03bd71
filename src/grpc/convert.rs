//! Translation between the `rollgate.v1` messages and rollgate's own types. Whatever cannot be
//! translated (a missing field, an unknown enum value, a time out of range) becomes an
//! INVALID_ARGUMENT status that names the field.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use prost_types::Timestamp;
use tonic::Status;

use super::pb;
use crate::argo::{completed_checks, AnalysisRunRef, ArgoMetric, IntOrString};
use crate::measurement::{Measurement, Phase};

/// The key a spec is filed under when the request names none.
pub(crate) const DEFAULT_PLUGIN_NAME: &str = "rollgate/analysis";

/// Earliest and latest seconds a `google.protobuf.Timestamp` may hold (0001-01-01 to
/// 9999-12-31, as the protobuf documentation defines it).
const MIN_SECONDS: i64 = -62_135_596_800;
const MAX_SECONDS: i64 = 253_402_300_799;

/// A required message field, or INVALID_ARGUMENT naming it.
pub(crate) fn required<'a, T>(field: &str, value: Option<&'a T>) -> Result<&'a T, Status> {
    value.ok_or_else(|| Status::invalid_argument(format!("{field}: is required")))
}

/// A chrono time as a protobuf timestamp.
pub(crate) fn timestamp(t: DateTime<Utc>) -> Timestamp {
    Timestamp {
        seconds: t.timestamp(),
        // Always below 2e9 (a leap second at most), so it fits.
        nanos: i32::try_from(t.timestamp_subsec_nanos()).unwrap_or(999_999_999),
    }
}

/// A protobuf timestamp as a chrono time; out of range or malformed is INVALID_ARGUMENT.
pub(crate) fn time(field: &str, t: &Timestamp) -> Result<DateTime<Utc>, Status> {
    let invalid = |why: &str| {
        Status::invalid_argument(format!(
            "{field}: {why} (got seconds={}, nanos={})",
            t.seconds, t.nanos
        ))
    };
    if !(MIN_SECONDS..=MAX_SECONDS).contains(&t.seconds) {
        return Err(invalid("seconds out of range 0001-01-01..9999-12-31"));
    }
    let nanos = u32::try_from(t.nanos)
        .ok()
        .filter(|n| *n < 1_000_000_000)
        .ok_or_else(|| invalid("nanos must be within 0..999999999"))?;
    DateTime::from_timestamp(t.seconds, nanos).ok_or_else(|| invalid("not a valid time"))
}

/// An optional protobuf timestamp.
pub(crate) fn optional_time(
    field: &str,
    t: Option<&Timestamp>,
) -> Result<Option<DateTime<Utc>>, Status> {
    t.map(|t| time(field, t)).transpose()
}

/// rollgate's phase as the wire enum.
pub(crate) fn phase_to_pb(phase: Phase) -> pb::Phase {
    match phase {
        Phase::Successful => pb::Phase::Successful,
        Phase::Failed => pb::Phase::Failed,
        Phase::Inconclusive => pb::Phase::Inconclusive,
        Phase::Error => pb::Phase::Error,
        Phase::Running => pb::Phase::Running,
    }
}

/// The wire enum's raw value as rollgate's phase: unset and unknown values are refused.
pub(crate) fn phase_from_pb(field: &str, raw: i32) -> Result<Phase, Status> {
    match pb::Phase::try_from(raw) {
        Ok(pb::Phase::Successful) => Ok(Phase::Successful),
        Ok(pb::Phase::Failed) => Ok(Phase::Failed),
        Ok(pb::Phase::Inconclusive) => Ok(Phase::Inconclusive),
        Ok(pb::Phase::Error) => Ok(Phase::Error),
        Ok(pb::Phase::Running) => Ok(Phase::Running),
        Ok(pb::Phase::Unspecified) => Err(Status::invalid_argument(format!(
            "{field}: is required (PHASE_UNSPECIFIED)"
        ))),
        Err(_) => Err(Status::invalid_argument(format!(
            "{field}: unknown value {raw}; expected one of PHASE_SUCCESSFUL, PHASE_FAILED, PHASE_INCONCLUSIVE, PHASE_ERROR, PHASE_RUNNING"
        ))),
    }
}

/// A measurement as the wire message.
pub(crate) fn measurement_to_pb(m: &Measurement) -> pb::Measurement {
    pb::Measurement {
        phase: phase_to_pb(m.phase).into(),
        message: m.message.clone(),
        value: m.value.clone(),
        metadata: m.metadata.clone().into_iter().collect(),
        started_at: Some(timestamp(m.started_at)),
        finished_at: m.finished_at.map(timestamp),
        resume_at: m.resume_at.map(timestamp),
    }
}

/// A measurement sent back by the caller (Resume, Terminate): phase and start are required.
pub(crate) fn measurement_from_pb(field: &str, m: &pb::Measurement) -> Result<Measurement, Status> {
    let started = required(&format!("{field}.started_at"), m.started_at.as_ref())?;
    Ok(Measurement {
        phase: phase_from_pb(&format!("{field}.phase"), m.phase)?,
        message: m.message.clone(),
        value: m.value.clone(),
        metadata: m
            .metadata
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<BTreeMap<_, _>>(),
        started_at: time(&format!("{field}.started_at"), started)?,
        finished_at: optional_time(&format!("{field}.finished_at"), m.finished_at.as_ref())?,
        resume_at: optional_time(&format!("{field}.resume_at"), m.resume_at.as_ref())?,
    })
}

/// What rollgate keeps of the analysis run (all of it optional).
pub(crate) fn run_ref(run: Option<&pb::AnalysisRun>) -> Result<AnalysisRunRef, Status> {
    let Some(run) = run else {
        return Ok(AnalysisRunRef::default());
    };
    Ok(AnalysisRunRef {
        name: run.name.clone(),
        namespace: run.namespace.clone(),
        uid: run.uid.clone(),
        started_at: optional_time("analysis_run.start_time", run.start_time.as_ref())?,
        checks_done: run.status.as_ref().map(checks_done).transpose()?,
    })
}

/// Per metric: its completed, non-Error measurements (`count`, or the listed ones if more).
fn checks_done(status: &pb::AnalysisRunStatus) -> Result<BTreeMap<String, u32>, Status> {
    let mut done = BTreeMap::new();
    for (i, r) in status.metric_results.iter().enumerate() {
        let field = format!("analysis_run.status.metric_results[{i}]");
        if r.count < 0 {
            return Err(Status::invalid_argument(format!(
                "{field}.count: must be 0 or more, got {}",
                r.count
            )));
        }
        let phases = r
            .measurements
            .iter()
            .enumerate()
            .map(|(j, m)| phase_from_pb(&format!("{field}.measurements[{j}].phase"), m.phase))
            .collect::<Result<Vec<_>, _>>()?;
        done.insert(r.name.clone(), completed_checks(i64::from(r.count), phases));
    }
    Ok(done)
}

/// The metric as the Argo controller would have sent it to the net/rpc plugin, so that both
/// surfaces share the one Argo provider and its parser. `spec_json` is the spec to file under
/// the plugin key (the request's, or one with its placeholders substituted).
pub(crate) fn argo_metric(
    field: &str,
    m: &pb::Metric,
    spec_json: &str,
) -> Result<ArgoMetric, Status> {
    if m.name.trim().is_empty() {
        return Err(Status::invalid_argument(format!(
            "{field}.name: is required"
        )));
    }
    if spec_json.trim().is_empty() {
        return Err(Status::invalid_argument(format!(
            "{field}.spec_json: is required (the rollgate spec as JSON, as under provider.plugin.{DEFAULT_PLUGIN_NAME})"
        )));
    }
    let key = match m.plugin_name.trim() {
        "" => DEFAULT_PLUGIN_NAME.to_string(),
        key => key.to_string(),
    };
    let int = |v: Option<i32>| v.map(|n| IntOrString::Int(i64::from(n)));
    Ok(ArgoMetric {
        name: m.name.clone(),
        interval: m.interval.clone(),
        initial_delay: m.initial_delay.clone(),
        // int64 on the wire, so that a count past Argo's int32 reaches the one rule
        // (the one rule of `count` in crate::spec) instead of being truncated by the decoder.
        count: m.count.map(IntOrString::Int),
        success_condition: m.success_condition.clone(),
        failure_condition: m.failure_condition.clone(),
        failure_limit: int(m.failure_limit),
        inconclusive_limit: int(m.inconclusive_limit),
        consecutive_error_limit: int(m.consecutive_error_limit),
        consecutive_success_limit: int(m.consecutive_success_limit),
        plugin: BTreeMap::from([(key, spec_json.as_bytes().to_vec())]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn run_history_counts_completed_measurements_and_names_bad_fields() {
        let m = |phase: pb::Phase| pb::Measurement {
            phase: phase.into(),
            ..pb::Measurement::default()
        };
        let run = |results: Vec<pb::MetricResult>| pb::AnalysisRun {
            status: Some(pb::AnalysisRunStatus {
                metric_results: results,
            }),
            ..pb::AnalysisRun::default()
        };
        // No status: no history (the wall-time rule applies); a status without the metric:
        // its first check.
        let none = run_ref(Some(&pb::AnalysisRun::default())).unwrap();
        assert_eq!(none.checks_done("cmp"), None);
        assert_eq!(
            run_ref(Some(&run(vec![]))).unwrap().checks_done("cmp"),
            Some(0)
        );
        let listed = pb::MetricResult {
            name: "cmp".into(),
            count: 0,
            measurements: vec![
                m(pb::Phase::Successful),
                m(pb::Phase::Error),
                m(pb::Phase::Inconclusive),
                m(pb::Phase::Running),
            ],
        };
        let counted = pb::MetricResult {
            name: "other".into(),
            count: 7,
            measurements: vec![m(pb::Phase::Failed)],
        };
        let r = run_ref(Some(&run(vec![listed.clone(), counted]))).unwrap();
        assert_eq!(r.checks_done("cmp"), Some(2));
        assert_eq!(r.checks_done("other"), Some(7));
        let mut bad = listed;
        bad.count = -1;
        let e = run_ref(Some(&run(vec![bad]))).unwrap_err();
        assert!(
            e.message()
                .starts_with("analysis_run.status.metric_results[0].count: must be 0 or more"),
            "{e:?}"
        );
    }

    #[test]
    fn timestamps_round_trip_to_the_nanosecond() {
        for s in [
            "2026-01-02T03:04:05.123456789Z",
            "1970-01-01T00:00:00Z",
            "1969-12-31T23:59:59.5Z",
            "0001-01-01T00:00:00Z",
            "9999-12-31T23:59:59.999999999Z",
        ] {
            let back = time("x", &timestamp(t(s))).unwrap();
            assert_eq!(back, t(s), "{s}");
        }
    }

    #[test]
    fn malformed_timestamps_are_invalid_arguments_naming_the_field() {
        for (seconds, nanos) in [
            (0, -1),
            (0, 1_000_000_000),
            (MAX_SECONDS + 1, 0),
            (MIN_SECONDS - 1, 0),
            (i64::MAX, 0),
        ] {
            let e = time("measurement.started_at", &Timestamp { seconds, nanos }).unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument);
            assert!(e.message().starts_with("measurement.started_at: "), "{e:?}");
        }
    }

    #[test]
    fn phases_map_both_ways_and_refuse_unset_or_unknown() {
        for p in Phase::ALL {
            let raw: i32 = phase_to_pb(p).into();
            assert_eq!(phase_from_pb("p", raw).unwrap(), p);
        }
        let unset = phase_from_pb("m.phase", 0).unwrap_err();
        assert_eq!(unset.code(), Code::InvalidArgument);
        assert!(
            unset.message().contains("m.phase: is required"),
            "{unset:?}"
        );
        let unknown = phase_from_pb("m.phase", 99).unwrap_err();
        assert_eq!(unknown.code(), Code::InvalidArgument);
        assert!(
            unknown.message().contains("unknown value 99"),
            "{unknown:?}"
        );
    }

    #[test]
    fn measurements_round_trip() {
        let m = Measurement {
            phase: Phase::Running,
            message: "waiting".into(),
            value: "[1]".into(),
            metadata: BTreeMap::from([("kind".to_string(), "query".to_string())]),
            started_at: t("2026-01-02T03:04:05.5Z"),
            finished_at: None,
            resume_at: Some(t("2026-01-02T03:05:05Z")),
        };
        assert_eq!(measurement_from_pb("m", &measurement_to_pb(&m)).unwrap(), m);
        let mut no_start = measurement_to_pb(&m);
        no_start.started_at = None;
        let e = measurement_from_pb("measurement", &no_start).unwrap_err();
        assert_eq!(e.message(), "measurement.started_at: is required");
    }

    #[test]
    fn metrics_become_argo_metrics_under_the_plugin_key() {
        let m = pb::Metric {
            name: "error-rate".into(),
            interval: "1m".into(),
            count: Some(5),
            failure_limit: Some(2),
            success_condition: "result[0] < 0.01".into(),
            ..pb::Metric::default()
        };
        let a = argo_metric("metric", &m, "{}").unwrap();
        assert_eq!(a.name, "error-rate");
        assert_eq!(a.count, Some(IntOrString::Int(5)));
        assert_eq!(a.failure_limit, Some(IntOrString::Int(2)));
        assert_eq!(a.inconclusive_limit, None);
        assert_eq!(
            a.plugin.get(DEFAULT_PLUGIN_NAME).map(Vec::as_slice),
            Some(&b"{}"[..])
        );
        let named = pb::Metric {
            plugin_name: "acme/gate".into(),
            ..m.clone()
        };
        assert!(argo_metric("metric", &named, "{}")
            .unwrap()
            .plugin
            .contains_key("acme/gate"));
        let e = argo_metric("metric", &m, " ").unwrap_err();
        assert!(
            e.message().starts_with("metric.spec_json: is required"),
            "{e:?}"
        );
        let nameless = pb::Metric {
            name: String::new(),
            ..m
        };
        let e = argo_metric("req.metric", &nameless, "{}").unwrap_err();
        assert_eq!(e.message(), "req.metric.name: is required");
    }
}
