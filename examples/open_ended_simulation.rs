//! Prints the open-ended table of `docs/statistics.md`: runs without `count`, judged by the
//! e-detector over per-interval counts.
//!
//! `cargo run --release --example open_ended_simulation [-- --runs N]` (default 1,000 runs per
//! scenario; each healthy run is 10,000 checks). `-- --histogram` prints only the histogram
//! form's table (`tests/simulation/open_ended_histogram.rs`), `-- --ratio` only the ratio form's.

#![allow(clippy::unwrap_used, clippy::cast_precision_loss)]

#[path = "../tests/simulation/mod.rs"]
mod simulation;

use simulation::open_ended_histogram as histogram_sim;
use simulation::{open_ended_scenarios, simulate_open_ended, wilson, OpenEndedRow, SimError};

fn share(k: usize, runs: usize) -> String {
    let (lo, hi) = wilson(k, runs);
    format!(
        "{:.2} % [{:.2}, {:.2}]",
        100.0 * k as f64 / runs as f64,
        100.0 * lo,
        100.0 * hi
    )
}

/// The histogram form's open-ended table.
fn histogram_table(runs: usize) {
    println!(
        "Open-ended histogram form (no count), e-detector on slow-request counts; confidence 0.95,"
    );
    println!("maxIncrease 0.1, 100 vs 900 requests a minute, log-normal latency (median 0.1 s, log sd 0.5)");
    println!("times AR(1) load factors (shared sd 0.2, own 0.02, correlation 0.8 a minute); {runs} runs per row;");
    println!("[Wilson 95 % interval].\n");
    println!("| scenario | false failures | failed within 15 / 30 / 60 checks of the onset | median delay |");
    println!("|---|---|---|---|");
    for (i, s) in histogram_sim::scenarios().iter().enumerate() {
        let started = std::time::Instant::now();
        let row = histogram_sim::simulate(s, runs, 20_261_205 + i as u64);
        print_row(&row, s.onset.is_some(), started);
    }
}

/// One table row: false failures, detection within 15 / 30 / 60 checks of the onset (when the
/// scenario has one) and the median delay; the time it took on stderr.
fn print_row(row: &OpenEndedRow, has_onset: bool, started: std::time::Instant) {
    let share = |k: usize| share(k, row.runs);
    let detection = if has_onset {
        format!(
            "{} / {} / {}",
            share(row.within(15)),
            share(row.within(30)),
            share(row.within(60))
        )
    } else {
        "-".into()
    };
    let median = row
        .median_delay()
        .map_or_else(|| "-".into(), |d| d.to_string());
    println!(
        "| {} | {} | {detection} | {median} |",
        row.scenario,
        share(row.failed_early)
    );
    eprintln!(
        "  ({} in {:.1} s)",
        row.scenario,
        started.elapsed().as_secs_f64()
    );
}

fn main() -> Result<(), SimError> {
    let args: Vec<String> = std::env::args().collect();
    let runs = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000usize);
    if args.iter().any(|a| a == "--histogram") {
        histogram_table(runs);
        return Ok(());
    }
    println!("Open-ended ratio form (no count), e-detector; confidence 0.95, maxIncrease 0.2,");
    println!("margin 0.001, 2,000 requests per side per 1-minute interval; {runs} runs per row;");
    println!("[Wilson 95 % interval].\n");
    println!("| scenario | false failures | failed within 15 / 30 / 60 checks of the onset | median delay |");
    println!("|---|---|---|---|");
    for (i, s) in open_ended_scenarios().iter().enumerate() {
        let started = std::time::Instant::now();
        let row = simulate_open_ended(s, runs, 20_240_601 + i as u64)?;
        print_row(&row, s.onset.is_some(), started);
    }
    if !args.iter().any(|a| a == "--ratio") {
        println!();
        histogram_table(runs);
    }
    Ok(())
}
