//! What rollgate does to an InfluxQL query before sending it: refuses anything but one read-only
//! `SELECT`, and places it in time.
//!
//! InfluxQL has no time parameter: a query's time range is part of its `WHERE` clause. So the
//! query says where its range goes with Grafana's macros, which rollgate fills in:
//! - `$timeFilter` → `(time > START AND time <= END)`, a window that ends at the check's time
//!   (the block's `window` long, default 5m), or for a range `start - step .. end`;
//! - `$interval` → the window (an instant check) or the step (a range) as an InfluxQL duration,
//!   for `GROUP BY time($interval)`.
//!
//! A check at the server's "now" needs neither (`WHERE time > now() - 5m` is placed already,
//! as Argo's Flux queries carry their own `range()`); a check at a given time (a backtest,
//! `dry-run --at`) and a range (compare's distribution form) need `$timeFilter` and may not use
//! `now()`, which would silently answer for another time.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};

/// When a query is evaluated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Placement {
    /// One value as of the server's now, over the window before it.
    Now { window: Duration },
    /// One value as of `time`, over the window before it.
    At {
        time: DateTime<Utc>,
        window: Duration,
    },
    /// Values from `start` to `end` every `step`.
    Range {
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        step: Duration,
    },
}

/// Why a query cannot be sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Refusal {
    /// Not one read-only `SELECT`.
    NotOneSelect(String),
    /// A fixed time or a range, but no `$timeFilter` (or a `now()` beside it).
    Unplaced(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NotOneSelect(why) | Refusal::Unplaced(why) => f.write_str(why),
        }
    }
}

/// The query as sent: `query` checked and its macros filled in for `placement`.
pub(super) fn prepare(query: &str, placement: Placement) -> Result<String, Refusal> {
    check_select(query)?;
    let words = scan(query).words;
    let has_filter = has_macro(query, "$timeFilter");
    let has_now = words.windows(2).any(|w| w[0] == "now" && w[1] == "(");
    match placement {
        Placement::Now { .. } => {}
        Placement::At { time, .. } => {
            if !has_filter || has_now {
                return Err(Refusal::Unplaced(format!(
                    "influxdb.query is evaluated at {} (a backtest or --at), which InfluxQL can only be told through the WHERE clause: write `WHERE $timeFilter` (rollgate fills in the window ending then) {}",
                    rfc3339(time),
                    if has_now { "instead of now()" } else { "into the query" }
                )));
            }
        }
        Placement::Range { .. } => {
            if !has_filter || has_now {
                return Err(Refusal::Unplaced(format!(
                    "compare's distribution form reads a range of values, which InfluxQL can only be told through the WHERE clause: write `WHERE $timeFilter` and `GROUP BY time($interval)` {}",
                    if has_now { "instead of now()" } else { "into the query" }
                )));
            }
        }
    }
    let (filter, interval) = match placement {
        Placement::Now { window } => (
            format!(
                "(time > now() - {} AND time <= now())",
                duration_literal(window)
            ),
            duration_literal(window),
        ),
        Placement::At { time, window } => (
            format!(
                "(time > '{}' AND time <= '{}')",
                rfc3339(time - chrono_duration(window)),
                rfc3339(time)
            ),
            duration_literal(window),
        ),
        Placement::Range { start, end, step } => (
            format!(
                "(time > '{}' AND time <= '{}')",
                rfc3339(start - chrono_duration(step)),
                rfc3339(end)
            ),
            duration_literal(step),
        ),
    };
    let filled = replace_macro(query, "$timeFilter", &filter);
    Ok(replace_macro(&filled, "$interval", &interval))
}

fn chrono_duration(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

/// A time as an InfluxQL string literal's content (RFC 3339, UTC, as precise as needed).
fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// A duration as an InfluxQL duration literal: whole seconds as `300s`, else milliseconds
/// (the block and the engine never ask for less than a millisecond).
pub(super) fn duration_literal(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis().max(1))
    }
}

/// Whether `query` uses the macro `name` (`$timeFilter`, `$interval`) as a whole word.
fn has_macro(query: &str, name: &str) -> bool {
    macro_positions(query, name).next().is_some()
}

