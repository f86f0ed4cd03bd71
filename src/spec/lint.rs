//! Linting templates without a Prometheus: every problem of every template at once, each naming
//! its file, template, metric and key. `rollgate lint`, `serve`'s readiness and its `--strict`
//! start-up all judge templates by these rules, so a template that lints clean loads clean.
//!
//! A metric is validated by the same code that reads it for a measurement
//! ([`Metric::from_value`] after `{{args.*}}` substitution), so lint and the engine never
//! disagree. To report more than the first problem of a metric, each problem found is set
//! aside (an unknown key removed or renamed to its suggestion, a bad value replaced by a
//! neutral one) and the metric is read again, until it reads clean or nothing more can be set
//! aside.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::Value;

use super::args::{substitute, ArgValues};
use super::error::{shorten, SpecError};
use super::reader::{parent_mut, relative};
use super::template::{Metric, TEMPLATE_KINDS};
use crate::condition::Condition;

/// How much a finding matters: errors fail a lint (exit 1) and serve's readiness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// The template cannot work as written.
    Error,
    /// Worth a look; the template works.
    Warning,
}

impl Severity {
    /// `error` or `warning`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// One problem, with where it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// Error or warning.
    pub severity: Severity,
    /// The file (and, for a ConfigMap, `file (data.KEY)`).
    pub source: String,
    /// The 1-based line in the file, when it could be found.
    pub line: Option<usize>,
    /// The template's `metadata.name`, when the problem is inside one.
    pub template: Option<String>,
    /// The metric's name, when the problem is inside one.
    pub metric: Option<String>,
    /// The key path inside the template (`spec.metrics[0].provider...noData`), or empty.
    pub path: String,
    /// What is wrong and what would be right.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.source)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        write!(f, ": {}:", self.severity.as_str())?;
        if let Some(t) = &self.template {
            write!(f, " template {t:?}")?;
        }
        if let Some(m) = &self.metric {
            write!(f, " metric {m:?}")?;
        }
        if self.template.is_some() || self.metric.is_some() {
            write!(f, ":")?;
        }
        write!(f, " {}", self.message)
    }
}

/// The lint of one file.
#[derive(Debug, Clone, Default)]
pub struct FileLint {
    /// Every problem found, in document order.
    pub findings: Vec<Finding>,
    /// Templates found (inside ConfigMaps too).
    pub templates: usize,
    /// Names of the templates found, for duplicate checks across files.
    pub names: Vec<String>,
}

impl FileLint {
    /// Whether any finding is an error.
    pub fn has_errors(&self) -> bool {
        self.findings.iter().any(|f| f.severity == Severity::Error)
    }
}

/// Values tried, in order, for an argument that only a request can supply: a word (label
/// values, names), a duration (ranges, intervals) and a number (counts, thresholds). The first
/// that lets the metric validate stands in for it.
const TYPED_PLACEHOLDERS: [&str; 3] = ["placeholder", "5m", "1"];

/// What the run-clock placeholder `[[run.elapsed]]` becomes while a metric is linted: the
/// engine always substitutes a duration in whole seconds.
const RUN_CLOCK_STAND_IN: &str = "60s";

/// Most problems set aside in one metric before lint stops looking further in it.
const MAX_PASSES: usize = 32;

/// Lints every document of one file's text; `source` names it in findings.
pub fn lint_text(text: &str, source: &str) -> FileLint {
    let mut out = FileLint::default();
    let mut others = Vec::new();
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value = match <Value as serde::Deserialize>::deserialize(doc) {
            Ok(v) => v,
            Err(e) => {
                out.findings.push(Finding {
                    severity: Severity::Error,
                    source: source.to_string(),
                    line: e.location().map(|l| l.line()),
                    template: None,
                    metric: None,
                    path: String::new(),
                    message: format!("document {}: not valid YAML: {e}", i + 1),
                });
                // The parser cannot go past a syntax error.
                break;
            }
        };
        let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
        if TEMPLATE_KINDS.contains(&kind) {
            lint_template(&value, text, source, 0, &mut out);
        } else if kind == "ConfigMap" && configmap_templates(&value) > 0 {
            lint_configmap(&value, text, source, &mut out);
        } else if !value.is_null() {
            others.push(value);
        }
    }
    if out.templates == 0 && out.findings.is_empty() {
        out.findings.push(Finding {
            severity: Severity::Error,
            source: source.to_string(),
            line: None,
            template: None,
            metric: None,
            path: String::new(),
            message: nothing_to_lint(&others),
        });
    }
    out
}

