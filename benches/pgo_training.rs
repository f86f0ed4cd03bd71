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
//! exit.
//!
//! The same run trains both instrumentations of the build: LLVM's (`-Cprofile-generate`), then
//! BOLT's of the optimised binary. Each rollgate process is started in a working directory of
//! its own under `PGO_TRAINING_DIR`, and names its profile relative to it
//! (`LLVM_PROFILE_FILE=rollgate-%p.profraw`; BOLT's `-instrumentation-file=rollgate.fdata`),
//! because BOLT's runtime cannot add the process id to the name of a static binary's profile
//! and would have every process overwrite one file. Each step checks that every process
//! it started wrote a profile there.
//!
//! `PGO_TRAINING_BIN=<instrumented rollgate> PGO_TRAINING_DIR=<dir> cargo bench --bench
//! pgo_training`; skipped without `PGO_TRAINING_BIN`.

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

use std::os::unix::fs::PermissionsExt as _;
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
    let mut training = Training::new();
    let prom = support::prom::shared();
    training.step("serve, access log off", |t| {
        serve(t, &bin, &prom.url, "warn,rollgate::serve::access=warn");
    });
    training.step("serve, access log on", |t| {
        serve(t, &bin, &prom.url, "info")
    });
    for protocol in ["netrpc", "grpc"] {
        training.step(&format!("plugin over {protocol}"), |t| {
            plugin(t, &bin, protocol, &prom.url);
        });
    }
    training.step("dry-run and backtest of the examples", |t| cli(t, &bin));
}

/// Where the training's processes run: one working directory each, under `PGO_TRAINING_DIR`.
struct Training {
    dir: PathBuf,
    /// The working directories made so far.
    processes: Vec<PathBuf>,
    /// `PGO_TRAINING_BOLT` is set: the binary is BOLT's instrumentation, whose profile writer
    /// outlives each process (see `plugin_command`).
    bolt: bool,
}

impl Training {
    fn new() -> Training {
        let dir = PathBuf::from(
            std::env::var("PGO_TRAINING_DIR")
                .expect("PGO_TRAINING_DIR must name where the processes write their profiles"),
        );
        std::fs::create_dir_all(&dir).unwrap();
        Training {
            dir,
            processes: Vec::new(),
            bolt: std::env::var_os("PGO_TRAINING_BOLT").is_some(),
        }
    }

    /// What the go-plugin host is to start as the plugin. BOLT's profile writer is a fork of
    /// the process, so it holds the plugin's stdout and stderr until the plugin has been
    /// reaped, and go-plugin reaps only once both are closed (seen: the host hung with the
    /// plugin a zombie). A BOLT-instrumented plugin is therefore started behind a shell that
    /// relays its output through `cat` and reaps it: the writer sees its process gone, writes
    /// and exits, and only then do the host's pipes close.
    fn plugin_command(&self, bin: &str) -> String {
        if !self.bolt {
            return bin.to_string();
        }
        assert!(!bin.contains('\''), "{bin}: a path with a quote");
        let relay = self.dir.join("relay-plugin");
        std::fs::write(
            &relay,
            format!("#!/bin/bash\n'{bin}' \"$@\" > >(exec cat) 2> >(exec cat >&2)\n"),
        )
        .unwrap();
        std::fs::set_permissions(&relay, std::fs::Permissions::from_mode(0o755)).unwrap();
        relay.to_str().unwrap().to_string()
    }

    /// Makes a fresh working directory the current one, so that the next process started
    /// (directly or by a host) inherits it. The harness's own paths are all absolute.
    fn next_process(&mut self) {
        let dir = self.dir.join(self.processes.len().to_string());
        std::fs::create_dir_all(&dir).unwrap();
        std::env::set_current_dir(&dir).unwrap();
        self.processes.push(dir);
    }

    /// Runs one part of the training; fails unless every process it started wrote a profile
    /// within `EXIT_LIMIT` of the part's end (BOLT's runtime writes up to a second after its
    /// process exits).
    fn step(&mut self, name: &str, work: impl FnOnce(&mut Training)) {
        let (first, started) = (self.processes.len(), Instant::now());
        work(self);
        let mut silent: Vec<&PathBuf> = self.processes[first..].iter().collect();
        let deadline = Instant::now() + EXIT_LIMIT;
        while !silent.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
            silent.retain(|dir| !wrote_profile(dir));
        }
        assert!(
            silent.is_empty(),
            "{name}: no profile was written in {silent:?} (did a process not exit cleanly?)"
        );
        println!(
            "pgo_training: {name}: {} process(es) in {:.1} s",
            self.processes.len() - first,
            started.elapsed().as_secs_f64()
        );
    }
}

/// Whether a process wrote its profile in `dir` (both instrumentations name it `rollgate…`).
fn wrote_profile(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .filter_map(Result::ok)
            .any(|e| e.file_name().to_string_lossy().starts_with("rollgate"))
    })
}

/// `rollgate serve` with the error-rate and compare templates: Flagger checks, web-provider
/// measurements and `/metrics`, then SIGTERM.
fn serve(training: &mut Training, bin: &str, prometheus: &str, log_level: &str) {
    let dir = template_dir(&[
        (
            "error-rate.yaml",
            error_rate_template("error-rate", "inconclusive"),
        ),
        ("compare.yaml", compare_template()),
    ]);
    training.next_process();
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
fn plugin(training: &mut Training, bin: &str, protocol: &str, prometheus: &str) {
    let spec = json!({
        "prometheus": {"address": "{{address}}"},
        "query": HEALTHY.ratio_query("5m"),
        "minRequests": {"query": HEALTHY.total_query("5m"), "count": 300},
        "noData": "inconclusive",
    })
    .to_string();
    // The host starts one plugin process, in the host's working directory.
    training.next_process();
    let plugin = training.plugin_command(bin);
    let mut cmd = Command::new(grpc_support::grpchost());
    cmd.args(["load", "-plugin", &plugin, "-descriptor"])
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
fn cli(training: &mut Training, bin: &str) {
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
        training.next_process();
        // Output to files, not pipes: a pipe read to its end before the process is reaped
        // would wait for BOLT's profile writer, which waits for the reaping (see
        // `Training::plugin_command`).
        let output = |name: &str| std::fs::File::create(name).unwrap();
        let status = Command::new(bin)
            .args(&args)
            .stdout(output("stdout"))
            .stderr(output("stderr"))
            .status()
            .unwrap();
        // 0, 1 and 2 are verdicts (Successful, Failed, Inconclusive); anything else is a fault.
        assert!(
            status.code().is_some_and(|c| c <= 2),
            "rollgate {args:?}: {status:?}\n{}",
            std::fs::read_to_string("stderr").unwrap_or_default()
        );
    }
}
