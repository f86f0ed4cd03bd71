//! Per-target states from the aggregated query results: current, straggler, silent,
//! unexpected, excepted. Pure functions, no I/O.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, Utc};

use crate::prometheus::QueryData;
use crate::spec::{normal_version, FleetSpec, VersionSpec};

use super::promql::StallKind;

/// Series counts per version of one target (pods, for a one-container selector).
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct TargetVersions {
    /// Version -> series. The version is the label's value; with several version labels,
    /// `label=value, label=value` in the spec's order.
    pub versions: BTreeMap<String, u64>,
    /// The versions of `versions` that are the expected one (every label as expected).
    pub matching: BTreeSet<String>,
    /// Series without (one of) the version labels.
    pub unlabelled: u64,
    /// The versions of `versions` that are not the expected one but within the support
    /// window (`version.supported`).
    pub supported: BTreeSet<String>,
}

impl TargetVersions {
    fn total(&self) -> u64 {
        self.versions.values().sum::<u64>() + self.unlabelled
    }
}

/// Target name -> its versions, as one `count by (target, version)` query saw them. Series
/// without the target label are kept under the empty name.
pub(crate) type View = BTreeMap<String, TargetVersions>;

/// Reads a `count by (G, V...) (...)` result; `versions` are the spec's version labels.
pub(crate) fn read_view(
    data: &QueryData,
    group_by: &str,
    versions: &[&VersionSpec],
) -> Result<View, String> {
    let QueryData::Vector(series) = data else {
        return Err("expected an instant vector".into());
    };
    let mut view = View::new();
    for s in series {
        let target = s.labels.get(group_by).unwrap_or_default();
        let count = count_of(s.sample.value);
        let entry = view.entry(target.to_string()).or_default();
        let values: Option<Vec<&str>> = versions
            .iter()
            .map(|v| s.labels.get(&v.label).filter(|x| !x.is_empty()))
            .collect();
        let Some(values) = values else {
            entry.unlabelled += count;
            continue;
        };
        // Counted and shown in the normal form: one digest in two runtimes' spellings is one
        // version. Matched as written (an exact version compares normal forms itself; a regex
        // reads the value as PromQL's `=~` does).
        let key = match values.as_slice() {
            [one] => normal_version(one).to_string(),
            many => versions
                .iter()
                .zip(many)
                .map(|(v, x)| format!("{}={}", v.label, normal_version(x)))
                .collect::<Vec<_>>()
                .join(", "),
        };
        if versions
            .iter()
            .zip(&values)
            .all(|(v, x)| v.expected.matches(x))
        {
            entry.matching.insert(key.clone());
        } else if versions.iter().zip(&values).all(|(v, x)| v.allows(x)) {
            entry.supported.insert(key.clone());
        }
        *entry.versions.entry(key).or_default() += count;
    }
    Ok(view)
}

/// Takes the series of ended pods (`terminal`, a subset of `now` at the same evaluation time)
/// out of `now`; a target left with nothing is removed (it still reports: see `classify`).
pub(crate) fn subtract(now: &mut View, terminal: &View) {
    for (target, ended) in terminal {
        let Some(live) = now.get_mut(target) else {
            continue;
        };
        for (version, n) in &ended.versions {
            if let Some(count) = live.versions.get_mut(version) {
                *count = count.saturating_sub(*n);
                if *count == 0 {
                    live.versions.remove(version);
                    live.matching.remove(version);
                    live.supported.remove(version);
                }
            }
        }
        live.unlabelled = live.unlabelled.saturating_sub(ended.unlabelled);
        if live.versions.is_empty() && live.unlabelled == 0 {
            now.remove(target);
        }
    }
}

/// Which of `labels` some series of a vector result carries (with a non-empty value).
pub(crate) fn labels_present(data: &QueryData, labels: &[&str]) -> BTreeSet<String> {
    let QueryData::Vector(series) = data else {
        return BTreeSet::new();
    };
    labels
        .iter()
        .filter(|l| {
            series
                .iter()
                .any(|s| s.labels.get(l).is_some_and(|v| !v.is_empty()))
        })
        .map(|l| l.to_string())
        .collect()
}

