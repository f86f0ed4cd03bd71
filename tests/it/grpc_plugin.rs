//! rollgate's go-plugin gRPC mode, driven by a real go-plugin host: `grpchost`
//! (tests/gohost/cmd/grpchost), built on Debian's go-plugin 1.0.1 with `AllowedProtocols`
//! netrpc + grpc and `AutoMTLS: true`. It checks the handshake, health, the AutoMTLS refusals,
//! the stdio and broker streams, `GRPCController/Shutdown` and go-plugin's `Kill`, and calls
//! every method of `rollgate.v1.MetricProviderService` with requests built at run time from the
//! descriptor set. Also the handshake line itself, read straight from the process.
//!
//! go-plugin 1.0.1 supports AutoMTLS but predates GRPCStdio: grpchost opens
//! `plugin.GRPCStdio/StreamStdio` itself, as newer go-plugin hosts do.

use crate::grpc_support;
use crate::support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use support::gohost::run_command;
use support::stub::{closed_port, Mode, Stub, SAMPLE_TIME};

const LIMIT: Duration = Duration::from_secs(180);

/// The error rate the fake Prometheus reports.
const RATE: f64 = 0.004;

fn stub() -> Stub {
    Stub::start(Mode::Fixed(
        json!({"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": {"service": "payments"}, "value": [SAMPLE_TIME, RATE.to_string()]}
        ]}})
        .to_string(),
    ))
}

fn spec(address: &str, query: &str) -> String {
    json!({
        "prometheus": {"address": address, "timeout": "2s", "retries": 0},
        "query": query,
        "noData": "inconclusive",
    })
    .to_string()
}

const QUERY: &str =
    r#"sum(rate(http_requests_total{code=~"5.."}[5m])) / sum(rate(http_requests_total[5m]))"#;

fn metric(name: &str, spec: &str, success: &str) -> Value {
    json!({"name": name, "interval": "1m", "count": 5, "failure_limit": 1,
           "success_condition": success, "spec_json": spec})
}

/// Runs `grpchost check` with `calls`; returns its JSON result (asserting it exited 0).
fn check(calls: &Value, extra: &[&str]) -> Value {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), calls.to_string()).unwrap();
    let mut cmd = Command::new(grpc_support::grpchost());
    cmd.arg("check")
        .arg("-plugin")
        .arg(crate::support::rollgate_bin())
        .arg("-descriptor")
        .arg(grpc_support::descriptor_file())
        .arg("-calls")
        .arg(file.path())
        .args(extra);
    let run = run_command(cmd, LIMIT);
    run.assert_ok();
    let v = run.value().clone();
    for c in v["checks"].as_array().unwrap() {
        assert_eq!(c["ok"], true, "check failed: {c}\n{v}");
    }
    v
}

fn call<'a>(out: &'a Value, i: usize, method: &str) -> &'a Value {
    let c = &out["calls"][i];
    assert_eq!(c["method"], method, "call {i}: {c}");
    c
}

fn ok<'a>(out: &'a Value, i: usize, method: &str) -> &'a Value {
    let c = call(out, i, method);
    assert_eq!(c["code"], "OK", "call {i}: {c}");
    &c["response"]
}

fn refused(out: &Value, i: usize, method: &str, code: &str, says: &str) {
    let c = call(out, i, method);
    assert_eq!(c["code"], code, "call {i}: {c}");
    let message = c["message"].as_str().unwrap();
    assert!(
        message.contains(says),
        "call {i}: {message:?} lacks {says:?}"
    );
}

fn time(v: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(v.as_str().unwrap_or_else(|| panic!("not a time: {v}")))
        .unwrap()
        .with_timezone(&Utc)
}

