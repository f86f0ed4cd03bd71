//! Tests against gob streams produced by Go's own encoding/gob and net/rpc (written by
//! tests/gohost/cmd/gobfixtures, see tests/gohost/README.md), and a fixture of rollgate's
//! replies that `gobfixtures verify-replies` checks with Go's decoder.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::argo::{PluginCall, PluginService};
use super::broker::{ControlCall, ControlService, Dispensed};
use super::fuzzing::Idle;
use super::gob::test_support::split_messages;
use super::gob::{go_zero_time, gob_struct, Body, Decoder, Encoder, GoTime, Ignored, Step};
use super::netrpc::{RequestHeader, Service};
use super::yamux::Session;
use crate::argo::{AnalysisRunRef, ArgoMetric, IntOrString};
use crate::measurement::{Measurement, Phase};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/goplugin")
        .join(name)
}

fn read_fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).unwrap()
}

fn read_json(name: &str) -> Vec<Value> {
    serde_json::from_slice::<Vec<Value>>(&read_fixture(name)).unwrap()
}

/// Runs a recorded request stream through `service` as the net/rpc loop does: each call's
/// sequence number, method, and decoded call (or error text).
fn decode_requests<S: Service>(
    service: &S,
    bytes: &[u8],
) -> Vec<(u64, String, Result<S::Call, String>)> {
    let mut dec = Decoder::new();
    let mut out = Vec::new();
    let mut header: Option<RequestHeader> = None;
    for msg in split_messages(bytes) {
        match header.take() {
            None => match dec.feed::<RequestHeader>(&msg).unwrap() {
                Step::Value(h) => header = Some(h),
                _ => continue,
            },
            Some(h) => match service.feed(&h.service_method, &mut dec, &msg) {
                Ok(Step::Value(call)) => out.push((h.seq, h.service_method, call)),
                Ok(_) => header = Some(h),
                Err(e) => out.push((h.seq, h.service_method, Err(e.to_string()))),
            },
        }
    }
    out
}

fn ios(v: &Option<IntOrString>) -> String {
    match v {
        None => "nil".into(),
        Some(IntOrString::Int(i)) => format!("int:{i}"),
        Some(IntOrString::Str(s)) => format!("str:{s}"),
    }
}

fn check_run(run: &AnalysisRunRef, want: &Value) {
    assert_eq!(run.name, want["name"], "run name");
    assert_eq!(run.namespace, want["namespace"]);
    assert_eq!(run.uid, want["uid"]);
}

fn check_metric(m: &ArgoMetric, want: &Value) {
    assert_eq!(m.name, want["name"]);
    assert_eq!(m.interval, want["interval"]);
    assert_eq!(m.initial_delay, want["initialDelay"]);
    assert_eq!(ios(&m.count), want["count"]);
    assert_eq!(m.success_condition, want["successCondition"]);
    assert_eq!(m.failure_condition, want["failureCondition"]);
    assert_eq!(ios(&m.failure_limit), want["failureLimit"]);
    assert_eq!(ios(&m.inconclusive_limit), want["inconclusiveLimit"]);
    assert_eq!(
        ios(&m.consecutive_error_limit),
        want["consecutiveErrorLimit"]
    );
    assert_eq!(
        ios(&m.consecutive_success_limit),
        want["consecutiveSuccessLimit"]
    );
    let plugin: BTreeMap<String, Value> = m
        .plugin
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                Value::from(String::from_utf8(v.clone()).unwrap()),
            )
        })
        .collect();
    let want_plugin: BTreeMap<String, Value> = want["plugin"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(plugin, want_plugin);
}

fn time_of(v: &Value) -> Option<DateTime<Utc>> {
    v.as_str()
        .map(|s| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc))
}

fn check_measurement(m: &Measurement, want: &Value) {
    assert_eq!(m.phase.as_str(), want["phase"]);
    assert_eq!(m.message, want["message"]);
    assert_eq!(m.value, want["value"]);
    let md: BTreeMap<String, String> = serde_json::from_value(want["metadata"].clone()).unwrap();
    assert_eq!(m.metadata, md);
    assert_eq!(Some(m.started_at), time_of(&want["startedAt"]));
    assert_eq!(m.finished_at, time_of(&want["finishedAt"]));
    assert_eq!(m.resume_at, time_of(&want["resumeAt"]));
}

