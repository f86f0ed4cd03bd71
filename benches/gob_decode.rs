//! gob decoding time against message size: a `Plugin.Run` request whose argument is 16 KiB to
//! 4 MiB, in two layouts built by `rollgate::goplugin::gob::testkit`:
//! - `one message`: the whole value in one gob message;
//! - `spanning`: a `[]interface{}` whose elements each end a message (the layout that once made
//!   decoding quadratic: one message per ~22 bytes, so 190,000 messages at 4 MiB).
//!
//! Each size is decoded `BENCH_ROUNDS` times (default 7) by a fresh stream decoder, through
//! `Decoder::feed` exactly as the net/rpc server feeds it, and the median is printed with the
//! ratio to the size before it, then the growth exponent between the smallest and largest size
//! (time ~ size^k). Linear decoding doubles per doubling (ratio ~2, k ~1); the quadratic
//! decoder this replaced quadrupled (k ~2, ~30 s at 256 KiB spanning). One step breaks the
//! pattern where the input outgrows the CPU cache (1-2 MiB here: ~1 ms/MiB in cache, ~3 ms/MiB
//! from memory for one message); `BENCH_MAX_MIB=32` shows the ratio back at ~2 beyond it.
//!
//! Run: `cargo bench --bench gob_decode` (env `BENCH_ROUNDS`, `BENCH_MAX_MIB` up to 48).

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

#[path = "common/mod.rs"]
mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use rollgate::goplugin::gob::testkit::plugin_run_request;
use rollgate::goplugin::gob::{Decoder, Ignored, Step};

const MIN_SIZE: usize = 16 << 10;
/// Largest size, in MiB (`BENCH_MAX_MIB`, default 4).
const MAX_MIB: usize = 4;

/// Feeds every message to a fresh decoder; returns the values completed (2: header, argument).
fn decode(msgs: &[Vec<u8>]) -> usize {
    let mut dec = Decoder::new();
    let mut values = 0;
    for m in msgs {
        match dec.feed::<Ignored>(m) {
            Ok(Step::Value(_)) => values += 1,
            Ok(_) => {}
            Err(e) => panic!("decoding failed: {e}"),
        }
    }
    values
}

fn main() {
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7)
        .max(1);
    let max_size = std::env::var("BENCH_MAX_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(MAX_MIB)
        .clamp(1, 48)
        << 20;
    println!("gob decoding of a Plugin.Run request, median of {rounds} rounds");
    println!(
        "{:<12} {:>10} {:>9} {:>12} {:>12} {:>10}",
        "layout", "size", "messages", "median", "per MiB", "x/doubling"
    );
    let mut worst = [0.0f64; 2];
    // (bytes, seconds) of the smallest and largest size, per layout.
    let mut ends = [[(0f64, 0f64); 2]; 2];
    for (i, spanning) in [false, true].into_iter().enumerate() {
        let layout = if spanning { "spanning" } else { "one message" };
        let mut prev: Option<Duration> = None;
        let mut size = MIN_SIZE;
        while size <= max_size {
            let msgs = plugin_run_request(1, size, spanning);
            let bytes: usize = msgs.iter().map(Vec::len).sum();
            let times: Vec<Duration> = (0..rounds)
                .map(|_| {
                    let t = Instant::now();
                    assert_eq!(black_box(decode(black_box(&msgs))), 2);
                    t.elapsed()
                })
                .collect();
            let m = common::median_duration(times);
            let per_mib = m.as_secs_f64() * (1 << 20) as f64 / bytes as f64;
            let ratio = prev.map(|p| m.as_secs_f64() / p.as_secs_f64());
            if let Some(r) = ratio {
                worst[i] = worst[i].max(r);
            }
            println!(
                "{:<12} {:>9}K {:>9} {:>10.3}ms {:>10.3}ms {:>10}",
                layout,
                bytes >> 10,
                msgs.len(),
                m.as_secs_f64() * 1e3,
                per_mib * 1e3,
                ratio.map_or_else(|| "-".to_string(), |r| format!("{r:.2}"))
            );
            let point = (bytes as f64, m.as_secs_f64());
            if prev.is_none() {
                ends[i][0] = point;
            }
            ends[i][1] = point;
            prev = Some(m);
            size *= 2;
        }
    }
    let slope = |e: [(f64, f64); 2]| (e[1].1 / e[0].1).ln() / (e[1].0 / e[0].0).ln();
    println!(
        "largest time ratio per doubling: one message {:.2}, spanning {:.2} (linear: ~2, quadratic: ~4)",
        worst[0], worst[1]
    );
    println!(
        "growth exponent, smallest to largest size: one message {:.2}, spanning {:.2} (linear: 1, quadratic: 2)",
        slope(ends[0]),
        slope(ends[1])
    );
}
