//! One call into the engine, as every surface makes it: the metric, when, by when, how far the
//! spec is trusted, and where the call stands in its run. Plain data; [`Engine::call`] decides
//! the rules the surfaces used to decide themselves:
//!
//! - **deadline → Error**: a measurement without a verdict by the deadline is an Error saying
//!   so, or — when the caller set the deadline and has gone — no measurement at all
//!   ([`CallError::DeadlineExceeded`], gRPC's DEADLINE_EXCEEDED);
//! - **trust**: a spec that came over the network may not name files on this machine
//!   (`bearerTokenFile`, `basicAuth`, `caFile`), or a caller could have rollgate send a local
//!   secret to a Prometheus address of its choosing;
//! - **run position**: which check of its run this is, from the caller's AnalysisRun when it
//!   sends one, else from the engine's run tracker ([`super::runs`]).

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::runs::RunKey;
use super::{Engine, EvalOptions};
use crate::measurement::Measurement;
use crate::spec::Metric;

/// How far a call's spec is trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// From the operator (a template loaded from disk, a plugin host that is trusted like the
    /// controller, the command line): the spec may name files on this machine.
    Operator,
    /// From the network (an inline spec, a remote gRPC call): it may not.
    Network,
}

impl Trust {
    /// Whether `metric` may run at this trust; the refusal names the key.
    pub fn admit(self, metric: &Metric) -> Result<(), CallError> {
        match (self, metric.server_file_key()) {
            (Trust::Network, Some(key)) => Err(CallError::ServerFile { key }),
            _ => Ok(()),
        }
    }
}

/// Why a call has no measurement.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// A spec from the network names a file on this machine.
    #[error(
        "prometheus.{key}: specs sent over the network may not read files on the rollgate server"
    )]
    ServerFile {
        /// The spec key (`bearerTokenFile`, `basicAuth`, `caFile`).
        key: &'static str,
    },
    /// The caller's own deadline passed: it is no longer waiting for an answer.
    #[error("the call's deadline passed before a verdict was reached")]
    DeadlineExceeded,
}

/// What passing a call's cut-off means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expiry {
    /// The caller set the deadline and has gone: nothing is answered, not even a measurement
    /// finished a moment too late.
    CallerGone,
    /// An Error measurement saying which limit passed.
    Error(Limit),
}

/// The limit an expired call's Error names. Written out only when it passes: every call has
/// one and nearly none passes, so the message is not built for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// A server's time to answer (`--deadline`), named by `bound`.
    Answer {
        /// The whole time to answer.
        total: Duration,
        /// How the limit is named in the message, e.g. `"deadline (--deadline)"`.
        bound: &'static str,
    },
    /// The measurement budget of a call whose caller set no shorter deadline.
    Budget(Duration),
}

impl Limit {
    /// The Error measurement's message.
    pub fn message(self) -> String {
        match self {
            Limit::Answer { total, bound } => format!(
                "no verdict within the {total:?} {bound}: the Prometheus queries took too long"
            ),
            Limit::Budget(budget) => format!(
                "no verdict within the measurement budget of {} s",
                budget.as_secs()
            ),
        }
    }
}

/// By when a call must be answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deadline {
    /// Every Prometheus query of the measurement ends by then (retries included); the
    /// engine's own Error then says which query timed out.
    pub queries_by: Instant,
    /// The measurement is cut off then, whatever it is doing.
    pub cut_off_at: Instant,
    /// What the cut-off means.
    pub on_expiry: Expiry,
}

/// How long past a budget the measurement may run before it is cut off: the queries end at the
/// budget and their Error needs a moment to come back.
pub(crate) const BUDGET_SLACK: Duration = Duration::from_secs(2);

impl Deadline {
    /// An answer within `total` from now (a server's `--deadline`): the queries get most of
    /// it ([`engine_budget`]), the rest is for their Error to come back before the cut-off,
    /// which is an Error naming `bound` (e.g. `"deadline (--deadline)"`).
    pub fn answer_within(total: Duration, bound: &'static str) -> Deadline {
        let now = Instant::now();
        Deadline {
            queries_by: after(now, engine_budget(total)),
            cut_off_at: after(now, total),
            on_expiry: Expiry::Error(Limit::Answer { total, bound }),
        }
    }

    /// A call with an optional deadline of the caller's (gRPC's `grpc-timeout`) within the
    /// service's `budget`: a caller's deadline no longer than the budget is the caller's (past
    /// it the caller has gone); otherwise the budget bounds the queries and, `BUDGET_SLACK`
    /// later, the measurement is an Error.
    pub fn for_call(caller: Option<Duration>, budget: Duration) -> Deadline {
        let now = Instant::now();
        match caller {
            Some(t) if t <= budget => Deadline {
                queries_by: after(now, t),
                cut_off_at: after(now, t),
                on_expiry: Expiry::CallerGone,
            },
            _ => Deadline {
                queries_by: after(now, budget),
                cut_off_at: after(now, budget.saturating_add(BUDGET_SLACK)),
                on_expiry: Expiry::Error(Limit::Budget(budget)),
            },
        }
    }
}