#[test]
fn go_plugin_requests_decode_into_typed_calls() {
    let service = PluginService::new(Arc::new(Idle));
    let calls = decode_requests(&service, &read_fixture("plugin_requests.bin"));
    let want = read_json("plugin_requests.json");
    assert_eq!(calls.len(), want.len());
    for ((seq, method, call), w) in calls.iter().zip(&want) {
        assert_eq!(*seq, w["seq"].as_u64().unwrap());
        assert_eq!(method, w["method"].as_str().unwrap());
        if let Some(err) = w.get("error") {
            let got = call
                .as_ref()
                .err()
                .unwrap_or_else(|| panic!("seq {seq}: expected an error"));
            assert!(got.contains(err.as_str().unwrap()), "seq {seq}: {got}");
            continue;
        }
        match call.as_ref().unwrap_or_else(|e| panic!("seq {seq}: {e}")) {
            PluginCall::Init => assert_eq!(method, "Plugin.InitPlugin"),
            PluginCall::Type => assert_eq!(method, "Plugin.Type"),
            PluginCall::Run(run, metric) => {
                assert_eq!(method, "Plugin.Run");
                check_run(run, &w["run"]);
                check_metric(metric, &w["metric"]);
            }
            PluginCall::Resume(run, metric, m) | PluginCall::Terminate(run, metric, m) => {
                check_run(run, &w["run"]);
                check_metric(metric, &w["metric"]);
                check_measurement(m, &w["measurement"]);
            }
            PluginCall::GarbageCollect(run, metric, limit) => {
                check_run(run, &w["run"]);
                check_metric(metric, &w["metric"]);
                assert_eq!(*limit, w["limit"].as_i64().unwrap());
            }
            PluginCall::GetMetadata(metric) => check_metric(metric, &w["metric"]),
        }
    }
}

#[tokio::test]
async fn go_control_requests_decode() {
    let (io, _peer) = tokio::io::duplex(64);
    let session = Session::server(io);
    let (quit, _) = tokio::sync::watch::channel(false);
    let service = ControlService {
        dispensed: Arc::new(Dispensed::default()),
        quit,
        session: session.handle(),
    };
    let calls = decode_requests(&service, &read_fixture("control_requests.bin"));
    let want = read_json("control_requests.json");
    assert_eq!(calls.len(), want.len());
    for ((seq, method, call), w) in calls.iter().zip(&want) {
        assert_eq!(*seq, w["seq"].as_u64().unwrap());
        assert_eq!(method, w["method"].as_str().unwrap());
        match call {
            Ok(ControlCall::Dispense(name)) => {
                assert!(name == "RpcMetricProviderPlugin" || name == "Other")
            }
            Ok(ControlCall::Ping) => assert_eq!(method, "Control.Ping"),
            Ok(ControlCall::Quit) => assert_eq!(method, "Control.Quit"),
            Err(e) => panic!("seq {seq}: {e}"),
        }
    }
}

gob_struct! {
    struct ResponseHeader {
        service_method: String = "ServiceMethod",
        seq: u64 = "Seq",
        error: String = "Error",
    }
}

gob_struct! {
    struct MeasurementBack {
        phase: String = "Phase",
        message: String = "Message",
        started_at: Option<GoTime> = "StartedAt",
        finished_at: Option<GoTime> = "FinishedAt",
        value: String = "Value",
        metadata: BTreeMap<String, String> = "Metadata",
        resume_at: Option<GoTime> = "ResumeAt",
    }
}

#[test]
fn go_encoded_measurements_decode_with_times() {
    let want = read_json("go_replies.json");
    let mut dec = Decoder::new();
    let mut msgs = split_messages(&read_fixture("go_replies.bin")).into_iter();
    for w in &want {
        let header = loop {
            if let Step::Value(h) = dec.feed::<ResponseHeader>(&msgs.next().unwrap()).unwrap() {
                break h;
            }
        };
        assert_eq!(header.seq, w["seq"].as_u64().unwrap());
        assert_eq!(header.service_method, w["method"].as_str().unwrap());
        if let Some(e) = w.get("error") {
            assert_eq!(header.error, e.as_str().unwrap());
            loop {
                if let Step::Value(Ignored) = dec.feed::<Ignored>(&msgs.next().unwrap()).unwrap() {
                    break;
                }
            }
            continue;
        }
        let m = loop {
            if let Step::Value(m) = dec.feed::<MeasurementBack>(&msgs.next().unwrap()).unwrap() {
                break m;
            }
        };
        let m = Measurement {
            phase: Phase::parse(&m.phase).unwrap(),
            message: m.message,
            value: m.value,
            metadata: m.metadata,
            started_at: m.started_at.map_or_else(go_zero_time, |t| t.0),
            finished_at: m.finished_at.map(|t| t.0),
            resume_at: m.resume_at.map(|t| t.0),
        };
        check_measurement(&m, &w["measurement"]);
    }
    assert!(msgs.next().is_none());
}

