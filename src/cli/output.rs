//! Printing dry-run results as a table or as JSON.

use super::stdout::outln;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::json;

use crate::measurement::{JsonKeys, JsonLabels, Measurement, Phase};

/// One metric's line of output; `measurement` is `None` for a provider rollgate skips.
pub(crate) struct Row {
    pub template: String,
    pub metric: String,
    pub kind: String,
    pub measurement: Option<Measurement>,
}

/// Prints an aligned table and the overall verdict.
pub(crate) fn print_table(rows: &[Row], overall: Phase, show_template: bool) {
    let mut lines: Vec<Vec<String>> = vec![vec![
        "METRIC".into(),
        "KIND".into(),
        "PHASE".into(),
        "VALUE".into(),
        "MESSAGE".into(),
    ]];
    for r in rows {
        let name = if show_template {
            format!("{}/{}", r.template, r.metric)
        } else {
            r.metric.clone()
        };
        let (phase, value, message) = match &r.measurement {
            Some(m) => (
                m.phase.to_string(),
                shorten(&m.value, 40),
                m.message.clone(),
            ),
            None => (
                "Skipped".into(),
                String::new(),
                format!("{}: not evaluated by rollgate", r.kind),
            ),
        };
        lines.push(vec![name, r.kind.clone(), phase, value, message]);
    }
    print_columns(&lines);
    outln!();
    outln!("Overall: {overall}");
}

/// Prints one JSON document with every measurement and the overall verdict.
pub(crate) fn print_json(rows: &[Row], overall: Phase, at: Option<DateTime<Utc>>) {
    let metrics: Vec<_> = rows
        .iter()
        .map(|r| match &r.measurement {
            Some(m) => m.to_json(
                JsonKeys::DryRun,
                Some(JsonLabels {
                    template: &r.template,
                    metric: &r.metric,
                    kind: &r.kind,
                }),
            ),
            None => json!({"template": r.template, "name": r.metric, "kind": r.kind, "phase": "Skipped"}),
        })
        .collect();
    let doc = json!({
        "phase": overall.as_str(),
        "at": at.map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true)),
        "metrics": metrics,
    });
    outln!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
}

/// `s` with line breaks and tabs written as `\n`, `\r` and `\t`.
pub(super) fn one_line(s: &str) -> String {
    if !s.contains(['\n', '\r', '\t']) {
        return s.to_string();
    }
    s.replace('\r', "\\r")
        .replace('\n', "\\n")
        .replace('\t', "\\t")
}

pub(super) fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() > max {
        let cut: String = s.chars().take(max - 3).collect();
        format!("{cut}...")
    } else {
        s.to_string()
    }
}

/// Prints rows as columns separated by two spaces, every column but the last padded to its
/// widest cell.
pub(super) fn print_columns(lines: &[Vec<String>]) {
    // A cell is one line: a message with line breaks (a PromQL error, a server's body) would
    // otherwise break the rows below it out of their columns.
    let flat: Vec<Vec<String>> = lines
        .iter()
        .map(|l| l.iter().map(|c| one_line(c)).collect())
        .collect();
    let lines = flat.as_slice();
    let columns = lines.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|i| {
            lines
                .iter()
                .filter_map(|l| l.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for l in lines {
        let mut out = String::new();
        for (i, cell) in l.iter().enumerate() {
            if i + 1 == l.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:w$}  ", w = widths[i]));
            }
        }
        outln!("{out}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_one_line() {
        assert_eq!(one_line("a\nb\r\n\tc"), "a\\nb\\r\\n\\tc");
        assert_eq!(one_line("plain"), "plain");
    }
}
