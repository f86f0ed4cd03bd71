//! `rollgate dry-run`: evaluate an AnalysisTemplate's metrics once and print the verdict.

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use clap::{Args, ValueEnum};

use crate::engine::{AddressPolicy, Call, Deadline, Engine, Position, Trust};
use crate::measurement::{Measurement, Phase};
use crate::prometheus::{Backend, Client, Recorder, Replay};
use crate::spec::duration::parse_duration;
use crate::spec::{check_address, Metric, Provider, Template};

use super::exit;
use super::output::{print_json, print_table, Row};

/// Arguments of `rollgate dry-run`.
#[derive(Debug, Args)]
pub struct DryRunArgs {
    /// The AnalysisTemplate / ClusterAnalysisTemplate YAML file (several documents allowed).
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: PathBuf,

    /// A template argument, `name=value`, for `{{args.name}}` (repeatable; overrides defaults).
    #[arg(long = "arg", value_name = "NAME=VALUE", value_parser = parse_arg)]
    pub args: Vec<(String, String)>,

    /// Evaluate at this time (RFC 3339, e.g. 2026-11-29T12:00:00Z) instead of now.
    #[arg(long, value_name = "RFC3339", value_parser = parse_time)]
    pub at: Option<DateTime<Utc>>,

    /// When the analysis run began (RFC 3339): fills `[[run.elapsed]]` and judges an open-ended
    /// `compare` metric (no `count`) on every interval since then, as the live run would.
    #[arg(long = "run-start", value_name = "RFC3339", value_parser = parse_time)]
    pub run_start: Option<DateTime<Utc>>,

    #[command(flatten)]
    pub(crate) source: SourceArgs,

    /// Evaluate only the metric with this name.
    #[arg(long, value_name = "NAME")]
    pub metric: Option<String>,

    /// Overall time allowed per metric, retries included.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// Where queries go and how results are printed; shared by `dry-run` and `backtest`.
#[derive(Debug, Args)]
pub(crate) struct SourceArgs {
    /// Replace every metric's Prometheus address (e.g. a port-forward: http://127.0.0.1:9090).
    #[arg(long, value_name = "URL")]
    pub prometheus: Option<String>,

    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,

    /// Save every Prometheus response to FILE, for `--replay` later.
    #[arg(long, value_name = "FILE", conflicts_with = "replay")]
    pub record: Option<PathBuf>,

    /// Answer queries from a recording instead of a server (no cluster needed).
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,
}

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum OutputFormat {
    Table,
    Json,
}

pub(super) fn parse_arg(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("expected NAME=VALUE, got {s:?}")),
    }
}

pub(super) fn parse_time(s: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("expected an RFC 3339 time like 2026-11-29T12:00:00Z: {e}"))
}

/// How far `--at` may lie ahead of this machine's clock (clocks of two machines differ).
const AT_SLACK: chrono::TimeDelta = chrono::TimeDelta::seconds(60);

/// Runs the dry run and returns the exit code.
pub(crate) fn run(args: DryRunArgs) -> u8 {
    if let Some(at) = args.at.filter(|at| *at > Utc::now() + AT_SLACK) {
        eprintln!(
            "rollgate dry-run: --at ({}) is in the future (now is {}): Prometheus has no data there yet; leave --at out to evaluate now",
            at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        );
        return exit::USAGE;
    }
    match execute(&args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("rollgate dry-run: {message}");
            exit::ERROR
        }
    }
}

fn execute(args: &DryRunArgs) -> Result<u8, String> {
    let (templates, work) = load_metrics(&args.file, &args.args, args.metric.as_deref())?;
    let backend = open_backend(args.source.replay.as_deref(), args.source.record.is_some())?;
    let engine = Engine::new(backend, address_policy(args.source.prometheus.as_deref())?);

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let rows = runtime.block_on(evaluate_all(&engine, &work, args));

    save_recording(args.source.record.as_deref(), engine.backend())?;

    let overall = Phase::combine(
        rows.iter()
            .filter_map(|r| r.measurement.as_ref().map(|m| m.phase)),
    );
    let show_template = templates.len() > 1;
    match args.source.output {
        OutputFormat::Table => print_table(&rows, overall, show_template),
        OutputFormat::Json => print_json(&rows, overall, args.at),
    }
    Ok(exit_code(overall))
}

/// Templates and their metrics, each with its template's name.
pub(super) type Loaded = (Vec<Template>, Vec<(String, Metric)>);

