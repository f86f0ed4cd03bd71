//! `oauth2:` and `google:` end to end: the engine against a real Prometheus behind a stand-in
//! gateway that wants a bearer token from the stand-in token endpoints
//! (`support::token_standin`, written from RFC 6749 section 4.4, RFC 7523 and Google's
//! documented exchanges). The scenario matrix gives the same verdicts through each mode as
//! without auth; tokens are fetched once for many concurrent checks and refreshed before they
//! expire; token endpoint faults are Error verdicts naming the step; the client secret and the
//! tokens never reach a message.

use crate::support;

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use rollgate::engine::{
    AddressPolicy, Call, CallError, Deadline, Engine, EvalOptions, Position, Trust,
};
use rollgate::measurement::{Measurement, Phase};
use rollgate::prometheus::{Backend, Client};
use rollgate::spec::Metric;
use serde_json::{json, Value};
use support::prom::shared;
use support::scenarios::{Traffic, ABSENT_SERVICE, BAD, HEALTHY, LOWTRAFFIC};
use support::stub::closed_port;
use support::token_standin::{TokenStandIn, CLIENT_ID, CLIENT_SECRET};

fn engine() -> Engine {
    Engine::new(Backend::Live(Client::new()), AddressPolicy::default())
}

fn at_base() -> EvalOptions {
    let base: DateTime<Utc> = Utc.timestamp_opt(shared().base, 0).single().unwrap();
    EvalOptions {
        at: Some(base),
        ..EvalOptions::with_budget(Duration::from_secs(20))
    }
}

/// The auth modes under test, each as the `prometheus:` keys it adds.
#[derive(Clone, Copy, Debug)]
enum Auth {
    None,
    OAuth2,
    OAuth2Assertion,
    GoogleKey,
    GoogleMetadata,
}

fn auth_keys(auth: Auth, s: &TokenStandIn) -> Value {
    match auth {
        Auth::None => json!({}),
        Auth::OAuth2 => json!({"oauth2": {
            "tokenUrl": format!("{}/oauth2/token", s.url),
            "clientId": CLIENT_ID,
            "clientSecretFile": s.secret_file,
            "scopes": ["https://prometheus.monitor.azure.com/.default"],
            "endpointParams": {"audience": "rollgate-test"},
        }}),
        Auth::OAuth2Assertion => json!({"oauth2": {
            "tokenUrl": format!("{}/oauth2/token", s.url),
            "clientId": CLIENT_ID,
            "clientAssertionFile": s.assertion_file,
            "scopes": ["https://prometheus.monitor.azure.com/.default"],
        }}),
        Auth::GoogleKey => json!({"google": {"credentialsFile": s.key_file}}),
        Auth::GoogleMetadata => json!({"google": {
            "metadata": true,
            "metadataAddress": s.url.trim_start_matches("http://"),
        }}),
    }
}

/// A metric asking `query` at `address` with `auth`; `extra` merged into the spec.
fn metric(auth: Auth, s: &TokenStandIn, address: &str, query: &str, extra: Value) -> Metric {
    let mut prometheus = auth_keys(auth, s);
    prometheus["address"] = json!(address);
    prometheus["retries"] = json!(0);
    let mut spec = json!({"prometheus": prometheus, "query": query, "noData": "inconclusive"});
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    let m = json!({"name": "m", "interval": "1m", "successCondition": "result[0] < 0.01",
        "provider": {"plugin": {"rollgate/analysis": spec}}});
    Metric::from_value(&m, "").unwrap()
}

fn guard(t: &Traffic) -> Value {
    json!({"minRequests": {"query": t.total_query("5m"), "count": 300, "onInsufficient": "inconclusive"}})
}

