//! The `fleet` kind: fail while any target still runs the old version or has gone silent.
//!
//! One round of concurrent, aggregated queries (versions now, versions within maxStaleness,
//! init containers, inventory, workload conditions), then — only when some target is silent —
//! one query for when those were last seen. Classification is in [`state`], words and numbers
//! in [`report`], the PromQL (shared with `rollgate rules`) in [`promql`]. docs/fleet.md
//! explains the states and the choices.

mod gather;
mod plan;
mod promotion;
mod promql;
mod report;
mod rules;
mod state;

pub use plan::{FleetPlan, FleetPlanError};

// For `rollgate dashboard` (engine::dashboard): the same version matcher as the gate.
pub(crate) use promql::{expected_matcher, quote, render_selector};

use std::collections::BTreeMap;

use crate::condition::Value as ConditionValue;
use crate::measurement::Phase;
use crate::spec::duration::format_duration;
use crate::spec::{ExpectedTargets, FleetSpec};

use super::{verdict, Ctx, Engine, EvalOptions, Outcome};

use promql::FleetQueries;
use state::Inputs;

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
    HeldSteps,
    HeldLastBad,
    FirstSeen,
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
            Role::HeldSteps => "holdFor query".into(),
            Role::HeldLastBad => "holdFor last-change query".into(),
            Role::FirstSeen => "first-seen query (completion tiers)".into(),
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
        let (mut out, judged) = match self.judge_fleet(spec, no_data, config, opts, out).await {
            Ok(j) => j,
            Err(done) => return done,
        };
        out.value = judged.summary.to_string();
        let message = judged.message;
        let summary = judged.summary;

        if !out.warnings.is_empty() {
            return out.error(incomplete(&message));
        }
        let built_in = if judged.passes {
            Phase::Successful
        } else {
            Phase::Failed
        };
        verdict::built_in_unless_conditions(
            out,
            metric,
            built_in,
            || ConditionValue::from(&summary),
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
    if let Some(h) = q.held {
        meta.insert("query.held".into(), h.steps);
        meta.insert("query.heldLastChange".into(), h.last_bad);
    }
    if let Some(f) = q.first_seen {
        meta.insert("query.firstSeen".into(), f);
    }
    let p = &spec.promotion;
    if p.hold_for.is_some() {
        // As written, as in the message.
        meta.insert("holdFor".into(), report::hold_for_text(spec));
    }
    if !p.cohorts.is_empty() {
        let names: Vec<&str> = p.cohorts.iter().map(|c| c.name.as_str()).collect();
        meta.insert("cohorts".into(), names.join(", "));
    }
}
