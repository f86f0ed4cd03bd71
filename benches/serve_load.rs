//! `rollgate serve` under load, answering what a user asks before putting it between Flagger
//! (or Argo's `web` provider) and Prometheus: how many checks a second it answers, how long one
//! takes next to sending its queries directly, and what the access log costs. In one run:
//!
//! 1. **replay-backed**: `/flagger/v1/check` naming the error-rate template (a request guard and
//!    a ratio query, the README's gate) with both queries answered from a replay file
//!    (`--replay`), so the figure is serve's own work: HTTP, the template, the engine, the
//!    answer. Two servers, the access log off and on (hclog JSON lines on stderr, read and
//!    dropped as a log shipper would), driven in alternating one-second slices: the shared
//!    machine's load drifts by more than the log costs, so the on / off ratio is taken per
//!    slice (median).
//! 2. **over HTTP**: the same checks with the queries sent to a stand-in Prometheus on
//!    127.0.0.1 that answers the replay's bodies at once, next to the same two queries sent to
//!    it directly (concurrently, as serve sends them): what going through serve adds.
//!
//! The driver is one thread with `CONNECTIONS` keep-alive connections sending pre-built
//! requests; every loop is bounded by a time and a count. Floors, printed with the figures
//! (the bench exits 1 when one is missed): replay-backed serve >= 20,000 checks/s with the
//! access log off, and with it on >= 0.80 x off.
//!
//! `cargo bench --bench serve_load`. `ROLLGATE_BIN=dist/rollgate-linux-amd64` measures the
//! shipped build instead of the release build `cargo bench` makes.

// Test code may unwrap, panic and cast; its helpers are `pub` for the modules sharing them.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss,
    unreachable_pub
)]

#[path = "../tests/serve_common/mod.rs"]
mod serve_common;
#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use serve_common::{error_rate_template, flagger_payload, path_str, template_dir, ServeProcess};
use support::scenarios::HEALTHY;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Concurrent keep-alive connections of the driver.
const CONNECTIONS: usize = 64;
/// Warm-up before each measured part.
const WARMUP: Duration = Duration::from_secs(1);
/// Alternating slices of the access log off and on, one second each.
const SLICES: usize = 10;
const SLICE: Duration = Duration::from_secs(1);
/// Length of each over-HTTP measurement.
const RUN: Duration = Duration::from_secs(5);
/// Upper bound on checks per connection and measurement, whatever the speed.
const MAX_PER_CONNECTION: usize = 1_000_000;

/// The floors this bench holds serve to.
const FLOOR_CHECKS_PER_SECOND: f64 = 20_000.0;
const FLOOR_LOG_RATIO: f64 = 0.80;

/// The Prometheus answer to each of the template's two queries: 30,000 requests, 0.1 % errors.
fn answer(query: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let value = if query == HEALTHY.total_query("5m") {
        "30000"
    } else {
        "0.001"
    };
    json!({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {}, "value": [now, value]}
    ]}})
    .to_string()
}

/// The template's two queries.
fn queries() -> [String; 2] {
    [HEALTHY.total_query("5m"), HEALTHY.ratio_query("5m")]
}

/// The error-rate template and a replay of its two answers, in one directory.
fn replay_dir() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = template_dir(&[(
        "error-rate.yaml",
        error_rate_template("error-rate", "inconclusive"),
    )]);
    let entries: Vec<_> = queries()
        .iter()
        .map(|q| json!({"kind": "instant", "query": q, "time": null, "status": 200, "body": answer(q)}))
        .collect();
    let replay = dir.path().join("replay.json");
    std::fs::write(
        &replay,
        json!({"version": 1, "entries": entries}).to_string(),
    )
    .unwrap();
    (dir, replay)
}

/// The access log off and on: serve's `--log-level` for each.
const LOG_OFF: &str = "warn,rollgate::serve::access=warn";
const LOG_ON: &str = "warn";

/// `rollgate serve` on the error-rate template with `source` (`--replay FILE` or
/// `--prometheus URL`); its log lines are read and dropped.
fn serve(templates: &std::path::Path, source: &[&str], log_level: &str) -> ServeProcess {
    let mut args = vec!["--templates", path_str(templates), "--log-level", log_level];
    args.extend_from_slice(source);
    let server = ServeProcess::start(&args);
    server.drop_logs();
    server
}

