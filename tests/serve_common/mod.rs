//! Shared by the `serve_*` tests: the `rollgate serve` binary started on 127.0.0.1 port 0
//! (the bound port is read from its "listening" log line), its logs, signals, and Flagger's
//! exact webhook payloads.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long the server may take to start.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// A running `rollgate serve`; killed on drop.
pub struct ServeProcess {
    child: Child,
    /// `http://127.0.0.1:PORT` (or https).
    pub url: String,
    logs: Arc<Mutex<Vec<String>>>,
    /// Set by `drop_logs`: lines are still read from the pipe, then dropped.
    dropping: Arc<AtomicBool>,
}

impl ServeProcess {
    /// Starts `rollgate serve --listen 127.0.0.1:0 ARGS...` and waits until it listens.
    /// Panics with its logs when it does not.
    pub fn start(args: &[&str]) -> ServeProcess {
        Self::try_start(args, &[]).unwrap_or_else(|(status, logs)| {
            panic!(
                "rollgate serve did not start ({status:?}):\n{}",
                logs.join("\n")
            )
        })
    }

    /// Like `start`, with extra environment variables; on failure, the exit status and logs.
    pub fn try_start(
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Result<ServeProcess, (Option<ExitStatus>, Vec<String>)> {
        Self::try_start_bin(crate::support::rollgate_bin(), args, env)
    }

    /// Like `try_start`, with another rollgate binary.
    pub fn try_start_bin(
        bin: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Result<ServeProcess, (Option<ExitStatus>, Vec<String>)> {
        let mut cmd = Command::new(bin);
        cmd.arg("serve")
            .arg("--listen")
            .arg("127.0.0.1:0")
            .args(args)
            .env_remove("ROLLGATE_PROMETHEUS_ADDRESS")
            .env_remove("ROLLGATE_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn rollgate serve");
        let stderr = child.stderr.take().unwrap();
        let logs = Arc::new(Mutex::new(Vec::new()));
        let dropping = Arc::new(AtomicBool::new(false));
        let (sink, drop_lines) = (logs.clone(), dropping.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if !drop_lines.load(Ordering::Relaxed) {
                    sink.lock().unwrap().push(line);
                }
            }
        });
        let tls = args.contains(&"--tls-cert");
        let started = Instant::now();
        loop {
            let addr = logs.lock().unwrap().iter().find_map(|l| {
                let v: Value = serde_json::from_str(l).ok()?;
                (v["@message"] == "listening").then(|| v["addr"].as_str().unwrap().to_string())
            });
            if let Some(addr) = addr {
                let scheme = if tls { "https" } else { "http" };
                return Ok(ServeProcess {
                    child,
                    url: format!("{scheme}://{addr}"),
                    logs,
                    dropping,
                });
            }
            if let Ok(Some(status)) = child.try_wait() {
                std::thread::sleep(Duration::from_millis(100));
                let logs = logs.lock().unwrap().clone();
                return Err((Some(status), logs));
            }
            if started.elapsed() > START_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                let logs = logs.lock().unwrap().clone();
                return Err((None, logs));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// From now on, reads the server's log lines and drops them, as a log shipper would,
    /// instead of keeping them: a benchmark's millions of access-log lines kept in memory
    /// would charge the harness's page faults to the server on shared cores.
    pub fn drop_logs(&self) {
        self.dropping.store(true, Ordering::Relaxed);
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Every log line so far.
    pub fn logs(&self) -> Vec<String> {
        self.logs.lock().unwrap().clone()
    }

    /// The log lines parsed as JSON.
    pub fn log_json(&self) -> Vec<Value> {
        self.logs()
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Waits until a log line satisfies `pred`, at most `limit`.
    pub fn wait_for_log(&self, limit: Duration, pred: impl Fn(&Value) -> bool) -> Option<Value> {
        let started = Instant::now();
        while started.elapsed() < limit {
            if let Some(v) = self.log_json().into_iter().find(|v| pred(v)) {
                return Some(v);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Sends a signal (`HUP`, `TERM`) to the server (our own child, by pid).
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} failed");
    }

    /// Waits for the process to exit, at most `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let started = Instant::now();
        while started.elapsed() < limit {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Whether the process still runs.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Flagger's hook types and the canary phase Flagger sends with each (see Flagger's
/// scheduler: confirm-rollout sends the canary's current phase, rollback sends Progressing or
/// Waiting, the others Progressing).
pub const HOOKS: &[(&str, &str)] = &[
    ("confirm-rollout", "Waiting"),
    ("pre-rollout", "Progressing"),
    ("rollout", "Progressing"),
    ("confirm-traffic-increase", "Progressing"),
    ("confirm-promotion", "Progressing"),
    ("rollback", "Progressing"),
];

/// The body Flagger posts: Go's `json.Marshal` of `CanaryWebhookPayload` (keys in struct
/// order, `metadata` omitted when empty).
pub fn flagger_payload(phase: &str, metadata: &[(&str, &str)]) -> String {
    let mut out = format!(
        r#"{{"name":"podinfo","namespace":"test","phase":"{phase}","checksum":"6d8f5cb8b7""#
    );
    if !metadata.is_empty() {
        let md: serde_json::Map<String, Value> = metadata
            .iter()
            .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
            .collect();
        out.push_str(&format!(r#","metadata":{}"#, Value::Object(md)));
    }
    out.push('}');
    out
}

/// An HTTP client for the tests (no proxy, short timeouts).
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// POSTs `body` as Flagger does (`Content-Type: application/json`); returns status, body and
/// the time taken.
pub async fn post(
    client: &reqwest::Client,
    url: &str,
    body: String,
    json: bool,
) -> (u16, String, Duration) {
    let started = Instant::now();
    let mut req = client
        .post(url)
        .header("Content-Type", "application/json")
        .body(body);
    if json {
        req = req.header("Accept", "application/json");
    }
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("body");
    (status, text, started.elapsed())
}

/// An AnalysisTemplate over the scenario data: the 5xx ratio of `service` (track canary),
/// with a request guard, as the README documents it.
pub fn error_rate_template(name: &str, on_insufficient: &str) -> String {
    let ratio = "sum(rate(http_requests_total{service=\\\"{{args.service}}\\\",track=\\\"canary\\\",code=~\\\"5..\\\"}[5m])) / sum(rate(http_requests_total{service=\\\"{{args.service}}\\\",track=\\\"canary\\\"}[5m]))";
    let total = "sum(increase(http_requests_total{service=\\\"{{args.service}}\\\",track=\\\"canary\\\"}[5m]))";
    format!(
        r#"apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: {name}
spec:
  args:
    - name: service
  metrics:
    - name: error-ratio
      successCondition: result[0] < 0.01
      failureCondition: result[0] >= 0.01
      provider:
        plugin:
          rollgate/analysis:
            query: "{ratio}"
            minRequests:
              query: "{total}"
              count: 300
              onInsufficient: {on_insufficient}
            noData: inconclusive
"#
    )
}

/// A compare template on the healthy canary/stable pair: `repeated` is measured every second in
/// runs of 4 checks, `once` has no interval.
pub fn compare_template() -> String {
    use crate::support::scenarios::{CMP_HEALTHY_CANARY as CANARY, CMP_HEALTHY_STABLE as STABLE};
    let provider = serde_json::json!({"plugin": {"rollgate/analysis": {
        "compare": {
            "canary": {"bad": CANARY.bad_query("10m"), "total": CANARY.total_query("10m")},
            "stable": {"bad": STABLE.bad_query("10m"), "total": STABLE.total_query("10m")},
            "maxIncrease": 0.2, "margin": 0.001, "confidence": 0.95, "minRequests": 500
        },
        "noData": "inconclusive"
    }}});
    // JSON is YAML: the file is read as any template.
    serde_json::json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisTemplate",
        "metadata": {"name": "compare"},
        "spec": {"metrics": [
            {"name": "repeated", "interval": "1s", "count": 4, "provider": provider},
            {"name": "once", "provider": provider}
        ]}
    })
    .to_string()
}

/// `rollgate serve` on the shared Prometheus with `files` (name, text) as its templates; the
/// directory lives as long as the returned `TempDir`.
pub fn serve_templates(files: &[(&str, String)]) -> (tempfile::TempDir, ServeProcess) {
    let prom = crate::support::prom::shared();
    let dir = template_dir(files);
    let server = ServeProcess::start(&[
        "--prometheus",
        &prom.url,
        "--templates",
        path_str(dir.path()),
    ]);
    (dir, server)
}

/// POSTs `body` as JSON asking for JSON, and reads the answer (panics with it when it is not
/// JSON).
pub async fn post_for_json(url: &str, body: String) -> Value {
    let text = client()
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Writes `files` (name, text) into a new temporary directory.
pub fn template_dir(files: &[(&str, String)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

/// The path as a `&str`.
pub fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `rollgate serve` with the error-rate template (`error_rate_template("error-rate",
/// "inconclusive")`) on `prometheus`, plus `extra` flags; the template directory lives as long as
/// the returned guard.
pub fn error_rate_server(prometheus: &str, extra: &[&str]) -> (tempfile::TempDir, ServeProcess) {
    let dir = template_dir(&[(
        "error-rate.yaml",
        error_rate_template("error-rate", "inconclusive"),
    )]);
    let mut args = vec![
        "--templates",
        path_str(dir.path()),
        "--prometheus",
        prometheus,
    ];
    args.extend_from_slice(extra);
    let server = ServeProcess::start(&args);
    (dir, server)
}

/// Flagger's body for a `rollout` hook that asks for `template` on `service`.
pub fn rollout_check(template: &str, service: &str) -> String {
    flagger_payload(
        "Progressing",
        &[
            ("hook", "rollout"),
            ("template", template),
            ("args.service", service),
        ],
    )
}
