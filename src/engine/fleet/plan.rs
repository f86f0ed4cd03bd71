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
    /// The targets running it, only when at most 8 do (else none: `targets` counts them).
    #[serde(rename = "targetNames", skip_serializing_if = "Option::is_none")]
    pub target_names: Option<Vec<String>>,
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

/// Why a fleet metric has no plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FleetPlanError {
    /// The metric is Argo's built-in provider or another plugin's.
    #[error("metric {0} is not a rollgate metric")]
    NotRollgate(String),
    /// The metric is a rollgate metric of another kind.
    #[error("metric {0} has no fleet: block")]
    NotFleet(String),
    /// Its Prometheus settings do not resolve (the address, its credentials).
    #[error("{0}")]
    Prometheus(String),
    /// The gate could not judge the fleet: its phase and message.
    #[error("the fleet gate gives {phase:?}: {message}")]
    NotJudged {
        /// The gate's phase (Error when it has none).
        phase: crate::measurement::Phase,
        /// The gate's message.
        message: String,
    },
}

impl Engine {
    /// The plan of fleet metric `metric`, measured now (or at `opts.at`) with the gate's
    /// queries. `Err` when it is not a fleet metric, or the gate itself could not judge.
    pub async fn fleet_plan(
        &self,
        metric: &Metric,
        opts: &EvalOptions,
    ) -> Result<FleetPlan, FleetPlanError> {
        let Provider::Rollgate(rs) = &metric.provider else {
            return Err(FleetPlanError::NotRollgate(metric.name.clone()));
        };
        let MetricKind::Fleet(spec) = &rs.kind else {
            return Err(FleetPlanError::NotFleet(metric.name.clone()));
        };
        let config = self
            .resolve(&rs.prometheus)
            .map_err(FleetPlanError::Prometheus)?;
        let pinned = EvalOptions {
            at: Some(opts.at.unwrap_or_else(Utc::now)),
            ..opts.clone()
        };
        let mut out = Outcome::new();
        describe(spec, &mut out.metadata);
        let (out, judged) = match self
            .judge_fleet(
                spec,
                rs.no_data,
                super::super::Target::Prometheus(&config),
                &pinned,
                out,
            )
            .await
        {
            Ok(j) => j,
            Err(done) => {
                return Err(FleetPlanError::NotJudged {
                    phase: done.phase.unwrap_or(crate::measurement::Phase::Error),
                    message: done.message,
                })
            }
        };
        // After judging: the second round (the last-seen lookup) adds its query there.
        let queries: BTreeMap<String, String> = out
            .metadata
            .iter()
            .filter(|(k, _)| k.starts_with("query."))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let verdict = if !out.warnings.is_empty() {
            "Error"
        } else if judged.passes {
            "Successful"
        } else {
            "Failed"
        };
        Ok(plan(&metric.name, spec, &judged, verdict.into(), queries))
    }
}

