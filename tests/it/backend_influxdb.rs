//! The `influxdb:` backend end to end: the engine against a real InfluxDB 1.6 (Debian's
//! `influxdb`) with generated data (`support::influxdb`), through InfluxQL's `/query`: the
//! Prometheus scenario matrix with the same verdicts, compare in both forms, the cases of Argo's
//! own InfluxDB provider tests, and stubs for what a healthy server never does (garbage, a slow
//! answer, a server that echoes the credentials back).

use crate::support;

use std::time::{Duration, Instant};

use chrono::{DateTime, TimeZone, Utc};
use rollgate::engine::{AddressPolicy, Engine, EvalOptions};
use rollgate::measurement::{Measurement, Phase};
use rollgate::prometheus::{Backend, Client};
use rollgate::spec::Metric;
use serde_json::{json, Value};
use support::influxdb::{
    shared, Latency, Requests, ABSENT, BAD, CMP_BAD_CANARY, CMP_BAD_STABLE, CMP_HEALTHY_CANARY,
    CMP_HEALTHY_STABLE, DATABASE, HEALTHY, IDLE, LAT_SAME_CANARY, LAT_SAME_STABLE,
    LAT_SHIFT_CANARY, LAT_SHIFT_STABLE, LOWTRAFFIC, READER, READER_PASSWORD,
};
use support::stub::{closed_port, json as json_reply, Mode, Stub};

fn engine() -> Engine {
    Engine::new(Backend::Live(Client::new()), AddressPolicy::default())
}

fn base() -> DateTime<Utc> {
    Utc.timestamp_opt(shared().base, 0).single().unwrap()
}

fn at_base() -> EvalOptions {
    EvalOptions {
        at: Some(base()),
        ..EvalOptions::with_budget(Duration::from_secs(20))
    }
}

/// The block for the shared server, as the read-only user.
fn block() -> Value {
    let s = shared();
    json!({
        "address": s.url, "database": DATABASE,
        "username": READER, "passwordFile": s.password_file.display().to_string()
    })
}

/// A metric with an `influxdb` block (`block()` plus `extra_block`), `query`, its conditions
/// and `extra` keys of the rollgate spec.
fn metric(query: &str, conditions: &[(&str, &str)], extra: Value) -> Metric {
    metric_on(block(), query, conditions, extra)
}

fn metric_on(influxdb: Value, query: &str, conditions: &[(&str, &str)], extra: Value) -> Metric {
    let mut spec = json!({"influxdb": influxdb, "query": query, "noData": "inconclusive"});
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    let mut m = json!({"name": "m", "provider": {"plugin": {"rollgate/analysis": spec}}});
    for (k, v) in conditions {
        m[*k] = json!(v);
    }
    Metric::from_value(&m, "").unwrap()
}

fn guard(r: &Requests, on_insufficient: &str) -> Value {
    json!({"minRequests": {"query": r.total_query(), "count": 300, "onInsufficient": on_insufficient}})
}

async fn measure(m: &Metric) -> Measurement {
    engine().measure(m, &at_base()).await
}

const OK: &[(&str, &str)] = &[("successCondition", "result[0] < 0.01")];

#[tokio::test]
async fn healthy_passes_the_guard_and_the_condition() {
    let m = measure(&metric(
        &HEALTHY.ratio_query(),
        OK,
        guard(&HEALTHY, "inconclusive"),
    ))
    .await;
    assert_eq!(m.phase, Phase::Successful, "{m:?}");
    assert_eq!(m.value, "[0.001]");
    assert_eq!(m.metadata["minRequests.seen"], "30,000");
    assert!(
        m.message
            .contains("successCondition `result[0] < 0.01` holds"),
        "{}",
        m.message
    );
}

#[tokio::test]
async fn a_check_at_the_servers_now_uses_its_own_window() {
    // No fixed time: `$timeFilter` ends at InfluxDB's now() (the data runs an hour past base).
    let m = engine()
        .measure(
            &metric(&HEALTHY.ratio_query(), OK, guard(&HEALTHY, "inconclusive")),
            &EvalOptions::with_budget(Duration::from_secs(20)),
        )
        .await;
    assert_eq!(m.phase, Phase::Successful, "{m:?}");
    assert_eq!(m.value, "[0.001]");
    // A query that carries its own range, as Argo's Flux queries do, works at now...
    let own = "SELECT sum(\"errors\") / sum(\"total\") FROM \"requests\" WHERE \"service\" = 'healthy' AND time > now() - 5m";
    let m = engine()
        .measure(
            &metric(own, OK, json!({})),
            &EvalOptions::with_budget(Duration::from_secs(20)),
        )
        .await;
    assert_eq!(m.phase, Phase::Successful, "{m:?}");
    // ...and is refused at a fixed time (a backtest), where now() would answer for another time.
    let m = measure(&metric(own, OK, json!({}))).await;
    assert_eq!(m.phase, Phase::Error, "{m:?}");
    assert!(m.message.contains("$timeFilter"), "{}", m.message);
}

