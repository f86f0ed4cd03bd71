//! The `fleet` kind (docs/fleet.md): the fleet-inventory gate.
//!
//! Only validation lives here; what the keys mean at measurement time (states, PromQL, verdict)
//! is in `engine::fleet` and docs/fleet.md.

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use promql_parser::label::MatchOp;
use promql_parser::parser::Expr;
use regex::Regex;
use serde_json::Value;

use super::duration::format_duration;
use super::error::SpecError;
use super::promql::{check_promql, parse_promql};
use super::reader::{invalid, ObjectReader};

mod promotion;

pub use promotion::{Cohort, CohortTargets, CompletionTier, Promotion};

/// Default `maxStaleness`: a target without a sample this recent is silent.
pub(crate) const DEFAULT_MAX_STALENESS: Duration = Duration::from_secs(15 * 60);
/// Default `version.label`.
pub(crate) const DEFAULT_VERSION_LABEL: &str = "image_id";
/// Default `groupBy`.
pub(crate) const DEFAULT_GROUP_BY: &str = "cluster";
/// The metric `includeInitContainers` needs as the selector's name.
pub(crate) const CONTAINER_INFO: &str = "kube_pod_container_info";
/// Where kube-state-metrics reports init containers.
pub(crate) const INIT_CONTAINER_INFO: &str = "kube_pod_init_container_info";
/// kube-state-metrics' pod phase metric (one series per phase, 1 for the current one).
pub(crate) const POD_STATUS_PHASE: &str = "kube_pod_status_phase";
/// The prefix of kube-state-metrics' pod metrics: the selectors that name pods.
pub(crate) const POD_METRIC_PREFIX: &str = "kube_pod_";

/// A validated `fleet:` block.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetSpec {
    /// The selector as written (trimmed), for messages and metadata.
    pub selector: String,
    /// The selector, parsed, so that related selectors (init containers, workloads) can be built.
    /// (Boxed, like `version`, to keep every metric kind about the same size.)
    pub series: Box<SeriesSelector>,
    /// Also read `kube_pod_init_container_info` for the selected pods.
    pub include_init_containers: bool,
    /// Which init containers count, when they are included (boxed, like `version`).
    pub init_containers: Box<InitContainers>,
    /// Pods in a terminal phase (Succeeded, Failed) are left out (`ignoreTerminalPods`).
    pub ignore_terminal_pods: bool,
    /// Which label carries the version, and which versions are expected (the first of
    /// `version:`; the others, which must hold too, are in `also`).
    pub version: Box<VersionSpec>,
    /// Further labels every series must carry with their expected value (`version:` as a
    /// list: Synced *and* Healthy, revision *and* ready).
    pub also: Vec<VersionSpec>,
    /// The label that names a target (`cluster`, `site`, `node`, ...).
    pub group_by: String,
    /// The inventory.
    pub expected_targets: ExpectedTargets,
    /// A target without a sample newer than this is silent.
    pub max_staleness: Duration,
    /// Share of expected targets that must be current or excepted (0 to 1).
    pub min_completion: f64,
    /// Also fail on stalled DaemonSets, Deployments and StatefulSets.
    pub workloads: bool,
    /// For `rollgate rules`: alert when an old version outlives this.
    pub completion_deadline: Option<Duration>,
    /// Targets excused until a date.
    pub exceptions: Vec<FleetException>,
    /// Cohorts, held health, completion tiers (boxed, like `version`).
    pub promotion: Box<Promotion>,
}

/// An instant-vector selector taken apart: metric name and label matchers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeriesSelector {
    /// The metric name (`foo{...}` or `{__name__="foo"}`), if it is an exact name.
    pub metric: Option<String>,
    /// Every matcher except an exact `__name__` one already taken as `metric`.
    pub matchers: Vec<LabelMatcher>,
}

/// One label matcher of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelMatcher {
    /// Label name.
    pub name: String,
    /// `=`, `!=`, `=~` or `!~`.
    pub op: MatchKind,
    /// The value or regex, unescaped.
    pub value: String,
}

/// The four PromQL matcher operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchKind {
    /// `=`
    Equal,
    /// `!=`
    NotEqual,
    /// `=~`
    Regex,
    /// `!~`
    NotRegex,
}

impl MatchKind {
    /// The operator as written in PromQL.
    pub fn as_str(self) -> &'static str {
        match self {
            MatchKind::Equal => "=",
            MatchKind::NotEqual => "!=",
            MatchKind::Regex => "=~",
            MatchKind::NotRegex => "!~",
        }
    }
}

