//! The `cloudwatch` backend through the real binary (`rollgate dry-run -o json`, AWS
//! credentials in its environment): the scenario matrix against moto's CloudWatch loaded with
//! `support::cloudwatch`'s data, compare, Argo's own provider tests, signatures checked by
//! botocore's signer (`tests/support/sigv4_standin.py` in front of moto), and credentials that
//! never reach a message.
//!
//! Needs python3 with `moto[server]` and botocore (`.ci/run` installs them).

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use chrono::{TimeZone, Utc};
use serde_json::{json, Value};
use support::cloudwatch::shared;
use support::stub::{closed_port, json as reply, Mode, Stub};

const KEY_ID: &str = "AKIDCLOUDWATCHTEST";
const SECRET: &str = "cloudwatch-test-secret-0123456789";
const SESSION: &str = "cloudwatch-test-session-token-fedcba";

/// A MetricStat query in Argo's `metricDataQueries` form, on the moto data (5m, one datapoint).
fn stat(service: &str, metric: &str, stat: &str) -> String {
    format!(
        r#"
- id: m
  metricStat:
    metric:
      namespace: Rollgate/Test
      metricName: {metric}
      dimensions:
        - name: Service
          value: {service}
    period: 300
    stat: {stat}
"#
    )
}

/// The same for one track of a compare pair (two dimensions, in the order they were written).
fn track(service: &str, track: &str, metric: &str) -> String {
    format!(
        r#"[{{"id": "m", "metricStat": {{"metric": {{"namespace": "Rollgate/Test", "metricName": "{metric}",
            "dimensions": [{{"name": "Service", "value": "{service}"}}, {{"name": "Track", "value": "{track}"}}]}},
            "period": 600, "stat": "Sum"}}}}]"#
    )
}

fn block(address: &str) -> Value {
    json!({"region": "us-east-1", "address": address, "timeout": "2s", "retries": 0})
}

/// A query metric on `address` with the error rate of `service` and, when `guarded`, its
/// request count as the guard.
fn query_metric(name: &str, address: &str, service: &str, guarded: bool, no_data: &str) -> Value {
    let mut spec = json!({
        "cloudwatch": block(address),
        "query": stat(service, "ErrorRate", "Maximum"),
        "noData": no_data,
    });
    if guarded {
        spec["minRequests"] = json!({"query": stat(service, "Requests", "Sum"), "count": 300});
    }
    json!({
        "name": name,
        "successCondition": "result[0].Values[0] <= 0.01",
        "failureCondition": "result[0].Values[0] > 0.01",
        "provider": {"plugin": {"rollgate/analysis": spec}},
    })
}

/// `rollgate dry-run -o json` on a template of `metrics` at `at` (Unix seconds), signing with
/// the test's credentials and none of this machine's; the output document and stderr.
fn dry_run(metrics: Vec<Value>, at: i64, secret: &str) -> (Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cloudwatch.yaml");
    let template = json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisTemplate",
        "metadata": {"name": "cw"}, "spec": {"metrics": metrics},
    });
    std::fs::write(&file, serde_json::to_string_pretty(&template).unwrap()).unwrap();
    let at = Utc.timestamp_opt(at, 0).single().unwrap().to_rfc3339();
    let mut cmd = Command::new(support::rollgate_bin());
    cmd.args([
        "dry-run",
        "--log-level",
        "debug",
        "-o",
        "json",
        "--at",
        &at,
        "-f",
    ])
    .arg(&file);
    isolated_aws_env(&mut cmd, dir.path(), secret);
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let doc = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("JSON output ({e}): {stdout}\n{stderr}"));
    (doc, stderr)
}

fn isolated_aws_env(cmd: &mut Command, dir: &Path, secret: &str) {
    for var in [
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_ROLE_ARN",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("AWS_ACCESS_KEY_ID", KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", secret)
        .env("AWS_SESSION_TOKEN", SESSION)
        .env("AWS_SHARED_CREDENTIALS_FILE", dir.join("no-credentials"))
        .env("AWS_CONFIG_FILE", dir.join("no-config"))
        .env("AWS_EC2_METADATA_DISABLED", "true");
}

fn by_name<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("no metric {name}: {doc}"))
}

fn phase(doc: &Value, name: &str) -> String {
    by_name(doc, name)["phase"].as_str().unwrap().to_string()
}

fn message(doc: &Value, name: &str) -> String {
    by_name(doc, name)["message"].as_str().unwrap().to_string()
}

