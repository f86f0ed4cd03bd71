//! The network gRPC endpoint (`grpc::remote::serve_remote`, behind `rollgate serve
//! --grpc-listen`) against a client not written in Rust: Python grpcio, with stubs generated
//! from proto/ at test time (tests/grpc_client/client.py). Every method, health, reflection
//! (v1 and v1alpha), bearer-token refusals, bad input (missing fields, unknown enum values,
//! invalid JSON, a 10 MB request, undecodable bytes), deadlines and the server's budget, and
//! TLS. The server runs in this process on 127.0.0.1; Python connects over TCP.

use crate::{serve_common, support};

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener as StdListener};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rollgate::engine::{AddressPolicy, Engine};
use rollgate::grpc::remote::{serve_remote, RemoteOptions, TlsSource};
use rollgate::prometheus::{Backend, Client};
use serde_json::{json, Value};
use support::stub::{Mode, Stub, SAMPLE_TIME};
use tokio::sync::oneshot;

const TOKEN: &str = "t0ken-for-tests";
const RATE: f64 = 0.004;
/// The server's measurement budget (a call without a deadline gets no more).
const BUDGET: Duration = Duration::from_secs(2);

fn stub() -> Stub {
    Stub::start(Mode::Fixed(
        json!({"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": {}, "value": [SAMPLE_TIME, RATE.to_string()]}
        ]}})
        .to_string(),
    ))
}

/// A "Prometheus" that reads requests and never answers; records how long each connection
/// stayed open, so a test can see a cancelled query's connection closed.
struct Hang {
    url: String,
    held: Arc<Mutex<Vec<Duration>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<JoinHandle<()>>,
    addr: SocketAddr,
}

impl Hang {
    fn start() -> Hang {
        let listener = StdListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let held = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (h, s) = (held.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming().take(16) {
                if s.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                let Ok(mut conn) = conn else { continue };
                let h = h.clone();
                std::thread::spawn(move || {
                    let t0 = Instant::now();
                    conn.set_read_timeout(Some(Duration::from_secs(90)))
                        .unwrap();
                    let mut buf = [0u8; 4096];
                    while matches!(conn.read(&mut buf), Ok(n) if n > 0) {}
                    h.lock().unwrap().push(t0.elapsed());
                });
            }
        });
        Hang {
            url: format!("http://{addr}"),
            held,
            stop,
            thread: Some(thread),
            addr,
        }
    }
}

impl Drop for Hang {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(self.addr).and_then(|mut c| c.write_all(b""));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn engine() -> Arc<Engine> {
    Arc::new(Engine::new(
        Backend::Live(Client::new()),
        AddressPolicy::default(),
    ))
}

/// Serves with `options` on 127.0.0.1, runs client.py with `args`, stops the server.
async fn with_server(options: RemoteOptions, args: Vec<String>) -> Vec<Value> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let server = tokio::spawn(serve_remote(listener, engine(), options, async {
        let _ = stop_rx.await;
    }));
    let out = tokio::task::spawn_blocking(move || python(addr, &args))
        .await
        .unwrap();
    stop_tx.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(15), server)
        .await
        .expect("the server stops after its shutdown future resolves")
        .unwrap();
    out
}

fn python(addr: SocketAddr, args: &[String]) -> Vec<Value> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let py = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(&py)
        .arg(root.join("tests/grpc_client/client.py"))
        .arg("--addr")
        .arg(addr.to_string())
        .arg("--proto-root")
        .arg(root.join("proto"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {py} (needs grpcio and grpcio-tools): {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client.py failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("client.py printed no JSON ({e}): {stdout}"));
    v["cases"].as_array().unwrap().clone()
}

fn case<'a>(cases: &'a [Value], name: &str) -> &'a Value {
    cases
        .iter()
        .find(|c| c["case"] == name)
        .unwrap_or_else(|| panic!("no case {name} in {cases:?}"))
}

fn ok<'a>(cases: &'a [Value], name: &str) -> &'a Value {
    let c = case(cases, name);
    assert_eq!(c["code"], "OK", "{c}");
    &c["response"]
}

