//! Argo Rollouts' AnalysisRun rules as a pure state machine over measurements, for backtests.
//!
//! Written from argo-rollouts v1.9.1 `analysis/analysis.go` (`generateMetricTasks`,
//! `runMeasurements`, `assessRunStatus`, `assessMetricStatus`,
//! `assessMetricFailureInconclusiveOrError`, `calculateNextReconcileTime`),
//! `utils/analysis/helpers.go` (`IsTerminating`, `IsWorse`, `GetDryRunMetrics`),
//! `utils/defaults/defaults.go` (`DefaultConsecutiveErrorLimit` = 4) and
//! `pkg/apis/rollouts/v1alpha1/analysis_types.go` (`Metric.EffectiveCount`).
//!
//! The caller drives it: [`RunSim::due`] says which measurements the controller would take at a
//! reconcile time, the caller obtains them (from the engine), [`RunSim::record`] books them,
//! [`RunSim::assess`] applies the phase rules and [`RunSim::next_reconcile`] says when the
//! controller would look again. No I/O, no clock: every time is the simulated one.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::measurement::{Measurement, Phase};
use crate::spec::RunLimits;

/// `DefaultErrorRetryInterval` (analysis.go): an Error measurement is retried after 10 s,
/// whatever the metric's interval.
pub(crate) const ERROR_RETRY_INTERVAL: Duration = Duration::from_secs(10);
/// `DefaultMeasurementHistoryLimit` (analysis.go): `garbageCollectMeasurements` keeps the last
/// 10 measurements of each metric; the counters keep the totals.
pub(crate) const MEASUREMENT_HISTORY_LIMIT: usize = 10;
/// `DefaultConsecutiveErrorLimit` (utils/defaults/defaults.go).
pub(crate) const DEFAULT_CONSECUTIVE_ERROR_LIMIT: i64 = 4;

/// A metric's phase within the run; Argo's `AnalysisPhase` with `Pending` (no measurement yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub(crate) enum RunPhase {
    Pending,
    Running,
    Successful,
    Failed,
    Inconclusive,
    Error,
}

impl RunPhase {
    /// Argo's `Completed()`: a verdict was reached.
    pub(crate) fn completed(self) -> bool {
        !matches!(self, RunPhase::Pending | RunPhase::Running)
    }

    /// Argo's spelling.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RunPhase::Pending => "Pending",
            RunPhase::Running => "Running",
            RunPhase::Successful => "Successful",
            RunPhase::Failed => "Failed",
            RunPhase::Inconclusive => "Inconclusive",
            RunPhase::Error => "Error",
        }
    }

    /// Position in `analysisStatusOrder` (helpers.go), best to worst.
    fn rank(self) -> u8 {
        match self {
            RunPhase::Successful => 0,
            RunPhase::Running => 1,
            RunPhase::Pending => 2,
            RunPhase::Inconclusive => 3,
            RunPhase::Error => 4,
            RunPhase::Failed => 5,
        }
    }

    /// The measurement phase with the same name (Pending counts as Running).
    pub(crate) fn as_measurement_phase(self) -> Phase {
        match self {
            RunPhase::Pending | RunPhase::Running => Phase::Running,
            RunPhase::Successful => Phase::Successful,
            RunPhase::Failed => Phase::Failed,
            RunPhase::Inconclusive => Phase::Inconclusive,
            RunPhase::Error => Phase::Error,
        }
    }
}

impl From<Phase> for RunPhase {
    fn from(p: Phase) -> RunPhase {
        match p {
            Phase::Successful => RunPhase::Successful,
            Phase::Failed => RunPhase::Failed,
            Phase::Inconclusive => RunPhase::Inconclusive,
            Phase::Error => RunPhase::Error,
            Phase::Running => RunPhase::Running,
        }
    }
}

/// The scheduling fields of one metric of the run.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct RunMetric {
    pub name: String,
    pub interval: Option<Duration>,
    pub initial_delay: Option<Duration>,
    pub count: Option<u32>,
    pub limits: RunLimits,
    /// Matched by the run's `dryRun` rules: recorded, never decides the run.
    pub dry_run: bool,
}

impl RunMetric {
    /// `Metric.EffectiveCount`: a count of 0 or none is unlimited, except that a metric without
    /// an interval is measured once.
    pub(crate) fn effective_count(&self) -> Option<u32> {
        match self.count {
            Some(c) if c > 0 => Some(c),
            _ if self.interval.is_none() => Some(1),
            _ => None,
        }
    }

    fn failure_limit(&self) -> i64 {
        self.limits.failure_limit.unwrap_or(0)
    }

    fn inconclusive_limit(&self) -> i64 {
        self.limits.inconclusive_limit.unwrap_or(0)
    }