/// `initContainers:`: which init containers of the selected pods count.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InitContainers {
    /// Only these container names (empty: every init container).
    pub names: Vec<String>,
    /// Whether native sidecars (`restart_policy="Always"`, kube-state-metrics >= 2.11) count.
    pub sidecars: bool,
}

/// `version:`: the label that carries the version and what it must be.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionSpec {
    /// The label (`image_id`, `image`, `image_spec`, or any label).
    pub label: String,
    /// The expected version.
    pub expected: ExpectedVersion,
    /// Older versions still allowed to run (`supported`: the support window); empty: none.
    pub supported: Vec<ExpectedVersion>,
}

impl VersionSpec {
    /// Whether `value` is the expected version or one the support window allows.
    pub fn allows(&self, value: &str) -> bool {
        self.expected.matches(value) || self.supported.iter().any(|s| s.matches(value))
    }
}

/// `version.expected` or `version.expectedRegex`.
#[derive(Debug, Clone, PartialEq)]
pub enum ExpectedVersion {
    /// An exact value; a bare digest (`sha256:<hex>`) also matches any value ending in `@<digest>`.
    Exact(String),
    /// A regular expression that must match the whole value (anchored, as PromQL's `=~`).
    Regex(VersionRegex),
}

/// A compiled, anchored `expectedRegex` that keeps its source.
#[derive(Debug, Clone)]
pub struct VersionRegex {
    source: String,
    anchored: Regex,
}

impl PartialEq for VersionRegex {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl VersionRegex {
    /// The regex as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the whole of `value` matches.
    pub fn is_match(&self, value: &str) -> bool {
        self.anchored.is_match(value)
    }
}

impl ExpectedVersion {
    /// Whether a version label value is the expected version.
    pub fn matches(&self, value: &str) -> bool {
        match self {
            // Compared in the normal form: one digest written by two runtimes is one version.
            ExpectedVersion::Exact(expected) => {
                let (value, expected) = (normal_version(value), normal_version(expected));
                value == expected
                    || (is_bare_digest(expected)
                        && value
                            .strip_suffix(expected)
                            .is_some_and(|head| head.ends_with('@')))
            }
            ExpectedVersion::Regex(r) => r.is_match(value),
        }
    }

    /// The expected version as a person reads it in a message.
    pub fn describe(&self) -> String {
        match self {
            ExpectedVersion::Exact(v) => v.clone(),
            ExpectedVersion::Regex(r) => format!("/{}/", r.source()),
        }
    }
}

/// The scheme dockershim and cri-dockerd put before a pulled image's `repo@<digest>`, which
/// containerd and CRI-O write without it.
const DOCKER_PULLABLE: &str = "docker-pullable://";

/// The normal form of a version label value: `docker-pullable://repo@sha256:<hex>` becomes
/// `repo@sha256:<hex>`, as containerd and CRI-O write it; anything else is returned as is.
/// Versions are compared, counted and shown in this form, so one digest in two runtimes'
/// spellings is one version.
pub(crate) fn normal_version(value: &str) -> &str {
    match value.strip_prefix(DOCKER_PULLABLE) {
        Some(rest) if rest.contains('@') && is_digest_reference(rest) => rest,
        _ => value,
    }
}

/// Whether `text` names an image by digest: a bare digest or `<repo>@<digest>`.
pub(crate) fn is_digest_reference(text: &str) -> bool {
    is_bare_digest(text.rsplit_once('@').map_or(text, |(_, d)| d))
}

/// Whether `text` is a bare content digest like `sha256:<64 hex>` (algorithm, colon, >= 32 hex).
pub(crate) fn is_bare_digest(text: &str) -> bool {
    match text.split_once(':') {
        Some((algo, hex)) => {
            !algo.is_empty()
                && algo
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"+._-".contains(&b))
                && hex.len() >= 32
                && hex.bytes().all(|b| b.is_ascii_hexdigit())
        }
        None => false,
    }
}

/// The inventory of targets that should run the expected version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExpectedTargets {
    /// `expectedTargets: [a, b]` (sorted, without duplicates).
    List(Vec<String>),
    /// `expectedTargetsQuery`: the `groupBy` label values of its result.
    Query(String),
    /// `expectedTargets: reporting`: whatever reports is the inventory; silence is undetectable.
    Reporting,
}

/// An excused target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetException {
    /// The target (a `groupBy` value).
    pub target: String,
    /// Why (shown in messages).
    pub reason: String,
    /// The exception counts while the evaluation time is before this instant (for a date: the
    /// start of the next day, UTC, so `until: 2026-12-31` covers all of that day).
    pub until: DateTime<Utc>,
    /// `until` as written.
    pub until_text: String,
}

