//! Cohorts and completion tiers over a classified fleet: which targets the promoted
//! cohort's gate requires, who belongs to no cohort, how many change at once, and whether a
//! completion tier's deadline passed with its share not reached. Pure functions, no I/O.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::spec::duration::format_duration;
use crate::spec::{CohortTargets, FleetSpec};

use super::report::{counted, display_target, human_age, listing, percent, plural};
use super::state::{Fleet, TargetState};

/// Who is in which cohort, on the live inventory.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Membership {
    /// Per cohort (spec order), its members that are in the inventory.
    pub members: Vec<Vec<String>>,
    /// Per cohort, its listed members missing from the inventory.
    pub missing: Vec<Vec<String>>,
    /// Inventory targets in no cohort.
    pub unselected: Vec<String>,
}

/// Places the inventory's targets in cohorts. Errors (a live inventory only; a listed one is
/// checked with the spec): two cohorts selecting one target, a regex cohort matching nothing.
pub(crate) fn membership(
    spec: &FleetSpec,
    inventory: &BTreeSet<String>,
) -> Result<Membership, String> {
    let mut m = Membership::default();
    let mut owner: BTreeMap<&str, &str> = BTreeMap::new();
    for (i, c) in spec.promotion.cohorts.iter().enumerate() {
        let (members, missing): (Vec<String>, Vec<String>) = match &c.targets {
            CohortTargets::List(l) => l.iter().cloned().partition(|t| inventory.contains(t)),
            CohortTargets::Regex(r) => {
                let hit: Vec<String> = inventory
                    .iter()
                    .filter(|t| r.is_match(t))
                    .cloned()
                    .collect();
                if hit.is_empty() {
                    return Err(format!(
                        "fleet.cohorts[{i}].targetRegex: {:?} matches none of the {} targets of the inventory",
                        r.source(),
                        inventory.len()
                    ));
                }
                (hit, Vec::new())
            }
        };
        m.members.push(members);
        m.missing.push(missing);
    }
    for (i, members) in m.members.iter().enumerate() {
        let name = spec.promotion.cohorts[i].name.as_str();
        for t in members {
            if let Some(other) = owner.insert(t, name) {
                return Err(format!(
                    "fleet.cohorts[{i}]: cohorts overlap: {t} is in cohort {other:?} and in cohort {name:?}"
                ));
            }
        }
    }
    m.unselected = inventory
        .iter()
        .filter(|t| !owner.contains_key(t.as_str()))
        .cloned()
        .collect();
    Ok(m)
}

/// What cohorts and tiers add to the verdict.
#[derive(Debug, Clone, Default)]
pub(crate) struct Judgement {
    /// The fleet narrowed to the cohorts the gate requires (with cohorts).
    pub scoped: Option<Fleet>,
    /// Reasons to fail, each a message part.
    pub failures: Vec<String>,
    /// Message parts that explain without failing.
    pub notes: Vec<String>,
    /// Additions to the JSON `value`.
    pub value: serde_json::Map<String, Value>,
    /// Additions to `metadata`.
    pub metadata: BTreeMap<String, String>,
    /// Cohort membership (with cohorts).
    pub membership: Option<Membership>,
}

/// Judges cohorts and completion tiers at `at`; `first_seen` is when the expected version was
/// first seen (Unix seconds), for tiers without `startedAt`.
pub(crate) fn judge(
    spec: &FleetSpec,
    fleet: &Fleet,
    first_seen: Option<f64>,
    at: DateTime<Utc>,
) -> Result<Judgement, String> {
    let mut j = Judgement::default();
    if !spec.promotion.cohorts.is_empty() {
        cohorts(spec, fleet, &mut j)?;
    }
    if !spec.promotion.completion.is_empty() {
        tiers(spec, fleet, first_seen, at, &mut j);
    }
    Ok(j)
}

