//! The PromQL of the fleet kind, in one place: the gate and `rollgate rules` build their
//! queries here, so both share one definition of "done".
//!
//! Every query aggregates in Prometheus (`count by (target, version)`), so a response has one
//! series per target and version, whatever the number of pods.

use std::time::Duration;

use crate::spec::duration::format_duration;
use crate::spec::{ExpectedVersion, FleetSpec, LabelMatcher, MatchKind};

/// Labels that describe one container or pod, not the workload: dropped from the selector's
/// matchers when the workload series (which lack them) are selected.
const POD_LABELS: &[&str] = &[
    "container",
    "container_id",
    "pod",
    "uid",
    "node",
    "host_ip",
    "pod_ip",
    "image",
    "image_id",
    "image_spec",
    "created_by_kind",
    "created_by_name",
];
/// Labels that describe one container: dropped when selecting the init containers of the
/// same pods (they have other names and may have other images).
const CONTAINER_LABELS: &[&str] = &[
    "container",
    "container_id",
    "image",
    "image_id",
    "image_spec",
];

/// The shortest history kept for the DaemonSet-shrink check.
const MIN_HISTORY: Duration = Duration::from_secs(3600);
/// How far back the last sample of a silent target is looked for, at least.
const MIN_LAST_SEEN_WINDOW: Duration = Duration::from_secs(24 * 3600);
/// ... and at most.
const MAX_LAST_SEEN_WINDOW: Duration = Duration::from_secs(7 * 24 * 3600);

/// One workload condition that counts as a stall (or, for `shrunk`, is only reported).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StallKind {
    /// DaemonSet: desired - updated > 0.
    DaemonSetNotUpdated,
    /// DaemonSet: desired - ready > 0.
    DaemonSetNotReady,
    /// DaemonSet: max of desired over the history window - desired now > 0 (reported only).
    DaemonSetShrunk,
    /// Deployment: spec replicas - updated replicas > 0.
    DeploymentNotUpdated,
    /// Deployment: metadata generation - observed generation > 0.
    DeploymentGeneration,
    /// StatefulSet, as the kubernetes-mixin's KubeStatefulSetUpdateNotRolledOut: current
    /// revision != update revision *and* replicas != updated replicas (an `OnDelete`
    /// StatefulSet never advances its current revision, kubernetes#73492).
    StatefulSetRevision,
}

impl StallKind {
    /// Every kind, in the order they are reported (DaemonSets, Deployments, StatefulSets).
    pub(crate) const ALL: [StallKind; 6] = [
        StallKind::DaemonSetNotUpdated,
        StallKind::DaemonSetNotReady,
        StallKind::DaemonSetShrunk,
        StallKind::DeploymentNotUpdated,
        StallKind::DeploymentGeneration,
        StallKind::StatefulSetRevision,
    ];

    /// The workload kind as Kubernetes names it.
    pub(crate) fn workload(self) -> &'static str {
        match self {
            StallKind::DaemonSetNotUpdated
            | StallKind::DaemonSetNotReady
            | StallKind::DaemonSetShrunk => "DaemonSet",
            StallKind::DeploymentNotUpdated | StallKind::DeploymentGeneration => "Deployment",
            StallKind::StatefulSetRevision => "StatefulSet",
        }
    }

    /// The kube-state-metrics label that names the workload.
    pub(crate) fn name_label(self) -> &'static str {
        match self.workload() {
            "DaemonSet" => "daemonset",
            "Deployment" => "deployment",
            _ => "statefulset",
        }
    }

    /// Key in metadata (`query.stall.<key>`).
    pub(crate) fn key(self) -> &'static str {
        match self {
            StallKind::DaemonSetNotUpdated => "daemonsetNotUpdated",
            StallKind::DaemonSetNotReady => "daemonsetNotReady",
            StallKind::DaemonSetShrunk => "daemonsetShrunk",
            StallKind::DeploymentNotUpdated => "deploymentNotUpdated",
            StallKind::DeploymentGeneration => "deploymentGeneration",
            StallKind::StatefulSetRevision => "statefulsetRevision",
        }
    }

    /// Whether this condition fails the gate (a shrunk DaemonSet is only reported).
    pub(crate) fn fails(self) -> bool {
        self != StallKind::DaemonSetShrunk
    }
}

