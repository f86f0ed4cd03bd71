//! `backtest -o json`: the document exactly as `serde_json::to_writer_pretty` prints it, with
//! the timeline written here directly.
//!
//! A week at 1m is 20,000 timeline entries whose messages and values (a compare value is itself
//! JSON, full of quotes) are escaped into about 15 MB; serde_json escapes byte by byte through
//! `io::Write` calls, which was a tenth of a backtest. The small rest of the document still goes
//! through serde_json, and a test holds the two to the same bytes.

use std::io::{self, Write};

use serde_json::{Map, Value};

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
        escaped(out, key);
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
        escaped(out, line.message);
        out.extend_from_slice(b",\n      \"metric\": ");
        escaped(out, line.metric);
        out.extend_from_slice(b",\n      \"phase\": ");
        escaped(out, line.phase);
        out.extend_from_slice(b",\n      \"resumeAt\": ");
        match &line.resume_at {
            Some(at) => escaped(out, at),
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\n      \"time\": ");
        escaped(out, &line.time);
        out.extend_from_slice(b",\n      \"value\": ");
        escaped(out, line.value);
        out.extend_from_slice(b"\n    }");
        if out.len() >= FLUSH_AT {
            sink.write_all(out)?;
            out.clear();
        }
    }
    out.extend_from_slice(b"\n  ]");
    Ok(())
}

const LOWS: u64 = 0x7f7f_7f7f_7f7f_7f7f;
const ONES: u64 = 0x0101_0101_0101_0101;

/// The high bit of every byte of `t` that is zero, and no other bit (exact per byte: the
/// low seven bits plus 0x7f cannot carry into the next byte).
fn zero_bytes(t: u64) -> u64 {
    !(((t & LOWS).wrapping_add(LOWS)) | t | LOWS)
}

/// The high bit of every byte of `w` that JSON escapes: below 0x20 (its top three bits
/// clear), a quote or a backslash.
fn escape_mask(w: u64) -> u64 {
    zero_bytes(w & (ONES * 0xe0))
        | zero_bytes(w ^ (ONES * u64::from(b'"')))
        | zero_bytes(w ^ (ONES * u64::from(b'\\')))
}

/// `s` as a JSON string, escaped exactly as serde_json escapes it: `\"`, `\\`, `\b`, `\f`,
/// `\n`, `\r`, `\t`, other control characters as `\u00xx`; everything else as it is. The
/// next byte to escape is found eight bytes at a time, and the text up to it copied at once.
fn escaped(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0; // first byte not yet copied
    let mut i = 0; // first byte not yet looked at
    while i < bytes.len() {
        let mut word = [b'a'; 8]; // a short tail is padded with a byte that needs no escape
        let n = match bytes.get(i..i + 8) {
            Some(full) => {
                word.copy_from_slice(full);
                8
            }
            None => {
                let rest = bytes.get(i..).unwrap_or_default();
                word[..rest.len()].copy_from_slice(rest);
                rest.len()
            }
        };
        let mask = escape_mask(u64::from_le_bytes(word));
        if mask == 0 {
            i += n;
            continue;
        }
        let at = i + usize::try_from(mask.trailing_zeros() / 8).unwrap_or(0);
        let b = bytes.get(at).copied().unwrap_or(b'a');
        out.extend_from_slice(bytes.get(start..at).unwrap_or_default());
        match escape_of(b) {
            Some(Escape::Short(c)) => out.extend_from_slice(&[b'\\', c]),
            Some(Escape::Unicode) => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0xf)]);
            }
            None => out.push(b),
        }
        start = at + 1;
        i = at + 1;
    }
    out.extend_from_slice(bytes.get(start..).unwrap_or_default());
    out.push(b'"');
}

/// How one byte is escaped.
enum Escape {
    /// A backslash and this character.
    Short(u8),
    /// `\u00xx`.
    Unicode,
}

fn escape_of(b: u8) -> Option<Escape> {
    Some(match b {
        b'"' => Escape::Short(b'"'),
        b'\\' => Escape::Short(b'\\'),
        0x08 => Escape::Short(b'b'),
        0x0c => Escape::Short(b'f'),
        b'\n' => Escape::Short(b'n'),
        b'\r' => Escape::Short(b'r'),
        b'\t' => Escape::Short(b't'),
        0x00..=0x1f => Escape::Unicode,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn escaped_string(s: &str) -> String {
        let mut out = Vec::new();
        escaped(&mut out, s);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn escapes_as_serde_json_does() {
        for s in [
            "",
            "plain text of more than eight bytes",
            "\"",
            "a\\b",
            "{\"alpha\":0.05,\"canary\":{\"bad\":75,\"rate\":0.005}}",
            "\u{0}\u{1}\u{8}\t\n\u{b}\u{c}\r\u{1f} \u{7f}",
            "é ü 漢字 😀 \"mixed\"\u{2028}",
            "1234567\"",
            "12345678\"",
        ] {
            assert_eq!(
                escaped_string(s),
                serde_json::to_string(s).unwrap(),
                "{s:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn escapes_any_string_as_serde_json_does(s in any::<String>()) {
            prop_assert_eq!(escaped_string(&s), serde_json::to_string(&s).unwrap());
        }

        #[test]
        fn escapes_json_like_strings_as_serde_json_does(s in "[\"\\\\a-z0-9{}:,.\\n\\t\\u{1}é]{0,64}") {
            prop_assert_eq!(escaped_string(&s), serde_json::to_string(&s).unwrap());
        }
    }

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
