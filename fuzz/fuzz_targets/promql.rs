//! PromQL checking (`spec::check_promql`): no panic, bounded time, deterministic, and an
//! accepted query over 16 KiB is impossible.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use rollgate::spec::check_promql;

fuzz_target!(|data: &[u8]| {
    fuzz_support::caught_panics_are_not_crashes();
    let Ok(q) = std::str::from_utf8(data) else {
        return;
    };
    let start = Instant::now();
    let first = check_promql("query", q);
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{} bytes took {:?}",
        q.len(),
        start.elapsed()
    );
    let again = check_promql("query", q);
    assert_eq!(first.is_ok(), again.is_ok());
    if first.is_ok() {
        assert!(
            q.len() <= 16 * 1024,
            "a {}-byte query was accepted",
            q.len()
        );
    } else if let Err(e) = first {
        assert!(
            e.to_string().contains("query"),
            "error does not name the key: {e}"
        );
    }
});