    fn consecutive_error_limit(&self) -> i64 {
        self.limits
            .consecutive_error_limit
            .unwrap_or(DEFAULT_CONSECUTIVE_ERROR_LIMIT)
    }

    fn consecutive_success_limit(&self) -> Option<i64> {
        self.limits.consecutive_success_limit.filter(|l| *l > 0)
    }
}

/// Argo's `MetricResult`: the counters and measurements of one metric.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MetricResult {
    pub phase: RunPhase,
    pub measurements: Vec<Measurement>,
    /// Completed measurements except Errors (Argo's `Count`).
    pub count: i64,
    pub successful: i64,
    pub failed: i64,
    pub inconclusive: i64,
    pub error: i64,
    pub consecutive_error: i64,
    pub consecutive_success: i64,
    /// Why the metric reached a bad verdict (`failed (3) > failureLimit (2)`), Argo's wording.
    pub reason: String,
    /// When the metric reached its verdict.
    pub completed_at: Option<DateTime<Utc>>,
}

impl MetricResult {
    fn new() -> MetricResult {
        MetricResult {
            phase: RunPhase::Pending,
            measurements: Vec::new(),
            count: 0,
            successful: 0,
            failed: 0,
            inconclusive: 0,
            error: 0,
            consecutive_error: 0,
            consecutive_success: 0,
            reason: String::new(),
            completed_at: None,
        }
    }

    fn last(&self) -> Option<&Measurement> {
        self.measurements.last()
    }
}

/// What the controller does for a metric at a reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TaskKind {
    /// `provider.Run`: a new measurement.
    Run,
    /// `provider.Resume` of the in-flight measurement (its `resumeAt` has come).
    Resume,
    /// `provider.Terminate` of the in-flight measurement (the run is terminating).
    Terminate,
}

/// One measurement to take: the metric's index in the run and what to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Task {
    pub metric: usize,
    pub kind: TaskKind,
}

/// One simulated AnalysisRun.
#[derive(Debug, Clone)]
pub(crate) struct RunSim {
    started_at: DateTime<Utc>,
    metrics: Vec<RunMetric>,
    results: Vec<MetricResult>,
    terminate: bool,
    phase: RunPhase,
    message: String,
    /// Set when a reconcile changed a metric's phase: the status update makes the controller
    /// look again at once (the informer re-queues the updated AnalysisRun).
    requeue_now: bool,
}

