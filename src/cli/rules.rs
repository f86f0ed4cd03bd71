//! `rollgate rules`: print a PrometheusRule for every metric of an AnalysisTemplate.
//!
//! The rules are built by the engine (`Engine::metric_rules`, `Engine::fleet_prometheus_rule`),
//! from the same spec as the gate; this command only reads the template, prints, and says on
//! stderr (and in YAML comments) what could not be translated.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::engine::rules::{MetricOutput, RuleOptions};
use crate::engine::{Engine, RulePlacement};
use crate::spec::duration::parse_duration;
use crate::spec::{MetricKind, Provider};

use super::exit;

/// Arguments of `rollgate rules`.
#[derive(Debug, Args)]
pub struct RulesArgs {
    /// The AnalysisTemplate / ClusterAnalysisTemplate YAML file (several documents allowed).
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: PathBuf,

    /// A template argument, `name=value`, for `{{args.name}}` (repeatable; overrides defaults).
    #[arg(long = "arg", value_name = "NAME=VALUE", value_parser = parse_arg)]
    pub args: Vec<(String, String)>,

    /// Only the metric with this name.
    #[arg(long, value_name = "NAME")]
    pub metric: Option<String>,

    /// `metadata.namespace` of every PrometheusRule (a DNS label: lower case, digits, `-`).
    #[arg(long, value_name = "NS", value_parser = parse_namespace)]
    pub namespace: Option<String>,

    /// An extra `metadata.labels` entry, `key=value`, so a prometheus-operator `ruleSelector`
    /// picks the rule up (kube-prometheus-stack: `--label release=<its release>`; repeatable).
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,

    /// `prometheus-operator`: PrometheusRule resources (one per metric); `rule-file`: one
    /// plain rule file (`groups:`) for `promtool check rules`, Prometheus' `rule_files`,
    /// Thanos Ruler, Mimir's ruler or vmalert.
    #[arg(long, value_enum, default_value_t = RulesFormat::PrometheusOperator)]
    pub format: RulesFormat,

    /// `interval` of every rule group (e.g. `30s`); without it Prometheus'
    /// `evaluation_interval` applies. Use the metric's Argo `interval` for alerts that look
    /// when the gate looks.
    #[arg(long = "group-interval", value_name = "DURATION", value_parser = parse_interval)]
    pub group_interval: Option<Duration>,
}

/// The form the rules are printed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RulesFormat {
    /// `monitoring.coreos.com/v1` PrometheusRule resources.
    PrometheusOperator,
    /// A plain Prometheus rule file: `groups:` only.
    RuleFile,
}

/// A rule group interval: a positive duration like `30s` or `1m`.
fn parse_interval(s: &str) -> Result<Duration, String> {
    match parse_duration(s) {
        Ok(d) if d.as_millis() >= 1 => Ok(d),
        Ok(_) => Err(format!("expected a duration above zero, got {s:?}")),
        Err(e) => Err(format!(
            "expected a duration like 30s or 1m, got {s:?}: {e}"
        )),
    }
}

/// A Kubernetes namespace name (RFC 1123 label: at most 63 of `a-z0-9-`, alphanumeric ends).
fn parse_namespace(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if ok {
        Ok(s.to_string())
    } else {
        Err(format!(
            "expected a namespace name (at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit), got {s:?}"
        ))
    }
}

/// A Kubernetes label `key=value`: the key an optional DNS prefix and `/`, then a name of at
/// most 63 of `A-Za-z0-9-_.`; the value at most 63 of those (or empty), alphanumeric ends.
fn parse_label(s: &str) -> Result<(String, String), String> {
    let Some((key, value)) = s.split_once('=') else {
        return Err(format!("expected KEY=VALUE, got {s:?}"));
    };
    let name_ok = |n: &str| {
        !n.is_empty()
            && n.len() <= 63
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            && n.as_bytes()[0].is_ascii_alphanumeric()
            && n.as_bytes()[n.len() - 1].is_ascii_alphanumeric()
    };
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|part| {
                !part.is_empty()
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            })
    });
    if !name_ok(name) || !prefix_ok {
        return Err(format!(
            "label key {key:?} is not a Kubernetes label key (optional DNS prefix and '/', then at most 63 of A-Z a-z 0-9 - _ .)"
        ));
    }
    if !value.is_empty() && !name_ok(value) {
        return Err(format!(
            "label {key}: value {value:?} is not a Kubernetes label value (at most 63 of A-Z a-z 0-9 - _ ., alphanumeric at both ends)"
        ));
    }
    Ok((key.to_string(), value.to_string()))
}

