//! Faults under load, on loopback and bounded in time:
//! - the Argo plugin, driven by 30 callers of the Go go-plugin host (tests/gohost `rss`), while
//!   the real Prometheus behind a fault proxy is refused, made slow, made to answer garbage,
//!   killed and restarted. Every verdict is checked against the data: the healthy service may only
//!   be Successful or Error, the bad one only Failed or Error — a fault may cost an answer, never
//!   turn it into the other verdict — and both verdicts and faults must actually occur.
//! - `rollgate serve`, while 64 callers run Flagger checks against the real Prometheus, a client
//!   trickling request headers byte by byte (slowloris) and one sending a body slower than
//!   `--request-timeout`: the slow clients are cut within the timeout, every caller gets its
//!   answer, `/healthz` answers throughout, memory stays bounded.

use crate::{serve_common, support};

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_common::{client, rollout_check};
use support::fault_proxy::{Fault, FaultProxy};
use support::prom::PromServer;
use support::scenarios::{base_now, Dataset, Traffic, BAD, HEALTHY};

/// Per-query timeout and retries of the plugin spec: a measurement (guard + query) ends within
/// about 2 x (1 s + 100 ms backoff + 1 s).
const QUERY_TIMEOUT: &str = "1s";
const RETRIES: u32 = 1;
/// The answer bound asserted for every call (the measurement bound above, plus Ping under the
/// host's global mutex and scheduling on a loaded 2-core machine).
const CALL_BOUND_MS: f64 = 7_000.0;
/// How long the load runs (the fault schedule fits inside it, restart included).
const LOAD_FOR: &str = "30s";

fn plugin_spec(t: &Traffic) -> String {
    json!({
        "prometheus": {"address": "{{address}}", "timeout": QUERY_TIMEOUT, "retries": RETRIES},
        "query": t.ratio_query("5m"),
        "minRequests": {"query": t.total_query("5m"), "count": 300},
        "noData": "error",
    })
    .to_string()
}

fn num(v: &Value, path: &[&str]) -> f64 {
    let mut cur = v;
    for p in path {
        cur = &cur[*p];
    }
    cur.as_f64()
        .unwrap_or_else(|| panic!("no number at {path:?} in {v}"))
}

/// Checks one gohost `rss` result: every call answered, verdicts only `truth` or Error, both
/// seen, answers within the bound, memory bounded.
fn check_plugin_run(name: &str, v: &Value, truth: &str) {
    assert_eq!(
        num(v, &["rpcErrors"]),
        0.0,
        "{name}: every call answered: {v}"
    );
    assert_eq!(
        num(v, &["pingErrors"]),
        0.0,
        "{name}: Ping answered throughout: {v}"
    );
    assert_eq!(
        num(v, &["mismatches"]),
        0.0,
        "{name}: each caller got its reply: {v}"
    );
    let phases = v["phases"].as_object().expect("phases");
    for (phase, n) in phases {
        assert!(
            phase == truth || phase == "Error",
            "{name}: {n} calls answered {phase}, which the data does not support (truth {truth}): {v}"
        );
    }
    assert!(
        num(v, &["phases", truth]) > 0.0,
        "{name}: no {truth} at all: {v}"
    );
    assert!(
        num(v, &["phases", "Error"]) > 0.0,
        "{name}: the faults were not hit: {v}"
    );
    let max = num(v, &["latencyMs", "max"]);
    assert!(max <= CALL_BOUND_MS, "{name}: a call took {max} ms: {v}");
    let points = v["checkpoints"].as_array().expect("checkpoints");
    let peak_kb = points
        .iter()
        .map(|p| num(p, &["hwmKb"]))
        .fold(0.0, f64::max);
    assert!(
        peak_kb <= 96.0 * 1024.0,
        "{name}: peak RSS {peak_kb} kB: {v}"
    );
    eprintln!(
        "[faults] {name}: {} calls, phases {}, max {max:.0} ms, peak RSS {:.1} MB",
        num(v, &["runs"]),
        v["phases"],
        peak_kb / 1024.0
    );
}

#[test]
fn plugin_verdicts_stay_true_to_the_data_while_prometheus_fails_under_load() {
    let host = support::gohost::build();
    let base = base_now();
    // Its own server (it is killed and restarted), holding just the two services.
    let mut ds = Dataset::new();
    HEALTHY.write(&mut ds, base);
    BAD.write(&mut ds, base);
    let mut prom = PromServer::start(base, &ds.finish());
    let proxy = FaultProxy::start(prom.addr);

    let start = |t: &Traffic| {
        let mut cmd = host.command("rss", Path::new(crate::support::rollgate_bin()));
        cmd.args(["-runs", "200000", "-callers", "30", "-checkpoints", "20"])
            .args(["-for", LOAD_FOR, "-timeout", "60s"])
            .args(["-success", "result[0] < 0.01"])
            .args(["-spec", &plugin_spec(t), "-address", &proxy.url])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        cmd.spawn().expect("start gohost rss")
    };
    let healthy = start(&HEALTHY);
    let bad = start(&BAD);

    // The schedule: healthy stretches between the faults, so both verdicts occur.
    let step = |fault: Fault, for_ms: u64| {
        proxy.set(fault);
        std::thread::sleep(Duration::from_millis(for_ms));
    };
    let began = Instant::now();
    step(Fault::None, 2_000);
    step(Fault::Refuse, 1_500);
    step(Fault::None, 1_500);
    step(Fault::Slow(Duration::from_millis(2_500)), 2_500);
    step(Fault::None, 1_500);
    step(Fault::Garbage, 1_500);
    step(Fault::None, 1_500);
    prom.kill_keeping_data();
    std::thread::sleep(Duration::from_millis(2_000));
    prom.restart();
    eprintln!(
        "[faults] schedule done in {:?} (restart included)",
        began.elapsed()
    );
    proxy.set(Fault::None);

    for (name, child, truth) in [("healthy", healthy, "Successful"), ("bad", bad, "Failed")] {
        let out = child.wait_with_output().expect("gohost rss");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let v: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "{name}: gohost printed no JSON ({e}): {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        assert!(
            out.status.success(),
            "{name}: gohost failed: {v}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            began.elapsed() > Duration::from_secs(12),
            "the load must outlast the schedule"
        );
        check_plugin_run(name, &v, truth);
    }
}