#[test]
fn a_go_plugin_host_with_automtls_gets_every_method() {
    let prom = stub();
    let good = spec(&prom.url, QUERY);
    let down = spec(&closed_port(), QUERY);
    let started = "2026-01-02T03:04:05.123456789Z";
    let in_flight = json!({"phase": "PHASE_RUNNING", "message": "waiting for traffic",
                           "started_at": started, "resume_at": "2026-01-02T03:05:05Z"});
    let finished = json!({"phase": "PHASE_SUCCESSFUL", "message": "done before",
                          "started_at": started, "finished_at": "2026-01-02T03:04:06Z"});
    let run = json!({"name": "payments-7-2", "namespace": "payments", "uid": "4c1f",
                     "labels": {"rollout-type": "Step"}, "start_time": "2026-01-02T03:00:00Z"});
    // Arguments are values: one stands in for the regex literal, never for the query.
    let analyze_spec = spec(&prom.url, &QUERY.replace("5..", "{{args.code}}"));
    let at = "2026-01-02T03:04:05Z";
    let calls = json!([
        {"method": "InitPlugin", "request": {}},
        {"method": "Type", "request": {}},
        {"method": "GetMetadata", "request": {"metric": metric("error-rate", &good, "")}},
        {"method": "Run", "request": {"analysis_run": run, "metric": metric("error-rate", &good, "result[0] < 0.01")}},
        {"method": "Run", "request": {"analysis_run": run, "metric": metric("strict", &good, "result[0] < 0.001")}},
        {"method": "Resume", "request": {"analysis_run": run, "metric": metric("error-rate", &good, "result[0] < 0.01"), "measurement": in_flight}},
        {"method": "Resume", "request": {"metric": metric("error-rate", &good, ""), "measurement": finished}},
        {"method": "Terminate", "request": {"analysis_run": run, "metric": metric("error-rate", &good, ""), "measurement": in_flight}},
        {"method": "GarbageCollect", "request": {"analysis_run": run, "metric": metric("error-rate", &good, ""), "limit": 10}},
        {"method": "Analyze", "request": {"metric": metric("adhoc", &analyze_spec, "result[0] < {{args.max}}"),
                                          "args": {"code": "5..", "max": "0.01"}, "evaluation_time": at}},
        {"method": "Run", "request": {"analysis_run": run}},
        {"method": "Run", "request": {"metric": metric("broken", "{\"query\": ", "")}},
        {"method": "Run", "request": {"metric": metric("no-policy", &json!({"query": "up"}).to_string(), "")}},
        {"method": "Resume", "request": {"metric": metric("error-rate", &good, ""),
                                         "measurement": {"phase": 99, "started_at": started}}},
        {"method": "Terminate", "request": {"metric": metric("error-rate", &good, "")}},
        {"method": "Analyze", "request": {"metric": metric("adhoc", &analyze_spec, "")}},
        {"method": "Run", "request": {"metric": metric("unreachable", &down, "result[0] < 0.01")}},
    ]);
    let out = check(
        &calls,
        &["-mtls=true", "-env", "ROLLGATE_PLUGIN_PROTOCOL=grpc"],
    );
    assert_eq!(out["protocol"], "grpc");
    assert_eq!(out["mtls"], true);

    ok(&out, 0, "InitPlugin");
    assert_eq!(ok(&out, 1, "Type")["provider_type"], "RPCPlugin");
    let meta = &ok(&out, 2, "GetMetadata")["metadata"];
    assert_eq!(meta["kind"], "query");
    assert_eq!(meta["query"], QUERY);
    assert_eq!(meta["noData"], "inconclusive");

    let m = &ok(&out, 3, "Run")["measurement"];
    assert_eq!(m["phase"], "PHASE_SUCCESSFUL", "{m}");
    assert_eq!(m["value"], format!("[{RATE}]"));
    assert_eq!(m["metadata"]["metric"], "error-rate");
    assert!(time(&m["started_at"]) <= time(&m["finished_at"]), "{m}");
    assert!(m.get("resume_at").is_none(), "{m}");
    let m = &ok(&out, 4, "Run")["measurement"];
    assert_eq!(m["phase"], "PHASE_FAILED", "{m}");

    // Resume re-measures an in-flight measurement that is due and keeps its start.
    let m = &ok(&out, 5, "Resume")["measurement"];
    assert_eq!(m["phase"], "PHASE_SUCCESSFUL", "{m}");
    assert_eq!(time(&m["started_at"]), time(&json!(started)));
    // A finished one comes back unchanged.
    let m = &ok(&out, 6, "Resume")["measurement"];
    assert_eq!(
        (&m["phase"], &m["message"]),
        (&json!("PHASE_SUCCESSFUL"), &json!("done before"))
    );
    let m = &ok(&out, 7, "Terminate")["measurement"];
    assert_eq!(m["phase"], "PHASE_INCONCLUSIVE", "{m}");
    assert!(m["message"].as_str().unwrap().contains("terminated"), "{m}");
    assert_eq!(time(&m["started_at"]), time(&json!(started)));
    assert!(
        m.get("finished_at").is_some() && m.get("resume_at").is_none(),
        "{m}"
    );
    ok(&out, 8, "GarbageCollect");

    // Analyze: placeholders substituted in the spec and the condition, evaluated at the time asked.
    let m = &ok(&out, 9, "Analyze")["measurement"];
    assert_eq!(m["phase"], "PHASE_SUCCESSFUL", "{m}");
    assert_eq!(m["metadata"]["query"], QUERY);
    let sent = prom.last_request().expect("the stub saw Analyze's query");
    assert_eq!(sent.param("query").as_deref(), Some(QUERY));
    let sent_time: f64 = sent.param("time").unwrap().parse().unwrap();
    assert_eq!(sent_time, time(&json!(at)).timestamp() as f64);

    refused(&out, 10, "Run", "InvalidArgument", "metric: is required");
    refused(&out, 11, "Run", "InvalidArgument", "not valid JSON");
    refused(&out, 12, "Run", "InvalidArgument", "noData");
    refused(&out, 13, "Resume", "InvalidArgument", "unknown value 99");
    refused(
        &out,
        14,
        "Terminate",
        "InvalidArgument",
        "measurement: is required",
    );
    refused(&out, 15, "Analyze", "InvalidArgument", "args.code");

    // A Prometheus that cannot be reached is an Error measurement, never a failed call.
    let m = &ok(&out, 16, "Run")["measurement"];
    assert_eq!(m["phase"], "PHASE_ERROR", "{m}");
    assert!(
        m["message"]
            .as_str()
            .unwrap()
            .contains("cannot reach Prometheus"),
        "{m}"
    );
}

