//! `rollgate serve` under load, in one run:
//!
//! 1. Throughput: `/flagger/v1/check` naming a template (guard + ratio query, the README's
//!    error-rate gate) with the queries answered from a replay file, so what is measured is the
//!    HTTP surface and the engine. A lean HTTP/1.1 driver (pre-built request, keep-alive,
//!    `CONNECTIONS` connections on one thread) drives two servers, the access log off and on,
//!    for `RUN` each after a warm-up, in `SLICES` alternating slices (the machine's load drifts
//!    more than the log costs); the log lines are read and dropped, as a log shipper would. Prints requests/s, p50, p99 (targets: >= 10,000
//!    req/s, p99 <= 20 ms on 2 cores, driver included).
//! 2. Overhead against a real Prometheus: one caller, `ROUNDS` rounds, each timing the check
//!    through every process (this build's `rollgate serve`, the baseline's when given, and a
//!    floor proxy, `serve_load/floor.rs`: the same check answered with nothing but the two
//!    queries), then the template's two queries sent concurrently with plain reqwest, then each
//!    process's bare HTTP hop (`/healthz`), the processes' order turning every round. Own share
//!    = check − queries alone − that process's hop, per round; printed as medians with a 95 %
//!    interval, and as per-round differences between the processes (this build − baseline,
//!    each − the floor), which cancel the machine's drift. The queries alone are timed twice
//!    per round: with plain reqwest (issue 14's reference, used in every own share) and with
//!    hyper-util's client (rollgate's since it left reqwest), so how much of an own share the
//!    cheaper client makes up shows. Then `CPU_CHECKS` checks in a row
//!    give each process's CPU time per check, which tells work from waiting. Services of 2 to
//!    2,000 series per query (`SIZES`, a Prometheus of their own); `SERVE_LOAD_SIZES=2,20`
//!    measures only those series counts. `SERVE_LOAD_REPEAT=N` runs the whole part N times and
//!    ends with each process's median own share per run: how far the machine's state moves the
//!    figure, which one run's interval does not show.
//!
//! 3. `/metrics` exposition: scrapes per second on one connection after checks filled the
//!    series, this build against the baseline (the hand-written exposition before issue 14).
//!
//! 4. Instructions per check (`serve_load/instructions.rs`): serve, a baseline and the floor
//!    proxy under valgrind's callgrind, which counts what latency on shared cores cannot
//!    resolve (a change of a few microseconds of serve's own work). Needs valgrind.
//!
//! 5. System calls per check (`serve_load/syscalls.rs`): serve, a baseline and the floor proxy
//!    under strace, which shows what a check makes other threads do (wake-ups through tokio's
//!    eventfd and futexes), invisible to an instruction count. Needs strace.
//!
//! `cargo bench --bench serve_load [throughput|metrics|overhead|instructions|syscalls]` runs one part. With
//! `SERVE_LOAD_BASELINE=/path/to/an/older/rollgate`, every part also runs that binary, in the
//! same run, so before and after are measured on the same machine under the same load.
//! `ROLLGATE_BIN=dist/rollgate-linux-amd64` measures the shipped build (`scripts/release`)
//! instead of the release build `cargo bench` makes.
//!
//! Targets (issue 14): rollgate's own share of a check, serve − the queries alone − the bare
//! HTTP hop (median of the per-round differences), <= 0.05 ms; access log on >= 0.90 x off.
//!
//! The machine is shared: compare the ratio, and read absolute figures with the load noted.

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

#[path = "serve_load/floor.rs"]
mod floor;
#[path = "serve_load/instructions.rs"]
mod instructions;
#[path = "../tests/serve_common/mod.rs"]
mod serve_common;
#[path = "../tests/support/mod.rs"]
mod support;
#[path = "serve_load/syscalls.rs"]
mod syscalls;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_common::{error_rate_template, flagger_payload, path_str, template_dir, ServeProcess};
use support::scenarios::{Rate, Traffic, HEALTHY};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The allocator the rollgate binary uses (src/main.rs): the floor proxy and the queries sent
/// alone must not pay for glibc's malloc when serve does not.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Concurrent connections of the throughput driver.
const CONNECTIONS: usize = 64;
/// Warm-up before each measured run.
const WARMUP: Duration = Duration::from_secs(2);
/// Length of each measured run.
const RUN: Duration = Duration::from_secs(15);
/// Slices each throughput run is cut into, alternating the access log off and on: the median of
/// fifteen 1 s rounds moved by 0.06 over seven runs, that of five 2 s rounds by 0.14 over eight.
const SLICES: usize = 15;
/// Upper bound on requests per connection and run, whatever the speed.
const MAX_PER_CONNECTION: usize = 1_000_000;
/// Interleaved rounds of the overhead comparison.
const ROUNDS: usize = 300;