fn addr(url: &str) -> String {
    url.trim_start_matches("http://").to_string()
}

/// Flagger's check naming the template, as raw HTTP/1.1.
fn check_request(addr: &str) -> Vec<u8> {
    let body = flagger_payload(
        "Progressing",
        &[("template", "error-rate"), ("args.service", "healthy")],
    );
    format!(
        "POST /flagger/v1/check HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// One instant query as raw HTTP/1.1.
fn query_request(addr: &str, query: &str) -> Vec<u8> {
    let target: String = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("query", query)
        .finish();
    format!("GET /api/v1/query?{target} HTTP/1.1\r\nHost: {addr}\r\n\r\n").into_bytes()
}

/// Reads one HTTP/1.1 message framed by Content-Length into `buf` (no pipelining: nothing
/// follows it); returns its head.
async fn read_message(s: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<String> {
    buf.clear();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let n = s.read(&mut chunk).await?;
                if n == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            buf.drain(..end + 4);
            return Ok(head);
        }
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Reads one response; returns its status.
async fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<u16> {
    let head = read_message(s, buf).await?;
    Ok(head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0))
}

/// A stand-in Prometheus on 127.0.0.1 answering each instant query (`query` in the URL or a
/// form body) with [`answer`] at once, on keep-alive connections, on a runtime of its own
/// (one thread). Returns the runtime (it serves until dropped) and the address.
fn upstream() -> (tokio::runtime::Runtime, String) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let replies: Arc<Vec<(String, Vec<u8>)>> = Arc::new(
        queries()
            .into_iter()
            .map(|q| {
                let body = answer(&q);
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                (q, reply.into_bytes())
            })
            .collect(),
    );
    runtime.spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let replies = replies.clone();
            tokio::spawn(async move {
                let _ = s.set_nodelay(true);
                let mut buf = Vec::with_capacity(8192);
                while let Ok(head) = read_message(&mut s, &mut buf).await {
                    let target = head.split_whitespace().nth(1).unwrap_or("");
                    let params = target
                        .split_once('?')
                        .map_or(&b""[..], |(_, q)| q.as_bytes());
                    let query = url::form_urlencoded::parse(params)
                        .chain(url::form_urlencoded::parse(&buf))
                        .find(|(k, _)| k == "query")
                        .map(|(_, v)| v.into_owned())
                        .unwrap_or_default();
                    let reply = replies
                        .iter()
                        .find(|(q, _)| *q == query)
                        .unwrap_or(&replies[1]);
                    if s.write_all(&reply.1).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (runtime, addr)
}

/// Checks answered (every request of the check 200), failures, time and sorted latencies.
#[derive(Default)]
struct Load {
    ok: usize,
    failed: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Load {
    fn rate(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64()
    }

    fn add(&mut self, other: Load) {
        self.ok += other.ok;
        self.failed += other.failed;
        self.elapsed += other.elapsed;
        self.latencies.extend(other.latencies);
        self.latencies.sort();
    }

    fn pct(&self, p: f64) -> f64 {
        let i = ((self.latencies.len() as f64 * p) as usize).min(self.latencies.len() - 1);
        self.latencies[i].as_secs_f64() * 1e3
    }

    fn print(&self, label: &str) {
        println!(
            "  {label:<34} {:>7.0} checks/s   p50 {:>6.3} ms   p99 {:>6.3} ms   ({} checks, {} failed, {:.1} s)",
            self.rate(),
            self.pct(0.50),
            self.pct(0.99),
            self.ok,
            self.failed,
            self.elapsed.as_secs_f64()
        );
    }
}

/// Drives `CONNECTIONS` tasks for `run`; a check is `requests` sent at once, each on a
/// keep-alive connection of its own to `addr`, and done when every answer is in.
async fn drive(addr: &str, requests: &[Vec<u8>], run: Duration) -> Load {
    let requests = Arc::new(requests.to_vec());
    let started = Instant::now();
    let tasks: Vec<_> = (0..CONNECTIONS)
        .map(|_| {
            let (addr, requests) = (addr.to_string(), requests.clone());
            tokio::spawn(async move {
                let mut streams = Vec::new();
                for _ in 0..requests.len() {
                    let s = TcpStream::connect(&addr).await.unwrap();
                    s.set_nodelay(true).unwrap();
                    streams.push((s, Vec::with_capacity(8192)));
                }
                let (mut latencies, mut failed) = (Vec::new(), 0);
                for _ in 0..MAX_PER_CONNECTION {
                    if started.elapsed() >= run {
                        break;
                    }
                    let t = Instant::now();
                    let answers =
                        futures::future::join_all(streams.iter_mut().zip(&*requests).map(
                            |((s, buf), request)| async move {
                                s.write_all(request).await?;
                                read_response(s, buf).await
                            },
                        ))
                        .await;
                    if answers.iter().all(|a| matches!(a, Ok(200))) {
                        latencies.push(t.elapsed());
                    } else {
                        failed += 1;
                        // A broken connection is not measured further: the failure is reported.
                        if answers.iter().any(Result::is_err) {
                            break;
                        }
                    }
                }
                (latencies, failed)
            })
        })
        .collect();
    let mut load = Load::default();
    for t in tasks {
        let (l, f) = t.await.unwrap();
        load.latencies.extend(l);
        load.failed += f;
    }
    load.elapsed = started.elapsed();
    load.ok = load.latencies.len();
    load.latencies.sort();
    load
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (dir, replay) = replay_dir();
    let replay_source = [
        "--replay",
        path_str(&replay),
        "--prometheus",
        "http://replay.invalid:9090",
    ];
    println!(
        "serve_load: {CONNECTIONS} connections, {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    println!("replay-backed, access log off and on in {SLICES} alternating slices of {SLICE:?}:");
    let servers = [LOG_OFF, LOG_ON].map(|level| serve(dir.path(), &replay_source, level));
    let addrs = servers.each_ref().map(|s| addr(&s.url));
    let (loads, ratios) = runtime.block_on(async {
        for a in &addrs {
            let warm = drive(a, &[check_request(a)], WARMUP).await;
            assert_eq!(warm.failed, 0, "failures in the warm-up");
        }
        let mut loads = [Load::default(), Load::default()];
        let mut ratios = Vec::with_capacity(SLICES);
        for slice in 0..SLICES {
            let order = if slice % 2 == 0 { [0, 1] } else { [1, 0] };
            let mut rates = [0.0; 2];
            for i in order {
                let load = drive(&addrs[i], &[check_request(&addrs[i])], SLICE).await;
                rates[i] = load.rate();
                loads[i].add(load);
            }
            ratios.push(rates[1] / rates[0]);
        }
        (loads, ratios)
    });
    loads[0].print("access log off");
    loads[1].print("access log on (JSON on stderr)");
    let ratio = median(ratios);
    println!("  on / off: {ratio:.3} (median of the slices' ratios)");
    drop(servers);

    println!("over HTTP, the queries answered by a stand-in Prometheus on 127.0.0.1:");
    let (_upstream, up) = upstream();
    let up_url = format!("http://{up}");
    let server = serve(dir.path(), &["--prometheus", &up_url], LOG_OFF);
    let (direct, through) = runtime.block_on(async {
        let direct_requests = queries().map(|q| query_request(&up, &q));
        let via = addr(&server.url);
        drive(&up, &direct_requests, WARMUP).await;
        let direct = drive(&up, &direct_requests, RUN).await;
        drive(&via, &[check_request(&via)], WARMUP).await;
        let through = drive(&via, &[check_request(&via)], RUN).await;
        (direct, through)
    });
    direct.print("the 2 queries sent directly");
    through.print("the check through serve");
    println!(
        "  serve adds {:.3} ms at p50, {:.3} ms at p99",
        through.pct(0.50) - direct.pct(0.50),
        through.pct(0.99) - direct.pct(0.99)
    );

    let failed: usize = loads
        .iter()
        .chain([&direct, &through])
        .map(|l| l.failed)
        .sum();
    let floors = [
        (
            format!("replay-backed checks/s, access log off >= {FLOOR_CHECKS_PER_SECOND:.0}"),
            loads[0].rate() >= FLOOR_CHECKS_PER_SECOND,
        ),
        (
            format!("access log on / off >= {FLOOR_LOG_RATIO:.2}"),
            ratio >= FLOOR_LOG_RATIO,
        ),
        ("no failed check".to_string(), failed == 0),
    ];
    let mut held = true;
    for (floor, ok) in &floors {
        println!("floor: {floor}: {}", if *ok { "held" } else { "NOT HELD" });
        held &= ok;
    }
    if !held {
        std::process::exit(1);
    }
}
