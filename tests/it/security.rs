//! The judge holds against the people it judges: argument values cannot steer the verdict,
//! caller-chosen names are refused, credentials go only where the operator sent them, and the
//! plugin reads credential files only under directories the operator allows. Each test drives
//! the release binary on 127.0.0.1, as an adversary would (docs/security.md).

use crate::serve_common::{client, flagger_payload, path_str, post, template_dir, ServeProcess};
use crate::support;

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use support::gohost::build;
use support::stub::{vector_body, Mode, Stub};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn shipped(name: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(root.join("examples").join(name)).unwrap()
}

/// The payload the adversary sent, for the scenario's failing service and as written.
const INJECTIONS: [&str; 2] = [
    r#"bad"}[5m])) > 10000 or vector(0.001) #"#,
    r#"payments-canary"}[5m])) > 10000 or vector(0.001) #"#,
];

/// On a server with `--no-inline-specs` and the shipped `error-rate` template, a canary whose
/// 5xx ratio is 5 % is Failed (412); the injected `args.service` used to make it 200
/// Successful with result [0.001]. It is refused (422) naming the argument, on the Flagger
/// endpoint and on the web provider alike.
#[test]
fn an_argument_cannot_turn_a_failing_canary_into_successful() {
    let prom = support::prom::shared();
    let dir = template_dir(&[("error-rate.yaml", shipped("error-rate.yaml"))]);
    let server = ServeProcess::start(&["--templates", path_str(dir.path()), "--no-inline-specs"]);
    let client = client();
    let check = format!("{}/flagger/v1/check", server.url);
    let measure = format!("{}/argo/v1/measure", server.url);
    let flagger = |service: &str| {
        flagger_payload(
            "Progressing",
            &[
                ("template", "error-rate"),
                ("metric", "error-ratio"),
                ("args.service", service),
                ("args.prometheus", prom.url.as_str()),
            ],
        )
    };
    runtime().block_on(async {
        let (status, text, _) = post(&client, &check, flagger("bad"), false).await;
        assert_eq!(status, 412, "the honest verdict: {text}");
        assert!(
            text.starts_with("Failed: error-ratio: result [0.04"),
            "{text}"
        );
        for attack in INJECTIONS {
            let (status, text, _) = post(&client, &check, flagger(attack), false).await;
            assert_eq!(status, 422, "{attack}: {text}");
            assert!(text.contains("args.service"), "{text}");
            let body = json!({"template": "error-rate", "metric": "error-ratio",
                "args": {"service": attack, "prometheus": prom.url}});
            let (status, text, _) = post(&client, &measure, body.to_string(), true).await;
            assert_eq!(status, 422, "{attack}: {text}");
            assert!(text.contains("args.service"), "{text}");
            // Both metrics of the template, the built-in provider's included.
            let all = flagger_payload(
                "Progressing",
                &[
                    ("template", "error-rate"),
                    ("args.service", attack),
                    ("args.prometheus", prom.url.as_str()),
                ],
            );
            let (status, text, _) = post(&client, &check, all, false).await;
            assert_eq!(status, 422, "{attack}: {text}");
        }
    });
}