impl FleetException {
    /// Whether the exception still counts at `at`.
    pub fn active_at(&self, at: DateTime<Utc>) -> bool {
        at < self.until
    }
}

impl FleetSpec {
    /// Every version requirement, the first (`version.label`) first.
    pub fn versions(&self) -> impl Iterator<Item = &VersionSpec> {
        std::iter::once(self.version.as_ref()).chain(self.also.iter())
    }

    /// Whether the selector is a kube-state-metrics pod metric (`kube_pod_*`).
    pub fn selects_pods(&self) -> bool {
        self.series
            .metric
            .as_deref()
            .is_some_and(|m| m.starts_with(POD_METRIC_PREFIX))
    }

    /// Reads and validates a `fleet:` block at `path`.
    pub fn from_value(value: &Value, path: &str) -> Result<FleetSpec, SpecError> {
        let mut f = ObjectReader::new(path, value)?;
        let selector = f
            .required_string(
                "selector",
                "a series selector such as kube_pod_container_info{namespace=\"x\", container=\"y\"}",
            )?
            .trim()
            .to_string();
        let series = read_selector(&f.path_of("selector"), &selector)?;
        let include_flag = f.bool("includeInitContainers")?;
        let init_containers = read_init_containers(&mut f)?;
        if include_flag == Some(false) && init_containers.is_some() {
            return Err(SpecError::Conflict {
                path: f.path_of("initContainers"),
                message: "names the init containers that count, but includeInitContainers is false"
                    .into(),
            });
        }
        let include_init_containers = include_flag.unwrap_or(false) || init_containers.is_some();
        let init_containers = init_containers.unwrap_or(InitContainers {
            names: Vec::new(),
            sidecars: true,
        });
        if include_init_containers && series.metric.as_deref() != Some(CONTAINER_INFO) {
            return Err(SpecError::Conflict {
                path: f.path_of(if include_flag.is_some() {
                    "includeInitContainers"
                } else {
                    "initContainers"
                }),
                message: format!(
                    "needs a {CONTAINER_INFO} selector (init containers of the same pods are read from {INIT_CONTAINER_INFO})"
                ),
            });
        }
        let group_by = match f.string("groupBy")? {
            Some(g) => label_name(&f.path_of("groupBy"), &g)?,
            None => DEFAULT_GROUP_BY.to_string(),
        };
        let (version, also) = read_versions(&mut f, &group_by)?;
        let pod_metric = series
            .metric
            .as_deref()
            .is_some_and(|m| m.starts_with(POD_METRIC_PREFIX));
        let ignore_terminal_pods = match f.bool("ignoreTerminalPods")? {
            Some(true) if !pod_metric => {
                return Err(SpecError::Conflict {
                    path: f.path_of("ignoreTerminalPods"),
                    message: format!(
                        "needs a pod metric selector ({CONTAINER_INFO}, ...): pod phases are joined on the pod label, which {} lacks",
                        series.metric.as_deref().unwrap_or("the selector")
                    ),
                })
            }
            Some(v) => v,
            None => pod_metric,
        };
        let expected_targets = read_expected_targets(&mut f)?;
        let promotion = promotion::read_promotion(&mut f, &expected_targets)?;
        let max_staleness = f.duration("maxStaleness")?.unwrap_or(DEFAULT_MAX_STALENESS);
        if max_staleness < Duration::from_secs(1) {
            return Err(SpecError::Invalid {
                path: f.path_of("maxStaleness"),
                expected: "a duration of at least 1s".into(),
                got: format_duration(max_staleness),
            });
        }
        let min_completion = f.number("minCompletion", 0.0, 1.0)?.unwrap_or(1.0);
        let workloads = f.bool("workloads")?.unwrap_or(false);
        if workloads && !pod_metric {
            return Err(SpecError::Conflict {
                path: f.path_of("workloads"),
                message: format!(
                    "needs a pod metric selector ({CONTAINER_INFO}, ...) whose matchers scope the DaemonSets, Deployments and StatefulSets checked; {} is not one",
                    series.metric.as_deref().unwrap_or("a selector without a metric name")
                ),
            });
        }
        let completion_deadline = f.duration("completionDeadline")?;
        if completion_deadline.is_some_and(|d| d < Duration::from_secs(60)) {
            return Err(SpecError::Invalid {
                path: f.path_of("completionDeadline"),
                expected: "a duration of at least 1m".into(),
                got: completion_deadline.map(format_duration).unwrap_or_default(),
            });
        }
        let exceptions = read_exceptions(&mut f)?;
        f.finish()?;
        Ok(FleetSpec {
            selector,
            series: Box::new(series),
            include_init_containers,
            init_containers: Box::new(init_containers),
            ignore_terminal_pods,
            version: Box::new(version),
            also,
            group_by,
            expected_targets,
            max_staleness,
            min_completion,
            workloads,
            completion_deadline,
            exceptions,
            promotion: Box::new(promotion),
        })
    }
}