/// Every query the fleet gate sends (the last-seen query is built on demand).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FleetQueries {
    /// `count by (G, V) (S)`: versions of the series present now.
    pub versions: String,
    /// `count by (G, V) (S and <terminal pods>)`, with `ignoreTerminalPods`: the series of
    /// pods that have ended, subtracted from `versions` by the engine. Only this query joins
    /// the phase series (the join about doubles Prometheus' work on the query that has it).
    pub terminal: Option<String>,
    /// `count by (G, V) (last_over_time(S[maxStaleness]))`: who reported within maxStaleness,
    /// and the last known versions of targets absent from the current view.
    pub reporting: String,
    /// Init containers of the selected pods, when included.
    pub init: Option<String>,
    /// `count by (G) (expectedTargetsQuery)`, when the inventory is a query.
    pub inventory: Option<String>,
    /// Workload conditions, when `workloads: true`.
    pub stalls: Vec<(StallKind, String)>,
    /// The `holdFor` window's queries, when given.
    pub held: Option<HeldQueries>,
    /// When the expected version was first seen, for completion tiers without `startedAt`.
    pub first_seen: Option<String>,
}

/// `holdFor`: a target counts as current only when it was so at every step of the window.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HeldQueries {
    /// `count_over_time((GOOD)[H:step])`: per target, the steps at which it reported, every
    /// series on an allowed version and (with `workloads`) no workload stalled.
    pub steps: String,
    /// `max by (G) (max_over_time(timestamp(BAD)[H:step]))`: the last step it was not.
    pub last_bad: String,
    /// Steps a held target has: `H / step`.
    pub needed: u64,
}

impl FleetQueries {
    /// The queries for `spec`.
    pub(crate) fn new(spec: &FleetSpec) -> FleetQueries {
        let g = &spec.group_by;
        let v = version_labels(spec);
        let s = &spec.selector;
        let live = live_selector(spec, s);
        FleetQueries {
            versions: format!("count by ({g}, {v}) ({s})"),
            terminal: spec.ignore_terminal_pods.then(|| {
                format!(
                    "count by ({g}, {v}) ({s} and on ({}) {})",
                    join_on(g, &["namespace", "pod"]),
                    terminal_pods(spec)
                )
            }),
            reporting: format!(
                "count by ({g}, {v}) (last_over_time({s}[{}]))",
                format_duration(spec.max_staleness)
            ),
            init: spec.include_init_containers.then(|| {
                format!(
                    "count by ({g}, {v}) ({} and on ({}) {})",
                    init_selector(spec),
                    join_on(g, &["namespace", "pod"]),
                    wrap(&live)
                )
            }),
            inventory: match &spec.expected_targets {
                crate::spec::ExpectedTargets::Query(q) => Some(format!("count by ({g}) ({q})")),
                _ => None,
            },
            stalls: if spec.workloads {
                StallKind::ALL
                    .iter()
                    .map(|k| (*k, stall_query(spec, *k)))
                    .collect()
            } else {
                Vec::new()
            },
            held: spec.promotion.hold_for.map(|h| held_queries(spec, h)),
            first_seen: (!spec.promotion.completion.is_empty()
                && spec.promotion.started_at.is_none())
            .then(|| first_seen_query(spec)),
        }
    }
}

/// The subquery step of a `holdFor` window: a twentieth of it, at least 15 s.
pub(crate) fn held_step(hold_for: Duration) -> Duration {
    Duration::from_secs((hold_for.as_secs() / 20).max(15))
}

/// The `holdFor` queries (shared with the completion-tier alerts of `rollgate rules`).
pub(crate) fn held_queries(spec: &FleetSpec, hold_for: Duration) -> HeldQueries {
    let g = &spec.group_by;
    let step = held_step(hold_for);
    let window = format!("[{}:{}]", format_duration(hold_for), format_duration(step));
    let bad = bad_per_target(spec);
    // "Reported at this step" is the plain selector, as for the instant view (a target whose
    // pods have all ended still reports). Joining out the terminal pods here as well cost a
    // join over every pod series at every step: most of the query's time at 10,000 targets,
    // for no change in the verdict (BAD leaves ended pods out already).
    HeldQueries {
        steps: format!(
            "count_over_time((count by ({g}) ({}) unless on ({g}) {bad}){window})",
            spec.selector
        ),
        last_bad: format!("max by ({g}) (max_over_time(timestamp({bad}){window}))"),
        needed: hold_for.as_secs() / step.as_secs(),
    }
}

