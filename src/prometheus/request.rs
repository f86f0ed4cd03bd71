//! What to ask: an instant or a range query, and its encoding as an HTML form.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// The instant-query API below the configured address.
pub(crate) const INSTANT_PATH: &str = "/api/v1/query";
/// The range-query API below the configured address.
pub(crate) const RANGE_PATH: &str = "/api/v1/query_range";

/// Appends `value` as a form value: alphanumerics and `*-._` as they are, every other byte
/// as `%XX` (the WHATWG `application/x-www-form-urlencoded` set; a space goes as `%20`, which
/// servers decode to a space as they do `+`). Written here because every query of every check
/// passes through it and PromQL escapes a quarter of its bytes: per query of serve_load's
/// template (75 and 150 bytes), `form_urlencoded`'s serializer took 4,700 instructions,
/// `percent_encoding`'s iterator 4,200 (a call and a copy per escaped byte), this loop 2,700.
fn push_form_value(form: &mut Vec<u8>, value: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    form.reserve(value.len() * 3);
    for &byte in value.as_bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'*' | b'-' | b'.' | b'_') {
            form.push(byte);
        } else {
            form.extend_from_slice(&[
                b'%',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 0x0f)],
            ]);
        }
    }
}

/// One PromQL evaluation request.
#[derive(Debug, Clone, PartialEq)]
pub enum QueryRequest {
    /// `/api/v1/query`; `time: None` lets the server use its own "now".
    Instant {
        /// PromQL expression.
        query: String,
        /// Evaluation time; `None` = the server's now.
        time: Option<DateTime<Utc>>,
    },
    /// `/api/v1/query_range` from `start` to `end` (inclusive) every `step`.
    Range {
        /// PromQL expression.
        query: String,
        /// First evaluation time.
        start: DateTime<Utc>,
        /// Last evaluation time (inclusive).
        end: DateTime<Utc>,
        /// Resolution; sent in seconds.
        step: Duration,
    },
}

impl QueryRequest {
    /// An instant query at `time` (None = the server's now).
    pub fn instant(query: impl Into<String>, time: Option<DateTime<Utc>>) -> QueryRequest {
        QueryRequest::Instant {
            query: query.into(),
            time,
        }
    }

    /// The PromQL expression.
    pub fn query(&self) -> &str {
        match self {
            QueryRequest::Instant { query, .. } | QueryRequest::Range { query, .. } => query,
        }
    }

    /// `"instant"` or `"range"`, as in messages and recordings.
    pub fn kind(&self) -> &'static str {
        match self {
            QueryRequest::Instant { .. } => "instant",
            QueryRequest::Range { .. } => "range",
        }
    }

    /// The API path below the configured address.
    pub(crate) fn api_path(&self) -> &'static str {
        match self {
            QueryRequest::Instant { .. } => INSTANT_PATH,
            QueryRequest::Range { .. } => RANGE_PATH,
        }
    }

    /// The parameters as an `application/x-www-form-urlencoded` body (ASCII, so also a URL
    /// query string). `partial_response=false` makes Thanos fail rather than silently answer
    /// from a subset of its stores; `deny_partial_response=1` does the same for VictoriaMetrics
    /// cluster (app/vmselect/searchutils: `GetDenyPartialResponse`). Servers ignore the other's.
    pub(crate) fn form(&self) -> Vec<u8> {
        // Only the query needs escaping: times, steps and the fixed parameters are plain ASCII.
        let mut form = Vec::with_capacity(self.query().len() * 3 + 96);
        form.extend_from_slice(b"query=");
        push_form_value(&mut form, self.query());
        match self {
            QueryRequest::Instant { time, .. } => {
                if let Some(time) = time {
                    form.extend_from_slice(b"&time=");
                    form.extend_from_slice(unix_seconds(time).as_bytes());
                }
            }
            QueryRequest::Range {
                start, end, step, ..
            } => {
                for (key, value) in [
                    ("&start=", unix_seconds(start)),
                    ("&end=", unix_seconds(end)),
                    ("&step=", seconds(*step)),
                ] {
                    form.extend_from_slice(key.as_bytes());
                    form.extend_from_slice(value.as_bytes());
                }
            }
        }
        form.extend_from_slice(b"&partial_response=false&deny_partial_response=1");
        form
    }
}