/// A replay answering the guard and ratio queries of the healthy service.
fn replay_file(dir: &std::path::Path) -> std::path::PathBuf {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let body = |v: &str| {
        json!({"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": {}, "value": [now, v]}
        ]}})
        .to_string()
    };
    let replay = json!({"version": 1, "entries": [
        {"kind": "instant", "query": HEALTHY.total_query("5m"), "time": null, "status": 200, "body": body("30000")},
        {"kind": "instant", "query": HEALTHY.ratio_query("5m"), "time": null, "status": 200, "body": body("0.001")},
    ]});
    let path = dir.join("replay.json");
    std::fs::write(&path, replay.to_string()).unwrap();
    path
}

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

/// Reads one response; returns its status.
async fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<u16> {
    buf.clear();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = std::str::from_utf8(&buf[..end]).unwrap_or("");
            let status = head
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
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
            return Ok(status);
        }
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

struct Load {
    ok: usize,
    failed: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

/// Drives `connections` keep-alive connections sending `request` for `run`.
async fn drive(addr: &str, run: Duration, request: Vec<u8>, connections: usize) -> Load {
    let request = std::sync::Arc::new(request);
    let started = Instant::now();
    let tasks: Vec<_> = (0..connections)
        .map(|_| {
            let request = request.clone();
            let addr = addr.to_string();
            tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut failed = 0;
                let mut s = TcpStream::connect(&addr).await.unwrap();
                s.set_nodelay(true).unwrap();
                let mut buf = Vec::with_capacity(8192);
                for _ in 0..MAX_PER_CONNECTION {
                    if started.elapsed() >= run {
                        break;
                    }
                    let t = Instant::now();
                    let outcome = match s.write_all(&request).await {
                        Ok(()) => read_response(&mut s, &mut buf).await,
                        Err(e) => Err(e),
                    };
                    match outcome {
                        Ok(200) => lat.push(t.elapsed()),
                        Ok(_) => failed += 1,
                        Err(_) => {
                            failed += 1;
                            s = TcpStream::connect(&addr).await.unwrap();
                            s.set_nodelay(true).unwrap();
                        }
                    }
                }
                (lat, failed)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    let mut failed = 0;
    for t in tasks {
        let (l, f) = t.await.unwrap();
        latencies.extend(l);
        failed += f;
    }
    latencies.sort();
    Load {
        ok: latencies.len(),
        failed,
        elapsed: started.elapsed(),
        latencies,
    }
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The access log off and on: serve's `--log-level` for each.
const ACCESS_LOG_LEVELS: [(&str, &str); 2] = [
    ("access log off", "warn,rollgate::serve::access=warn"),
    ("access log on (JSON, stderr)", "warn"),
];

/// A template directory with the error-rate template every check of this bench names.
fn error_rate_templates() -> tempfile::TempDir {
    template_dir(&[(
        "error-rate.yaml",
        error_rate_template("error-rate", "inconclusive"),
    )])
}

/// The error-rate template and the replay of the healthy service's answers (the path returned),
/// in one directory.
fn replay_dir() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = error_rate_templates();
    let replay = replay_file(dir.path());
    (dir, replay)
}

/// Serve's arguments for [`replay_dir`]'s template, its queries answered by the replay.
fn replay_args<'a>(
    (dir, replay): &'a (tempfile::TempDir, std::path::PathBuf),
    log_level: &'a str,
) -> [&'a str; 8] {
    [
        "--templates",
        path_str(dir.path()),
        "--replay",
        path_str(replay),
        "--prometheus",
        "http://replay.invalid:9090",
        "--log-level",
        log_level,
    ]
}

/// `rollgate serve` from `bin` on [`replay_dir`]; the directory lives as long as the returned
/// guard.
fn replay_server(bin: &str, log_level: &str) -> (ServeProcess, tempfile::TempDir) {
    let replay = replay_dir();
    let server = start(bin, &replay_args(&replay, log_level));
    (server, replay.0)
}

/// The access log off and on, as two servers of `bin` measured in alternating slices (off then
/// on, then on then off, ...): the machine's load drifts by more than the log costs over the
/// length of one run, so one run of each would compare two different machines. Returns the
/// median of the per-round on / off ratios.
fn throughput(bin: &str) -> f64 {
    let servers: Vec<_> = ACCESS_LOG_LEVELS
        .iter()
        .map(|(_, level)| {
            let (server, templates) = replay_server(bin, level);
            server.drop_logs();
            (server, templates)
        })
        .collect();
    let addrs: Vec<String> = servers
        .iter()
        .map(|(server, _)| server.url.trim_start_matches("http://").to_string())
        .collect();
    // The driver gets one thread; each server has its own runtime with one worker per core.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (loads, ratios) = runtime.block_on(async {
        for addr in &addrs {
            let warm = drive(addr, WARMUP, check_request(addr), CONNECTIONS).await;
            assert_eq!(warm.failed, 0, "warm-up failures");
        }
        let mut loads: [Vec<Load>; 2] = [Vec::new(), Vec::new()];
        let mut ratios = Vec::with_capacity(SLICES);
        for round in 0..SLICES {
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            let mut rates = [0.0; 2];
            for i in order {
                let load = drive(
                    &addrs[i],
                    RUN / SLICES as u32,
                    check_request(&addrs[i]),
                    CONNECTIONS,
                )
                .await;
                assert_eq!(load.failed, 0, "failed requests under load");
                rates[i] = load.ok as f64 / load.elapsed.as_secs_f64();
                loads[i].push(load);
            }
            ratios.push(rates[1] / rates[0]);
        }
        (loads, ratios)
    });
    for ((label, _), slices) in ACCESS_LOG_LEVELS.iter().zip(loads) {
        let ok: usize = slices.iter().map(|l| l.ok).sum();
        let elapsed: f64 = slices.iter().map(|l| l.elapsed.as_secs_f64()).sum();
        let mut latencies: Vec<Duration> = slices.into_iter().flat_map(|l| l.latencies).collect();
        latencies.sort();
        println!(
            "  {label:<28}: {:>7.0} req/s, p50 {:>6.2} ms, p99 {:>6.2} ms, max {:>7.2} ms ({ok} ok, {CONNECTIONS} connections, {elapsed:.1} s in {SLICES} slices)",
            ok as f64 / elapsed,
            ms(pct(&latencies, 0.5)),
            ms(pct(&latencies, 0.99)),
            ms(*latencies.last().unwrap()),
        );
    }
    // One answer from each, to show the work was the real one.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        for addr in &addrs {
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(&check_request(addr)).await.unwrap();
            let mut buf = Vec::new();
            assert_eq!(read_response(&mut s, &mut buf).await.unwrap(), 200);
        }
    });
    let ratio = median(ratios.clone());
    println!(
        "  on / off per round: {}",
        ratios
            .iter()
            .map(|r| format!("{r:.3}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    ratio
}

/// `GET /metrics` through `bin` after `METRICS_CHECKS` checks filled its series: scrapes per
/// second on one connection, their median latency and the body's size. Compares the
/// exposition (prometheus-client since issue 14) with a baseline's hand-written one.
fn exposition(bin: &str) -> f64 {
    const METRICS_CHECKS: Duration = Duration::from_secs(2);
    const SCRAPES: Duration = Duration::from_secs(5);
    let (server, _templates) = replay_server(bin, "warn,rollgate::serve::access=warn");
    let addr = server.url.trim_start_matches("http://").to_string();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let checks = drive(&addr, METRICS_CHECKS, check_request(&addr), 8).await;
        assert_eq!(checks.failed, 0, "checks before the scrapes failed");
        let scrape = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\n\r\n").into_bytes();
        let mut s = TcpStream::connect(&addr).await.unwrap();
        let mut buf = Vec::new();
        s.write_all(&scrape).await.unwrap();
        assert_eq!(read_response(&mut s, &mut buf).await.unwrap(), 200);
        let body = String::from_utf8_lossy(&buf).into_owned();
        assert!(
            body.contains("rollgate_"),
            "no rollgate series in /metrics: {body}"
        );
        let load = drive(&addr, SCRAPES, scrape, 1).await;
        assert_eq!(load.failed, 0, "failed scrapes");
        let rate = load.ok as f64 / load.elapsed.as_secs_f64();
        println!(
            "  {:>7.0} scrapes/s, p50 {:.3} ms, p99 {:.3} ms, {} bytes a scrape ({} checks before)",
            rate,
            ms(pct(&load.latencies, 0.5)),
            ms(pct(&load.latencies, 0.99)),
            buf.len(),
            checks.ok
        );
        rate
    })
}

