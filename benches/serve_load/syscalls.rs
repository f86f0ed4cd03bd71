//! A check's system calls counted by strace, for `rollgate serve` and the floor proxy against
//! the real Prometheus. An instruction count (`instructions.rs`) does not see what a check
//! makes other threads do: a `write` to tokio's eventfd or a `futex` wakes a parked thread,
//! which costs a context switch and, on two cores, the other request's time. Those show up
//! here, and the floor proxy says what any service sending the same two queries needs.
//!
//! strace attaches to a running process (`-p`, all its threads) for `FEW` and then for `MANY`
//! checks; the difference over `MANY - FEW` is per check. Counts, so the same on every run up
//! to the scheduler's choices (a few tenths of a call).
//!
//! `cargo bench --bench serve_load syscalls`; skipped when strace is not installed.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::instructions::{drive, FEW, MANY};
use super::serve_common::ServeProcess;
use super::{chosen_sizes, floor_queries, FloorProcess, Sized};

/// The calls printed one by one (the rest are in the total).
const SHOWN: [&str; 3] = ["futex", "write", "epoll_wait"];

/// Prints system calls per check of each of `binaries` and of the floor proxy.
pub fn run(binaries: &[(&str, String)]) {
    let strace = Command::new("strace").arg("-V").output();
    if !strace.is_ok_and(|o| o.status.success()) {
        println!("  skipped: strace is not installed (Debian package strace)");
        return;
    }
    let (prom, templates) = super::sized_prometheus();
    let floor = FloorProcess::start(&prom.url, &floor_queries());
    let servers: Vec<(&str, ServeProcess)> = binaries
        .iter()
        .map(|(name, bin)| {
            let server = super::start(bin, &super::sized_serve_args(templates.path(), &prom.url));
            (*name, server)
        })
        .collect();
    println!(
        "  series per query | process | system calls per check: {} | total",
        SHOWN.join(" | ")
    );
    for size in chosen_sizes() {
        let mut rows = vec![("floor proxy", per_check(floor.child.id(), &floor.url, size))];
        for (name, server) in &servers {
            rows.push((name, per_check(server.pid(), &server.url, size)));
        }
        for (name, calls) in rows {
            let shown: Vec<String> = SHOWN
                .iter()
                .map(|call| format!("{:>6.2}", calls.get(*call).copied().unwrap_or(0.0)))
                .collect();
            println!(
                "  {:>16} | {name:>11} | {} | {:>6.2}",
                size.series(),
                shown.join(" | "),
                calls.get("total").copied().unwrap_or(0.0)
            );
        }
    }
}

/// System calls per check of process `pid` answering `url`, by name, and their `total`.
fn per_check(pid: u32, url: &str, size: &Sized) -> BTreeMap<String, f64> {
    let check_url = format!("{url}/flagger/v1/check");
    let few = counted(pid, || drive(&check_url, size.service, FEW));
    let many = counted(pid, || drive(&check_url, size.service, MANY));
    many.iter()
        .map(|(call, n)| {
            let before = few.get(call).copied().unwrap_or(0);
            let per = n.saturating_sub(before) as f64 / (MANY - FEW) as f64;
            (call.clone(), per)
        })
        .collect()
}

/// The calls of every thread of `pid` while `work` runs, as strace's summary counts them.
fn counted(pid: u32, work: impl FnOnce()) -> BTreeMap<String, u64> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("strace.txt");
    let mut strace = Command::new("strace")
        .args(["-f", "-c", "-q", "-o"])
        .arg(&file)
        .args(["-p", &pid.to_string()])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_traced(pid);
    work();
    // SIGINT makes strace detach and write its summary.
    let status = Command::new("kill")
        .args(["-INT", &strace.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -INT strace failed");
    let _ = strace.wait();
    summary(&file)
}

/// Waits until every thread of `pid` has a tracer (at most 10 s).
fn wait_traced(pid: u32) {
    let started = Instant::now();
    loop {
        let traced = std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .filter_map(Result::ok)
            .all(|task| {
                std::fs::read_to_string(task.path().join("status")).is_ok_and(|status| {
                    status
                        .lines()
                        .find_map(|l| l.strip_prefix("TracerPid:"))
                        .is_some_and(|t| t.trim() != "0")
                })
            });
        if traced {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "strace did not attach to {pid}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The `calls` column of strace's `-c` table, by system call name, and its `total` row.
fn summary(file: &Path) -> BTreeMap<String, u64> {
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("no strace summary at {}: {e}", file.display()));
    // % time, seconds, usecs/call, calls, [errors,] name.
    let counts: BTreeMap<String, u64> = text
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let name = fields.last()?;
            let calls = fields.get(3)?.parse().ok()?;
            fields.first()?.parse::<f64>().ok()?;
            Some((name.to_string(), calls))
        })
        .collect();
    assert!(
        counts.contains_key("total"),
        "no total in {}: {text}",
        file.display()
    );
    counts
}
