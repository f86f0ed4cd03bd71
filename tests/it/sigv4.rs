//! SigV4 (Amazon Managed Service for Prometheus) through the real binary: `rollgate serve` with
//! a template whose `prometheus.sigv4` signs every query, in front of a stand-in for the AWS
//! front end that checks each signature with botocore's own signer and forwards to the real
//! Prometheus (`tests/support/sigv4_standin.py`, which also plays STS for IRSA's
//! AssumeRoleWithWebIdentity, written from the API reference page it cites).
//!
//! Needs python3 with botocore (`.ci/run` installs it).

use crate::serve_common::{
    client, error_rate_template, path_str, post, rollout_check, template_dir, ServeProcess,
};
use crate::support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

const KEY_ID: &str = "AKIDROLLGATETEST";
const SECRET: &str = "rollgate-test-secret-0123456789";
const SESSION: &str = "rollgate-test-session-token-abcdef";

/// The stand-in, stopped when dropped (its stdin closes).
struct StandIn {
    child: Child,
    _stdin: ChildStdin,
    url: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl StandIn {
    fn start(upstream: &str, extra: &[&str]) -> StandIn {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("verified.log");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/sigv4_standin.py");
        let mut child = Command::new("python3")
            .arg(script)
            .args(["--upstream", upstream, "--log", path_str(&log)])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3");
        let stdin = child.stdin.take().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.strip_prefix("READY ").unwrap_or_else(|| {
            panic!("the SigV4 stand-in did not start (is botocore installed? `pip install botocore`): {line:?}")
        });
        StandIn {
            child,
            _stdin: stdin,
            url: format!("http://127.0.0.1:{}", port.trim()),
            log,
            _dir: dir,
        }
    }

    /// The access key ids of the requests whose signature verified, in order.
    fn verified(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The error-rate template with `prometheus:` set to `prometheus` (YAML flow mapping).
fn template(name: &str, prometheus: &str) -> String {
    error_rate_template(name, "inconclusive").replace(
        "            noData: inconclusive\n",
        &format!("            noData: inconclusive\n            prometheus: {prometheus}\n"),
    )
}

fn signed(address: &str, region: &str) -> String {
    format!("{{address: \"{address}\", sigv4: {{region: {region}}}}}")
}

fn static_keys(secret: &str) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ACCESS_KEY_ID", KEY_ID.to_string()),
        ("AWS_SECRET_ACCESS_KEY", secret.to_string()),
        ("AWS_SESSION_TOKEN", SESSION.to_string()),
    ]
}

fn serve(dir: &Path, env: &[(&str, String)]) -> ServeProcess {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    ServeProcess::try_start(&["--templates", path_str(dir)], &env)
        .unwrap_or_else(|(s, logs)| panic!("serve did not start ({s:?}): {}", logs.join("\n")))
}

/// (HTTP status, verdict, first measurement's message) of a Flagger rollout check.
async fn check(server: &ServeProcess, template: &str, service: &str) -> (u16, String, String) {
    let url = format!("{}/flagger/v1/check", server.url);
    let (status, text, _) = post(&client(), &url, rollout_check(template, service), true).await;
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let message = v["measurements"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    (
        status,
        v["verdict"].as_str().unwrap_or_default().to_string(),
        message,
    )
}

fn runtime() -> tokio::runtime::Runtime {
    support::runtime()
}

fn assert_no_secret(server: &ServeProcess, secrets: &[&str]) {
    for line in server.logs() {
        for s in secrets {
            assert!(!line.contains(s), "a secret in the log: {line}");
        }
    }
}

#[test]
fn signed_queries_give_the_same_verdicts_as_unsigned_ones() {
    let prom = support::prom::shared();
    let aws = StandIn::start(
        &prom.url,
        &["--key", &format!("{KEY_ID}={SECRET}={SESSION}")],
    );
    let down = support::stub::closed_port();
    let aws_down = StandIn::start(&down, &["--key", &format!("{KEY_ID}={SECRET}={SESSION}")]);
    let dir = template_dir(&[
        (
            "plain.yaml",
            template("plain", &format!("{{address: \"{}\"}}", prom.url)),
        ),
        (
            "signed.yaml",
            template("signed", &signed(&aws.url, "us-east-1")),
        ),
        (
            "plain-down.yaml",
            template("plain-down", &format!("{{address: \"{down}\"}}")),
        ),
        (
            "signed-down.yaml",
            template("signed-down", &signed(&aws_down.url, "us-east-1")),
        ),
    ]);
    let server = serve(dir.path(), &static_keys(SECRET));
    runtime().block_on(async {
        for service in ["healthy", "bad", "lowtraffic", "absent"] {
            let plain = check(&server, "plain", service).await;
            let signed = check(&server, "signed", service).await;
            assert_eq!(
                (plain.0, &plain.1),
                (signed.0, &signed.1),
                "{service}: {plain:?} vs {signed:?}"
            );
        }
        let (status, verdict, message) = check(&server, "signed", "healthy").await;
        assert_eq!((status, verdict.as_str()), (200, "Successful"), "{message}");
        let (_, verdict, _) = check(&server, "signed", "bad").await;
        assert_eq!(verdict, "Failed");
        // Backend down behind the signing front end: an Error, as without it.
        let plain = check(&server, "plain-down", "healthy").await;
        let signed = check(&server, "signed-down", "healthy").await;
        assert_eq!(plain.1, "Error", "{plain:?}");
        assert_eq!(signed.1, "Error", "{signed:?}");
    });
    let verified = aws.verified();
    assert!(verified.len() >= 8, "{verified:?}");
    assert!(verified.iter().all(|k| k == KEY_ID), "{verified:?}");
    assert_no_secret(&server, &[SECRET, SESSION]);
}

#[test]
fn refused_signatures_are_errors_that_name_the_cause() {
    let prom = support::prom::shared();
    let key = format!("{KEY_ID}={SECRET}={SESSION}");
    let aws = StandIn::start(&prom.url, &["--key", &key, "--echo-token"]);
    // A front end whose clock is 15 minutes ahead: the signature's date is too old for it.
    let skewed = StandIn::start(&prom.url, &["--key", &key, "--skew", "900"]);
    let dir = template_dir(&[
        (
            "signed.yaml",
            template("signed", &signed(&aws.url, "us-east-1")),
        ),
        (
            "wrong-region.yaml",
            template("wrong-region", &signed(&aws.url, "eu-west-1")),
        ),
        (
            "skewed.yaml",
            template("skewed", &signed(&skewed.url, "us-east-1")),
        ),
    ]);
    let right = serve(dir.path(), &static_keys(SECRET));
    let wrong_secret = serve(dir.path(), &static_keys("not-the-secret"));
    let mut unknown_key = static_keys(SECRET);
    unknown_key[0].1 = "AKIDUNKNOWN".into();
    let unknown = serve(dir.path(), &unknown_key);
    let nothing = serve(dir.path(), &[("HOME", "/nonexistent-rollgate-home".into())]);
    runtime().block_on(async {
        for (server, template, want) in [
            (&right, "wrong-region", "not in region eu-west-1"),
            (&right, "skewed", "clock is skewed"),
            (&wrong_secret, "signed", "SignatureDoesNotMatch"),
            (&unknown, "signed", "does not know the access key id"),
            (&nothing, "signed", "no AWS credentials found"),
        ] {
            let (status, verdict, message) = check(server, template, "healthy").await;
            assert_eq!(
                (status, verdict.as_str()),
                (503, "Error"),
                "{template}: {message}"
            );
            assert!(
                message.contains(want),
                "{template}: {want:?} not in {message}"
            );
            assert!(!message.contains(SECRET), "{message}");
        }
        // The front end echoed the session token in its refusal: scrubbed.
        let (_, _, message) = check(&unknown, "signed", "healthy").await;
        assert!(message.contains("(token <redacted>)"), "{message}");
        assert!(!message.contains(SESSION), "{message}");
    });
    for server in [&right, &wrong_secret, &unknown] {
        assert_no_secret(server, &[SECRET, SESSION, "not-the-secret"]);
    }
}

#[test]
fn a_rewritten_web_identity_token_brings_new_credentials() {
    let prom = support::prom::shared();
    // Credentials live 301 s: within the refresh margin (300 s) a second after they are issued.
    let aws = StandIn::start(&prom.url, &["--sts-lifetime", "301"]);
    let tokens = tempfile::tempdir().unwrap();
    let token = tokens.path().join("token");
    std::fs::write(&token, "service-account-jwt-one\n").unwrap();
    let dir = template_dir(&[(
        "signed.yaml",
        template("signed", &signed(&aws.url, "us-east-1")),
    )]);
    let server = serve(
        dir.path(),
        &[
            (
                "AWS_ROLE_ARN",
                "arn:aws:iam::111122223333:role/rollgate".into(),
            ),
            ("AWS_WEB_IDENTITY_TOKEN_FILE", path_str(&token).into()),
            ("AWS_ENDPOINT_URL_STS", format!("{}/sts/", aws.url)),
        ],
    );
    runtime().block_on(async {
        let (_, verdict, message) = check(&server, "signed", "healthy").await;
        assert_eq!(verdict, "Successful", "{message}");
        let first = aws.verified();
        assert!(
            !first.is_empty() && first.iter().all(|k| k == &first[0]),
            "{first:?}"
        );
        std::fs::write(&token, "service-account-jwt-two\n").unwrap();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let (_, verdict, message) = check(&server, "signed", "healthy").await;
        assert_eq!(verdict, "Successful", "{message}");
        let second: Vec<String> = aws.verified().split_off(first.len());
        assert!(!second.is_empty(), "no request after the rotation");
        assert!(
            second.iter().all(|k| k != &first[0]),
            "old key used after rotation: {second:?}"
        );
        // STS refuses an expired token: an Error naming STS's code.
        std::fs::write(&token, "expired").unwrap();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let (status, verdict, message) = check(&server, "signed", "healthy").await;
        assert_eq!((status, verdict.as_str()), (503, "Error"), "{message}");
        assert!(message.contains("ExpiredTokenException"), "{message}");
        assert!(message.contains("web identity"), "{message}");
    });
    assert_no_secret(
        &server,
        &["sts-secret-", "sts-session-", "service-account-jwt"],
    );
}

#[test]
fn specs_from_the_network_may_not_sign_with_the_servers_aws_identity() {
    let dir = template_dir(&[(
        "plain.yaml",
        template("plain", "{address: \"http://127.0.0.1:9\"}"),
    )]);
    let server = serve(dir.path(), &static_keys(SECRET));
    let spec = "query: up\nnoData: fail\nprometheus:\n  address: http://127.0.0.1:9\n  sigv4: {region: us-east-1}\n";
    let body = crate::serve_common::flagger_payload("Progressing", &[("spec", spec)]);
    let (status, text, _) = runtime().block_on(post(
        &client(),
        &format!("{}/flagger/v1/check", server.url),
        body,
        false,
    ));
    assert_eq!(status, 422, "{text}");
    assert!(text.contains("prometheus.sigv4"), "{text}");
    assert!(text.contains("AWS credentials"), "{text}");
}
