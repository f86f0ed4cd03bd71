//! The stand-in token endpoints and authenticating gateway (`token_standin.py`, written from
//! RFC 6749 section 4.4, RFC 7523 and Google's documented token exchanges; see its docstring),
//! run as a child process in front of a real Prometheus. It exits when its stdin closes, so
//! nothing outlives the test process however it ends.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};

use serde_json::Value;

/// The client id the stand-in accepts.
pub const CLIENT_ID: &str = "rollgate-client";
/// The client secret it accepts (tests look for it in every message and log).
pub const CLIENT_SECRET: &str = "cs-Xq8!s3cret/with:odd chars";

/// A running stand-in; stopped on drop.
pub struct TokenStandIn {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The service-account key it wrote (its own RSA key, `token_uri` pointing at it).
    pub key_file: PathBuf,
    /// The file holding [`CLIENT_SECRET`].
    pub secret_file: PathBuf,
    /// The client assertion it accepts instead of the secret (as Azure workload identity
    /// projects one).
    pub assertion_file: PathBuf,
    /// The temporary directory of both files.
    pub dir: tempfile::TempDir,
    child: Child,
    stdin: Option<ChildStdin>,
}

impl TokenStandIn {
    /// Starts one in front of `prometheus` (a base URL).
    pub fn start(prometheus: &str) -> TokenStandIn {
        let dir = tempfile::tempdir().unwrap();
        let key_file = dir.path().join("key.json");
        let secret_file = dir.path().join("client-secret");
        std::fs::write(&secret_file, format!("{CLIENT_SECRET}\n")).unwrap();
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/support/token_standin.py"
        );
        let mut child = Command::new("python3")
            .arg(script)
            .args([
                prometheus,
                key_file.to_str().unwrap(),
                CLIENT_ID,
                CLIENT_SECRET,
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 for the token stand-in");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line.trim().parse().expect("the stand-in's port");
        let stdin = child.stdin.take();
        TokenStandIn {
            url: format!("http://127.0.0.1:{port}"),
            assertion_file: dir.path().join("federated-token"),
            key_file,
            secret_file,
            dir,
            child,
            stdin,
        }
    }

    /// The gateway's address: Prometheus behind token checks.
    pub fn gateway(&self) -> String {
        format!("{}/prom", self.url)
    }

    /// Changes its behaviour (see the script's docstring).
    pub fn control(&self, settings: Value) {
        let answer = ureq_post(&format!("{}/control", self.url), &settings.to_string());
        assert_eq!(answer, "{}");
    }

    /// How many requests each endpoint took: `oauth2`, `google`, `metadata`, `proxied`,
    /// `rejected`.
    pub fn count(&self, what: &str) -> u64 {
        self.stats()["counts"][what].as_u64().unwrap()
    }

    /// The last token request's form (or the metadata request's query).
    pub fn last_form(&self) -> Value {
        self.stats()["last_form"].clone()
    }

    fn stats(&self) -> Value {
        serde_json::from_str(&ureq_get(&format!("{}/stats", self.url))).unwrap()
    }
}

impl Drop for TokenStandIn {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

fn ureq_get(url: &str) -> String {
    http_exchange(url, "GET", "")
}

fn ureq_post(url: &str, body: &str) -> String {
    http_exchange(url, "POST", body)
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
    assert!(
        head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200"),
        "{head}"
    );
    body.to_string()
}
