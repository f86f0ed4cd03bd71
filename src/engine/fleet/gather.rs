//! The fleet gate's measurement up to its verdict: the query round, classification, the
//! last-seen lookup, cohorts and tiers. Shared by the gate (`measure_fleet`) and
//! `rollgate fleet plan|versions`, so both send the same queries and read them the same way.

use std::collections::BTreeMap;

use chrono::Utc;
use futures::future::join_all;
use serde_json::Value;

use crate::prometheus::QueryData;
use crate::spec::duration::format_duration;
use crate::spec::{ExpectedTargets, FleetSpec, NoDataPolicy};

use super::super::no_data::{self, NoData};
use super::super::{Engine, EvalOptions, Outcome};
use super::promotion::{self, Judgement};
use super::promql::{last_seen_query, last_seen_window, FleetQueries};
use super::report::{self, LastSeen};
use super::state::{
    self, classify, labels_present, read_stalls, read_targets, read_view, Fleet, Held, Inputs,
};
use super::{incomplete, label_missing, series_count, Role, LAST_SEEN_MAX};

/// A fleet judged: the verdict before `successCondition`/`failureCondition`.
pub(super) struct Judged {
    /// The JSON `value`.
    pub summary: Value,
    /// The message.
    pub message: String,
    /// The built-in verdict.
    pub passes: bool,
    /// Every target, classified.
    pub fleet: Fleet,
    /// Cohorts and tiers.
    pub judgement: Judgement,
}

