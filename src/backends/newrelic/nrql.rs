//! The time clauses of an NRQL query: what a check at a given time or a range asks New Relic.
//!
//! NRQL carries its own time range (`SINCE`, `UNTIL`; without them the last hour up to now,
//! docs.newrelic.com/docs/nrql/using-nrql/query-time-range). A live check sends the query as
//! written, as Argo's provider does. A check at another time (backtests) needs absolute times:
//! relative clauses (`SINCE 10 minutes ago`, `UNTIL now`) are rewritten relative to the check's
//! time, and missing ones get NRQL's defaults (one hour up to that time). Clauses that name a
//! calendar time (`SINCE '2024-01-01'`, `SINCE today`, an epoch) do not move with the check,
//! so a backtest of such a query is refused rather than judging the same hour again and again.

use chrono::{DateTime, Utc};

/// NRQL's window when a query has no `SINCE`.
pub(super) const DEFAULT_WINDOW_MS: i64 = 3_600_000;
/// The most buckets a `TIMESERIES` query returns (NRQL's limit).
pub(super) const MAX_BUCKETS: i64 = 366;

/// A word or other token outside quotes, with its byte span.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Token<'q> {
    text: &'q str,
    start: usize,
    end: usize,
}

/// Words, numbers and punctuation outside string literals and backquoted names (which are
/// skipped whole: a `since` inside `'…'` is text, not a clause).
fn tokens(query: &str) -> Vec<Token<'_>> {
    let bytes = query.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_whitespace() {
            i += 1;
        } else if matches!(b, b'\'' | b'"' | b'`') {
            let quote = b;
            i += 1;
            while i < bytes.len() && bytes[i] != quote {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
        } else if b.is_ascii_alphanumeric() || b == b'_' || b == b'.' {
            let start = i;
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] == b'.')
            {
                i += 1;
            }
            out.push(Token {
                text: &query[start..i],
                start,
                end: i,
            });
        } else {
            // One punctuation character (a multi-byte character is skipped whole).
            let start = i;
            i += query[i..].chars().next().map_or(1, char::len_utf8);
            out.push(Token {
                text: &query[start..i],
                start,
                end: i,
            });
        }
    }
    out
}

/// Words that start a clause, ending the one before.
const CLAUSES: &[&str] = &[
    "select",
    "from",
    "where",
    "facet",
    "since",
    "until",
    "timeseries",
    "limit",
    "compare",
    "with",
    "extrapolate",
    "slide",
    "order",
    "offset",
    "as",
    "show",
];

/// One `SINCE`/`UNTIL` clause: its span in the query and its words.
#[derive(Debug)]
struct Clause<'q> {
    start: usize,
    end: usize,
    words: Vec<&'q str>,
}

/// The query's time-related clauses.
#[derive(Debug, Default)]
struct Clauses<'q> {
    since: Option<Clause<'q>>,
    until: Option<Clause<'q>>,
    timeseries: bool,
    compare: bool,
}

fn clauses(query: &str) -> Clauses<'_> {
    let toks = tokens(query);
    let mut found = Clauses::default();
    let mut i = 0;
    while i < toks.len() {
        let word = toks[i].text.to_ascii_lowercase();
        match word.as_str() {
            "since" | "until" => {
                let mut j = i + 1;
                while j < toks.len()
                    && !CLAUSES.contains(&toks[j].text.to_ascii_lowercase().as_str())
                {
                    j += 1;
                }
                let end = toks.get(j.saturating_sub(1)).map_or(query.len(), |t| t.end);
                // A quoted date leaves no word behind: the clause runs to the next keyword.
                let end = toks.get(j).map_or(query.len(), |t| t.start).max(end);
                let clause = Clause {
                    start: toks[i].start,
                    end,
                    words: toks[i + 1..j].iter().map(|t| t.text).collect(),
                };
                if word == "since" {
                    found.since = Some(clause);
                } else {
                    found.until = Some(clause);
                }
                i = j;
                continue;
            }
            "timeseries" => found.timeseries = true,
            "compare" => found.compare = true,
            _ => {}
        }
        i += 1;
    }
    found
}