/// The phases of healthy, bad, low traffic, no data and backend down through `auth`.
async fn matrix(auth: Auth) -> Vec<(&'static str, Phase, String)> {
    let s = TokenStandIn::start(&shared().url);
    let address = match auth {
        Auth::None => shared().url.clone(),
        _ => s.gateway(),
    };
    let absent = Traffic {
        service: ABSENT_SERVICE,
        ..HEALTHY
    };
    let cases = [
        ("healthy", HEALTHY.ratio_query("5m"), guard(&HEALTHY)),
        ("bad", BAD.ratio_query("5m"), guard(&BAD)),
        (
            "low traffic",
            LOWTRAFFIC.ratio_query("5m"),
            guard(&LOWTRAFFIC),
        ),
        ("no data", absent.ratio_query("5m"), json!({})),
    ];
    let mut out = Vec::new();
    for (name, query, extra) in cases {
        let m = engine()
            .measure(&metric(auth, &s, &address, &query, extra), &at_base())
            .await;
        out.push((name, m.phase, m.value));
    }
    // Backend down: the gateway (or the address itself) leads nowhere.
    let down = closed_port();
    let address = match auth {
        Auth::None => down,
        _ => {
            s.control(json!({ "backend": down }));
            s.gateway()
        }
    };
    let m = engine()
        .measure(
            &metric(auth, &s, &address, &HEALTHY.ratio_query("5m"), json!({})),
            &at_base(),
        )
        .await;
    out.push(("backend down", m.phase, String::new()));
    if !matches!(auth, Auth::None) {
        assert_eq!(
            s.count("rejected"),
            0,
            "{auth:?}: a query went without a token"
        );
    }
    out
}

#[tokio::test]
async fn the_scenario_matrix_gives_the_same_verdicts_through_each_auth_mode() {
    let plain = matrix(Auth::None).await;
    let phases: Vec<Phase> = plain.iter().map(|(_, p, _)| *p).collect();
    assert_eq!(
        phases,
        [
            Phase::Successful,
            Phase::Failed,
            Phase::Inconclusive,
            Phase::Inconclusive,
            Phase::Error
        ],
        "{plain:?}"
    );
    for auth in [
        Auth::OAuth2,
        Auth::OAuth2Assertion,
        Auth::GoogleKey,
        Auth::GoogleMetadata,
    ] {
        assert_eq!(matrix(auth).await, plain, "{auth:?}");
    }
}

#[tokio::test]
async fn one_token_request_serves_many_concurrent_checks() {
    for auth in [
        Auth::OAuth2,
        Auth::OAuth2Assertion,
        Auth::GoogleKey,
        Auth::GoogleMetadata,
    ] {
        let s = TokenStandIn::start(&shared().url);
        // Slow token answers, so the checks really do overlap the fetch.
        s.control(json!({"delay": 0.3}));
        let m = metric(
            auth,
            &s,
            &s.gateway(),
            &HEALTHY.ratio_query("5m"),
            json!({}),
        );
        let e = engine();
        let opts = at_base();
        let checks = (0..16).map(|_| e.measure(&m, &opts));
        let results: Vec<Measurement> = futures::future::join_all(checks).await;
        for r in &results {
            assert_eq!(r.phase, Phase::Successful, "{auth:?}: {r:?}");
        }
        let endpoint = match auth {
            Auth::OAuth2 | Auth::OAuth2Assertion => "oauth2",
            Auth::GoogleKey => "google",
            _ => "metadata",
        };
        assert_eq!(s.count(endpoint), 1, "{auth:?}: token requests");
        assert_eq!(s.count("proxied"), 16, "{auth:?}");
        // And later checks reuse it.
        assert_eq!(e.measure(&m, &at_base()).await.phase, Phase::Successful);
        assert_eq!(s.count(endpoint), 1, "{auth:?}: token requests");
    }
}

#[tokio::test]
async fn tokens_are_refreshed_before_they_expire() {
    let s = TokenStandIn::start(&shared().url);
    // Three seconds: refreshed once half of it is gone, before the gateway would refuse it.
    s.control(json!({"expires_in": 3}));
    let m = metric(
        Auth::OAuth2,
        &s,
        &s.gateway(),
        &HEALTHY.ratio_query("5m"),
        json!({}),
    );
    let e = engine();
    assert_eq!(e.measure(&m, &at_base()).await.phase, Phase::Successful);
    assert_eq!(e.measure(&m, &at_base()).await.phase, Phase::Successful);
    assert_eq!(s.count("oauth2"), 1);
    tokio::time::sleep(Duration::from_millis(2000)).await;
    // 2 s in: the token is still valid at the gateway, but due for refresh.
    assert_eq!(e.measure(&m, &at_base()).await.phase, Phase::Successful);
    assert_eq!(s.count("oauth2"), 2);
    assert_eq!(s.count("rejected"), 0);
    // The scopes and endpoint parameters went with the request (RFC 6749 section 3.3).
    let form = s.last_form();
    assert_eq!(form["grant_type"], "client_credentials");
    assert_eq!(
        form["scope"],
        "https://prometheus.monitor.azure.com/.default"
    );
    assert_eq!(form["audience"], "rollgate-test");
}