fn refused(cases: &[Value], name: &str, code: &str, says: &str) {
    let c = case(cases, name);
    assert_eq!(c["code"], code, "{c}");
    let message = c["message"].as_str().unwrap();
    assert!(message.contains(says), "{name}: {message:?} lacks {says:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_client_gets_every_method_and_clear_refusals() {
    let prom = stub();
    let hang = Hang::start();
    let options = RemoteOptions {
        budget: BUDGET,
        ..RemoteOptions::default().with_token(TOKEN)
    };
    let args = vec![
        "--token".into(),
        TOKEN.into(),
        "--prom".into(),
        prom.url.clone(),
        "--hang".into(),
        hang.url.clone(),
    ];
    let cases = with_server(options, args).await;

    // Health answers without a token.
    assert_eq!(ok(&cases, "health")["status"], "SERVING");
    assert_eq!(ok(&cases, "health_service")["status"], "SERVING");
    refused(&cases, "health_unknown", "NOT_FOUND", "");

    // Reflection lists the API, health and itself, in both versions, and serves the file.
    for version in ["v1", "v1alpha"] {
        let names = ok(&cases, &format!("reflection_list_{version}"));
        let names: Vec<&str> = names
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .collect();
        assert!(
            names.contains(&"rollgate.v1.MetricProviderService"),
            "{names:?}"
        );
        assert!(names.contains(&"grpc.health.v1.Health"), "{names:?}");
        assert!(
            names.iter().any(|n| n.starts_with("grpc.reflection.")),
            "{names:?}"
        );
    }
    let files = ok(&cases, "reflection_describe");
    let api = files
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "rollgate/v1/metric_provider.proto")
        .unwrap_or_else(|| panic!("no API file in {files}"));
    assert_eq!(api["package"], "rollgate.v1");
    let methods = &api["services"]["MetricProviderService"];
    for m in [
        "InitPlugin",
        "Run",
        "Resume",
        "Terminate",
        "GarbageCollect",
        "Type",
        "GetMetadata",
        "Analyze",
    ] {
        assert!(
            methods.as_array().unwrap().contains(&json!(m)),
            "{m} missing: {methods}"
        );
    }

    // Everything but health needs the token; the refusal never echoes it.
    refused(
        &cases,
        "reflection_no_token",
        "UNAUTHENTICATED",
        "missing bearer token",
    );
    refused(
        &cases,
        "run_no_token",
        "UNAUTHENTICATED",
        "missing bearer token",
    );
    refused(
        &cases,
        "type_wrong_token",
        "UNAUTHENTICATED",
        "invalid bearer token",
    );
    assert!(!case(&cases, "type_wrong_token")["message"]
        .as_str()
        .unwrap()
        .contains(TOKEN));

    // Every method.
    assert_eq!(ok(&cases, "init_plugin"), &json!({}));
    assert_eq!(ok(&cases, "type")["provider_type"], "RPCPlugin");
    assert_eq!(ok(&cases, "get_metadata")["metadata"]["kind"], "query");
    let m = &ok(&cases, "run_successful")["measurement"];
    assert_eq!(m["phase"], "PHASE_SUCCESSFUL", "{m}");
    assert_eq!(m["value"], format!("[{RATE}]"));
    assert_eq!(m["metadata"]["metric"], "error-rate");
    assert_eq!(
        ok(&cases, "run_failed")["measurement"]["phase"],
        "PHASE_FAILED"
    );
    let m = &ok(&cases, "resume")["measurement"];
    assert_eq!(m["phase"], "PHASE_SUCCESSFUL", "{m}");
    assert_eq!(m["started_at"], "2026-01-02T03:04:05.123456789Z");
    let m = &ok(&cases, "terminate")["measurement"];
    assert_eq!(m["phase"], "PHASE_INCONCLUSIVE", "{m}");
    assert!(m["finished_at"].is_string(), "{m}");
    assert_eq!(ok(&cases, "garbage_collect"), &json!({}));
    let m = &ok(&cases, "analyze")["measurement"];
    assert_eq!(m["phase"], "PHASE_SUCCESSFUL", "{m}");
    assert_eq!(m["metadata"]["query"], "sum(rate(http_requests_total[5m]))");
    // Analyze ran last against the stub (the calls after it fail before any query).
    let sent = prom.last_request().unwrap();
    let sent_time: f64 = sent.param("time").unwrap().parse().unwrap();
    assert_eq!(sent_time, 1_767_323_045.0);

    // Bad input.
    refused(
        &cases,
        "run_missing_metric",
        "INVALID_ARGUMENT",
        "metric: is required",
    );
    refused(
        &cases,
        "run_missing_spec",
        "INVALID_ARGUMENT",
        "metric.spec_json: is required",
    );
    refused(
        &cases,
        "run_invalid_json",
        "INVALID_ARGUMENT",
        "not valid JSON",
    );
    refused(&cases, "run_invalid_spec", "INVALID_ARGUMENT", "noData");
    refused(
        &cases,
        "resume_unknown_phase",
        "INVALID_ARGUMENT",
        "unknown value 99",
    );
    refused(
        &cases,
        "resume_unset_phase",
        "INVALID_ARGUMENT",
        "measurement.phase: is required",
    );
    refused(
        &cases,
        "terminate_missing_measurement",
        "INVALID_ARGUMENT",
        "measurement: is required",
    );
    refused(
        &cases,
        "analyze_time_out_of_range",
        "INVALID_ARGUMENT",
        "evaluation_time",
    );
    refused(
        &cases,
        "run_server_file",
        "PERMISSION_DENIED",
        "bearerTokenFile",
    );
    refused(
        &cases,
        "run_10mb",
        "RESOURCE_EXHAUSTED",
        "above the limit of 4194304 bytes",
    );
    // Bytes that are no protobuf at all: INTERNAL, as grpc-go answers an undecodable request.
    refused(&cases, "run_garbage_bytes", "INTERNAL", "");
    refused(&cases, "unknown_method", "UNIMPLEMENTED", "");
    assert_eq!(
        ok(&cases, "type_after_bad_input")["provider_type"],
        "RPCPlugin"
    );

    // The call's deadline ends it (and drops its Prometheus query); without one, the server's
    // budget bounds the measurement, which then says it timed out.
    let c = case(&cases, "run_deadline");
    assert_eq!(c["code"], "DEADLINE_EXCEEDED", "{c}");
    assert!(c["elapsedMs"].as_f64().unwrap() < 1500.0, "{c}");
    let c = case(&cases, "run_budget");
    assert_eq!(c["code"], "OK", "{c}");
    assert_eq!(c["response"]["measurement"]["phase"], "PHASE_ERROR", "{c}");
    let elapsed = c["elapsedMs"].as_f64().unwrap();
    assert!(
        elapsed >= BUDGET.as_millis() as f64 - 100.0
            && elapsed < BUDGET.as_millis() as f64 + 2500.0,
        "{c}"
    );
    assert_eq!(
        ok(&cases, "type_after_deadlines")["provider_type"],
        "RPCPlugin"
    );
    // Both hanging queries were abandoned at their deadline, not at the spec's 60 s timeout.
    let deadline = Instant::now() + Duration::from_secs(5);
    while hang.held.lock().unwrap().len() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let held = hang.held.lock().unwrap().clone();
    assert_eq!(held.len(), 2, "{held:?}");
    assert!(
        held.iter().all(|d| *d < BUDGET + Duration::from_secs(2)),
        "{held:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_is_offered_and_plaintext_refused() {
    let prom = stub();
    let ck =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, ck.cert.pem()).unwrap();
    let key = rustls_pki_types::PrivateKeyDer::Pkcs8(ck.key_pair.serialize_der().into());
    let mut config = tokio_rustls::rustls::ServerConfig::builder_with_provider(Arc::new(
        tokio_rustls::rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![ck.cert.der().clone()], key)
    .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let options = RemoteOptions {
        tls: Some(TlsSource::Fixed(tokio_rustls::TlsAcceptor::from(Arc::new(
            config,
        )))),
        ..RemoteOptions::default()
    };
    let args = vec![
        "--suite".into(),
        "tls".into(),
        "--prom".into(),
        prom.url.clone(),
        "--tls-ca".into(),
        ca.display().to_string(),
    ];
    let cases = with_server(options, args).await;
    assert_eq!(ok(&cases, "health")["status"], "SERVING");
    assert_eq!(
        ok(&cases, "run_successful")["measurement"]["phase"],
        "PHASE_SUCCESSFUL"
    );
    refused(&cases, "plaintext_refused", "UNAVAILABLE", "");
}

/// Waits (at most 20 s) until `addr` accepts connections.
fn wait_for_port(addr: SocketAddr) {
    let started = Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "gRPC port never opened"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `rollgate serve --grpc-listen`: the binary serves the gRPC API beside HTTP, with the HTTP
/// side's bearer token.
#[test]
fn serve_grpc_listen_serves_the_api_with_the_token() {
    let prom = stub();
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, TOKEN).unwrap();
    let free = || {
        let l = StdListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let grpc_addr = free();
    let mut child = Command::new(crate::support::rollgate_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--grpc-listen"])
        .arg(grpc_addr.to_string())
        .arg("--auth-token-file")
        .arg(&token_file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_port(grpc_addr);
    let args = [
        "--token".to_string(),
        TOKEN.into(),
        "--prom".into(),
        prom.url.clone(),
        "--suite".into(),
        "serve".into(),
    ];
    let cases = python(grpc_addr, &args);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(ok(&cases, "health")["status"], "SERVING");
    assert_eq!(
        ok(&cases, "run_successful")["measurement"]["phase"],
        "PHASE_SUCCESSFUL"
    );
    refused(&cases, "run_without_token", "UNAUTHENTICATED", "");
}

/// A new certificate for 127.0.0.1 written to `cert` and `key`; returns `dir/{name}-ca.pem`,
/// the same certificate as the CA a client trusts.
fn write_pair(dir: &Path, cert: &Path, key: &Path, name: &str) -> std::path::PathBuf {
    let ck =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
    std::fs::write(cert, ck.cert.pem()).unwrap();
    std::fs::write(key, ck.key_pair.serialize_pem()).unwrap();
    let ca = dir.join(format!("{name}-ca.pem"));
    std::fs::write(&ca, ck.cert.pem()).unwrap();
    ca
}

/// `serve --grpc-listen` follows SIGHUP reloads of the token and the
/// certificate as the HTTP side does, and its queries are counted in `/metrics`. Against the
/// real Prometheus of the harness.
#[test]
fn serve_grpc_listen_follows_reloads_and_its_queries_reach_metrics() {
    let prom = support::prom::shared();
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, token) = (
        dir.path().join("tls.crt"),
        dir.path().join("tls.key"),
        dir.path().join("token"),
    );
    let old_ca = write_pair(dir.path(), &cert, &key, "old");
    std::fs::write(&token, "grpc-token-one\n").unwrap();
    let grpc_addr = StdListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let grpc = grpc_addr.to_string();
    let server = serve_common::ServeProcess::start(&[
        "--prometheus",
        &prom.url,
        "--grpc-listen",
        &grpc,
        "--auth-token-file",
        serve_common::path_str(&token),
        "--tls-cert",
        serve_common::path_str(&cert),
        "--tls-key",
        serve_common::path_str(&key),
    ]);
    wait_for_port(grpc_addr);
    let call = |ca: &Path, token: &str| {
        let args = [
            "--token".to_string(),
            token.into(),
            "--prom".into(),
            prom.url.clone(),
            "--suite".into(),
            "serve".into(),
            "--tls-ca".into(),
            ca.display().to_string(),
        ];
        python(grpc_addr, &args)
    };
    // The suite's Run asks `vector(1)` for `result[0] < 0.01`: on the real Prometheus that is
    // 1, so Failed; what matters here is that the call got in and was judged.
    let judged = |cases: &[Value]| ok(cases, "run_successful")["measurement"]["phase"].clone();
    let cases = call(&old_ca, "grpc-token-one");
    assert_eq!(judged(&cases), "PHASE_FAILED");
    assert_eq!(
        ok(&cases, "analyze")["measurement"]["phase"],
        "PHASE_SUCCESSFUL"
    );

    // The gRPC queries (Run and Analyze: one each) are in the HTTP side's /metrics; nothing
    // else has queried this server's Prometheus.
    let https = reqwest::Client::builder()
        .no_proxy()
        .add_root_certificate(
            reqwest::Certificate::from_pem(&std::fs::read(&old_ca).unwrap()).unwrap(),
        )
        .build()
        .unwrap();
    let metrics = tokio::runtime::Runtime::new().unwrap().block_on(async {
        https
            .get(format!("{}/metrics", server.url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    let series = r#"rollgate_prometheus_queries_total{kind="instant",outcome="ok"} "#;
    let count: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix(series))
        .unwrap_or_else(|| panic!("no {series} in {metrics}"))
        .parse()
        .unwrap();
    assert_eq!(count, 2.0, "{metrics}");

    // Rotate both, as a Secret update does, and reload.
    let new_ca = write_pair(dir.path(), &cert, &key, "new");
    std::fs::write(&token, "grpc-token-two\n").unwrap();
    server.signal("HUP");
    server
        .wait_for_log(Duration::from_secs(10), |v| v["@message"] == "reload done")
        .expect("the reload finishes");

    let cases = call(&new_ca, "grpc-token-two");
    assert_eq!(judged(&cases), "PHASE_FAILED");
    let cases = call(&new_ca, "grpc-token-one");
    refused(
        &cases,
        "run_successful",
        "UNAUTHENTICATED",
        "invalid bearer token",
    );
    // The old certificate is no longer served: a client trusting only it cannot connect.
    let cases = call(&old_ca, "grpc-token-two");
    refused(&cases, "health", "UNAVAILABLE", "");
    assert!(
        !server
            .logs()
            .iter()
            .any(|l| l.contains("grpc-token-one") || l.contains("grpc-token-two")),
        "no token in the logs"
    );
}
