//! The fleet verdict in words and numbers: the one-sentence message, the JSON `value` and the
//! per-target lists in `metadata`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::engine::result::format_count;
use crate::spec::duration::format_duration;
use crate::spec::{is_bare_digest, FleetSpec};

use super::state::{Excused, Fleet, Straggler, TargetState, Workload};

/// Targets named in a message per list; the rest is a count.
const SHOWN: usize = 10;
/// Names per metadata list before it is cut (AnalysisRun objects live in etcd, ~1.5 MB max).
const METADATA_MAX: usize = 2000;

/// When the silent targets were last seen.
#[derive(Debug, Clone, Default)]
pub(crate) struct LastSeen {
    /// Target -> seconds since its last sample (targets absent were not seen in `window`).
    pub ages: BTreeMap<String, f64>,
    /// How far back the last sample was looked for.
    pub window: Duration,
    /// Why the ages are unknown, when the lookup failed.
    pub failed: Option<String>,
}

/// The message: why the verdict, failures first, then completion, then notes.
pub(crate) fn message(spec: &FleetSpec, fleet: &Fleet, last_seen: &LastSeen, at: f64) -> String {
    let noun = plural(&spec.group_by);
    let n = fleet.inventory_size;
    let mut parts: Vec<String> = Vec::new();
    if !fleet.stragglers.is_empty() {
        parts.push(format!(
            "{} of {n} {noun} still {} {} ({})",
            fleet.stragglers.len(),
            run(fleet.stragglers.len()),
            old_versions(&fleet.stragglers, &spec.version.label),
            listing(fleet.stragglers.iter().map(|s| straggler_item(s, spec)))
        ));
    }
    if !fleet.silent.is_empty() {
        parts.push(format!(
            "{} of {n} {noun} silent for > {} ({})",
            fleet.silent.len(),
            format_duration(spec.max_staleness),
            listing(fleet.silent.iter().map(|t| silent_item(t, last_seen)))
        ));
    }
    if !fleet.outside_old.is_empty() {
        let k = fleet.outside_old.len();
        parts.push(format!(
            "{k} {} outside the inventory still {} {} ({})",
            counted(&spec.group_by, k),
            run(k),
            old_versions(&fleet.outside_old, &spec.version.label),
            listing(fleet.outside_old.iter().map(|s| straggler_item(s, spec)))
        ));
    }
    if !fleet.unheld.is_empty() {
        let hold = hold_for_text(spec);
        parts.push(format!(
            "{} of {n} {noun} not held for {hold} ({})",
            fleet.unheld.len(),
            listing(fleet.unheld.iter().map(|u| match u.last_change {
                Some(t) => format!(
                    "{} last changed {} ago",
                    display_target(&u.target, spec),
                    human_age(at - t)
                ),
                None => format!(
                    "{} reported at {} of the window's steps",
                    display_target(&u.target, spec),
                    u.steps
                ),
            }))
        ));
    }
    if !fleet.stalled.is_empty() {
        parts.push(format!(
            "{} {} stalled ({})",
            fleet.stalled.len(),
            if fleet.stalled.len() == 1 {
                "workload"
            } else {
                "workloads"
            },
            listing(fleet.stalled.iter().map(workload_item))
        ));
    }
    // "On the expected version": a supported target is named in its own part below.
    let done =
        fleet.current.len().saturating_sub(fleet.on_supported.len()) + fleet.excepted_expected;
    let summary = if fleet.stragglers.is_empty()
        && fleet.silent.is_empty()
        && fleet.unheld.is_empty()
        && fleet.stalled_targets.is_empty()
    {
        format!(
            "{done} of {n} {noun} {} {}",
            if fleet.excepted_expected > 0 {
                "current or excepted, on"
            } else {
                "current on"
            },
            short_version(&spec.version.expected.describe())
        )
    } else {
        format!(
            "{} of {n} {noun} current or excepted, {} required",
            percent(fleet.completion()),
            percent(spec.min_completion)
        )
    };
    parts.push(summary);
    if !fleet.outside_supported.is_empty() {
        let k = fleet.outside_supported.len();
        let versions: BTreeSet<String> = fleet
            .outside_supported
            .iter()
            .filter_map(|t| fleet.by_target.get(t))
            .flat_map(|v| v.supported.iter().map(|x| short_version(x)))
            .collect();
        parts.push(format!(
            "{k} {} outside the inventory {} {}, within the support window ({})",
            counted(&spec.group_by, k),
            run(k),
            versions.into_iter().collect::<Vec<_>>().join(" or "),
            listing(
                fleet
                    .outside_supported
                    .iter()
                    .map(|t| display_target(t, spec))
            )
        ));
    }
    // Outside the inventory and on the expected version: the one state that says so.
    let states = fleet.states();
    let outside_current: Vec<&String> = fleet
        .unexpected
        .iter()
        .filter(|t| states.get(t) == Some(TargetState::Unexpected))
        .collect();
    if !outside_current.is_empty() {
        parts.push(format!(
            "{} {} outside the inventory {} the expected version ({})",
            outside_current.len(),
            counted(&spec.group_by, outside_current.len()),
            if outside_current.len() == 1 {
                "reports"
            } else {
                "report"
            },
            listing(outside_current.iter().map(|t| display_target(t, spec)))
        ));
    }
    if !fleet.on_supported.is_empty() {
        parts.push(format!(
            "{} within the support window, not yet on the expected version ({})",
            fleet.on_supported.len(),
            listing(fleet.on_supported.iter().map(|t| display_target(t, spec)))
        ));
    }
    if !fleet.excepted.is_empty() {
        parts.push(format!(
            "{} excepted ({})",
            fleet.excepted.len(),
            listing(fleet.excepted.iter().map(|e| format!(
                "{}: {}, until {}",
                display_target(&e.target, spec),
                e.reason,
                e.until
            )))
        ));
    }
    if !fleet.expired.is_empty() {
        parts.push(format!(
            "{} expired {} no longer {} ({})",
            fleet.expired.len(),
            if fleet.expired.len() == 1 {
                "exception"
            } else {
                "exceptions"
            },
            if fleet.expired.len() == 1 {
                "counts"
            } else {
                "count"
            },
            listing(fleet.expired.iter().map(|e| format!(
                "{} until {}",
                display_target(&e.target, spec),
                e.until
            )))
        ));
    }
    if !fleet.noticed.is_empty() {
        parts.push(format!(
            "noticed, not failing: {}",
            listing(fleet.noticed.iter().map(workload_item))
        ));
    }
    if !fleet.from_last_samples.is_empty() {
        parts.push(format!(
            "{} not in the current view, judged on their samples of the last {} ({})",
            fleet.from_last_samples.len(),
            format_duration(spec.max_staleness),
            listing(
                fleet
                    .from_last_samples
                    .iter()
                    .map(|t| display_target(t, spec))
            )
        ));
    }
    if !fleet.terminal.is_empty() {
        let total: u64 = fleet.terminal.values().sum();
        parts.push(format!(
            "{} in a terminal phase (Succeeded, Failed) not judged ({})",
            units(spec, total),
            listing(
                fleet
                    .terminal
                    .iter()
                    .map(|(t, n)| format!("{} {n}", display_target(t, spec)))
            )
        ));
    }
    if fleet.reporting_inventory {
        parts.push(format!(
            "silent {noun} cannot be detected with expectedTargets: reporting"
        ));
    }
    parts.join("; ")
}

