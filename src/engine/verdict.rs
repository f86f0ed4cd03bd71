//! Where Argo's `successCondition` / `failureCondition` meet a measurement, once for every kind.
//!
//! Two rules:
//! - a kind without a verdict of its own (`query`, Argo's `prometheus`) is judged by the
//!   conditions alone, and with none any result without an error is Successful;
//! - a kind with a built-in verdict (`compare`, `fleet`) keeps it unless the metric has
//!   conditions: then they decide, on the kind's JSON value, and the message says which held.

use crate::condition::Value;
use crate::measurement::Phase;
use crate::prometheus::QueryResponse;
use crate::spec::Metric;

use super::result::condition_value;
use super::Outcome;

/// Applies Argo's conditions to a result that has data, and says why in one sentence; `note`
/// is appended to the reason (e.g. the request guard's count).
pub(super) fn by_conditions(
    out: Outcome,
    metric: &Metric,
    response: &QueryResponse,
    note: &str,
) -> Outcome {
    // Another backend's answer is judged in the shape its own Argo provider gives it.
    let result = match &response.shaped {
        Some(shaped) => Value::from(&shaped.result),
        None => condition_value(&response.data),
    };
    // The message is formatted from the value in place (no copy of it per check).
    match metric.judge(&result) {
        Ok(phase) => {
            let message = format!("result {}: {}{note}", out.value, explain(metric, phase));
            out.finish(phase, message)
        }
        Err(failure) => {
            let message = format!("result {}: {failure}", out.value);
            out.error(message)
        }
    }
}

/// The built-in verdict `built_in`, explained by `message`, unless the metric has conditions:
/// then they decide on `value` and the message adds which condition held. The built-in
/// verdict is kept in the `verdict` metadata either way. `value` is only built when there are
/// conditions (a backtest judges thousands of checks without any).
pub(super) fn built_in_unless_conditions(
    mut out: Outcome,
    metric: &Metric,
    built_in: Phase,
    value: impl FnOnce() -> Value,
    message: String,
) -> Outcome {
    out.metadata
        .insert("verdict".into(), built_in.as_str().into());
    if metric.success_condition.is_none() && metric.failure_condition.is_none() {
        return out.finish(built_in, message);
    }
    match metric.judge(&value()) {
        Ok(phase) => {
            let why = explain(metric, phase);
            out.finish(phase, format!("{message}; {why}"))
        }
        Err(failure) => out.error(format!("{message}; {failure}")),
    }
}

/// Which condition made `phase`, in Argo's terms.
fn explain(metric: &Metric, phase: Phase) -> String {
    let source = crate::condition::Condition::source;
    match (
        phase,
        metric.success_condition.as_ref().map(source),
        metric.failure_condition.as_ref().map(source),
    ) {
        (Phase::Successful, None, None) => {
            "no conditions, so any result without an error is Successful".into()
        }
        (Phase::Successful, Some(s), _) => format!("successCondition `{s}` holds"),
        (Phase::Successful, None, Some(f)) => format!("failureCondition `{f}` does not hold"),
        (Phase::Failed, _, Some(f)) => format!("failureCondition `{f}` holds"),
        (Phase::Failed, Some(s), None) => format!("successCondition `{s}` does not hold"),
        (Phase::Inconclusive, _, _) => "neither successCondition nor failureCondition holds".into(),
        (phase, _, _) => format!("{phase}"),
    }
}