/// Accepts an instant-vector selector only: the engine aggregates it, looks at it over time
/// windows and derives the init-container and workload selectors from its matchers.
fn read_selector(path: &str, text: &str) -> Result<SeriesSelector, SpecError> {
    let not_a_selector = |why: &str| SpecError::Invalid {
        path: path.to_string(),
        expected: "a plain series selector like kube_pod_container_info{namespace=\"x\"}".into(),
        got: format!("{text:?} ({why})"),
    };
    let selector = parse_promql(path, text, |expr| match expr {
        Expr::VectorSelector(vs) => Some(vs),
        _ => None,
    })?;
    let Some(vs) = selector else {
        return Err(not_a_selector("an expression, not a selector"));
    };
    if vs.offset.is_some() || vs.at.is_some() {
        return Err(not_a_selector("offset and @ are not allowed"));
    }
    if !vs.matchers.or_matchers.is_empty() {
        return Err(not_a_selector("`or` inside the braces is not supported"));
    }
    let mut metric = vs.name.clone();
    let mut matchers = Vec::new();
    for m in &vs.matchers.matchers {
        let op = match m.op {
            MatchOp::Equal => MatchKind::Equal,
            MatchOp::NotEqual => MatchKind::NotEqual,
            MatchOp::Re(_) => MatchKind::Regex,
            MatchOp::NotRe(_) => MatchKind::NotRegex,
        };
        if m.name == "__name__" && op == MatchKind::Equal && metric.is_none() {
            metric = Some(m.value.clone());
            continue;
        }
        if m.name == "__name__" && op == MatchKind::Equal && metric.as_deref() == Some(&m.value) {
            continue;
        }
        matchers.push(LabelMatcher {
            name: m.name.clone(),
            op,
            value: m.value.clone(),
        });
    }
    Ok(SeriesSelector { metric, matchers })
}

fn label_name(path: &str, name: &str) -> Result<String, SpecError> {
    let mut chars = name.chars();
    let valid = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with("__");
    if valid {
        Ok(name.to_string())
    } else {
        Err(invalid(
            path,
            "a label name (letters, digits and _, not starting with a digit or __)",
            &Value::String(name.to_string()),
        ))
    }
}

/// `version:` as one `{label, expected}` or a non-empty list of them (all must hold).
fn read_versions(
    f: &mut ObjectReader<'_>,
    group_by: &str,
) -> Result<(VersionSpec, Vec<VersionSpec>), SpecError> {
    let path = f.path_of("version");
    let mut versions = match f.get("version") {
        None => {
            return Err(SpecError::Missing {
                path,
                hint: "{label, expected} or {label, expectedRegex} (or a list of them, all required): the version every target must run".into(),
            })
        }
        Some(Value::Array(items)) if !items.is_empty() => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                out.push((
                    format!("{path}[{i}]"),
                    read_version(ObjectReader::new(&format!("{path}[{i}]"), item)?)?,
                ));
            }
            out
        }
        Some(v @ Value::Object(_)) => vec![(path.clone(), read_version(ObjectReader::new(&path, v)?)?)],
        Some(other) => {
            return Err(invalid(
                &path,
                "{label, expected} or a non-empty list of them",
                other,
            ))
        }
    };
    let mut seen = BTreeSet::new();
    for (at, v) in &versions {
        if v.label == group_by {
            return Err(SpecError::Conflict {
                path: format!("{at}.label"),
                message: format!("must differ from groupBy ({group_by})"),
            });
        }
        if !seen.insert(v.label.clone()) {
            return Err(SpecError::Conflict {
                path: format!("{at}.label"),
                message: format!("{} is named twice", v.label),
            });
        }
    }
    let first = versions.remove(0).1;
    Ok((first, versions.into_iter().map(|(_, v)| v).collect()))
}

/// Non-empty strings, trimmed, sorted, without duplicates; an error names the bad item.
fn name_list(path: &str, items: &[Value], expected: &str) -> Result<Vec<String>, SpecError> {
    let mut names = BTreeSet::new();
    for (i, item) in items.iter().enumerate() {
        match item {
            Value::String(s) if !s.trim().is_empty() => {
                names.insert(s.trim().to_string());
            }
            other => return Err(invalid(&format!("{path}[{i}]"), expected, other)),
        }
    }
    Ok(names.into_iter().collect())
}

