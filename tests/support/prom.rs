//! A real Prometheus server with backfilled data, for tests.
//!
//! `PromServer::start` turns OpenMetrics text into TSDB blocks with `promtool tsdb
//! create-blocks-from openmetrics` and starts `prometheus` on a free 127.0.0.1 port with no scrape
//! targets. Prometheus runs under a small `sh` watchdog that holds the read end of a pipe whose
//! write end only this process has: when the `PromServer` is dropped, or when the test process
//! exits in any way (statics are never dropped, a test binary may be killed), the pipe closes and
//! the watchdog kills Prometheus, reaps it and removes its data directory. So nothing is left
//! running after `cargo test`.
//!
//! `PROMETHEUS` / `PROMTOOL` in the environment override the binaries (default: from `PATH`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::scenarios;

/// How long Prometheus may take to become ready before the test fails.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Watchdog: runs the command given after the log and directory paths in the background, prints
/// its pid, waits for stdin to close, then kills it, reaps it and removes the directory (unless it
/// read `keep`). Shared with the VictoriaMetrics harness (`vm.rs`).
pub const WATCHDOG: &str = r#"log=$1; dir=$2; shift 2
"$@" </dev/null >"$log" 2>&1 &
p=$!
echo "$p"
read -r cmd || cmd=
kill -9 "$p" 2>/dev/null
wait "$p" 2>/dev/null
[ "$cmd" = keep ] || rm -rf "$dir"
"#;

/// Where the start-up time went.
#[derive(Clone, Copy, Debug)]
pub struct Timings {
    /// Writing the text file and running promtool.
    pub backfill: Duration,
    /// From spawning Prometheus until `/-/ready` answered 200.
    pub ready: Duration,
}

/// A running Prometheus loaded with a data set; stopped (and its data removed) on drop.
pub struct PromServer {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The listening address.
    pub addr: SocketAddr,
    /// The data set's time base (Unix seconds, a whole minute; see `scenarios`).
    pub base: i64,
    /// Start-up timings.
    pub timings: Timings,
    pid: u32,
    watchdog: Child,
    stdin: Option<ChildStdin>,
    /// Removed by the watchdog; held so a failed start can reuse it.
    dir: Option<tempfile::TempDir>,
}

/// One element of an instant-query result (a scalar result has no labels).
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Labels, `__name__` included when present.
    pub labels: BTreeMap<String, String>,
    /// The value (`NaN`, `+Inf`, `-Inf` parsed).
    pub value: f64,
}

/// One series of a range-query result.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// (Unix seconds, value) pairs.
    pub points: Vec<(f64, f64)>,
}

pub fn binary(var: &str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.to_string())
}

/// The current Unix time in seconds.
pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}

pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => !matches!(
            stat.rsplit(')')
                .next()
                .map(|r| r.trim_start().chars().next()),
            Some(Some('Z' | 'X'))
        ),
        Err(_) => false,
    }
}

pub fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let start = text.len().saturating_sub(4000);
    let start = (start..text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0);
    text[start..].to_string()
}

impl PromServer {
    /// Backfills `dataset` (OpenMetrics text ending in `# EOF`, generated for time base `base`)
    /// and starts Prometheus on it. Panics with promtool's or Prometheus' output on failure,
    /// or when Prometheus is not ready within 30 s.
    pub fn start(base: i64, dataset: &str) -> PromServer {
        let dir = tempfile::Builder::new()
            .prefix("rollgate-prom-")
            .tempdir()
            .expect("temp dir");
        let started = Instant::now();
        let data = dir.path().join("data");
        let input = dir.path().join("input.om");
        std::fs::write(&input, dataset).expect("write dataset");
        backfill(&input, &data);
        let _ = std::fs::remove_file(&input);
        let backfilled = started.elapsed();

        let config = dir.path().join("prometheus.yml");
        std::fs::write(&config, "global:\n  scrape_interval: 1h\n").expect("write config");
        let log = dir.path().join("prometheus.log");
        let mut last_error = String::new();
        // A port found free may be taken before Prometheus binds it: try a few.
        for _attempt in 0..5 {
            let spawned = Instant::now();
            let port = free_port();
            let (watchdog, stdin, pid) = spawn(dir.path(), &log, &config, &data, port);
            let mut server = PromServer {
                url: format!("http://127.0.0.1:{port}"),
                addr: SocketAddr::from(([127, 0, 0, 1], port)),
                base,
                timings: Timings {
                    backfill: backfilled,
                    ready: Duration::ZERO,
                },
                pid,
                watchdog,
                stdin: Some(stdin),
                dir: None,
            };
            let ready = server.wait_ready(&log);
            match ready {
                Ok(()) => {
                    server.timings.ready = spawned.elapsed();
                    server.dir = Some(dir);
                    return server;
                }
                Err(e) => {
                    server.stop(true);
                    if !e.contains("address already in use") {
                        panic!("prometheus did not start: {e}");
                    }
                    last_error = e;
                }
            }
        }
        panic!("prometheus did not start: {last_error}");
    }

