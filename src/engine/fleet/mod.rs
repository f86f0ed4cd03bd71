//! The `fleet` kind: fail while any target still runs the old version or has gone silent.
//!
//! One round of concurrent, aggregated queries (versions now, versions within maxStaleness,
//! init containers, inventory, workload conditions), then — only when some target is silent —
//! one query for when those were last seen. Classification is in [`state`], words and numbers
//! in [`report`], the PromQL (shared with `rollgate rules`) in [`promql`]. docs/fleet.md
//! explains the states and the choices.

mod promql;
mod report;
mod rules;
mod state;

pub use rules::RulePlacement;

use std::collections::BTreeMap;

use chrono::Utc;
use futures::future::join_all;

use crate::condition::Value as ConditionValue;
use crate::measurement::Phase;
use crate::spec::duration::format_duration;
use crate::spec::{ExpectedTargets, FleetSpec};

use super::no_data::{self, NoData};
use super::{verdict, Ctx, Engine, EvalOptions, Outcome};

use promql::{last_seen_query, last_seen_window, FleetQueries};
use report::LastSeen;
use state::{classify, labels_present, read_stalls, read_targets, read_view, Inputs};

/// Most silent targets whose last sample is looked up (the message names ten).
const LAST_SEEN_MAX: usize = 200;

/// What one query of the first round is for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Versions,
    Terminal,
    Reporting,
    Init,
    Inventory,
    Stall(promql::StallKind),
}

impl Role {
    fn describe(self) -> String {
        match self {
            Role::Versions => "versions query".into(),
            Role::Terminal => "terminal-pods query".into(),
            Role::Reporting => "reporting query".into(),
            Role::Init => "init-container query".into(),
            Role::Inventory => "expectedTargetsQuery".into(),
            Role::Stall(k) => format!("workload query ({})", k.key()),
        }
    }
}