/// A template argument `NAME=VALUE`.
pub(super) fn parse_arg(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("expected NAME=VALUE, got {s:?}")),
    }
}

/// Prints the rules (YAML documents separated by `---`; what was not translated as comments,
/// and on stderr) and returns the exit code: 0 when printed, 3 when the template cannot be
/// read or no metric gives a rule.
pub(crate) fn run(args: RulesArgs) -> u8 {
    if args.format == RulesFormat::RuleFile && (args.namespace.is_some() || !args.labels.is_empty())
    {
        eprintln!("rollgate rules: --namespace and --label place PrometheusRule resources; a rule file (--format rule-file) has neither");
        return exit::USAGE;
    }
    match render(&args) {
        Ok((text, notes)) => {
            for note in &notes {
                eprintln!("rollgate rules: {note}");
            }
            super::stdout::print(format_args!("{text}"));
            exit::SUCCESSFUL
        }
        Err(message) => {
            eprintln!("rollgate rules: {message}");
            exit::ERROR
        }
    }
}

/// The YAML text `run` prints, and the notes on what was not translated (also in the text).
pub(crate) fn render(args: &RulesArgs) -> Result<(String, Vec<String>), String> {
    let (source, templates) = super::read_templates(&args.file, &args.args)?;
    let options = RuleOptions {
        placement: RulePlacement {
            namespace: args.namespace.clone(),
            labels: args.labels.clone(),
        },
        group_interval: args.group_interval,
    };
    let mut out = String::new();
    let mut notes = Vec::new();
    let mut printed = 0;
    let mut seen = 0;
    for template in &templates {
        let metrics = template
            .metrics(&args.args)
            .map_err(|e| format!("{source}: {} {}: {e}", template.kind, template.name))?;
        for m in metrics {
            if args.metric.as_deref().is_some_and(|want| want != m.name) {
                continue;
            }
            seen += 1;
            let mut note = |text: &str| {
                let line = format!("{}/{}: {text}", template.name, m.name);
                out.push_str(&format!("# {}\n", line.replace('\n', " ")));
                notes.push(line);
            };
            let doc = match Engine::metric_rules(&template.name, &m) {
                MetricOutput::Skipped(why) => {
                    note(&format!("no rules: {why}"));
                    continue;
                }
                MetricOutput::Rules(rules) => {
                    for n in &rules.notes {
                        note(n);
                    }
                    Engine::metric_prometheus_rule(&rules, &options).map_err(|e| e.to_string())?
                }
                MetricOutput::Fleet => match &m.provider {
                    Provider::Rollgate(spec) => match &spec.kind {
                        MetricKind::Fleet(fleet) => {
                            Engine::fleet_prometheus_rule(&template.name, &m.name, fleet, &options)
                                .map_err(|e| e.to_string())?
                        }
                        _ => continue,
                    },
                    _ => continue,
                },
            };
            out.push_str("---\n");
            out.push_str(&doc);
            printed += 1;
        }
    }
    if printed > 0 && args.format == RulesFormat::RuleFile {
        out = rule_file(&out)?;
    }
    if printed == 0 {
        return Err(match (&args.metric, seen) {
            (Some(name), 0) => format!("{source}: no metric named {name:?}"),
            _ => format!(
                "{source}: no metric gives rules ({})",
                if notes.is_empty() {
                    "the template has no metrics".to_string()
                } else {
                    notes.join("; ")
                }
            ),
        });
    }
    Ok((out, notes))
}

/// The PrometheusRule documents of `text` as one plain rule file: every `spec.groups` entry
/// under one `groups:`, the notes kept as comments at the top.
fn rule_file(text: &str) -> Result<String, String> {
    let mut comments = String::new();
    for line in text.lines().filter(|l| l.starts_with("# ")) {
        comments.push_str(line);
        comments.push('\n');
    }
    // serde_yaml_ng's own values keep each rule's keys in the order they were written.
    use serde_yaml_ng::Value;
    let mut groups = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(text) {
        let value = <Value as serde::Deserialize>::deserialize(doc)
            .map_err(|e| format!("cannot read the rules back: {e}"))?;
        if let Some(Value::Sequence(g)) = value.get("spec").and_then(|s| s.get("groups")) {
            groups.extend(g.iter().cloned());
        }
    }
    let mut file = serde_yaml_ng::Mapping::new();
    file.insert(Value::from("groups"), Value::Sequence(groups));
    let body =
        serde_yaml_ng::to_string(&file).map_err(|e| format!("cannot write the rule file: {e}"))?;
    Ok(format!("{comments}{body}"))
}
