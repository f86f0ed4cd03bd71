//! rollgate as an Argo Rollouts metric plugin, driven by a Go go-plugin host that plays the
//! controller (tests/gohost): the protocol, every method with full AnalysisRun values, bad
//! input, shutdown, concurrency, and each metric kind against a real Prometheus.

use crate::support;

use std::path::Path;

use serde_json::{json, Value};
use support::gohost::{build, HostRun};
use support::prom::shared;
use support::scenarios::{BAD, CMP_HEALTHY_CANARY, CMP_HEALTHY_STABLE, HEALTHY, LOWTRAFFIC};
use support::stub::{closed_port, Mode, Stub};

fn plugin() -> &'static Path {
    Path::new(crate::support::rollgate_bin())
}

fn check(sub: &str, args: &[&str]) -> HostRun {
    let run = build().run(sub, plugin(), args);
    assert!(
        run.ok(),
        "gohost {sub} failed: {}\n{}",
        run.stdout,
        run.stderr
    );
    run
}

#[test]
fn protocol_checks_pass() {
    let run = check("protocol", &[]);
    assert_eq!(run.value()["type"], "RPCPlugin");
}

#[test]
fn garbage_on_a_stream_does_not_kill_the_plugin() {
    check("garbage", &[]);
}

#[test]
fn quit_exits_within_one_second() {
    check("quit", &["-limit", "1s"]);
}

#[test]
fn a_wrong_cookie_exits_1_and_no_cookie_64_with_guidance() {
    let run = check("cookie", &[]);
    for case in run.value()["cases"].as_array().unwrap() {
        // A wrong cookie is go-plugin's refusal; no cookie and no arguments is a person
        // running the binary without a subcommand: help, and the usage-error code.
        let want = if case["name"] == "no cookie" { 64 } else { 1 };
        assert_eq!(case["exitCode"], want, "{case}");
        assert_eq!(case["stdout"], "", "{case}");
        assert!(!case["stderr"].as_str().unwrap().is_empty(), "{case}");
    }
}

#[test]
fn a_5_mb_analysis_run_is_served() {
    let run = check("bigrun", &["-mb", "5"]);
    let v = run.value();
    assert!(v["bytes"].as_u64().unwrap() >= 5 * 1024 * 1024, "{v}");
    assert_eq!(
        v["big"]["measurement"]["phase"], "Error",
        "closed port: {v}"
    );
}

#[test]
fn thirty_callers_with_a_thousand_runs_each_get_their_own_replies() {
    let prom = Stub::start(Mode::Fixed(
        r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"0.001"]}]}}"#.into(),
    ));
    let spec = r#"{"prometheus":{"address":"{{address}}"},"query":"vector(1)","noData":"error"}"#;
    let args = [
        "-callers", "30", "-runs", "1000", "-spec", spec, "-address", &prom.url,
    ];
    let run = check("load", &args);
    let v = run.value();
    assert_eq!(v["calls"], 30_000);
    assert_eq!(v["rpcErrors"], 0);
    assert_eq!(v["mismatches"], 0);
    assert_eq!(
        v["verifiedByMetadata"], 30_000,
        "every reply names its caller's metric: {v}"
    );
    assert_eq!(v["phases"]["Successful"], 30_000, "{v}");
    assert_eq!(prom.requests(), 30_000);
}

fn spec(query: &str, extra: Value) -> Value {
    let mut s =
        json!({"prometheus": {"address": shared().url}, "query": query, "noData": "inconclusive"});
    for (k, v) in extra.as_object().unwrap() {
        s[k] = v.clone();
    }
    s
}

fn guard(t: &support::scenarios::Traffic, on: &str) -> Value {
    json!({"minRequests": {"query": t.total_query("5m"), "count": 300, "onInsufficient": on}})
}

fn calls(list: Value) -> Vec<Value> {
    let run = build().calls(plugin(), &json!({"calls": list}), &[]);
    assert!(run.ok(), "{}\n{}", run.stdout, run.stderr);
    run.json
}

