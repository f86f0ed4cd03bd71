//! Soak: memory and file descriptors over a long run, release build.
//!
//! 1. The plugin: `SOAK_RUNS` Runs (default 1,000,000) through the Go go-plugin host (`gohost
//!    rss`: 30 callers, Ping + Run with full AnalysisRun values) against the real Prometheus
//!    (guard + query on the healthy service), RSS and open file descriptors of the plugin
//!    sampled every 10,000 Runs. Every Run must be Successful.
//! 2. `rollgate serve`: `SOAK_SERVE_SECONDS` (default 600) of Flagger checks from 32 concurrent
//!    callers against the real Prometheus, RSS and open file descriptors sampled every 10 s.
//!
//! Targets: RSS flat after warm-up (the first 20 %) and at most 40 MB; no file descriptor
//! growth after warm-up. Prints every checkpoint and a verdict line per target; exits non-zero
//! when a target is missed.
//!
//! `cargo bench --bench soak` (about 20 minutes on 2 cores);
//! `SOAK_RUNS=100000 SOAK_SERVE_SECONDS=60 cargo bench --bench soak` for a short one.

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

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_common::rollout_check;
use support::scenarios::HEALTHY;

const CALLERS: usize = 30;
const SERVE_CALLERS: usize = 32;
const RUNS_PER_CHECKPOINT: usize = 10_000;
const SERVE_SAMPLE: Duration = Duration::from_secs(10);
const WARMUP: f64 = 0.2;
const RSS_TARGET_MB: f64 = 40.0;
/// RSS may wander this much after warm-up and still count as flat (allocator noise).
const FLAT_MB: f64 = 4.0;

fn env_usize(key: &str, default: usize) -> usize {
    match std::env::var(key) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{key}={v:?} is not a whole number")),
        Err(_) => default,
    }
}

/// One sample: (progress label, RSS MB, open fds).
type Sample = (String, f64, f64);

/// Prints the samples and judges them; true when every target holds.
fn judge(what: &str, samples: &[Sample]) -> bool {
    for (at, rss, fds) in samples {
        println!("  {what} {at:>14}: RSS {rss:>6.1} MB, fds {fds:>4}");
    }
    let skip = ((samples.len() as f64) * WARMUP).ceil() as usize;
    let after = &samples[skip.min(samples.len().saturating_sub(1))..];
    let (rss_min, rss_max) = after.iter().fold((f64::MAX, f64::MIN), |(lo, hi), s| {
        (lo.min(s.1), hi.max(s.1))
    });
    let (fd_min, fd_max) = after.iter().fold((f64::MAX, f64::MIN), |(lo, hi), s| {
        (lo.min(s.2), hi.max(s.2))
    });
    let first_fd = after.first().map_or(0.0, |s| s.2);
    let last_fd = after.last().map_or(0.0, |s| s.2);
    let rss_ok = rss_max <= RSS_TARGET_MB;
    let flat = rss_max - rss_min <= FLAT_MB;
    let fds_ok = last_fd <= first_fd;
    println!(
        "{what}: after warm-up RSS {rss_min:.1}..{rss_max:.1} MB (<= {RSS_TARGET_MB} MB: {}; flat within {FLAT_MB} MB: {}), fds {fd_min}..{fd_max}, first {first_fd} last {last_fd} (no growth: {})",
        ok(rss_ok),
        ok(flat),
        ok(fds_ok)
    );
    rss_ok && flat && fds_ok
}

fn ok(b: bool) -> &'static str {
    if b {
        "met"
    } else {
        "MISSED"
    }
}

fn num(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("no {key} in {v}"))
}

