//! The `query` metric kind: guard first, then the query, its no-data rule, then Argo's conditions.

use crate::spec::QuerySpec;

use super::guard::{self, GuardReading};
use super::no_data::{self, abbreviate};
use super::result::{argo_value_string, format_count};
use super::{insufficient, verdict, Ctx, Engine, Outcome};

impl Engine {
    /// Measures a `query` metric.
    pub(super) async fn measure_query(&self, cx: &Ctx<'_>, spec: &QuerySpec) -> Outcome {
        let (metric, no_data, config, opts) = (cx.metric, cx.no_data, cx.config, cx.opts);
        let mut out = Outcome::new();
        if !opts.skip_metadata {
            out.metadata.insert("query".into(), spec.query.clone());
        }

        let queries = std::iter::once(spec.query.as_str())
            .chain(spec.min_requests.as_ref().map(|g| g.query.as_str()));
        if let Some(e) = super::run_clock_missing(queries, opts) {
            return out.error(e);
        }

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
            if !opts.skip_metadata {
                out.metadata
                    .insert("minRequests.query".into(), g.query.clone());
                out.metadata
                    .insert("minRequests.count".into(), format_count(g.count));
            }
            let response = match guard_response {
                Ok(r) => r,
                Err(e) => return out.error(format!("minRequests.query failed: {e}")),
            };
            out.note_warnings(&response);
            match guard::read(&response.data, g.count) {
                GuardReading::Enough(seen) => {
                    let seen = format_count(seen);
                    guard_note = format!(" ({})", guard::seen_vs_needed(&seen, g.count));
                    out.metadata.insert("minRequests.seen".into(), seen);
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
                    let seen = format_count(seen);
                    let why = guard::seen_vs_needed(&seen, g.count);
                    out.metadata.insert("minRequests.seen".into(), seen);
                    return insufficient(out, g.on_insufficient, &why, cx);
                }
            }
        }

        let response = match main_response {
            Ok(r) => r,
            Err(e) => return out.error(format!("query failed: {e}")),
        };
        out.note_warnings(&response);
        out.value = match &response.shaped {
            Some(shaped) => shaped.value.clone(),
            None => argo_value_string(&response.data),
        };
        if let Some(why) = no_data::detect(&response.data) {
            let (phase, message) = no_data::verdict(no_data, "query", &spec.query, &why);
            out.metadata.insert("noData".into(), why.describe());
            return out.finish(phase, message);
        }
        verdict::by_conditions(out, metric, &response, &guard_note)
    }
}