/// The scenario matrix of the Prometheus tests (`query_kind.rs`), with the same verdicts:
/// healthy, bad, low traffic, no data, 0/0, and a server that is down, slow or answers garbage.
#[test]
fn scenario_matrix_gives_the_prometheus_verdicts() {
    let moto = shared();
    let url = moto.url.as_str();
    let down = closed_port();
    let good = r#"{"MetricDataResults":[{"Id":"m","Label":"m","Timestamps":[1],"Values":[0.001],"StatusCode":"Complete"}]}"#;
    let slow = Stub::start(Mode::Slow(
        Duration::from_secs(5),
        Box::new(Mode::Status(200, good.into())),
    ));
    let garbage = Stub::start(Mode::Garbage);
    let partial = Stub::start(Mode::Status(
        200,
        r#"{"MetricDataResults":[{"Id":"m","Label":"m","Timestamps":[1],"Values":[0.001],"StatusCode":"PartialData"}]}"#.into(),
    ));
    let metrics = vec![
        query_metric("healthy", url, "healthy", true, "fail"),
        query_metric("bad", url, "bad", true, "fail"),
        query_metric("lowtraffic", url, "lowtraffic", true, "fail"),
        query_metric("absent-fail", url, "absent", false, "fail"),
        query_metric("absent-inconclusive", url, "absent", false, "inconclusive"),
        query_metric("idle-guarded", url, "idle", true, "pass"),
        query_metric("idle-unguarded", url, "idle", false, "fail"),
        query_metric("down", &down, "healthy", true, "fail"),
        query_metric("slow", &slow.url, "healthy", false, "fail"),
        query_metric("garbage", &garbage.url, "healthy", false, "fail"),
        query_metric("partial", &partial.url, "healthy", false, "pass"),
    ];
    let (doc, stderr) = dry_run(metrics, moto.base, SECRET);
    let healthy = by_name(&doc, "healthy");
    assert_eq!(healthy["phase"], "Successful", "{healthy}");
    assert_eq!(healthy["value"], "[[0.001]]");
    assert_eq!(healthy["metadata"]["minRequests.seen"], "30,000");
    let bad = by_name(&doc, "bad");
    assert_eq!(bad["phase"], "Failed", "{bad}");
    assert_eq!(bad["value"], "[[0.05]]");
    assert_eq!(phase(&doc, "lowtraffic"), "Inconclusive");
    assert!(
        message(&doc, "lowtraffic").contains("15 requests seen, 300 needed"),
        "{doc}"
    );
    assert_eq!(phase(&doc, "absent-fail"), "Failed");
    assert!(message(&doc, "absent-fail").contains("no data"), "{doc}");
    assert_eq!(phase(&doc, "absent-inconclusive"), "Inconclusive");
    // 0/0: no requests at all is below the guard (never a pass, even with noData: pass), and
    // without a guard the missing ratio is no data.
    assert_eq!(phase(&doc, "idle-guarded"), "Inconclusive", "{doc}");
    assert!(
        message(&doc, "idle-guarded").contains("0 requests seen"),
        "{doc}"
    );
    assert_eq!(phase(&doc, "idle-unguarded"), "Failed");
    assert!(message(&doc, "idle-unguarded").contains("no data"), "{doc}");
    assert_eq!(phase(&doc, "down"), "Error");
    assert!(
        message(&doc, "down").contains("cannot reach CloudWatch at"),
        "{doc}"
    );
    assert_eq!(phase(&doc, "slow"), "Error");
    assert!(
        message(&doc, "slow").contains("did not answer within 2s"),
        "{doc}"
    );
    assert_eq!(phase(&doc, "garbage"), "Error");
    assert!(
        message(&doc, "garbage").contains("malformed response from CloudWatch"),
        "{doc}"
    );
    // Partial data is never a pass, whatever noData says.
    assert_eq!(phase(&doc, "partial"), "Error");
    assert!(message(&doc, "partial").contains("PartialData"), "{doc}");
    assert!(!stderr.contains(SESSION), "{stderr}");
}

/// A check without `--at` reads the window ending now: the data runs an hour past `base`.
#[test]
fn a_check_at_now_reads_the_last_interval() {
    let moto = shared();
    let now = Utc::now().timestamp();
    let (doc, _) = dry_run(
        vec![query_metric("healthy", &moto.url, "healthy", true, "fail")],
        now,
        SECRET,
    );
    assert_eq!(phase(&doc, "healthy"), "Successful", "{doc}");
}

