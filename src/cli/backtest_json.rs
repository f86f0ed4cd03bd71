//! `backtest -o json`: the document exactly as `serde_json::to_writer_pretty` prints it, with
//! the timeline written here directly.
//!
//! A week at 1m is 20,000 timeline entries whose messages and values (a compare value is itself
//! JSON, full of quotes) are escaped into about 15 MB; serde_json escapes byte by byte through
//! `io::Write` calls, which was a tenth of a backtest. The small rest of the document still goes
//! through serde_json, and a test holds the two to the same bytes.

use std::io::{self, Write};

use serde_json::{Map, Value};

use crate::json_string;

/// One timeline entry: the fields of `-o json`'s `timeline[]` objects.
#[derive(Debug, Clone)]
pub(super) struct Line<'a> {
    pub message: &'a str,
    pub metric: &'a str,
    pub phase: &'a str,
    pub resume_at: Option<String>,
    pub time: String,
    pub value: &'a str,
}

/// The document's key for the timeline.
const TIMELINE: &str = "timeline";

/// Written out to the sink once this much has been produced.
const FLUSH_AT: usize = 1 << 20;

/// Writes `head` (the document's other fields) with `"timeline": [lines]` in its sorted place,
/// as one pretty-printed JSON object (no trailing newline).
pub(super) fn write(
    sink: &mut impl Write,
    head: &Map<String, Value>,
    lines: &[Line<'_>],
) -> io::Result<()> {
    let mut out = Vec::with_capacity(FLUSH_AT + 4096);
    out.push(b'{');
    let mut first = true;
    let mut timeline_done = false;
    let mut field = |out: &mut Vec<u8>, key: &str| {
        out.extend_from_slice(if first { b"\n  " } else { b",\n  " });
        first = false;
        json_string::push_quoted(out, key);
        out.extend_from_slice(b": ");
    };
    for (key, value) in head {
        if !timeline_done && key.as_str() > TIMELINE {
            field(&mut out, TIMELINE);
            timeline(sink, &mut out, lines)?;
            timeline_done = true;
        }
        field(&mut out, key);
        nested(&mut out, value)?;
    }
    if !timeline_done {
        field(&mut out, TIMELINE);
        timeline(sink, &mut out, lines)?;
    }
    out.extend_from_slice(if first { b"}" } else { b"\n}" });
    sink.write_all(&out)
}

/// A value one level deep, as the pretty printer indents it there: its own rendering with
/// every line break followed by one more indent (JSON strings hold no raw line breaks).
fn nested(out: &mut Vec<u8>, value: &Value) -> io::Result<()> {
    let text = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
    for (i, part) in text.split(|b| *b == b'\n').enumerate() {
        if i > 0 {
            out.extend_from_slice(b"\n  ");
        }
        out.extend_from_slice(part);
    }
    Ok(())
}

/// The timeline array, flushing to `sink` as it grows.
fn timeline(sink: &mut impl Write, out: &mut Vec<u8>, lines: &[Line<'_>]) -> io::Result<()> {
    if lines.is_empty() {
        out.extend_from_slice(b"[]");
        return Ok(());
    }
    out.push(b'[');
    for (i, line) in lines.iter().enumerate() {
        out.extend_from_slice(if i == 0 { b"\n    {" } else { b",\n    {" });
        out.extend_from_slice(b"\n      \"message\": ");
        json_string::push_quoted(out, line.message);
        out.extend_from_slice(b",\n      \"metric\": ");
        json_string::push_quoted(out, line.metric);
        out.extend_from_slice(b",\n      \"phase\": ");
        json_string::push_quoted(out, line.phase);
        out.extend_from_slice(b",\n      \"resumeAt\": ");
        match &line.resume_at {
            Some(at) => json_string::push_quoted(out, at),
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\n      \"time\": ");
        json_string::push_quoted(out, &line.time);
        out.extend_from_slice(b",\n      \"value\": ");
        json_string::push_quoted(out, line.value);
        out.extend_from_slice(b"\n    }");
        if out.len() >= FLUSH_AT {
            sink.write_all(out)?;
            out.clear();
        }
    }
    out.extend_from_slice(b"\n  ]");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The document as it was written before: one `Value`, pretty-printed by serde_json.
    fn oracle(head: &Map<String, Value>, lines: &[Line<'_>]) -> String {
        let mut doc = head.clone();
        let timeline: Vec<Value> = lines
            .iter()
            .map(|l| {
                json!({
                    "message": l.message,
                    "metric": l.metric,
                    "phase": l.phase,
                    "resumeAt": l.resume_at,
                    "time": l.time,
                    "value": l.value,
                })
            })
            .collect();
        doc.insert(TIMELINE.into(), Value::Array(timeline));
        serde_json::to_string_pretty(&Value::Object(doc)).unwrap()
    }

    fn written(head: &Map<String, Value>, lines: &[Line<'_>]) -> String {
        let mut out = Vec::new();
        write(&mut out, head, lines).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_document_is_what_serde_json_prints() {
        let head = json!({
            "endedAt": "2026-12-01T20:15:00Z",
            "from": "2026-12-01T19:00:00Z",
            "message": "Metric \"error-rate\" assessed Failed due to failed (3) > failureLimit (2)",
            "metrics": [{"name": "error-rate", "reason": "", "completedAt": null, "count": 3,
                         "nested": {"list": [1, 2.5, []], "empty": {}}}],
            "phase": "Failed",
            "queries": {"servedFromRange": 10, "passedThrough": 0, "rangeFetches": 2},
            "skipped": [],
            "summary": "Failed at 2026-12-01 20:15:00 UTC (1h15m after the start): ...",
            "terminatedAtWindowEnd": false,
            "to": "2026-12-01T23:00:00Z",
        });
        let Value::Object(head) = head else {
            unreachable!()
        };
        let lines = vec![
            Line {
                message: "result [0.031]: successCondition `result[0] < 0.02` does not hold",
                metric: "error-rate",
                phase: "Failed",
                resume_at: None,
                time: "2026-12-01T19:00:00Z".into(),
                value: "[0.031]",
            },
            Line {
                message: "waiting for traffic: 15 requests seen, 300 needed\n\"odd\"",
                metric: "canary-vs-stable",
                phase: "Running",
                resume_at: Some("2026-12-01T19:01:00Z".into()),
                time: "2026-12-01T19:00:10Z".into(),
                value: "{\"alpha\":0.05,\"canary\":{\"bad\":75}}",
            },
        ];
        assert_eq!(written(&head, &lines), oracle(&head, &lines));
        assert_eq!(written(&head, &[]), oracle(&head, &[]));
        // The timeline's place in key order, first and last too.
        let mut only_early = Map::new();
        only_early.insert("a".into(), json!(1));
        assert_eq!(written(&only_early, &lines), oracle(&only_early, &lines));
        let mut only_late = Map::new();
        only_late.insert("zz".into(), json!({"k": [1]}));
        assert_eq!(written(&only_late, &lines), oracle(&only_late, &lines));
        assert_eq!(written(&Map::new(), &lines), oracle(&Map::new(), &lines));
    }

    #[test]
    fn a_long_timeline_is_flushed_in_pieces_and_stays_whole() {
        let value = "{\"k\":\"".to_string() + &"x".repeat(2000) + "\"}";
        let lines: Vec<Line<'_>> = (0..1000)
            .map(|i| Line {
                message: "m",
                metric: "x",
                phase: "Successful",
                resume_at: None,
                time: format!("t{i}"),
                value: &value,
            })
            .collect();
        assert_eq!(written(&Map::new(), &lines), oracle(&Map::new(), &lines));
    }
}