/// Lints several files together: each alone, then across them (a template name defined twice,
/// which serve refuses).
pub fn lint_files(files: &[(String, String)]) -> Vec<FileLint> {
    let mut out: Vec<FileLint> = files
        .iter()
        .map(|(source, text)| lint_text(text, source))
        .collect();
    let mut first: BTreeMap<String, String> = BTreeMap::new();
    for (lint, (source, _)) in out.iter_mut().zip(files) {
        for name in lint.names.clone() {
            if let Some(where_first) = first.get(&name) {
                lint.findings.push(Finding {
                    severity: Severity::Error,
                    source: source.clone(),
                    line: None,
                    template: Some(name.clone()),
                    metric: None,
                    path: "metadata.name".into(),
                    message: format!(
                        "metadata.name: template {name:?} is already defined in {where_first} (serve loads one template per name)"
                    ),
                });
            } else {
                first.insert(name, source.clone());
            }
        }
    }
    out
}

/// Why a file holds nothing to lint: the kinds it does hold, and where their templates are.
pub(crate) fn nothing_to_lint(docs: &[Value]) -> String {
    if docs.is_empty() {
        return "no AnalysisTemplate or ClusterAnalysisTemplate document found (the file is empty)"
            .into();
    }
    let found: Vec<String> = docs.iter().map(describe_document).collect();
    format!(
        "no AnalysisTemplate or ClusterAnalysisTemplate document found; found {}",
        found.join("; ")
    )
}

/// One non-template document, named with what to use instead.
fn describe_document(doc: &Value) -> String {
    let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
    let name = doc
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .map(|n| format!(" {n:?}"))
        .unwrap_or_default();
    let api = doc.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    match kind {
        "Rollout" => {
            let names = strings_under(doc, "templateName");
            format!(
                "a Rollout{name}: lint the AnalysisTemplates its analysis names ({}), not the Rollout",
                if names.is_empty() { "none named".into() } else { names.join(", ") }
            )
        }
        "AnalysisRun" => format!(
            "an AnalysisRun{name}: lint the AnalysisTemplate it was created from"
        ),
        "Canary" if api.starts_with("flagger.app") => {
            let names = strings_under(doc, "template");
            format!(
                "a Flagger Canary{name}: its webhooks name templates that `rollgate serve` loads ({}); lint those files or the ConfigMap that holds them",
                if names.is_empty() { "none named".into() } else { names.join(", ") }
            )
        }
        "ConfigMap" if configmap_templates(doc) > 0 => {
            let keys: Vec<String> = match doc.get("data") {
                Some(Value::Object(data)) => data.keys().cloned().collect(),
                _ => Vec::new(),
            };
            let first = keys.first().map(String::as_str).unwrap_or("KEY");
            format!(
                "a ConfigMap{name} holding templates in data ({}): `rollgate lint` reads it as it is; for dry-run, extract one, e.g. `yq '.data[\"{first}\"]' FILE > {first}` or `kubectl get configmap NAME -o jsonpath='{{.data.{}}}'`",
                keys.join(", "),
                first.replace('.', "\\.")
            )
        }
        "ConfigMap" => format!(
            "a ConfigMap{name} with no AnalysisTemplate in its data (serve's ConfigMap holds one template per key)"
        ),
        "" => "a document without `kind`".into(),
        other => format!("a {other}{name}"),
    }
}