/// The distinct values of `label` in a vector result (series without it are left out).
pub(crate) fn read_targets(data: &QueryData, label: &str) -> Result<BTreeSet<String>, String> {
    let QueryData::Vector(series) = data else {
        return Err("expected an instant vector".into());
    };
    Ok(series
        .iter()
        .filter_map(|s| s.labels.get(label))
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .collect())
}

// A float-to-int `as` saturates: a finite positive count above u64::MAX becomes u64::MAX.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn count_of(v: f64) -> u64 {
    if v.is_finite() && v > 0.0 {
        v.round() as u64
    } else {
        0
    }
}

/// A workload found by one of the stall queries.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Workload {
    /// The target (groupBy value).
    pub target: String,
    /// Its namespace.
    pub namespace: String,
    /// `DaemonSet`, `Deployment` or `StatefulSet`.
    pub kind: &'static str,
    /// Its name.
    pub name: String,
    /// What is wrong, one phrase per condition ("2 pods not updated").
    pub details: Vec<String>,
    /// False when only reported (a DaemonSet whose desired count shrank).
    pub fails: bool,
}

impl Workload {
    /// `edge-203/monitoring/DaemonSet/node-agent`, as listed in metadata.
    pub(crate) fn id(&self) -> String {
        format!(
            "{}/{}/{}/{}",
            self.target, self.namespace, self.kind, self.name
        )
    }
}

/// Reads one stall query's result into workloads.
pub(crate) fn read_stalls(
    data: &QueryData,
    kind: StallKind,
    group_by: &str,
) -> Result<Vec<Workload>, String> {
    let QueryData::Vector(series) = data else {
        return Err("expected an instant vector".into());
    };
    Ok(series
        .iter()
        .map(|s| {
            let n = count_of(s.sample.value);
            let plural = |one: &str, many: &str| {
                if n == 1 {
                    one.to_string()
                } else {
                    many.to_string()
                }
            };
            let detail = match kind {
                StallKind::DaemonSetNotUpdated => {
                    format!("{n} {} not updated", plural("pod", "pods"))
                }
                StallKind::DaemonSetNotReady => format!("{n} not ready"),
                StallKind::DaemonSetShrunk => format!("desired count down by {n}"),
                StallKind::DeploymentNotUpdated => {
                    format!("{n} {} not updated", plural("replica", "replicas"))
                }
                StallKind::DeploymentGeneration => {
                    format!("observed generation {n} behind")
                }
                StallKind::StatefulSetRevision => format!(
                    "{n} {} not updated, current revision {} is not the update revision",
                    plural("replica", "replicas"),
                    s.labels.get("revision").unwrap_or("?")
                ),
            };
            Workload {
                target: s.labels.get(group_by).unwrap_or_default().to_string(),
                namespace: s.labels.get("namespace").unwrap_or_default().to_string(),
                kind: kind.workload(),
                name: s
                    .labels
                    .get(kind.name_label())
                    .unwrap_or_default()
                    .to_string(),
                details: vec![detail],
                fails: kind.fails(),
            }
        })
        .collect())
}

/// What the queries returned, ready to classify.
#[derive(Debug, Clone, Default)]
pub(crate) struct Inputs {
    /// Versions of the series present at the evaluation time.
    pub now: View,
    /// Series of pods in a terminal phase, left out of `now` (with `ignoreTerminalPods`).
    pub terminal: View,
    /// Versions of the series with a sample within maxStaleness.
    pub recent: View,
    /// Init-container versions (when included).
    pub init: Option<View>,
    /// The inventory; `None` for `expectedTargets: reporting`.
    pub inventory: Option<BTreeSet<String>>,
    /// Workload findings, every kind, in query order.
    pub workloads: Vec<Workload>,
    /// The `holdFor` window's answers, when given.
    pub held: Option<Held>,
}

/// What the `holdFor` queries returned.
#[derive(Debug, Clone, Default)]
pub(crate) struct Held {
    /// Target -> steps of the window at which it was current.
    pub steps: BTreeMap<String, u64>,
    /// Steps a held target has.
    pub needed: u64,
    /// Target -> the last step (Unix seconds) it was not current within the window.
    pub last_bad: BTreeMap<String, f64>,
}