#[test]
fn plaintext_grpc_mode_by_flag() {
    let prom = stub();
    let calls = json!([
        {"method": "Run", "request": {"metric": metric("error-rate", &spec(&prom.url, QUERY), "result[0] < 0.01")}},
    ]);
    // Plugin arguments after `--`, as the ConfigMap's `args`.
    let out = check(&calls, &["-mtls=false", "--", "--protocol", "grpc"]);
    assert_eq!(out["mtls"], false);
    let m = &ok(&out, 0, "Run")["measurement"];
    assert_eq!(m["phase"], "PHASE_SUCCESSFUL", "{m}");
}

fn plugin() -> Command {
    let mut cmd = Command::new(crate::support::rollgate_bin());
    cmd.env("ARGO_ROLLOUTS_RPC_PLUGIN", "metricprovider")
        .env("PLUGIN_PROTOCOL_VERSIONS", "1")
        .env_remove("PLUGIN_CLIENT_CERT")
        .env_remove("ROLLGATE_PLUGIN_PROTOCOL")
        .env_remove("PLUGIN_UNIX_SOCKET_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    cmd
}

/// The handshake line, then SIGTERM; returns the line and the exit code.
fn handshake(mut cmd: Command) -> (String, Option<i32>) {
    let mut child: Child = cmd.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("the plugin ignored SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (line, status.code())
}

#[test]
fn the_handshake_line_announces_grpc_and_the_certificate() {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = plugin();
    cmd.env("ROLLGATE_PLUGIN_PROTOCOL", "grpc")
        .env("PLUGIN_CLIENT_CERT", ck.cert.pem())
        .env("PLUGIN_UNIX_SOCKET_DIR", dir.path());
    let (line, code) = handshake(cmd);
    let fields: Vec<&str> = line.trim_end_matches('\n').split('|').collect();
    assert_eq!(fields.len(), 6, "{line:?}");
    assert_eq!(&fields[..3], ["1", "1", "unix"], "{line:?}");
    assert!(
        fields[3].starts_with(dir.path().to_str().unwrap()),
        "{line:?}"
    );
    assert_eq!(fields[4], "grpc");
    assert!(!fields[5].contains('='), "padding in {line:?}");
    let der = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(fields[5])
        .unwrap();
    // A DER SEQUENCE naming localhost, not the host's certificate echoed back.
    assert_eq!(der.first(), Some(&0x30));
    assert!(der.windows(9).any(|w| w == b"localhost"));
    assert_ne!(der.as_slice(), ck.cert.der().as_ref());
    assert_eq!(code, Some(0), "SIGTERM is a clean exit");
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "the socket directory was left behind"
    );

    // Without AutoMTLS the sixth field is empty; `--protocol grpc` works as the variable does.
    let mut cmd = plugin();
    cmd.args(["--protocol", "grpc"]);
    let (line, _) = handshake(cmd);
    assert!(line.ends_with("|grpc|\n"), "{line:?}");

    // net/rpc stays the default: that is what Argo Rollouts accepts.
    let (line, _) = handshake(plugin());
    assert!(line.ends_with("|netrpc|\n"), "{line:?}");
}

#[test]
fn a_bad_protocol_or_certificate_is_refused_at_start() {
    let out = plugin()
        .args(["--protocol", "smoke"])
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("smoke") && err.contains("grpc"), "{err}");

    let out = plugin()
        .env("ROLLGATE_PLUGIN_PROTOCOL", "grpc")
        .env("PLUGIN_CLIENT_CERT", "not a certificate")
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stdout.is_empty(),
        "no handshake without a usable certificate"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("PLUGIN_CLIENT_CERT"), "{err}");
}

