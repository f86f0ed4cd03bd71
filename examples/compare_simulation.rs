//! Prints the simulation tables of `docs/statistics.md`.
//!
//! `cargo run --release --example compare_simulation [-- --runs N] [--sizes] [--latency] [--levels]
//! [--histogram] [--ratio]`
//!
//! - Ratio form: 10,000 rollouts per scenario, ten checks each on cumulative counts (`--ratio`:
//!   only these two tables).
//! - Distribution form: healthy and shifted latency in a sliding window.
//! - Histogram form (`--histogram`: only this table): per-request latency from buckets.
//! - `--sizes` (only this table): events (or samples) per side needed for 80 % detection, by
//!   bisection on the simulated detection rate; ratio rows for one check and for ten checks
//!   on sliding and on cumulative windows.

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

#[path = "../tests/simulation/mod.rs"]
mod simulation;

use rollgate::stats::{look_alpha, Design, Direction, DistOptions, Look, RatioOptions};
use simulation::{
    histogram_scenarios, latency_scenarios, simulate, simulate_histogram, simulate_latency,
    standard_scenarios_with, wilson, LatencyScenario, Scenario, SimError, SimulationRow,
};

fn main() -> Result<(), SimError> {
    let args: Vec<String> = std::env::args().collect();
    let runs = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000usize);
    let seed = 20_240_601u64;
    if args.iter().any(|a| a == "--levels") {
        return print_levels();
    }
    if args.iter().any(|a| a == "--histogram") {
        return print_histogram(runs);
    }
    if args.iter().any(|a| a == "--sizes") {
        return sample_sizes(seed);
    }

    let latency_only = args.iter().any(|a| a == "--latency");
    for (design, label) in [
        (Design::Sliding, "windows: sliding (union bound)"),
        (Design::Cumulative, "windows: cumulative"),
    ] {
        println!("Ratio form, {label}: {runs} rollouts per scenario, 10 checks (1/min),");
        println!("cumulative counts, confidence 0.95, maxIncrease 0.2, margin 0.001, minRequests");
        println!("500, planned count 10; [Wilson 95 % interval of the failed share].\n");
        print_header("events/side by end");
        if latency_only {
            break;
        }
        for (i, scenario) in standard_scenarios_with(design).iter().enumerate() {
            let row = simulate(scenario, runs, seed + i as u64)?;
            print_row(&row);
        }
        println!();
    }
    if args.iter().any(|a| a == "--ratio") {
        return Ok(());
    }

    for (correct, label) in [
        (false, "autocorrelation: ignore"),
        (true, "autocorrelation: correct (the default)"),
    ] {
        println!("\nDistribution form, {label}: log-normal samples (log sd 0.5), 10 checks,");
        println!("direction increase, maxIncrease 0.1, confidence 0.95, minSamples 20 (layouts:");
        println!("tests/simulation/compare.rs).\n");
        print_header("samples/side in window");
        for (i, scenario) in latency_scenarios(correct).iter().enumerate() {
            let row = simulate_latency(scenario, runs, seed + 100 + i as u64)?;
            print_row(&row);
        }
    }

    Ok(())
}

fn print_header(by_end: &str) {
    println!(
        "| {:<34} | {:>22} | {:>8} | {:>10} | {:>12} | {:>12} |",
        "scenario", by_end, "failed", "successful", "inconclusive", "mean fail at"
    );
    println!(
        "|{:-<36}|{:->24}|{:->10}|{:->12}|{:->14}|{:->14}|",
        "", "", "", "", "", ""
    );
}

fn print_row(row: &SimulationRow) {
    let pct = |n: usize| format!("{:.2} %", 100.0 * n as f64 / row.runs.max(1) as f64);
    let by_end = if row.canary_by_end == row.stable_by_end {
        row.canary_by_end.to_string()
    } else {
        format!("{} vs {}", row.canary_by_end, row.stable_by_end)
    };
    let (lo, hi) = wilson(row.failed, row.runs);
    let failed = format!("{} [{:.2}, {:.2}]", pct(row.failed), 100.0 * lo, 100.0 * hi);
    println!(
        "| {:<34} | {:>22} | {:>8} | {:>10} | {:>12} | {:>12} |",
        row.scenario,
        by_end,
        failed,
        pct(row.successful_at_end),
        pct(row.inconclusive_at_end),
        row.mean_failing_check
            .map_or("-".to_string(), |c| format!("check {c:.1}")),
    );
}

/// The histogram form's table (`tests/simulation/histogram.rs`), with the seeds of
/// tests/stats_simulation.rs.
fn print_histogram(runs: usize) -> Result<(), SimError> {
    println!(
        "Histogram form: {runs} rollouts per scenario, Prometheus' default buckets, stable median"
    );
    println!("0.1 s (log sd 0.5), increase[5m], initialDelay 5m, 10 checks (1/min), rank test,");
    println!(
        "maxIncrease 0.1, confidence 0.95, minRequests 200, shared load drift (log sd 0.2/min),"
    );
    println!("per-side jitter 0.02; [Wilson 95 % interval of the failed share].\n");
    print_header("requests/side in window");
    for (i, scenario) in histogram_scenarios().iter().enumerate() {
        let row = simulate_histogram(scenario, runs, 20_261_201 + i as u64)?;
        print_row(&row);
    }
    Ok(())
}

