//! Mann-Whitney U + Hodges-Lehmann interval on 1,000,000 samples per side, against
//! `scipy.stats.mannwhitneyu` alone on the same data (timed inside Python, data passed through a
//! temporary file). Prints wall and CPU times (best of five runs each) and their ratios: the
//! machine may be shared, and CPU time is the steadier of the two there.
//!
//! `cargo bench --bench mann_whitney [-- N]` (N samples per side, default 1,000,000).

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

use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

// The library's seeded generator (crate-private there), for the same data on every run.
#[path = "../src/stats/rng.rs"]
#[allow(dead_code, unused_imports)]
mod rng;

use rng::SplitMix64;
use rollgate::stats::{
    compare_distributions, hodges_lehmann, mann_whitney_u, Alternative, Direction, DistOptions,
};

const PYTHON: &str = r#"
import sys, time
import numpy as np
from scipy import stats
n = int(sys.argv[2])
data = np.fromfile(sys.argv[1], dtype="<f8")
x, y = data[:n], data[n:]
best, best_cpu = float("inf"), float("inf")
for _ in range(5):
    t, c = time.perf_counter(), time.process_time()
    res = stats.mannwhitneyu(x, y, alternative="greater")
    best = min(best, time.perf_counter() - t)
    best_cpu = min(best_cpu, time.process_time() - c)
print(f"{best:.6f} {best_cpu:.6f} {float(res.statistic)!r} {float(res.pvalue)!r}")
"#;

/// Best wall time, best process CPU time (all threads) and the last result of `runs` runs.
fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, f64, T) {
    let mut best = Duration::MAX;
    let mut best_cpu = f64::INFINITY;
    let mut last = None;
    for _ in 0..runs {
        let (start, cpu) = (Instant::now(), process_cpu_seconds());
        let out = f();
        best = best.min(start.elapsed());
        best_cpu = best_cpu.min(process_cpu_seconds() - cpu);
        last = Some(out);
    }
    (best, best_cpu, last.expect("runs > 0"))
}

/// CPU time of this process (user + system, all threads), from /proc; NaN elsewhere.
fn process_cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return f64::NAN;
    };
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    (ticks(11) + ticks(12)) / 100.0
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let mut rng = SplitMix64::new(7);
    // Log-normal latencies, the canary 1 % slower.
    let mut draw = |median: f64, resolution: Option<f64>| -> Vec<f64> {
        (0..n)
            .map(|_| {
                let v = median * (0.6 * rng.normal()).exp();
                resolution.map_or(v, |r| (v / r).round() * r)
            })
            .collect()
    };
    let continuous = (draw(0.202, None), draw(0.200, None));
    // Rounded to 0.1 ms, so that ties occur as they do for histogram-derived values.
    let tied = (draw(0.202, Some(1e-4)), draw(0.200, Some(1e-4)));
    println!("samples per side: {n}");
    run("continuous values", &continuous.0, &continuous.1);
    run("values rounded to 1e-4 (ties)", &tied.0, &tied.1);
}

fn run(label: &str, canary: &[f64], stable: &[f64]) {
    let n = canary.len();
    println!("\n== {label}");
    let opts = DistOptions::new(Direction::Increase, 0.1, 0.95);
    let (t_compare, cpu_compare, outcome) =
        best_of(5, || compare_distributions(canary, stable, &opts));
    let outcome = outcome.expect("valid options");
    let (t_mw, cpu_mw, mw) = best_of(5, || mann_whitney_u(canary, stable, Alternative::Greater));
    let mw = mw.expect("valid samples");
    let (t_hl, cpu_hl, hl) = best_of(5, || hodges_lehmann(canary, stable, 0.95));
    let hl = hl.expect("valid samples");

    println!(
        "rollgate compare_distributions (NaN filter, sort, U, p, HL estimate + interval, means): \
         {:.3} s wall, {cpu_compare:.2} s CPU",
        t_compare.as_secs_f64()
    );
    println!(
        "rollgate mann_whitney_u alone:  {:.3} s wall, {cpu_mw:.2} s CPU (U = {}, p = {:e})",
        t_mw.as_secs_f64(),
        mw.u,
        mw.p_value
    );
    println!(
        "rollgate hodges_lehmann alone:  {:.3} s wall, {cpu_hl:.2} s CPU (estimate {:e}, 95 % [{:e}, {:e}])",
        t_hl.as_secs_f64(),
        hl.estimate,
        hl.lower,
        hl.upper
    );
    if let Some(shift) = outcome.shift {
        println!(
            "  verdict {:?}, shift {:e} in [{:e}, {:e}] at {:.4} %",
            outcome.verdict,
            shift.estimate,
            shift.lower,
            shift.upper,
            shift.level * 100.0
        );
    }

    let path = std::env::temp_dir().join(format!("rollgate-mw-bench-{}.f64", std::process::id()));
    let written = std::fs::File::create(&path).and_then(|mut f| {
        let mut bytes = Vec::with_capacity(16 * n);
        for v in canary.iter().chain(stable) {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        f.write_all(&bytes)
    });
    if let Err(e) = written {
        println!("scipy: skipped (cannot write {}: {e})", path.display());
        return;
    }
    let output = Command::new("python3")
        .arg("-c")
        .arg(PYTHON)
        .arg(&path)
        .arg(n.to_string())
        .output();
    let _ = std::fs::remove_file(&path);
    let output = match output {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            println!(
                "scipy: skipped ({})",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            return;
        }
        Err(e) => {
            println!("scipy: skipped (python3: {e})");
            return;
        }
    };
    let text = String::from_utf8_lossy(&output.stdout);
    let fields: Vec<&str> = text.split_whitespace().collect();
    let number = |i: usize| fields.get(i).and_then(|s| s.parse::<f64>().ok());
    let (Some(secs), Some(cpu)) = (number(0), number(1)) else {
        println!("scipy: unexpected output {text:?}");
        return;
    };
    println!(
        "scipy.stats.mannwhitneyu alone: {secs:.3} s wall, {cpu:.2} s CPU (U = {}, p = {})",
        fields.get(2).unwrap_or(&"?"),
        fields.get(3).unwrap_or(&"?")
    );
    println!(
        "ratio scipy / rollgate, wall: {:.2}x for compare_distributions (U + p + HL interval), \
         {:.2}x for U + p alone",
        secs / t_compare.as_secs_f64(),
        secs / t_mw.as_secs_f64()
    );
    println!(
        "ratio scipy / rollgate, CPU:  {:.2}x for compare_distributions, {:.2}x for U + p alone",
        cpu / cpu_compare,
        cpu / cpu_mw
    );
}