/// A target current now but not for the whole `holdFor` window.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Unheld {
    /// The target.
    pub target: String,
    /// The last time it was not current (Unix seconds), when it ran another version or had a
    /// stalled workload within the window; none: it only failed to report at some steps.
    pub last_change: Option<f64>,
    /// Steps at which it was current, of `needed`.
    pub steps: u64,
}

/// A target that runs something other than the expected version.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Straggler {
    /// The target.
    pub target: String,
    /// Main-container series on another version.
    pub old: u64,
    /// Main-container series without the version label.
    pub unlabelled: u64,
    /// Init-container series on another version (or without the label).
    pub old_init: u64,
    /// Main-container series in all.
    pub total: u64,
    /// The other versions seen.
    pub versions: BTreeSet<String>,
}

impl Straggler {
    /// Some series on the expected version and some not: a rollout in progress.
    pub(crate) fn mixed(&self) -> bool {
        self.old + self.unlabelled < self.total
    }
}

/// An exception as it applied (or no longer applied) at the evaluation time.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Excused {
    /// The target.
    pub target: String,
    /// Why.
    pub reason: String,
    /// `until` as written.
    pub until: String,
}

/// The one state of a classified target. Decided once, in [`classify`]; the gate's lists and
/// counts, its message, `fleet plan` and `fleet versions` all read it. When several apply, the
/// first of this order wins (docs/fleet.md, "States").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum TargetState {
    /// Under an exception whose `until` has not passed at the evaluation time.
    Excepted,
    /// Expected, and no sample within maxStaleness.
    Silent,
    /// Runs a version neither expected nor supported (or none), in or outside the inventory.
    Straggler,
    /// Otherwise current, with a stalled workload now.
    Stalled,
    /// Current now, but not at every step of `holdFor`.
    NotHeld,
    /// Current through the support window: some series on a supported older version.
    Supported,
    /// Expected, and every series on the expected version (held, no stall).
    Current,
    /// Outside the inventory, on the expected version.
    Unexpected,
}

impl TargetState {
    /// The word `fleet plan` and the messages use.
    pub(crate) fn word(self) -> &'static str {
        match self {
            TargetState::Excepted => "excepted",
            TargetState::Silent => "silent",
            TargetState::Straggler => "straggler",
            TargetState::Stalled => "stalled",
            TargetState::NotHeld => "not held",
            TargetState::Supported => "supported",
            TargetState::Current => "current",
            TargetState::Unexpected => "unexpected",
        }
    }

    /// Done, for the promotion's progress and the completion tiers: on the expected version
    /// itself (held, no stall), or excepted. A target on a supported older version passes the
    /// gate but is not done.
    pub(crate) fn done(self) -> bool {
        matches!(self, TargetState::Current | TargetState::Excepted)
    }
}

/// The fleet, classified.
#[derive(Debug, Clone, Default)]
pub(crate) struct Fleet {
    /// Expected targets.
    pub inventory_size: usize,
    /// Expected targets on the expected version everywhere.
    pub current: Vec<String>,
    /// Expected targets with another version somewhere.
    pub stragglers: Vec<Straggler>,
    /// Expected targets with no sample within maxStaleness.
    pub silent: Vec<String>,
    /// Reporting targets outside the inventory (not excepted), whatever they run.
    pub unexpected: Vec<String>,
    /// Those of `unexpected` that run another version: stragglers too.
    pub outside_old: Vec<Straggler>,
    /// Targets under an exception (expected ones, and reporting ones outside the inventory).
    pub excepted: Vec<Excused>,
    /// How many of `excepted` are expected targets.
    pub excepted_expected: usize,
    /// Exceptions whose `until` has passed: ignored, and reported.
    pub expired: Vec<Excused>,
    /// Stalled workloads that fail the gate (excepted targets left out).
    pub stalled: Vec<Workload>,
    /// Workload findings that are only reported (shrunk DaemonSets).
    pub noticed: Vec<Workload>,
    /// Reporting targets absent from the current view, judged on their last samples.
    pub from_last_samples: Vec<String>,
    /// Series of pods in a terminal phase left out, per target.
    pub terminal: BTreeMap<String, u64>,
    /// Main-container series per version over every reporting target.
    pub versions: BTreeMap<String, u64>,
    /// Main-container series without the version label.
    pub unlabelled: u64,
    /// Init-container series per version (empty label value: without the label).
    pub init_versions: BTreeMap<String, u64>,
    /// The inventory is whatever reports.
    pub reporting_inventory: bool,
    /// The expected targets.
    pub inventory: BTreeSet<String>,
    /// Expected targets current only through the support window (some series on a supported
    /// version, none outside it): counted as current, not as done for completion tiers.
    pub on_supported: Vec<String>,
    /// Expected targets current now but not for all of `holdFor`: not counted as current.
    pub unheld: Vec<Unheld>,
    /// Expected targets otherwise current with a stalled workload: not counted as current.
    pub stalled_targets: Vec<String>,
    /// Stalled workloads of targets outside the inventory: these fail the gate by themselves.
    pub stalled_outside: usize,
    /// The versions each reporting target runs (the view it was judged on).
    pub by_target: BTreeMap<String, TargetVersions>,
    /// Reporting targets outside the inventory on a supported older version (none outside it).
    pub outside_supported: Vec<String>,
    /// Every classified target's one state (expected targets, and reporting ones outside the
    /// inventory; fleet-wide, also in a cohort gate's scope).
    pub state: HashMap<String, TargetState>,
}