/// Starts `rollgate serve` from `bin` with `args`.
fn start(bin: &str, args: &[&str]) -> ServeProcess {
    ServeProcess::try_start_bin(bin, args, &[]).unwrap_or_else(|(status, logs)| {
        panic!(
            "{bin} serve did not start ({status:?}):\n{}",
            logs.join("\n")
        )
    })
}

/// A service of the sized data set: `pods` x `routes` x 2 codes series of `http_requests_total`
/// (`service`, `track="canary"`, `pod`, `route`, `code`), 100 req/s and 0.1 % 5xx in all.
struct Sized {
    service: &'static str,
    pods: usize,
    routes: usize,
}

/// From the two series of the test scenarios to a service with many pods and routes, whose
/// `sum(rate(...[5m]))` makes Prometheus read 40,000 samples.
const SIZES: [Sized; 4] = [
    Sized {
        service: "size-2",
        pods: 1,
        routes: 1,
    },
    Sized {
        service: "size-20",
        pods: 1,
        routes: 10,
    },
    Sized {
        service: "size-200",
        pods: 10,
        routes: 10,
    },
    Sized {
        service: "size-2000",
        pods: 100,
        routes: 10,
    },
];

/// The sized services, sampled every 15 s from 30 minutes before `base` to 10 minutes after.
fn sized_dataset(base: i64) -> String {
    use support::scenarios::{push_sample, times, Dataset, STEP};
    let mut ds = Dataset::new();
    let buf = ds.family("http_requests", "counter");
    for size in &SIZES {
        let series = (size.pods * size.routes) as f64;
        for pod in 0..size.pods {
            for route in 0..size.routes {
                let (pod, route) = (format!("pod-{pod}"), format!("/r{route}"));
                for (code, per_second) in [("200", 99.9 / series), ("500", 0.1 / series)] {
                    let labels = [
                        ("service", size.service),
                        ("track", "canary"),
                        ("pod", pod.as_str()),
                        ("route", route.as_str()),
                        ("code", code),
                    ];
                    for t in times(base, -1800, 600, STEP) {
                        let v = (per_second * (t - base + 1800) as f64).floor();
                        push_sample(buf, "http_requests_total", &labels, v, t);
                    }
                }
            }
        }
    }
    ds.finish()
}

