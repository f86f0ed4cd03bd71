//! The New Relic NerdGraph stand-in (`newrelic_standin.py`, written from New Relic's public
//! NerdGraph and NRQL documentation; see its docstring), one per test binary, shared by the
//! tests. It reads its stdin until it closes, so nothing outlives the test process.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};

use serde_json::Value;

/// The API key the stand-in accepts (tests look for it in every message and value).
pub const API_KEY: &str = "NRAK-ROLLGATE0TEST0KEY0123456789";
/// The account it serves (the one argo-rollouts v1.9.1 `newrelic_test.go` queries).
pub const ACCOUNT: u64 = 1_234_567;

/// The running stand-in.
pub struct NewRelic {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The newest events are just before this time (Unix seconds); they span two hours.
    pub base: i64,
    /// A file holding [`API_KEY`].
    pub key_file: PathBuf,
    /// A file holding another key (the stand-in refuses it).
    pub wrong_key_file: PathBuf,
    _dir: tempfile::TempDir,
    _child: Mutex<Child>,
    _stdin: Mutex<ChildStdin>,
}

impl NewRelic {
    /// The shared stand-in, started on first use.
    pub fn get() -> &'static NewRelic {
        static SERVER: OnceLock<NewRelic> = OnceLock::new();
        SERVER.get_or_init(NewRelic::start)
    }

    fn start() -> NewRelic {
        let dir = tempfile::tempdir().unwrap();
        let key_file = dir.path().join("api-key");
        std::fs::write(&key_file, format!("{API_KEY}\n")).unwrap();
        let wrong_key_file = dir.path().join("wrong-key");
        std::fs::write(&wrong_key_file, "NRAK-NOT-THE-RIGHT-ONE").unwrap();
        let base = chrono::Utc::now().timestamp();
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/support/newrelic_standin.py"
        );
        let mut child = Command::new("python3")
            .arg(script)
            .args([API_KEY, &ACCOUNT.to_string(), &base.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 for the New Relic stand-in");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line.trim().parse().expect("the stand-in's port");
        let stdin = child.stdin.take().unwrap();
        NewRelic {
            url: format!("http://127.0.0.1:{port}"),
            base,
            key_file,
            wrong_key_file,
            _dir: dir,
            _child: Mutex::new(child),
            _stdin: Mutex::new(stdin),
        }
    }

    /// The NerdGraph address of a behaviour (`""` for the plain API; see the script).
    pub fn address(&self, mode: &str) -> String {
        if mode.is_empty() {
            format!("{}/graphql", self.url)
        } else {
            format!("{}/{mode}/graphql", self.url)
        }
    }

    /// What the stand-in saw: requests per path, the variables of the last 500 queries.
    pub fn stats(&self) -> Value {
        let rest = self.url.strip_prefix("http://").unwrap();
        let mut stream = std::net::TcpStream::connect(rest).unwrap();
        use std::io::{Read, Write};
        write!(
            stream,
            "GET /stats HTTP/1.1\r\nHost: {rest}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        let body = text.split_once("\r\n\r\n").unwrap().1;
        serde_json::from_str(body).unwrap()
    }

    /// The variables of every query (of the last 500) whose NRQL contains `text`.
    pub fn sent(&self, text: &str) -> Vec<Value> {
        let stats = self.stats();
        stats["variables"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| v["query"].as_str().is_some_and(|q| q.contains(text)))
            .cloned()
            .collect()
    }

    /// How many requests reached `path`.
    pub fn requests(&self, path: &str) -> u64 {
        self.stats()["requests"][path].as_u64().unwrap_or(0)
    }
}
