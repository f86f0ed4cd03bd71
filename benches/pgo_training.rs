//! The training run of the shipped build's profile (`scripts/build-dist`): drives an
//! instrumented rollgate through the work it does in production, against the real Prometheus
//! and go-plugin hosts, so that profile-guided optimisation lays those paths out as hot and the
//! rest (errors, start-up, rare branches) out of their way.
//!
//! Every surface is trained, not only the one a benchmark watches: code a training run never
//! reaches is compiled as cold (for size), so a surface left out would be slower than in a
//! build without a profile. In order: `serve` (Flagger checks of a query and a compare
//! template, web-provider measurements, `/metrics`; the access log off, then on), the Argo
//! plugin over net/rpc and over gRPC (`grpchost load`, as the controller calls it), and the CLI
//! (`dry-run` of every shipped example, `backtest`). Each process is stopped the way production
//! stops it (SIGTERM, the host's shutdown, its own exit), because the profile is written at
//! exit; each step checks that its processes wrote one.
//!
//! `PGO_TRAINING_BIN=<instrumented rollgate> LLVM_PROFILE_FILE=<dir>/%p.profraw cargo bench
//! --bench pgo_training`; skipped without `PGO_TRAINING_BIN`.

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

#[path = "../tests/grpc_support/mod.rs"]
mod grpc_support;
#[path = "../tests/serve_common/mod.rs"]
mod serve_common;
#[path = "../tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_common::{
    compare_template, error_rate_template, path_str, rollout_check, template_dir, ServeProcess,
};
use support::gohost::run_command;
use support::scenarios::HEALTHY;

/// Flagger checks per serve process (one caller, as Flagger's scheduler sends them).
const CHECKS: usize = 2_000;
/// Web-provider measurements per serve process.
const MEASUREMENTS: usize = 500;
/// Runs of the plugin per transport.
const PLUGIN_CALLS: usize = 10_000;
/// How long a stopped process may take to exit (and write its profile).
const EXIT_LIMIT: Duration = Duration::from_secs(30);

fn main() {
    let Ok(bin) = std::env::var("PGO_TRAINING_BIN") else {
        println!("pgo_training: skipped (PGO_TRAINING_BIN unset; scripts/build-dist sets it)");
        return;
    };
    let profiles = profile_dir();
    let prom = support::prom::shared();
    step(&profiles, "serve, access log off", || {
        serve(&bin, &prom.url, "warn,rollgate::serve::access=warn");
    });
    step(&profiles, "serve, access log on", || {
        serve(&bin, &prom.url, "info");
    });
    for protocol in ["netrpc", "grpc"] {
        step(&profiles, &format!("plugin over {protocol}"), || {
            plugin(&bin, protocol, &prom.url);
        });
    }
    step(&profiles, "dry-run and backtest of the examples", || {
        cli(&bin)
    });
}

/// The directory `LLVM_PROFILE_FILE` names (where the instrumented processes write).
fn profile_dir() -> PathBuf {
    let pattern = std::env::var("LLVM_PROFILE_FILE")
        .expect("LLVM_PROFILE_FILE must name where the instrumented processes write");
    Path::new(&pattern)
        .parent()
        .expect("LLVM_PROFILE_FILE names a file in a directory")
        .to_path_buf()
}