fn macro_positions<'q>(query: &'q str, name: &'q str) -> impl Iterator<Item = usize> + 'q {
    query.match_indices(name).filter_map(move |(at, _)| {
        let next = query[at + name.len()..].chars().next();
        (!next.is_some_and(|c| c.is_alphanumeric() || c == '_')).then_some(at)
    })
}

fn replace_macro(query: &str, name: &str, with: &str) -> String {
    let mut out = String::with_capacity(query.len() + with.len());
    let mut last = 0;
    for at in macro_positions(query, name).collect::<Vec<_>>() {
        out.push_str(&query[last..at]);
        out.push_str(with);
        last = at + name.len();
    }
    out.push_str(&query[last..]);
    out
}

/// Refuses anything but one read-only `SELECT`: InfluxDB 1.x runs `DROP`, `CREATE`,
/// `SELECT … INTO` and several `;`-separated statements even over GET (only warning that this is
/// deprecated), with whatever rights the operator's credentials carry, and a template author
/// must not be able to write or delete through them.
pub(super) fn check_select(query: &str) -> Result<(), Refusal> {
    let scanned = scan(query);
    if let Some(why) = scanned.broken {
        return Err(Refusal::NotOneSelect(format!(
            "influxdb.query: {why}; rollgate sends one InfluxQL SELECT statement"
        )));
    }
    let words = &scanned.words;
    match words.first() {
        Some(w) if w.eq_ignore_ascii_case("select") => {}
        Some(w) => {
            return Err(Refusal::NotOneSelect(format!(
                "influxdb.query starts with `{}`; rollgate sends one read-only InfluxQL SELECT statement",
                w.chars().take(32).collect::<String>()
            )))
        }
        None => {
            return Err(Refusal::NotOneSelect(
                "influxdb.query holds no statement".into(),
            ))
        }
    }
    let semicolon = words.iter().position(|w| w == ";");
    if let Some(at) = semicolon {
        if words[at + 1..].iter().any(|w| w != ";") {
            return Err(Refusal::NotOneSelect(
                "influxdb.query holds several statements (`;`); rollgate sends one read-only InfluxQL SELECT statement".into(),
            ));
        }
    }
    if words.iter().any(|w| w.eq_ignore_ascii_case("into")) {
        return Err(Refusal::NotOneSelect(
            "influxdb.query uses SELECT … INTO, which writes data; rollgate sends read-only SELECT statements only".into(),
        ));
    }
    Ok(())
}

/// A query cut into its words outside strings, quoted identifiers, regular expressions and
/// comments: each run of letters/digits/`_`/`$`, and each other character on its own.
#[derive(Debug, Default)]
struct Scanned {
    words: Vec<String>,
    /// An unterminated string, identifier, regex or comment.
    broken: Option<&'static str>,
}