/// The compare kind's ratio form on CloudWatch counts: canary worse → Failed, equal →
/// Successful.
#[test]
fn compare_ratio_form_judges_canary_against_stable() {
    let moto = shared();
    let compare = |name: &str, service: &str| {
        json!({
            "name": name, "count": 3,
            "provider": {"plugin": {"rollgate/analysis": {
                "cloudwatch": {"region": "us-east-1", "address": moto.url, "interval": "10m", "retries": 0},
                "compare": {
                    "canary": {"bad": track(service, "canary", "Errors"), "total": track(service, "canary", "Requests")},
                    "stable": {"bad": track(service, "stable", "Errors"), "total": track(service, "stable", "Requests")},
                    "maxIncrease": 0.2, "margin": 0.001, "confidence": 0.95, "minRequests": 500
                },
                "noData": "inconclusive"
            }}}
        })
    };
    let (doc, _) = dry_run(
        vec![compare("equal", "cmp-healthy"), compare("worse", "cmp-bad")],
        moto.base,
        SECRET,
    );
    let equal = by_name(&doc, "equal");
    assert_eq!(equal["phase"], "Successful", "{equal}");
    let v: Value = serde_json::from_str(equal["value"].as_str().unwrap()).unwrap();
    assert_eq!(v["canary"]["total"], 6000, "{v}");
    assert_eq!(v["canary"]["bad"], 60, "{v}");
    let worse = by_name(&doc, "worse");
    assert_eq!(worse["phase"], "Failed", "{worse}");
    let v: Value = serde_json::from_str(worse["value"].as_str().unwrap()).unwrap();
    assert_eq!(v["canary"]["bad"], 600, "{v}");
    assert_eq!(v["stable"]["bad"], 60, "{v}");
}

/// The compare kind's distribution form: one range request per side, a datapoint per step
/// (a query without its own period gets the step): slower canary → Failed, same → Successful.
#[test]
fn compare_distribution_form_reads_ranges() {
    let moto = shared();
    let latency = |service: &str, track: &str| {
        format!(
            r#"[{{"id": "lat", "metricStat": {{"metric": {{"namespace": "Rollgate/Test", "metricName": "Latency",
                "dimensions": [{{"name": "Service", "value": "{service}"}}, {{"name": "Track", "value": "{track}"}}]}},
                "stat": "Average"}}}}]"#
        )
    };
    let compare = |name: &str, service: &str| {
        json!({
            "name": name,
            "provider": {"plugin": {"rollgate/analysis": {
                "cloudwatch": block(&moto.url),
                "compare": {
                    "canary": latency(service, "canary"), "stable": latency(service, "stable"),
                    "window": "30m", "step": "1m", "direction": "increase", "maxIncrease": 0.1,
                    "confidence": 0.98, "minSamples": 20
                },
                "noData": "inconclusive"
            }}}
        })
    };
    let (doc, _) = dry_run(
        vec![compare("shift", "lat-shift"), compare("same", "lat-same")],
        moto.base,
        SECRET,
    );
    let shift = by_name(&doc, "shift");
    assert_eq!(shift["phase"], "Failed", "{shift}");
    let v: Value = serde_json::from_str(shift["value"].as_str().unwrap()).unwrap();
    assert_eq!(v["classification"], "high", "{v}");
    // start..=end every minute over 30m: 31 samples, as Prometheus gives (compare_kind.rs).
    assert_eq!(v["canary"]["count"], 31, "{v}");
    let same = by_name(&doc, "same");
    assert_eq!(same["phase"], "Successful", "{same}");
}

