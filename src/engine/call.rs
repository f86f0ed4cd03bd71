//! One call into the engine, as every surface makes it: the metric, when, by when, how far the
//! spec is trusted, and where the call stands in its run. Plain data; [`Engine::call`] decides
//! the rules the surfaces used to decide themselves:
//!
//! - **deadline → Error**: a measurement without a verdict by the deadline is an Error saying
//!   so, or — when the caller set the deadline and has gone — no measurement at all
//!   ([`CallError::DeadlineExceeded`], gRPC's DEADLINE_EXCEEDED);
//! - **trust** ([`Trust`], one policy per surface): a spec that came over the network may not
//!   name files on this machine (`bearerTokenFile`, `basicAuth`, `caFile`), or a caller could
//!   have rollgate send a local secret to a Prometheus address of its choosing, nor get the
//!   default address's credentials; in plugin mode credential files are read only under the
//!   directories the operator allows; `--no-inline-specs` refuses specs sent with a call;
//! - **run position**: which check of its run this is, from the caller's AnalysisRun when it
//!   sends one, else from the engine's run tracker ([`super::runs`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::runs::RunKey;
use super::{Engine, EvalOptions};
use crate::measurement::Measurement;
use crate::spec::Metric;

/// The one trust policy of a surface, decided here and only translated by the surfaces: which
/// specs a call may bring, which files on this machine they may name, and whether the
/// operator's default Prometheus credentials go with them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trust {
    /// Whether a spec sent with the call (an inline spec, a gRPC `Analyze`) is accepted at
    /// all; `serve --no-inline-specs` says no for HTTP and gRPC alike.
    pub inline_specs: bool,
    /// Which files on this machine a spec may have read (`bearerTokenFile`,
    /// `basicAuth.passwordFile`, `caFile`).
    pub files: FileAccess,
    /// Whether a spec that names no address gets the operator's default address with the
    /// credentials in its userinfo.
    pub default_credentials: bool,
}

/// Which files on this machine a spec may have read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileAccess {
    /// Any: the spec is the operator's (a template loaded from disk, the command line).
    Any,
    /// Only files under these directories (canonical paths), after resolving symlinks and
    /// `..`: plugin mode, where template authors are less privileged than the controller.
    Under(Arc<[PathBuf]>),
    /// None: the spec came over the network, and a caller could otherwise have rollgate send a
    /// local secret to a Prometheus address of its choosing.
    Nowhere,
}

/// The plugin argument that allows credential directories, named in refusals.
pub const ALLOW_CREDENTIAL_DIR: &str = "--allow-credential-dir (ROLLGATE_ALLOW_CREDENTIAL_DIRS)";

/// A credential directory the operator allowed that cannot be resolved.
#[derive(Debug, thiserror::Error)]
#[error("{ALLOW_CREDENTIAL_DIR}: cannot resolve {}: {source}", dir.display())]
pub struct CredentialDirError {
    /// The directory as given.
    pub dir: PathBuf,
    /// Why it cannot be resolved.
    pub source: std::io::Error,
}

impl Trust {
    /// The operator's own specs: templates loaded from disk, the command line.
    pub const OPERATOR: Trust = Trust {
        inline_specs: true,
        files: FileAccess::Any,
        default_credentials: true,
    };

    /// Specs from a network caller, inline specs allowed.
    pub const NETWORK: Trust = Trust {
        inline_specs: true,
        files: FileAccess::Nowhere,
        default_credentials: false,
    };

    /// Specs from a network caller; `inline_specs` false refuses every spec sent with a call.
    pub fn network(inline_specs: bool) -> Trust {
        Trust {
            inline_specs,
            ..Trust::NETWORK
        }
    }