/// One check through `auth` with the stand-in set to `settings`.
async fn failing(auth: Auth, settings: Value) -> Measurement {
    let s = TokenStandIn::start(&shared().url);
    s.control(settings);
    let m = metric(
        auth,
        &s,
        &s.gateway(),
        &HEALTHY.ratio_query("5m"),
        json!({}),
    );
    let out = engine().measure(&m, &at_base()).await;
    assert_eq!(s.count("proxied"), 0, "{out:?}");
    out
}

fn assert_error(m: &Measurement, parts: &[&str]) {
    assert_eq!(m.phase, Phase::Error, "{m:?}");
    for part in parts {
        assert!(m.message.contains(part), "{part:?} not in {}", m.message);
    }
    let shown = format!("{m:?}");
    assert!(!shown.contains(CLIENT_SECRET), "{shown}");
    assert!(!shown.contains("cs-Xq8"), "{shown}");
}

#[tokio::test]
async fn token_endpoint_faults_are_errors_naming_the_step() {
    // Down.
    for auth in [Auth::OAuth2, Auth::GoogleMetadata] {
        let s = TokenStandIn::start(&shared().url);
        let mut p = auth_keys(auth, &s);
        let closed = closed_port();
        match auth {
            Auth::OAuth2 | Auth::OAuth2Assertion => {
                p["oauth2"]["tokenUrl"] = json!(format!("{closed}/token"))
            }
            _ => p["google"]["metadataAddress"] = json!(closed),
        }
        p["address"] = json!(s.gateway());
        p["retries"] = json!(0);
        let spec = json!({"prometheus": p, "query": "up", "noData": "inconclusive"});
        let m = Metric::from_value(
            &json!({"name": "m", "provider": {"plugin": {"rollgate/analysis": spec}}}),
            "",
        )
        .unwrap();
        let out = engine().measure(&m, &at_base()).await;
        let step = match auth {
            Auth::OAuth2 | Auth::OAuth2Assertion => "OAuth2 token endpoint",
            _ => "Google metadata server",
        };
        assert_error(&out, &["authentication failed", step, "unreachable"]);
    }
    // 401, with the secret echoed back in the description.
    let out = failing(Auth::OAuth2, json!({"token_status": 401})).await;
    assert_error(
        &out,
        &["OAuth2 token endpoint", "HTTP 401", "\"invalid_client\""],
    );
    assert!(out.message.contains("<redacted>"), "{}", out.message);
    let out = failing(Auth::OAuth2Assertion, json!({"token_status": 401})).await;
    assert_error(&out, &["OAuth2 token endpoint", "HTTP 401"]);
    assert!(
        out.message.contains("client secret <redacted> is wrong"),
        "the assertion echoed back: {}",
        out.message
    );
    // Refusals from Google's endpoint and the metadata server.
    let out = failing(Auth::GoogleKey, json!({"token_status": 400})).await;
    assert_error(
        &out,
        &["Google token endpoint", "HTTP 400", "invalid_grant"],
    );
    let out = failing(Auth::GoogleMetadata, json!({"token_status": 503})).await;
    assert_error(&out, &["Google metadata server", "HTTP 503"]);
    // Malformed answers.
    for (auth, body, why) in [
        (Auth::OAuth2, "<html>login</html>", "not a JSON object"),
        (
            Auth::OAuth2,
            r#"{"token_type":"Bearer","expires_in":60}"#,
            "no `access_token`",
        ),
        (
            Auth::GoogleKey,
            r#"{"access_token":"x y","token_type":"Bearer"}"#,
            "characters",
        ),
        (
            Auth::GoogleMetadata,
            r#"{"access_token":"abc","token_type":"Bearer","expires_in":"soon"}"#,
            "expires_in",
        ),
    ] {
        let out = failing(auth, json!({ "malformed": body })).await;
        assert_error(&out, &["malformed token answer", why]);
    }
}