fn add(t: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    t + chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

impl RunSim {
    /// A run whose `status.startedAt` is `started_at`.
    pub(crate) fn new(metrics: Vec<RunMetric>, started_at: DateTime<Utc>) -> RunSim {
        let results = metrics.iter().map(|_| MetricResult::new()).collect();
        RunSim {
            started_at,
            metrics,
            results,
            terminate: false,
            phase: RunPhase::Running,
            message: String::new(),
            requeue_now: false,
        }
    }

    /// The run's metrics, in template order.
    pub(crate) fn metrics(&self) -> &[RunMetric] {
        &self.metrics
    }

    /// Each metric's result, in template order.
    pub(crate) fn results(&self) -> &[MetricResult] {
        &self.results
    }

    /// The run's phase (Running until a verdict).
    pub(crate) fn phase(&self) -> RunPhase {
        self.phase
    }

    /// Argo's run message (`Metric "x" assessed Failed due to failed (1) > failureLimit (0)`).
    pub(crate) fn message(&self) -> &str {
        &self.message
    }

    /// `spec.terminate: true`, as when a rollout finishes and ends its background analysis.
    pub(crate) fn request_terminate(&mut self) {
        self.terminate = true;
        self.requeue_now = true;
    }

    /// `IsTerminating` (helpers.go): terminate was requested, or a metric that is not a dry run
    /// has completed Failed, Error or Inconclusive.
    pub(crate) fn terminating(&self) -> bool {
        self.terminate
            || self.metrics.iter().zip(&self.results).any(|(m, r)| {
                !m.dry_run
                    && matches!(
                        r.phase,
                        RunPhase::Failed | RunPhase::Error | RunPhase::Inconclusive
                    )
            })
    }

    /// `generateMetricTasks`: the measurements the controller takes at `now`.
    pub(crate) fn due(&self, now: DateTime<Utc>) -> Vec<Task> {
        let terminating = self.terminating();
        let mut tasks = Vec::new();
        for (i, (metric, result)) in self.metrics.iter().zip(&self.results).enumerate() {
            if result.phase.completed() {
                continue;
            }
            let last = result.last();
            if let Some(last) = last.filter(|m| m.finished_at.is_none()) {
                if last.resume_at.is_some_and(|at| at > now) {
                    continue;
                }
                let kind = if terminating {
                    TaskKind::Terminate
                } else {
                    TaskKind::Resume
                };
                tasks.push(Task { metric: i, kind });
                continue;
            }
            if terminating {
                continue;
            }
            let Some(last) = last else {
                let delay = metric.initial_delay.unwrap_or_default();
                if add(self.started_at, delay) <= now {
                    tasks.push(Task {
                        metric: i,
                        kind: TaskKind::Run,
                    });
                }
                continue;
            };
            if metric
                .effective_count()
                .is_some_and(|c| result.count >= i64::from(c))
            {
                continue;
            }
            // The controller takes the measurement when `now` is after finishedAt + interval;
            // it is woken at that very time, so the simulation takes it then.
            if let Some(due_at) = self.next_for(metric, last) {
                if due_at <= now {
                    tasks.push(Task {
                        metric: i,
                        kind: TaskKind::Run,
                    });
                }
            }
        }
        tasks
    }

    /// When the next measurement after the finished `last` is due (Error: 10 s retry).
    fn next_for(&self, metric: &RunMetric, last: &Measurement) -> Option<DateTime<Utc>> {
        let finished = last.finished_at?;
        let interval = if last.phase == Phase::Error {
            ERROR_RETRY_INTERVAL
        } else {
            metric.interval.unwrap_or(ERROR_RETRY_INTERVAL)
        };
        Some(add(finished, interval))
    }

    /// `runMeasurements`: books the measurement taken for `task` at `now`, with the simulated
    /// times stamped on it (a resumed one keeps its start; a Running one stays unfinished).
    pub(crate) fn record(&mut self, task: Task, mut m: Measurement, now: DateTime<Utc>) {
        let Some(result) = self.results.get_mut(task.metric) else {
            return;
        };
        let in_flight = matches!(task.kind, TaskKind::Resume | TaskKind::Terminate);
        m.started_at = match (in_flight, result.last()) {
            (true, Some(prev)) => prev.started_at,
            _ => now,
        };
        if m.phase == Phase::Running {
            m.finished_at = None;
        } else {
            m.finished_at = Some(now);
            m.resume_at = None;
            match m.phase {
                Phase::Successful => {
                    result.successful += 1;
                    result.count += 1;
                    result.consecutive_error = 0;
                    result.consecutive_success += 1;
                }
                Phase::Failed => {
                    result.failed += 1;
                    result.count += 1;
                    result.consecutive_error = 0;
                    result.consecutive_success = 0;
                }
                Phase::Inconclusive => {
                    result.inconclusive += 1;
                    result.count += 1;
                    result.consecutive_error = 0;
                    result.consecutive_success = 0;
                }
                Phase::Error => {
                    result.error += 1;
                    result.consecutive_error += 1;
                    result.consecutive_success = 0;
                }
                Phase::Running => {}
            }
        }
        if in_flight && !result.measurements.is_empty() {
            let last = result.measurements.len() - 1;
            result.measurements[last] = m;
        } else {
            result.measurements.push(m);
            let excess = result
                .measurements
                .len()
                .saturating_sub(MEASUREMENT_HISTORY_LIMIT);
            result.measurements.drain(..excess);
        }
    }

    /// `assessRunStatus`: updates every metric's phase and the run's; returns the run's phase.
    pub(crate) fn assess(&mut self, now: DateTime<Utc>) -> RunPhase {
        let terminating = self.terminating();
        let mut worst: Option<RunPhase> = None;
        let mut worst_message = String::new();
        let mut everything_completed = true;
        self.requeue_now = false;
        for (metric, result) in self.metrics.iter().zip(self.results.iter_mut()) {
            // A metric never measured has no MetricResult in Argo and is not assessed.
            if result.measurements.is_empty() {
                everything_completed = false;
                continue;
            }
            let status = assess_metric(metric, result, terminating);
            if status != result.phase {
                result.phase = status;
                self.requeue_now = true;
                if status.completed() {
                    result.completed_at = Some(now);
                    result.reason = failure_inconclusive_or_error(metric, result)
                        .map(|(_, why)| why)
                        .unwrap_or_default();
                }
            }
            if !status.completed() {
                everything_completed = false;
            } else if !metric.dry_run {
                if worst.is_none_or(|w| status.rank() > w.rank()) {
                    worst = Some(status);
                    if !result.reason.is_empty() {
                        worst_message = format!(
                            "Metric \"{}\" assessed {} due to {}",
                            metric.name,
                            status.as_str(),
                            result.reason
                        );
                    }
                }
            } else if worst.is_none() {
                // Dry-run verdicts never count; a run of only dry-run metrics is Successful.
                worst = Some(RunPhase::Successful);
            }
        }
        let phase = match worst {
            Some(w) if terminating => w,
            None if terminating => RunPhase::Successful,
            Some(w) if everything_completed => w,
            _ => RunPhase::Running,
        };
        self.phase = phase;
        self.message = if phase.completed() {
            worst_message
        } else {
            String::new()
        };
        phase
    }

    /// `calculateNextReconcileTime`, plus the immediate re-queue after a status change; `None`
    /// when nothing is scheduled (the run is complete).
    pub(crate) fn next_reconcile(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        if self.phase.completed() {
            return None;
        }
        if self.requeue_now {
            return Some(now);
        }
        let mut next: Option<DateTime<Utc>> = None;
        let mut earliest = |t: DateTime<Utc>| {
            if next.is_none_or(|n| t < n) {
                next = Some(t);
            }
        };
        for (metric, result) in self.metrics.iter().zip(&self.results) {
            if result.phase.completed() {
                continue;
            }
            let Some(last) = result.last() else {
                earliest(add(
                    self.started_at,
                    metric.initial_delay.unwrap_or_default(),
                ));
                continue;
            };
            if last.finished_at.is_none() {
                if let Some(at) = last.resume_at {
                    earliest(at);
                }
                continue;
            }
            if metric
                .effective_count()
                .is_some_and(|c| result.count >= i64::from(c))
            {
                continue;
            }
            if metric.interval.is_none() && last.phase != Phase::Error {
                continue;
            }
            if let Some(t) = self.next_for(metric, last) {
                earliest(t);
            }
        }
        next
    }
}

/// `assessMetricFailureInconclusiveOrError`: the limit a metric's counters broke, if any, with
/// Argo's wording. Later checks win, as in Argo (Error over Inconclusive over Failed).
pub(crate) fn failure_inconclusive_or_error(
    metric: &RunMetric,
    r: &MetricResult,
) -> Option<(RunPhase, String)> {
    let mut out = None;
    let failure_limit = metric.failure_limit();
    if failure_limit >= 0 && r.failed > failure_limit {
        out = Some((
            RunPhase::Failed,
            format!("failed ({}) > failureLimit ({failure_limit})", r.failed),
        ));
    }
    let inconclusive_limit = metric.inconclusive_limit();
    if r.inconclusive > inconclusive_limit {
        out = Some((
            RunPhase::Inconclusive,
            format!(
                "inconclusive ({}) > inconclusiveLimit ({inconclusive_limit})",
                r.inconclusive
            ),
        ));
    }
    let error_limit = metric.consecutive_error_limit();
    if r.consecutive_error > error_limit {
        out = Some((
            RunPhase::Error,
            format!(
                "consecutiveErrors ({}) > consecutiveErrorLimit ({error_limit})",
                r.consecutive_error
            ),
        ));
    }
    out
}

/// `assessMetricStatus` (analysis.go v1.9.1).
pub(crate) fn assess_metric(metric: &RunMetric, r: &MetricResult, terminating: bool) -> RunPhase {
    if r.phase.completed() {
        return r.phase;
    }
    let Some(last) = r.last() else {
        return if terminating {
            RunPhase::Successful
        } else {
            RunPhase::Pending
        };
    };
    if last.phase == Phase::Running {
        return RunPhase::Running;
    }
    if let Some((phase, _)) = failure_inconclusive_or_error(metric, r) {
        return phase;
    }
    let success_limit = metric.consecutive_success_limit();
    if success_limit.is_some_and(|l| r.consecutive_success >= l) {
        return RunPhase::Successful;
    }
    if metric
        .effective_count()
        .is_some_and(|c| r.count >= i64::from(c))
    {
        let failure_applicable = metric.limits.failure_limit.is_none_or(|l| l >= 0);
        return match (failure_applicable, success_limit.is_some()) {
            // Neither limit reached by the end of the count: undecided.
            (true, true) => RunPhase::Inconclusive,
            (false, true) => RunPhase::Failed,
            _ => RunPhase::Successful,
        };
    }
    if terminating {
        return RunPhase::Successful;
    }
    RunPhase::Running
}

/// `GetDryRunMetrics` (helpers.go): which metric names the run's `dryRun` rules match. Each rule
/// is an unanchored regular expression (Go's `regexp.MatchString`); `*` matches every metric, as
/// the field's documentation says. A rule that matches nothing is an error, as in Argo.
pub(crate) fn dry_run_matches(rules: &[String], names: &[String]) -> Result<Vec<bool>, String> {
    let mut out = vec![false; names.len()];
    for (i, rule) in rules.iter().enumerate() {
        let re = if rule == "*" {
            None
        } else {
            Some(regex::Regex::new(rule).map_err(|e| {
                format!("spec.dryRun[{i}].metricName: {rule:?} is not a regular expression: {e}")
            })?)
        };
        let mut matched = 0;
        for (j, name) in names.iter().enumerate() {
            if re.as_ref().is_none_or(|re| re.is_match(name)) {
                out[j] = true;
                matched += 1;
            }
        }
        if matched == 0 {
            return Err(format!(
                "spec.dryRun[{i}]: rule {rule:?} didn't match any metric name(s)"
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