fn plan(
    metric: &str,
    spec: &FleetSpec,
    judged: &Judged,
    verdict: String,
    queries: BTreeMap<String, String>,
) -> FleetPlan {
    let fleet = &judged.fleet;
    let states = fleet.states();
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
        state: states.of(t).to_string(),
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
                target_names: Some(Vec::new()),
            });
            r.targets += 1;
            r.pods += n;
            // Names only while few run it; past that the row counts them.
            r.target_names = match r.target_names.take() {
                Some(mut names) if names.len() < NAMES_PER_VERSION => {
                    names.push(target.clone());
                    Some(names)
                }
                _ => None,
            };
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
        metric: metric.to_string(),
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use chrono::{DateTime, Utc};
    use serde_json::{json, Value};

    use super::super::promotion;
    use super::super::state::tests::{tv, NEW, OLD};
    use super::super::state::{classify, Fleet, Held, Inputs, TargetVersions, View, Workload};
    use super::*;

    const SUP: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";

    /// The state word as `Fleet::state_of` defined it before the index (a scan of every list
    /// per target, in order of precedence): the reference the plan must still match.
    fn scanned_state(f: &Fleet, target: &str) -> &'static str {
        let is = |l: &[String]| l.iter().any(|t| t == target);
        if f.excepted.iter().any(|e| e.target == target) {
            "excepted"
        } else if is(&f.silent) {
            "silent"
        } else if f.stragglers.iter().any(|s| s.target == target)
            || f.outside_old.iter().any(|s| s.target == target)
        {
            "straggler"
        } else if is(&f.stalled_targets) {
            "stalled"
        } else if f.unheld.iter().any(|u| u.target == target) {
            "not held"
        } else if is(&f.on_supported) {
            "supported"
        } else if is(&f.current) {
            "current"
        } else if is(&f.unexpected) {
            "unexpected"
        } else {
            "unknown"
        }
    }

    fn versions(pairs: &[(&str, u64)]) -> TargetVersions {
        let mut v = tv(pairs, 0);
        v.supported = pairs
            .iter()
            .filter(|(x, _)| *x == SUP)
            .map(|(x, _)| x.to_string())
            .collect();
        v
    }

    /// `n` inventory targets in every state, overlapping (a straggler that is also not held,
    /// an excepted silent one, ...), 40 reporting targets outside the inventory, 20 cohorts
    /// over the first 90 % of the inventory.
    fn generated(n: usize) -> (FleetSpec, Fleet, DateTime<Utc>) {
        let name = |i: usize| format!("t{i:05}");
        let inventory: Vec<String> = (0..n).map(name).collect();
        let selected = n * 9 / 10;
        let per = selected.div_ceil(20);
        let cohorts: Vec<Value> = inventory[..selected]
            .chunks(per)
            .enumerate()
            .map(|(i, c)| json!({"name": format!("c{i:02}"), "targets": c}))
            .collect();
        let spec = FleetSpec::from_value(
            &json!({
                "selector": "kube_pod_container_info{namespace=\"m\"}",
                "version": {"expected": NEW, "supported": [SUP]},
                "expectedTargets": inventory,
                "cohorts": cohorts,
                "holdFor": "10m",
                "exceptions": [
                    {"target": name(0), "reason": "silent lab", "until": "2099-01-01"},
                    {"target": name(8), "reason": "old lab", "until": "2099-01-01"},
                    {"target": name(15), "reason": "expired", "until": "2020-01-01"},
                    {"target": "x0001", "reason": "outside", "until": "2099-01-01"},
                ],
            }),
            "fleet",
        )
        .unwrap();
        let (mut now, mut recent) = (View::new(), View::new());
        let mut held = Held {
            needed: 20,
            ..Held::default()
        };
        let mut workloads = Vec::new();
        for i in 0..n {
            let t = name(i);
            if i % 11 == 0 {
                continue; // silent
            }
            let v = match i {
                _ if i % 7 == 1 => versions(&[(NEW, 2), (OLD, 1)]),
                _ if i % 13 == 2 => versions(&[(SUP, 3)]),
                _ => versions(&[(NEW, 3)]),
            };
            if i % 23 != 5 {
                now.insert(t.clone(), v.clone());
            }
            recent.insert(t.clone(), v);
            held.steps
                .insert(t.clone(), if i % 17 == 3 { 12 } else { 20 });
            if i % 19 == 4 {
                workloads.push(Workload {
                    target: t.clone(),
                    namespace: "m".into(),
                    kind: "DaemonSet",
                    name: "agent".into(),
                    details: vec!["1 pod not updated".into()],
                    fails: true,
                });
            }
        }
        for i in 0..40 {
            let v = versions(&[(if i % 2 == 0 { OLD } else { NEW }, 1)]);
            now.insert(format!("x{i:04}"), v.clone());
            recent.insert(format!("x{i:04}"), v);
        }
        let at = DateTime::parse_from_rfc3339("2026-06-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let fleet = classify(
            &spec,
            at,
            Inputs {
                now,
                recent,
                inventory: Some(inventory.iter().cloned().collect()),
                workloads,
                held: Some(held),
                ..Inputs::default()
            },
        );
        (spec, fleet, at)
    }

    #[test]
    fn the_plan_of_a_large_fleet_gives_every_target_its_scanned_state() {
        let (spec, fleet, at) = generated(6000);
        let judgement = promotion::judge(&spec, &fleet, None, at).unwrap();
        let states = fleet.states();
        // Every state occurs, so the precedence is exercised, and the index agrees with the
        // scan for every target (and for one it never saw).
        let mut seen = BTreeSet::new();
        let outside = (0..40).map(|i| format!("x{i:04}"));
        for t in fleet.inventory.iter().cloned().chain(outside) {
            assert_eq!(states.of(&t), scanned_state(&fleet, &t), "{t}");
            seen.insert(states.of(&t));
        }
        assert_eq!(states.of("nope"), "unknown");
        assert_eq!(
            seen.into_iter().collect::<Vec<_>>(),
            [
                "current",
                "excepted",
                "not held",
                "silent",
                "stalled",
                "straggler",
                "supported",
                "unexpected"
            ]
        );
        let judged = Judged {
            summary: Value::Null,
            message: String::new(),
            passes: false,
            fleet,
            judgement,
        };
        let p = plan("m", &spec, &judged, "Failed".into(), BTreeMap::new());
        let rows: Vec<&PlanTarget> = p
            .cohorts
            .iter()
            .flat_map(|c| &c.targets)
            .chain(&p.unselected)
            .chain(&p.outside_inventory)
            .collect();
        assert_eq!(rows.len(), 6000 + 39, "x0001 is excepted, not outside");
        for r in rows {
            assert_eq!(
                r.state,
                scanned_state(&judged.fleet, &r.target),
                "{}",
                r.target
            );
        }
    }
}