/// Milliseconds per NRQL time unit.
fn unit_ms(unit: &str) -> Option<f64> {
    Some(match unit.to_ascii_lowercase().as_str() {
        "second" | "seconds" => 1_000.0,
        "minute" | "minutes" => 60_000.0,
        "hour" | "hours" => 3_600_000.0,
        "day" | "days" => 86_400_000.0,
        "week" | "weeks" => 604_800_000.0,
        _ => return None,
    })
}

/// A relative clause (`N unit ago`, `now`) as epoch milliseconds at `at_ms`; `None` for any
/// other form.
fn relative(words: &[&str], at_ms: i64) -> Option<i64> {
    match words {
        [now] if now.eq_ignore_ascii_case("now") => Some(at_ms),
        [n, unit, ago] if ago.eq_ignore_ascii_case("ago") => {
            let n: f64 = n.parse().ok()?;
            let ms = n * unit_ms(unit)?;
            // Bounded so the conversion below cannot saturate into a wrong time.
            (n.is_finite() && n >= 0.0 && ms < 3.2e12).then(|| at_ms - round_ms(ms))
        }
        _ => None,
    }
}

// Checked above: `ms` is finite and within ±3.2e12, far inside i64.
#[allow(clippy::cast_possible_truncation)]
fn round_ms(ms: f64) -> i64 {
    ms.round() as i64
}

/// Why a query cannot be asked at a given time or over a range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum TimeError {
    /// A clause names a fixed time.
    #[error("a check at a past time (a backtest) rewrites the query's {clause} relative to that time, but `{text}` is not relative: write `{clause} <n> minutes ago` (or `now`), or leave it out for NRQL's default (1 hour up to the check's time)")]
    NotRelative {
        /// `SINCE` or `UNTIL`.
        clause: &'static str,
        /// The clause as written.
        text: String,
    },
    /// A range fetch sets the time clauses itself.
    #[error("a range of checks (the compare distribution form) sets SINCE, UNTIL and TIMESERIES itself: remove `{0}` from the query")]
    RangeHasClause(&'static str),
    /// The step is not whole seconds.
    #[error("the step must be whole seconds for NRQL's TIMESERIES (got {0} ms)")]
    Step(u128),
    /// Too many buckets.
    #[error("the range needs {0} TIMESERIES buckets; NRQL returns at most {MAX_BUCKETS}: use a larger step or a shorter window")]
    TooManyBuckets(i64),
}

/// The query a check at `at` sends: relative clauses rewritten to epoch milliseconds, missing
/// ones added (`SINCE at-1h`, `UNTIL at`).
pub(crate) fn at_time(query: &str, at: DateTime<Utc>) -> Result<String, TimeError> {
    let at_ms = at.timestamp_millis();
    let found = clauses(query);
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    let mut since_ms = None;
    for (name, clause) in [("SINCE", &found.since), ("UNTIL", &found.until)] {
        let Some(c) = clause else { continue };
        let ms = relative(&c.words, at_ms).ok_or_else(|| TimeError::NotRelative {
            clause: name,
            text: query[c.start..c.end].trim().to_string(),
        })?;
        if name == "SINCE" {
            since_ms = Some(ms);
        }
        edits.push((c.start, c.end, format!("{name} {ms} ")));
    }
    let mut out = query.to_string();
    edits.sort_by_key(|e| std::cmp::Reverse(e.0));
    for (start, end, text) in edits {
        out.replace_range(start..end, &text);
    }
    let mut out = out.trim_end().to_string();
    if since_ms.is_none() {
        out.push_str(&format!(" SINCE {}", at_ms - DEFAULT_WINDOW_MS));
    }
    if found.until.is_none() {
        out.push_str(&format!(" UNTIL {at_ms}"));
    }
    Ok(out)
}

