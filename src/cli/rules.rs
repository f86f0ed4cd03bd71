//! `rollgate rules`: print a PrometheusRule for every fleet metric of an AnalysisTemplate.
//!
//! The rules are built by the engine (`Engine::fleet_prometheus_rule`), from the same PromQL
//! as the gate; this command only reads the template and prints.

use std::path::PathBuf;

use clap::Args;

use crate::engine::{Engine, RulePlacement};
use crate::spec::{MetricKind, Provider, Template};

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

    /// Only the fleet metric with this name.
    #[arg(long, value_name = "NAME")]
    pub metric: Option<String>,

    /// `metadata.namespace` of every PrometheusRule (a DNS label: lower case, digits, `-`).
    #[arg(long, value_name = "NS", value_parser = parse_namespace)]
    pub namespace: Option<String>,

    /// An extra `metadata.labels` entry, `key=value`, so a prometheus-operator `ruleSelector`
    /// picks the rule up (kube-prometheus-stack: `--label release=<its release>`; repeatable).
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
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

fn parse_arg(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("expected NAME=VALUE, got {s:?}")),
    }
}

/// Prints the rules (YAML documents separated by `---`) and returns the exit code: 0 when
/// printed, 3 when the template cannot be read or has no fleet metric.
pub(crate) fn run(args: RulesArgs) -> u8 {
    match render(&args) {
        Ok(text) => {
            super::stdout::print(format_args!("{text}"));
            exit::SUCCESSFUL
        }
        Err(message) => {
            eprintln!("rollgate rules: {message}");
            exit::ERROR
        }
    }
}

/// The YAML text `run` prints.
pub(crate) fn render(args: &RulesArgs) -> Result<String, String> {
    let text = std::fs::read_to_string(&args.file)
        .map_err(|e| format!("cannot read {}: {e}", args.file.display()))?;
    let source = args.file.display().to_string();
    let templates = Template::parse_all(&text, &source).map_err(|e| format!("{source}: {e}"))?;
    let placement = RulePlacement {
        namespace: args.namespace.clone(),
        labels: args.labels.clone(),
    };
    let mut docs = Vec::new();
    for template in &templates {
        let metrics = template
            .metrics(&args.args)
            .map_err(|e| format!("{source}: {} {}: {e}", template.kind, template.name))?;
        for m in metrics {
            if args.metric.as_deref().is_some_and(|want| want != m.name) {
                continue;
            }
            if let Provider::Rollgate(spec) = &m.provider {
                if let MetricKind::Fleet(fleet) = &spec.kind {
                    docs.push(Engine::fleet_prometheus_rule(
                        &template.name,
                        &m.name,
                        fleet,
                        &placement,
                    )?);
                }
            }
        }
    }
    if docs.is_empty() {
        return Err(match &args.metric {
            Some(name) => format!("{source}: no fleet metric named {name:?}"),
            None => format!(
                "{source}: no fleet metric (rules are made for metrics with a fleet: block)"
            ),
        });
    }
    Ok(docs
        .iter()
        .map(|d| format!("---\n{d}"))
        .collect::<Vec<_>>()
        .join(""))
}