fn scan(query: &str) -> Scanned {
    let mut out = Scanned::default();
    let chars: Vec<char> = query.chars().collect();
    let mut i = 0;
    // Skips past the closing `end` of a quoted run starting after index `i`; `false` when
    // there is none. A backslash escapes the next character, as InfluxQL's scanner reads it.
    let skip_quoted = |i: &mut usize, end: char| -> bool {
        *i += 1;
        while *i < chars.len() {
            match chars[*i] {
                '\\' => *i += 2,
                c if c == end => {
                    *i += 1;
                    return true;
                }
                _ => *i += 1,
            }
        }
        false
    };
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '\'' || c == '"' {
            if !skip_quoted(&mut i, c) {
                out.broken = Some("a quote is never closed");
                return out;
            }
            out.words.push(c.to_string());
        } else if c == '-' && chars.get(i + 1) == Some(&'-') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && chars.get(i + 1) == Some(&'*') {
            let rest: String = chars[i + 2..].iter().collect();
            match rest.find("*/") {
                Some(end) => i += 2 + rest[..end].chars().count() + 2,
                None => {
                    out.broken = Some("a comment is never closed");
                    return out;
                }
            }
        } else if c == '/' && out.words.last().is_some_and(|w| w == "~") {
            // A regular expression after `=~` or `!~`.
            if !skip_quoted(&mut i, '/') {
                out.broken = Some("a regular expression is never closed");
                return out;
            }
            out.words.push("/".into());
        } else if c.is_alphanumeric() || c == '_' || c == '$' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '$')
            {
                i += 1;
            }
            out.words.push(chars[start..i].iter().collect());
        } else {
            out.words.push(c.to_string());
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(secs, 0).single().unwrap()
    }

    const W: Duration = Duration::from_secs(300);

    #[test]
    fn the_time_filter_ends_at_the_check_and_spans_the_window() {
        let q = "SELECT sum(\"errors\") FROM \"req\" WHERE \"service\" = 'a' AND $timeFilter GROUP BY time($interval)";
        let sent = prepare(
            q,
            Placement::At {
                time: at(1_700_000_000),
                window: W,
            },
        )
        .unwrap();
        assert_eq!(
            sent,
            "SELECT sum(\"errors\") FROM \"req\" WHERE \"service\" = 'a' AND (time > '2023-11-14T22:08:20Z' AND time <= '2023-11-14T22:13:20Z') GROUP BY time(300s)"
        );
        let now = prepare(q, Placement::Now { window: W }).unwrap();
        assert!(
            now.contains("(time > now() - 300s AND time <= now())"),
            "{now}"
        );
        let range = prepare(
            q,
            Placement::Range {
                start: at(1_700_000_000),
                end: at(1_700_000_600),
                step: Duration::from_millis(1500),
            },
        )
        .unwrap();
        assert!(
            range.contains("(time > '2023-11-14T22:13:18.500Z' AND time <= '2023-11-14T22:23:20Z') GROUP BY time(1500ms)"),
            "{range}"
        );
    }

    #[test]
    fn a_query_that_cannot_be_placed_at_a_past_time_is_refused() {
        let fixed = Placement::At {
            time: at(1_700_000_000),
            window: W,
        };
        let range = Placement::Range {
            start: at(1_700_000_000),
            end: at(1_700_000_600),
            step: Duration::from_secs(60),
        };
        for q in [
            "SELECT sum(x) FROM m WHERE time > now() - 5m",
            "SELECT sum(x) FROM m",
            "SELECT sum(x) FROM m WHERE $timeFilter AND time > now() - 1h",
            "SELECT sum(x) FROM m WHERE $timeFilterX",
        ] {
            for p in [fixed, range] {
                let e = prepare(q, p).unwrap_err();
                assert!(matches!(e, Refusal::Unplaced(_)), "{q}: {e}");
                assert!(e.to_string().contains("$timeFilter"), "{e}");
            }
            // At the server's now, the query's own range stands.
            prepare(q, Placement::Now { window: W }).unwrap();
        }
        // `now()` inside a string or a quoted identifier is not a call.
        prepare(
            "SELECT sum(x) FROM m WHERE \"now\" = 'now()' AND $timeFilter",
            fixed,
        )
        .unwrap();
    }

    #[test]
    fn only_one_read_only_select_is_sent() {
        for q in [
            "DROP DATABASE t",
            "  create database x",
            "SELECT sum(x) FROM m; DROP DATABASE t",
            "SELECT sum(x) INTO t.autogen.y FROM m",
            "select sum(x) into y from m",
            "SELECT sum(x) FROM m WHERE a = 'unclosed",
            "SELECT sum(x) FROM m /* DROP",
            "-- SELECT\nDROP DATABASE t",
            "",
            "SHOW DATABASES",
        ] {
            let e = prepare(q, Placement::Now { window: W }).unwrap_err();
            assert!(matches!(e, Refusal::NotOneSelect(_)), "{q}: {e}");
        }
        for q in [
            "SELECT sum(x) FROM m WHERE a = 'x; DROP DATABASE t' AND \"into\" = 'into'",
            "SELECT sum(x) FROM m WHERE host =~ /a;b into/ ;",
            "/* why */ SELECT sum(x) FROM m -- ; DROP\n",
            "SELECT sum(x) FROM m WHERE a = 'it\\'s; into'",
        ] {
            prepare(q, Placement::Now { window: W }).unwrap_or_else(|e| panic!("{q}: {e}"));
        }
    }

    #[test]
    fn durations_are_influxql_literals() {
        assert_eq!(duration_literal(Duration::from_secs(300)), "300s");
        assert_eq!(duration_literal(Duration::from_millis(1500)), "1500ms");
        assert_eq!(duration_literal(Duration::from_nanos(10)), "1ms");
    }
}