/// The JSON summary: counts per state, completion, versions with their series counts.
pub(crate) fn value(spec: &FleetSpec, fleet: &Fleet) -> Value {
    let counts = |m: &BTreeMap<String, u64>| -> Value {
        Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), json!(v)))
                .collect::<Map<_, _>>(),
        )
    };
    let mut v = json!({
        "expected": fleet.inventory_size,
        "current": fleet.current.len(),
        "stragglers": fleet.stragglers.len(),
        "silent": fleet.silent.len(),
        "unexpected": fleet.unexpected.len(),
        "stragglersOutsideInventory": fleet.outside_old.len(),
        "excepted": fleet.excepted.len(),
        "expiredExceptions": fleet.expired.len(),
        "stalledWorkloads": fleet.stalled.len(),
        "completion": round6(fleet.completion()),
        "notHeld": fleet.unheld.len(),
        "stalledTargets": fleet.stalled_targets.len(),
        "onSupported": fleet.on_supported.len(),
        "supportedOutsideInventory": fleet.outside_supported.len(),
        "minCompletion": spec.min_completion,
        "versions": counts(&fleet.versions),
        "unlabelled": fleet.unlabelled,
    });
    if spec.include_init_containers {
        v["initVersions"] = counts(&fleet.init_versions);
    }
    if spec.ignore_terminal_pods {
        v["terminalPods"] = json!(fleet.terminal.values().sum::<u64>());
    }
    v
}