#[test]
fn query_metrics_through_the_controller_protocol() {
    // The plugin evaluates "now": the generated data reaches an hour past the harness' base.
    let replies = calls(json!([
        {"method": "Run", "metric": {"name": "healthy", "successCondition": "result[0] < 0.01",
            "spec": spec(&HEALTHY.ratio_query("5m"), guard(&HEALTHY, "inconclusive"))}},
        {"method": "Run", "metric": {"name": "bad", "successCondition": "result[0] < 0.01",
            "spec": spec(&BAD.ratio_query("5m"), guard(&BAD, "inconclusive"))}},
        {"method": "Run", "metric": {"name": "low", "interval": "1m", "successCondition": "result[0] < 0.01",
            "spec": spec(&LOWTRAFFIC.ratio_query("5m"), guard(&LOWTRAFFIC, "wait"))}},
        {"method": "Run", "metric": {"name": "invalid", "spec": {"query": "up"}}},
        {"method": "Run", "metric": {"name": "down", "spec":
            {"prometheus": {"address": closed_port(), "retries": 0}, "query": "up", "noData": "pass"}}},
        {"method": "Run", "metric": {"name": "garbage-json", "specRaw": "{not json"}},
        {"method": "GetMetadata", "metric": {"name": "healthy",
            "spec": spec(&HEALTHY.ratio_query("5m"), guard(&HEALTHY, "inconclusive"))}},
        {"method": "GarbageCollect", "metric": {"name": "healthy", "spec": spec("up", json!({}))}, "limit": 10},
        {"method": "Type"},
        {"method": "InitPlugin"},
    ]));
    let m = |i: usize| &replies[i]["measurement"];
    assert_eq!(m(0)["phase"], "Successful", "{}", replies[0]);
    assert!(m(0)["message"]
        .as_str()
        .unwrap()
        .contains("requests seen, 300 needed"));
    assert_eq!(m(0)["metadata"]["kind"], "query");
    assert!(m(0)["finishedAt"].is_string() && m(0)["resumeAt"].is_null());
    assert_eq!(m(1)["phase"], "Failed", "{}", replies[1]);
    let bad: Vec<f64> = serde_json::from_str(m(1)["value"].as_str().unwrap()).unwrap();
    assert!((bad[0] - 0.05).abs() < 0.001, "{bad:?}");
    assert_eq!(m(2)["phase"], "Running", "{}", replies[2]);
    assert!(
        m(2)["finishedAt"].is_null() && m(2)["resumeAt"].is_string(),
        "{}",
        replies[2]
    );
    assert_eq!(m(3)["phase"], "Error");
    assert!(
        m(3)["message"]
            .as_str()
            .unwrap()
            .contains("noData: is required"),
        "{}",
        replies[3]
    );
    assert_eq!(m(4)["phase"], "Error");
    assert!(
        m(4)["message"]
            .as_str()
            .unwrap()
            .contains("cannot reach Prometheus"),
        "{}",
        replies[4]
    );
    assert_eq!(m(5)["phase"], "Error");
    assert!(
        m(5)["message"].as_str().unwrap().contains("not valid JSON"),
        "{}",
        replies[5]
    );
    assert_eq!(replies[6]["metadata"]["minRequests.count"], "300");
    assert_eq!(replies[6]["metadata"]["kind"], "query");
    assert_eq!(replies[7]["error"], "");
    assert_eq!(replies[8]["type"], "RPCPlugin");
    assert_eq!(replies[9]["error"], "");
}

/// A compare metric's check is placed by the run's recorded measurements (Argo's
/// `MetricResult.Count`, analysis/analysis.go v1.9.1), not by wall time: gohost's run started
/// six minutes ago with a 1m interval, so wall time alone would say check 7.
#[test]
fn compare_checks_are_placed_by_the_runs_recorded_measurements() {
    let compare = json!({"prometheus": {"address": shared().url}, "noData": "inconclusive",
        "compare": {
            "canary": {"bad": CMP_HEALTHY_CANARY.bad_query("10m"), "total": CMP_HEALTHY_CANARY.total_query("10m")},
            "stable": {"bad": CMP_HEALTHY_STABLE.bad_query("10m"), "total": CMP_HEALTHY_STABLE.total_query("10m")},
            "minRequests": 0}});
    let metric = |count: Option<u32>| {
        let mut m = json!({"name": "cmp", "interval": "1m", "spec": compare});
        if let Some(n) = count {
            m["count"] = json!(n);
        }
        m
    };
    let replies = calls(json!([
        {"method": "Run", "metric": metric(Some(10)), "history": {"completed": 0, "errors": 0}},
        {"method": "Run", "metric": metric(Some(10)), "history": {"completed": 4}},
        // Errors are retried and not counted; the list is trimmed to its newest two entries.
        {"method": "Run", "metric": metric(Some(10)), "history": {"completed": 6, "errors": 2, "listed": 2}},
        {"method": "Run", "metric": metric(Some(10)), "history": {"completed": 9}},
        {"method": "Run", "metric": metric(None), "history": {"completed": 12}},
        // gohost's default history: three Successful measurements.
        {"method": "Run", "metric": metric(Some(10))},
    ]));
    let count_of = |i: usize| (i != 4).then_some(10);
    let expected = [
        ("1 of 10", 1),
        ("5 of 10", 5),
        ("7 of 10", 7),
        ("10 of 10", 10),
        ("13 (open-ended run)", 13),
        ("4 of 10", 4),
    ];
    for (i, (text, index)) in expected.into_iter().enumerate() {
        let m = &replies[i]["measurement"];
        if count_of(i).is_none() {
            // An open-ended ratio metric needs no index: its e-detector reads the intervals
            // since the run's start, whatever the history says.
            assert_eq!(
                m["metadata"]["check.from"],
                "the run's start and the data (anytime-valid e-detector)",
                "{}",
                replies[i]
            );
            continue;
        }
        assert_eq!(m["metadata"]["check"], text, "{}", replies[i]);
        assert_eq!(
            m["metadata"]["check.from"], "the run's recorded measurements",
            "{}",
            replies[i]
        );
        let value: Value = serde_json::from_str(m["value"].as_str().unwrap())
            .unwrap_or_else(|e| panic!("{e}: {}", replies[i]));
        assert_eq!(value["look"]["index"], index, "{value}");
    }
}

