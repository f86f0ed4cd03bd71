//! Several metrics' measurements as one answer (a template's metrics behind one webhook or web
//! provider call): the combined phase ([`Phase::combine`]), one line of reasons, and the one
//! measurement that stands for them all.

use serde_json::{Map, Value};

use crate::measurement::{JsonKeys, JsonLabels, Measurement, Phase};

/// One metric's measurement, with its names.
#[derive(Debug, Clone)]
pub(crate) struct Named {
    /// The metric's name.
    pub metric: String,
    /// Its kind (`query`, `compare`, `fleet`, `prometheus`).
    pub kind: &'static str,
    /// The engine's measurement.
    pub measurement: Measurement,
}

impl Named {
    /// The measurement as JSON in a surface's key set (`template` for the dry-run keys).
    pub(crate) fn to_json(&self, keys: JsonKeys, template: &str) -> Value {
        self.measurement.to_json(
            keys,
            Some(JsonLabels {
                template,
                metric: &self.metric,
                kind: self.kind,
            }),
        )
    }
}

/// Every metric's measurement and the combined verdict.
#[derive(Debug, Clone)]
pub(crate) struct Combined {
    /// `Phase::combine` of the measurements: any Failed, then Error, then Inconclusive or
    /// Running; Successful only when every one is.
    pub phase: Phase,
    /// In the plan's order.
    pub results: Vec<Named>,
}

impl Combined {
    /// The combination of `results`.
    pub(crate) fn new(results: Vec<Named>) -> Combined {
        Combined {
            phase: Phase::combine(results.iter().map(|r| r.measurement.phase)),
            results,
        }
    }

    /// One line for events and logs: `Failed: error-ratio: <message>`, or with several
    /// metrics `Failed: a Failed: <message>; b Successful: <message>`.
    pub(crate) fn reason(&self) -> String {
        use std::fmt::Write;
        // Messages may span lines; the reason is one line with single spaces.
        let push_one_line = |out: &mut String, message: &str| {
            // Most messages are one ASCII line already: copied whole.
            let spaced = |b: &[u8]| b.first() == Some(&b' ') || b.last() == Some(&b' ');
            let bytes = message.as_bytes();
            if message.is_ascii()
                && !spaced(bytes)
                && !bytes.iter().any(|&b| b.is_ascii_whitespace() && b != b' ')
                && !message.contains("  ")
            {
                out.push_str(message);
                return;
            }
            for (i, word) in message.split_whitespace().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(word);
            }
        };
        let mut out = String::with_capacity(128);
        // Writing to a String cannot fail.
        match self.results.as_slice() {
            [only] => {
                let _ = write!(out, "{}: {}: ", self.phase, only.metric);
                push_one_line(&mut out, &only.measurement.message);
            }
            many => {
                let _ = write!(out, "{}: ", self.phase);
                for (i, r) in many.iter().enumerate() {
                    if i > 0 {
                        out.push_str("; ");
                    }
                    let _ = write!(out, "{} {}: ", r.metric, r.measurement.phase);
                    push_one_line(&mut out, &r.measurement.message);
                }
            }
        }
        out
    }

    /// The one measurement that stands for several: the combined phase, the reason as its
    /// message, each metric's value by name (a JSON object as text), no metadata, the earliest
    /// start, and the latest finish once every one has finished. `None` for fewer than two.
    pub(crate) fn summary(&self) -> Option<Measurement> {
        let [_, _, ..] = self.results.as_slice() else {
            return None;
        };
        let many = &self.results;
        let started_at = many.iter().map(|r| r.measurement.started_at).min()?;
        let finished_at = many
            .iter()
            .map(|r| r.measurement.finished_at)
            .collect::<Option<Vec<_>>>()
            .and_then(|all| all.into_iter().max());
        let values: Map<String, Value> = many
            .iter()
            .map(|r| (r.metric.clone(), Value::String(r.measurement.value.clone())))
            .collect();
        Some(Measurement {
            phase: self.phase,
            message: self.reason(),
            value: Value::Object(values).to_string(),
            metadata: Default::default(),
            started_at,
            finished_at,
            resume_at: None,
        })
    }

    /// Every measurement as JSON in a surface's key set.
    pub(crate) fn measurements_json(&self, keys: JsonKeys, template: &str) -> Value {
        Value::Array(
            self.results
                .iter()
                .map(|r| r.to_json(keys, template))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn named(metric: &str, phase: Phase, value: &str) -> Named {
        let mut measurement =
            Measurement::finished(phase, format!("{metric}  said\nso"), Utc::now());
        measurement.value = value.into();
        Named {
            metric: metric.into(),
            kind: "query",
            measurement,
        }
    }

    #[test]
    fn several_metrics_make_one_answer() {
        let one = Combined::new(vec![named("a", Phase::Successful, "1")]);
        assert_eq!(one.reason(), "Successful: a: a said so");
        assert!(one.summary().is_none());
        let two = Combined::new(vec![
            named("a", Phase::Successful, "1"),
            named("b", Phase::Failed, "[2]"),
        ]);
        assert_eq!(two.phase, Phase::Failed);
        assert_eq!(
            two.reason(),
            "Failed: a Successful: a said so; b Failed: b said so"
        );
        let summary = two.summary().unwrap();
        assert_eq!(summary.phase, Phase::Failed);
        assert_eq!(summary.value, r#"{"a":"1","b":"[2]"}"#);
        assert!(summary.finished_at.is_some());
        let mut running = two.clone();
        running.results[1].measurement.finished_at = None;
        assert!(running.summary().unwrap().finished_at.is_none());
    }

    #[test]
    fn the_reason_is_one_line_whatever_the_message() {
        let with = |message: &str| {
            let mut one = named("a", Phase::Failed, "1");
            one.measurement.message = message.into();
            Combined::new(vec![one]).reason()
        };
        assert_eq!(with("plain, one line"), "Failed: a: plain, one line");
        assert_eq!(with(" padded\t"), "Failed: a: padded");
        assert_eq!(with("non\u{a0}breaking  é"), "Failed: a: non breaking é");
        assert_eq!(with(""), "Failed: a: ");
    }
}