/// Runs one part of the training; fails unless its processes wrote at least one new profile.
fn step(profiles: &Path, name: &str, work: impl FnOnce()) {
    let count = || std::fs::read_dir(profiles).map_or(0, |d| d.count());
    let (before, started) = (count(), Instant::now());
    work();
    let written = count() - before;
    assert!(
        written > 0,
        "{name}: no profile was written to {} (did a process not exit cleanly?)",
        profiles.display()
    );
    println!(
        "pgo_training: {name}: {written} profile(s) in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// `rollgate serve` with the error-rate and compare templates: Flagger checks, web-provider
/// measurements and `/metrics`, then SIGTERM.
fn serve(bin: &str, prometheus: &str, log_level: &str) {
    let dir = template_dir(&[
        (
            "error-rate.yaml",
            error_rate_template("error-rate", "inconclusive"),
        ),
        ("compare.yaml", compare_template()),
    ]);
    let mut server = ServeProcess::try_start_bin(
        bin,
        &[
            "--templates",
            path_str(dir.path()),
            "--prometheus",
            prometheus,
            "--log-level",
            log_level,
        ],
        &[],
    )
    .unwrap_or_else(|(status, logs)| panic!("serve did not start ({status:?}): {logs:?}"));
    server.drop_logs();
    let client = serve_common::client();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let post = |path: &str, body: String| {
            let url = format!("{}{path}", server.url);
            let client = &client;
            async move {
                let (status, text, _) = serve_common::post(client, &url, body, false).await;
                assert_eq!(status, 200, "{text}");
            }
        };
        for i in 0..CHECKS {
            // One compare check in ten: Flagger's webhooks name the template per canary.
            let template = if i % 10 == 9 { "compare" } else { "error-rate" };
            post(
                "/flagger/v1/check",
                rollout_check(template, HEALTHY.service),
            )
            .await;
        }
        for i in 0..MEASUREMENTS {
            let body = if i % 10 == 9 {
                json!({"template": "compare", "metric": "once"})
            } else {
                json!({"template": "error-rate", "args": {"service": HEALTHY.service}})
            };
            post("/argo/v1/measure", body.to_string()).await;
        }
        for _ in 0..20 {
            let resp = client
                .get(format!("{}/metrics", server.url))
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status().as_u16(), 200);
        }
    });
    server.signal("TERM");
    let status = server.wait_exit(EXIT_LIMIT);
    assert!(
        status.is_some_and(|s| s.success()),
        "serve did not exit cleanly on SIGTERM: {status:?}"
    );
}

/// The Argo plugin started and called by `grpchost load` over `protocol`: guard and query on
/// the healthy service, every call Successful.
fn plugin(bin: &str, protocol: &str, prometheus: &str) {
    let spec = json!({
        "prometheus": {"address": "{{address}}"},
        "query": HEALTHY.ratio_query("5m"),
        "minRequests": {"query": HEALTHY.total_query("5m"), "count": 300},
        "noData": "inconclusive",
    })
    .to_string();
    let mut cmd = Command::new(grpc_support::grpchost());
    cmd.args(["load", "-plugin", bin, "-descriptor"])
        .arg(grpc_support::descriptor_file())
        .args(["-protocol", protocol, "-concurrency", "16", "-warmup", "0"])
        .args(["-calls", &PLUGIN_CALLS.to_string(), "-spec", &spec])
        .args(["-address", prometheus, "-timeout", "200s"]);
    if protocol == "grpc" {
        cmd.args(["-env", "ROLLGATE_PLUGIN_PROTOCOL=grpc"]);
    }
    let run = run_command(cmd, Duration::from_secs(240));
    run.assert_ok();
    let v: &Value = run.value();
    assert_eq!(
        v["phases"]["PHASE_SUCCESSFUL"].as_f64(),
        Some(PLUGIN_CALLS as f64),
        "{v}"
    );
}

/// `dry-run` of every shipped example on its replay, and the documented `backtest`.
fn cli(bin: &str) {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let file = |name: &str| examples.join(name).to_str().unwrap().to_string();
    let mut runs: Vec<Vec<String>> = [
        ("error-rate", &["--arg", "service=bad"][..]),
        ("latency-p99", &[]),
        ("canary-vs-stable", &["--arg", "service=cmp-bad"]),
        ("fleet-gate", &[]),
    ]
    .iter()
    .map(|(name, args)| {
        let mut run = vec![
            "dry-run".into(),
            "-f".into(),
            file(&format!("{name}.yaml")),
            "--replay".into(),
            file(&format!("{name}.replay.json")),
        ];
        run.extend(args.iter().map(|a| a.to_string()));
        run
    })
    .collect();
    runs.push(
        [
            "backtest",
            "-f",
            &file("backtest.yaml"),
            "--replay",
            &file("backtest.replay.json"),
            "--from",
            "2026-11-29T19:00:00Z",
            "--to",
            "2026-11-29T23:00:00Z",
            "--arg",
            "service=bad",
        ]
        .map(String::from)
        .to_vec(),
    );
    for args in runs {
        let out = Command::new(bin).args(&args).output().unwrap();
        // 0, 1 and 2 are verdicts (Successful, Failed, Inconclusive); anything else is a fault.
        assert!(
            out.status.code().is_some_and(|c| c <= 2),
            "rollgate {args:?}: {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