#[test]
fn resume_and_terminate_of_a_waiting_measurement() {
    let metric = json!({"name": "low", "interval": "1m", "successCondition": "result[0] < 0.01",
        "spec": spec(&LOWTRAFFIC.ratio_query("5m"), guard(&LOWTRAFFIC, "wait"))});
    let started = (chrono::Utc::now() - chrono::Duration::seconds(120)).to_rfc3339();
    let due = (chrono::Utc::now() - chrono::Duration::seconds(1)).to_rfc3339();
    let later = (chrono::Utc::now() + chrono::Duration::seconds(20)).to_rfc3339();
    let waiting = |resume: &str| {
        json!({"phase": "Running", "message": "waiting", "startedAt": started,
        "finishedAt": null, "value": "", "metadata": {}, "resumeAt": resume})
    };
    let replies = calls(json!([
        {"method": "Resume", "metric": metric, "measurement": waiting(&later)},
        {"method": "Resume", "metric": metric, "measurement": waiting(&due)},
        {"method": "Terminate", "metric": metric, "measurement": waiting(&later)},
    ]));
    let m = |i: usize| &replies[i]["measurement"];
    // Not yet due: returned unchanged, still in flight.
    assert_eq!(m(0)["phase"], "Running", "{}", replies[0]);
    assert!(m(0)["finishedAt"].is_null());
    // Due, and the wait began two minutes ago (beyond the 1m interval): it gives up.
    assert_eq!(m(1)["phase"], "Inconclusive", "{}", replies[1]);
    assert!(
        m(1)["message"].as_str().unwrap().contains("after waiting"),
        "{}",
        replies[1]
    );
    assert!(m(1)["finishedAt"].is_string());
    assert_eq!(m(2)["phase"], "Inconclusive", "{}", replies[2]);
    assert!(
        m(2)["message"].as_str().unwrap().starts_with("terminated"),
        "{}",
        replies[2]
    );
    assert!(m(2)["finishedAt"].is_string());
}

#[test]
fn the_release_binary_is_static() {
    let bytes = std::fs::read(plugin()).unwrap();
    // An ELF with a PT_INTERP segment needs a dynamic loader, which distroless/static lacks.
    let interp = b"/lib64/ld-linux-x86-64.so";
    assert!(
        !bytes.windows(interp.len()).any(|w| w == interp),
        "{} asks for a dynamic loader",
        plugin().display()
    );
    assert_eq!(&bytes[..4], b"\x7fELF");
}

/// Writes the spanning `Plugin.Run` layout (a `[]interface{}` whose elements each
/// end a gob message; built by `rollgate::goplugin::gob::testkit`) of `size` bytes to a file
/// for `gohost spanning`.
fn spanning_frames(dir: &Path, size: usize) -> std::path::PathBuf {
    let msgs = rollgate::goplugin::gob::testkit::plugin_run_request(1 << 40, size, true);
    let path = dir.join(format!("spanning-{size}.bin"));
    std::fs::write(&path, rollgate::goplugin::gob::testkit::frame(&msgs)).unwrap();
    path
}

#[test]
fn a_run_spanning_fifty_thousand_messages_is_decoded_promptly() {
    // Quadratic decoding took about 2 minutes for 1 MiB in this layout.
    let dir = tempfile::tempdir().unwrap();
    let frames = spanning_frames(dir.path(), 1 << 20);
    let frames = frames.to_str().unwrap();
    let run = check("spanning", &["-frames", frames, "-limit", "60s"]);
    let v = run.value();
    assert_eq!(v["writeError"], Value::Null, "{v}");
    assert_eq!(v["typeError"], Value::Null, "{v}");
    assert_eq!(v["exited"], false, "{v}");
    assert_eq!(v["extraStdout"], 0, "{v}");
    eprintln!("gohost spanning, 1 MiB: {v}");
    let ms = v["typeMs"].as_f64().unwrap();
    assert!(
        ms < 5_000.0,
        "1 MiB spanning Run took {ms} ms to decode: {v}"
    );
}

