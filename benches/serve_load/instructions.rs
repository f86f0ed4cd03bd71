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
//! Beside the instructions, the code a check runs: the 64-byte lines of machine code with an
//! instruction executed in at least every other check of the steady state (from callgrind's
//! per-instruction counts). Between two checks Prometheus and the caller run on the same cores
//! and evict those lines, so each is fetched again from L2 or beyond: on shared cores a check's
//! time beyond its instructions grows with this figure, which an instruction count does not
//! show (docs/serve.md, "The shipped build is profile-guided").
//!
//! A last table counts the access log the same way: the throughput part's replay-backed check
//! with the log off and on.
//!
//! `cargo bench --bench serve_load instructions`; skipped when valgrind is not installed.
//! `SERVE_LOAD_CALLGRIND_DIR=DIR` keeps callgrind's files in DIR (for `callgrind_annotate`).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use super::serve_common::{flagger_payload, ServeProcess};
use super::{chosen_sizes, floor_queries, FloorProcess};

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
        "  series per query | instructions per check: {0} | floor proxy | {1} - floor | code run per check, KiB: {0} | floor proxy",
        names.join(" | "),
        names[0]
    );
    for size in chosen_sizes() {
        let run_file = |what: &str, checks: usize| {
            out_dir.join(format!("{what}-{}-{checks}.out", size.series()))
        };
        let floor = steady_state(size.service, |checks| {
            let file = run_file("floor", checks);
            let wrapper = callgrind(&file);
            let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
            let mut process = FloorProcess::start_under(&wrapper, &prom.url, &queries);
            drive(
                &format!("{}/flagger/v1/check", process.url),
                size.service,
                checks,
            );
            terminate(process.child.id());
            let _ = process.child.wait();
            Counts::read(&file)
        });
        let serve: Vec<PerCheck> = binaries
            .iter()
            .enumerate()
            .map(|(i, (_, bin))| {
                steady_state(size.service, |checks| {
                    let file = run_file(&format!("serve{i}"), checks);
                    let wrapper = callgrind(&file);
                    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
                    let server = ServeProcess::try_start_under(
                        &wrapper,
                        bin,
                        &super::sized_serve_args(templates.path(), &prom.url),
                        &[],
                    )
                    .unwrap_or_else(|(status, logs)| {
                        panic!("{bin} serve under callgrind did not start ({status:?}): {logs:?}")
                    });
                    drive(
                        &format!("{}/flagger/v1/check", server.url),
                        size.service,
                        checks,
                    );
                    stop(server, bin);
                    Counts::read(&file)
                })
            })
            .collect();
        let column =
            |f: fn(&PerCheck) -> String| serve.iter().map(f).collect::<Vec<String>>().join(" | ");
        println!(
            "  {:>16} | {} | {:>10.0} | {:>+10.0} | {} | {:>6.1}",
            size.series(),
            column(|c| format!("{:>10.0}", c.instructions)),
            floor.instructions,
            serve[0].instructions - floor.instructions,
            column(|c| format!("{:>6.1}", c.code_kib)),
            floor.code_kib
        );
        if let [this, baseline] = &serve[..] {
            println!(
                "  {:>16}   {} / {} = {:.3} instructions, {:.3} code",
                "",
                names[0],
                names[1],
                this.instructions / baseline.instructions,
                this.code_kib / baseline.code_kib
            );
        }
    }
    access_log(binaries, out_dir);
}

/// What the access log costs, counted: the throughput part's replay-backed checks (no
/// Prometheus round trip, so the log's share is at its largest) with the log off and on. The
/// throughput ratio of the same two moves by ±0.1 between runs on a shared machine; this does not.
fn access_log(binaries: &[(&str, String)], out_dir: &Path) {
    println!(
        "  access log, replay-backed checks | instructions per check: log off | log on | off / on (the throughput ratio on / off, were a check's time its instructions)"
    );
    let replay = super::replay_dir();
    for (i, (name, bin)) in binaries.iter().enumerate() {
        let [off, on] = [0, 1].map(|log| {
            let level = super::ACCESS_LOG_LEVELS[log].1;
            steady_state("healthy", |checks| {
                let file = out_dir.join(format!("serve{i}-log{log}-{checks}.out"));
                let wrapper = callgrind(&file);
                let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
                let args = super::replay_args(&replay, level);
                let server = ServeProcess::try_start_under(&wrapper, bin, &args, &[])
                    .unwrap_or_else(|(status, logs)| {
                        panic!("{bin} serve under callgrind did not start ({status:?}): {logs:?}")
                    });
                server.drop_logs();
                drive(
                    &format!("{}/flagger/v1/check", server.url),
                    "healthy",
                    checks,
                );
                stop(server, bin);
                Counts::read(&file)
            })
            .instructions
        });
        println!("  {name:>32} | {off:>10.0} | {on:>10.0} | {:.3}", off / on);
    }
}

