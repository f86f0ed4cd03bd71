//! The run clock: `[[run.elapsed]]` in a query becomes the time since the analysis run began, as
//! a PromQL duration in whole seconds (`3600s`), so a window can cover the whole run
//! (`increase(errors_total[[[run.elapsed]]])`).
//!
//! Double square brackets, not `{{...}}`: in plugin mode Argo Rollouts resolves every `{{...}}`
//! tag of the metric before the plugin sees it and fails the run on a tag it does not know
//! (argo-rollouts v1.9.1 `utils/analysis/helpers.go` `ResolveMetricArgs` →
//! `utils/template` `ResolveQuotedArgs`), so the engine could never receive one. `[[` does not
//! occur in PromQL outside string literals; only the exact tag is replaced, so a regex class such
//! as `[[:alpha:]]` in a label matcher is left alone.

use std::borrow::Cow;

use chrono::{DateTime, Utc};

/// The tag's name between the brackets.
const NAME: &str = "run.elapsed";

/// What the tag stands for while a query is only parsed (its value is always a duration).
pub(crate) const PARSE_STAND_IN: &str = "1s";

/// Why a query's run clock could not be filled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunClockError {
    /// The query uses the clock but the call has no run start.
    #[error("the query uses [[run.elapsed]] but this check's run start is unknown (a dry run needs --run-start; serve needs the metric's interval)")]
    NoRunStart,
}

/// Where the tags are: byte ranges of each `[[ run.elapsed ]]` (spaces allowed inside).
fn tags(query: &str) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(open) = query[from..].find("[[").map(|i| i + from) {
        let inner_start = open + 2;
        let Some(close) = query[inner_start..].find("]]").map(|i| i + inner_start) else {
            break;
        };
        if query[inner_start..close].trim() == NAME {
            found.push((open, close + 2));
            from = close + 2;
        } else {
            from = open + 1;
        }
    }
    found
}

/// What `[[run.elapsed]]` reads as where there is no run (`rollgate rules`, `dashboard`): the
/// window an alert or a panel looks back over.
pub const NO_RUN_WINDOW: &str = "5m";

/// Whether `query` uses the run clock.
pub fn uses_run_clock(query: &str) -> bool {
    !tags(query).is_empty()
}

/// `query` with every tag replaced by `value`.
pub fn replace_run_clock<'a>(query: &'a str, value: &str) -> Cow<'a, str> {
    let found = tags(query);
    if found.is_empty() {
        return Cow::Borrowed(query);
    }
    let mut out = String::with_capacity(query.len() + found.len() * value.len());
    let mut last = 0;
    for (start, end) in found {
        out.push_str(&query[last..start]);
        out.push_str(value);
        last = end;
    }
    out.push_str(&query[last..]);
    Cow::Owned(out)
}

/// The time from `started` to `at` as a PromQL duration in whole seconds, rounded up and at
/// least one second (Prometheus rejects a zero range; a clock that runs behind the run start
/// reads as its first second).
pub fn elapsed_duration(started: DateTime<Utc>, at: DateTime<Utc>) -> String {
    let millis = (at - started).num_milliseconds().max(0);
    let secs = (millis + 999) / 1000;
    format!("{}s", secs.max(1))
}

/// `query` with the run clock filled for a check at `at` of a run that began at `started`.
pub fn fill_run_clock(
    query: &str,
    started: Option<DateTime<Utc>>,
    at: DateTime<Utc>,
) -> Result<Cow<'_, str>, RunClockError> {
    if !uses_run_clock(query) {
        return Ok(Cow::Borrowed(query));
    }
    let started = started.ok_or(RunClockError::NoRunStart)?;
    Ok(Cow::Owned(
        replace_run_clock(query, &elapsed_duration(started, at)).into_owned(),
    ))
}

