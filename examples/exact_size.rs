//! The exact size of one ratio-form check: the probability that a canary exactly at the
//! tolerance boundary (`p_c = t(p_s)`, the least favourable healthy canary) is called Worse,
//! summed over every outcome of both binomial counts. Prints the worst size / alpha over a grid
//! of stable rates, for several tolerances, traffic splits and per-check levels.
//!
//! `cargo run --release --example exact_size` (about half a minute).

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

use rollgate::stats::{ratio_p_value, RatioInput, StatsError};

/// Binomial probabilities of 0..=n (log-space recurrence; fine for these sizes).
fn binomial_pmf(n: u64, p: f64) -> Vec<f64> {
    let mut out = vec![0.0; n as usize + 1];
    if p <= 0.0 {
        out[0] = 1.0;
        return out;
    }
    if p >= 1.0 {
        out[n as usize] = 1.0;
        return out;
    }
    let (lp, lq) = (p.ln(), (1.0 - p).ln());
    let mut ln_choose = 0.0f64;
    for k in 0..=n {
        if k > 0 {
            ln_choose += ((n - k + 1) as f64).ln() - (k as f64).ln();
        }
        out[k as usize] = (ln_choose + k as f64 * lp + (n - k) as f64 * lq).exp();
    }
    out
}

fn main() -> Result<(), StatsError> {
    let tolerances: [(f64, f64, &[f64]); 4] = [
        (0.0, 0.0, &[0.001, 0.01, 0.05, 0.2, 0.5]),
        (0.2, 0.0, &[0.001, 0.01, 0.05, 0.2, 0.5]),
        (0.2, 0.001, &[0.0005, 0.002, 0.004, 0.01, 0.05]),
        (0.0, 0.01, &[0.001, 0.01, 0.05, 0.1]),
    ];
    let sizes = [
        (20u64, 20u64),
        (100, 100),
        (1000, 1000),
        (1000, 19000),
        (19000, 1000),
        (950, 50),
    ];
    let alphas = [0.05, 0.0095, 0.001];
    println!("| maxIncrease | margin | canary/stable events | size/alpha at 0.05 | at 0.0095 | at 0.001 |");
    println!("|---|---|---|---|---|---|");
    for (r, m, rates) in tolerances {
        for (nc, ns) in sizes {
            let mut worst = [0.0f64; 3];
            for &ps in rates {
                let pc = ((1.0 + r) * ps).max(ps + m).min(1.0);
                let (canary, stable) = (binomial_pmf(nc, pc), binomial_pmf(ns, ps));
                let mut size = [0.0f64; 3];
                for (xc, &wc) in canary.iter().enumerate() {
                    if wc < 1e-13 {
                        continue;
                    }
                    for (xs, &ws) in stable.iter().enumerate() {
                        if ws < 1e-13 {
                            continue;
                        }
                        let input = RatioInput {
                            canary_bad: xc as u64,
                            canary_total: nc,
                            stable_bad: xs as u64,
                            stable_total: ns,
                        };
                        // Worse needs the observed rate beyond the tolerance and p <= alpha.
                        let beyond = xc as f64 / nc as f64
                            > ((1.0 + r) * (xs as f64 / ns as f64)).max(xs as f64 / ns as f64 + m);
                        if !beyond {
                            continue;
                        }
                        let p = ratio_p_value(&input, r, m)?.p_value;
                        for (a, s) in alphas.iter().zip(size.iter_mut()) {
                            if p <= *a {
                                *s += wc * ws;
                            }
                        }
                    }
                }
                for ((w, s), a) in worst.iter_mut().zip(size).zip(alphas) {
                    *w = w.max(s / a);
                }
            }
            println!(
                "| {r} | {m} | {nc}/{ns} | {:.2} | {:.2} | {:.2} |",
                worst[0], worst[1], worst[2]
            );
        }
    }
    Ok(())
}