/// `now + d`, or about a century from now when that does not fit (a huge `--timeout` must not
/// panic).
fn after(now: Instant, d: Duration) -> Instant {
    now.checked_add(d)
        .or_else(|| now.checked_add(Duration::from_secs(100 * 365 * 24 * 3600)))
        .unwrap_or(now)
}

/// The share of a deadline given to the queries; the rest is for the engine's own Error to
/// come back before the cut-off.
pub(crate) fn engine_budget(deadline: Duration) -> Duration {
    deadline.saturating_sub((deadline / 10).min(Duration::from_millis(500)))
}

/// Where a call stands in its run of repeated checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Position {
    /// Measured on its own (a dry run): a single check.
    Single,
    /// The caller's AnalysisRun says: when it began and, when its history was sent, how many
    /// of the metric's measurements count towards `count` (see [`EvalOptions`]).
    Known {
        /// The run's `startedAt`.
        started_at: Option<DateTime<Utc>>,
        /// The metric's counted measurements so far.
        checks_done: Option<u32>,
    },
    /// The caller cannot say: the engine's run tracker places the call by `run` (what every
    /// call of the run carries) and the metric, for a metric with an `interval`.
    Tracked {
        /// What identifies the run (see [`RunKey::run`]).
        run: String,
        /// The template (or `inline`) and metric name.
        metric: String,
    },
}

/// One measurement asked of the engine.
#[derive(Debug, Clone)]
pub struct Call<'a> {
    /// The metric to measure.
    pub metric: &'a Metric,
    /// Evaluation time; `None` is now.
    pub at: Option<DateTime<Utc>>,
    /// By when it must be answered.
    pub deadline: Deadline,
    /// How far the spec is trusted.
    pub trust: Trust,
    /// Where it stands in its run.
    pub position: Position,
    /// Argo's `Resume`: the in-flight measurement to continue, if any.
    pub previous: Option<&'a Measurement>,
}

impl Engine {
    /// Measures one call: refuses what its trust does not admit, places it in its run, and
    /// answers within its deadline (see the module documentation for the rules).
    pub async fn call(&self, call: Call<'_>) -> Result<Measurement, CallError> {
        call.trust.admit(call.metric)?;
        let started_at = Utc::now();
        let (run_started_at, checks_done) = match &call.position {
            Position::Single => (None, None),
            Position::Known {
                started_at,
                checks_done,
            } => (*started_at, *checks_done),
            Position::Tracked { run, metric } => {
                let start = call
                    .metric
                    .interval
                    .filter(|i| !i.is_zero())
                    .map(|interval| {
                        let key = RunKey {
                            run: run.clone(),
                            metric: metric.clone(),
                        };
                        self.runs
                            .started(key, interval, call.at.unwrap_or(started_at))
                    })
                    .transpose();
                match start {
                    Ok(start) => (start, None),
                    Err(full) => return Ok(Measurement::error(full.to_string(), started_at)),
                }
            }
        };
        let opts = EvalOptions {
            at: call.at,
            deadline: Some(call.deadline.queries_by),
            run_started_at,
            checks_done,
            ..EvalOptions::default()
        };
        let work = async {
            match call.previous {
                Some(previous) => self.resume(call.metric, previous, &opts).await,
                None => self.measure(call.metric, &opts).await,
            }
        };
        let caller_gone = call.deadline.on_expiry == Expiry::CallerGone;
        match tokio::time::timeout_at(call.deadline.cut_off_at, work).await {
            // Finished, but after the caller stopped waiting: it would never be read.
            Ok(_) if caller_gone && Instant::now() >= call.deadline.cut_off_at => {
                Err(CallError::DeadlineExceeded)
            }
            Ok(m) => Ok(m),
            Err(_) => match call.deadline.on_expiry {
                Expiry::CallerGone => Err(CallError::DeadlineExceeded),
                Expiry::Error(limit) => Ok(Measurement::error(limit.message(), started_at)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_gets_most_of_the_deadline() {
        assert_eq!(
            engine_budget(Duration::from_secs(8)),
            Duration::from_millis(7500)
        );
        assert_eq!(
            engine_budget(Duration::from_secs(1)),
            Duration::from_millis(900)
        );
    }

    #[test]
    fn a_callers_deadline_within_the_budget_is_the_callers() {
        let budget = Duration::from_secs(30);
        let d = Deadline::for_call(Some(Duration::from_secs(5)), budget);
        assert_eq!(d.on_expiry, Expiry::CallerGone);
        assert_eq!(d.queries_by, d.cut_off_at);
        for caller in [None, Some(Duration::from_secs(60))] {
            let d = Deadline::for_call(caller, budget);
            assert_eq!(d.cut_off_at - d.queries_by, BUDGET_SLACK);
            assert!(
                matches!(&d.on_expiry, Expiry::Error(l) if l.message() == "no verdict within the measurement budget of 30 s"),
                "{:?}",
                d.on_expiry
            );
        }
        let d = Deadline::answer_within(Duration::from_secs(2), "deadline (--deadline)");
        assert_eq!(d.cut_off_at - d.queries_by, Duration::from_millis(200));
        assert!(
            matches!(&d.on_expiry, Expiry::Error(l) if l.message() == "no verdict within the 2s deadline (--deadline): the Prometheus queries took too long"),
            "{:?}",
            d.on_expiry
        );
    }
}
