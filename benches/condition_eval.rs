//! Throughput of a compiled condition against the same check written as a Rust closure.
//!
//! Run with `cargo bench --bench condition_eval`. One thread, a bounded number of
//! iterations (and at most a few seconds per measurement).

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

use std::hint::black_box;
use std::time::{Duration, Instant};

use rollgate::condition::{Condition, Value};

const SOURCE: &str = "result[0] < 0.01 && len(result) > 0";
const ITERATIONS: u64 = 5_000_000;
const TIME_LIMIT: Duration = Duration::from_secs(10);
const TARGET_PER_SECOND: f64 = 1_000_000.0;

/// Runs `check` up to ITERATIONS times (or until TIME_LIMIT) and returns (runs, elapsed).
fn measure(mut check: impl FnMut() -> bool) -> (u64, Duration) {
    let start = Instant::now();
    let mut runs = 0u64;
    let mut trues = 0u64;
    while runs < ITERATIONS && start.elapsed() < TIME_LIMIT {
        for _ in 0..10_000 {
            trues += u64::from(check());
        }
        runs += 10_000;
    }
    let elapsed = start.elapsed();
    assert_eq!(trues, runs, "every evaluation should be true");
    (runs, elapsed)
}

/// The same check as the condition, written by hand.
fn native(result: &Value) -> bool {
    match result {
        Value::Array(items) => {
            let first_small = match items.first() {
                Some(Value::Float(x)) => *x < 0.01,
                Some(Value::Int(i)) => (*i as f64) < 0.01,
                _ => false,
            };
            first_small && !items.is_empty()
        }
        _ => false,
    }
}

fn main() {
    let condition = match Condition::compile(SOURCE) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cannot compile `{SOURCE}`: {e}");
            std::process::exit(1);
        }
    };
    let result = Value::from(vec![0.005]);
    let evaluate = || matches!(condition.evaluate(black_box(&result)), Ok(true));

    // Warm up caches and the branch predictor before measuring.
    let _ = measure(evaluate);
    let (runs, elapsed) = measure(evaluate);
    let per_second = runs as f64 / elapsed.as_secs_f64();

    let (native_runs, native_elapsed) = measure(|| native(black_box(&result)));
    let native_per_second = native_runs as f64 / native_elapsed.as_secs_f64();

    println!("condition: `{SOURCE}` on [0.005], one thread");
    println!(
        "compiled condition: {runs} evaluations in {:.3} s = {per_second:.0} evaluations/s ({:.1} ns each)",
        elapsed.as_secs_f64(),
        1e9 / per_second
    );
    println!(
        "native closure:     {native_runs} evaluations in {:.3} s = {native_per_second:.0} evaluations/s ({:.1} ns each)",
        native_elapsed.as_secs_f64(),
        1e9 / native_per_second
    );
    println!(
        "ratio: the compiled condition is {:.1}x slower than native Rust",
        native_per_second / per_second
    );
    let verdict = if per_second >= TARGET_PER_SECOND {
        "meets"
    } else {
        "MISSES"
    };
    println!("{verdict} the target of {TARGET_PER_SECOND:.0} evaluations/s");
}