/// `initContainers: {names, sidecars}`; `None` when absent.
fn read_init_containers(f: &mut ObjectReader<'_>) -> Result<Option<InitContainers>, SpecError> {
    let Some(mut o) = f.object("initContainers")? else {
        return Ok(None);
    };
    let names_path = o.path_of("names");
    let names = match o.get("names") {
        None => Vec::new(),
        Some(Value::Array(items)) if !items.is_empty() => name_list(
            &names_path,
            items,
            "an init container name (a non-empty string)",
        )?,
        Some(other) => {
            return Err(invalid(
                &names_path,
                "a non-empty list of init container names",
                other,
            ))
        }
    };
    let sidecars = o.bool("sidecars")?.unwrap_or(true);
    o.finish()?;
    Ok(Some(InitContainers { names, sidecars }))
}

fn read_version(mut v: ObjectReader<'_>) -> Result<VersionSpec, SpecError> {
    let label = match v.string("label")? {
        Some(l) => label_name(&v.path_of("label"), &l)?,
        None => DEFAULT_VERSION_LABEL.to_string(),
    };
    let exact = v.string("expected")?;
    let regex = v.string("expectedRegex")?;
    let expected = match (exact, regex) {
        (Some(_), Some(_)) => {
            return Err(SpecError::Conflict {
                path: v.path().to_string(),
                message: "expected and expectedRegex exclude each other".into(),
            })
        }
        (None, None) => {
            return Err(SpecError::Missing {
                path: v.path_of("expected"),
                hint: "the expected version (a value or bare digest), or expectedRegex".into(),
            })
        }
        (Some(e), None) => {
            let e = e.trim().to_string();
            if e.is_empty() {
                return Err(invalid(
                    &v.path_of("expected"),
                    "a non-empty version",
                    &Value::String(e),
                ));
            }
            ExpectedVersion::Exact(e)
        }
        (None, Some(r)) => {
            let anchored = Regex::new(&format!("^(?:{r})$")).map_err(|e| SpecError::Invalid {
                path: v.path_of("expectedRegex"),
                expected: "a regular expression (RE2 syntax, matched against the whole value)"
                    .into(),
                got: format!("{r:?} ({})", first_line(&e.to_string())),
            })?;
            ExpectedVersion::Regex(VersionRegex {
                source: r,
                anchored,
            })
        }
    };
    let supported = promotion::read_supported(&mut v)?;
    v.finish()?;
    Ok(VersionSpec {
        label,
        expected,
        supported,
    })
}

fn first_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or_default()
        .to_string()
}

fn read_expected_targets(f: &mut ObjectReader<'_>) -> Result<ExpectedTargets, SpecError> {
    let path = f.path_of("expectedTargets");
    let query_path = f.path_of("expectedTargetsQuery");
    let list = f.get("expectedTargets");
    let query = f.string("expectedTargetsQuery")?;
    const EXPECTED: &str = "a non-empty list of target names, or \"reporting\"";
    match (list, query) {
        (Some(_), Some(_)) => Err(SpecError::Conflict {
            path: f.path().to_string(),
            message: "expectedTargets and expectedTargetsQuery exclude each other".into(),
        }),
        (None, None) => Err(SpecError::Missing {
            path,
            hint: "the inventory: a list of targets, or expectedTargetsQuery, or \"reporting\" to take whatever reports (silent targets then cannot be detected)".into(),
        }),
        (None, Some(q)) => {
            check_promql(&query_path, &q)?;
            Ok(ExpectedTargets::Query(q))
        }
        (Some(Value::String(s)), None) if s == "reporting" => Ok(ExpectedTargets::Reporting),
        (Some(Value::Array(items)), None) if !items.is_empty() => Ok(ExpectedTargets::List(
            name_list(&path, items, "a target name (a non-empty string)")?,
        )),
        (Some(other), None) => Err(invalid(&path, EXPECTED, other)),
    }
}