#[tokio::test]
async fn a_bad_error_rate_fails() {
    let m = measure(&metric(&BAD.ratio_query(), OK, guard(&BAD, "inconclusive"))).await;
    assert_eq!(m.phase, Phase::Failed, "{m:?}");
    assert_eq!(m.value, "[0.05]");
}

#[tokio::test]
async fn low_traffic_is_held_by_the_guard() {
    for (policy, phase) in [
        ("inconclusive", Phase::Inconclusive),
        ("fail", Phase::Failed),
    ] {
        let m = measure(&metric(
            &LOWTRAFFIC.ratio_query(),
            OK,
            guard(&LOWTRAFFIC, policy),
        ))
        .await;
        assert_eq!(m.phase, phase, "{policy}: {m:?}");
        assert_eq!(m.metadata["minRequests.seen"], "15");
        assert!(
            m.message.contains("15 requests seen, 300 needed"),
            "{}",
            m.message
        );
    }
}

#[tokio::test]
async fn no_data_follows_the_policy() {
    for (policy, phase) in [
        ("inconclusive", Phase::Inconclusive),
        ("fail", Phase::Failed),
        ("error", Phase::Error),
        ("pass", Phase::Successful),
    ] {
        // The query without a guard, then the guard: both return no series.
        let m = measure(&metric(
            &ABSENT.ratio_query(),
            OK,
            json!({"noData": policy}),
        ))
        .await;
        assert_eq!(m.phase, phase, "{policy}: {m:?}");
        assert!(m.message.starts_with("no data: query"), "{}", m.message);
        assert_eq!(m.metadata["noData"], "returned no series");
        let mut extra = guard(&ABSENT, "inconclusive");
        extra["noData"] = json!(policy);
        let m = measure(&metric(&HEALTHY.ratio_query(), OK, extra)).await;
        assert_eq!(m.phase, phase, "{policy}: {m:?}");
        assert!(
            m.message.starts_with("no data: minRequests.query"),
            "{}",
            m.message
        );
    }
    // An empty GROUP BY time bucket is null: no data too, never a value the condition reads.
    // (The data starts 3 h before base: the first two buckets are empty, the third is not.)
    let start = shared().base - 3 * 3600 - 120;
    let q = format!(
        "SELECT sum(\"total\") FROM \"requests\" WHERE \"service\" = 'healthy' AND time >= {start}s AND time < {}s GROUP BY time(1m) fill(null)",
        start + 180
    );
    let m = engine()
        .measure(
            &metric(&q, &[("successCondition", "true")], json!({})),
            &EvalOptions::with_budget(Duration::from_secs(20)),
        )
        .await;
    assert_eq!(m.phase, Phase::Inconclusive, "{m:?}");
}

/// InfluxQL divides 0 by 0 as 0 (not NaN, as PromQL does): the ratio query alone reads as a
/// perfect error rate, so the guard is what keeps an idle canary from passing.
#[tokio::test]
async fn zero_requests_are_held_by_the_guard_never_a_pass() {
    let m = measure(&metric(
        &IDLE.ratio_query(),
        OK,
        guard(&IDLE, "inconclusive"),
    ))
    .await;
    assert_eq!(m.phase, Phase::Inconclusive, "{m:?}");
    assert!(
        m.message.contains("0 requests seen, 300 needed"),
        "{}",
        m.message
    );
}

#[tokio::test]
async fn a_server_that_is_down_is_an_error() {
    let url = closed_port();
    let mut b = block();
    b["address"] = json!(url);
    b["retries"] = json!(0);
    let m = measure(&metric_on(
        b,
        &HEALTHY.ratio_query(),
        OK,
        json!({"noData": "pass"}),
    ))
    .await;
    assert_eq!(m.phase, Phase::Error, "{m:?}");
    assert!(
        m.message.contains("cannot reach InfluxDB at"),
        "{}",
        m.message
    );
}