#[test]
fn sigterm_ends_the_plugin_while_a_48_mib_spanning_value_is_being_decoded() {
    // SIGTERM once did not end the process while it decoded (SIGKILL did). 48 MiB (under
    // the 64 MiB a value may span) takes a few hundred ms to receive and decode at the 1 MiB
    // test's 7-30 ms per MiB; SIGTERM comes 100 ms in.
    let dir = tempfile::tempdir().unwrap();
    let frames = spanning_frames(dir.path(), 48 << 20);
    let frames = frames.to_str().unwrap();
    let run = check(
        "spanning",
        &[
            "-frames",
            frames,
            "-sigterm-after",
            "100ms",
            "-limit",
            "20s",
        ],
    );
    let v = run.value();
    eprintln!("gohost spanning, 48 MiB, SIGTERM after 100 ms: {v}");
    assert_eq!(v["signalled"], true, "{v}");
    assert_eq!(v["exited"], true, "{v}");
    let ms = v["exitMs"].as_f64().unwrap();
    assert!(ms < 1_000.0, "exit took {ms} ms after SIGTERM: {v}");
    assert_eq!(v["exitCode"], 0, "{v}");
}

#[test]
fn settings_by_environment_alone_as_argo_rollouts_1_5_and_1_6_start_the_plugin() {
    // Argo Rollouts v1.5/v1.6 run `exec.Command(pluginPath)` (metricproviders/plugin/client,
    // no args) and go-plugin passes the controller's environment on: the address comes from
    // ROLLGATE_PROMETHEUS_ADDRESS, the spec names none.
    let metric = json!({"name": "healthy", "successCondition": "result[0] < 0.01",
        "spec": {"query": HEALTHY.ratio_query("5m"), "noData": "inconclusive"}});
    let list = json!({"calls": [{"method": "Run", "metric": metric}]});
    let env = format!("ROLLGATE_PROMETHEUS_ADDRESS={}", shared().url);
    let stderr = tempfile::NamedTempFile::new().unwrap();
    let stderr_path = stderr.path().to_str().unwrap();
    let run = build().calls(
        plugin(),
        &list,
        &[
            "-env",
            &env,
            "-env",
            "ROLLGATE_LOG=debug",
            "-plugin-stderr",
            stderr_path,
        ],
    );
    assert!(run.ok(), "{}\n{}", run.stdout, run.stderr);
    let m = &run.json[0]["measurement"];
    assert_eq!(m["phase"], "Successful", "{}", run.json[0]);
    // ROLLGATE_LOG=debug reached the plugin: its debug lines are on its stderr.
    let log = std::fs::read_to_string(stderr.path()).unwrap();
    assert!(log.contains("\"@level\":\"debug\""), "{log}");
    // Without the variable the same metric has no address: an Error that says how to set one.
    let run = build().calls(plugin(), &list, &[]);
    assert!(run.ok(), "{}\n{}", run.stdout, run.stderr);
    let m = &run.json[0]["measurement"];
    assert_eq!(m["phase"], "Error", "{}", run.json[0]);
    assert!(
        m["message"]
            .as_str()
            .unwrap()
            .contains("ROLLGATE_PROMETHEUS_ADDRESS"),
        "{}",
        run.json[0]
    );
}

/// A `count` past Argo's int32 (argo-rollouts v1.9.1, analysis_types.go: Count is an
/// `intstr.IntOrString`; `{{args.count}}` leaves a string, which the controller's
/// `int32(Count.IntValue())` would wrap to 1) was dropped by the plugin without a word. Now the
/// same rule as templates and gRPC: an Error naming `count`, and in GetMetadata.
#[test]
fn counts_outside_argos_int32_are_an_error_naming_count() {
    let s = spec("up", json!({}));
    let replies = calls(json!([
        {"method": "Run", "metric": {"name": "huge", "interval": "1m", "count": "4294967297", "spec": s}},
        {"method": "Run", "metric": {"name": "words", "interval": "1m", "count": "five", "spec": s}},
        {"method": "GetMetadata", "metric": {"name": "huge", "interval": "1m", "count": "2147483648", "spec": s}},
        {"method": "GetMetadata", "metric": {"name": "max", "interval": "1m", "count": "2147483647", "spec": s}},
    ]));
    let says = "count: expected a whole number from 0 to 2147483647";
    for reply in &replies[..2] {
        let m = &reply["measurement"];
        assert_eq!(m["phase"], "Error", "{reply}");
        assert!(m["message"].as_str().unwrap().contains(says), "{reply}");
    }
    assert!(replies[0]["measurement"]["message"]
        .as_str()
        .unwrap()
        .contains("4294967297"));
    let error = replies[2]["metadata"]["error"].as_str().unwrap_or_default();
    assert!(error.contains(says), "{}", replies[2]);
    assert_eq!(replies[3]["metadata"]["kind"], "query", "{}", replies[3]);
}
