//! `rollgate rules`: print a PrometheusRule for every fleet metric of an AnalysisTemplate.
//!
//! The rules are built by the engine (`Engine::fleet_prometheus_rule`), from the same PromQL
//! as the gate; this command only reads the template and prints.

use std::path::PathBuf;

use clap::Args;

use crate::engine::Engine;
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
}

fn parse_arg(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("expected NAME=VALUE, got {s:?}")),
    }
}

/// Prints the rules (YAML documents separated by `---`) and returns the exit code: 0 when
/// printed, 3 when the template cannot be read or has no fleet metric.
pub fn run(args: RulesArgs) -> u8 {
    match render(&args) {
        Ok(text) => {
            print!("{text}");
            exit::SUCCESSFUL
        }
        Err(message) => {
            eprintln!("rollgate rules: {message}");
            exit::ERROR
        }
    }
}

/// The YAML text `run` prints.
pub fn render(args: &RulesArgs) -> Result<String, String> {
    let text = std::fs::read_to_string(&args.file)
        .map_err(|e| format!("cannot read {}: {e}", args.file.display()))?;
    let source = args.file.display().to_string();
    let templates = Template::parse_all(&text, &source).map_err(|e| format!("{source}: {e}"))?;
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