fn read_exceptions(f: &mut ObjectReader<'_>) -> Result<Vec<FleetException>, SpecError> {
    let path = f.path_of("exceptions");
    let items = match f.get("exceptions") {
        None => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(other) => return Err(invalid(&path, "a list of {target, reason, until}", other)),
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let mut e = ObjectReader::new(&format!("{path}[{i}]"), item)?;
        let target = e
            .required_string("target", "the excused target")?
            .trim()
            .to_string();
        let reason = e.required_string("reason", "why it is excused (shown in messages)")?;
        let until_path = e.path_of("until");
        let until_text = match e.get("until") {
            Some(Value::String(s)) => s.trim().to_string(),
            Some(other) => return Err(invalid(&until_path, "a date like 2026-12-31", other)),
            None => {
                return Err(SpecError::Missing {
                    path: until_path,
                    hint: "the date the exception ends (2026-12-31, or an RFC 3339 time)".into(),
                })
            }
        };
        let until = parse_until(&until_text).ok_or_else(|| {
            invalid(
                &until_path,
                "a date like 2026-12-31 or an RFC 3339 time",
                &Value::String(until_text.clone()),
            )
        })?;
        e.finish()?;
        out.push(FleetException {
            target,
            reason,
            until,
            until_text,
        });
    }
    Ok(out)
}