/// The query for checks at `start..=end` every `step`: buckets of `step` that end at each
/// check's time (`SINCE start-step UNTIL end TIMESERIES step`).
pub(crate) fn over_range(
    query: &str,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    step: std::time::Duration,
) -> Result<String, TimeError> {
    let found = clauses(query);
    for (present, name) in [
        (found.since.is_some(), "SINCE"),
        (found.until.is_some(), "UNTIL"),
        (found.timeseries, "TIMESERIES"),
        (found.compare, "COMPARE WITH"),
    ] {
        if present {
            return Err(TimeError::RangeHasClause(name));
        }
    }
    if step.subsec_nanos() != 0 || step.is_zero() {
        return Err(TimeError::Step(step.as_millis()));
    }
    let step_s = i64::try_from(step.as_secs()).unwrap_or(i64::MAX);
    let span_s = (end.timestamp() - start.timestamp()).max(0);
    let buckets = span_s / step_s + 1;
    if buckets > MAX_BUCKETS {
        return Err(TimeError::TooManyBuckets(buckets));
    }
    let since = start.timestamp_millis() - step_s * 1000;
    let until = end.timestamp_millis();
    Ok(format!(
        "{} SINCE {since} UNTIL {until} TIMESERIES {step_s} seconds",
        query.trim_end()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at() -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000, 0).unwrap()
    }

    #[test]
    fn a_query_without_time_clauses_gets_the_default_hour_up_to_the_check() {
        assert_eq!(
            at_time("SELECT count(*) FROM Transaction", at()).unwrap(),
            "SELECT count(*) FROM Transaction SINCE 1699996400000 UNTIL 1700000000000"
        );
    }

    #[test]
    fn relative_clauses_move_with_the_check() {
        assert_eq!(
            at_time(
                "SELECT count(*) FROM Transaction since 10 minutes AGO WHERE appName = 'a' UNTIL now",
                at()
            )
            .unwrap(),
            "SELECT count(*) FROM Transaction SINCE 1699999400000 WHERE appName = 'a' UNTIL 1700000000000"
        );
        assert_eq!(
            at_time(
                "FROM T SELECT count(*) SINCE 2 hours ago UNTIL 1 hour ago",
                at()
            )
            .unwrap(),
            "FROM T SELECT count(*) SINCE 1699992800000 UNTIL 1699996400000"
        );
    }

    #[test]
    fn words_inside_quotes_are_not_clauses() {
        let q = "SELECT count(*) FROM T WHERE name = 'since 5 minutes ago' AND `until` = 1";
        assert_eq!(
            at_time(q, at()).unwrap(),
            format!("{q} SINCE 1699996400000 UNTIL 1700000000000")
        );
    }

    #[test]
    fn fixed_times_are_refused_for_a_past_check() {
        for q in [
            "SELECT count(*) FROM T SINCE '2024-01-01 00:00:00'",
            "SELECT count(*) FROM T SINCE today",
            "SELECT count(*) FROM T SINCE 1699990000000",
            "SELECT count(*) FROM T SINCE 10 minutes ago UNTIL yesterday",
            "SELECT count(*) FROM T SINCE 5 fortnights ago",
        ] {
            let err = at_time(q, at()).unwrap_err();
            assert!(matches!(err, TimeError::NotRelative { .. }), "{q}: {err}");
            assert!(err.to_string().contains("not relative"), "{err}");
        }
    }

    #[test]
    fn a_range_asks_for_buckets_ending_at_each_check() {
        let start = at();
        let end = start + chrono::Duration::minutes(30);
        assert_eq!(
            over_range(
                "SELECT percentile(duration, 99) FROM T",
                start,
                end,
                std::time::Duration::from_secs(60)
            )
            .unwrap(),
            "SELECT percentile(duration, 99) FROM T SINCE 1699999940000 UNTIL 1700001800000 TIMESERIES 60 seconds"
        );
    }

    #[test]
    fn a_range_refuses_time_clauses_odd_steps_and_too_many_buckets() {
        let start = at();
        let end = start + chrono::Duration::hours(10);
        let minute = std::time::Duration::from_secs(60);
        for (q, clause) in [
            ("SELECT count(*) FROM T SINCE 1 hour ago", "SINCE"),
            ("SELECT count(*) FROM T until now", "UNTIL"),
            ("SELECT count(*) FROM T TIMESERIES", "TIMESERIES"),
            (
                "SELECT count(*) FROM T COMPARE WITH 1 week ago",
                "COMPARE WITH",
            ),
        ] {
            assert_eq!(
                over_range(q, start, start, minute),
                Err(TimeError::RangeHasClause(clause))
            );
        }
        assert_eq!(
            over_range(
                "SELECT 1",
                start,
                end,
                std::time::Duration::from_millis(1500)
            ),
            Err(TimeError::Step(1500))
        );
        assert_eq!(
            over_range("SELECT 1", start, end, minute),
            Err(TimeError::TooManyBuckets(601))
        );
    }
}