impl Fleet {
    /// Share of expected targets that are current or excepted (1 for an empty inventory).
    pub(crate) fn completion(&self) -> f64 {
        if self.inventory_size == 0 {
            return 1.0;
        }
        (self.current.len() + self.excepted_expected) as f64 / self.inventory_size as f64
    }

    /// Whether `minCompletion` is met (exactly, for whole counts: 1.0 needs every target).
    pub(crate) fn complete_enough(&self, min_completion: f64) -> bool {
        let done = (self.current.len() + self.excepted_expected) as f64;
        done + 1e-9 >= min_completion * self.inventory_size as f64
    }

    /// The built-in verdict: complete enough (a stalled target is incomplete), no old version
    /// and no stalled workload outside the inventory.
    pub(crate) fn passes(&self, min_completion: f64) -> bool {
        self.complete_enough(min_completion)
            && self.outside_old.is_empty()
            && self.stalled_outside == 0
    }

    /// Share of expected targets that are done ([`TargetState::done`]): the completion tiers'
    /// measure and the promotion's progress (a target on a supported version is not done).
    pub(crate) fn done_share(&self) -> f64 {
        if self.inventory_size == 0 {
            return 1.0;
        }
        self.done_targets().len() as f64 / self.inventory_size as f64
    }

    /// The expected targets that are done ([`TargetState::done`]).
    pub(crate) fn done_targets(&self) -> BTreeSet<&str> {
        self.inventory
            .iter()
            .map(String::as_str)
            .filter(|t| self.state.get(*t).is_some_and(|s| s.done()))
            .collect()
    }

    /// Every classified target's state, as [`classify`] decided it.
    pub(crate) fn states(&self) -> States<'_> {
        States(&self.state)
    }

    /// The same fleet seen through `keep` only (a cohort gate's scope): lists and counts of
    /// expected targets are narrowed; what lies outside the inventory stays.
    pub(crate) fn restrict(&self, keep: &BTreeSet<String>) -> Fleet {
        let k = |t: &String| keep.contains(t);
        let excepted: Vec<Excused> = self
            .excepted
            .iter()
            .filter(|e| keep.contains(&e.target) || !self.inventory.contains(&e.target))
            .cloned()
            .collect();
        Fleet {
            inventory_size: self.inventory.iter().filter(|t| k(t)).count(),
            current: self.current.iter().filter(|t| k(t)).cloned().collect(),
            stragglers: self
                .stragglers
                .iter()
                .filter(|s| k(&s.target))
                .cloned()
                .collect(),
            silent: self.silent.iter().filter(|t| k(t)).cloned().collect(),
            excepted_expected: excepted
                .iter()
                .filter(|e| self.inventory.contains(&e.target))
                .count(),
            excepted,
            stalled: self
                .stalled
                .iter()
                .filter(|w| k(&w.target) || !self.inventory.contains(&w.target))
                .cloned()
                .collect(),
            from_last_samples: self
                .from_last_samples
                .iter()
                .filter(|t| k(t))
                .cloned()
                .collect(),
            on_supported: self.on_supported.iter().filter(|t| k(t)).cloned().collect(),
            unheld: self
                .unheld
                .iter()
                .filter(|u| k(&u.target))
                .cloned()
                .collect(),
            stalled_targets: self
                .stalled_targets
                .iter()
                .filter(|t| k(t))
                .cloned()
                .collect(),
            inventory: self.inventory.intersection(keep).cloned().collect(),
            ..self.clone()
        }
    }
}