/// A process answering checks in the overhead rounds: a rollgate build or the floor proxy.
struct Contender {
    name: String,
    check_url: String,
    health_url: String,
    pid: u32,
}

/// One contender at one size: its check (median), its own share (check − the queries alone −
/// its own bare hop, per round) and its CPU time per check.
struct Overhead {
    series: usize,
    name: String,
    /// Medians (ms) of the check, of the queries alone and of the process's bare hop.
    check: f64,
    alone: f64,
    hop: f64,
    own: Interval,
    cpu_ms: f64,
}

/// Two processes' paired difference at one size, per round.
struct Versus {
    series: usize,
    pair: String,
    check: Interval,
    own: Interval,
}

/// A median of per-round figures (ms) and its distribution-free 95 % interval: the order
/// statistics `n/2 ± 0.98 √n` (the binomial(n, ½) count of values below the median).
#[derive(Clone, Copy)]
struct Interval {
    lo: f64,
    median: f64,
    hi: f64,
}

impl Interval {
    fn of(mut values: Vec<f64>) -> Interval {
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let half_width = (0.98 * (n as f64).sqrt()).ceil() as usize;
        Interval {
            lo: values[(n / 2).saturating_sub(half_width)],
            median: values[n / 2],
            hi: values[(n / 2 + half_width).min(n - 1)],
        }
    }
}

impl std::fmt::Display for Interval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:+.3} ms [{:+.3}, {:+.3}]",
            self.median, self.lo, self.hi
        )
    }
}

/// The floor proxy (`floor.rs`): this bench binary again, killed on drop.
struct FloorProcess {
    child: std::process::Child,
    url: String,
}

