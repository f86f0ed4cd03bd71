//! Argo's condition language: compile, then evaluate against an arbitrary result.
//! Input: the condition's source, a NUL byte, then JSON for `result` (else a fixed list).
//! Invariants: no panic (overflow checks are on in fuzz builds), bounded time, evaluation is
//! deterministic, and `evaluate` agrees with `evaluate_value`.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use rollgate::condition::{Condition, Value};

fuzz_target!(|data: &[u8]| {
    let (src, rest) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let Ok(src) = std::str::from_utf8(src) else {
        return;
    };
    let result = match serde_json::from_slice::<serde_json::Value>(rest) {
        Ok(json) => Value::from(&json),
        Err(_) => Value::Array(vec![
            Value::Float(0.5),
            Value::Int(4),
            Value::Float(f64::NAN),
        ]),
    };
    let start = Instant::now();
    let Ok(cond) = Condition::compile(src) else {
        return;
    };
    let first = cond.evaluate(&result);
    let again = cond.evaluate(&result);
    assert_eq!(
        format!("{first:?}"),
        format!("{again:?}"),
        "evaluation is not deterministic"
    );
    if let Ok(b) = first {
        // `evaluate` is `evaluate_value` read as a boolean.
        let v = cond.evaluate_value(&result);
        assert!(
            v.is_ok(),
            "evaluate gave {b} but evaluate_value failed: {v:?}"
        );
    }
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "a {}-byte condition took {:?}",
        src.len(),
        start.elapsed()
    );
});