    /// Kills Prometheus (SIGKILL, as a crash or a lost node would), keeping its data, so that
    /// `restart` can bring the same server back on the same port.
    pub fn kill_keeping_data(&mut self) {
        self.stop(true);
    }

    /// Starts Prometheus again on the same port and data after `kill_keeping_data`, and waits
    /// until it is ready. Panics when it does not come back.
    pub fn restart(&mut self) {
        let dir = self
            .dir
            .as_ref()
            .expect("a started server has its directory")
            .path()
            .to_path_buf();
        let log = dir.join("prometheus.log");
        let (watchdog, stdin, pid) = spawn(
            &dir,
            &log,
            &dir.join("prometheus.yml"),
            &dir.join("data"),
            self.addr.port(),
        );
        self.watchdog = watchdog;
        self.stdin = Some(stdin);
        self.pid = pid;
        if let Err(e) = self.wait_ready(&log) {
            panic!("prometheus did not come back: {e}");
        }
    }

    /// The Prometheus process id (to check that it is gone after drop).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    fn wait_ready(&self, log: &Path) -> Result<(), String> {
        wait_ready(self.addr, "/-/ready", self.pid, log, READY_TIMEOUT)
    }

    /// Kills Prometheus through the watchdog and waits for it; with `keep_data` the watchdog
    /// leaves the directory alone.
    fn stop(&mut self, keep_data: bool) {
        if let Some(mut stdin) = self.stdin.take() {
            if keep_data {
                let _ = stdin.write_all(b"keep\n");
            }
        }
        let _ = self.watchdog.wait();
    }

    /// GET `path_and_query` on this server and parse the JSON body (panics on transport errors).
    pub fn get_json(&self, path_and_query: &str) -> serde_json::Value {
        let (status, body) = http_get(self.addr, path_and_query, Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("GET {path_and_query}: {e}"));
        serde_json::from_slice(&body).unwrap_or_else(|e| {
            panic!(
                "GET {path_and_query}: HTTP {status}, not JSON ({e}): {}",
                String::from_utf8_lossy(&body)
            )
        })
    }

    /// Instant query at `at` (Unix seconds). Panics unless Prometheus answers `success`.
    pub fn query(&self, promql: &str, at: f64) -> Vec<Sample> {
        let v = self.get_json(&format!(
            "/api/v1/query?query={}&time={at:.3}",
            urlencode(promql)
        ));
        assert_eq!(v["status"], "success", "query {promql}: {v}");
        let data = &v["data"];
        match data["resultType"].as_str() {
            Some("vector") => data["result"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| Sample {
                    labels: labels(&s["metric"]),
                    value: value(&s["value"]),
                })
                .collect(),
            Some("scalar") => vec![Sample {
                labels: BTreeMap::new(),
                value: value(&data["result"]),
            }],
            other => panic!("query {promql}: unexpected result type {other:?}"),
        }
    }

    /// The single value of an instant query at `at`; panics unless exactly one sample came back.
    pub fn query_one(&self, promql: &str, at: f64) -> f64 {
        let r = self.query(promql, at);
        assert_eq!(r.len(), 1, "query {promql} at {at}: {r:?}");
        r[0].value
    }

    /// Range query from `start` to `end` every `step` seconds.
    pub fn query_range(&self, promql: &str, start: f64, end: f64, step: f64) -> Vec<Series> {
        let v = self.get_json(&format!(
            "/api/v1/query_range?query={}&start={start:.3}&end={end:.3}&step={step}",
            urlencode(promql)
        ));
        assert_eq!(v["status"], "success", "query_range {promql}: {v}");
        v["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| Series {
                labels: labels(&s["metric"]),
                points: s["values"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| (p[0].as_f64().unwrap(), value(p)))
                    .collect(),
            })
            .collect()
    }
}

impl Drop for PromServer {
    fn drop(&mut self) {
        self.stop(false);
    }
}