impl FloorProcess {
    fn start(prometheus: &str, queries: &Value) -> FloorProcess {
        Self::start_under(&[], prometheus, queries)
    }

    /// Like `start`, run by `wrapper` (a program and its arguments) when that is not empty.
    fn start_under(wrapper: &[&str], prometheus: &str, queries: &Value) -> FloorProcess {
        use std::io::BufRead;
        let exe = std::env::current_exe().unwrap();
        let mut command = match wrapper {
            [program, args @ ..] => {
                let mut command = std::process::Command::new(program);
                command.args(args).arg(exe);
                command
            }
            [] => std::process::Command::new(exe),
        };
        let mut child = command
            .env(floor::PROMETHEUS_ENV, prometheus)
            .env(floor::QUERIES_ENV, queries.to_string())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line.trim().strip_prefix("listening ").unwrap().to_string();
        FloorProcess {
            child,
            url: format!("http://{addr}"),
        }
    }
}

impl Drop for FloorProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The sizes to measure: all, or those `SERVE_LOAD_SIZES=2,20` names by series per query.
fn chosen_sizes() -> impl Iterator<Item = &'static Sized> {
    let chosen = std::env::var("SERVE_LOAD_SIZES").ok();
    SIZES.iter().filter(move |size| {
        chosen.as_deref().is_none_or(|list| {
            list.split(',')
                .any(|n| n.trim() == size.series().to_string())
        })
    })
}

impl Sized {
    /// Series per query.
    fn series(&self) -> usize {
        self.pods * self.routes * 2
    }
}

/// The floor proxy's queries: each sized service's two.
fn floor_queries() -> Value {
    SIZES
        .iter()
        .map(|size| {
            (
                size.service.to_string(),
                json!(template_queries(size.service)),
            )
        })
        .collect::<serde_json::Map<String, Value>>()
        .into()
}

/// The template's two queries for a service of the sized data set, as rollgate sends them.
fn template_queries(service: &'static str) -> [String; 2] {
    let traffic = Traffic {
        service,
        track: "canary",
        ok: Rate::ZERO,
        errors: None,
        stop: None,
    };
    [traffic.total_query("5m"), traffic.ratio_query("5m")]
}

/// A Prometheus holding the sized services, and a template directory with the error-rate
/// template the checks name.
fn sized_prometheus() -> (support::prom::PromServer, tempfile::TempDir) {
    let base = support::scenarios::base_now();
    let prom = support::prom::PromServer::start(base, &sized_dataset(base));
    (prom, error_rate_templates())
}

/// Serve's arguments against the sized Prometheus: the templates of [`sized_prometheus`], the
/// access log off (it is measured by the throughput part).
fn sized_serve_args<'a>(templates: &'a std::path::Path, prometheus: &'a str) -> [&'a str; 6] {
    [
        "--templates",
        path_str(templates),
        "--prometheus",
        prometheus,
        "--log-level",
        "warn,rollgate::serve::access=warn",
    ]
}