#[tokio::test]
async fn an_unreadable_or_invalid_key_is_an_error_naming_the_file() {
    let s = TokenStandIn::start(&shared().url);
    let bad = s.dir.path().join("bad.json");
    for (content, why) in [
        (None, "cannot read google.credentialsFile"),
        (
            Some("{\"private_key\": \"-----BEGIN"),
            "not a service-account JSON key",
        ),
        (
            Some(r#"{"type":"authorized_user","client_id":"x"}"#),
            "only service_account keys",
        ),
        (
            Some(
                r#"{"type":"service_account","client_email":"a@b","token_uri":"http://127.0.0.1:1/t","private_key":"-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n"}"#,
            ),
            "private_key",
        ),
    ] {
        let _ = std::fs::remove_file(&bad);
        if let Some(c) = content {
            std::fs::write(&bad, c).unwrap();
        }
        let mut p = json!({"google": {"credentialsFile": bad}, "address": s.gateway()});
        p["retries"] = json!(0);
        let spec = json!({"prometheus": p, "query": "up", "noData": "inconclusive"});
        let m = Metric::from_value(
            &json!({"name": "m", "provider": {"plugin": {"rollgate/analysis": spec}}}),
            "",
        )
        .unwrap();
        let out = engine().measure(&m, &at_base()).await;
        assert_error(&out, &[why, bad.to_str().unwrap()]);
        assert!(!out.message.contains("MIIB"), "{}", out.message);
    }
}

#[tokio::test]
async fn tokens_echoed_by_the_upstream_are_scrubbed() {
    let s = TokenStandIn::start(&shared().url);
    s.control(json!({"gateway_echo": true}));
    let m = metric(Auth::OAuth2, &s, &s.gateway(), "up", json!({}));
    let out = engine().measure(&m, &at_base()).await;
    assert_eq!(out.phase, Phase::Error, "{out:?}");
    assert!(
        out.message.contains("token <redacted> is not valid here"),
        "{}",
        out.message
    );
    assert!(!format!("{out:?}").contains("ya29."), "{out:?}");
}

#[tokio::test]
async fn network_specs_may_not_use_the_servers_credentials_and_plugin_mode_only_allowed_dirs() {
    let s = TokenStandIn::start(&shared().url);
    for (auth, key) in [
        (Auth::OAuth2, "oauth2.clientSecretFile"),
        (Auth::GoogleKey, "google.credentialsFile"),
        (Auth::GoogleMetadata, "google (the metadata server's token)"),
    ] {
        let m = metric(
            auth,
            &s,
            &s.gateway(),
            &HEALTHY.ratio_query("5m"),
            json!({}),
        );
        let base = Utc.timestamp_opt(shared().base, 0).single().unwrap();
        let call = |trust| Call {
            metric: &m,
            at: Some(base),
            deadline: Deadline::for_call(None, Duration::from_secs(5)),
            trust,
            position: Position::Single,
            previous: None,
        };
        let e = engine().call(call(Trust::NETWORK)).await.unwrap_err();
        assert_eq!(e, CallError::ServerFile { key }, "{auth:?}");
        if !matches!(auth, Auth::GoogleMetadata) {
            // Plugin mode: only under an allowed directory.
            let elsewhere = tempfile::tempdir().unwrap();
            let trust = Trust::plugin(&[elsewhere.path().to_path_buf()]).unwrap();
            let out = engine().call(call(trust)).await.unwrap();
            assert_eq!(out.phase, Phase::Error, "{auth:?}: {out:?}");
            assert!(
                out.message.starts_with(&format!("prometheus.{key}: "))
                    && out.message.contains("is not read"),
                "{auth:?}: {}",
                out.message
            );
            let trust = Trust::plugin(&[s.dir.path().to_path_buf()]).unwrap();
            let out = engine().call(call(trust)).await.unwrap();
            assert_eq!(out.phase, Phase::Successful, "{auth:?}: {out:?}");
        }
    }
    assert_eq!(s.count("oauth2"), 1);
    assert_eq!(s.count("google"), 1);
    assert_eq!(s.count("metadata"), 0);
}

#[test]
fn specs_with_two_ways_to_authenticate_or_incomplete_blocks_are_refused_naming_the_keys() {
    let read = |prometheus: Value| {
        let spec = json!({"prometheus": prometheus, "query": "up", "noData": "fail"});
        Metric::from_value(
            &json!({"name": "m", "provider": {"plugin": {"rollgate/analysis": spec}}}),
            "",
        )
        .map(|_| ())
        .map_err(|e| e.to_string())
    };
    let oauth2 = json!({"tokenUrl": "https://t/token", "clientId": "c", "clientSecretFile": "/s"});
    for (p, parts) in [
        (
            json!({"bearerTokenFile": "/t", "oauth2": oauth2}),
            &["bearerTokenFile and oauth2 exclude each other"][..],
        ),
        (
            json!({"oauth2": oauth2, "google": {"metadata": true}}),
            &["oauth2 and google exclude each other"][..],
        ),
        (
            json!({"basicAuth": {"username": "u", "passwordFile": "/p"}, "google": {}}),
            &["basicAuth and google"][..],
        ),
        (
            json!({"google": {"credentialsFile": "/k", "metadata": true}}),
            &["credentialsFile and metadata: true exclude each other"][..],
        ),
        (
            json!({"oauth2": {"tokenUrl": "https://t", "clientId": "c"}}),
            &["oauth2.clientSecretFile"][..],
        ),
        (
            json!({"oauth2": {"tokenUrl": "https://t", "clientId": "c", "clientSecretFile": "/s", "clientAssertionFile": "/a"}}),
            &["clientSecretFile and clientAssertionFile exclude each other"][..],
        ),
        (
            json!({"oauth2": {"tokenUrl": "ftp://t", "clientId": "c", "clientSecretFile": "/s"}}),
            &["oauth2.tokenUrl"][..],
        ),
        (
            json!({"oauth2": {"tokenUrl": "https://t", "clientId": "c", "clientSecretFile": "/s", "endpointParams": {"grant_type": "password"}}}),
            &["endpointParams.grant_type"][..],
        ),
        (
            json!({"google": {"credentialFile": "/k"}}),
            &["credentialFile"][..],
        ),
    ] {
        let e = read(p.clone()).expect_err(&p.to_string());
        for part in parts {
            assert!(e.contains(part), "{p}: {e}");
        }
    }
    assert!(read(json!({"oauth2": oauth2})).is_ok());
    assert!(read(json!({"google": {}})).is_ok());
}

/// Through the binary at the most verbose log level: a good check, a 401 from the token
/// endpoint that echoes the secret, and an upstream that echoes the token; neither the client
/// secret nor any token appears in anything it prints.
#[test]
fn the_secret_and_the_tokens_never_reach_the_logs() {
    let s = TokenStandIn::start(&shared().url);
    let file = s.dir.path().join("t.yaml");
    let template = format!(
        r#"kind: AnalysisTemplate
metadata: {{name: t}}
spec:
  metrics:
    - name: m
      successCondition: result[0] < 0.01
      provider:
        plugin:
          rollgate/analysis:
            prometheus:
              address: {gateway}
              retries: 0
              oauth2:
                tokenUrl: {url}/oauth2/token
                clientId: {CLIENT_ID}
                clientSecretFile: {secret}
            query: {query}
            noData: fail
"#,
        gateway = s.gateway(),
        url = s.url,
        secret = s.secret_file.display(),
        query = HEALTHY.ratio_query("5m"),
    );
    std::fs::write(&file, template).unwrap();
    let base = Utc.timestamp_opt(shared().base, 0).single().unwrap();
    let run = || {
        let out = std::process::Command::new(support::rollgate_bin())
            .args([
                "dry-run",
                "--log-level",
                "trace",
                "--at",
                &base.to_rfc3339(),
                "-f",
            ])
            .arg(&file)
            .output()
            .unwrap();
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    let mut printed = run();
    assert!(printed.contains("Successful"), "{printed}");
    s.control(json!({"gateway_echo": true}));
    printed.push_str(&run());
    s.control(json!({"gateway_echo": false, "token_status": 401}));
    printed.push_str(&run());
    assert!(printed.contains("invalid_client"), "{printed}");
    assert!(!printed.contains(CLIENT_SECRET), "{printed}");
    assert!(!printed.contains("cs-Xq8"), "{printed}");
    assert!(!printed.contains("ya29."), "{printed}");
}
