//! The Datadog stand-in (`datadog_standin.py`, written from Datadog's public API reference:
//! v1 "Query timeseries points", v2 "Query scalar data" and "Query timeseries data", API
//! authentication and rate limits; see its docstring), run once per test binary and shared:
//! every test uses its own query strings, and the stand-in keys data and faults by query, so
//! tests running at once do not disturb each other. It exits when its stdin closes, that is
//! when the test process ends.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};

use serde_json::{json, Value};

/// The API key the stand-in accepts (tests look for it in every message and log).
pub const API_KEY: &str = "0123456789abcdef0123456789abcdef";
/// The application key it accepts.
pub const APP_KEY: &str = "0123456789abcdef0123456789abcdef01234567";

/// The running stand-in and the key files.
pub struct DatadogStandIn {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// A file holding [`API_KEY`] (with a trailing newline, as `kubectl create secret` writes).
    pub api_key_file: PathBuf,
    /// A file holding [`APP_KEY`].
    pub app_key_file: PathBuf,
    /// A file holding a wrong API key.
    pub wrong_key_file: PathBuf,
    /// The directory of the files.
    pub dir: tempfile::TempDir,
    _child: Mutex<Child>,
    _stdin: Mutex<ChildStdin>,
}

/// The shared stand-in, started on first use.
pub fn shared() -> &'static DatadogStandIn {
    static SHARED: OnceLock<DatadogStandIn> = OnceLock::new();
    SHARED.get_or_init(start)
}

fn start() -> DatadogStandIn {
    let dir = tempfile::tempdir().unwrap();
    let api_key_file = dir.path().join("api-key");
    let app_key_file = dir.path().join("app-key");
    let wrong_key_file = dir.path().join("wrong-key");
    std::fs::write(&api_key_file, format!("{API_KEY}\n")).unwrap();
    std::fs::write(&app_key_file, format!("{APP_KEY}\n")).unwrap();
    std::fs::write(&wrong_key_file, "ffffffffffffffffffffffffffffffff\n").unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/support/datadog_standin.py"
    );
    let mut child = Command::new("python3")
        .args([script, API_KEY, APP_KEY])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3 for the Datadog stand-in");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = line.trim().parse().expect("the stand-in's port");
    let stdin = child.stdin.take().unwrap();
    DatadogStandIn {
        url: format!("http://127.0.0.1:{port}"),
        api_key_file,
        app_key_file,
        wrong_key_file,
        dir,
        _child: Mutex::new(child),
        _stdin: Mutex::new(stdin),
    }
}

impl DatadogStandIn {
    /// Serves `entry` for `query` (see the script: `{"value": v}`, `{"groups": [...]}`).
    pub fn series(&self, query: &str, entry: Value) {
        self.control(json!({"series": {query: entry}}));
    }

    /// Injects `fault` for `query` (see the script: rate_limit/reset, delay, garbage,
    /// status/body, echo).
    pub fn fault(&self, query: &str, fault: Value) {
        self.control(json!({"faults": {query: fault}}));
    }

    fn control(&self, settings: Value) {
        let answer = http_exchange(
            &format!("{}/control", self.url),
            "POST",
            &settings.to_string(),
        );
        assert_eq!(answer, "{}");
    }

    /// How many requests asked `query`.
    pub fn requests(&self, query: &str) -> u64 {
        self.stats(query)["requests"].as_u64().unwrap()
    }

    /// The last request that asked `query`: method, path, from, to, interval, aggregator,
    /// keys_ok, content_type, ….
    pub fn last(&self, query: &str) -> Value {
        self.stats(query)["last"].clone()
    }

    fn stats(&self, query: &str) -> Value {
        let q: String = url::form_urlencoded::byte_serialize(query.as_bytes()).collect();
        serde_json::from_str(&http_exchange(
            &format!("{}/stats?query={q}", self.url),
            "GET",
            "",
        ))
        .unwrap()
    }

    /// A `datadog:` block for this stand-in; `extra` is merged in.
    pub fn block(&self, extra: Value) -> Value {
        let mut b = json!({
            "address": self.url,
            "apiKeyFile": self.api_key_file,
            "appKeyFile": self.app_key_file,
        });
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    }
}

/// One plain HTTP/1.1 exchange on 127.0.0.1 (blocking; callable from async tests too).
fn http_exchange(url: &str, method: &str, body: &str) -> String {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_at(rest.find('/').unwrap());
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_string()
}