/// gRPC `Run` places a compare check by `analysis_run.status.metric_results[].count` (Argo's
/// counter) and by its listed measurements when more; without `status`, by wall time.
#[test]
fn grpc_run_places_compare_checks_by_the_runs_status() {
    let prom = stub();
    let compare = json!({"prometheus": {"address": prom.url, "timeout": "2s", "retries": 0},
        "noData": "inconclusive",
        "compare": {"canary": {"bad": "up", "total": "up"}, "stable": {"bad": "up", "total": "up"},
                    "minRequests": 0}})
    .to_string();
    let m =
        |count: i32| json!({"name": "cmp", "interval": "1m", "count": count, "spec_json": compare});
    let mut cumulative_spec: Value = serde_json::from_str(&compare).unwrap();
    cumulative_spec["compare"]["windows"] = json!("cumulative");
    let cumulative = json!({"name": "cmp", "interval": "1m", "count": 10,
        "spec_json": cumulative_spec.to_string()});
    let done = |phase: &str| json!({"phase": phase, "started_at": "2026-01-02T03:00:00Z"});
    let with = |results: Value| {
        json!({"name": "r", "start_time": "2026-01-02T03:00:00Z",
                                       "status": {"metric_results": results}})
    };
    let calls = json!([
        {"method": "Run", "request": {"metric": m(10), "analysis_run":
            with(json!([{"name": "cmp", "count": 6}, {"name": "other", "count": 2}]))}},
        {"method": "Run", "request": {"metric": m(10), "analysis_run":
            with(json!([{"name": "cmp", "measurements":
                [done("PHASE_SUCCESSFUL"), done("PHASE_ERROR"), done("PHASE_FAILED")]}]))}},
        {"method": "Run", "request": {"metric": m(10), "analysis_run": with(json!([]))}},
        {"method": "Run", "request": {"metric": m(10), "analysis_run":
            {"name": "r", "start_time": "2026-01-02T03:00:00Z"}}},
        {"method": "Run", "request": {"metric": m(10), "analysis_run":
            with(json!([{"name": "cmp", "count": -2}]))}},
        {"method": "Run", "request": {"metric": cumulative.clone(), "analysis_run":
            {"name": "r", "start_time": "2026-01-02T03:00:00Z"}}},
        {"method": "Run", "request": {"metric": cumulative.clone(), "analysis_run":
            with(json!([{"name": "cmp", "count": 9}]))}},
        {"method": "Run", "request": {"metric": cumulative, "analysis_run":
            with(json!([{"name": "cmp", "count": 12}]))}},
    ]);
    let out = check(&calls, &["-mtls=false", "--", "--protocol", "grpc"]);
    let meta = |i: usize| ok(&out, i, "Run")["measurement"]["metadata"].clone();
    assert_eq!(meta(0)["check"], "7 of 10", "{out}");
    assert_eq!(meta(0)["check.from"], "the run's recorded measurements");
    assert_eq!(meta(1)["check"], "3 of 10", "{out}");
    assert_eq!(meta(2)["check"], "1 of 10", "{out}");
    // No status: the run began long ago, so wall time says the last check.
    assert_eq!(meta(3)["check"], "10 of 10", "{out}");
    assert_eq!(meta(3)["check.from"], "wall time since the run began");
    refused(
        &out,
        4,
        "Run",
        "InvalidArgument",
        "analysis_run.status.metric_results[0].count: must be 0 or more",
    );
    // `windows: cumulative` keeps most of the budget for the last check, but only an exact
    // index gets it: wall time, or a count past the plan, can reach the last index more than
    // once, so those spend as `sliding` (0.05 * (1 - 0.9^2) at check 10 of 10).
    let alpha = |i: usize| {
        let m = ok(&out, i, "Run")["measurement"].clone();
        let value: Value = serde_json::from_str(m["value"].as_str().unwrap()).unwrap();
        (
            m["metadata"]["check"].clone(),
            value["alpha"].as_f64().unwrap(),
        )
    };
    let (check, estimated) = alpha(5);
    assert_eq!(check, "10 of 10", "{out}");
    assert!((estimated - 0.0095).abs() < 1e-12, "{estimated}");
    let (check, exact) = alpha(6);
    assert_eq!(check, "10 of 10", "{out}");
    assert!((exact - 0.0455).abs() < 1e-12, "{exact}");
    let (check, past_the_plan) = alpha(7);
    assert_eq!(check, "10 of 10", "{out}");
    assert!((past_the_plan - 0.0095).abs() < 1e-12, "{past_the_plan}");
}

