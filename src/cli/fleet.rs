//! `rollgate fleet plan|versions`: the target matrix and the version matrix of a template's
//! fleet metrics, from the live inventory. The engine sends the gate's own queries
//! (`Engine::fleet_plan`); this command only prints.

use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};

use crate::engine::{Engine, EvalOptions};
use crate::spec::duration::parse_duration;
use crate::spec::{MetricKind, Provider};

use super::dry_run::{
    address_policy, load_metrics, open_backend, parse_arg, parse_time, OutputFormat,
};
use super::exit;
use super::stdout::outln;

/// Arguments of `rollgate fleet`.
#[derive(Debug, Args)]
pub struct FleetArgs {
    #[command(subcommand)]
    pub command: FleetCommand,
}

/// The `fleet` subcommands.
#[derive(Debug, Subcommand)]
pub enum FleetCommand {
    /// Each cohort with its targets, their versions and states, the unselected targets and the
    /// cohort members missing from the inventory (the gate's queries, sent now).
    Plan(FleetQuery),
    /// The version matrix now: version, targets, pods (targets named when few).
    Versions(FleetQuery),
}

/// What `fleet plan` and `fleet versions` read.
#[derive(Debug, Args)]
pub struct FleetQuery {
    /// The AnalysisTemplate / ClusterAnalysisTemplate YAML file (several documents allowed).
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: PathBuf,

    /// A template argument, `name=value`, for `{{args.name}}` (repeatable; overrides defaults).
    #[arg(long = "arg", value_name = "NAME=VALUE", value_parser = parse_arg)]
    pub args: Vec<(String, String)>,

    /// Only the fleet metric with this name.
    #[arg(long, value_name = "NAME")]
    pub metric: Option<String>,

    /// Replace every metric's Prometheus address (e.g. a port-forward: http://127.0.0.1:9090).
    #[arg(long, value_name = "URL")]
    pub prometheus: Option<String>,

    /// Answer queries from a recording (`dry-run --record`) instead of a server (no cluster needed).
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,

    /// Read the fleet at this time (RFC 3339) instead of now.
    #[arg(long, value_name = "RFC3339", value_parser = parse_time)]
    pub at: Option<DateTime<Utc>>,

    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Table)]
    pub(crate) output: OutputFormat,

    /// Overall time allowed per metric, retries included.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// Runs `rollgate fleet ...`; exit 0 when printed, 3 when the template or the gate cannot be read.
pub(crate) fn run(args: FleetArgs) -> u8 {
    let (what, query) = match &args.command {
        FleetCommand::Plan(q) => ("plan", q),
        FleetCommand::Versions(q) => ("versions", q),
    };
    match execute(what == "plan", query) {
        Ok(()) => exit::SUCCESSFUL,
        Err(message) => {
            eprintln!("rollgate fleet {what}: {message}");
            exit::ERROR
        }
    }
}

fn execute(plan: bool, q: &FleetQuery) -> Result<(), String> {
    let (_, work) = load_metrics(&q.file, &q.args, q.metric.as_deref())?;
    let fleet: Vec<_> = work
        .into_iter()
        .filter(|(_, m)| {
            matches!(&m.provider, Provider::Rollgate(s) if matches!(s.kind, MetricKind::Fleet(_)))
        })
        .collect();
    if fleet.is_empty() {
        return Err(format!(
            "{}: no fleet metric (the command reads metrics with a fleet: block)",
            q.file.display()
        ));
    }
    let engine = Engine::new(
        open_backend(q.replay.as_deref(), false)?,
        address_policy(q.prometheus.as_deref())?,
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let opts = EvalOptions {
        at: q.at,
        ..EvalOptions::with_budget(q.timeout)
    };
    let mut plans = Vec::new();
    for (template, metric) in &fleet {
        let p = runtime
            .block_on(engine.fleet_plan(metric, &opts))
            .map_err(|e| format!("{template}/{}: {e}", metric.name))?;
        plans.push((template.clone(), p));
    }
    if q.output == OutputFormat::Json {
        let docs: Vec<serde_json::Value> = plans
            .iter()
            .map(|(t, p)| {
                let mut v = serde_json::to_value(p).unwrap_or_default();
                v["template"] = serde_json::json!(t);
                if !plan {
                    v = serde_json::json!({"template": t, "metric": p.metric, "versions": v["versions"]});
                }
                v
            })
            .collect();
        let text =
            serde_json::to_string_pretty(&docs).map_err(|e| format!("cannot write JSON: {e}"))?;
        outln!("{text}");
        return Ok(());
    }
    for (template, p) in &plans {
        outln!(
            "{template}/{}: expected {}, gate {}",
            p.metric,
            short(&p.expected),
            p.verdict
        );
        if plan {
            print_plan(p);
        } else {
            print_versions(p);
        }
    }
    Ok(())
}

fn short(v: &str) -> String {
    match v.rsplit_once('@').map_or(v, |(_, d)| d) {
        d if crate::spec::is_bare_digest(d) && d.len() > 19 => format!("{}…", &d[..19]),
        _ => v.to_string(),
    }
}

type Plan = crate::engine::FleetPlan;

fn print_plan(p: &Plan) {
    let mut rows: Vec<[String; 4]> = Vec::new();
    for c in &p.cohorts {
        let name = match c.max_concurrent {
            Some(m) => format!("{} (max {m})", c.name),
            None => c.name.clone(),
        };
        for t in &c.targets {
            rows.push([
                name.clone(),
                t.target.clone(),
                t.state.clone(),
                t.versions.join(", "),
            ]);
        }
        for t in &c.missing {
            rows.push([
                name.clone(),
                t.clone(),
                "missing from the inventory".into(),
                String::new(),
            ]);
        }
    }
    let unselected = if p.cohorts.is_empty() {
        "-"
    } else {
        "(unselected)"
    };
    for t in &p.unselected {
        rows.push([
            unselected.into(),
            t.target.clone(),
            t.state.clone(),
            t.versions.join(", "),
        ]);
    }
    for t in &p.outside_inventory {
        rows.push([
            "(outside inventory)".into(),
            t.target.clone(),
            t.state.clone(),
            t.versions.join(", "),
        ]);
    }
    table(
        &["COHORT", &p.group_by.to_uppercase(), "STATE", "VERSIONS"],
        &rows,
    );
    outln!("gate: {}", p.message);
}

fn print_versions(p: &Plan) {
    let rows: Vec<[String; 5]> = p
        .versions
        .iter()
        .map(|v| {
            [
                short(&v.version),
                if v.expected { "yes" } else { "no" }.into(),
                v.targets.to_string(),
                v.pods.to_string(),
                match &v.target_names {
                    Some(names) => names.join(", "),
                    None => format!("({} targets)", v.targets),
                },
            ]
        })
        .collect();
    table(&["VERSION", "EXPECTED", "TARGETS", "PODS", "NAMES"], &rows);
}

/// Left-aligned columns two spaces apart; the last column is not padded.
fn table<const N: usize>(header: &[&str; N], rows: &[[String; N]]) {
    let mut width = [0usize; N];
    for (i, h) in header.iter().enumerate() {
        width[i] = h.chars().count();
    }
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == N {
                out.push_str(c);
            } else {
                out.push_str(c);
                out.push_str(&" ".repeat(width[i] - c.chars().count() + 2));
            }
        }
        out.trim_end().to_string()
    };
    outln!("{}", line(header.to_vec()));
    for r in rows {
        outln!("{}", line(r.iter().map(String::as_str).collect()));
    }
}