fn cohorts(spec: &FleetSpec, fleet: &Fleet, j: &mut Judgement) -> Result<(), String> {
    let p = &spec.promotion;
    let m = membership(spec, &fleet.inventory)?;
    let k = p.cohort.unwrap_or(p.cohorts.len() - 1);
    let g = &spec.group_by;
    let required: BTreeSet<String> = m.members[..=k].iter().flatten().cloned().collect();
    let missing_required: Vec<String> = m.missing[..=k].iter().flatten().cloned().collect();
    let mut scoped = fleet.restrict(&required);
    // A required member the inventory lacks cannot be judged: it counts as not done.
    scoped.inventory_size += missing_required.len();

    // "Done" is one thing everywhere: on the expected version itself (held, no stall) or
    // excepted; a target on a supported older version passes but is not done.
    let states = fleet.states();
    let summary: Vec<String> = (0..=k)
        .map(|i| {
            let of = |want: fn(TargetState) -> bool| {
                m.members[i]
                    .iter()
                    .filter(|t| states.get(t).is_some_and(want))
                    .count()
            };
            let done = of(TargetState::done);
            let supported = of(|s| s == TargetState::Supported);
            let mut line = format!(
                "{} {done} of {} done",
                p.cohorts[i].name,
                m.members[i].len() + m.missing[i].len()
            );
            if supported > 0 {
                line.push_str(&format!(" ({supported} within the support window)"));
            }
            line
        })
        .collect();
    j.notes.push(format!(
        "promoting cohort {} ({} of {}): {}",
        p.cohorts[k].name,
        k + 1,
        p.cohorts.len(),
        summary.join(", ")
    ));
    if !missing_required.is_empty() {
        j.failures.push(format!(
            "{} cohort {} missing from the inventory ({})",
            missing_required.len(),
            if missing_required.len() == 1 {
                "member"
            } else {
                "members"
            },
            listing(missing_named(spec, &m, 0..=k))
        ));
    }
    let later = m.missing[k + 1..].iter().flatten().count();
    if later > 0 {
        j.notes.push(format!(
            "{later} {} of later cohorts missing from the inventory ({})",
            if later == 1 { "member" } else { "members" },
            listing(missing_named(spec, &m, k + 1..=p.cohorts.len() - 1))
        ));
    }
    // No cohort will ever promote an unselected target, so it fails the gate unless there is
    // nothing left to promote: excepted, or already current (on the expected version, held,
    // no stall). An unselected target on a supported older version still fails: no cohort
    // would bring it to the expected version.
    let (settled, unselected): (Vec<&String>, Vec<&String>) = m.unselected.iter().partition(|t| {
        matches!(
            states.get(t),
            Some(TargetState::Excepted | TargetState::Current)
        )
    });
    if !unselected.is_empty() {
        j.failures.push(format!(
            "{} {} in no cohort (unselected: {})",
            unselected.len(),
            counted(g, unselected.len()),
            listing(unselected.iter().map(|t| format!(
                "{} {}",
                display_target(t, spec),
                states.of(t)
            )))
        ));
    }
    let current: Vec<&&String> = settled
        .iter()
        .filter(|t| states.get(t) == Some(TargetState::Current))
        .collect();
    if !current.is_empty() {
        j.notes.push(format!(
            "{} {} in no cohort already current, not failing ({})",
            current.len(),
            counted(g, current.len()),
            listing(current.iter().map(|t| display_target(t, spec)))
        ));
    }
    let changing: BTreeSet<&str> = fleet
        .stragglers
        .iter()
        .filter(|s| s.mixed())
        .map(|s| s.target.as_str())
        .chain(fleet.stalled.iter().map(|w| w.target.as_str()))
        .collect();
    // Only the cohorts the gate requires: a later one is not this step's business.
    for (i, c) in p.cohorts.iter().enumerate().take(k + 1) {
        let Some(max) = c.max_concurrent else {
            continue;
        };
        let mid: Vec<&String> = m.members[i]
            .iter()
            .filter(|t| changing.contains(t.as_str()))
            .collect();
        if mid.len() as u64 > max {
            j.failures.push(format!(
                "cohort {}: {} {} mid-change at once, maxConcurrent {max} ({})",
                c.name,
                mid.len(),
                plural(g),
                listing(mid.iter().map(|t| t.to_string()))
            ));
        }
    }
    j.value.insert("cohort".into(), json!(p.cohorts[k].name));
    j.value
        .insert("unselected".into(), json!(m.unselected.len()));
    j.value.insert(
        "missingFromInventory".into(),
        json!(m.missing.iter().flatten().count()),
    );
    if !m.unselected.is_empty() {
        j.metadata
            .insert("unselected".into(), m.unselected.join(", "));
    }
    let missing: Vec<String> = missing_named(spec, &m, 0..=p.cohorts.len() - 1).collect();
    if !missing.is_empty() {
        j.metadata
            .insert("missingFromInventory".into(), missing.join(", "));
    }
    j.metadata
        .insert("cohort".into(), p.cohorts[k].name.clone());
    j.scoped = Some(scoped);
    j.membership = Some(m);
    Ok(())
}