fn plugin_soak(runs: usize) -> bool {
    let prom = support::prom::shared();
    let host = support::gohost::build();
    let spec = json!({
        "prometheus": {"address": "{{address}}", "timeout": "5s"},
        "query": HEALTHY.ratio_query("5m"),
        "minRequests": {"query": HEALTHY.total_query("5m"), "count": 300},
        "noData": "error",
    })
    .to_string();
    let mut cmd = host.command("rss", Path::new(crate::support::rollgate_bin()));
    let checkpoints = (runs / RUNS_PER_CHECKPOINT).max(1).to_string();
    cmd.args(["-runs", &runs.to_string(), "-callers", &CALLERS.to_string()])
        .args(["-checkpoints", &checkpoints, "-timeout", "3h"])
        .args(["-success", "result[0] < 0.01"])
        .args(["-spec", &spec, "-address", &prom.url]);
    let started = Instant::now();
    let run = support::gohost::run_command(cmd, Duration::from_secs(4 * 3600));
    let v = run.value().clone();
    println!(
        "plugin: {} Runs in {:.0} s ({:.0} Runs/s), phases {}, rpcErrors {}",
        num(&v, "runs"),
        started.elapsed().as_secs_f64(),
        num(&v, "callsPerSec"),
        v["phases"],
        v["rpcErrors"]
    );
    let all_successful = v["phases"]["Successful"].as_f64() == Some(runs as f64);
    println!("plugin: every Run Successful: {}", ok(all_successful));
    let samples: Vec<Sample> = v["checkpoints"]
        .as_array()
        .expect("checkpoints")
        .iter()
        .map(|p| {
            (
                format!("{} Runs", num(p, "runs")),
                num(p, "rssKb") / 1024.0,
                num(p, "fds"),
            )
        })
        .collect();
    judge("plugin", &samples) && all_successful && run.ok()
}

fn serve_soak(seconds: u64) -> bool {
    let prom = support::prom::shared();
    let (_templates, server) = serve_common::error_rate_server(&prom.url, &["--log-level", "warn"]);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let url = format!("{}/flagger/v1/check", server.url);
    let body = rollout_check("error-rate", "healthy");
    let pid = server.pid();
    let until = Instant::now() + Duration::from_secs(seconds);
    let (checks, failures, samples) = runtime.block_on(async {
        let client = serve_common::client();
        let callers: Vec<_> = (0..SERVE_CALLERS)
            .map(|_| {
                let (client, url, body) = (client.clone(), url.clone(), body.clone());
                tokio::spawn(async move {
                    let (mut n, mut bad) = (0u64, 0u64);
                    while Instant::now() < until {
                        let r = client
                            .post(&url)
                            .header("Content-Type", "application/json")
                            .body(body.clone())
                            .send()
                            .await;
                        n += 1;
                        if !matches!(r, Ok(ref r) if r.status().as_u16() == 200) {
                            bad += 1;
                        }
                    }
                    (n, bad)
                })
            })
            .collect();
        let mut samples = Vec::new();
        let began = Instant::now();
        while Instant::now() < until {
            let (rss, fds) = support::procfs::rss_mb_and_fds(pid);
            samples.push((
                format!("{:.0} s", began.elapsed().as_secs_f64()),
                rss,
                fds as f64,
            ));
            tokio::time::sleep(SERVE_SAMPLE.min(until.saturating_duration_since(Instant::now())))
                .await;
        }
        let (mut checks, mut failures) = (0, 0);
        for c in callers {
            let (n, bad) = c.await.expect("caller");
            checks += n;
            failures += bad;
        }
        let (rss, fds) = support::procfs::rss_mb_and_fds(pid);
        samples.push(("end".to_string(), rss, fds as f64));
        (checks, failures, samples)
    });
    println!(
        "serve: {checks} Flagger checks in {seconds} s ({:.0}/s) from {SERVE_CALLERS} callers, {failures} not 200",
        checks as f64 / seconds as f64
    );
    judge("serve", &samples) && failures == 0
}

fn main() {
    // `cargo bench` passes --bench; nothing else is accepted.
    let runs = env_usize("SOAK_RUNS", 1_000_000);
    let seconds = env_usize("SOAK_SERVE_SECONDS", 600) as u64;
    println!("soak: {runs} plugin Runs, then {seconds} s of serve load");
    let plugin = plugin_soak(runs);
    let serve = serve_soak(seconds);
    if !(plugin && serve) {
        eprintln!("soak: a target was missed (see above)");
        std::process::exit(1);
    }
}