    /// Plugin mode: the controller hands over what template authors wrote, and credential files
    /// are read only under `dirs` (each canonicalised; one that cannot be resolved is an error
    /// naming it). The default address is the operator's plugin argument, its credentials
    /// meant for these templates.
    pub fn plugin(dirs: &[PathBuf]) -> Result<Trust, CredentialDirError> {
        let canonical = dirs
            .iter()
            .map(|d| {
                std::fs::canonicalize(d).map_err(|source| CredentialDirError {
                    dir: d.clone(),
                    source,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Trust {
            inline_specs: true,
            files: FileAccess::Under(canonical.into()),
            default_credentials: true,
        })
    }

    /// Whether a call may bring its own spec.
    pub fn admit_inline(&self) -> Result<(), CallError> {
        if self.inline_specs {
            Ok(())
        } else {
            Err(CallError::InlineDisabled)
        }
    }

    /// Whether `metric` may run at this trust; the refusal names the key.
    pub fn admit(&self, metric: &Metric) -> Result<(), CallError> {
        match &self.files {
            FileAccess::Any => Ok(()),
            FileAccess::Nowhere => match (metric.server_file_key(), metric.aws_credentials()) {
                (Some(key), _) => Err(CallError::ServerFile { key }),
                (None, Some((key, _))) => Err(CallError::AmbientCredentials { key }),
                (None, None) => Ok(()),
            },
            FileAccess::Under(dirs) => {
                // The chain's own sources (environment, IRSA, Pod Identity, the default
                // profile) are the operator's, as the default address is; a profile the spec
                // names picks a section of the shared credentials file, which is then read
                // only when it lies under an allowed directory, like any credential file.
                if let Some((_, Some(_profile))) = metric.aws_credentials() {
                    let file = crate::prometheus::shared_credentials_file();
                    let inside = file.as_ref().is_some_and(|f| {
                        std::fs::canonicalize(f)
                            .is_ok_and(|real| dirs.iter().any(|d| real.starts_with(d)))
                    });
                    if !inside {
                        let key = match metric.aws_credentials() {
                            Some(("sigv4", _)) | None => "sigv4.profile",
                            Some(_) => "cloudwatch.profile",
                        };
                        return Err(CallError::CredentialFile {
                            key,
                            path: file.map_or_else(
                                || "~/.aws/credentials".into(),
                                |f| f.display().to_string(),
                            ),
                            allowed: dirs.is_empty(),
                        });
                    }
                }
                for (key, path) in metric.server_files() {
                    // Resolved first, so neither a symlink nor `..` leads out of the directory.
                    let inside = std::fs::canonicalize(path)
                        .is_ok_and(|real| dirs.iter().any(|d| real.starts_with(d)));
                    if !inside {
                        return Err(CallError::CredentialFile {
                            key,
                            path: path.display().to_string(),
                            allowed: dirs.is_empty(),
                        });
                    }
                }
                Ok(())
            }
        }
    }
}

/// A spec key as a user finds it: the Prometheus block's keys are relative to it
/// (`bearerTokenFile`), other backends' include their block (`datadog.apiKeyFile`).
fn qualified(key: &str) -> String {
    let block = key.split('.').next().unwrap_or(key);
    if crate::backends::BACKEND_KEYS.contains(&block) {
        key.to_string()
    } else {
        format!("prometheus.{key}")
    }
}

/// Why a call has no measurement.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// A spec from the network names a file on this machine.
    #[error(
        "{}: specs sent over the network may not read files on the rollgate server nor use its credentials", qualified(key)
    )]
    ServerFile {
        /// The spec key (`bearerTokenFile`, `basicAuth`, `oauth2.clientSecretFile`, `google...`,
        /// `caFile`).
        key: &'static str,
    },
    /// A spec from the network would sign with this machine's AWS credentials (`sigv4`): the
    /// caller would choose the address they sign for.
    #[error("{}: specs sent over the network may not sign requests with the rollgate server's AWS credentials (the caller would choose where they go); name a template that sets them instead", qualified(key))]
    AmbientCredentials {
        /// The spec key (`sigv4`).
        key: &'static str,
    },
    /// A plugin-mode spec names a credential file outside the operator's allowed directories.
    #[error("{}: {path:?} is not read: {}", qualified(key), if *allowed { format!("credential files are read only under a directory the operator allows with {ALLOW_CREDENTIAL_DIR}, and none is allowed") } else { format!("it is not under a directory allowed with {ALLOW_CREDENTIAL_DIR}") })]
    CredentialFile {
        /// The spec key (`bearerTokenFile`, `basicAuth.passwordFile`, `caFile`).
        key: &'static str,
        /// The path as the spec wrote it.
        path: String,
        /// True when no directory is allowed at all.
        allowed: bool,
    },
    /// The server takes no specs with calls (`--no-inline-specs`).
    #[error(
        "inline specs are disabled on this server (--no-inline-specs): name a template instead"
    )]
    InlineDisabled,
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
        match call.trust.admit(call.metric) {
            // A plugin-mode spec with a credential file outside the allowed directories: an
            // Error measurement naming the argument, as Argo records it.
            Err(e @ CallError::CredentialFile { .. }) => {
                return Ok(Measurement::error(e.to_string(), Utc::now()))
            }
            other => other?,
        }
        let without_default_credentials = !call.trust.default_credentials;
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
            without_default_credentials,
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