/// Argo Rollouts' own provider tests (`metricproviders/cloudwatch/cloudwatch_test.go`,
/// v1.9.1), through rollgate's `query` kind with the same conditions: the answers their mock
/// API gives and the phase and value they expect.
#[test]
fn argo_provider_tests_keep_their_phase_and_value() {
    let success = "result[0].Values[0] == 0.1";
    let failure = "result[0].Values[0] != 0.1";
    // TestRunSuccessfully: one result, Values [0.1 0.2 0.3] → Successful, `[[0.1 0.2 0.3]]`.
    let ok = Stub::start(Mode::Status(
        200,
        r#"{"MetricDataResults":[{"Values":[0.1,0.2,0.3]}]}"#.into(),
    ));
    // The failure condition's side of the same case (not in Argo's file): Failed.
    let other = Stub::start(Mode::Status(
        200,
        r#"{"MetricDataResults":[{"Values":[0.2,0.1]}]}"#.into(),
    ));
    // TestRunWithEvaluationError: the API's 400 ValidationError → Error, value "".
    let invalid = Stub::start(Mode::Status(
        400,
        r#"{"__type":"com.amazon.coral.validate#ValidationError","message":"1 validation error detected: Value null at 'metricDataQueries' failed to satisfy constraint: Member must not be null"}"#.into(),
    ));
    let metric = |name: &str, address: &str| {
        json!({
            "name": name, "successCondition": success, "failureCondition": failure,
            "provider": {"plugin": {"rollgate/analysis": {
                "cloudwatch": block(address), "query": "SELECT AVG(Latency) FROM \"App\"",
                "noData": "fail",
            }}}
        })
    };
    let (doc, _) = dry_run(
        vec![
            metric("run-successfully", &ok.url),
            metric("failure-condition", &other.url),
            metric("evaluation-error", &invalid.url),
        ],
        shared().base,
        SECRET,
    );
    let m = by_name(&doc, "run-successfully");
    assert_eq!(m["phase"], "Successful", "{m}");
    assert_eq!(m["value"], "[[0.1 0.2 0.3]]");
    let m = by_name(&doc, "failure-condition");
    assert_eq!(m["phase"], "Failed", "{m}");
    assert_eq!(m["value"], "[[0.2 0.1]]");
    let m = by_name(&doc, "evaluation-error");
    assert_eq!(m["phase"], "Error", "{m}");
    assert_eq!(m["value"], "");
    assert!(
        m["message"].as_str().unwrap().contains("ValidationError"),
        "{m}"
    );
    // The expression form is one MetricDataQuery with the window as its period.
    let sent: Value = serde_json::from_slice(&ok.last_request().unwrap().body).unwrap();
    assert_eq!(
        sent["MetricDataQueries"],
        json!([{"Id": "q", "Expression": "SELECT AVG(Latency) FROM \"App\"", "Period": 300, "ReturnData": true}])
    );
    assert_eq!(sent["EndTime"], shared().base);
    assert_eq!(sent["StartTime"], shared().base - 300);
}

