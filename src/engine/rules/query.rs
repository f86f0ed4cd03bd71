//! Rules of a `query` metric: the order of the gate (guard, no data, conditions) in PromQL.

use crate::condition::{Filter, Untranslatable};
use crate::spec::{Metric, NoDataPolicy, OnInsufficient, QuerySpec};

use super::series::{shape, Shape};
use super::MetricRules;

/// Recording rules for the query and the guard; an alert per way the verdict can be Failed.
pub(super) fn rules(
    template: &str,
    metric: &Metric,
    spec: &QuerySpec,
    no_data: NoDataPolicy,
) -> MetricRules {
    let mut out = MetricRules::new(template, &metric.name, "query");
    let v = out.record("value", &spec.query);
    let guard = spec.min_requests.as_ref().map(|g| {
        let name = out.record("requests", &g.query);
        (name, g)
    });
    // The guard passes: one number, at least `count` (NaN and several series never pass).
    let guard_ok = guard
        .as_ref()
        .map(|(g, guard)| format!("({g} >= {} and on () (count({g}) == 1))", guard.count));
    let after_guard = |expr: String| match &guard_ok {
        Some(ok) => format!("({expr}) and on () {ok}"),
        None => expr,
    };

    match shape(&spec.query) {
        Shape::OneSeries => {}
        Shape::ManySeries => {
            out.exact = false;
            out.notes.push(
                "the query may return several series: the gate judges result[0], the first series Prometheus lists, while the alert judges every series (exact for queries aggregated to one series, e.g. sum(...))".into(),
            );
        }
        Shape::NotVector => {
            out.exact = false;
            out.notes.push(
                "the query does not return an instant vector (Argo's result is then a number or a flattened matrix): no condition alert".into(),
            );
        }
    }

    // The conditions, for a result with data (no empty result, no NaN).
    if shape(&spec.query) != Shape::NotVector {
        match condition_failed(metric, &v) {
            Ok(Some(failed)) => {
                let expr = after_guard(format!("({failed}) unless on () ({v} != {v})"));
                let summary = format!("{}/{}: {}", template, metric.name, condition_text(metric));
                out.alert("RollgateQueryFailed", expr, summary);
            }
            Ok(None) => {}
            Err(why) => {
                out.exact = false;
                out.notes.push(format!("no condition alert: {why}"));
            }
        }
    }

    if no_data == NoDataPolicy::Fail {
        let mut expr = after_guard(format!("absent({v}) or ({v} != {v})"));
        if let Some((g, _)) = &guard {
            expr = format!("({expr}) or absent({g}) or ({g} != {g})");
        }
        out.alert(
            "RollgateQueryNoData",
            expr,
            format!("{template}/{}: no data, and noData: fail", metric.name),
        );
    }
    if let Some((g, guard)) = &guard {
        if guard.on_insufficient == OnInsufficient::Fail {
            out.alert(
                "RollgateQueryTooFewRequests",
                format!("{g} < {} and on () (count({g}) == 1)", guard.count),
                format!(
                    "{template}/{}: fewer than {} requests, and onInsufficient: fail",
                    metric.name, guard.count
                ),
            );
        }
    }
    out
}

/// The series of `v` for which Argo's phase is Failed: the success condition does not hold
/// (only a success condition), or the failure condition holds. `None`: never Failed.
fn condition_failed(metric: &Metric, v: &str) -> Result<Option<String>, Untranslatable> {
    let filter = match (&metric.success_condition, &metric.failure_condition) {
        (None, None) => Filter::Nothing,
        (Some(s), None) => s
            .as_promql_filter(v)
            .map_err(|e| Untranslatable(format!("successCondition `{}`: {e}", s.source())))?
            .negate(v),
        (_, Some(f)) => f
            .as_promql_filter(v)
            .map_err(|e| Untranslatable(format!("failureCondition `{}`: {e}", f.source())))?,
    };
    Ok(filter.promql(v))
}

fn condition_text(metric: &Metric) -> String {
    match (&metric.success_condition, &metric.failure_condition) {
        (_, Some(f)) => format!("failureCondition `{}` holds", f.source()),
        (Some(s), None) => format!("successCondition `{}` does not hold", s.source()),
        (None, None) => String::new(),
    }
}