impl Engine {
    /// Measures a `fleet` metric.
    pub(super) async fn measure_fleet(&self, cx: &Ctx<'_>, spec: &FleetSpec) -> Outcome {
        let (metric, no_data, config, opts, started_at) =
            (cx.metric, cx.no_data, cx.config, cx.opts, cx.started_at);
        // Every query of the gate reads the same instant: the versions query and the one that
        // removes terminal pods from it must see the same pods, or a pod that ended between the
        // two would read as a straggler.
        let pinned = EvalOptions {
            at: Some(opts.at.unwrap_or(started_at)),
            ..opts.clone()
        };
        let opts = &pinned;
        let mut out = Outcome::new();
        describe(spec, &mut out.metadata);
        let queries = FleetQueries::new(spec);

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
        let answers = join_all(round.iter().map(|(_, q)| self.instant(config, q, opts))).await;

        let mut inputs = Inputs::default();
        let mut inventory_empty = false;
        let versions: Vec<&crate::spec::VersionSpec> = spec.versions().collect();
        let labels: Vec<&str> = versions.iter().map(|v| v.label.as_str()).collect();
        let mut labels_seen = std::collections::BTreeSet::new();
        for ((role, _), answer) in round.iter().zip(answers) {
            let response = match answer {
                Ok(r) => r,
                Err(e) => return out.error(format!("fleet {} failed: {e}", role.describe())),
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
            };
            if let Err(why) = read {
                return out.error(format!("fleet {}: {why}", role.describe()));
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
                return out.error(incomplete("the selector matched no series"));
            }
            let (phase, message) =
                no_data::verdict(no_data, "fleet.selector", &spec.selector, &NoData::Empty);
            out.metadata
                .insert("noData".into(), NoData::Empty.describe());
            return out.finish(
                phase,
                format!(
                    "{message} (no series with a sample in the last {})",
                    format_duration(spec.max_staleness)
                ),
            );
        }
        if let (true, Some(q)) = (inventory_empty, &queries.inventory) {
            if partial {
                return out.error(incomplete("expectedTargetsQuery returned no targets"));
            }
            let (phase, message) =
                no_data::verdict(no_data, "fleet.expectedTargetsQuery", q, &NoData::Empty);
            out.metadata
                .insert("noData".into(), NoData::Empty.describe());
            return out.finish(phase, message);
        }
        if let Some(label) = labels.iter().find(|l| !labels_seen.contains(**l)) {
            let message = label_missing(spec, label, series_count(&inputs));
            return out.error(if partial {
                incomplete(&message)
            } else {
                message
            });
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

        let summary = report::value(spec, &fleet);
        out.value = summary.to_string();
        report::metadata(&fleet, &last_seen, &mut out.metadata);
        let message = report::message(spec, &fleet, &last_seen);

        if !out.warnings.is_empty() {
            return out.error(incomplete(&message));
        }
        let built_in = if fleet.passes(spec.min_completion) {
            Phase::Successful
        } else {
            Phase::Failed
        };
        verdict::built_in_unless_conditions(
            out,
            metric,
            built_in,
            &ConditionValue::from(&summary),
            message,
        )
    }
}

/// Warnings (Thanos partial responses, ...) mean some series may be missing: a target could
/// look silent or current only because its store did not answer. So no verdict: Error, which
/// Argo retries up to consecutiveErrorLimit, never a pass.
fn incomplete(what: &str) -> String {
    format!("Prometheus returned warnings, so the fleet data may be incomplete and no verdict is given; on the data received: {what}")
}

/// The series the selector matched (now, or within maxStaleness when nothing is current).
fn series_count(inputs: &Inputs) -> u64 {
    let total = |v: &state::View| -> u64 {
        v.values()
            .map(|t| t.versions.values().sum::<u64>() + t.unlabelled)
            .sum()
    };
    match total(&inputs.now) + total(&inputs.terminal) {
        0 => total(&inputs.recent),
        n => n,
    }
}

/// A version label on none of the series is a wrong `version.label`, not a fleet problem;
/// `image_spec` is missing on every series of kube-state-metrics before v2.3.0.
fn label_missing(spec: &FleetSpec, label: &str, series: u64) -> String {
    let mut message = format!(
        "version.label {label} is on none of the {} series fleet.selector matches",
        report::count(series)
    );
    if label == "image_spec" && spec.selects_pods() {
        message.push_str(
            " (kube-state-metrics adds image_spec from v2.3.0 on; with an older one use version.label image or image_id)",
        );
    } else {
        message.push_str(" (check version.label: image_id, image, image_spec, ...)");
    }
    message
}

/// The queries a fleet metric will send, for `GetMetadata` and dry-run output.
pub(super) fn describe(spec: &FleetSpec, meta: &mut BTreeMap<String, String>) {
    let q = FleetQueries::new(spec);
    meta.insert("selector".into(), spec.selector.clone());
    meta.insert("groupBy".into(), spec.group_by.clone());
    meta.insert("version.label".into(), spec.version.label.clone());
    meta.insert("version.expected".into(), spec.version.expected.describe());
    for v in &spec.also {
        meta.insert(format!("version.{}", v.label), v.expected.describe());
    }
    meta.insert("maxStaleness".into(), format_duration(spec.max_staleness));
    meta.insert(
        "minCompletion".into(),
        crate::engine::result::format_number(spec.min_completion),
    );
    meta.insert(
        "expectedTargets".into(),
        match &spec.expected_targets {
            ExpectedTargets::List(l) => format!("{} listed", l.len()),
            ExpectedTargets::Query(_) => "from expectedTargetsQuery".into(),
            ExpectedTargets::Reporting => "reporting".into(),
        },
    );
    meta.insert("query.versions".into(), q.versions);
    if let Some(terminal) = q.terminal {
        meta.insert("query.terminal".into(), terminal);
    }
    meta.insert("query.reporting".into(), q.reporting);
    if let Some(init) = q.init {
        meta.insert("query.init".into(), init);
    }
    if let Some(inv) = q.inventory {
        meta.insert("query.inventory".into(), inv);
    }
    for (kind, query) in q.stalls {
        meta.insert(format!("query.stall.{}", kind.key()), query);
    }
}