/// The full per-target lists (comma-separated) and counts for `metadata`.
pub(crate) fn metadata(fleet: &Fleet, last_seen: &LastSeen, meta: &mut BTreeMap<String, String>) {
    let mut put = |key: &str, items: Vec<String>| {
        if !items.is_empty() {
            meta.insert(key.to_string(), capped(items));
        }
    };
    put(
        "stragglers",
        fleet.stragglers.iter().map(|s| s.target.clone()).collect(),
    );
    put("silent", fleet.silent.clone());
    put(
        "notHeld",
        fleet.unheld.iter().map(|u| u.target.clone()).collect(),
    );
    put("stalledTargets", fleet.stalled_targets.clone());
    put("onSupported", fleet.on_supported.clone());
    put("supportedOutsideInventory", fleet.outside_supported.clone());
    put("unexpected", fleet.unexpected.clone());
    put(
        "stragglersOutsideInventory",
        fleet.outside_old.iter().map(|s| s.target.clone()).collect(),
    );
    put(
        "excepted",
        fleet.excepted.iter().map(|e| e.target.clone()).collect(),
    );
    put(
        "expiredExceptions",
        fleet.expired.iter().map(excused_id).collect(),
    );
    put("stalled", fleet.stalled.iter().map(Workload::id).collect());
    put("noticed", fleet.noticed.iter().map(Workload::id).collect());
    put("fromLastSamples", fleet.from_last_samples.clone());
    put(
        "terminalPods",
        fleet
            .terminal
            .iter()
            .map(|(t, n)| format!("{t}={n}"))
            .collect(),
    );
    put(
        "unlabelledTargets",
        fleet
            .stragglers
            .iter()
            .chain(&fleet.outside_old)
            .filter(|s| s.unlabelled > 0)
            .map(|s| s.target.clone())
            .collect(),
    );
    put(
        "silentLastSeen",
        fleet
            .silent
            .iter()
            .filter_map(|t| last_seen.ages.get(t).map(|a| format!("{t}={}s", a.round())))
            .collect(),
    );
    if let Some(why) = &last_seen.failed {
        meta.insert("silentLastSeen.error".into(), why.clone());
    }
    meta.insert("current".into(), fleet.current.len().to_string());
    meta.insert("expected".into(), fleet.inventory_size.to_string());
}

fn excused_id(e: &Excused) -> String {
    format!("{} (until {})", e.target, e.until)
}

fn capped(items: Vec<String>) -> String {
    let total = items.len();
    let mut text = items
        .into_iter()
        .take(METADATA_MAX)
        .collect::<Vec<_>>()
        .join(", ");
    if total > METADATA_MAX {
        text.push_str(&format!(", ... and {} more", total - METADATA_MAX));
    }
    text
}