/// `edge-99 (canary)` for the missing members of the cohorts in `range`.
fn missing_named<'a>(
    spec: &'a FleetSpec,
    m: &'a Membership,
    range: std::ops::RangeInclusive<usize>,
) -> impl Iterator<Item = String> + 'a {
    range.flat_map(move |i| {
        m.missing[i]
            .iter()
            .map(move |t| format!("{t} ({})", spec.promotion.cohorts[i].name))
    })
}

fn tiers(
    spec: &FleetSpec,
    fleet: &Fleet,
    first_seen: Option<f64>,
    at: DateTime<Utc>,
    j: &mut Judgement,
) {
    let p = &spec.promotion;
    let start = p
        .started_at
        .map(|t| t.timestamp() as f64)
        .or(first_seen.filter(|t| t.is_finite()));
    let share = fleet.done_share();
    j.value.insert("doneShare".into(), json!(round6(share)));
    let Some(start) = start else {
        j.notes.push(format!(
            "completion tiers: the expected version was not seen yet, so no tier is due ({} done)",
            percent(share)
        ));
        return;
    };
    let elapsed = at.timestamp() as f64 - start;
    // A Unix time in seconds from Prometheus; a float-to-int `as` saturates, and an
    // out-of-range time gives no RFC 3339 text.
    #[allow(clippy::cast_possible_truncation)]
    let start_secs = start as i64;
    j.metadata.insert(
        "completion.startedAt".into(),
        DateTime::from_timestamp(start_secs, 0)
            .map(|t| t.to_rfc3339())
            .unwrap_or_default(),
    );
    let noun = plural(&spec.group_by);
    for (i, tier) in p.completion.iter().enumerate() {
        let within = tier.within.as_secs_f64();
        let name = format!(
            "completion tier {} ({} within {})",
            i + 1,
            percent(tier.share),
            tier_within(tier)
        );
        if elapsed < within {
            j.notes.push(format!(
                "next {name} is due in {} ({} done)",
                human_age(within - elapsed),
                percent(share)
            ));
            break;
        }
        if share + 1e-9 < tier.share {
            let done = fleet.done_targets();
            let missing: Vec<&String> = fleet
                .inventory
                .iter()
                .filter(|t| !done.contains(t.as_str()))
                .collect();
            j.failures.push(format!(
                "{name} missed: {} of {} done {} after the start; missing {} {} ({})",
                percent(share),
                noun,
                human_age(elapsed),
                missing.len(),
                counted(&spec.group_by, missing.len()),
                listing(missing.iter().map(|t| display_target(t, spec)))
            ));
            j.value.insert("missedTier".into(), json!(i + 1));
            break;
        }
    }
}

/// A tier's `within` as the spec wrote it.
fn tier_within(tier: &crate::spec::CompletionTier) -> String {
    if tier.within_text.is_empty() {
        format_duration(tier.within)
    } else {
        tier.within_text.clone()
    }
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}