/// Unix seconds with millisecond precision (Prometheus rounds to milliseconds anyway).
/// Computed from integer milliseconds so that times before 1970 come out right.
fn unix_seconds(t: &DateTime<Utc>) -> String {
    let ms = t.timestamp_millis();
    let sign = if ms < 0 { "-" } else { "" };
    let abs = ms.unsigned_abs();
    match abs % 1000 {
        0 => format!("{sign}{}", abs / 1000),
        frac => format!("{sign}{}.{frac:03}", abs / 1000),
    }
}

/// A duration in (possibly fractional) seconds, the form every Prometheus-compatible API takes.
fn seconds(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        d.as_secs().to_string()
    } else {
        d.as_secs_f64().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    impl QueryRequest {
        /// The form as text, to read in assertions.
        fn form_text(&self) -> String {
            String::from_utf8(self.form()).unwrap()
        }
    }

    /// Reference decoder, written independently of the encoder, to check the round trip.
    fn decode(s: &str) -> Vec<(String, String)> {
        fn unescape(s: &str) -> String {
            let mut out = Vec::new();
            let bytes = s.as_bytes();
            let mut i = 0;
            while i < bytes.len() {
                match bytes[i] {
                    b'+' => out.push(b' '),
                    b'%' => {
                        out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
                        i += 2;
                    }
                    b => out.push(b),
                }
                i += 1;
            }
            String::from_utf8(out).unwrap()
        }
        s.split('&')
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap();
                (unescape(k), unescape(v))
            })
            .collect()
    }

    proptest::proptest! {
        /// Any query, ASCII or not, kept runs and escapes in any order, comes back as it went.
        #[test]
        fn any_query_round_trips(q in "\\PC*", tail in "[a-z%&=+ ü]{0,8}") {
            let q = format!("{q}{tail}");
            let form = QueryRequest::instant(q.clone(), None).form_text();
            proptest::prop_assert_eq!(&decode(&form)[0], &("query".to_string(), q));
        }
    }

    #[test]
    fn instant_form_round_trips_special_characters() {
        let q =
            r#"sum(rate(http_requests_total{code=~"5..",path!="/a&b=c+d%"}[5m])) / 2 — ünïcode"#;
        let t = Utc.timestamp_millis_opt(1_712_345_678_123).unwrap();
        let form = QueryRequest::instant(q, Some(t)).form_text();
        assert!(
            form.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"*-._%+&=".contains(&b)),
            "{form}"
        );
        assert_eq!(
            decode(&form),
            vec![
                ("query".to_string(), q.to_string()),
                ("time".to_string(), "1712345678.123".to_string()),
                ("partial_response".to_string(), "false".to_string()),
                ("deny_partial_response".to_string(), "1".to_string()),
            ]
        );
    }

    #[test]
    fn instant_without_time_sends_no_time() {
        let form = QueryRequest::instant("up", None).form_text();
        assert_eq!(
            form,
            "query=up&partial_response=false&deny_partial_response=1"
        );
    }

    #[test]
    fn range_form() {
        let req = QueryRequest::Range {
            query: "up".into(),
            start: Utc.timestamp_opt(1_700_000_000, 0).unwrap(),
            end: Utc.timestamp_millis_opt(1_700_000_600_500).unwrap(),
            step: Duration::from_millis(1500),
        };
        assert_eq!(
            decode(&req.form_text()),
            vec![
                ("query".to_string(), "up".to_string()),
                ("start".to_string(), "1700000000".to_string()),
                ("end".to_string(), "1700000600.500".to_string()),
                ("step".to_string(), "1.5".to_string()),
                ("partial_response".to_string(), "false".to_string()),
                ("deny_partial_response".to_string(), "1".to_string()),
            ]
        );
        assert_eq!(req.api_path(), "/api/v1/query_range");
    }

    #[test]
    fn times_before_the_epoch() {
        let t = Utc.timestamp_millis_opt(-1_250).unwrap();
        assert_eq!(unix_seconds(&t), "-1.250");
    }
}
