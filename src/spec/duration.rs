//! Durations as Argo and Prometheus write them: `30s`, `5m`, `1h30m`, `7d`, `500ms`.

use std::time::Duration;

/// Why a text is not a duration; each message quotes the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Nothing but white space.
    #[error("an empty duration")]
    Empty,
    /// A part does not start with a number.
    #[error("{0:?} is not a duration (like 30s, 5m, 1h30m, 7d)")]
    NotADuration(String),
    /// A number does not fit.
    #[error("{0:?} has a number that is too large")]
    NumberTooLarge(String),
    /// A number has no unit after it.
    #[error("{0:?} lacks a unit (ms, s, m, h, d, w, y)")]
    NoUnit(String),
    /// A unit is none of ms, s, m, h, d, w, y.
    #[error("{text:?} has an unknown unit {unit:?} (ms, s, m, h, d, w, y)")]
    UnknownUnit {
        /// The whole text.
        text: String,
        /// The unit.
        unit: String,
    },
    /// The total is more milliseconds than fit in 64 bits.
    #[error("{0:?} is too long")]
    TooLong(String),
}

/// Parses a Go/Prometheus-style duration. Units: ms, s, m, h, d, w, y (365 d). A bare `0` is zero.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let s = text.trim();
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total_ms: u128 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(DurationError::NotADuration(text.into()));
        }
        let number: u128 = rest[..digits]
            .parse()
            .map_err(|_| DurationError::NumberTooLarge(text.into()))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit_ms: u128 = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "w" => 7 * 86_400_000,
            "y" => 365 * 86_400_000,
            "" => return Err(DurationError::NoUnit(text.into())),
            other => {
                return Err(DurationError::UnknownUnit {
                    text: text.into(),
                    unit: other.into(),
                })
            }
        };
        rest = &rest[unit_len..];
        total_ms = number
            .checked_mul(unit_ms)
            .and_then(|v| total_ms.checked_add(v))
            .ok_or_else(|| DurationError::TooLong(text.into()))?;
    }
    let ms = u64::try_from(total_ms).map_err(|_| DurationError::TooLong(text.into()))?;
    Ok(Duration::from_millis(ms))
}

/// Formats a duration in the largest exact units, the way PromQL range selectors want it (`5m`, `90s`).
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".into();
    }
    let units: [(u128, &str); 6] = [
        (7 * 86_400_000, "w"),
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1_000, "s"),
        (1, "ms"),
    ];
    let mut out = String::new();
    let mut rest = ms;
    for (size, name) in units {
        if rest >= size {
            out.push_str(&format!("{}{}", rest / size, name));
            rest %= size;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_simple_and_compound_durations() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(
            parse_duration("7d").unwrap(),
            Duration::from_secs(7 * 86400)
        );
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
    }

    #[test]
    fn rejects_malformed_durations_with_reason() {
        assert!(parse_duration("").is_err());
        assert!(parse_duration("10")
            .unwrap_err()
            .to_string()
            .contains("unit"));
        assert!(parse_duration("5x")
            .unwrap_err()
            .to_string()
            .contains("unknown unit"));
        assert!(parse_duration("m5").is_err());
        assert!(parse_duration("-5m").is_err());
        assert!(parse_duration("99999999999999999999999999y").is_err());
    }

    #[test]
    fn formats_in_largest_units() {
        assert_eq!(format_duration(Duration::from_secs(300)), "5m");
        assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1s500ms");
        assert_eq!(format_duration(Duration::ZERO), "0s");
    }
}
