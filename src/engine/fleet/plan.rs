//! `rollgate fleet plan|versions`: the target matrix and the version matrix of a fleet metric,
//! from the live inventory, through the gate's own queries and classification
//! ([`Engine::judge_fleet`](super::gather)).

use std::collections::BTreeMap;

use chrono::Utc;
use serde::Serialize;

use crate::spec::{FleetSpec, Metric, MetricKind, Provider};

use super::super::{Engine, EvalOptions, Outcome};
use super::describe;
use super::gather::Judged;
use super::report::short_version;

/// Targets listed per version in the version matrix; more are counted.
const NAMES_PER_VERSION: usize = 8;

/// One target as `fleet plan` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanTarget {
    /// The target (`groupBy` value).
    pub target: String,
    /// The versions it runs now (shortened digests), with their series counts.
    pub versions: Vec<String>,
    /// `current`, `straggler`, `silent`, `not held`, `stalled`, `supported`, `excepted`, ...
    pub state: String,
}

/// One cohort of the plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanCohort {
    /// Its name.
    pub name: String,
    /// `maxConcurrent`, when given.
    #[serde(rename = "maxConcurrent", skip_serializing_if = "Option::is_none")]
    pub max_concurrent: Option<u64>,
    /// Its members in the inventory.
    pub targets: Vec<PlanTarget>,
    /// Its listed members missing from the inventory.
    pub missing: Vec<String>,
}

/// One version of the version matrix.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VersionRow {
    /// The version (the label's value; `label=value, ...` with several labels).
    pub version: String,
    /// Whether it is the expected one.
    pub expected: bool,
    /// Targets running it.
    pub targets: usize,
    /// Series (pods, for a pod selector) running it.
    pub pods: u64,
    /// The first targets running it.
    #[serde(rename = "targetNames")]
    pub target_names: Vec<String>,
}

/// The target matrix before (or during) a release.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetPlan {
    /// The metric's name.
    pub metric: String,
    /// The `groupBy` label.
    #[serde(rename = "groupBy")]
    pub group_by: String,
    /// The expected version as the gate reads it.
    pub expected: String,
    /// The gate's verdict now (`Successful`, `Failed`) and its message.
    pub verdict: String,
    /// The gate's message.
    pub message: String,
    /// The cohorts in order (empty without `cohorts`).
    pub cohorts: Vec<PlanCohort>,
    /// Inventory targets in no cohort (every target without `cohorts`).
    pub unselected: Vec<PlanTarget>,
    /// Reporting targets outside the inventory.
    #[serde(rename = "outsideInventory")]
    pub outside_inventory: Vec<PlanTarget>,
    /// The version matrix.
    pub versions: Vec<VersionRow>,
    /// The queries sent (as the gate's metadata names them).
    pub queries: BTreeMap<String, String>,
}

impl Engine {
    /// The plan of fleet metric `metric`, measured now (or at `opts.at`) with the gate's
    /// queries. `Err` when it is not a fleet metric, or the gate itself could not judge.
    pub async fn fleet_plan(
        &self,
        metric: &Metric,
        opts: &EvalOptions,
    ) -> Result<FleetPlan, String> {
        let Provider::Rollgate(rs) = &metric.provider else {
            return Err(format!("metric {} is not a rollgate metric", metric.name));
        };
        let MetricKind::Fleet(spec) = &rs.kind else {
            return Err(format!("metric {} has no fleet: block", metric.name));
        };
        let config = self.resolve(&rs.prometheus)?;
        let pinned = EvalOptions {
            at: Some(opts.at.unwrap_or_else(Utc::now)),
            ..opts.clone()
        };
        let mut out = Outcome::new();
        describe(spec, &mut out.metadata);
        let queries: BTreeMap<String, String> = out
            .metadata
            .iter()
            .filter(|(k, _)| k.starts_with("query."))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let (out, judged) = match self
            .judge_fleet(spec, rs.no_data, &config, &pinned, out)
            .await
        {
            Ok(j) => j,
            Err(done) => {
                return Err(format!(
                    "the fleet gate gives {:?}: {}",
                    done.phase.unwrap_or(crate::measurement::Phase::Error),
                    done.message
                ))
            }
        };
        let verdict = if !out.warnings.is_empty() {
            "Error"
        } else if judged.passes {
            "Successful"
        } else {
            "Failed"
        };
        Ok(plan(metric, spec, &judged, verdict.into(), queries))
    }
}

fn plan(
    metric: &Metric,
    spec: &FleetSpec,
    judged: &Judged,
    verdict: String,
    queries: BTreeMap<String, String>,
) -> FleetPlan {
    let fleet = &judged.fleet;
    let row = |t: &String| PlanTarget {
        target: t.clone(),
        versions: fleet
            .by_target
            .get(t)
            .map(|v| {
                let mut out: Vec<String> = v
                    .versions
                    .iter()
                    .map(|(k, n)| format!("{} x{n}", short_version(k)))
                    .collect();
                if v.unlabelled > 0 {
                    out.push(format!("(no {}) x{}", spec.version.label, v.unlabelled));
                }
                out
            })
            .unwrap_or_default(),
        state: fleet.state_of(t).to_string(),
    };
    let (cohorts, unselected) = match &judged.judgement.membership {
        Some(m) => (
            spec.promotion
                .cohorts
                .iter()
                .enumerate()
                .map(|(i, c)| PlanCohort {
                    name: c.name.clone(),
                    max_concurrent: c.max_concurrent,
                    targets: m.members[i].iter().map(row).collect(),
                    missing: m.missing[i].clone(),
                })
                .collect(),
            m.unselected.iter().map(row).collect(),
        ),
        None => (Vec::new(), fleet.inventory.iter().map(row).collect()),
    };
    let mut versions: BTreeMap<String, VersionRow> = BTreeMap::new();
    for (target, tv) in &fleet.by_target {
        let mut add = |version: String, expected: bool, n: u64| {
            let r = versions.entry(version.clone()).or_insert(VersionRow {
                version,
                expected,
                targets: 0,
                pods: 0,
                target_names: Vec::new(),
            });
            r.targets += 1;
            r.pods += n;
            if r.target_names.len() < NAMES_PER_VERSION {
                r.target_names.push(target.clone());
            }
        };
        for (v, n) in &tv.versions {
            add(v.clone(), tv.matching.contains(v), *n);
        }
        if tv.unlabelled > 0 {
            add(format!("(no {})", spec.version.label), false, tv.unlabelled);
        }
    }
    let mut versions: Vec<VersionRow> = versions.into_values().collect();
    // Most targets first: the expected version on top once the rollout is under way.
    versions.sort_by(|a, b| b.targets.cmp(&a.targets).then(a.version.cmp(&b.version)));
    FleetPlan {
        metric: metric.name.clone(),
        group_by: spec.group_by.clone(),
        expected: spec.version.expected.describe(),
        verdict,
        message: judged.message.clone(),
        cohorts,
        unselected,
        outside_inventory: fleet.unexpected.iter().map(row).collect(),
        versions,
        queries,
    }
}