/// Sends a request head one byte at a time (one every 100 ms, never finishing); returns how long
/// the server took to close the connection, or None if it was still open after `limit`.
fn slowloris(addr: &str, limit: Duration) -> Option<Duration> {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_millis(100))).ok();
    let head = b"POST /flagger/v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Padding: ";
    let started = Instant::now();
    let mut i = 0usize;
    while started.elapsed() < limit {
        let byte = head.get(i).copied().unwrap_or(b'a');
        i += 1;
        if s.write_all(&[byte]).is_err() {
            return Some(started.elapsed());
        }
        let mut buf = [0u8; 512];
        match s.read(&mut buf) {
            Ok(0) => return Some(started.elapsed()),
            Ok(_) => return Some(started.elapsed()), // an error answer (408) counts as cut
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return Some(started.elapsed()),
        }
    }
    None
}

/// Sends complete headers announcing a 4 kB body, then the body one byte every 100 ms; returns
/// the status the server answered and when, or None if nothing came within `limit`.
fn slow_body(addr: &str, limit: Duration) -> Option<(u16, Duration)> {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_millis(100))).ok();
    let head = "POST /flagger/v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n";
    s.write_all(head.as_bytes()).expect("head");
    let started = Instant::now();
    let mut answer = Vec::new();
    while started.elapsed() < limit {
        // A failed write means the server closed; what it answered is still read below.
        let _ = s.write_all(b" ");
        let mut buf = [0u8; 1024];
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                answer.extend_from_slice(&buf[..n]);
                if answer.windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    let text = String::from_utf8_lossy(&answer);
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, started.elapsed()))
}

#[test]
fn serve_answers_64_callers_and_health_checks_while_slow_clients_are_cut() {
    let prom = support::prom::shared();
    let (_templates, server) = serve_common::error_rate_server(
        &prom.url,
        &["--request-timeout", "2s", "--deadline", "5s"],
    );
    let addr = server.url.trim_start_matches("http://").to_string();
    let rss_before = support::procfs::rss_mb_and_fds(server.pid()).0;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");

    // Slow clients on their own threads, started first so they overlap the load.
    let slow: Vec<_> = (0..8)
        .map(|i| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                if i % 2 == 0 {
                    let cut = slowloris(&addr, Duration::from_secs(10));
                    ("slowloris", cut.map(|d| (0, d)))
                } else {
                    ("slow body", slow_body(&addr, Duration::from_secs(10)))
                }
            })
        })
        .collect();

    let client = client();
    let (answers, health) = runtime.block_on(async {
        let url = format!("{}/flagger/v1/check", server.url);
        let body = rollout_check("error-rate", "healthy");
        let callers: Vec<_> = (0..64)
            .map(|_| {
                let (client, url, body) = (client.clone(), url.clone(), body.clone());
                tokio::spawn(async move {
                    let mut out = Vec::new();
                    for _ in 0..10 {
                        let t = Instant::now();
                        let r = client
                            .post(&url)
                            .header("Content-Type", "application/json")
                            .body(body.clone())
                            .send()
                            .await;
                        out.push((r.map(|r| r.status().as_u16()).unwrap_or(0), t.elapsed()));
                    }
                    out
                })
            })
            .collect();
        let health_url = format!("{}/healthz", server.url);
        let health_client = client.clone();
        let health = tokio::spawn(async move {
            let mut seen = Vec::new();
            for _ in 0..40 {
                let t = Instant::now();
                let r = health_client.get(&health_url).send().await;
                seen.push((r.map(|r| r.status().as_u16()).unwrap_or(0), t.elapsed()));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            seen
        });
        let mut answers = Vec::new();
        for c in callers {
            answers.extend(c.await.expect("caller"));
        }
        (answers, health.await.expect("health"))
    });

    let bound = Duration::from_secs(5 + 2 + 1);
    assert_eq!(answers.len(), 640);
    for (status, took) in &answers {
        assert_eq!(
            *status, 200,
            "every check of the healthy service is Successful (took {took:?})"
        );
        assert!(*took <= bound, "a check took {took:?}");
    }
    for (status, took) in &health {
        assert_eq!(*status, 200, "/healthz failed while under load");
        assert!(*took <= Duration::from_secs(1), "/healthz took {took:?}");
    }
    for handle in slow {
        let (what, result) = handle.join().expect("slow client");
        let Some((status, after)) = result else {
            panic!("{what}: the server kept the connection open for 10 s (request timeout 2 s)");
        };
        eprintln!("[faults] serve: {what} client cut after {after:?} (status {status})");
        assert!(
            after <= Duration::from_secs(4),
            "{what}: cut only after {after:?}"
        );
        if what == "slow body" {
            assert_eq!(status, 408, "{what}: answered {status}");
        }
    }
    let rss_after = support::procfs::rss_mb_and_fds(server.pid()).0;
    eprintln!(
        "[faults] serve: 640 checks, max {:?}; RSS {:.1} -> {:.1} MB",
        answers.iter().map(|a| a.1).max().unwrap_or_default(),
        rss_before,
        rss_after
    );
    assert!(rss_after <= 96.0, "serve RSS {rss_after} MB");
}