/// Runs the overhead comparison: every binary's serve, the floor proxy, the queries alone and
/// each process's bare hop in the same rounds, so that builds are compared under the same load
/// (run one after another, the same build's own share moved by 50 % between runs here). Prints
/// each contender's own share and its difference from this build, per round; returns each
/// contender's median own share (ms) per size, and each pair's median difference.
fn overhead(binaries: &[(&str, String)]) -> Vec<OwnShare> {
    let (prom, dir) = sized_prometheus();
    let servers: Vec<ServeProcess> = binaries
        .iter()
        .map(|(_, bin)| start(bin, &sized_serve_args(dir.path(), &prom.url)))
        .collect();
    let floor = FloorProcess::start(&prom.url, &floor_queries());
    let mut contenders: Vec<Contender> = binaries
        .iter()
        .zip(&servers)
        .map(|((name, _), server)| Contender {
            name: name.to_string(),
            check_url: format!("{}/flagger/v1/check", server.url),
            health_url: format!("{}/healthz", server.url),
            pid: server.pid(),
        })
        .collect();
    contenders.push(Contender {
        name: "floor proxy".into(),
        check_url: format!("{}/flagger/v1/check", floor.url),
        health_url: format!("{}/healthz", floor.url),
        pid: floor.child.id(),
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let query_url = format!("{}/api/v1/query", prom.url);
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    // The reference for "the queries alone" is plain reqwest; rollgate's client is
    // hyper-util's (reqwest's core without its layers), 0.01-0.06 ms cheaper for two queries
    // here, and that difference lowers every own share. Both are timed, so it shows.
    let lean_query_url: hyper::Uri = query_url.parse().unwrap();
    let lean = floor::http_client();
    let mut rows = Vec::new();
    let mut versus = Vec::new();
    let mut references = Vec::new();
    runtime.block_on(async {
        // The HTTP round trip to a process alone, with no analysis behind it.
        let hop = |url: &str| {
            let request = client.get(url);
            async move {
                let resp = request.send().await.unwrap();
                assert_eq!(resp.status().as_u16(), 200);
                resp.bytes().await.unwrap();
            }
        };
        for size in chosen_sizes() {
            let payload = flagger_payload(
                "Progressing",
                &[("template", "error-rate"), ("args.service", size.service)],
            );
            let check = |url: &str| {
                let request = client
                    .post(url)
                    .header("Content-Type", "application/json")
                    .body(payload.clone());
                async move {
                    let resp = request.send().await.unwrap();
                    let status = resp.status().as_u16();
                    let body = resp.text().await.unwrap();
                    assert_eq!(status, 200, "{}: {body}", size.service);
                }
            };
            // The template's two queries, sent together as rollgate sends them.
            let queries = template_queries(size.service);
            let plain_query = |q: &str| {
                let request = client
                    .post(&query_url)
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(format!("query={}", support::prom::urlencode(q)));
                async move {
                    let body = request.send().await.unwrap().bytes().await.unwrap();
                    let v: Value = serde_json::from_slice(&body).unwrap();
                    assert_eq!(v["status"], "success");
                    assert_eq!(v["data"]["result"].as_array().map(Vec::len), Some(1));
                }
            };
            let plain = || async {
                futures::join!(plain_query(&queries[0]), plain_query(&queries[1]));
            };
            let lean_plain = || async {
                let (a, b) = futures::join!(
                    floor::ask(&lean, &lean_query_url, &queries[0]),
                    floor::ask(&lean, &lean_query_url, &queries[1])
                );
                assert_eq!(
                    (&a["status"], &b["status"]),
                    (&"success".into(), &"success".into())
                );
            };
            for _ in 0..20 {
                for c in &contenders {
                    check(&c.check_url).await;
                    hop(&c.health_url).await;
                }
                plain().await;
                lean_plain().await;
            }
            let mut checks = vec![Vec::with_capacity(ROUNDS); contenders.len()];
            let mut own = vec![Vec::with_capacity(ROUNDS); contenders.len()];
            let mut hops = vec![Vec::with_capacity(ROUNDS); contenders.len()];
            let mut alone_times = Vec::with_capacity(ROUNDS);
            let mut lean_times = Vec::with_capacity(ROUNDS);
            // Each process's check and its hop come after other processes' work, so both find
            // the caches as cold: a hop timed right after the same process's check reads
            // 0.05-0.1 ms faster here, and the own share as that much larger. The order of the
            // processes turns each round, so none is always first after the queries alone.
            let n = contenders.len();
            for round in 0..ROUNDS {
                let turn = || (0..n).map(move |k| (round + k) % n);
                let mut checked = vec![0.0; n];
                for i in turn() {
                    checked[i] = ms(timed(check(&contenders[i].check_url)).await);
                }
                let alone = ms(timed(plain()).await);
                alone_times.push(alone);
                lean_times.push(ms(timed(lean_plain()).await));
                for i in turn() {
                    let bare = ms(timed(hop(&contenders[i].health_url)).await);
                    checks[i].push(checked[i]);
                    hops[i].push(bare);
                    own[i].push(checked[i] - alone - bare);
                }
            }
            references.push((
                size.series(),
                Interval::of(alone_times.clone()),
                Interval::of(lean_times.clone()),
                Interval::of(
                    alone_times
                        .iter()
                        .zip(&lean_times)
                        .map(|(r, h)| r - h)
                        .collect(),
                ),
            ));
            let alone = median(alone_times);
            for (i, c) in contenders.iter().enumerate() {
                let cpu_before = process_cpu(c.pid);
                for _ in 0..CPU_CHECKS {
                    check(&c.check_url).await;
                }
                let cpu = (process_cpu(c.pid) - cpu_before) / CPU_CHECKS as f64;
                rows.push(Overhead {
                    series: size.series(),
                    name: c.name.clone(),
                    check: median(checks[i].clone()),
                    alone,
                    hop: median(hops[i].clone()),
                    own: Interval::of(own[i].clone()),
                    cpu_ms: cpu * 1e3,
                });
            }
            // Per round, this build against each other process, and each build against the
            // floor proxy: the check's difference, and the own shares' (the hops taken out).
            let floor_at = contenders.len() - 1;
            let pairs = (1..contenders.len()).map(|i| (0, i));
            let to_floor = (1..floor_at).map(|i| (i, floor_at));
            for (a, b) in pairs.chain(to_floor) {
                let paired = |v: &[Vec<f64>]| {
                    Interval::of(v[a].iter().zip(&v[b]).map(|(x, y)| x - y).collect())
                };
                versus.push(Versus {
                    series: size.series(),
                    pair: format!("{} - {}", contenders[a].name, contenders[b].name),
                    check: paired(&checks),
                    own: paired(&own),
                });
            }
        }
    });
    println!("  series per query | process | check | queries alone | ratio (target <= 1.2) | bare hop | own share (check - queries alone - its hop, target <= 0.05 ms; 95 % interval) | CPU per check");
    for r in &rows {
        println!(
            "  {:>16} | {:>11} | {:>7.3} ms | {:>7.3} ms | {:>5.3} | {:>7.3} ms | {} | {:.3} ms",
            r.series,
            r.name,
            r.check,
            r.alone,
            r.check / r.alone,
            r.hop,
            r.own,
            r.cpu_ms
        );
    }
    println!("  series per query | processes | check, difference per round (95 % interval) | own share, difference per round");
    for v in &versus {
        println!("  {:>16} | {} | {} | {}", v.series, v.pair, v.check, v.own);
    }
    println!("  series per query | queries alone: plain reqwest (the reference) | with hyper-util's client (rollgate's) | reqwest - hyper-util, per round");
    for (series, reference, lean, difference) in &references {
        println!("  {series:>16} | {reference} | {lean} | {difference}");
    }
    let differences = versus.into_iter().map(|v| OwnShare {
        series: v.series,
        name: v.pair,
        median: v.own.median,
        is_difference: true,
    });
    rows.into_iter()
        .map(|r| OwnShare {
            series: r.series,
            name: r.name,
            median: r.own.median,
            is_difference: false,
        })
        .chain(differences)
        .collect()
}

/// One run's median own share of a process at one size, or the median of its per-round
/// difference from another process's.
struct OwnShare {
    series: usize,
    name: String,
    median: f64,
    is_difference: bool,
}

/// Upper bound on `SERVE_LOAD_REPEAT`.
const MAX_REPEAT: usize = 50;

/// How many times the overhead part runs (`SERVE_LOAD_REPEAT`, default 1): each run starts its
/// processes afresh, so the spread of the runs' medians shows how far the machine's state
/// moves a figure that one run's interval cannot.
fn overhead_runs() -> usize {
    let Ok(text) = std::env::var("SERVE_LOAD_REPEAT") else {
        return 1;
    };
    match text.trim().parse::<usize>() {
        Ok(n @ 1..=MAX_REPEAT) => n,
        _ => panic!("SERVE_LOAD_REPEAT={text}: give a number of runs from 1 to {MAX_REPEAT}"),
    }
}

/// One process's (or pair's) median in each run, matched by size and name to `first`.
fn per_run(runs: &[Vec<OwnShare>], first: &OwnShare) -> Vec<f64> {
    runs.iter()
        .filter_map(|run| {
            run.iter()
                .find(|o| o.series == first.series && o.name == first.name)
                .map(|o| o.median)
        })
        .collect()
}

/// This build's largest own share over the sizes, each size's the median of the runs'.
fn largest_own_share(runs: &[Vec<OwnShare>]) -> f64 {
    runs[0]
        .iter()
        .filter(|o| o.name == "this build")
        .map(|o| median(per_run(runs, o)))
        .fold(f64::MIN, f64::max)
}

/// Across runs: each process's median own share per run (and each pair's difference), their
/// median, and in how many runs a process met the target.
fn summarize_runs(runs: &[Vec<OwnShare>]) {
    println!("  series per query | process, or difference per round | median own share of each run | median of the runs | runs <= {TARGET_OWN_SHARE_MS} ms");
    for first in &runs[0] {
        let shares = per_run(runs, first);
        let listed: Vec<String> = shares.iter().map(|v| format!("{v:+.3}")).collect();
        let met = if first.is_difference {
            String::new()
        } else {
            let met = shares.iter().filter(|v| **v <= TARGET_OWN_SHARE_MS).count();
            format!("{met} of {}", shares.len())
        };
        println!(
            "  {:>16} | {} | {} | {:+.3} ms | {met}",
            first.series,
            first.name,
            listed.join(" "),
            median(shares)
        );
    }
}

/// Issue 14's target for the own share of a check (ms).
const TARGET_OWN_SHARE_MS: f64 = 0.05;

/// Checks sent one after another to measure serve's CPU time per check.
const CPU_CHECKS: usize = 1_000;

/// CPU seconds of process `pid`'s live threads so far, to the nanosecond: the first field of
/// each `/proc/<pid>/task/<tid>/schedstat` (time on a CPU). `/proc/<pid>/stat` counts in 10 ms
/// ticks, too coarse for the tens of microseconds two builds differ by.
fn process_cpu(pid: u32) -> f64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<f64>().ok())
        .sum::<f64>()
        / 1e9
}

