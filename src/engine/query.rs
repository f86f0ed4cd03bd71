//! The `query` metric kind: guard first, then the query, its no-data rule, then Argo's conditions.

use chrono::{DateTime, Utc};

use crate::measurement::Phase;
use crate::prometheus::{PrometheusConfig, QueryResponse};
use crate::spec::{Metric, NoDataPolicy, QuerySpec};

use super::guard::{self, GuardReading};
use super::no_data::{self, abbreviate};
use super::result::{argo_value_string, condition_value, format_count};
use super::{insufficient, Engine, EvalOptions, Outcome};

impl Engine {
    /// Measures a `query` metric.
    pub(super) async fn measure_query(
        &self,
        metric: &Metric,
        spec: &QuerySpec,
        no_data: NoDataPolicy,
        config: &PrometheusConfig,
        opts: &EvalOptions,
        started_at: DateTime<Utc>,
    ) -> Outcome {
        let mut out = Outcome::new();
        out.metadata.insert("query".into(), spec.query.clone());

        // Both queries go out together (one round trip of latency), but the guard is judged
        // first: below it, the main result is never looked at.
        let main = self.instant(config, &spec.query, opts);
        let (guard_response, main_response) = match &spec.min_requests {
            Some(g) => {
                let (guard, main) = futures::join!(self.instant(config, &g.query, opts), main);
                (Some(guard), main)
            }
            None => (None, main.await),
        };

        let mut guard_note = String::new();
        if let (Some(g), Some(guard_response)) = (&spec.min_requests, guard_response) {
            out.metadata
                .insert("minRequests.query".into(), g.query.clone());
            out.metadata
                .insert("minRequests.count".into(), format_count(g.count));
            let response = match guard_response {
                Ok(r) => r,
                Err(e) => return out.error(format!("minRequests.query failed: {e}")),
            };
            out.note_warnings(&response);
            match guard::read(&response.data, g.count) {
                GuardReading::Enough(seen) => {
                    out.metadata
                        .insert("minRequests.seen".into(), format_count(seen));
                    guard_note = format!(" ({})", guard::seen_vs_needed(seen, g.count));
                }
                GuardReading::NoData(why) => {
                    let (phase, message) =
                        no_data::verdict(no_data, "minRequests.query", &g.query, &why);
                    out.metadata.insert("noData".into(), why.describe());
                    return out.finish(phase, message);
                }
                GuardReading::Ambiguous(n) => {
                    return out.error(format!(
                        "minRequests.query `{}` returned {n} series; it must return one number (wrap it in sum())",
                        abbreviate(&g.query)
                    ));
                }
                GuardReading::Insufficient(seen) => {
                    out.metadata
                        .insert("minRequests.seen".into(), format_count(seen));
                    let why = guard::seen_vs_needed(seen, g.count);
                    return insufficient(out, g.on_insufficient, &why, metric, opts, started_at);
                }
            }
        }

        let response = match main_response {
            Ok(r) => r,
            Err(e) => return out.error(format!("query failed: {e}")),
        };
        out.note_warnings(&response);
        out.value = argo_value_string(&response.data);
        if let Some(why) = no_data::detect(&response.data) {
            let (phase, message) = no_data::verdict(no_data, "query", &spec.query, &why);
            out.metadata.insert("noData".into(), why.describe());
            return out.finish(phase, message);
        }
        judge(out, metric, &response, &guard_note)
    }
}

/// Applies Argo's conditions to a result that has data, and says why in one sentence.
pub(super) fn judge(
    out: Outcome,
    metric: &Metric,
    response: &QueryResponse,
    note: &str,
) -> Outcome {
    let result = condition_value(&response.data);
    let value = out.value.clone();
    match metric.judge(&result) {
        Ok(phase) => out.finish(
            phase,
            format!("result {value}: {}{note}", explain(metric, phase)),
        ),
        Err(failure) => out.error(format!("result {value}: {failure}")),
    }
}

fn explain(metric: &Metric, phase: Phase) -> String {
    let success = metric
        .success_condition
        .as_ref()
        .map(|c| c.source().to_string());
    let failure = metric
        .failure_condition
        .as_ref()
        .map(|c| c.source().to_string());
    match (phase, success, failure) {
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