/// Each check's level at N = 10, alpha = 0.05, for sliding and cumulative windows.
fn print_levels() -> Result<(), SimError> {
    println!("| check | sliding | cumulative |\n|---|---|---|");
    for k in 1..=10 {
        let look = Look::of(k, 10);
        let ub = look_alpha(0.05, look)?;
        let gs = look_alpha(0.05, look.with_design(Design::Cumulative))?;
        println!("| {k} | {ub:.5} | {gs:.5} |");
    }
    Ok(())
}

/// Smallest per-side count (on a ~4 % grid) whose detection rate reaches 80 %.
fn required<F>(mut detection: F) -> Result<u64, SimError>
where
    F: FnMut(u64) -> Result<f64, SimError>,
{
    let (mut lo, mut hi) = (10u64, 20u64);
    while detection(hi)? < 0.8 {
        lo = hi;
        hi *= 2;
        if hi > 100_000_000 {
            return Ok(u64::MAX);
        }
    }
    while hi as f64 > lo as f64 * 1.04 {
        let mid = ((lo as f64 * hi as f64).sqrt()) as u64;
        if detection(mid)? >= 0.8 {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(hi)
}

/// The sizes table's columns: one check, ten on sliding windows, ten on cumulative windows.
const SIZE_COLUMNS: [(u32, Design); 3] = [
    (1, Design::Sliding),
    (10, Design::Sliding),
    (10, Design::Cumulative),
];

fn sample_sizes(seed: u64) -> Result<(), SimError> {
    let runs = 2_000;
    println!(
        "\nEvents per side for 80 % detection ({runs} simulated rollouts per point, bisection"
    );
    println!("on a ~4 % grid), equal traffic, confidence 0.95:\n");
    println!(
        "| {:<26} | {:<30} | {:>14} | {:>22} | {:>22} |",
        "change", "tolerance", "single check", "10 sliding (by the end)", "10 cumulative"
    );
    println!(
        "|{:-<28}|{:-<32}|{:->16}|{:->24}|{:->24}|",
        "", "", "", "", ""
    );
    let tolerances = [
        ("none (0, 0)", 0.0, 0.0),
        ("maxIncrease 0.2", 0.2, 0.0),
        ("maxIncrease 0.2, margin 0.001", 0.2, 0.001),
    ];
    for (change, stable, canary) in [("1 % -> 2 %", 0.01, 0.02), ("0.1 % -> 0.2 %", 0.001, 0.002)] {
        for (label, r, m) in tolerances {
            let mut sizes = Vec::new();
            for (checks, design) in SIZE_COLUMNS {
                let n = required(|per_side| {
                    let per_check = per_side.div_ceil(u64::from(checks)).max(1);
                    let mut options = RatioOptions::new(r, m, 0.95);
                    options.look = options.look.with_design(design);
                    let scenario = Scenario {
                        name: String::new(),
                        stable_rate: stable,
                        canary_rate: canary,
                        stable_requests_per_check: per_check,
                        canary_requests_per_check: per_check,
                        checks,
                        plan_known: true,
                        options,
                    };
                    Ok(simulate(&scenario, runs, seed ^ per_side)?.failed_rate)
                })?;
                sizes.push(if n == u64::MAX {
                    "never".to_string()
                } else {
                    n.to_string()
                });
            }
            println!(
                "| {:<26} | {:<30} | {:>14} | {:>22} | {:>22} |",
                change, label, sizes[0], sizes[1], sizes[2]
            );
        }
    }
    for (label, log_sd) in [
        ("latency +20 %, log sd 0.5", 0.5),
        ("latency +20 %, log sd 1.0", 1.0),
    ] {
        let mut sizes = Vec::new();
        for (checks, design) in SIZE_COLUMNS {
            let n = required(|per_side| {
                let per_check = (per_side as usize).div_ceil(checks as usize).max(1);
                let mut opts = DistOptions::new(Direction::Increase, 0.1, 0.95);
                opts.look = opts.look.with_design(design);
                opts.min_samples = 1;
                opts.correct_autocorrelation = false;
                let scenario = LatencyScenario::independent(
                    "",
                    0.2,
                    0.24,
                    log_sd,
                    per_check,
                    usize::MAX,
                    checks,
                    opts,
                );
                Ok(simulate_latency(&scenario, runs / 4, seed ^ per_side)?.failed_rate)
            })?;
            sizes.push(n.to_string());
        }
        println!(
            "| {:<26} | {:<30} | {:>14} | {:>22} | {:>22} |",
            label, "maxIncrease 0.1", sizes[0], sizes[1], sizes[2]
        );
    }
    Ok(())
}
