//! Number formatting for the one-sentence messages.

/// `12000` -> `"12,000"`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// A rate as a percentage: `0.03` -> `"3.0 %"`, `0.005` -> `"0.50 %"`, `0.00012` -> `"0.012 %"`.
pub(crate) fn percent(rate: f64) -> String {
    let x = rate * 100.0;
    if x == 0.0 {
        "0 %".to_string()
    } else if x.abs() >= 1.0 {
        format!("{x:.1} %")
    } else {
        format!("{} %", significant(x, 2))
    }
}

/// A relative change as a percentage without sign: `5.0` -> `"500 %"`, `0.042` -> `"4.2 %"`.
pub(crate) fn change(relative: f64) -> String {
    let x = relative.abs() * 100.0;
    if x >= 10.0 {
        format!("{x:.0} %")
    } else {
        format!("{} %", significant(x, 2))
    }
}

/// A p-value: `"p < 0.001"` or `"p = 0.031"`.
pub(crate) fn p_value(p: f64) -> String {
    if p < 0.001 {
        "p < 0.001".to_string()
    } else {
        format!("p = {}", significant(p, 2))
    }
}

/// `x` rounded to `digits` significant digits, in plain (not scientific) notation.
pub(crate) fn significant(x: f64, digits: i32) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    // The decimal exponent of a finite non-zero f64 is within +-324.
    #[allow(clippy::cast_possible_truncation)]
    let magnitude = x.abs().log10().floor() as i32;
    let decimals = (digits - 1 - magnitude).clamp(0, 12).unsigned_abs() as usize;
    format!("{x:.decimals$}")
}

/// A number with up to `max_decimals` decimals and no trailing zeros: `0.200` -> `"0.2"`.
pub(crate) fn trimmed(x: f64, max_decimals: usize) -> String {
    let s = format!("{x:.max_decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(thousands(12_000), "12,000");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(percent(0.03), "3.0 %");
        assert_eq!(percent(0.005), "0.50 %");
        assert_eq!(percent(0.000_12), "0.012 %");
        assert_eq!(change(5.0), "500 %");
        assert_eq!(change(0.042), "4.2 %");
        assert_eq!(p_value(0.0004), "p < 0.001");
        assert_eq!(p_value(0.031_4), "p = 0.031");
        assert_eq!(p_value(0.47), "p = 0.47");
        assert_eq!(trimmed(20.0, 3), "20");
        assert_eq!(trimmed(0.1, 3), "0.1");
    }
}