/// The median of per-round differences (ms).
fn median(values: Vec<f64>) -> f64 {
    Interval::of(values).median
}

/// How long `work` takes.
async fn timed(work: impl std::future::Future<Output = ()>) -> Duration {
    let started = Instant::now();
    work.await;
    started.elapsed()
}

fn main() {
    if let Ok(prometheus) = std::env::var(floor::PROMETHEUS_ENV) {
        return floor::run(&prometheus);
    }
    // `cargo bench` passes --bench; a further argument picks one part: `throughput`,
    // `metrics`, `instructions`, `syscalls` or `overhead`.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let wanted = |part: &str| only.is_empty() || only.iter().any(|a| a == part);
    // `cargo bench` builds the release profile; the shipped binary is `--profile dist`
    // (scripts/release), which ROLLGATE_BIN can name instead.
    let this_build = support::rollgate_bin().to_string();
    println!("serve_load: this build is {this_build}");
    if std::env::var_os("ROLLGATE_BIN").is_none() {
        println!(
            "  (the release build; the shipped one is scripts/release's: ROLLGATE_BIN=dist/rollgate-linux-amd64)"
        );
    }
    let mut binaries = vec![("this build", this_build)];
    if let Ok(baseline) = std::env::var("SERVE_LOAD_BASELINE") {
        binaries.push(("baseline", baseline));
    }
    if wanted("throughput") {
        println!("serve_load: /flagger/v1/check throughput, replay-backed (guard + ratio query)");
        let mut ratios = Vec::new();
        for (name, bin) in &binaries {
            println!(" {name} ({bin}):");
            ratios.push((name, throughput(bin)));
        }
        for (name, ratio) in ratios {
            println!(
                "  {name}: access log on / off = {ratio:.3}, median of the rounds (target >= 0.90)"
            );
        }
    }
    if wanted("metrics") {
        println!("serve_load: GET /metrics on one connection after checks filled its series");
        let mut rates = Vec::new();
        for (name, bin) in &binaries {
            println!(" {name} ({bin}):");
            rates.push(exposition(bin));
        }
        if let [this, baseline] = rates[..] {
            println!(
                "  this build / baseline scrapes per second = {:.3}",
                this / baseline
            );
        }
    }
    if wanted("instructions") {
        println!(
            "serve_load: user-space instructions per check under callgrind, against the real Prometheus"
        );
        instructions::run(&binaries);
    }
    if wanted("syscalls") {
        println!("serve_load: system calls per check under strace, against the real Prometheus");
        syscalls::run(&binaries);
    }
    if wanted("overhead") {
        let runs = overhead_runs();
        let mut results = Vec::with_capacity(runs);
        for run in 1..=runs {
            println!("serve_load: {ROUNDS} rounds against the real Prometheus, every process in each (run {run} of {runs})");
            results.push(overhead(&binaries));
        }
        if runs > 1 {
            println!("serve_load: the {runs} runs of the overhead part");
            summarize_runs(&results);
        }
        let share = largest_own_share(&results);
        println!(
            "  this build: largest median own share {share:+.3} ms (target <= {TARGET_OWN_SHARE_MS} ms)"
        );
    }
}
