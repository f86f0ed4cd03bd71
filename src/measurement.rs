//! The result every surface returns: one Argo-style measurement.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

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
}
