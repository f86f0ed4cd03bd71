//! Throughput and peak memory of `parse_response` on a fleet-sized vector response.
//!
//! Generates a ~50 MB vector (200k series, 6 labels each, a few NaN/+Inf values), parses it with
//! `parse_response` and reduces it, and compares with `serde_json::Value` on the same bytes in
//! the same run (absolute times drift on shared machines; the ratio is what to watch). Peak heap
//! is measured with a counting global allocator.
//!
//! Run: `cargo bench --bench parse_response` (env `BENCH_SERIES`, `BENCH_ROUNDS` to resize).

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

use rollgate::prometheus::{parse_response, QueryData};

#[path = "common/mod.rs"]
mod common;

#[global_allocator]
static ALLOC: common::alloc::Counting = common::alloc::Counting;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A body shaped like a fleet query: `sum by (...)` over many clusters and pods.
fn generate(series: usize) -> Vec<u8> {
    let mut body = String::with_capacity(series * 260);
    body.push_str(r#"{"status":"success","data":{"resultType":"vector","result":["#);
    // A small deterministic LCG keeps label values varied without a rand dependency.
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        state >> 33
    };
    for i in 0..series {
        if i > 0 {
            body.push(',');
        }
        let r = next();
        let value = match r % 1000 {
            0 => "NaN".to_string(),
            1 => "+Inf".to_string(),
            _ => format!("{}", (r % 100_000) as f64 / 7.0),
        };
        body.push_str(&format!(
            concat!(
                r#"{{"metric":{{"__name__":"http_server_requests_seconds_count","cluster":"prod-eu-west-1-cluster-{}","#,
                r#""code":"{}","instance":"10.{}.{}.{}:8080","job":"payments-api","#,
                r#""pod":"payments-api-7d9f8b6c5-{:05x}"}},"value":[1712345678.{:03},"{}"]}}"#
            ),
            i % 300,
            [200, 404, 500, 503][(r % 4) as usize],
            r % 256,
            (r >> 8) % 256,
            (r >> 16) % 256,
            i,
            i % 1000,
            value
        ));
    }
    body.push_str(r#"]},"warnings":["bench"]}"#);
    body.into_bytes()
}

fn reduce(data: &QueryData) -> (usize, f64) {
    match data {
        QueryData::Vector(v) => (
            v.len(),
            v.iter()
                .map(|s| s.sample.value)
                .filter(|x| x.is_finite())
                .sum(),
        ),
        _ => (0, 0.0),
    }
}

fn main() {
    let series = env_usize("BENCH_SERIES", 200_000);
    let rounds = env_usize("BENCH_ROUNDS", 5);
    let body = generate(series);
    let mb = body.len() as f64 / 1e6;
    println!("body: {:.1} MB, {series} series, {rounds} rounds", mb);

    let mut ours = Vec::new();
    let mut generic = Vec::new();
    let mut peak_extra = 0usize;
    for _ in 0..rounds {
        let before = common::alloc::start();
        let t = Instant::now();
        let parsed = parse_response(black_box(&body)).expect("bench body parses");
        let (n, sum) = reduce(&parsed.data);
        ours.push(t.elapsed());
        peak_extra = peak_extra.max(common::alloc::peak_above(before));
        assert_eq!(n, series);
        black_box(sum);
        drop(parsed);

        let t = Instant::now();
        let v: serde_json::Value = serde_json::from_slice(black_box(&body)).expect("valid JSON");
        let n = v["data"]["result"].as_array().map_or(0, Vec::len);
        generic.push(t.elapsed());
        assert_eq!(n, series);
        drop(v);
    }
    let best = |d: &[Duration]| d.iter().min().copied().unwrap_or_default();
    let (ob, gb) = (best(&ours), best(&generic));
    let (om, gm) = (
        common::median_duration(ours),
        common::median_duration(generic),
    );
    println!(
        "parse_response:          best {:>7.1} MB/s, median {:>7.1} MB/s",
        mb / ob.as_secs_f64(),
        mb / om.as_secs_f64()
    );
    println!(
        "serde_json::Value:       best {:>7.1} MB/s, median {:>7.1} MB/s",
        mb / gb.as_secs_f64(),
        mb / gm.as_secs_f64()
    );
    println!(
        "speed ratio (median):    {:.2}x serde_json::Value",
        gm.as_secs_f64() / om.as_secs_f64()
    );
    println!(
        "peak heap during parse:  {:.1} MB = {:.2}x body (+ the body itself: {:.2}x)",
        peak_extra as f64 / 1e6,
        peak_extra as f64 / body.len() as f64,
        (peak_extra + body.len()) as f64 / body.len() as f64
    );
}