/// Every string held by a key called `key` anywhere under `v`, without repeats.
fn strings_under(v: &Value, key: &str) -> Vec<String> {
    fn walk(v: &Value, key: &str, out: &mut BTreeSet<String>) {
        match v {
            Value::Object(map) => {
                for (k, child) in map {
                    match child {
                        Value::String(s) if k == key => {
                            out.insert(s.clone());
                        }
                        _ => walk(child, key, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, key, out)),
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    walk(v, key, &mut out);
    out.into_iter().collect()
}

/// How many templates a ConfigMap's data holds (serve's form: one template file per key).
pub(crate) fn configmap_templates(doc: &Value) -> usize {
    let Some(Value::Object(data)) = doc.get("data") else {
        return 0;
    };
    data.values()
        .filter_map(Value::as_str)
        .map(|text| {
            serde_yaml_ng::Deserializer::from_str(text)
                .filter_map(|d| <Value as serde::Deserialize>::deserialize(d).ok())
                .filter(|v| {
                    v.get("kind")
                        .and_then(Value::as_str)
                        .is_some_and(|k| TEMPLATE_KINDS.contains(&k))
                })
                .count()
        })
        .sum()
}

/// Lints every template file held in a ConfigMap's `data`.
fn lint_configmap(doc: &Value, file_text: &str, source: &str, out: &mut FileLint) {
    let Some(Value::Object(data)) = doc.get("data") else {
        return;
    };
    for (key, text) in data {
        let inner_source = format!("{source} (data.{key})");
        let Some(text) = text.as_str() else {
            continue;
        };
        if !(key.ends_with(".yaml") || key.ends_with(".yml")) {
            continue;
        }
        // The line of `KEY: |` in the file: lines of the embedded template are searched from it.
        let start = line_of(file_text, 0, |l| {
            l.trim_start().starts_with(&format!("{key}:"))
                || l.trim_start().starts_with(&format!("\"{key}\":"))
        })
        .unwrap_or(0);
        let mut inner = lint_text(text, &inner_source);
        for f in &mut inner.findings {
            f.line = f
                .metric
                .as_deref()
                .and_then(|m| locate(file_text, start, m, &f.path))
                .or(Some(start + 1));
        }
        out.findings.extend(inner.findings);
        out.templates += inner.templates;
        out.names.extend(inner.names);
    }
}

/// The declared arguments, read leniently so that a broken one does not hide the metrics.
fn declared_args(doc: &Value) -> ArgValues {
    let mut args = ArgValues::new();
    if let Some(Value::Array(items)) = doc.pointer("/spec/args") {
        for item in items {
            if let Some(name) = item.get("name").and_then(Value::as_str) {
                let value = match item.get("value") {
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(Value::Number(n)) => Some(n.to_string()),
                    _ => None,
                };
                args.insert(name.to_string(), value);
            }
        }
    }
    args
}

fn lint_template(doc: &Value, text: &str, source: &str, start: usize, out: &mut FileLint) {
    out.templates += 1;
    let name = doc
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let template_line = line_of(text, start, |l| {
        let l = l.trim_start();
        l.starts_with("name:") && l.contains(name.as_str())
    });
    let finding = |severity, metric: Option<&str>, path: &str, message: String| Finding {
        severity,
        source: source.to_string(),
        line: metric
            .and_then(|m| locate(text, start, m, path))
            .or(template_line.map(|l| l + 1)),
        template: (!name.is_empty()).then(|| name.clone()),
        metric: metric.map(str::to_string),
        path: path.to_string(),
        message,
    };
    if name.is_empty() {
        out.findings.push(finding(
            Severity::Error,
            None,
            "metadata.name",
            "metadata.name: is required (serve and hooks select templates by name)".into(),
        ));
    } else {
        out.names.push(name.clone());
    }
    // The template's own keys, read by the code that reads it for a run.
    match super::template::Template::from_value_checked(doc) {
        Err(e) => out
            .findings
            .push(finding(Severity::Error, None, e.path(), e.to_string())),
        // Credentials an argument could send elsewhere: serve refuses such a template.
        Ok(template) => {
            for problem in super::template_problems(&template) {
                let path = problem.split(':').next().unwrap_or("").to_string();
                out.findings
                    .push(finding(Severity::Error, None, &path, problem));
            }
        }
    }
    let args = declared_args(doc);
    let Some(Value::Array(metrics)) = doc.pointer("/spec/metrics") else {
        return;
    };
    let mut used: BTreeSet<String> = BTreeSet::new();
    let mut seen_names: BTreeMap<String, usize> = BTreeMap::new();
    for (i, raw) in metrics.iter().enumerate() {
        let path = format!("spec.metrics[{i}]");
        let metric_name = raw
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| format!("#{i}"));
        if let Some(first) = seen_names.insert(metric_name.clone(), i) {
            out.findings.push(finding(
                Severity::Error,
                Some(&metric_name),
                &format!("{path}.name"),
                format!(
                    "{path}.name: {metric_name:?} is also the name of spec.metrics[{first}] (Argo requires unique metric names)"
                ),
            ));
        }
        for (p, message) in lint_metric(raw, &path, &args, &mut used) {
            out.findings
                .push(finding(Severity::Error, Some(&metric_name), &p, message));
        }
        if let Some((p, message)) = unguarded_influxdb_query(raw, &path) {
            out.findings
                .push(finding(Severity::Warning, Some(&metric_name), &p, message));
        }
    }
    for (arg, _) in args.iter().filter(|(a, _)| !used.contains(*a)) {
        // serve always supplies `name` and `namespace` (the canary's); declaring them is normal.
        out.findings.push(finding(
            Severity::Warning,
            None,
            "spec.args",
            format!(
                "spec.args: argument {arg:?} is declared but no metric uses {{{{args.{arg}}}}}"
            ),
        ));
    }
}

/// An InfluxDB `query` metric without `minRequests`: InfluxQL divides 0 by 0 as 0 (not NaN), so
/// an error ratio over no traffic reads as a perfect 0 and the no-data policy never sees it.
fn unguarded_influxdb_query(raw: &Value, path: &str) -> Option<(String, String)> {
    let (key, spec) = raw
        .get("provider")?
        .get("plugin")?
        .as_object()?
        .iter()
        .next()?;
    let unguarded = spec.get("influxdb").is_some()
        && spec.get("query").is_some()
        && spec.get("minRequests").is_none();
    unguarded.then(|| {
        let at = format!("{path}.provider.plugin.{key}.minRequests");
        (
            at.clone(),
            format!("{at}: an influxdb query metric without minRequests: InfluxQL divides 0 by 0 as 0, so a ratio over no traffic reads as a perfect 0 and passes; add minRequests with a count query"),
        )
    })
}

/// Every `{{...}}` tag of every string under `v`, with the string's path.
fn placeholders(v: &Value, path: &str, out: &mut Vec<(String, String)>) {
    match v {
        Value::String(s) => {
            let mut rest = s.as_str();
            while let Some(open) = rest.find("{{") {
                let after = &rest[open + 2..];
                let Some(close) = after.find("}}") else {
                    out.push((path.to_string(), after.to_string()));
                    break;
                };
                out.push((path.to_string(), after[..close].trim().to_string()));
                rest = &after[close + 2..];
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                placeholders(item, &format!("{path}[{i}]"), out);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                placeholders(item, &format!("{path}.{k}"), out);
            }
        }
        _ => {}
    }
}

/// Replaces the run-clock placeholder in every string with a duration, as the engine does.
fn stand_in_run_clock(v: &mut Value) {
    match v {
        Value::String(s) if s.contains("run.elapsed") => {
            // Found by its name, then its brackets, so that `[[[run.elapsed]]]` (the
            // placeholder inside a range) is read as the range around the placeholder.
            let mut out = String::with_capacity(s.len());
            let mut rest = s.as_str();
            while let Some(at) = rest.find("run.elapsed") {
                let before = rest[..at].trim_end_matches(' ');
                let after = rest[at + "run.elapsed".len()..].trim_start_matches(' ');
                match (before.strip_suffix("[["), after.strip_prefix("]]")) {
                    (Some(head), Some(tail)) => {
                        out.push_str(head);
                        out.push_str(RUN_CLOCK_STAND_IN);
                        rest = tail;
                    }
                    _ => {
                        out.push_str(&rest[..at + "run.elapsed".len()]);
                        rest = &rest[at + "run.elapsed".len()..];
                    }
                }
            }
            out.push_str(rest);
            *s = out;
        }
        Value::Array(items) => items.iter_mut().for_each(stand_in_run_clock),
        Value::Object(map) => map.values_mut().for_each(stand_in_run_clock),
        _ => {}
    }
}

/// The problems of one metric, as (key path, message).
fn lint_metric(
    raw: &Value,
    path: &str,
    declared: &ArgValues,
    used: &mut BTreeSet<String>,
) -> Vec<(String, String)> {
    let mut problems = Vec::new();
    let mut tags = Vec::new();
    placeholders(raw, path, &mut tags);
    let mut valueless = BTreeSet::new();
    let mut broken_placeholder = false;
    for (at, tag) in &tags {
        match tag.strip_prefix("args.") {
            Some(arg) => {
                used.insert(arg.to_string());
                match declared.get(arg) {
                    None => {
                        broken_placeholder = true;
                        problems.push((
                            at.clone(),
                            format!(
                                "{at}: uses {{{{args.{arg}}}}} but the template declares no argument {arg:?} (declared: {})",
                                list_or_none(declared.keys())
                            ),
                        ));
                    }
                    Some(None) => {
                        valueless.insert(arg.to_string());
                    }
                    Some(Some(_)) => {}
                }
            }
            None => {
                broken_placeholder = true;
                problems.push((
                    at.clone(),
                    format!(
                        "{at}: expected placeholders of the form {{{{args.NAME}}}} closed by }}}}, got {{{{{}",
                        shorten(tag)
                    ),
                ));
            }
        }
    }
    if broken_placeholder {
        // Substitution would stop at the same placeholder; the rest waits for a fix.
        return problems;
    }
    let mut raw = raw.clone();
    stand_in_run_clock(&mut raw);
    // Arguments only a request supplies: each gets the first typed placeholder that lets the
    // metric validate, so that what remains is wrong for every value.
    let mut args = declared.clone();
    for arg in &valueless {
        args.insert(arg.clone(), Some(TYPED_PLACEHOLDERS[0].to_string()));
    }
    // Substitution stops at the first value its place refuses, so one argument's stand-in can
    // only be judged once the others fit: passes until no choice changes (one per argument
    // suffices, each fixing at least one).
    for _ in 0..=valueless.len() {
        let mut changed = false;
        for arg in &valueless {
            let before = args.get(arg).cloned().flatten();
            // A stand-in its place refuses hides every other problem (substitution stops
            // there), so it scores worse than any number of problems found past it.
            let refused = format!("args.{arg}:");
            let mut best: Option<((usize, usize), &str)> = None;
            for candidate in TYPED_PLACEHOLDERS {
                args.insert(arg.clone(), Some(candidate.to_string()));
                let problems = metric_problems(&raw, path, &args);
                let score = (
                    problems
                        .iter()
                        .filter(|(_, m)| m.contains(refused.as_str()))
                        .count(),
                    problems.len(),
                );
                if best.is_none_or(|(b, _)| score < b) {
                    best = Some((score, candidate));
                }
                if score == (0, 0) {
                    break;
                }
            }
            if let Some((_, candidate)) = best {
                changed |= before.as_deref() != Some(candidate);
                args.insert(arg.clone(), Some(candidate.to_string()));
            }
        }
        if !changed {
            break;
        }
    }
    for (at, message) in metric_problems(&raw, path, &args) {
        let note = placeholder_note(&raw, path, &at, declared, &args);
        problems.push((at, format!("{message}{note}")));
    }
    problems
}

fn list_or_none<'a>(names: impl Iterator<Item = &'a String>) -> String {
    let names: Vec<&str> = names.map(String::as_str).collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// " (checked with args.window=5m, a stand-in ...)" when the key's text holds placeholders.
fn placeholder_note(
    raw: &Value,
    base: &str,
    at: &str,
    declared: &ArgValues,
    args: &ArgValues,
) -> String {
    let mut copy = raw.clone();
    let Some((map, key)) = parent_mut(&mut copy, relative(at, base)) else {
        return String::new();
    };
    let Some(text) = map.get(&key).and_then(Value::as_str) else {
        return String::new();
    };
    let mut tags = Vec::new();
    placeholders(&Value::String(text.to_string()), "", &mut tags);
    let parts: BTreeSet<String> = tags
        .iter()
        .filter_map(|(_, tag)| tag.strip_prefix("args."))
        .filter_map(|arg| {
            let value = args.get(arg).cloned().flatten()?;
            Some(match declared.get(arg) {
                Some(Some(_)) => format!("args.{arg}={value:?} (its default)"),
                _ => {
                    format!("args.{arg}={value:?} (a stand-in: no default, a request supplies it)")
                }
            })
        })
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!(
            " [checked with {}]",
            parts.into_iter().collect::<Vec<_>>().join(", ")
        )
    }
}

/// What a bad or missing key is replaced with so the rest of the metric can be read.
fn neutral(key: &str) -> Option<Value> {
    Some(match key {
        "noData" => Value::String("inconclusive".into()),
        "query" | "bad" | "total" => Value::String("vector(1)".into()),
        "count" => Value::from(1),
        "name" => Value::String("metric".into()),
        _ => return None,
    })
}

/// The problems of a metric with these argument values: conditions, then everything
/// [`Metric::from_value`] refuses, one after another.
fn metric_problems(raw: &Value, path: &str, args: &ArgValues) -> Vec<(String, String)> {
    let mut problems = Vec::new();
    let mut current = match substitute(raw, args, path) {
        Ok(v) => v,
        Err(e) => return vec![(e.path().to_string(), e.to_string())],
    };
    for key in ["successCondition", "failureCondition"] {
        if let Some(Value::String(src)) = current.get(key) {
            if src.is_empty() {
                continue;
            }
            if let Err(e) = Condition::compile(src) {
                problems.push((
                    format!("{path}.{key}"),
                    format!(
                        "{path}.{key}: expected an expression in Argo's condition language, got {:?} ({e})",
                        shorten(src)
                    ),
                ));
            }
            if let Value::Object(map) = &mut current {
                map.remove(key);
            }
        }
    }
    let mut set_aside: BTreeSet<String> = BTreeSet::new();
    for _ in 0..MAX_PASSES {
        let err = match Metric::from_value(&current, path) {
            Ok(_) => break,
            Err(e) => e,
        };
        let at = err.path().to_string();
        let follow_on = matches!(err, SpecError::Missing { .. }) && set_aside.contains(&at);
        if !follow_on {
            problems.push((at.clone(), err.to_string()));
        }
        if !set_aside_problem(&mut current, path, &err)
            || !set_aside.insert(at.clone()) && follow_on
        {
            break;
        }
    }
    problems
}

/// Changes `metric` so that `err` no longer stops its reading; false when it cannot.
fn set_aside_problem(metric: &mut Value, base: &str, err: &SpecError) -> bool {
    let rel = relative(err.path(), base).to_string();
    if rel.is_empty() || rel == err.path() && !base.is_empty() && !err.path().starts_with(base) {
        return false;
    }
    let Some((map, key)) = parent_mut(metric, &rel) else {
        return false;
    };
    match err {
        SpecError::Unknown { suggestion, .. } => {
            let value = map.remove(&key);
            if let (Some(s), Some(v)) = (suggestion, value) {
                if !map.contains_key(s) {
                    map.insert(s.clone(), v);
                }
            }
            true
        }
        SpecError::Invalid { .. } => {
            match neutral(&key) {
                Some(v) => {
                    map.insert(key, v);
                }
                None => {
                    map.remove(&key);
                }
            }
            true
        }
        SpecError::Missing { .. } => match neutral(&key) {
            Some(v) if !map.contains_key(&key) => {
                map.insert(key, v);
                true
            }
            _ => false,
        },
        SpecError::Conflict { .. } | SpecError::Syntax { .. } => false,
    }
}

/// The 0-based index of the first line from `start` that `pred` accepts.
fn line_of(text: &str, start: usize, pred: impl Fn(&str) -> bool) -> Option<usize> {
    text.lines()
        .enumerate()
        .skip(start)
        .find(|(_, l)| pred(l))
        .map(|(i, _)| i)
}

/// The 1-based line of `path`'s last key inside metric `metric`, searched from line `start`:
/// the metric's `name:` line, then the first line after it that writes the key.
fn locate(text: &str, start: usize, metric: &str, path: &str) -> Option<usize> {
    let is_name = |l: &str| {
        let l = l.trim_start().trim_start_matches("- ").trim_start();
        l.strip_prefix("name:")
            .is_some_and(|rest| rest.trim().trim_matches(|c| c == '"' || c == '\'') == metric)
    };
    let metric_line = line_of(text, start, is_name)?;
    let last = path
        .rsplit('.')
        .next()
        .unwrap_or(path)
        .split('[')
        .next()
        .unwrap_or("");
    if last.is_empty() || last == "name" {
        return Some(metric_line + 1);
    }
    // Block style (`key:` first on its line) or flow style (`{a: 1, key: 2}`).
    let key_line = line_of(text, metric_line, |l| {
        let l = l.trim_start().trim_start_matches("- ").trim_start();
        l.starts_with(&format!("{last}:"))
            || l.starts_with(&format!("\"{last}\":"))
            || [
                format!("{{{last}:"),
                format!("{{ {last}:"),
                format!(", {last}:"),
            ]
            .iter()
            .any(|p| l.contains(p.as_str()))
    });
    // Only keys within the metric: stop at the next metric's `- name:`.
    let next_metric = line_of(text, metric_line + 1, |l| {
        l.trim_start().starts_with("- name:")
    });
    match (key_line, next_metric) {
        (Some(k), Some(n)) if k > n => Some(metric_line + 1),
        (Some(k), _) => Some(k + 1),
        (None, _) => Some(metric_line + 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(metric: &str) -> String {
        format!(
            r#"apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: t
spec:
  args:
    - name: service
    - name: window
  metrics:
{metric}"#
        )
    }

    const GOOD: &str = r#"    - name: ratio
      successCondition: result[0] < 0.01
      provider:
        plugin:
          rollgate/analysis:
            query: sum(rate(x{service="{{args.service}}"}[{{args.window}}]))
            noData: inconclusive
"#;

    fn errors(text: &str) -> Vec<String> {
        lint_text(text, "f.yaml")
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn an_unguarded_influxdb_query_is_warned_about() {
        let metric = |guard: &str| {
            template(&format!(
                r#"    - name: ratio
      successCondition: result[0] < 0.01
      provider:
        plugin:
          rollgate/analysis:
            influxdb: {{address: "http://influx:8086", database: app}}
            query: SELECT sum("bad") / sum("total") FROM "requests" WHERE "service" = '{{{{args.service}}}}' AND $timeFilter
            noData: inconclusive
{guard}"#
            ))
        };
        let warnings = |text: &str| -> Vec<String> {
            lint_text(text, "f.yaml")
                .findings
                .iter()
                .filter(|f| f.severity == Severity::Warning && f.message.contains("influxdb"))
                .map(ToString::to_string)
                .collect()
        };
        let found = warnings(&metric(""));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("divides 0 by 0 as 0"), "{found:?}");
        assert!(errors(&metric("")).is_empty());
        let guarded = metric(
            "            minRequests: {query: 'SELECT sum(\"total\") FROM \"requests\" WHERE $timeFilter', count: 100}\n",
        );
        assert!(warnings(&guarded).is_empty(), "{:?}", warnings(&guarded));
    }

    #[test]
    fn a_good_template_with_request_only_arguments_is_clean() {
        let lint = lint_text(&template(GOOD), "f.yaml");
        assert!(lint.findings.is_empty(), "{:?}", lint.findings);
        assert_eq!(lint.templates, 1);
    }

    #[test]
    fn every_problem_of_a_metric_is_reported_with_its_line() {
        let bad = GOOD
            .replace(
                "noData: inconclusive",
                "noData: maybe\n            extra: 1",
            )
            .replace("result[0] < 0.01", "result[0] < 0.01 &&");
        let found = errors(&template(&bad));
        assert_eq!(found.len(), 3, "{found:#?}");
        assert!(
            found.iter().any(|e| e.contains("successCondition")),
            "{found:#?}"
        );
        assert!(
            found
                .iter()
                .any(|e| e.contains("noData") && e.contains("maybe")),
            "{found:#?}"
        );
        assert!(
            found.iter().any(|e| e.contains("extra: unknown key")),
            "{found:#?}"
        );
        assert!(
            found.iter().any(|e| e.starts_with("f.yaml:16: error")),
            "{found:#?}"
        );
    }

    #[test]
    fn a_typo_is_an_unknown_key_with_a_suggestion() {
        let bad = GOOD.replace(
            "noData: inconclusive",
            "noData: inconclusive\n            minRequests: {query: 'sum(x)', cuont: 500}",
        );
        let found = errors(&template(&bad));
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(
            found[0].contains("cuont: unknown key (did you mean \"count\"?)"),
            "{found:#?}"
        );
    }

    #[test]
    fn placeholders_and_arguments_are_checked_against_the_declaration() {
        let bad = GOOD.replace("{{args.service}}", "{{args.sevrice}}");
        let lint = lint_text(&template(&bad), "f.yaml");
        let text: Vec<String> = lint.findings.iter().map(ToString::to_string).collect();
        assert!(
            text.iter().any(|e| e.contains("error")
                && e.contains("no argument \"sevrice\"")
                && e.contains("declared: service, window")),
            "{text:#?}"
        );
        assert!(
            text.iter().any(|e| e.contains("warning")
                && e.contains("\"service\" is declared but no metric uses")),
            "{text:#?}"
        );
    }

    #[test]
    fn values_only_a_request_could_fix_are_errors_with_defaults_and_stand_ins() {
        // A range that no value of `window` makes valid PromQL.
        let bad = GOOD.replace("[{{args.window}}]", "[{{args.window}} minutes]");
        let found = errors(&template(&bad));
        assert_eq!(found.len(), 1, "{found:#?}");
        // The argument check (values stay literals) finds it first: no literal fits there.
        assert!(
            found[0].contains("args.window") && found[0].contains("does not parse"),
            "{found:#?}"
        );
        // A default that is no count.
        let with_default = template(GOOD)
            .replace(
                "- name: window",
                "- name: window\n      value: \"5m\"\n    - name: n\n      value: \"lots\"",
            )
            .replace(
                "    - name: ratio\n",
                "    - name: ratio\n      count: \"{{args.n}}\"\n",
            );
        let found = errors(&with_default);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(
            found[0].contains("count") && found[0].contains("its default"),
            "{found:#?}"
        );
    }

    #[test]
    fn the_run_clock_placeholder_is_valid() {
        let ok = GOOD.replace("[{{args.window}}]", "[[[run.elapsed]]]");
        let lint = lint_text(&template(&ok).replace("    - name: window\n", ""), "f.yaml");
        assert!(lint.findings.is_empty(), "{:?}", lint.findings);
    }

    #[test]
    fn other_kinds_are_named_with_what_to_lint() {
        let rollout = "apiVersion: argoproj.io/v1alpha1\nkind: Rollout\nmetadata: {name: web}\nspec:\n  strategy:\n    canary:\n      steps:\n        - analysis:\n            templates:\n              - templateName: error-rate\n";
        let found = errors(rollout);
        assert!(
            found[0].contains("a Rollout \"web\"") && found[0].contains("error-rate"),
            "{found:?}"
        );
        let canary = "apiVersion: flagger.app/v1beta1\nkind: Canary\nmetadata: {name: web}\nspec:\n  analysis:\n    webhooks:\n      - name: gate\n        metadata: {template: error-rate}\n";
        let found = errors(canary);
        assert!(
            found[0].contains("Flagger Canary") && found[0].contains("error-rate"),
            "{found:?}"
        );
    }

    #[test]
    fn configmap_templates_are_linted_with_their_key() {
        let body = template(&GOOD.replace("noData: inconclusive", "noData: maybe"));
        let indented: String = body.lines().map(|l| format!("    {l}\n")).collect();
        let cm = format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: t}}\ndata:\n  t.yaml: |\n{indented}");
        let found = errors(&cm);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(found[0].starts_with("f.yaml (data.t.yaml):"), "{found:#?}");
        assert!(found[0].contains("noData"), "{found:#?}");
    }
}