/// `a, b, c` for the first ten, then `and N more`.
pub(crate) fn listing(items: impl Iterator<Item = String>) -> String {
    let mut shown = Vec::new();
    let mut rest = 0usize;
    for item in items {
        if shown.len() < SHOWN {
            shown.push(item);
        } else {
            rest += 1;
        }
    }
    if rest > 0 {
        shown.push(format!("and {rest} more"));
    }
    shown.join(", ")
}

pub(crate) fn display_target(target: &str, spec: &FleetSpec) -> String {
    if target.is_empty() {
        format!("(no {} label)", spec.group_by)
    } else {
        target.to_string()
    }
}

/// `3 pods` for a pod selector, `3 series` for any other (an Argo CD application, a Flux
/// resource).
fn units(spec: &FleetSpec, n: u64) -> String {
    match (spec.selects_pods(), n) {
        (true, 1) => "1 pod".into(),
        (true, n) => format!("{n} pods"),
        (false, n) => format!("{n} series"),
    }
}

/// `edge-017 3 pods`, `edge-250 1 pod without image_id`, `edge-120 1 init container`; with a
/// support window, `edge-17 runs 1.4.2, outside the support window`.
pub(crate) fn straggler_item(s: &Straggler, spec: &FleetSpec) -> String {
    if !spec.version.supported.is_empty() && !s.versions.is_empty() {
        let versions: Vec<String> = s
            .versions
            .iter()
            .map(|v| short_version(v))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        return format!(
            "{} runs {}, outside the support window",
            display_target(&s.target, spec),
            versions.join(" and ")
        );
    }
    let mut what = Vec::new();
    if s.old > 0 {
        what.push(units(spec, s.old));
    }
    if s.unlabelled > 0 {
        let labels: Vec<&str> = spec.versions().map(|v| v.label.as_str()).collect();
        what.push(format!(
            "{} without {}",
            units(spec, s.unlabelled),
            labels.join(" or ")
        ));
    }
    if s.old_init > 0 {
        what.push(format!(
            "{} init {}",
            s.old_init,
            if s.old_init == 1 {
                "container"
            } else {
                "containers"
            }
        ));
    }
    format!("{} {}", display_target(&s.target, spec), what.join(" + "))
}

fn silent_item(target: &str, last_seen: &LastSeen) -> String {
    match (last_seen.ages.get(target), &last_seen.failed) {
        (Some(age), _) => format!("{target} last seen {} ago", human_age(*age)),
        (None, Some(_)) => format!("{target} last seen: unknown"),
        (None, None) => format!("{target} not seen in {}", format_duration(last_seen.window)),
    }
}

fn workload_item(w: &Workload) -> String {
    format!(
        "{} {}/{} in {}: {}",
        w.kind,
        w.namespace,
        w.name,
        if w.target.is_empty() {
            "(no target label)"
        } else {
            &w.target
        },
        w.details.join(" and ")
    )
}

/// The other versions of a set of stragglers, for "still run ...".
fn old_versions(stragglers: &[Straggler], label: &str) -> String {
    // By the form shown: two spellings that read the same are named once.
    let mut versions: BTreeMap<String, ()> = BTreeMap::new();
    let mut unlabelled = false;
    for s in stragglers {
        for v in &s.versions {
            versions.insert(short_version(v), ());
        }
        unlabelled |= s.unlabelled > 0;
    }
    match (versions.len(), unlabelled) {
        (0, _) => format!("containers without {label}"),
        (1, false) => versions.keys().next().cloned().unwrap_or_default(),
        (1, true) => format!(
            "{} or no {label}",
            versions.keys().next().cloned().unwrap_or_default()
        ),
        (n, _) if n <= 3 => versions.keys().cloned().collect::<Vec<_>>().join(" or "),
        (n, _) => format!("{n} other versions"),
    }
}