/// `query` with its window set to `cell` seconds: the run clock if it has one, else its one
/// range (every `[<duration>]` alike). `None` when the query has no such window or several.
pub(crate) fn cell_query(query: &str, cell: i64) -> Option<String> {
    let width = format!("{cell}s");
    if uses_run_clock(query) {
        return Some(replace_run_clock(query, &width).into_owned());
    }
    let bytes = query.as_bytes();
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    let mut in_string: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match in_string {
            Some(_) if b == b'\\' => i += 1,
            Some(q) if b == q => in_string = None,
            Some(_) => {}
            None if b == b'"' || b == b'\'' || b == b'`' => in_string = Some(b),
            None if b == b'[' => {
                let close = query[i..].find(']').map(|j| i + j)?;
                let inner = query[i + 1..close].trim();
                if inner.is_empty()
                    || !inner
                        .bytes()
                        .all(|c| c.is_ascii_digit() || b"smhdwy".contains(&c))
                {
                    // A subquery (`[30m:1m]`) or something else: not a plain window.
                    return None;
                }
                ranges.push((i, close + 1));
                i = close;
            }
            None => {}
        }
        i += 1;
    }
    let first = ranges.first()?;
    let text = &query[first.0..first.1];
    if ranges.iter().any(|r| &query[r.0..r.1] != text) {
        return None;
    }
    let mut out = String::with_capacity(query.len());
    let mut last = 0;
    for (a, b) in ranges {
        out.push_str(&query[last..a]);
        out.push('[');
        out.push_str(&width);
        out.push(']');
        last = b;
    }
    out.push_str(&query[last..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(s, 0).single().unwrap()
    }

    #[test]
    fn cell_queries_take_the_interval_as_their_window() {
        assert_eq!(
            cell_query("sum(increase(x[[[run.elapsed]]]))", 60).unwrap(),
            "sum(increase(x[60s]))"
        );
        assert_eq!(
            cell_query(
                r#"sum(increase(x{a="[5m]"}[5m])) + sum(increase(y[ 5m ]))"#,
                60
            ),
            None
        );
        assert_eq!(
            cell_query(
                r#"sum(increase(x{a="[1h]"}[5m])) + sum(increase(y[5m]))"#,
                30
            )
            .unwrap(),
            r#"sum(increase(x{a="[1h]"}[30s])) + sum(increase(y[30s]))"#
        );
        assert_eq!(
            cell_query("sum(increase(x[5m])) / sum(increase(x[1h]))", 60),
            None
        );
        assert_eq!(cell_query("max_over_time(rate(x[1m])[30m:1m])", 60), None);
        assert_eq!(cell_query("sum(x)", 60), None);
    }

    #[test]
    fn fills_whole_seconds_rounded_up() {
        let q = "sum(increase(e[[[run.elapsed]]])) / sum(increase(t[[[ run.elapsed ]]]))";
        let out = fill_run_clock(q, Some(t(100)), t(3700)).unwrap();
        assert_eq!(out, "sum(increase(e[3600s])) / sum(increase(t[3600s]))");
        let half = t(100) + chrono::Duration::milliseconds(1500);
        assert_eq!(elapsed_duration(t(100), half), "2s");
        assert_eq!(elapsed_duration(t(100), t(100)), "1s");
        assert_eq!(elapsed_duration(t(100), t(50)), "1s");
    }

    #[test]
    fn leaves_other_brackets_alone() {
        let q = r#"sum(increase(x{path=~"[[:alpha:]]+"}[5m]))"#;
        assert!(!uses_run_clock(q));
        assert!(matches!(
            fill_run_clock(q, None, t(0)).unwrap(),
            Cow::Borrowed(_)
        ));
        assert_eq!(
            replace_run_clock("a[[run.other]]b", "1s"),
            "a[[run.other]]b"
        );
        assert_eq!(replace_run_clock("[[ [[run.elapsed]]", "9s"), "[[ 9s");
    }

    #[test]
    fn needs_a_run_start() {
        assert_eq!(
            fill_run_clock("x[[[run.elapsed]]]", None, t(0)).unwrap_err(),
            RunClockError::NoRunStart
        );
    }
}
