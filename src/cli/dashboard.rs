//! `rollgate dashboard`: print a Grafana dashboard (JSON) of every metric of a template.
//!
//! The dashboard is built by the engine (`Engine::dashboard`) from the same spec as the gate;
//! this command reads the template and prints. Import it in Grafana (Dashboards → New →
//! Import) or provision it from a file.

use std::path::PathBuf;

use clap::Args;

use crate::engine::Engine;
use crate::spec::Provider;

use super::exit;

/// Arguments of `rollgate dashboard`.
#[derive(Debug, Args)]
pub struct DashboardArgs {
    /// The AnalysisTemplate / ClusterAnalysisTemplate YAML file (several documents: one
    /// dashboard with the metrics of all).
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: PathBuf,

    /// A template argument, `name=value`, for `{{args.name}}` (repeatable; overrides defaults).
    #[arg(long = "arg", value_name = "NAME=VALUE", value_parser = super::rules::parse_arg)]
    pub args: Vec<(String, String)>,
}

/// Prints the dashboard JSON; 0 when printed, 3 when the template cannot be read or has no
/// rollgate metric.
pub(crate) fn run(args: DashboardArgs) -> u8 {
    match render(&args) {
        Ok(text) => {
            super::stdout::print(format_args!("{text}\n"));
            exit::SUCCESSFUL
        }
        Err(message) => {
            eprintln!("rollgate dashboard: {message}");
            exit::ERROR
        }
    }
}

/// The JSON text `run` prints.
pub(crate) fn render(args: &DashboardArgs) -> Result<String, String> {
    let (source, templates) = super::read_templates(&args.file, &args.args)?;
    let mut metrics = Vec::new();
    for template in &templates {
        metrics.extend(
            template
                .metrics(&args.args)
                .map_err(|e| format!("{source}: {} {}: {e}", template.kind, template.name))?,
        );
    }
    if !metrics
        .iter()
        .any(|m| matches!(&m.provider, Provider::Rollgate(s) if s.backend.is_none()))
    {
        return Err(format!(
            "{source}: no rollgate metric with a prometheus block to show (the dashboard's panels are PromQL; metrics on other backends are left out)"
        ));
    }
    for m in &metrics {
        if let Provider::Rollgate(spec) = &m.provider {
            if let Some(backend) = &spec.backend {
                eprintln!(
                    "rollgate dashboard: {}: left out: it queries {}, and the panels are PromQL",
                    m.name,
                    backend.name()
                );
            }
        }
    }
    let name: Vec<&str> = templates.iter().map(|t| t.name.as_str()).collect();
    let dashboard = Engine::dashboard(&name.join("+"), &metrics);
    serde_json::to_string_pretty(&dashboard).map_err(|e| format!("cannot write JSON: {e}"))
}
