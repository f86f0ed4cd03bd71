//! Printing dry-run results as a table or as JSON.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::json;

use crate::measurement::{Measurement, Phase};

/// One metric's line of output; `measurement` is `None` for a provider rollgate skips.
pub struct Row {
    pub template: String,
    pub metric: String,
    pub kind: String,
    pub measurement: Option<Measurement>,
}

/// Prints an aligned table and the overall verdict.
pub fn print_table(rows: &[Row], overall: Phase, show_template: bool) {
    let mut lines: Vec<[String; 5]> = vec![[
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
        lines.push([name, r.kind.clone(), phase, value, message]);
    }
    let widths: Vec<usize> = (0..4)
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for l in &lines {
        println!(
            "{:w0$}  {:w1$}  {:w2$}  {:w3$}  {}",
            l[0],
            l[1],
            l[2],
            l[3],
            l[4],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3]
        );
    }
    println!();
    println!("Overall: {overall}");
}

/// Prints one JSON document with every measurement and the overall verdict.
pub fn print_json(rows: &[Row], overall: Phase, at: Option<DateTime<Utc>>) {
    let metrics: Vec<_> = rows
        .iter()
        .map(|r| match &r.measurement {
            Some(m) => json!({
                "template": r.template,
                "name": r.metric,
                "kind": r.kind,
                "phase": m.phase.as_str(),
                "value": m.value,
                "message": m.message,
                "metadata": m.metadata,
                "startedAt": m.started_at.to_rfc3339_opts(SecondsFormat::Millis, true),
                "finishedAt": m.finished_at.map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true)),
                "resumeAt": m.resume_at.map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true)),
            }),
            None => json!({"template": r.template, "name": r.metric, "kind": r.kind, "phase": "Skipped"}),
        })
        .collect();
    let doc = json!({
        "phase": overall.as_str(),
        "at": at.map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true)),
        "metrics": metrics,
    });
    println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
}

fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() > max {
        let cut: String = s.chars().take(max - 3).collect();
        format!("{cut}...")
    } else {
        s.to_string()
    }
}
