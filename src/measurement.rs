//! The result every surface returns: one Argo-style measurement.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// An Argo Rollouts analysis phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Phase {
    /// The metric passed.
    Successful,
    /// The metric failed.
    Failed,
    /// Neither passed nor failed (too little data, or neither condition held).
    Inconclusive,
    /// rollgate could not judge (never looks like Successful).
    Error,
    /// In flight: Argo calls `Resume` at or after `resume_at`.
    Running,
}

impl Phase {
    /// Every phase, in declaration order (legends, tables, exhaustive tests).
    pub const ALL: [Phase; 5] = [
        Phase::Successful,
        Phase::Failed,
        Phase::Inconclusive,
        Phase::Error,
        Phase::Running,
    ];

    /// Argo's spelling of the phase, as it travels on every wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Successful => "Successful",
            Phase::Failed => "Failed",
            Phase::Inconclusive => "Inconclusive",
            Phase::Error => "Error",
            Phase::Running => "Running",
        }
    }

    /// Parses Argo's spelling (as sent back to the plugin in `Resume`/`Terminate`).
    pub fn parse(s: &str) -> Option<Phase> {
        Some(match s {
            "Successful" => Phase::Successful,
            "Failed" => Phase::Failed,
            "Inconclusive" => Phase::Inconclusive,
            "Error" => Phase::Error,
            "Running" => Phase::Running,
            _ => return None,
        })
    }

    /// Combines the verdicts of several metrics into one: any Failed wins, then any Error,
    /// then any Inconclusive or Running; Successful only when every one is.
    pub fn combine(phases: impl IntoIterator<Item = Phase>) -> Phase {
        let mut worst = Phase::Successful;
        for p in phases {
            if p.severity() > worst.severity() {
                worst = p;
            }
        }
        worst
    }

    fn severity(self) -> u8 {
        match self {
            Phase::Successful => 0,
            Phase::Running => 1,
            Phase::Inconclusive => 2,
            Phase::Error => 3,
            Phase::Failed => 4,
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One measurement of one metric, as Argo Rollouts stores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Measurement {
    /// The verdict.
    pub phase: Phase,
    /// One sentence saying why the phase was reached.
    pub message: String,
    /// Argo-formatted value (`10`, `[0.97]`, `NaN`) or a JSON object for compare/fleet.
    pub value: String,
    /// Resolved queries, counts, statistics. Never secrets.
    pub metadata: BTreeMap<String, String>,
    /// When the measurement began.
    pub started_at: DateTime<Utc>,
    /// `None` while in flight (phase Running).
    pub finished_at: Option<DateTime<Utc>>,
    /// When a Running measurement wants to be measured again.
    pub resume_at: Option<DateTime<Utc>>,
}

impl Measurement {
    /// A finished measurement with the given phase and message and no value.
    pub fn finished(phase: Phase, message: impl Into<String>, started_at: DateTime<Utc>) -> Self {
        Measurement {
            phase,
            message: message.into(),
            value: String::new(),
            metadata: BTreeMap::new(),
            started_at,
            finished_at: Some(Utc::now()),
            resume_at: None,
        }
    }

    /// An Error measurement: the tool could not judge.
    pub fn error(message: impl Into<String>, started_at: DateTime<Utc>) -> Self {
        Self::finished(Phase::Error, message, started_at)
    }
}

/// Which key set a surface's measurement JSON uses. Both are public (HTTP bodies, `dry-run -o
/// json`), so they stay as they were; one builder writes both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonKeys {
    /// `rollgate serve`'s answers: Argo's fields, then `metric` and `kind`; times as serde
    /// writes them (RFC 3339, as many fraction digits as needed).
    Serve,
    /// `rollgate dry-run -o json`: Argo's fields, then `template`, `name` and `kind`; times in
    /// RFC 3339 with milliseconds.
    DryRun,
}

/// Which metric a measurement belongs to, for its JSON.
#[derive(Debug, Clone, Copy)]
pub struct JsonLabels<'a> {
    /// The template it comes from (written by [`JsonKeys::DryRun`] only).
    pub template: &'a str,
    /// The metric's name.
    pub metric: &'a str,
    /// Its kind (`query`, `compare`, `fleet`, `prometheus`).
    pub kind: &'a str,
}

impl Measurement {
    /// The measurement as JSON in a surface's key set: Argo's fields (`phase`, `message`,
    /// `value`, `metadata`, `startedAt`, `finishedAt`, `resumeAt`) and, with `labels`, the
    /// metric's names.
    pub fn to_json(&self, keys: JsonKeys, labels: Option<JsonLabels<'_>>) -> Value {
        let time = |t: DateTime<Utc>| match keys {
            JsonKeys::Serve => serde_json::to_value(t).unwrap_or(Value::Null),
            JsonKeys::DryRun => Value::String(t.to_rfc3339_opts(SecondsFormat::Millis, true)),
        };
        let mut map = Map::new();
        map.insert("phase".into(), self.phase.as_str().into());
        map.insert("message".into(), self.message.clone().into());
        map.insert("value".into(), self.value.clone().into());
        let metadata = self
            .metadata
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        map.insert("metadata".into(), Value::Object(metadata));
        map.insert("startedAt".into(), time(self.started_at));
        map.insert(
            "finishedAt".into(),
            self.finished_at.map_or(Value::Null, time),
        );
        map.insert("resumeAt".into(), self.resume_at.map_or(Value::Null, time));
        if let Some(l) = labels {
            match keys {
                JsonKeys::Serve => {
                    map.insert("metric".into(), l.metric.into());
                }
                JsonKeys::DryRun => {
                    map.insert("template".into(), l.template.into());
                    map.insert("name".into(), l.metric.into());
                }
            }
            map.insert("kind".into(), l.kind.into());
        }
        Value::Object(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combine_orders_failed_error_inconclusive() {
        use Phase::*;
        assert_eq!(Phase::combine([Successful, Inconclusive, Error]), Error);
        assert_eq!(Phase::combine([Successful, Error, Failed]), Failed);
        assert_eq!(Phase::combine([Successful, Running]), Running);
        assert_eq!(Phase::combine([Successful, Successful]), Successful);
        assert_eq!(Phase::combine([]), Successful);
    }

    #[test]
    fn phase_round_trips_through_argo_spelling() {
        for p in Phase::ALL {
            assert_eq!(Phase::parse(p.as_str()), Some(p));
        }
        assert_eq!(Phase::parse("Pending"), None);
    }

    #[test]
    fn each_surface_keeps_its_json_keys() {
        let at = DateTime::parse_from_rfc3339("2026-01-02T03:04:05.5Z")
            .unwrap()
            .with_timezone(&Utc);
        let mut m = Measurement::error("boom", at);
        m.finished_at = Some(at);
        m.metadata.insert("query".into(), "up".into());
        let labels = JsonLabels {
            template: "t",
            metric: "m",
            kind: "query",
        };
        let serve = m.to_json(JsonKeys::Serve, Some(labels));
        // The serve key set is serde's encoding of the measurement plus metric and kind.
        let mut expected = serde_json::to_value(&m).unwrap();
        expected["metric"] = "m".into();
        expected["kind"] = "query".into();
        assert_eq!(serve, expected);
        let cli = m.to_json(JsonKeys::DryRun, Some(labels));
        assert_eq!(cli["name"], "m");
        assert_eq!(cli["template"], "t");
        assert_eq!(cli["startedAt"], "2026-01-02T03:04:05.500Z");
        assert!(cli.get("metric").is_none() && serve.get("name").is_none());
        assert_eq!(cli["resumeAt"], Value::Null);
    }
}