/// A misspelt argument (`max_ratio` for a template that declares no such thing) used to be
/// ignored, judging against the default; now every surface names it and lists the declared
/// ones: the Flagger endpoint, the web provider and the CLI's `--arg`.
#[test]
fn undeclared_arguments_are_named_with_the_declared_ones() {
    let prom = support::prom::shared();
    let dir = template_dir(&[("error-rate.yaml", shipped("error-rate.yaml"))]);
    let server = ServeProcess::start(&["--templates", path_str(dir.path())]);
    let client = client();
    runtime().block_on(async {
        let body = flagger_payload(
            "Progressing",
            &[
                ("template", "error-rate"),
                ("args.service", "bad"),
                ("args.servcie", "healthy"),
                ("args.prometheus", prom.url.as_str()),
            ],
        );
        let url = format!("{}/flagger/v1/check", server.url);
        let (status, text, _) = post(&client, &url, body, false).await;
        assert_eq!(status, 422, "{text}");
        assert!(
            text.contains("args.servcie: no such argument (declared: prometheus, service)"),
            "{text}"
        );
        let body = json!({"template": "error-rate", "args": {"max_ratio": "0.5"}});
        let url = format!("{}/argo/v1/measure", server.url);
        let (status, text, _) = post(&client, &url, body.to_string(), true).await;
        assert_eq!(status, 422, "{text}");
        assert!(text.contains("args.max_ratio"), "{text}");
    });
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for command in ["dry-run", "rules", "dashboard"] {
        let mut cmd = Command::new(support::rollgate_bin());
        cmd.arg(command)
            .arg("-f")
            .arg(root.join("examples/error-rate.yaml"))
            .args(["--arg", "max_ratio=0.5"]);
        if command == "dry-run" {
            cmd.arg("--replay")
                .arg(root.join("examples/error-rate.replay.json"));
        }
        let out = cmd.stdin(Stdio::null()).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{command}: {err}");
        assert!(
            err.contains("args.max_ratio: no such argument (declared: prometheus, service)"),
            "{command}: {err}"
        );
    }
}

/// A template that sends a token to an address taken from an argument is not served: serve
/// refuses to start with it, naming the key.
#[test]
fn a_template_sending_credentials_to_an_argument_address_is_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "operator-secret").unwrap();
    let template = shipped("error-rate.yaml").replace(
        "              timeout: 10s\n",
        &format!(
            "              timeout: 10s\n              bearerTokenFile: {}\n",
            token.display()
        ),
    );
    let templates = template_dir(&[("error-rate.yaml", template)]);
    let started = ServeProcess::try_start(&["--templates", path_str(templates.path())], &[]);
    let Err((_, logs)) = started else {
        panic!("serve started with a template that sends its token to {{{{args.prometheus}}}}");
    };
    let logs = logs.join("\n");
    assert!(
        logs.contains("prometheus.address") && logs.contains("bearerTokenFile"),
        "{logs}"
    );
    assert!(!logs.contains("operator-secret"), "{logs}");
}

/// The default Prometheus's credentials (userinfo in `--prometheus`) go with the operator's
/// templates only: an inline spec that names no address reaches the same server without them.
#[test]
fn an_inline_spec_gets_the_default_address_without_its_credentials() {
    let stub = Stub::start(Mode::Fixed(vector_body("0")));
    let with_userinfo = stub.url.replace("http://", "http://ops:hunter2@");
    let dir = template_dir(&[(
        "t.yaml",
        r#"kind: AnalysisTemplate
metadata: {name: t}
spec:
  metrics:
    - name: m
      successCondition: result[0] < 1
      provider:
        plugin:
          rollgate/analysis: {query: up, noData: fail}
"#
        .to_string(),
    )]);
    let server = ServeProcess::start(&[
        "--templates",
        path_str(dir.path()),
        "--prometheus",
        &with_userinfo,
    ]);
    let client = client();
    let url = format!("{}/flagger/v1/check", server.url);
    runtime().block_on(async {
        let (status, text, _) = post(
            &client,
            &url,
            flagger_payload("Progressing", &[("template", "t")]),
            false,
        )
        .await;
        assert_eq!(status, 200, "{text}");
        let sent = stub.last_request().unwrap();
        assert!(
            sent.header("authorization").is_some(),
            "the operator's template"
        );
        let (status, text, _) = post(
            &client,
            &url,
            flagger_payload(
                "Progressing",
                &[
                    ("spec", "query: up\nnoData: fail\n"),
                    ("successCondition", "result[0] < 1"),
                ],
            ),
            false,
        )
        .await;
        assert_eq!(status, 200, "{text}");
        let sent = stub.last_request().unwrap();
        assert_eq!(sent.header("authorization"), None, "an inline spec");
    });
}