fn t(s: i64, n: u32) -> DateTime<Utc> {
    DateTime::from_timestamp(s, n).unwrap()
}

/// The replies `gobfixtures verify-replies` expects, in order (see rustRepliesExpected there).
fn rust_replies() -> Vec<u8> {
    let mut enc = Encoder::new();
    let mut out = Vec::new();
    let ok = Measurement {
        phase: Phase::Successful,
        message: "ok".into(),
        value: "0.5".into(),
        metadata: BTreeMap::from([("a".into(), "1".into()), ("b".into(), "2".into())]),
        started_at: t(1_704_164_645, 123_456_789),
        finished_at: Some(t(1_704_164_646, 623_456_789)),
        resume_at: None,
    };
    let running = Measurement {
        phase: Phase::Running,
        message: String::new(),
        value: String::new(),
        metadata: BTreeMap::new(),
        started_at: t(1_704_164_645, 123_456_789),
        finished_at: None,
        resume_at: Some(t(1_704_164_675, 0)),
    };
    let panicked = Measurement {
        phase: Phase::Error,
        message: "rollgate panicked: boom".into(),
        value: String::new(),
        metadata: BTreeMap::new(),
        started_at: go_zero_time(),
        finished_at: Some(t(1_704_164_646, 0)),
        resume_at: None,
    };
    let md = BTreeMap::from([("metric".to_string(), "error-rate".to_string())]);
    let empty = BTreeMap::new();
    let replies: Vec<(u64, &str, &str, Body<'_>)> = vec![
        (1, "Plugin.Run", "", Body::Measurement(&ok)),
        (2, "Plugin.Run", "", Body::Measurement(&running)),
        (3, "Plugin.InitPlugin", "", Body::RpcError("")),
        (
            4,
            "Plugin.GarbageCollect",
            "",
            Body::RpcError("negative limit -1"),
        ),
        (5, "Plugin.Type", "", Body::Str("RollgateTrivial")),
        (6, "Plugin.GetMetadata", "", Body::StrMap(&md)),
        (
            7,
            "Plugin.Nope",
            "rpc: can't find method Plugin.Nope",
            Body::Empty,
        ),
        (8, "Dispenser.Dispense", "", Body::Uint(1)),
        (9, "Control.Ping", "", Body::Empty),
        (10, "Plugin.Run", "", Body::Measurement(&panicked)),
        (11, "Plugin.GetMetadata", "", Body::StrMap(&empty)),
    ];
    for (seq, method, err, body) in &replies {
        enc.encode_response(&mut out, method, *seq, err, body);
    }
    out
}

/// rust_replies.bin was checked with `gobfixtures verify-replies` (Go's decoder). Regenerate with
/// ROLLGATE_UPDATE_FIXTURES=1 and check again with gobfixtures whenever the encoding changes.
#[test]
fn encoded_replies_match_the_go_verified_fixture() {
    let bytes = rust_replies();
    let path = fixture("rust_replies.bin");
    if std::env::var_os("ROLLGATE_UPDATE_FIXTURES").is_some() {
        std::fs::write(&path, &bytes).unwrap();
    }
    assert_eq!(bytes, std::fs::read(&path).unwrap());
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// Go's real request stream with one byte changed, dropped or the stream cut short still
    /// decodes to values or errors, never a panic.
    #[test]
    fn mutated_go_requests_never_panic(at in 0usize..40_000, byte in 0u8..=255, kind in 0u8..3) {
        let mut bytes = read_fixture("plugin_requests.bin");
        let at = at % bytes.len();
        match kind {
            0 => bytes[at] = byte,
            1 => { bytes.remove(at); }
            _ => bytes.truncate(at),
        }
        let service = PluginService::new(Arc::new(Idle));
        let mut dec = Decoder::new();
        let mut header: Option<RequestHeader> = None;
        let mut rest = &bytes[..];
        while let Ok(Some((w, n))) = super::gob::wire::parse_length_prefix(rest) {
            let Some(msg) = usize::try_from(n).ok().and_then(|n| rest.get(w..w + n)) else { break };
            rest = &rest[w + msg.len()..];
            match header.take() {
                None => if let Ok(Step::Value(h)) = dec.feed::<RequestHeader>(msg) { header = Some(h) },
                Some(h) => if let Ok(Step::NeedMore | Step::TypeDefined) = service.feed(&h.service_method, &mut dec, msg) {
                    header = Some(h)
                },
            }
        }
    }
}