impl Engine {
    /// Sends the fleet queries and judges the answers; `Err` is a finished outcome (an error,
    /// or the noData policy) with nothing left to judge.
    pub(super) async fn judge_fleet(
        &self,
        spec: &FleetSpec,
        no_data: NoDataPolicy,
        config: super::super::Target<'_>,
        opts: &EvalOptions,
        mut out: Outcome,
    ) -> Result<(Outcome, Judged), Outcome> {
        let queries = FleetQueries::new(spec);
        let mut inputs = Inputs::default();
        let mut first_seen = None;

        let mut round: Vec<(Role, &str)> = vec![
            (Role::Versions, &queries.versions),
            (Role::Reporting, &queries.reporting),
        ];
        if let Some(q) = &queries.terminal {
            round.push((Role::Terminal, q));
        }
        if let Some(q) = &queries.init {
            round.push((Role::Init, q));
        }
        if let Some(q) = &queries.inventory {
            round.push((Role::Inventory, q));
        }
        for (kind, q) in &queries.stalls {
            round.push((Role::Stall(*kind), q));
        }
        if let Some(h) = &queries.held {
            round.push((Role::HeldSteps, &h.steps));
            round.push((Role::HeldLastBad, &h.last_bad));
            inputs.held = Some(Held {
                needed: h.needed,
                ..Held::default()
            });
        }
        if let Some(q) = &queries.first_seen {
            round.push((Role::FirstSeen, q));
        }
        let answers = join_all(round.iter().map(|(_, q)| self.instant(config, q, opts))).await;

        let mut inventory_empty = false;
        let versions: Vec<&crate::spec::VersionSpec> = spec.versions().collect();
        let labels: Vec<&str> = versions.iter().map(|v| v.label.as_str()).collect();
        let mut labels_seen = std::collections::BTreeSet::new();
        for ((role, _), answer) in round.iter().zip(answers) {
            let response = match answer {
                Ok(r) => r,
                Err(e) => return Err(out.error(format!("fleet {} failed: {e}", role.describe()))),
            };
            out.note_warnings(&response);
            if matches!(role, Role::Versions | Role::Reporting | Role::Terminal) {
                labels_seen.extend(labels_present(&response.data, &labels));
            }
            let read = match role {
                Role::Versions => {
                    read_view(&response.data, &spec.group_by, &versions).map(|v| inputs.now = v)
                }
                Role::Terminal => read_view(&response.data, &spec.group_by, &versions)
                    .map(|v| inputs.terminal = v),
                Role::Reporting => {
                    read_view(&response.data, &spec.group_by, &versions).map(|v| inputs.recent = v)
                }
                Role::Init => read_view(&response.data, &spec.group_by, &versions)
                    .map(|v| inputs.init = Some(v)),
                Role::Inventory => read_targets(&response.data, &spec.group_by).map(|t| {
                    inventory_empty = t.is_empty();
                    inputs.inventory = Some(t);
                }),
                Role::Stall(kind) => read_stalls(&response.data, *kind, &spec.group_by)
                    .map(|w| inputs.workloads.extend(w)),
                Role::HeldSteps => per_target(&response.data, &spec.group_by).map(|m| {
                    if let Some(h) = inputs.held.as_mut() {
                        // Clamped at 0; a float-to-int `as` saturates (and maps NaN to 0).
                        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                        let steps = m.into_iter().map(|(t, v)| (t, v.max(0.0) as u64)).collect();
                        h.steps = steps;
                    }
                }),
                Role::HeldLastBad => per_target(&response.data, &spec.group_by).map(|m| {
                    if let Some(h) = inputs.held.as_mut() {
                        h.last_bad = m;
                    }
                }),
                Role::FirstSeen => {
                    first_seen = single_value(&response.data);
                    Ok(())
                }
            };
            if let Err(why) = read {
                return Err(out.error(format!("fleet {}: {why}", role.describe())));
            }
        }
        state::subtract(&mut inputs.now, &inputs.terminal);
        if let ExpectedTargets::List(list) = &spec.expected_targets {
            inputs.inventory = Some(list.iter().cloned().collect());
        }
        let partial = !out.warnings.is_empty();

        // Nothing at all within maxStaleness: the selector matches nothing anywhere.
        if inputs.now.is_empty() && inputs.recent.is_empty() {
            if partial {
                return Err(out.error(incomplete("the selector matched no series")));
            }
            let (phase, message) =
                no_data::verdict(no_data, "fleet.selector", &spec.selector, &NoData::Empty);
            out.metadata
                .insert("noData".into(), NoData::Empty.describe());
            return Err(out.finish(
                phase,
                format!(
                    "{message} (no series with a sample in the last {})",
                    format_duration(spec.max_staleness)
                ),
            ));
        }
        if let (true, Some(q)) = (inventory_empty, &queries.inventory) {
            if partial {
                return Err(out.error(incomplete("expectedTargetsQuery returned no targets")));
            }
            let (phase, message) =
                no_data::verdict(no_data, "fleet.expectedTargetsQuery", q, &NoData::Empty);
            out.metadata
                .insert("noData".into(), NoData::Empty.describe());
            return Err(out.finish(phase, message));
        }
        if let Some(label) = labels.iter().find(|l| !labels_seen.contains(**l)) {
            let message = label_missing(spec, label, series_count(&inputs));
            return Err(out.error(if partial {
                incomplete(&message)
            } else {
                message
            }));
        }

        let at = opts.at.unwrap_or_else(Utc::now);
        let fleet = classify(spec, at, inputs);

        let mut last_seen = LastSeen {
            window: last_seen_window(spec.max_staleness),
            ..LastSeen::default()
        };
        if !fleet.silent.is_empty() {
            let targets: Vec<String> = fleet.silent.iter().take(LAST_SEEN_MAX).cloned().collect();
            let query = last_seen_query(spec, &targets);
            out.metadata.insert("query.lastSeen".into(), query.clone());
            match self.instant(config, &query, opts).await {
                Ok(response) => {
                    out.note_warnings(&response);
                    if let crate::prometheus::QueryData::Vector(series) = &response.data {
                        for s in series {
                            if let Some(t) = s.labels.get(&spec.group_by) {
                                last_seen.ages.insert(t.to_string(), s.sample.value);
                            }
                        }
                    }
                }
                // The ages only decorate the message: the verdict stands without them.
                Err(e) => last_seen.failed = Some(e.to_string()),
            }
        }

        let judgement = match promotion::judge(spec, &fleet, first_seen, at) {
            Ok(j) => j,
            Err(why) => return Err(out.error(why)),
        };
        // A cohort gate judges (and words) the cohorts it requires; the version matrix and
        // the tiers stay fleet-wide.
        let scoped = judgement.scoped.as_ref().unwrap_or(&fleet);
        let mut summary = report::value(spec, scoped);
        if let Value::Object(map) = &mut summary {
            map.extend(judgement.value.clone());
        }
        report::metadata(scoped, &last_seen, &mut out.metadata);
        out.metadata.extend(judgement.metadata.clone());
        let mut parts: Vec<String> = judgement.failures.clone();
        parts.push(report::message(
            spec,
            scoped,
            &last_seen,
            at.timestamp() as f64,
        ));
        parts.extend(judgement.notes.iter().cloned());
        let message = parts.join("; ");
        let passes = scoped.passes(spec.min_completion) && judgement.failures.is_empty();
        Ok((
            out,
            Judged {
                summary,
                message,
                passes,
                fleet,
                judgement,
            },
        ))
    }
}

/// `target -> value` of a vector answer with one series per target.
fn per_target(data: &QueryData, group_by: &str) -> Result<BTreeMap<String, f64>, String> {
    let QueryData::Vector(series) = data else {
        return Err("expected an instant vector".into());
    };
    Ok(series
        .iter()
        .filter(|s| s.sample.value.is_finite())
        .map(|s| {
            (
                s.labels.get(group_by).unwrap_or_default().to_string(),
                s.sample.value,
            )
        })
        .collect())
}

/// The value of a one-series answer (a scalar too); none when empty.
fn single_value(data: &QueryData) -> Option<f64> {
    match data {
        QueryData::Vector(series) => series.first().map(|s| s.sample.value),
        QueryData::Scalar(s) => Some(s.value),
        _ => None,
    }
}