/// Argo's `count` is an int32 (`intstr.IntOrString`, argo-rollouts v1.9.1
/// pkg/apis/rollouts/v1alpha1/analysis_types.go). `Metric.count` is int64 on the wire so that a
/// larger value reaches rollgate's one rule (shared with the net/rpc plugin and templates) and
/// is refused naming `count`, instead of being truncated to 1 by an int32 decoder.
#[test]
fn grpc_counts_outside_argos_int32_are_refused() {
    let prom = stub();
    let good = spec(&prom.url, QUERY);
    let m = |count: i64| json!({"name": "error-rate", "interval": "1m", "count": count, "spec_json": good});
    let calls = json!([
        {"method": "Run", "request": {"metric": m(4_294_967_297)}},
        {"method": "GetMetadata", "request": {"metric": m(2_147_483_648)}},
        {"method": "Run", "request": {"metric": m(-1)}},
        {"method": "Run", "request": {"metric": m(2_147_483_647)}},
    ]);
    let out = check(&calls, &["-mtls=false", "--", "--protocol", "grpc"]);
    let says = "count: expected a whole number from 0 to 2147483647";
    refused(&out, 0, "Run", "InvalidArgument", says);
    refused(&out, 0, "Run", "InvalidArgument", "4294967297");
    refused(&out, 1, "GetMetadata", "InvalidArgument", says);
    refused(&out, 2, "Run", "InvalidArgument", says);
    let m = &ok(&out, 3, "Run")["measurement"];
    assert_eq!(m["phase"], "PHASE_SUCCESSFUL", "{m}");
}