fn backfill(input: &Path, data: &Path) {
    let out = Command::new(binary("PROMTOOL", "promtool"))
        .args(["tsdb", "create-blocks-from", "openmetrics", "--quiet"])
        // promtool reads the whole input once per block: with the (hidden) larger block range
        // a few hours of data make one block, or two, instead of three or four 2 h blocks.
        .arg("--max-block-duration=24h")
        .arg(input)
        .arg(data)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run promtool ({e}); install Debian's prometheus"));
    assert!(
        out.status.success(),
        "promtool failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn spawn(
    dir: &Path,
    log: &Path,
    config: &Path,
    data: &Path,
    port: u16,
) -> (Child, ChildStdin, u32) {
    let args = [
        format!("--config.file={}", config.display()),
        format!("--storage.tsdb.path={}", data.display()),
        format!("--web.listen-address=127.0.0.1:{port}"),
        // Retention is measured back from the newest block; keep everything.
        "--storage.tsdb.retention.time=3650d".to_string(),
    ];
    spawn_watched(
        "rollgate-prom-watchdog",
        dir,
        log,
        &binary("PROMETHEUS", "prometheus"),
        &args,
    )
}

/// Polls `GET path` on `addr` until it answers 200 (Ok), the process `pid` exits or `timeout`
/// passes (Err with the tail of `log`).
pub fn wait_ready(
    addr: SocketAddr,
    path: &str,
    pid: u32,
    log: &Path,
    timeout: Duration,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok((200, _)) = http_get(addr, path, Duration::from_secs(2)) {
            return Ok(());
        }
        if !alive(pid) {
            return Err(format!("the server exited; its log:\n{}", tail(log)));
        }
        if Instant::now() > deadline {
            return Err(format!(
                "no answer on {path} after {timeout:?}; its log:\n{}",
                tail(log)
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts `program args` under `WATCHDOG` (an `sh` named `tag`), output to `log`, `dir` removed
/// when the watchdog's stdin closes: (the watchdog, its stdin, the program's pid).
pub fn spawn_watched(
    tag: &str,
    dir: &Path,
    log: &Path,
    program: &str,
    args: &[String],
) -> (Child, ChildStdin, u32) {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(WATCHDOG)
        .arg(tag)
        .arg(log)
        .arg(dir)
        .arg(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn sh");
    let stdin = child.stdin.take().expect("stdin");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("stdout");
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("pid line");
    let pid = line.trim().parse().expect("pid");
    (child, stdin, pid)
}

fn labels(metric: &serde_json::Value) -> BTreeMap<String, String> {
    metric
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// `[ts, "value"]` → value.
fn value(pair: &serde_json::Value) -> f64 {
    pair[1]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad sample {pair}"))
}

/// Percent-encodes a query-string component. Without a `format!` per escaped byte: the
/// serve_load bench's floor proxy and its "queries alone" use it, and their cost must be
/// the least a client pays, not inflated by the encoder.
pub fn urlencode(s: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => {
                out.push('%');
                out.push(HEX[usize::from(b >> 4)] as char);
                out.push(HEX[usize::from(b & 0xf)] as char);
            }
        }
    }
    out
}

/// A minimal blocking HTTP/1.0 GET (the body ends at EOF): (status, body).
pub fn http_get(
    addr: SocketAddr,
    path_and_query: &str,
    timeout: Duration,
) -> std::io::Result<(u16, Vec<u8>)> {
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    write!(
        s,
        "GET {path_and_query} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    read_answer(&mut s)
}

/// Reads an HTTP/1.0 answer to its end (EOF): (status, body).
pub fn read_answer(s: &mut TcpStream) -> std::io::Result<(u16, Vec<u8>)> {
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no end of headers"))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other("no status"))?;
    Ok((status, raw[split + 4..].to_vec()))
}

static SHARED: OnceLock<Result<PromServer, String>> = OnceLock::new();

/// The test binary's one Prometheus with `scenarios::standard_dataset` loaded (started on first
/// use, stopped when the process exits).
pub fn shared() -> &'static PromServer {
    start_once(&SHARED, "Prometheus", |base, text| {
        let server = PromServer::start(base, text);
        let t = server.timings;
        let what = format!(
            "at {}: backfill {:?}, ready {:?}",
            server.url, t.backfill, t.ready
        );
        (server, what)
    })
}

/// Starts a shared server once per test binary on `scenarios::standard_dataset` generated now;
/// `start(base, text)` returns the server and what to log about it. A failed start fails every
/// later caller with the same message.
pub fn start_once<T>(
    cell: &'static OnceLock<Result<T, String>>,
    name: &str,
    start: impl FnOnce(i64, &str) -> (T, String),
) -> &'static T {
    let server = cell.get_or_init(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let t = Instant::now();
            let base = scenarios::base_now();
            let text = scenarios::standard_dataset(base);
            let generated = t.elapsed();
            let (server, what) = start(base, &text);
            eprintln!(
                "shared {name} {what}; {} kB generated in {generated:?}",
                text.len() / 1000
            );
            server
        }))
        .map_err(|e| {
            e.downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        })
    });
    match server {
        Ok(s) => s,
        Err(e) => panic!("the shared {name} did not start: {e}"),
    }
}