/// A rate limit is an Error naming it, never a pass: HTTP 429, and CloudWatch's own
/// throttling answer (400 `ThrottlingException`).
#[test]
fn rate_limits_are_errors() {
    let limited = Stub::start(Mode::Status(429, r#"{"message":"Rate exceeded"}"#.into()));
    let throttled = Stub::start(Mode::Status(
        400,
        r#"{"__type":"com.amazon.coral.availability#ThrottlingException","message":"Rate exceeded"}"#.into(),
    ));
    let (doc, _) = dry_run(
        vec![
            query_metric("limited", &limited.url, "healthy", false, "pass"),
            query_metric("throttled", &throttled.url, "healthy", false, "pass"),
        ],
        shared().base,
        SECRET,
    );
    for name in ["limited", "throttled"] {
        assert_eq!(phase(&doc, name), "Error", "{doc}");
        assert!(message(&doc, name).contains("rate limit"), "{doc}");
    }
}

/// The SigV4 stand-in in front of moto, verifying every signature with botocore's signer.
struct StandIn {
    child: Child,
    _stdin: ChildStdin,
    url: String,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl StandIn {
    fn start(extra: &[&str]) -> StandIn {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("verified.log");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/sigv4_standin.py");
        let key = format!("{KEY_ID}={SECRET}={SESSION}");
        let mut child = Command::new("python3")
            .arg(script)
            .args(["--upstream", &shared().url, "--service", "monitoring"])
            .args(["--key", &key, "--log", log.to_str().unwrap()])
            .args([
                "--forward-header",
                "Authorization",
                "--forward-header",
                "X-Amz-Target",
            ])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .strip_prefix("READY ")
            .unwrap_or_else(|| panic!("stand-in: {line:?}"));
        StandIn {
            child,
            _stdin: stdin,
            url: format!("http://127.0.0.1:{}", port.trim()),
            log,
            _dir: dir,
        }
    }

    fn verified(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| *l == KEY_ID)
            .count()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every request is signed as botocore signs it (service `monitoring`, the block's region,
/// the session token), verified by botocore's own signer before moto answers; a wrong secret
/// is refused and the refusal is an Error that says what to check.
#[test]
fn requests_are_signed_as_botocore_verifies() {
    let standin = StandIn::start(&[]);
    let base = shared().base;
    let (doc, _) = dry_run(
        vec![query_metric(
            "signed",
            &standin.url,
            "healthy",
            true,
            "fail",
        )],
        base,
        SECRET,
    );
    assert_eq!(phase(&doc, "signed"), "Successful", "{doc}");
    assert_eq!(
        standin.verified(),
        2,
        "the query and the guard, each verified"
    );

    let (doc, stderr) = dry_run(
        vec![query_metric(
            "wrong-secret",
            &standin.url,
            "healthy",
            false,
            "pass",
        )],
        base,
        "not-the-secret",
    );
    assert_eq!(phase(&doc, "wrong-secret"), "Error", "{doc}");
    let text = message(&doc, "wrong-secret");
    assert!(text.contains("HTTP 403"), "{text}");
    assert!(text.contains("AWS refused the signed request"), "{text}");
    assert!(
        text.contains("signature we calculated does not match"),
        "{text}"
    );
    assert!(!stderr.contains("not-the-secret"), "{stderr}");
    assert_eq!(standin.verified(), 2);

    // The region the block names is the one signed for.
    let mut m = query_metric("wrong-region", &standin.url, "healthy", false, "pass");
    m["provider"]["plugin"]["rollgate/analysis"]["cloudwatch"]["region"] = json!("eu-west-1");
    let (doc, _) = dry_run(vec![m], base, SECRET);
    assert!(
        message(&doc, "wrong-region").contains("scoped to a valid region"),
        "{doc}"
    );
}

/// A server that echoes the session token in its refusal: the token never reaches the
/// message, the metadata or the logs.
#[test]
fn an_echoed_session_token_never_reaches_messages_or_logs() {
    let standin = StandIn::start(&["--echo-token"]);
    // A key the stand-in does not know: it answers with the token it was sent.
    let mut cmd_metric = query_metric("echo", &standin.url, "healthy", false, "pass");
    cmd_metric["provider"]["plugin"]["rollgate/analysis"]["cloudwatch"]["retries"] = json!(1);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.yaml");
    let template = json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisTemplate",
        "metadata": {"name": "cw"}, "spec": {"metrics": [cmd_metric]}});
    std::fs::write(&file, template.to_string()).unwrap();
    let mut cmd = Command::new(support::rollgate_bin());
    cmd.args(["dry-run", "--log-level", "trace", "-o", "json", "-f"])
        .arg(&file);
    isolated_aws_env(&mut cmd, dir.path(), SECRET);
    cmd.env("AWS_ACCESS_KEY_ID", "AKIDUNKNOWN");
    let out = cmd.output().unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        printed.contains("security token included in the request is invalid"),
        "{printed}"
    );
    assert!(!printed.contains(SESSION), "{printed}");
    assert!(!printed.contains(SECRET), "{printed}");
    assert_eq!(standin.verified(), 0);
}

/// Bad blocks and queries are refused with the key or the reason.
#[test]
fn bad_blocks_and_queries_say_what_is_wrong() {
    let stub = Stub::script(|_, _| reply(500, "{}"));
    let mut metrics = Vec::new();
    let mut bad_query = query_metric("bad-query", &stub.url, "healthy", false, "pass");
    bad_query["provider"]["plugin"]["rollgate/analysis"]["query"] =
        json!("- id: Rate\n  expression: x");
    metrics.push(bad_query);
    // Refused where the template is read (lint, serve's readiness), never sent.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.yaml");
    let template = json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisTemplate",
        "metadata": {"name": "cw"}, "spec": {"metrics": metrics}});
    std::fs::write(&file, template.to_string()).unwrap();
    let out = Command::new(support::rollgate_bin())
        .args(["lint"])
        .arg(&file)
        .output()
        .unwrap();
    let printed =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{printed}");
    assert!(
        printed.contains("must start with a lower-case letter"),
        "{printed}"
    );
    assert_eq!(stub.requests(), 0, "a bad query is never sent");

    for (key, value, want) in [
        ("region", json!("us east"), "cloudwatch.region"),
        ("interval", json!("90s"), "cloudwatch.interval"),
        ("period", json!("45s"), "cloudwatch.period"),
        ("apiKey", json!("x"), "apiKey"),
    ] {
        let mut m = query_metric("m", &stub.url, "healthy", false, "pass");
        m["provider"]["plugin"]["rollgate/analysis"]["cloudwatch"][key] = value;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.yaml");
        let template = json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisTemplate",
            "metadata": {"name": "cw"}, "spec": {"metrics": [m]}});
        std::fs::write(&file, template.to_string()).unwrap();
        let out = Command::new(support::rollgate_bin())
            .args(["lint"])
            .arg(&file)
            .output()
            .unwrap();
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.status.success(), "{key}: {printed}");
        assert!(printed.contains(want), "{key}: {printed}");
    }
}