/// The states of a classified fleet ([`Fleet::states`]).
#[derive(Debug)]
pub(crate) struct States<'a>(&'a HashMap<String, TargetState>);

impl States<'_> {
    /// The state of `target` (`current`, `straggler`, ...; `unknown` when not classified).
    pub(crate) fn of(&self, target: &str) -> &'static str {
        self.get(target).map_or("unknown", TargetState::word)
    }

    /// The state of `target`, when classified.
    pub(crate) fn get(&self, target: &str) -> Option<TargetState> {
        self.0.get(target).copied()
    }
}

/// Classifies every expected or reporting target at `at`.
pub(crate) fn classify(spec: &FleetSpec, at: DateTime<Utc>, inputs: Inputs) -> Fleet {
    let Inputs {
        now,
        terminal,
        recent,
        init,
        inventory,
        workloads,
        held,
    } = inputs;
    let mut fleet = Fleet {
        reporting_inventory: inventory.is_none(),
        ..Fleet::default()
    };
    // Reporting means a sample within maxStaleness; the versions come from the current view,
    // or from the last samples for a target that reported recently but not right now.
    // A target whose pods have all ended reports now, with nothing left to judge.
    let ended = TargetVersions::default();
    let mut views: BTreeMap<&str, (&TargetVersions, bool)> = BTreeMap::new();
    for (target, versions) in &recent {
        match (now.get(target), terminal.contains_key(target)) {
            (Some(current), _) => views.insert(target, (current, false)),
            (None, true) => views.insert(target, (&ended, false)),
            (None, false) => views.insert(target, (versions, true)),
        };
    }
    for (target, t) in &terminal {
        if views.contains_key(target.as_str()) {
            fleet.terminal.insert(
                target.clone(),
                t.versions.values().sum::<u64>() + t.unlabelled,
            );
        }
    }
    let inventory = inventory.unwrap_or_else(|| views.keys().map(|t| t.to_string()).collect());
    fleet.inventory_size = inventory.len();

    let mut active: BTreeMap<&str, &crate::spec::FleetException> = BTreeMap::new();
    for e in &spec.exceptions {
        if e.active_at(at) {
            active.insert(&e.target, e);
        } else {
            fleet.expired.push(Excused {
                target: e.target.clone(),
                reason: e.reason.clone(),
                until: e.until_text.clone(),
            });
        }
    }

    // Stalls first: a stalled workload decides its target's state before `holdFor` does (a
    // target whose DaemonSet is stalled now is stalled, not "not held").
    // One entry per workload (several conditions of one DaemonSet merge), found through a
    // map: mid-rollout, thousands of targets each have a workload not yet updated.
    let mut merged: Vec<Workload> = Vec::new();
    let mut index: HashMap<(bool, String, String, &'static str, String), usize> = HashMap::new();
    for w in workloads {
        if active.contains_key(w.target.as_str()) {
            continue;
        }
        let key = (
            w.fails,
            w.target.clone(),
            w.namespace.clone(),
            w.kind,
            w.name.clone(),
        );
        match index.get(&key) {
            Some(&i) => merged[i].details.extend(w.details),
            None => {
                index.insert(key, merged.len());
                merged.push(w);
            }
        }
    }
    let order = |k: &str| match k {
        "DaemonSet" => 0,
        "Deployment" => 1,
        _ => 2,
    };
    merged.sort_by(|a, b| {
        (order(a.kind), &a.target, &a.namespace, &a.name).cmp(&(
            order(b.kind),
            &b.target,
            &b.namespace,
            &b.name,
        ))
    });
    let (stalled, noticed): (Vec<Workload>, Vec<Workload>) =
        merged.into_iter().partition(|w| w.fails);
    // A stalled workload makes its target incomplete (minCompletion decides); outside the
    // inventory there is no share to spend, so it fails by itself.
    let stalled_set: BTreeSet<String> = stalled.iter().map(|w| w.target.clone()).collect();
    fleet.stalled_outside = stalled
        .iter()
        .filter(|w| !inventory.contains(&w.target))
        .count();

    let empty = TargetVersions::default();
    let no_init = View::new();
    let init_view = init.as_ref().unwrap_or(&no_init);
    let mut targets: BTreeSet<&str> = inventory.iter().map(String::as_str).collect();
    targets.extend(views.keys().copied());
    for target in targets {
        let expected = inventory.contains(target);
        let seen = views.get(target);
        if let Some(e) = active.get(target) {
            if expected || seen.is_some() {
                fleet.excepted.push(Excused {
                    target: target.to_string(),
                    reason: e.reason.clone(),
                    until: e.until_text.clone(),
                });
                fleet.excepted_expected += usize::from(expected);
                fleet
                    .state
                    .insert(target.to_string(), TargetState::Excepted);
            }
            if let Some((v, _)) = seen {
                tally(&mut fleet, v, init_view.get(target));
                fleet.by_target.insert(target.to_string(), (*v).clone());
            }
            continue;
        }
        let Some(&(versions, stale_view)) = seen else {
            if expected {
                fleet.silent.push(target.to_string());
                fleet.state.insert(target.to_string(), TargetState::Silent);
            }
            continue;
        };
        if stale_view {
            fleet.from_last_samples.push(target.to_string());
        }
        // Init containers are read from the current view only.
        let init_versions = if stale_view {
            None
        } else {
            init_view.get(target)
        };
        tally(&mut fleet, versions, init_versions);
        fleet.by_target.insert(target.to_string(), versions.clone());
        let straggler = straggler(target, versions, init_versions.unwrap_or(&empty));
        let stalled_now = stalled_set.contains(target);
        let on_supported = versions
            .versions
            .keys()
            .any(|v| versions.supported.contains(v));
        let unheld = held.as_ref().and_then(|h| {
            let steps = h.steps.get(target).copied().unwrap_or(0);
            (steps < h.needed).then(|| Unheld {
                target: target.to_string(),
                last_change: h.last_bad.get(target).copied(),
                steps,
            })
        });
        // The one decision, in the order of precedence of `TargetState`.
        let state = match (expected, straggler) {
            (true, Some(s)) => {
                fleet.stragglers.push(s);
                TargetState::Straggler
            }
            (false, Some(s)) => {
                fleet.unexpected.push(target.to_string());
                fleet.outside_old.push(s);
                TargetState::Straggler
            }
            (true, None) if stalled_now => {
                fleet.stalled_targets.push(target.to_string());
                TargetState::Stalled
            }
            (true, None) => match unheld {
                Some(u) => {
                    fleet.unheld.push(u);
                    TargetState::NotHeld
                }
                None if on_supported => {
                    fleet.on_supported.push(target.to_string());
                    fleet.current.push(target.to_string());
                    TargetState::Supported
                }
                None => {
                    fleet.current.push(target.to_string());
                    TargetState::Current
                }
            },
            (false, None) => {
                fleet.unexpected.push(target.to_string());
                if stalled_now {
                    TargetState::Stalled
                } else if on_supported {
                    fleet.outside_supported.push(target.to_string());
                    TargetState::Supported
                } else {
                    TargetState::Unexpected
                }
            }
        };
        fleet.state.insert(target.to_string(), state);
    }
    fleet.stalled = stalled;
    fleet.noticed = noticed;
    fleet.inventory = inventory;
    fleet
}

fn tally(fleet: &mut Fleet, versions: &TargetVersions, init: Option<&TargetVersions>) {
    for (v, n) in &versions.versions {
        *fleet.versions.entry(v.clone()).or_default() += n;
    }
    fleet.unlabelled += versions.unlabelled;
    if let Some(init) = init {
        for (v, n) in &init.versions {
            *fleet.init_versions.entry(v.clone()).or_default() += n;
        }
        if init.unlabelled > 0 {
            *fleet.init_versions.entry(String::new()).or_default() += init.unlabelled;
        }
    }
}

/// A series without the version label counts as an unknown version, i.e. not the expected one.
fn straggler(target: &str, main: &TargetVersions, init: &TargetVersions) -> Option<Straggler> {
    let mut versions = BTreeSet::new();
    let mut old = 0;
    for (v, n) in &main.versions {
        if !main.matching.contains(v) && !main.supported.contains(v) {
            old += n;
            versions.insert(v.clone());
        }
    }
    let mut old_init = init.unlabelled;
    for (v, n) in &init.versions {
        if !init.matching.contains(v) {
            old_init += n;
            versions.insert(v.clone());
        }
    }
    (old + main.unlabelled + old_init > 0).then(|| Straggler {
        target: target.to_string(),
        old,
        unlabelled: main.unlabelled,
        old_init,
        total: main.total(),
        versions,
    })
}

// Crate-visible: the plan's tests build their views with the same helpers.
#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) const NEW: &str =
        "acme/agent@sha256:35c1e11408120e3942e771102f0172aee75829d3a87f9f5909d53b5f40bfc814";
    pub(crate) const OLD: &str =
        "acme/agent@sha256:513e5258ccf337657a74bcf99c6689575996caa51a1c92392ca920cc72be477a";

    fn spec(extra: serde_json::Value) -> FleetSpec {
        let mut v = json!({
            "selector": "kube_pod_container_info{namespace=\"m\"}",
            "version": {"expected": "sha256:35c1e11408120e3942e771102f0172aee75829d3a87f9f5909d53b5f40bfc814"},
            "expectedTargets": ["a", "b", "c", "d", "e"],
        });
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        FleetSpec::from_value(&v, "fleet").unwrap()
    }

    pub(crate) fn tv(pairs: &[(&str, u64)], unlabelled: u64) -> TargetVersions {
        TargetVersions {
            versions: pairs.iter().map(|(v, n)| (v.to_string(), *n)).collect(),
            matching: pairs
                .iter()
                .filter(|(v, _)| *v == NEW)
                .map(|(v, _)| v.to_string())
                .collect(),
            unlabelled,
            supported: BTreeSet::new(),
        }
    }

    fn at() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-06-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn every_state() {
        let s = spec(json!({"exceptions": [
            {"target": "d", "reason": "lab", "until": "2026-12-31"},
            {"target": "e", "reason": "gone", "until": "2026-01-31"},
        ]}));
        let mut now = View::new();
        now.insert("a".into(), tv(&[(NEW, 3)], 0));
        now.insert("b".into(), tv(&[(NEW, 1), (OLD, 2)], 0));
        now.insert("d".into(), tv(&[(OLD, 3)], 0));
        now.insert("x".into(), tv(&[(OLD, 3)], 0));
        now.insert("y".into(), tv(&[(NEW, 3)], 0));
        let mut recent = now.clone();
        // e reported within maxStaleness but not now: judged on its last samples.
        recent.insert("e".into(), tv(&[(NEW, 1)], 1));
        let fleet = classify(
            &s,
            at(),
            Inputs {
                now,
                recent,
                inventory: Some(
                    ["a", "b", "c", "d", "e"]
                        .iter()
                        .map(|t| t.to_string())
                        .collect(),
                ),
                ..Inputs::default()
            },
        );
        assert_eq!(fleet.current, vec!["a"]);
        assert_eq!(
            fleet
                .stragglers
                .iter()
                .map(|s| s.target.as_str())
                .collect::<Vec<_>>(),
            vec!["b", "e"]
        );
        assert_eq!(fleet.stragglers[0].old, 2);
        assert_eq!(fleet.stragglers[1].unlabelled, 1);
        assert_eq!(fleet.silent, vec!["c"]);
        assert_eq!(fleet.excepted[0].target, "d");
        assert_eq!(fleet.excepted_expected, 1);
        assert_eq!(fleet.expired[0].target, "e");
        assert_eq!(fleet.unexpected, vec!["x", "y"]);
        assert_eq!(fleet.outside_old[0].target, "x");
        assert_eq!(fleet.from_last_samples, vec!["e"]);
        assert_eq!(fleet.versions[OLD], 8);
        assert!((fleet.completion() - 0.4).abs() < 1e-12);
        assert!(fleet.complete_enough(0.4));
        assert!(!fleet.complete_enough(0.41));
        assert!(
            !fleet.passes(0.0),
            "an old version outside the inventory fails"
        );
    }

    #[test]
    fn ended_pods_are_taken_out_of_the_current_view() {
        let mut now = View::new();
        now.insert("a".into(), tv(&[(NEW, 2), (OLD, 1)], 1));
        now.insert("b".into(), tv(&[(OLD, 2)], 0));
        now.insert("c".into(), tv(&[(NEW, 2)], 0));
        let mut ended = View::new();
        ended.insert("a".into(), tv(&[(OLD, 1)], 1));
        ended.insert("b".into(), tv(&[(OLD, 2)], 0));
        ended.insert("x".into(), tv(&[(OLD, 5)], 0));
        subtract(&mut now, &ended);
        assert_eq!(now["a"], tv(&[(NEW, 2)], 0));
        assert!(!now.contains_key("b") && !now.contains_key("x"));
        assert_eq!(now["c"], tv(&[(NEW, 2)], 0));
        // b reported and only ended pods remain: it reports, with nothing old.
        let s = spec(json!({"expectedTargets": ["a", "b", "c"]}));
        let fleet = classify(
            &s,
            at(),
            Inputs {
                recent: [("a", 3), ("b", 2), ("c", 2)]
                    .iter()
                    .map(|(t, n)| (t.to_string(), tv(&[(OLD, *n)], 0)))
                    .collect(),
                now,
                terminal: ended,
                inventory: Some(["a", "b", "c"].iter().map(|t| t.to_string()).collect()),
                ..Inputs::default()
            },
        );
        assert_eq!(fleet.current, vec!["a", "b", "c"]);
        assert!(fleet.from_last_samples.is_empty());
        assert_eq!(fleet.terminal.get("b"), Some(&2));
    }

    #[test]
    fn silence_follows_the_recent_view_not_the_instant_one() {
        let s = spec(json!({}));
        let mut now = View::new();
        now.insert("a".into(), tv(&[(NEW, 3)], 0));
        let fleet = classify(
            &s,
            at(),
            Inputs {
                now,
                recent: View::new(),
                inventory: Some(["a".to_string()].into_iter().collect()),
                ..Inputs::default()
            },
        );
        assert_eq!(fleet.silent, vec!["a"]);
    }

    #[test]
    fn reporting_inventory_has_no_silent_targets() {
        let s = spec(json!({"expectedTargets": "reporting"}));
        let mut now = View::new();
        now.insert("a".into(), tv(&[(NEW, 3)], 0));
        now.insert("b".into(), tv(&[(NEW, 3)], 0));
        let fleet = classify(
            &s,
            at(),
            Inputs {
                recent: now.clone(),
                now,
                inventory: None,
                ..Inputs::default()
            },
        );
        assert_eq!(fleet.inventory_size, 2);
        assert!(
            fleet.reporting_inventory && fleet.silent.is_empty() && fleet.unexpected.is_empty()
        );
        assert!(fleet.passes(1.0));
    }

    #[test]
    fn stalls_merge_per_workload_and_skip_excepted_targets() {
        let s =
            spec(json!({"exceptions": [{"target": "b", "reason": "r", "until": "2099-01-01"}]}));
        let w = |t: &str, kind, fails, d: &str| Workload {
            target: t.into(),
            namespace: "m".into(),
            kind,
            name: "agent".into(),
            details: vec![d.into()],
            fails,
        };
        let fleet = classify(
            &s,
            at(),
            Inputs {
                inventory: Some(BTreeSet::new()),
                workloads: vec![
                    w("a", "StatefulSet", true, "rev"),
                    w("a", "DaemonSet", true, "2 pods not updated"),
                    w("a", "DaemonSet", true, "1 not ready"),
                    w("a", "DaemonSet", false, "desired count down by 1"),
                    w("b", "DaemonSet", true, "3 pods not updated"),
                ],
                ..Inputs::default()
            },
        );
        assert_eq!(fleet.stalled.len(), 2);
        assert_eq!(fleet.stalled[0].kind, "DaemonSet");
        assert_eq!(
            fleet.stalled[0].details,
            vec!["2 pods not updated", "1 not ready"]
        );
        assert_eq!(fleet.stalled[1].kind, "StatefulSet");
        assert_eq!(fleet.noticed.len(), 1);
        assert_eq!(fleet.stalled[0].id(), "a/m/DaemonSet/agent");
    }
}
