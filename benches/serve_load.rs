//! `rollgate serve` under load, in one run:
//!
//! 1. Throughput: `/flagger/v1/check` naming a template (guard + ratio query, the README's
//!    error-rate gate) with the queries answered from a replay file, so what is measured is the
//!    HTTP surface and the engine. A lean HTTP/1.1 driver (pre-built request, keep-alive,
//!    `CONNECTIONS` connections on one thread) runs for `RUN` after a warm-up, once with the
//!    access log off and once with it on. Prints requests/s, p50, p99 (targets: >= 10,000
//!    req/s, p99 <= 20 ms on 2 cores, driver included).
//! 2. Overhead against the real Prometheus: one caller, `ROUNDS` interleaved rounds of (a) the
//!    same check through `rollgate serve` and (b) the same two queries sent concurrently with plain reqwest.
//!    Prints both medians and their ratio (target <= 1.2).
//!
//! The machine is shared: compare the ratio, and read absolute figures with the load noted.
//!
//! `cargo bench --bench serve_load`

#[path = "../tests/serve_common/mod.rs"]
mod serve_common;
#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_common::{error_rate_template, flagger_payload, path_str, template_dir, ServeProcess};
use support::scenarios::HEALTHY;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Concurrent connections of the throughput driver.
const CONNECTIONS: usize = 64;
/// Warm-up before each measured run.
const WARMUP: Duration = Duration::from_secs(2);
/// Length of each measured run.
const RUN: Duration = Duration::from_secs(10);
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

/// Drives `CONNECTIONS` keep-alive connections for `run`.
async fn drive(addr: &str, run: Duration) -> Load {
    let request = std::sync::Arc::new(check_request(addr));
    let started = Instant::now();
    let tasks: Vec<_> = (0..CONNECTIONS)
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

fn throughput(label: &str, log_level: &str) {
    let dir = template_dir(&[(
        "error-rate.yaml",
        error_rate_template("error-rate", "inconclusive"),
    )]);
    let replay = replay_file(dir.path());
    let server = ServeProcess::start(&[
        "--templates",
        path_str(dir.path()),
        "--replay",
        path_str(&replay),
        "--prometheus",
        "http://replay.invalid:9090",
        "--log-level",
        log_level,
    ]);
    let addr = server.url.trim_start_matches("http://").to_string();
    // The driver gets one thread; the server has its own runtime with one worker per core.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let warm = drive(&addr, WARMUP).await;
        assert_eq!(warm.failed, 0, "warm-up failures");
        let load = drive(&addr, RUN).await;
        println!(
            "  {label:<28}: {:>7.0} req/s, p50 {:>6.2} ms, p99 {:>6.2} ms, max {:>7.2} ms ({} ok, {} failed, {CONNECTIONS} connections, {:.1} s)",
            load.ok as f64 / load.elapsed.as_secs_f64(),
            ms(pct(&load.latencies, 0.5)),
            ms(pct(&load.latencies, 0.99)),
            ms(*load.latencies.last().unwrap()),
            load.ok,
            load.failed,
            load.elapsed.as_secs_f64()
        );
        assert_eq!(load.failed, 0, "failed requests under load");
    });
    // One answer, to show the work was the real one.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(&check_request(&addr)).await.unwrap();
        let mut buf = Vec::new();
        assert_eq!(read_response(&mut s, &mut buf).await.unwrap(), 200);
    });
}

fn overhead() {
    let prom = support::prom::shared();
    let dir = template_dir(&[(
        "error-rate.yaml",
        error_rate_template("error-rate", "inconclusive"),
    )]);
    let server = ServeProcess::start(&[
        "--templates",
        path_str(dir.path()),
        "--prometheus",
        &prom.url,
        "--log-level",
        "warn,rollgate::serve::access=warn",
    ]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let check_url = format!("{}/flagger/v1/check", server.url);
    let query_url = format!("{}/api/v1/query", prom.url);
    let payload = flagger_payload(
        "Progressing",
        &[("template", "error-rate"), ("args.service", "healthy")],
    );
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let health_url = format!("{}/healthz", server.url);
    let (serve_times, plain_times, hop_times) = runtime.block_on(async {
        let via_serve = || async {
            let resp = client
                .post(&check_url)
                .header("Content-Type", "application/json")
                .body(payload.clone())
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status().as_u16(), 200);
            resp.bytes().await.unwrap();
        };
        // rollgate sends the guard and the query together; so does the baseline.
        let plain_query = |q: String| {
            let request = client
                .post(&query_url)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(format!("query={}", support::prom::urlencode(&q)));
            async move {
                let body = request.send().await.unwrap().bytes().await.unwrap();
                let v: Value = serde_json::from_slice(&body).unwrap();
                assert_eq!(v["status"], "success");
            }
        };
        let plain = || async {
            futures::join!(
                plain_query(HEALTHY.total_query("5m")),
                plain_query(HEALTHY.ratio_query("5m"))
            );
        };
        // The HTTP round trip to rollgate alone, with no analysis behind it.
        let hop = || async {
            let resp = client.get(&health_url).send().await.unwrap();
            assert_eq!(resp.status().as_u16(), 200);
            resp.bytes().await.unwrap();
        };
        for _ in 0..20 {
            via_serve().await;
            plain().await;
            hop().await;
        }
        let mut s = Vec::with_capacity(ROUNDS);
        let mut p = Vec::with_capacity(ROUNDS);
        let mut h = Vec::with_capacity(ROUNDS);
        for _ in 0..ROUNDS {
            let t = Instant::now();
            via_serve().await;
            s.push(t.elapsed());
            let t = Instant::now();
            plain().await;
            p.push(t.elapsed());
            let t = Instant::now();
            hop().await;
            h.push(t.elapsed());
        }
        s.sort();
        p.sort();
        h.sort();
        (s, p, h)
    });
    let (s, p) = (pct(&serve_times, 0.5), pct(&plain_times, 0.5));
    println!(
        "  check via rollgate serve    : median {:>7.3} ms, p99 {:>7.3} ms",
        ms(s),
        ms(pct(&serve_times, 0.99))
    );
    println!(
        "  the 2 queries, plain reqwest: median {:>7.3} ms, p99 {:>7.3} ms",
        ms(p),
        ms(pct(&plain_times, 0.99))
    );
    let h = pct(&hop_times, 0.5);
    println!("  GET /healthz (the HTTP hop) : median {:>7.3} ms", ms(h));
    println!(
        "  ratio serve / plain         : {:.3} (target <= 1.2); without the hop: {:.3}",
        s.as_secs_f64() / p.as_secs_f64(),
        (s.as_secs_f64() - h.as_secs_f64()) / p.as_secs_f64()
    );
}

fn main() {
    // `cargo bench` passes --bench; any other argument filters nothing here.
    println!("serve_load: /flagger/v1/check throughput, replay-backed (guard + ratio query)");
    throughput("access log off", "warn,rollgate::serve::access=warn");
    throughput("access log on (JSON, stderr)", "warn");
    println!("serve_load: {ROUNDS} interleaved rounds against the real Prometheus");
    overhead();
}