/// Per target, one series when some selected series runs a version outside the allowed ones
/// (or, with `workloads`, a workload is stalled).
fn bad_per_target(spec: &FleetSpec) -> String {
    let g = &spec.group_by;
    let old = format!(
        "count by ({g}) ({})",
        live_selector(spec, &other_series(spec, true))
    );
    match stalled_per_target(spec) {
        None => old,
        Some(stalled) => format!("({old} or {stalled})"),
    }
}

/// Per target, one series when some workload is stalled (the conditions that fail the gate);
/// `None` without `workloads`.
pub(crate) fn stalled_per_target(spec: &FleetSpec) -> Option<String> {
    if !spec.workloads {
        return None;
    }
    let stalls: Vec<String> = StallKind::ALL
        .iter()
        .filter(|k| k.fails())
        .map(|k| format!("({})", stall_query(spec, *k)))
        .collect();
    Some(format!(
        "count by ({}) ({})",
        spec.group_by,
        stalls.join(" or ")
    ))
}

/// The earliest step, within twice the last tier's deadline (at most the retention), at which
/// some series ran the expected version.
pub(crate) fn first_seen_query(spec: &FleetSpec) -> String {
    let p = &spec.promotion;
    let last = p.completion.last().map_or(Duration::ZERO, |t| t.within);
    let window = (last * 2).max(MIN_LAST_SEEN_WINDOW).min(p.retention);
    let step = (window / 500).clamp(Duration::from_secs(60), Duration::from_secs(3600));
    let step = Duration::from_secs(step.as_secs());
    format!(
        "min(min_over_time(timestamp(count({}))[{}:{}]))",
        live_selector(spec, &expected_series(spec)),
        format_duration(window),
        format_duration(step)
    )
}

/// The selector narrowed to series on the expected version (every version label).
pub(crate) fn expected_series(spec: &FleetSpec) -> String {
    let mut matchers = spec.series.matchers.clone();
    for v in spec.versions() {
        let (op, value) = expected_matcher(&v.expected);
        matchers.push(LabelMatcher {
            name: v.label.clone(),
            op,
            value,
        });
    }
    render_selector(spec.series.metric.as_deref(), &matchers)
}

/// The selector narrowed to series on another version than the expected one (without the
/// label too); with `supported`, other than the expected and the supported ones.
pub(crate) fn other_series(spec: &FleetSpec, allow_supported: bool) -> String {
    let matcher = |v: &crate::spec::VersionSpec| {
        let (op, value) = if allow_supported {
            allowed_matcher(v)
        } else {
            expected_matcher(&v.expected)
        };
        (v.label.clone(), op, value)
    };
    let mut matchers = spec.series.matchers.clone();
    if spec.also.is_empty() {
        let (name, op, value) = matcher(&spec.version);
        matchers.push(LabelMatcher {
            name,
            op: match op {
                MatchKind::Equal => MatchKind::NotEqual,
                _ => MatchKind::NotRegex,
            },
            value,
        });
        return render_selector(spec.series.metric.as_deref(), &matchers);
    }
    // Several labels: every series but those with all labels allowed.
    for v in spec.versions() {
        let (name, op, value) = matcher(v);
        matchers.push(LabelMatcher { name, op, value });
    }
    format!(
        "{} unless {}",
        spec.selector,
        render_selector(spec.series.metric.as_deref(), &matchers)
    )
}

/// A matcher for the expected version or any supported one (`version.supported`).
pub(crate) fn allowed_matcher(v: &crate::spec::VersionSpec) -> (MatchKind, String) {
    if v.supported.is_empty() {
        return expected_matcher(&v.expected);
    }
    let regex = |e: &ExpectedVersion| match expected_matcher(e) {
        (MatchKind::Equal, value) => escape_regex(&value),
        (_, value) => format!("(?:{value})"),
    };
    let all: Vec<String> = std::iter::once(&v.expected)
        .chain(&v.supported)
        .map(regex)
        .collect();
    (MatchKind::Regex, all.join("|"))
}

