//! A check's cost counted, not timed: instructions per check of `rollgate serve` and of the
//! floor proxy under valgrind's callgrind, against the real Prometheus. Latency medians on two
//! shared cores move by tens of microseconds from run to run, more than a change to serve's
//! own work; an instruction count is the same on every run of the same binaries and inputs.
//!
//! Each process is run twice, for `FEW` and for `MANY` checks in a row; the difference of the
//! two totals over `MANY - FEW` is the steady state per check (start-up, template loading and
//! the first connections cancel out). User-space instructions only: the kernel's share of a
//! check (loopback TCP, epoll) is the same for any service sending the same two queries.
//!
//! `cargo bench --bench serve_load instructions`; skipped when valgrind is not installed.
//! `SERVE_LOAD_CALLGRIND_DIR=DIR` keeps callgrind's files in DIR (for `callgrind_annotate`).

use std::path::Path;
use std::time::Duration;

use super::serve_common::{flagger_payload, ServeProcess};
use super::{chosen_sizes, floor_queries, FloorProcess, Sized};

/// Checks in the shorter run.
pub(super) const FEW: usize = 50;
/// Checks in the longer run.
pub(super) const MANY: usize = 300;

/// Prints instructions per check of each of `binaries` and of the floor proxy, and, with a
/// baseline, this build's count over the baseline's.
pub fn run(binaries: &[(&str, String)]) {
    let valgrind = std::process::Command::new("valgrind")
        .arg("--version")
        .output();
    if !valgrind.is_ok_and(|o| o.status.success()) {
        println!("  skipped: valgrind is not installed (Debian package valgrind)");
        return;
    }
    let (prom, templates) = super::sized_prometheus();
    // `SERVE_LOAD_CALLGRIND_DIR=DIR` keeps the counts there, for `callgrind_annotate`.
    let out = tempfile::tempdir().unwrap();
    let kept = std::env::var_os("SERVE_LOAD_CALLGRIND_DIR").map(std::path::PathBuf::from);
    let out_dir = kept.as_deref().unwrap_or(out.path());
    let queries = floor_queries();
    let names: Vec<&str> = binaries.iter().map(|(name, _)| *name).collect();
    println!(
        "  series per query | instructions per check: {} | floor proxy | {} - floor",
        names.join(" | "),
        names[0]
    );
    for size in chosen_sizes() {
        let run_file = |what: &str, checks: usize| {
            out_dir.join(format!("{what}-{}-{checks}.out", size.series()))
        };
        let floor = per_check(size, |checks| {
            let file = run_file("floor", checks);
            let wrapper = callgrind(&file);
            let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
            let mut process = FloorProcess::start_under(&wrapper, &prom.url, &queries);
            drive(&format!("{}/flagger/v1/check", process.url), size, checks);
            terminate(process.child.id());
            let _ = process.child.wait();
            total(&file)
        });
        let serve: Vec<f64> = binaries
            .iter()
            .enumerate()
            .map(|(i, (_, bin))| {
                per_check(size, |checks| {
                    let file = run_file(&format!("serve{i}"), checks);
                    let wrapper = callgrind(&file);
                    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
                    let mut server = ServeProcess::try_start_under(
                        &wrapper,
                        bin,
                        &super::sized_serve_args(templates.path(), &prom.url),
                        &[],
                    )
                    .unwrap_or_else(|(status, logs)| {
                        panic!("{bin} serve under callgrind did not start ({status:?}): {logs:?}")
                    });
                    drive(&format!("{}/flagger/v1/check", server.url), size, checks);
                    server.signal("TERM");
                    assert!(
                        server.wait_exit(Duration::from_secs(60)).is_some(),
                        "{bin} serve under callgrind did not stop on SIGTERM"
                    );
                    total(&file)
                })
            })
            .collect();
        let counts: Vec<String> = serve.iter().map(|n| format!("{n:>10.0}")).collect();
        println!(
            "  {:>16} | {} | {floor:>10.0} | {:>+10.0}",
            size.series(),
            counts.join(" | "),
            serve[0] - floor
        );
        if let [this, baseline] = serve[..] {
            println!(
                "  {:>16}   {} / {} = {:.3}",
                "",
                names[0],
                names[1],
                this / baseline
            );
        }
    }
}

/// The steady-state instructions per check: the totals of a run of `FEW` and of `MANY` checks
/// (from `measure`), their difference over `MANY - FEW`.
fn per_check(size: &Sized, mut measure: impl FnMut(usize) -> u64) -> f64 {
    let few = measure(FEW);
    let many = measure(MANY);
    assert!(
        many > few,
        "{}: {MANY} checks counted {many} instructions, {FEW} counted {few}",
        size.service
    );
    (many - few) as f64 / (MANY - FEW) as f64
}

/// valgrind running callgrind, writing its counts to `file`.
fn callgrind(file: &Path) -> Vec<String> {
    vec![
        "valgrind".into(),
        "--tool=callgrind".into(),
        "--quiet".into(),
        format!("--callgrind-out-file={}", file.display()),
    ]
}

/// `checks` Flagger checks of `size`'s service in a row, each answered 200.
pub(super) fn drive(url: &str, size: &Sized, checks: usize) {
    let payload = flagger_payload(
        "Progressing",
        &[("template", "error-rate"), ("args.service", size.service)],
    );
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        for _ in 0..checks {
            let resp = client
                .post(url)
                .header("Content-Type", "application/json")
                .body(payload.clone())
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            let body = resp.text().await.unwrap();
            assert_eq!(status, 200, "{}: {body}", size.service);
        }
    });
}

/// Sends SIGTERM to `pid` (a child of this process): valgrind writes its counts as the process
/// ends, which SIGKILL would prevent.
fn terminate(pid: u32) {
    let status = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -TERM {pid} failed");
}

/// The instructions callgrind counted, from its `totals:` (or `summary:`) line.
fn total(file: &Path) -> u64 {
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("no callgrind output at {}: {e}", file.display()));
    text.lines()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
        })
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no totals in {}", file.display()))
}