/// Stops a serve run under callgrind: SIGTERM, so that valgrind writes its counts.
fn stop(mut server: ServeProcess, bin: &str) {
    server.signal("TERM");
    assert!(
        server.wait_exit(Duration::from_secs(60)).is_some(),
        "{bin} serve under callgrind did not stop on SIGTERM"
    );
}

/// A check's steady-state cost.
struct PerCheck {
    /// Instructions.
    instructions: f64,
    /// KiB of machine code run: 64-byte lines with an instruction executed in at least every
    /// other check.
    code_kib: f64,
}

/// The steady state per check: the counts of a run of `FEW` and of `MANY` checks (from
/// `measure`), their difference over `MANY - FEW`.
fn steady_state(service: &str, mut measure: impl FnMut(usize) -> Counts) -> PerCheck {
    let few = measure(FEW);
    let many = measure(MANY);
    assert!(
        many.total > few.total,
        "{service}: {MANY} checks counted {} instructions, {FEW} counted {}",
        many.total,
        few.total
    );
    let checks = (MANY - FEW) as u64;
    let lines: HashSet<u64> = many
        .by_address
        .iter()
        .filter(|(address, n)| {
            let before = few.by_address.get(address).copied().unwrap_or(0);
            n.saturating_sub(before) * 2 >= checks
        })
        .map(|(address, _)| address / 64)
        .collect();
    PerCheck {
        instructions: (many.total - few.total) as f64 / checks as f64,
        code_kib: (lines.len() * 64) as f64 / 1024.0,
    }
}

/// What callgrind counted in one run (`--dump-instr=yes` without compression): instructions in
/// all and per instruction address.
struct Counts {
    total: u64,
    by_address: HashMap<u64, u64>,
}

impl Counts {
    fn read(file: &Path) -> Counts {
        let text = std::fs::read_to_string(file)
            .unwrap_or_else(|e| panic!("no callgrind output at {}: {e}", file.display()));
        let mut by_address: HashMap<u64, u64> = HashMap::new();
        // Cost lines are `0xADDR [LINE] COUNT`, the position columns named by `positions:`;
        // the line after `calls=` is the call's inclusive cost, not the instruction's own.
        let mut positions = 1;
        let mut after_call = false;
        for line in text.lines() {
            if let Some(names) = line.strip_prefix("positions:") {
                positions = names.split_whitespace().count();
            } else if line.starts_with("calls=") {
                after_call = true;
            } else if let Some(hex) = line.strip_prefix("0x") {
                if std::mem::take(&mut after_call) {
                    continue;
                }
                let mut fields = hex.split_whitespace();
                let address = u64::from_str_radix(fields.next().unwrap(), 16).unwrap();
                let count: u64 = fields.nth(positions - 1).map_or(0, |n| n.parse().unwrap());
                *by_address.entry(address).or_default() += count;
            }
        }
        let total = text
            .lines()
            .find_map(|l| {
                l.strip_prefix("totals:")
                    .or_else(|| l.strip_prefix("summary:"))
            })
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no totals in {}", file.display()));
        Counts { total, by_address }
    }
}

/// valgrind running callgrind, writing its counts to `file`.
fn callgrind(file: &Path) -> Vec<String> {
    vec![
        "valgrind".into(),
        "--tool=callgrind".into(),
        "--quiet".into(),
        format!("--callgrind-out-file={}", file.display()),
        // Counts per instruction address, written out in full, for the code run per check.
        "--dump-instr=yes".into(),
        "--compress-pos=no".into(),
        "--compress-strings=no".into(),
    ]
}

/// `checks` Flagger checks of `service` in a row, each answered 200.
pub(super) fn drive(url: &str, service: &str, checks: usize) {
    let payload = flagger_payload(
        "Progressing",
        &[("template", "error-rate"), ("args.service", service)],
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
            assert_eq!(status, 200, "{service}: {body}");
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