/// `serve --no-inline-specs` refuses specs sent over gRPC as over HTTP: every `Analyze` and
/// `Run` there carries its spec.
#[test]
fn grpc_follows_no_inline_specs() {
    let prom = Stub::start(Mode::Fixed(vector_body("1")));
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let grpc_addr = free.local_addr().unwrap();
    drop(free);
    let grpc = grpc_addr.to_string();
    let server = ServeProcess::start(&["--grpc-listen", &grpc, "--no-inline-specs"]);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(std::env::var("PYTHON").unwrap_or_else(|_| "python3".into()))
        .arg(root.join("tests/grpc_client/client.py"))
        .args(["--addr", &grpc, "--proto-root"])
        .arg(root.join("proto"))
        .args(["--prom", &prom.url, "--suite", "serve"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    drop(server);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(stdout.trim()).unwrap();
    let case = |name: &str| {
        v["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["case"] == name)
            .unwrap()
            .clone()
    };
    for name in ["run_successful", "analyze"] {
        let c = case(name);
        assert_eq!(c["code"], "PERMISSION_DENIED", "{c}");
        assert!(
            c["message"].as_str().unwrap().contains("--no-inline-specs"),
            "{c}"
        );
    }
    assert_eq!(prom.requests(), 0, "nothing was measured");
}

/// Plugin mode: a template author names the controller's service-account token as
/// `bearerTokenFile` and an address of their own. Without `--allow-credential-dir` covering the
/// file (symlinks and `..` resolved first), the file is never read or sent: the measurement is an
/// Error naming the argument, and the author's listener receives no credential. Inside an
/// allowed directory the same spec sends it (so the test can fail).
#[test]
fn plugin_mode_reads_credential_files_only_under_allowed_directories() {
    let controller = tempfile::tempdir().unwrap();
    let token = controller.path().join("token");
    std::fs::write(&token, "controller-sa-token").unwrap();
    let allowed = tempfile::tempdir().unwrap();
    std::fs::write(allowed.path().join("prom-token"), "prom-token").unwrap();
    let link = allowed.path().join("link");
    std::os::unix::fs::symlink(&token, &link).unwrap();
    let dotdot = allowed
        .path()
        .join("..")
        .join(controller.path().file_name().unwrap())
        .join("token");
    let thief = Stub::start(Mode::Fixed(vector_body("0")));
    let metric = |file: &Path| {
        json!({"name": "steal", "successCondition": "result[0] < 1",
            "spec": {"prometheus": {"address": thief.url, "bearerTokenFile": file},
                     "query": "up", "noData": "fail"}})
    };
    let run = |file: &Path, env: &[&str]| -> Value {
        let list = json!({"calls": [{"method": "Run", "metric": metric(file)}]});
        let mut args: Vec<&str> = Vec::new();
        for e in env {
            args.extend(["-env", *e]);
        }
        let run = build().calls(Path::new(support::rollgate_bin()), &list, &args);
        assert!(run.ok(), "{}\n{}", run.stdout, run.stderr);
        run.json[0]["measurement"].clone()
    };
    let allow = format!(
        "ROLLGATE_ALLOW_CREDENTIAL_DIRS={}",
        allowed.path().display()
    );
    for (file, env) in [
        (token.as_path(), vec![]),
        (token.as_path(), vec![allow.as_str()]),
        (link.as_path(), vec![allow.as_str()]),
        (dotdot.as_path(), vec![allow.as_str()]),
    ] {
        let m = run(file, &env);
        assert_eq!(m["phase"], "Error", "{file:?} {env:?}: {m}");
        let message = m["message"].as_str().unwrap();
        assert!(message.contains("--allow-credential-dir"), "{message}");
        assert!(!message.contains("controller-sa-token"), "{message}");
    }
    assert_eq!(thief.requests(), 0, "the author's listener got a request");
    // The operator's own credential directory: read and sent.
    let m = run(&allowed.path().join("prom-token"), &[allow.as_str()]);
    assert_eq!(m["phase"], "Successful", "{m}");
    let sent = thief.last_request().unwrap();
    assert_eq!(sent.header("authorization"), Some("Bearer prom-token"));
}