/// A date means "through that day, UTC"; a time means "until that instant".
fn parse_until(text: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Some(t.with_timezone(&Utc));
    }
    let day = NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()?;
    Some(day.succ_opt()?.and_hms_opt(0, 0, 0)?.and_utc())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> Value {
        json!({
            "selector": "kube_pod_container_info{namespace=\"monitoring\", container=\"node-agent\"}",
            "version": {"expected": "sha256:35c1e11408120e3942e771102f0172aee75829d3a87f9f5909d53b5f40bfc814"},
            "expectedTargets": ["edge-01", "edge-02", "edge-01"],
        })
    }

    fn with(extra: Value) -> Value {
        let mut v = base();
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    }

    fn err(v: Value) -> String {
        FleetSpec::from_value(&v, "fleet").unwrap_err().to_string()
    }

    #[test]
    fn defaults() {
        let f = FleetSpec::from_value(&base(), "fleet").unwrap();
        assert_eq!(f.group_by, "cluster");
        assert_eq!(f.version.label, "image_id");
        assert_eq!(f.max_staleness, Duration::from_secs(900));
        assert_eq!(f.min_completion, 1.0);
        assert!(!f.workloads && !f.include_init_containers);
        assert_eq!(f.completion_deadline, None);
        assert_eq!(
            f.expected_targets,
            ExpectedTargets::List(vec!["edge-01".into(), "edge-02".into()])
        );
        assert_eq!(f.series.metric.as_deref(), Some(CONTAINER_INFO));
        assert_eq!(f.series.matchers.len(), 2);
    }

    #[test]
    fn errors_name_their_key() {
        assert_eq!(
            err(with(json!({"minCompletion": 2}))),
            "fleet.minCompletion: expected a number from 0 to 1, got 2"
        );
        assert!(err(with(json!({"maxStalenes": "5m"})))
            .starts_with("fleet.maxStalenes: unknown key (did you mean \"maxStaleness\"?)"));
        assert!(err(with(json!({"groupBy": "1cluster"})))
            .starts_with("fleet.groupBy: expected a label name"));
        let e = err(with(json!({"selector": "sum(kube_pod_container_info)"})));
        assert!(
            e.starts_with("fleet.selector: expected a plain series selector"),
            "{e}"
        );
        let e = err(with(json!({"selector": "up{"})));
        assert!(
            e.starts_with("fleet.selector: expected a valid PromQL query"),
            "{e}"
        );
        let e = err(with(json!({"version": {"expectedRegex": "("}})));
        assert!(
            e.starts_with("fleet.version.expectedRegex: expected a regular expression"),
            "{e}"
        );
        let e = err(with(
            json!({"version": {"expected": "a", "expectedRegex": "b"}}),
        ));
        assert_eq!(
            e,
            "fleet.version: expected and expectedRegex exclude each other"
        );
        let e = err(with(
            json!({"version": {"label": "cluster", "expected": "a"}}),
        ));
        assert!(e.contains("must differ from groupBy"), "{e}");
        let e = err(with(
            json!({"exceptions": [{"target": "edge-01", "reason": "x", "until": "soon"}]}),
        ));
        assert!(
            e.starts_with("fleet.exceptions[0].until: expected a date"),
            "{e}"
        );
        let e = err(with(
            json!({"exceptions": [{"target": "edge-01", "until": "2026-01-01"}]}),
        ));
        assert!(
            e.starts_with("fleet.exceptions[0].reason: is required"),
            "{e}"
        );
        let e = err(with(json!({"expectedTargets": []})));
        assert!(
            e.starts_with("fleet.expectedTargets: expected a non-empty list"),
            "{e}"
        );
        let e = err(with(json!({"expectedTargets": "all"})));
        assert!(e.contains("\"reporting\""), "{e}");
        let e = err(with(
            json!({"selector": "up{job=\"x\"}", "includeInitContainers": true}),
        ));
        assert!(
            e.starts_with("fleet.includeInitContainers: needs a kube_pod_container_info"),
            "{e}"
        );
    }

    #[test]
    fn ksm_reality_keys_are_validated() {
        let f = FleetSpec::from_value(&base(), "fleet").unwrap();
        assert!(f.ignore_terminal_pods, "on by default for pod metrics");
        let e = err(with(
            json!({"selector": "argocd_app_info{project=\"edge\"}", "workloads": true}),
        ));
        assert!(
            e.starts_with("fleet.workloads: needs a pod metric selector")
                && e.contains("argocd_app_info is not one"),
            "{e}"
        );
        let e = err(with(
            json!({"selector": "argocd_app_info", "ignoreTerminalPods": true}),
        ));
        assert!(
            e.starts_with("fleet.ignoreTerminalPods: needs a pod metric selector"),
            "{e}"
        );
        let e = err(with(json!({"ignoreTerminalPods": "yes"})));
        assert!(e.starts_with("fleet.ignoreTerminalPods: expected"), "{e}");
        let e = err(with(json!({"initContainers": {"names": []}})));
        assert!(
            e.starts_with("fleet.initContainers.names: expected a non-empty list"),
            "{e}"
        );
        let e = err(with(json!({"initContainers": {"names": ["a", 3]}})));
        assert!(
            e.starts_with("fleet.initContainers.names[1]: expected an init container name"),
            "{e}"
        );
        let e = err(with(json!({"initContainers": {"name": ["a"]}})));
        assert!(
            e.starts_with("fleet.initContainers.name: unknown key (did you mean \"names\"?)"),
            "{e}"
        );
        let e = err(with(
            json!({"initContainers": {"names": ["a"]}, "includeInitContainers": false}),
        ));
        assert!(
            e.starts_with("fleet.initContainers: names the init containers"),
            "{e}"
        );
        let e = err(with(
            json!({"selector": "up", "initContainers": {"sidecars": false}}),
        ));
        assert!(
            e.starts_with("fleet.initContainers: needs a kube_pod_container_info"),
            "{e}"
        );
        let f = FleetSpec::from_value(
            &with(json!({"initContainers": {"names": ["b", "a", "b"]}})),
            "fleet",
        )
        .unwrap();
        assert!(f.include_init_containers);
        assert_eq!(
            *f.init_containers,
            InitContainers {
                names: vec!["a".into(), "b".into()],
                sidecars: true
            }
        );
    }

    #[test]
    fn version_may_list_several_labels() {
        let v = with(
            json!({"selector": "gotk_resource_info{customresource_kind=\"Kustomization\"}", "version": [
                {"label": "revision", "expected": "main@sha1:1"},
                {"label": "ready", "expected": "True"},
            ]}),
        );
        let f = FleetSpec::from_value(&v, "fleet").unwrap();
        assert_eq!(f.version.label, "revision");
        assert_eq!(f.also.len(), 1);
        assert_eq!(
            f.versions().map(|v| v.label.as_str()).collect::<Vec<_>>(),
            vec!["revision", "ready"]
        );
        let e = err(with(json!({"version": []})));
        assert!(
            e.starts_with("fleet.version: expected {label, expected} or a non-empty list"),
            "{e}"
        );
        let e = err(with(
            json!({"version": [{"label": "ready", "expected": "True"}, {"label": "ready", "expected": "False"}]}),
        ));
        assert_eq!(e, "fleet.version[1].label: ready is named twice");
        let e = err(with(
            json!({"version": [{"label": "ready", "expected": "True"}, {"label": "ready"}]}),
        ));
        assert!(
            e.starts_with("fleet.version[1].expected: is required"),
            "{e}"
        );
        let e = err(with(
            json!({"version": [{"label": "cluster", "expected": "x"}]}),
        ));
        assert!(
            e.starts_with("fleet.version[0].label: must differ from groupBy"),
            "{e}"
        );
    }

    #[test]
    fn the_inventory_is_required_unless_reporting_is_explicit() {
        let mut v = base();
        v.as_object_mut().unwrap().remove("expectedTargets");
        let e = err(v.clone());
        assert!(e.starts_with("fleet.expectedTargets: is required"), "{e}");
        assert!(e.contains("reporting"), "{e}");
        v["expectedTargets"] = json!("reporting");
        let f = FleetSpec::from_value(&v, "fleet").unwrap();
        assert_eq!(f.expected_targets, ExpectedTargets::Reporting);
        v["expectedTargetsQuery"] = json!("count by (cluster) (up)");
        assert!(err(v.clone()).contains("exclude each other"));
        v.as_object_mut().unwrap().remove("expectedTargets");
        let f = FleetSpec::from_value(&v, "fleet").unwrap();
        assert_eq!(
            f.expected_targets,
            ExpectedTargets::Query("count by (cluster) (up)".into())
        );
        v["expectedTargetsQuery"] = json!("count by (cluster (up)");
        assert!(err(v).starts_with("fleet.expectedTargetsQuery: expected a valid PromQL"));
    }

    #[test]
    fn bare_digests_match_values_ending_in_at_digest() {
        let d = "sha256:35c1e11408120e3942e771102f0172aee75829d3a87f9f5909d53b5f40bfc814";
        let e = ExpectedVersion::Exact(d.into());
        assert!(e.matches(d));
        assert!(e.matches(&format!("docker.io/acme/node-agent@{d}")));
        assert!(e.matches(&format!("docker-pullable://acme/node-agent@{d}")));
        assert!(!e.matches(&format!("docker.io/acme/node-agent:{d}")));
        assert!(!e.matches(&format!("x{d}")));
        assert!(!e.matches("docker.io/acme/node-agent@sha256:513e"));
        assert!(!e.matches(""));
        // Not a digest: exact only.
        let tag = ExpectedVersion::Exact("acme/node-agent:1.5.0".into());
        assert!(tag.matches("acme/node-agent:1.5.0"));
        assert!(!tag.matches("x@acme/node-agent:1.5.0"));
        assert!(is_bare_digest(d));
        assert!(!is_bare_digest("node-agent:1.5.0"));
        // A full repo@digest matches its dockershim spelling too (one normal form), nothing else.
        let full = ExpectedVersion::Exact(format!("docker.io/acme/node-agent@{d}"));
        assert!(full.matches(&format!("docker-pullable://docker.io/acme/node-agent@{d}")));
        assert!(!full.matches(&format!("docker-pullable://quay.io/acme/node-agent@{d}")));
        assert!(!full.matches(d));
        assert_eq!(
            normal_version(&format!("docker-pullable://acme/agent@{d}")),
            format!("acme/agent@{d}")
        );
        assert_eq!(
            normal_version("docker-pullable://acme/agent:1.5"),
            "docker-pullable://acme/agent:1.5"
        );
    }

    #[test]
    fn regexes_are_anchored() {
        let v = with(json!({"version": {"label": "image", "expectedRegex": ".*:1\\.5\\..*"}}));
        let f = FleetSpec::from_value(&v, "fleet").unwrap();
        assert!(f.version.expected.matches("acme/agent:1.5.0"));
        assert!(!f.version.expected.matches("acme/agent:1.4.2"));
        let v = with(json!({"version": {"label": "image", "expectedRegex": "1\\.5"}}));
        let f = FleetSpec::from_value(&v, "fleet").unwrap();
        assert!(!f.version.expected.matches("acme/agent:1.5.0"));
        assert!(f.version.expected.matches("1.5"));
    }

    #[test]
    fn exceptions_last_through_their_day() {
        let v = with(json!({"exceptions": [
            {"target": "edge-07", "reason": "decommissioning", "until": "2026-12-31"},
            {"target": "edge-08", "reason": "lab", "until": "2026-06-01T12:00:00Z"}
        ]}));
        let f = FleetSpec::from_value(&v, "fleet").unwrap();
        let t = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        assert!(f.exceptions[0].active_at(t("2026-12-31T23:59:59Z")));
        assert!(!f.exceptions[0].active_at(t("2027-01-01T00:00:00Z")));
        assert!(f.exceptions[1].active_at(t("2026-06-01T11:59:59Z")));
        assert!(!f.exceptions[1].active_at(t("2026-06-01T12:00:00Z")));
        assert_eq!(f.exceptions[0].until_text, "2026-12-31");
    }

    #[test]
    fn name_matchers_are_folded_into_the_metric() {
        let v = with(
            json!({"selector": "{__name__=\"kube_pod_container_info\", namespace=~\"a|b\"}", "includeInitContainers": true}),
        );
        let f = FleetSpec::from_value(&v, "fleet").unwrap();
        assert_eq!(f.series.metric.as_deref(), Some(CONTAINER_INFO));
        assert_eq!(
            f.series.matchers,
            vec![LabelMatcher {
                name: "namespace".into(),
                op: MatchKind::Regex,
                value: "a|b".into()
            }]
        );
    }
}
