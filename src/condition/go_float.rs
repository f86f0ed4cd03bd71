//! Go's `strconv.ParseFloat(s, 64)`, which Argo uses twice: client_golang decodes Prometheus
//! sample values with it, and Argo's `asFloat` parses strings with it.
//!
//! It differs from Rust's `f64::from_str` in three ways that matter here: underscores between
//! digits are allowed (`1_000`), a value too large for a float64 (`1e400`) is an error rather
//! than infinity, and only an unsigned `nan` is NaN (`+nan` is an error).

/// The value Go's `strconv.ParseFloat(text, 64)` returns, or `None` where it returns an error.
/// Hexadecimal floats (`0x1p-2`) are not accepted (Go accepts them; Prometheus never sends
/// them).
pub fn parse_go_float(text: &str) -> Option<f64> {
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let lower = unsigned.to_ascii_lowercase();
    if lower == "inf" || lower == "infinity" {
        let inf = if text.starts_with('-') {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        };
        return Some(inf);
    }
    if lower == "nan" {
        return (unsigned.len() == text.len()).then_some(f64::NAN);
    }
    if lower.starts_with("0x") || !unsigned.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return None;
    }
    let cleaned;
    let digits = if unsigned.contains('_') {
        if !underscores_ok(unsigned) {
            return None;
        }
        cleaned = text.replace('_', "");
        cleaned.as_str()
    } else {
        text
    };
    let value: f64 = digits.parse().ok()?;
    // Out of range: Go returns ±Inf with ErrRange, which callers treat as an error.
    value.is_finite().then_some(value)
}

/// Go's `underscoreOK` for base 10: every `_` stands between two digits.
fn underscores_ok(s: &str) -> bool {
    let bytes = s.as_bytes();
    bytes.iter().enumerate().all(|(i, b)| {
        *b != b'_'
            || (i > 0
                && bytes[i - 1].is_ascii_digit()
                && bytes.get(i + 1).is_some_and(u8::is_ascii_digit))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_what_go_accepts() {
        assert_eq!(parse_go_float("1_000"), Some(1000.0));
        assert_eq!(parse_go_float("-1_0.5"), Some(-10.5));
        assert_eq!(parse_go_float("1e3"), Some(1000.0));
        assert_eq!(parse_go_float(".5"), Some(0.5));
        assert_eq!(parse_go_float("+Inf"), Some(f64::INFINITY));
        assert_eq!(parse_go_float("-infinity"), Some(f64::NEG_INFINITY));
        assert!(parse_go_float("NaN").is_some_and(f64::is_nan));
        assert!(parse_go_float("nan").is_some_and(f64::is_nan));
        assert_eq!(parse_go_float("1e-400"), Some(0.0));
    }

    #[test]
    fn refuses_what_go_refuses() {
        for bad in [
            "1e400", "-1e400", "+nan", " 1", "", "0x10", "1__0", "_1", "1_", "1_.5", "abc",
        ] {
            assert_eq!(parse_go_float(bad), None, "{bad:?}");
        }
    }
}