/// The templates of `file` and their metrics (`{{args.*}}` resolved), optionally only `only`.
/// Shared with `backtest`.
pub(super) fn load_metrics(
    file: &Path,
    args: &[(String, String)],
    only: Option<&str>,
) -> Result<Loaded, String> {
    let (source, templates) = super::read_templates(file, args)?;

    let mut work: Vec<(String, Metric)> = Vec::new();
    for template in &templates {
        let metrics = template
            .metrics(args)
            .map_err(|e| format!("{source}: {} {}: {e}", template.kind, template.name))?;
        for m in metrics {
            if only.is_none_or(|want| want == m.name) {
                work.push((template.name.clone(), m));
            }
        }
    }
    if work.is_empty() {
        return Err(match only {
            Some(name) => format!("{source}: no metric named {name:?}"),
            None => format!("{source}: no metrics"),
        });
    }
    Ok((templates, work))
}

/// The query backend for `--replay FILE` / `--record` / live. Shared with `backtest`.
pub(super) fn open_backend(replay: Option<&Path>, record: bool) -> Result<Backend, String> {
    Ok(match (replay, record) {
        (Some(path), _) => Backend::Replay(Replay::load(path).map_err(|e| e.to_string())?),
        (None, true) => Backend::Recording(Client::new(), Recorder::new()),
        (None, false) => Backend::Live(Client::new()),
    })
}

/// The address policy with `--prometheus URL` as the override. Shared with `backtest`.
pub(super) fn address_policy(prometheus: Option<&str>) -> Result<AddressPolicy, String> {
    let mut addresses = AddressPolicy::from_env();
    if let Some(url) = prometheus {
        addresses.override_address =
            Some(check_address("--prometheus", url).map_err(|e| e.to_string())?);
    }
    Ok(addresses)
}

/// Saves the recording of a recording backend to `path` (`--record`). Shared with `backtest`.
pub(super) fn save_recording(path: Option<&Path>, backend: &Backend) -> Result<(), String> {
    match (path, backend) {
        (Some(path), Backend::Recording(_, recorder)) => recorder
            .save(path)
            .map_err(|e| format!("cannot save the recording: {e}")),
        (Some(_), Backend::Cached(cache)) => save_recording(path, cache.inner()),
        _ => Ok(()),
    }
}

async fn evaluate_all(engine: &Engine, work: &[(String, Metric)], args: &DryRunArgs) -> Vec<Row> {
    let evaluations = work.iter().map(|(template, metric)| async move {
        let started = std::time::Instant::now();
        let measurement = match &metric.provider {
            Provider::Unsupported(_) => None,
            // The operator's own files, measured once; `--timeout` bounds the queries.
            _ => Some(
                engine
                    .call(Call {
                        metric,
                        at: args.at,
                        deadline: Deadline::for_call(None, args.timeout),
                        trust: Trust::OPERATOR,
                        position: match args.run_start {
                            None => Position::Single,
                            Some(t) => Position::Known {
                                started_at: Some(t),
                                checks_done: None,
                            },
                        },
                        previous: None,
                    })
                    .await
                    .unwrap_or_else(|e| Measurement::error(e.to_string(), chrono::Utc::now())),
            ),
        }
        .map(|m| with_time_spent(m, started.elapsed(), args.timeout));
        Row {
            template: template.clone(),
            metric: metric.name.clone(),
            kind: engine
                .describe(metric)
                .get("kind")
                .cloned()
                .unwrap_or_default(),
            measurement,
        }
    });
    futures::future::join_all(evaluations).await
}

/// An Error that ran into `--timeout` says how long the metric really took: a query's own
/// message names only its last attempt's share ("did not answer within 9694ms" after 30 s of
/// retries).
fn with_time_spent(mut m: Measurement, spent: Duration, limit: Duration) -> Measurement {
    if m.phase == Phase::Error && spent >= limit.mul_f64(0.9) {
        m.message = format!(
            "{} (gave up after {:.1}s of --timeout {}, retries included)",
            m.message,
            spent.as_secs_f64(),
            crate::spec::duration::format_duration(limit)
        );
    }
    m
}

/// The dry-run exit code for an overall phase.
pub(crate) fn exit_code(phase: Phase) -> u8 {
    match phase {
        Phase::Successful => exit::SUCCESSFUL,
        Phase::Failed => exit::FAILED,
        Phase::Inconclusive | Phase::Running => exit::INCONCLUSIVE,
        Phase::Error => exit::ERROR,
    }
}