async fn against(stub: &Stub, extra_block: Value) -> Measurement {
    let mut b = json!({"address": stub.url, "database": "d", "retries": 0});
    for (k, v) in extra_block.as_object().unwrap() {
        b[k] = v.clone();
    }
    engine()
        .measure(
            &metric_on(b, &HEALTHY.ratio_query(), OK, json!({"noData": "pass"})),
            &at_base(),
        )
        .await
}

#[tokio::test]
async fn slow_and_garbage_answers_are_errors() {
    let slow = Stub::start(Mode::Slow(
        Duration::from_secs(3),
        Box::new(Mode::Fixed(
            r#"{"results":[{"statement_id":0,"series":[{"name":"m","columns":["time","v"],"values":[[0,0]]}]}]}"#.into(),
        )),
    ));
    let t = Instant::now();
    let m = against(&slow, json!({"timeout": "500ms"})).await;
    assert_eq!(m.phase, Phase::Error, "{m:?}");
    assert!(
        m.message.contains("did not answer within 500ms"),
        "{}",
        m.message
    );
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());

    for (name, mode, needle) in [
        ("truncated JSON", Mode::Garbage, "malformed"),
        ("not JSON", Mode::Fixed("<html>hello</html>".into()), "malformed"),
        ("no results", Mode::Fixed("{}".into()), "malformed"),
        ("two columns", Mode::Fixed(r#"{"results":[{"statement_id":0,"series":[{"name":"m","columns":["time","a","b"],"values":[[0,0,1]]}]}]}"#.into()), "columns"),
        ("a string value", Mode::Fixed(r#"{"results":[{"statement_id":0,"series":[{"name":"m","columns":["time","v"],"values":[[0,"0"]]}]}]}"#.into()), "not a number"),
        ("partial", Mode::Fixed(r#"{"results":[{"statement_id":0,"series":[{"name":"m","columns":["time","v"],"values":[[0,0]],"partial":true}]}]}"#.into()), "partial"),
        ("statement error", Mode::Fixed(r#"{"results":[{"statement_id":0,"error":"shard unavailable"}]}"#.into()), "shard unavailable"),
        ("HTTP 500", Mode::Status(500, r#"{"error":"engine failure"}"#.into()), "engine failure"),
        ("HTTP 502", Mode::Status(502, "bad gateway".into()), "502"),
        ("HTTP 429", Mode::Status(429, "slow down".into()), "rate limit"),
    ] {
        let stub = Stub::start(mode);
        let m = against(&stub, json!({})).await;
        assert_eq!(m.phase, Phase::Error, "{name}: {m:?}");
        assert!(m.message.to_lowercase().contains(needle), "{name}: {}", m.message);
    }
}

#[tokio::test]
async fn the_servers_errors_are_errors() {
    let m = measure(&metric(
        "SELECT nosuch( FROM \"requests\" WHERE $timeFilter",
        OK,
        json!({}),
    ))
    .await;
    assert_eq!(m.phase, Phase::Error, "{m:?}");
    assert!(m.message.contains("error parsing query"), "{}", m.message);
    let mut b = block();
    b["retentionPolicy"] = json!("nope");
    let m = measure(&metric_on(b, &HEALTHY.ratio_query(), OK, json!({}))).await;
    assert_eq!(m.phase, Phase::Error, "{m:?}");
    assert!(
        m.message.contains("retention policy not found"),
        "{}",
        m.message
    );
}

/// InfluxDB 1.x runs write statements even over GET: a template may not send one with the
/// operator's credentials, and nothing reaches the server.
#[tokio::test]
async fn only_one_read_only_select_reaches_the_server() {
    let stub = Stub::start(Mode::Status(500, "must not be asked".into()));
    for q in [
        "DROP DATABASE rollgate",
        "SELECT sum(\"total\") INTO \"copy\" FROM \"requests\" WHERE $timeFilter",
        "SELECT sum(\"total\") FROM \"requests\" WHERE $timeFilter; DROP DATABASE rollgate",
    ] {
        // Refused where the template is read (lint, serve's readiness), never sent.
        let b = json!({"address": stub.url, "database": "d"});
        let spec = json!({"influxdb": b, "query": q, "noData": "pass"});
        let m = json!({"name": "m", "provider": {"plugin": {"rollgate/analysis": spec}}});
        let e = Metric::from_value(&m, "").unwrap_err().to_string();
        assert!(e.contains("query") && e.contains("SELECT"), "{q}: {e}");
    }
    assert_eq!(stub.requests(), 0);
}

fn compare_metric(compare: Value, window: &str) -> Metric {
    let mut b = block();
    b["window"] = json!(window);
    let spec = json!({"influxdb": b, "compare": compare, "noData": "inconclusive"});
    Metric::from_value(
        &json!({"name": "cmp", "provider": {"plugin": {"rollgate/analysis": spec}}}),
        "",
    )
    .unwrap()
}

fn ratio(canary: &Requests, stable: &Requests) -> Value {
    json!({
        "canary": {"bad": canary.bad_query(), "total": canary.total_query()},
        "stable": {"bad": stable.bad_query(), "total": stable.total_query()},
        "maxIncrease": 0.2, "margin": 0.001, "confidence": 0.95, "minRequests": 500
    })
}

#[tokio::test]
async fn compare_ratio_fails_a_worse_canary_and_passes_an_equal_one() {
    let m = measure(&compare_metric(
        ratio(&CMP_BAD_CANARY, &CMP_BAD_STABLE),
        "10m",
    ))
    .await;
    assert_eq!(m.phase, Phase::Failed, "{m:?}");
    let v: Value = serde_json::from_str(&m.value).unwrap();
    assert_eq!(v["canary"]["total"], 60000, "{v}");
    assert_eq!(v["canary"]["bad"], 600, "{v}");
    assert_eq!(v["stable"]["bad"], 60, "{v}");
    let m = measure(&compare_metric(
        ratio(&CMP_HEALTHY_CANARY, &CMP_HEALTHY_STABLE),
        "10m",
    ))
    .await;
    assert_eq!(m.phase, Phase::Successful, "{m:?}");
    // An idle canary (0 of 0) is below the guard: never a pass.
    let m = measure(&compare_metric(ratio(&IDLE, &CMP_HEALTHY_STABLE), "10m")).await;
    assert_eq!(m.phase, Phase::Inconclusive, "{m:?}");
}

fn distribution(canary: &Latency, stable: &Latency) -> Value {
    json!({
        "canary": canary.query(), "stable": stable.query(),
        "window": "30m", "step": "1m", "direction": "increase", "maxIncrease": 0.1,
        "confidence": 0.98, "minSamples": 20
    })
}

#[tokio::test]
async fn compare_distribution_reads_ranges() {
    let m = measure(&compare_metric(
        distribution(&LAT_SHIFT_CANARY, &LAT_SHIFT_STABLE),
        "5m",
    ))
    .await;
    assert_eq!(m.phase, Phase::Failed, "{m:?}");
    let v: Value = serde_json::from_str(&m.value).unwrap();
    // One mean per minute bucket of the 30 m before base (and the bucket that base opens).
    assert_eq!(v["canary"]["count"], 32, "{v}");
    let m = measure(&compare_metric(
        distribution(&LAT_SAME_CANARY, &LAT_SAME_STABLE),
        "5m",
    ))
    .await;
    assert_eq!(m.phase, Phase::Successful, "{m:?}");
    // A range must be placed with $timeFilter.
    let mut c = distribution(&LAT_SAME_CANARY, &LAT_SAME_STABLE);
    c["canary"] = json!(
        "SELECT mean(\"seconds\") FROM \"latency\" WHERE time > now() - 30m GROUP BY time(1m)"
    );
    let m = measure(&compare_metric(c, "5m")).await;
    assert_eq!(m.phase, Phase::Error, "{m:?}");
    assert!(m.message.contains("$timeFilter"), "{}", m.message);
}

/// The cases of Argo's own provider tests (metricproviders/influxdb/influxdb_test.go, v1.9.1)
/// with the values they feed written to the real server: the same conditions give the same
/// phase and the same measurement value.
#[tokio::test]
async fn argo_influxdb_provider_cases_keep_their_phase_and_value() {
    let q = |m: &str| format!("SELECT \"f\" FROM \"{m}\" WHERE $timeFilter");
    // TestRunSuccessfully: records 1.0 and 6.6.
    let m = measure(&metric(
        &q("argo"),
        &[
            ("successCondition", "result[0] == 1"),
            ("failureCondition", "result[0] != 1"),
        ],
        json!({}),
    ))
    .await;
    assert_eq!(
        (m.phase, m.value.as_str()),
        (Phase::Successful, "[1 6.6]"),
        "{m:?}"
    );
    // TestRunWithTimeseries: records 10 and 20.
    let m = measure(&metric(
        &q("argo_ts"),
        &[
            ("successCondition", "result[0] == 10"),
            ("failureCondition", "result[1] <  20"),
        ],
        json!({}),
    ))
    .await;
    assert_eq!(
        (m.phase, m.value.as_str()),
        (Phase::Successful, "[10 20]"),
        "{m:?}"
    );
    // TestRunWithEmptyResult: no records is an Error with no value in Argo; in rollgate the
    // metric's noData decides, and `noData: error` gives Argo's verdict.
    let m = measure(&metric(
        &q("argo_empty"),
        &[
            ("successCondition", "result[0] == 10"),
            ("failureCondition", "result[0] != 10"),
        ],
        json!({"noData": "error"}),
    ))
    .await;
    assert_eq!((m.phase, m.value.as_str()), (Phase::Error, ""), "{m:?}");
    // TestRunWithEvaluationError: no result table at all; an answer that is not one is an Error.
    let stub = Stub::start(Mode::Fixed("null".into()));
    let b = json!({"address": stub.url, "database": "d"});
    let m = measure(&metric_on(
        b,
        &q("argo"),
        &[
            ("successCondition", "result == 10"),
            ("failureCondition", "result != 10"),
        ],
        json!({}),
    ))
    .await;
    assert_eq!((m.phase, m.value.as_str()), (Phase::Error, ""), "{m:?}");
}

#[tokio::test]
async fn credentials_are_checked_read_at_each_query_and_never_shown() {
    // The real server: a wrong password is an Error naming the key and file, not the password.
    let dir = tempfile::tempdir().unwrap();
    let wrong = dir.path().join("wrong");
    std::fs::write(&wrong, "not-the-Passw0rd\n").unwrap();
    let mut b = block();
    b["passwordFile"] = json!(wrong.display().to_string());
    let m = measure(&metric_on(
        b.clone(),
        &HEALTHY.ratio_query(),
        OK,
        json!({"noData": "pass"}),
    ))
    .await;
    assert_eq!(m.phase, Phase::Error, "{m:?}");
    assert!(m.message.contains("influxdb.passwordFile"), "{}", m.message);
    assert!(m.message.contains("authorization failed"), "{}", m.message);
    assert!(!m.message.contains("not-the-Passw0rd"), "{}", m.message);
    // Rotated in place: the next query reads the file again.
    std::fs::write(&wrong, format!("{READER_PASSWORD}\n")).unwrap();
    let m = measure(&metric_on(b, &HEALTHY.ratio_query(), OK, json!({}))).await;
    assert_eq!(m.phase, Phase::Successful, "{m:?}");
    // No credentials against a server that wants them.
    let mut b = block();
    b.as_object_mut().unwrap().remove("username");
    b.as_object_mut().unwrap().remove("passwordFile");
    let m = measure(&metric_on(b, &HEALTHY.ratio_query(), OK, json!({}))).await;
    assert_eq!(m.phase, Phase::Error, "{m:?}");
    assert!(m.message.contains("requires credentials"), "{}", m.message);

    // A server that echoes the Authorization header back, in a 401 and in a 400 error, in a
    // statement error and as a tag value: the token appears nowhere.
    const TOKEN: &str = "infl-T0ken-that-must-not-leak";
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let stub = Stub::script(|req, i| {
        let auth = req.header("authorization").unwrap_or_default().to_string();
        let echo = serde_json::to_string(&auth).unwrap();
        match i % 4 {
            0 => json_reply(401, &format!(r#"{{"error":"bad token {echo}"}}"#)),
            1 => json_reply(
                400,
                &format!(r#"{{"error":"error parsing query near {echo}"}}"#),
            ),
            2 => json_reply(
                200,
                &format!(r#"{{"results":[{{"statement_id":0,"error":{echo}}}]}}"#),
            ),
            _ => json_reply(
                200,
                &format!(
                    r#"{{"results":[{{"statement_id":0,"series":[{{"name":"m","tags":{{"auth":{echo}}},"columns":["time","v"],"values":[[0,0]]}}]}}]}}"#
                ),
            ),
        }
    });
    let b = json!({"address": stub.url, "database": "d", "tokenFile": token_file.display().to_string(), "retries": 0});
    for round in 0..4 {
        let m = measure(&metric_on(b.clone(), &HEALTHY.ratio_query(), OK, json!({}))).await;
        let shown = format!("{m:?}");
        assert!(!shown.contains(TOKEN), "round {round}: {shown}");
        if round < 3 {
            assert_eq!(m.phase, Phase::Error, "round {round}: {m:?}");
            assert!(
                m.message.contains("<redacted>"),
                "round {round}: {}",
                m.message
            );
        } else {
            assert_eq!(m.phase, Phase::Successful, "{m:?}");
        }
    }
    assert_eq!(first_authorization(&stub), format!("Token {TOKEN}"));
    let first = stub.request(0);
    assert_eq!(first.path(), "/query");
    assert_eq!(first.param("db").as_deref(), Some("d"));
    assert_eq!(first.param("epoch").as_deref(), Some("ms"));
    assert!(
        first.param("q").unwrap().contains("(time > '"),
        "{:?}",
        first.param("q")
    );
    assert_eq!(first.param("p"), None);
    assert!(!first.target.contains(TOKEN));
    // The first 401 names the token file.
    let m = measure(&metric_on(b, &HEALTHY.ratio_query(), OK, json!({}))).await;
    assert!(m.message.contains("influxdb.tokenFile"), "{}", m.message);
}

fn first_authorization(stub: &Stub) -> String {
    stub.request(0)
        .header("authorization")
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn backtest_checks_are_placed_at_their_time() {
    // One query per check at its own time: an hour before base the data is the same, three and
    // a half hours before it there is none.
    let m = metric(&HEALTHY.ratio_query(), OK, json!({}));
    for (offset, phase, value) in [
        (3600, Phase::Successful, "[0.001]"),
        (12_600, Phase::Inconclusive, ""),
    ] {
        let out = engine()
            .measure(
                &m,
                &EvalOptions {
                    at: Some(base() - chrono::Duration::seconds(offset)),
                    ..EvalOptions::with_budget(Duration::from_secs(20))
                },
            )
            .await;
        assert_eq!(
            (out.phase, out.value.as_str()),
            (phase, value),
            "{offset}: {out:?}"
        );
    }
}

#[test]
fn the_server_listens_on_loopback_only() {
    let s = shared();
    let sockets = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let pid = s.pid();
    assert!(support::prom::alive(pid));
    // Every socket influxd listens on is bound to 127.0.0.1 (0100007F), none to 0.0.0.0.
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            l.to_str()?
                .strip_prefix("socket:[")?
                .strip_suffix(']')
                .map(str::to_string)
        })
        .collect();
    let listening: Vec<&str> = sockets
        .lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 9 && f[3] == "0A" && inodes.iter().any(|i| i == f[9])
        })
        .collect();
    assert!(listening.len() >= 2, "{listening:?}");
    for l in listening {
        assert!(
            l.split_whitespace()
                .nth(1)
                .unwrap()
                .starts_with("0100007F:"),
            "{l}"
        );
    }
}

/// The shipped example lints, and runs through the real binary against the real server with
/// its address and credentials swapped in: a healthy pair passes both metrics, a canary with
/// ten times the stable error rate fails both.
#[test]
fn the_example_runs_through_the_binary() {
    let example =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/backends/influxdb.yaml");
    let out = std::process::Command::new(support::rollgate_bin())
        .arg("lint")
        .arg(&example)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    let s = shared();
    let password = s.password_file.display().to_string();
    let text = std::fs::read_to_string(&example)
        .unwrap()
        .replace("http://influxdb.monitoring:8086", &s.url)
        .replace("username: rollgate", &format!("username: {READER}"))
        .replace("/var/run/secrets/influxdb/password", &password)
        // InfluxDB 1.6 has no `Token` scheme (1.8 added it): the read-only user instead.
        .replace(
            "tokenFile: /var/run/secrets/influxdb/token",
            &format!("username: {READER}\n              passwordFile: {password}"),
        )
        .replace("database: telegraf", &format!("database: {DATABASE}"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("influxdb.yaml");
    std::fs::write(&file, text).unwrap();
    for (service, code) in [("cmp-healthy", 0), ("cmp-bad", 1)] {
        let out = std::process::Command::new(support::rollgate_bin())
            .args(["dry-run", "-o", "json", "--at"])
            .arg(base().to_rfc3339())
            .arg("--arg")
            .arg(format!("service={service}"))
            .arg("-f")
            .arg(&file)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{service}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let want = if code == 0 { "Successful" } else { "Failed" };
        assert!(stdout.matches(want).count() >= 2, "{service}: {stdout}");
    }
}