/// `repo@sha256:<64 hex>` and `sha256:<64 hex>` become `sha256:<12 hex>…`; long values are cut.
pub(crate) fn short_version(v: &str) -> String {
    let digest = v.rsplit_once('@').map_or(v, |(_, d)| d);
    if is_bare_digest(digest) {
        if let Some((algo, hex)) = digest.split_once(':') {
            return format!("{algo}:{}…", hex.get(..12).unwrap_or(hex));
        }
    }
    if v.chars().count() > 64 {
        let cut: String = v.chars().take(61).collect();
        return format!("{cut}…");
    }
    v.to_string()
}

/// `holdFor` as the spec wrote it.
pub(crate) fn hold_for_text(spec: &FleetSpec) -> String {
    match (&spec.promotion.hold_for_text, spec.promotion.hold_for) {
        (Some(text), _) => text.clone(),
        (None, Some(d)) => format_duration(d),
        (None, None) => String::new(),
    }
}

/// "run" or "runs" after a count of targets.
fn run(count: usize) -> &'static str {
    if count == 1 {
        "runs"
    } else {
        "run"
    }
}

/// The target noun for a count: `1 cluster`, `2 clusters`.
pub(crate) fn counted(label: &str, count: usize) -> String {
    if count == 1 {
        label.to_string()
    } else {
        plural(label)
    }
}

pub(crate) fn plural(label: &str) -> String {
    if label.ends_with('s') {
        format!("{label}es")
    } else {
        format!("{label}s")
    }
}

pub(crate) fn percent(x: f64) -> String {
    let p = x * 100.0;
    if (p - p.round()).abs() < 1e-9 {
        format!("{} %", p.round())
    } else {
        // Rounded down, so that 99.96 % never reads as a pass-looking 100 %.
        format!("{:.1} %", ((p * 10.0) + 1e-6).floor() / 10.0)
    }
}

pub(crate) fn human_age(seconds: f64) -> String {
    // Clamped at 0; a float-to-int `as` saturates (and maps NaN to 0).
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let s = seconds.max(0.0).round() as u64;
    match s {
        0..=119 => format!("{s}s"),
        120..=7199 => format!("{}m", s / 60),
        7200..=172_799 => {
            let h = s / 3600;
            let m = (s % 3600) / 60;
            if m == 0 || h >= 10 {
                format!("{h}h")
            } else {
                format!("{h}h{m}m")
            }
        }
        _ => format!("{}d", s / 86400),
    }
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// `12,345` style counts for the describe output.
pub(crate) fn count(n: u64) -> String {
    format_count(n as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_versions() {
        assert_eq!(
            short_version("docker.io/acme/node-agent@sha256:513e5258ccf337657a74bcf99c6689575996caa51a1c92392ca920cc72be477a"),
            "sha256:513e5258ccf3…"
        );
        assert_eq!(
            short_version("acme/node-agent:1.5.0"),
            "acme/node-agent:1.5.0"
        );
    }

    #[test]
    fn ages_and_percentages() {
        assert_eq!(human_age(7200.0), "2h");
        assert_eq!(human_age(5400.0), "90m");
        assert_eq!(human_age(9000.0), "2h30m");
        assert_eq!(human_age(30.0), "30s");
        assert_eq!(human_age(3.0 * 86400.0), "3d");
        assert_eq!(percent(1.0), "100 %");
        assert_eq!(percent(0.9625), "96.2 %");
        assert_eq!(
            percent(0.99999),
            "99.9 %",
            "never rounds up to a pass-looking 100 %"
        );
        assert_eq!(plural("cluster"), "clusters");
        assert_eq!(plural("address"), "addresses");
    }

    #[test]
    fn listings_show_ten_then_count() {
        let items = (0..14).map(|i| format!("t{i}"));
        let text = listing(items);
        assert!(text.starts_with("t0, t1"), "{text}");
        assert!(text.ends_with("t9, and 4 more"), "{text}");
        let many: Vec<String> = (0..2003).map(|i| i.to_string()).collect();
        assert!(capped(many).ends_with(", ... and 3 more"));
    }
}