/// The version labels, comma-separated, for `count by (G, <labels>)`.
pub(crate) fn version_labels(spec: &FleetSpec) -> String {
    spec.versions()
        .map(|v| v.label.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `expr` without the pods in a terminal phase, when `ignoreTerminalPods`: `unless` keeps
/// every pod without phase data, so missing phase series never remove a pod.
pub(crate) fn live_selector(spec: &FleetSpec, expr: &str) -> String {
    if !spec.ignore_terminal_pods {
        return expr.to_string();
    }
    format!(
        "{expr} unless on ({}) {}",
        join_on(&spec.group_by, &["namespace", "pod"]),
        terminal_pods(spec)
    )
}

/// Pods whose current phase is Succeeded or Failed (evicted pods are Failed):
/// kube-state-metrics writes one `kube_pod_status_phase` series per phase, 1 for the current.
pub(crate) fn terminal_pods(spec: &FleetSpec) -> String {
    let mut matchers = pod_matchers(spec);
    matchers.push(LabelMatcher {
        name: "phase".into(),
        op: MatchKind::Regex,
        value: "Succeeded|Failed".into(),
    });
    format!(
        "({} == 1)",
        render_selector(Some(crate::spec::POD_STATUS_PHASE), &matchers)
    )
}

/// `(expr)` when it is a set operation, so it can be the right side of another.
pub(crate) fn wrap(expr: &str) -> String {
    if expr.contains(" unless ") {
        format!("({expr})")
    } else {
        expr.to_string()
    }
}

/// `time() - <last sample time>` per target, for the targets named (the silent ones), looked
/// for over [`last_seen_window`]. `timestamp()` is applied to the raw series inside a
/// subquery because `timestamp(last_over_time(...))` gives the evaluation time, not the
/// sample's; the subquery step (1 to 5 minutes, below the usual 5 m lookback) keeps the
/// answer within a step of the truth.
pub(crate) fn last_seen_query(spec: &FleetSpec, targets: &[String]) -> String {
    let window = last_seen_window(spec.max_staleness);
    let step = (window / 1440).clamp(Duration::from_secs(60), Duration::from_secs(300));
    let mut matchers = spec.series.matchers.clone();
    matchers.push(LabelMatcher {
        name: spec.group_by.clone(),
        op: MatchKind::Regex,
        value: alternation(targets),
    });
    let selector = render_selector(spec.series.metric.as_deref(), &matchers);
    format!(
        "time() - max by ({g}) (max_over_time(timestamp({selector})[{}:{}]))",
        format_duration(window),
        format_duration(step),
        g = spec.group_by
    )
}

/// How far back a silent target's last sample is looked for: 4 x maxStaleness, within
/// [24h, 7d].
pub(crate) fn last_seen_window(max_staleness: Duration) -> Duration {
    (max_staleness * 4).clamp(MIN_LAST_SEEN_WINDOW, MAX_LAST_SEEN_WINDOW)
}

/// The window a DaemonSet's desired count is compared over: 4 x maxStaleness, at least 1 h.
pub(crate) fn history_window(max_staleness: Duration) -> Duration {
    (max_staleness * 4).max(MIN_HISTORY)
}

/// The PromQL of one workload condition; every result series names the target, namespace
/// and workload, and its value is the lag (1 for revisions).
pub(crate) fn stall_query(spec: &FleetSpec, kind: StallKind) -> String {
    let g = &spec.group_by;
    let w = |metric: &str| workload_selector(spec, metric);
    let on = join_on(g, &["namespace", kind.name_label()]);
    let lag = |left: &str, right: &str| format!("({} - on ({on}) {}) > 0", w(left), w(right));
    match kind {
        StallKind::DaemonSetNotUpdated => lag(
            "kube_daemonset_status_desired_number_scheduled",
            "kube_daemonset_status_updated_number_scheduled",
        ),
        StallKind::DaemonSetNotReady => lag(
            "kube_daemonset_status_desired_number_scheduled",
            "kube_daemonset_status_number_ready",
        ),
        StallKind::DaemonSetShrunk => {
            let d = w("kube_daemonset_status_desired_number_scheduled");
            format!(
                "(max_over_time({d}[{}]) - {d}) > 0",
                format_duration(history_window(spec.max_staleness))
            )
        }
        StallKind::DeploymentNotUpdated => lag(
            "kube_deployment_spec_replicas",
            "kube_deployment_status_replicas_updated",
        ),
        StallKind::DeploymentGeneration => lag(
            "kube_deployment_metadata_generation",
            "kube_deployment_status_observed_generation",
        ),
        // The mixin's expression, with the lag as the value and the current revision kept.
        StallKind::StatefulSetRevision => format!(
            "(({} - on ({on}) {}) != 0) * on ({on}) group_left (revision) ({} unless on ({}) {})",
            w("kube_statefulset_replicas"),
            w("kube_statefulset_status_replicas_updated"),
            w("kube_statefulset_status_current_revision"),
            join_on(g, &["namespace", "statefulset", "revision"]),
            w("kube_statefulset_status_update_revision")
        ),
    }
}

/// `kube_pod_init_container_info` with the selector's matchers minus the container ones,
/// narrowed to the init containers named in `initContainers.names`, without native sidecars
/// when `initContainers.sidecars: false` (`restart_policy!="Always"` also holds on
/// kube-state-metrics before 2.11, which has no such label).
pub(crate) fn init_selector(spec: &FleetSpec) -> String {
    let mut matchers = pod_matchers(spec);
    let ic = &spec.init_containers;
    if !ic.names.is_empty() {
        matchers.push(LabelMatcher {
            name: "container".into(),
            op: MatchKind::Regex,
            value: alternation(&ic.names),
        });
    }
    if !ic.sidecars {
        matchers.push(LabelMatcher {
            name: "restart_policy".into(),
            op: MatchKind::NotEqual,
            value: "Always".into(),
        });
    }
    render_selector(Some(crate::spec::INIT_CONTAINER_INFO), &matchers)
}

/// The selector's matchers that still apply to other series of the same pods (the container
/// and version ones dropped).
fn pod_matchers(spec: &FleetSpec) -> Vec<LabelMatcher> {
    spec.series
        .matchers
        .iter()
        .filter(|m| {
            !CONTAINER_LABELS.contains(&m.name.as_str())
                && m.name != "restart_policy"
                && !spec.versions().any(|v| v.label == m.name)
        })
        .cloned()
        .collect()
}

/// A workload metric with the selector's matchers minus the pod and container ones, so that
/// a `namespace` (and `cluster`, `job`, ...) matcher scopes the workloads too.
pub(crate) fn workload_selector(spec: &FleetSpec, metric: &str) -> String {
    let matchers: Vec<LabelMatcher> = spec
        .series
        .matchers
        .iter()
        .filter(|m| {
            !POD_LABELS.contains(&m.name.as_str())
                && !spec.versions().any(|v| v.label == m.name)
                && m.name != "__name__"
        })
        .cloned()
        .collect();
    render_selector(Some(metric), &matchers)
}

/// A PromQL label matcher (RE2, anchored by Prometheus) that matches the expected version:
/// `(op, value)` with op `=` or `=~`. A bare digest also matches `<anything>@<digest>`; a
/// digest reference also matches its Docker runtimes' spellings (`docker-pullable://...`), as
/// [`ExpectedVersion::matches`] compares them in their normal form.
pub(crate) fn expected_matcher(expected: &ExpectedVersion) -> (MatchKind, String) {
    match expected {
        ExpectedVersion::Exact(v) if crate::spec::is_bare_digest(v) => {
            (MatchKind::Regex, format!("(?:.*@)?{}", escape_regex(v)))
        }
        ExpectedVersion::Exact(v) if crate::spec::is_digest_reference(v) => {
            let v = crate::spec::normal_version(v);
            (
                MatchKind::Regex,
                format!("(?:docker-pullable://)?{}", escape_regex(v)),
            )
        }
        ExpectedVersion::Exact(v) => (MatchKind::Equal, v.clone()),
        ExpectedVersion::Regex(r) => (MatchKind::Regex, r.source().to_string()),
    }
}

/// `name{a="b", c=~"d"}`; `{...}` alone when there is no name.
pub(crate) fn render_selector(metric: Option<&str>, matchers: &[LabelMatcher]) -> String {
    let inner: Vec<String> = matchers
        .iter()
        .map(|m| format!("{}{}{}", m.name, m.op.as_str(), quote(&m.value)))
        .collect();
    match (metric, inner.is_empty()) {
        (Some(name), true) => name.to_string(),
        (Some(name), false) => format!("{name}{{{}}}", inner.join(", ")),
        (None, _) => format!("{{{}}}", inner.join(", ")),
    }
}

/// A PromQL double-quoted string literal.
pub(crate) fn quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A regex that matches exactly the given values.
pub(crate) fn alternation(values: &[String]) -> String {
    values
        .iter()
        .map(|v| escape_regex(v))
        .collect::<Vec<_>>()
        .join("|")
}

/// Escapes the RE2 metacharacters of a literal (and only those, so names stay readable).
pub(crate) fn escape_regex(literal: &str) -> String {
    let mut out = String::with_capacity(literal.len());
    for c in literal.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `g, a, b` without repeating `g` when it is one of the others.
fn join_on(g: &str, others: &[&str]) -> String {
    let mut labels = vec![g];
    labels.extend(others.iter().copied().filter(|o| *o != g));
    labels.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(extra: serde_json::Value) -> FleetSpec {
        let mut v = json!({
            "selector": "kube_pod_container_info{namespace=\"monitoring\", container=\"node-agent\"}",
            "version": {"expected": "sha256:35c1e11408120e3942e771102f0172aee75829d3a87f9f5909d53b5f40bfc814"},
            "expectedTargets": ["edge-01"],
        });
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        FleetSpec::from_value(&v, "fleet").unwrap()
    }

    #[test]
    fn queries_aggregate_by_target_and_version() {
        let q = FleetQueries::new(&spec(
            json!({"includeInitContainers": true, "workloads": true}),
        ));
        let s = r#"kube_pod_container_info{namespace="monitoring", container="node-agent"}"#;
        let ended =
            r#"(kube_pod_status_phase{namespace="monitoring", phase=~"Succeeded|Failed"} == 1)"#;
        assert_eq!(q.versions, format!("count by (cluster, image_id) ({s})"));
        assert_eq!(
            q.terminal.as_deref().unwrap(),
            format!("count by (cluster, image_id) ({s} and on (cluster, namespace, pod) {ended})")
        );
        assert_eq!(
            q.reporting,
            format!("count by (cluster, image_id) (last_over_time({s}[15m]))")
        );
        assert_eq!(
            q.init.as_deref().unwrap(),
            format!("count by (cluster, image_id) (kube_pod_init_container_info{{namespace=\"monitoring\"}} and on (cluster, namespace, pod) ({s} unless on (cluster, namespace, pod) {ended}))")
        );
        assert_eq!(
            q.stalls[5].1,
            "((kube_statefulset_replicas{namespace=\"monitoring\"} - on (cluster, namespace, statefulset) kube_statefulset_status_replicas_updated{namespace=\"monitoring\"}) != 0) * on (cluster, namespace, statefulset) group_left (revision) (kube_statefulset_status_current_revision{namespace=\"monitoring\"} unless on (cluster, namespace, statefulset, revision) kube_statefulset_status_update_revision{namespace=\"monitoring\"})"
        );
        assert_eq!(q.stalls.len(), 6);
        assert_eq!(
            q.stalls[0].1,
            "(kube_daemonset_status_desired_number_scheduled{namespace=\"monitoring\"} - on (cluster, namespace, daemonset) kube_daemonset_status_updated_number_scheduled{namespace=\"monitoring\"}) > 0"
        );
        assert_eq!(
            q.stalls[2].1,
            "(max_over_time(kube_daemonset_status_desired_number_scheduled{namespace=\"monitoring\"}[1h]) - kube_daemonset_status_desired_number_scheduled{namespace=\"monitoring\"}) > 0"
        );
        for (_, query) in &q.stalls {
            crate::spec::check_promql("q", query).unwrap();
        }
        crate::spec::check_promql("q", q.init.as_deref().unwrap()).unwrap();
    }

    #[test]
    fn init_containers_can_be_named_and_sidecars_left_out() {
        let f = spec(json!({
            "initContainers": {"names": ["node-agent-init", "x.y"], "sidecars": false},
            "ignoreTerminalPods": false,
        }));
        assert!(f.include_init_containers);
        let q = FleetQueries::new(&f);
        assert_eq!(q.terminal, None);
        assert_eq!(
            q.init.as_deref().unwrap(),
            r#"count by (cluster, image_id) (kube_pod_init_container_info{namespace="monitoring", container=~"node-agent-init|x\\.y", restart_policy!="Always"} and on (cluster, namespace, pod) kube_pod_container_info{namespace="monitoring", container="node-agent"})"#
        );
        crate::spec::check_promql("q", q.init.as_deref().unwrap()).unwrap();
    }

    #[test]
    fn several_version_labels_are_counted_together() {
        let f = spec(json!({
            "selector": "argocd_app_info{name=~\"node-agent-.*\"}",
            "groupBy": "dest_server",
            "version": [{"label": "sync_status", "expected": "Synced"}, {"label": "health_status", "expected": "Healthy"}],
        }));
        assert!(!f.ignore_terminal_pods, "not a pod metric");
        let q = FleetQueries::new(&f);
        assert_eq!(
            q.versions,
            r#"count by (dest_server, sync_status, health_status) (argocd_app_info{name=~"node-agent-.*"})"#
        );
        assert_eq!(q.terminal, None);
    }

    #[test]
    fn last_seen_looks_back_at_least_a_day() {
        let f = spec(json!({}));
        let q = last_seen_query(&f, &["edge-05".into(), "edge.x".into()]);
        assert_eq!(
            q,
            r#"time() - max by (cluster) (max_over_time(timestamp(kube_pod_container_info{namespace="monitoring", container="node-agent", cluster=~"edge-05|edge\\.x"})[1d:1m]))"#
        );
        crate::spec::check_promql("q", &q).unwrap();
        assert_eq!(
            last_seen_window(Duration::from_secs(7 * 86400)),
            MAX_LAST_SEEN_WINDOW
        );
        let long = spec(json!({"maxStaleness": "1d"}));
        assert!(last_seen_query(&long, &["a".into()]).contains("[4d:4m]"));
    }

    #[test]
    fn quoting_round_trips_through_the_parser() {
        let m = vec![LabelMatcher {
            name: "a".into(),
            op: MatchKind::NotRegex,
            value: "x\\.y|\"q\"\n".into(),
        }];
        let text = render_selector(Some("up"), &m);
        let parsed = promql_parser::parser::parse(&text).unwrap();
        match parsed {
            promql_parser::parser::Expr::VectorSelector(vs) => {
                assert_eq!(vs.matchers.matchers[0].value, "x\\.y|\"q\"\n")
            }
            other => panic!("{other}"),
        }
    }

    #[test]
    fn expected_matchers() {
        let f = spec(json!({}));
        let (op, re) = expected_matcher(&f.version.expected);
        assert_eq!(op, MatchKind::Regex);
        let anchored = regex::Regex::new(&format!("^(?:{re})$")).unwrap();
        assert!(anchored.is_match(
            "docker.io/a@sha256:35c1e11408120e3942e771102f0172aee75829d3a87f9f5909d53b5f40bfc814"
        ));
        assert!(anchored
            .is_match("sha256:35c1e11408120e3942e771102f0172aee75829d3a87f9f5909d53b5f40bfc814"));
        assert!(!anchored
            .is_match("sha256:35c1e11408120e3942e771102f0172aee75829d3a87f9f5909d53b5f40bfc81"));
        let full = spec(
            json!({"version": {"expected": "docker.io/a@sha256:35c1e11408120e3942e771102f0172aee75829d3a87f9f5909d53b5f40bfc814"}}),
        );
        let (op, re) = expected_matcher(&full.version.expected);
        assert_eq!(op, MatchKind::Regex);
        let anchored = regex::Regex::new(&format!("^(?:{re})$")).unwrap();
        assert!(anchored.is_match(
            "docker-pullable://docker.io/a@sha256:35c1e11408120e3942e771102f0172aee75829d3a87f9f5909d53b5f40bfc814"
        ));
        assert!(!anchored.is_match(
            "quay.io/a@sha256:35c1e11408120e3942e771102f0172aee75829d3a87f9f5909d53b5f40bfc814"
        ));
        let tag = spec(json!({"version": {"label": "image", "expected": "a:1"}}));
        assert_eq!(
            expected_matcher(&tag.version.expected),
            (MatchKind::Equal, "a:1".into())
        );
    }
}
