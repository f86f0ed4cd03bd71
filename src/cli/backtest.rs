//! `rollgate backtest`: replay a template over a past window as one Argo AnalysisRun.
//!
//! This module only translates: the run rules are `engine::run`, every measurement is
//! `Engine::measure` at the simulated time, and batching is the `RangeCache` backend layer.

use super::stdout::outln;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;

use crate::engine::run::{
    failure_inconclusive_or_error, RunMetric, RunPhase, RunSim, Task, TaskKind,
};
use crate::engine::{Engine, EvalOptions};
use crate::measurement::{Measurement, Phase};
use crate::prometheus::{Backend, Grid, RangeCache};
use crate::spec::duration::{format_duration, parse_duration};
use crate::spec::{Metric, Provider, Template};

use super::dry_run::{
    address_policy, exit_code, load_metrics, open_backend, parse_arg, parse_time, save_recording,
    OutputFormat, SourceArgs,
};
use super::exit;
use super::output::{print_columns, shorten};
use super::{backtest_plot, backtest_releases};

/// The default of `--max-checks`.
pub(crate) const DEFAULT_MAX_CHECKS: u64 = 100_000;

/// Arguments of `rollgate backtest`.
#[derive(Debug, Args)]
pub struct BacktestArgs {
    /// The AnalysisTemplate / ClusterAnalysisTemplate YAML file; all its templates form one run.
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: PathBuf,

    /// The run's start (Argo's status.startedAt), RFC 3339.
    #[arg(long, value_name = "RFC3339", value_parser = parse_time, required_unless_present = "releases")]
    pub from: Option<DateTime<Utc>>,

    /// The window's end: a run still going then is terminated, as when a rollout completes.
    #[arg(long, value_name = "RFC3339", value_parser = parse_time, required_unless_present = "releases")]
    pub to: Option<DateTime<Utc>>,

    /// Score the template on past releases instead of one window (see docs/backtest.md).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["from", "to", "plot"])]
    pub releases: Option<PathBuf>,

    /// With --releases: alternatives to try, `METRIC.KEY=V1,V2` (repeatable; one row each).
    #[arg(long = "set", value_name = "METRIC.KEY=V1,V2", requires = "releases")]
    pub set: Vec<String>,

    /// A template argument, `name=value`, for `{{args.name}}` (repeatable; overrides defaults).
    #[arg(long = "arg", value_name = "NAME=VALUE", value_parser = parse_arg)]
    pub args: Vec<(String, String)>,

    #[command(flatten)]
    pub(crate) source: SourceArgs,

    /// Draw the timeline of every metric to this SVG file.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,

    /// Refuse windows that would take more measurements than this (counted before any query).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CHECKS)]
    pub max_checks: u64,

    /// Send one instant query per check instead of batching them into range queries.
    #[arg(long)]
    pub no_batch: bool,

    /// Time allowed per measurement, retries included.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// One line of the timeline: a measurement as it was booked.
#[derive(Debug, Clone)]
struct Event {
    time: DateTime<Utc>,
    metric: String,
    measurement: Measurement,
}

/// What a backtest found.
pub(super) struct Outcome {
    pub sim: RunSim,
    pub started_at: DateTime<Utc>,
    pub ended_at: DateTime<Utc>,
    pub terminated_at_end: bool,
    timeline: Vec<Event>,
    skipped: Vec<(String, String)>,
}

/// Runs the backtest and returns the exit code (as `dry-run`'s, for the run's phase).
pub(crate) fn run(args: BacktestArgs) -> u8 {
    if let Err(message) = check_window_flags(&args, Utc::now()) {
        eprintln!("rollgate backtest: {message}");
        return exit::USAGE;
    }
    if let Some(to) = args
        .to
        .filter(|to| *to > Utc::now() && args.releases.is_none())
    {
        eprintln!(
            "rollgate backtest: note: --to ({}) is in the future; checks after now find no data yet and measure Inconclusive",
            rfc3339(to)
        );
    }
    match execute(&args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("rollgate backtest: {message}");
            exit::ERROR
        }
    }
}

/// The window flags a run cannot start with: usage errors, not verdicts.
fn check_window_flags(args: &BacktestArgs, now: DateTime<Utc>) -> Result<(), String> {
    if args.releases.is_some() {
        return Ok(());
    }
    let (Some(from), Some(to)) = (args.from, args.to) else {
        return Err("--from and --to are required (or --releases FILE)".into());
    };
    if to <= from {
        return Err(format!(
            "--to ({}) must be after --from ({})",
            rfc3339(to),
            rfc3339(from)
        ));
    }
    if from > now {
        return Err(format!(
            "--from ({}) is in the future (now is {}): a backtest replays the past; give a window that has happened",
            rfc3339(from),
            rfc3339(now)
        ));
    }
    Ok(())
}

fn execute(args: &BacktestArgs) -> Result<u8, String> {
    if let Some(file) = &args.releases {
        return backtest_releases::run(args, file);
    }
    let (Some(from), Some(to)) = (args.from, args.to) else {
        return Err("--from and --to are required (or --releases FILE)".into());
    };
    let window = Window::new(from, to, args)?;
    let (templates, work) = load_metrics(&args.file, &args.args, None)?;
    let prepared = prepare(&templates, work)?;
    let planned = window.check_plan(&prepared.run_metrics)?;

    let base = open_backend(args.source.replay.as_deref(), args.source.record.is_some())?;
    let backend = batching(base, args, &[&prepared.run_metrics], &window);
    let engine = Engine::new(backend, address_policy(args.source.prometheus.as_deref())?);
    let runtime = runtime()?;
    let progress = progress_bar(planned);
    let outcome = runtime.block_on(simulate(&engine, &prepared, &window, &progress));
    progress.finish_and_clear();
    let outcome = outcome?;
    save_recording(args.source.record.as_deref(), engine.backend())?;
    if let Some(path) = &args.plot {
        plot(path, &outcome, &prepared.metrics, from)?;
    }

    match args.source.output {
        OutputFormat::Table => print_table(&outcome),
        OutputFormat::Json => print_json(&outcome, &window, engine.backend()),
    }
    Ok(exit_code(outcome.sim.phase().as_measurement_phase()))
}

/// The async runtime of a backtest.
pub(super) fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

/// The window of one run and the limits that apply to it.
pub(super) struct Window {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    max_checks: u64,
    timeout: Duration,
}

impl Window {
    /// A window from `--from` to `--to`; `to` must be after `from`.
    pub(super) fn new(
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        args: &BacktestArgs,
    ) -> Result<Window, String> {
        if to <= from {
            return Err(format!(
                "--to ({}) must be after --from ({})",
                rfc3339(to),
                rfc3339(from)
            ));
        }
        Ok(Window {
            from,
            to,
            max_checks: args.max_checks,
            timeout: args.timeout,
        })
    }

    /// The planned checks, or an error when they exceed `--max-checks`.
    pub(super) fn check_plan(&self, run_metrics: &[RunMetric]) -> Result<u64, String> {
        let planned = planned_checks(run_metrics, self.from, self.to);
        if planned > self.max_checks {
            return Err(format!(
                "the window {} .. {} needs {planned} checks, more than --max-checks {}; shorten the window or raise the limit",
                rfc3339(self.from),
                rfc3339(self.to),
                self.max_checks
            ));
        }
        Ok(planned)
    }
}

/// A run's evaluable metrics, their Argo scheduling fields, and the skipped ones.
pub(super) struct Prepared {
    pub metrics: Vec<Metric>,
    pub run_metrics: Vec<RunMetric>,
    pub skipped: Vec<(String, String)>,
}

/// Splits off skipped providers and applies the templates' `dryRun` rules.
pub(super) fn prepare(
    templates: &[Template],
    work: Vec<(String, Metric)>,
) -> Result<Prepared, String> {
    let dry_rules: Vec<String> = templates
        .iter()
        .flat_map(|t| t.dry_run.iter().cloned())
        .collect();
    let (metrics, skipped) = split_supported(work);
    if metrics.is_empty() {
        return Err("no metric rollgate can evaluate (every provider is skipped)".into());
    }
    let names: Vec<String> = metrics.iter().map(|m| m.name.clone()).collect();
    let dry = crate::engine::run::dry_run_matches(&dry_rules, &names)?;
    let run_metrics = metrics
        .iter()
        .zip(dry)
        .map(|(m, dry_run)| RunMetric {
            name: m.name.clone(),
            interval: m.interval,
            initial_delay: m.initial_delay,
            count: m.count,
            limits: m.limits,
            dry_run,
        })
        .collect();
    Ok(Prepared {
        metrics,
        run_metrics,
        skipped,
    })
}

/// `base`, or the range cache over it for the schedules of every run in `runs`.
pub(super) fn batching(
    base: Backend,
    args: &BacktestArgs,
    runs: &[&[RunMetric]],
    window: &Window,
) -> Backend {
    if args.no_batch {
        return base;
    }
    let mut all: Vec<Grid> = Vec::new();
    for run in runs {
        for g in grids(run, window.from, window.to) {
            if !all.contains(&g) {
                all.push(g);
            }
        }
    }
    Backend::Cached(Arc::new(RangeCache::new(base, all)))
}

/// Writes `--plot`.
fn plot(
    path: &std::path::Path,
    o: &Outcome,
    metrics: &[Metric],
    from: DateTime<Utc>,
) -> Result<(), String> {
    let panels: Vec<backtest_plot::Panel<'_>> = metrics
        .iter()
        .map(|m| backtest_plot::Panel {
            name: &m.name,
            points: o
                .timeline
                .iter()
                .filter(|e| e.metric == m.name)
                .map(|e| {
                    (
                        e.time,
                        e.measurement.phase,
                        backtest_plot::numeric(&e.measurement.value),
                    )
                })
                .collect(),
            conditions: [&m.success_condition, &m.failure_condition]
                .into_iter()
                .flatten()
                .map(|c| c.source().to_string())
                .collect(),
        })
        .collect();
    backtest_plot::write(
        path,
        &panels,
        from,
        o.ended_at,
        &summary(o),
        o.sim.phase().as_measurement_phase(),
    )
}

/// Metrics rollgate evaluates, and the skipped ones with their provider.
fn split_supported(work: Vec<(String, Metric)>) -> (Vec<Metric>, Vec<(String, String)>) {
    let mut metrics = Vec::new();
    let mut skipped = Vec::new();
    for (_, m) in work {
        match &m.provider {
            Provider::Unsupported(name) => skipped.push((m.name.clone(), name.clone())),
            _ => metrics.push(m),
        }
    }
    (metrics, skipped)
}

/// The most measurements the window can take if every check succeeds (error retries are
/// bounded separately while running).
fn planned_checks(metrics: &[RunMetric], from: DateTime<Utc>, to: DateTime<Utc>) -> u64 {
    let window = (to - from).to_std().unwrap_or_default();
    metrics
        .iter()
        .map(|m| {
            let by_window = match m.interval {
                Some(i) if !i.is_zero() => {
                    let usable = window.saturating_sub(m.initial_delay.unwrap_or_default());
                    u64::try_from(usable.as_millis() / i.as_millis())
                        .unwrap_or(u64::MAX)
                        .saturating_add(1)
                }
                _ => 1,
            };
            m.effective_count()
                .map_or(by_window, |c| u64::from(c).min(by_window))
        })
        .sum()
}

/// The step-aligned schedules the range cache serves: one per (first check, interval).
fn grids(metrics: &[RunMetric], from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<Grid> {
    let mut out: Vec<Grid> = Vec::new();
    for m in metrics {
        let Some(step) = m.interval.filter(|i| !i.is_zero()) else {
            continue;
        };
        let delay = chrono::Duration::from_std(m.initial_delay.unwrap_or_default())
            .unwrap_or(chrono::Duration::MAX);
        let grid = Grid {
            start: from + delay,
            step,
            end: to,
        };
        if !out.contains(&grid) {
            out.push(grid);
        }
    }
    out
}

/// The options of the measurement taken at `at` in the run of `window`, after `counted`
/// measurements of the metric that count towards Argo's `count` (its `MetricResult.Count`:
/// completed, not Error), which places a compare check exactly in its run.
fn eval_options(
    at: DateTime<Utc>,
    window: &Window,
    waiting_since: Option<DateTime<Utc>>,
    counted: i64,
) -> EvalOptions {
    EvalOptions {
        at: Some(at),
        run_started_at: Some(window.from),
        replay_until: Some(window.to),
        checks_done: Some(u32::try_from(counted.max(0)).unwrap_or(u32::MAX)),
        waiting_since,
        skip_metadata: true,
        ..EvalOptions::with_budget(window.timeout)
    }
}

/// A progress bar over the planned checks on stderr, drawn only when stderr is a terminal.
fn progress_bar(planned: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(planned), ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("{bar:40} {pos}/{len} checks, at {msg} ({elapsed})")
    {
        bar.set_style(style);
    }
    bar
}

/// Drives the run as the controller would until it ends or the window does.
pub(super) async fn simulate(
    engine: &Engine,
    prepared: &Prepared,
    args: &Window,
    progress: &ProgressBar,
) -> Result<Outcome, String> {
    let metrics = &prepared.metrics;
    let mut sim = RunSim::new(prepared.run_metrics.clone(), args.from);
    let mut timeline = Vec::new();
    let mut now = args.from;
    let mut terminated_at_end = false;
    // Error retries (every 10 s) are the only way to exceed the plan; bound them too.
    let limit = args.max_checks.saturating_mul(2).max(16);
    for _ in 0..limit {
        let tasks = sim.due(now);
        let measured = futures::future::join_all(tasks.iter().map(|task| {
            let sim = &sim;
            async move { measure_task(engine, metrics, sim, *task, now, args).await }
        }))
        .await;
        progress.inc(measured.len() as u64);
        // Formatting the time is a cost of its own over 20,000 reconciles: only when drawn.
        if !progress.is_hidden() {
            progress.set_message(now.format("%Y-%m-%d %H:%M").to_string());
        }
        for (task, mut m) in tasks.into_iter().zip(measured) {
            // Neither the run rules nor the output read metadata, and over a long window it is
            // most of the memory: drop it before the measurement is kept (twice).
            m.metadata = Default::default();
            let kept = run_copy(&m);
            timeline.push(Event {
                time: now,
                metric: sim.metrics()[task.metric].name.clone(),
                measurement: m,
            });
            sim.record(task, kept, now);
        }
        if sim.assess(now).completed() {
            return Ok(Outcome {
                sim,
                started_at: args.from,
                ended_at: now,
                terminated_at_end,
                timeline,
                skipped: prepared.skipped.clone(),
            });
        }
        match sim.next_reconcile(now) {
            Some(next) if next <= args.to => now = next,
            _ => {
                now = args.to;
                terminated_at_end = true;
                sim.request_terminate();
            }
        }
    }
    Err(format!(
        "stopped after {limit} reconciles without an end (error retries every 10 s?); nothing printed"
    ))
}

/// The run's own copy of a measurement (it keeps Argo's last 10 per metric): its value only
/// while it is in flight, for `Terminate` to return; the rules and the summary read the rest.
/// The timeline keeps the whole measurement, so a compare value is not copied per check.
fn run_copy(m: &Measurement) -> Measurement {
    Measurement {
        phase: m.phase,
        message: m.message.clone(),
        value: if m.phase == Phase::Running {
            m.value.clone()
        } else {
            String::new()
        },
        metadata: Default::default(),
        started_at: m.started_at,
        finished_at: m.finished_at,
        resume_at: m.resume_at,
    }
}

async fn measure_task(
    engine: &Engine,
    metrics: &[Metric],
    sim: &RunSim,
    task: Task,
    now: DateTime<Utc>,
    args: &Window,
) -> Measurement {
    let metric = &metrics[task.metric];
    let result = &sim.results()[task.metric];
    let previous = result.measurements.last();
    match (task.kind, previous) {
        (TaskKind::Terminate, Some(prev)) => engine.terminate(prev),
        (TaskKind::Resume, Some(prev)) => {
            // The engine times a wait on the real clock (as Argo's Resume comes in real time):
            // hand it the wait's start shifted to real time, and map resumeAt back.
            let waited = now - prev.started_at;
            let opts = eval_options(now, args, Some(Utc::now() - waited), result.count);
            to_simulated(engine.measure(metric, &opts).await, now)
        }
        _ => {
            let opts = eval_options(now, args, None, result.count);
            to_simulated(engine.measure(metric, &opts).await, now)
        }
    }
}

/// Maps a measurement's real-time `resumeAt` to simulated time (whole seconds, as Argo's
/// `metav1.Time` stores it).
fn to_simulated(mut m: Measurement, now: DateTime<Utc>) -> Measurement {
    if let Some(real) = m.resume_at {
        let after = (real - m.started_at).num_milliseconds();
        let secs = (after + 500).div_euclid(1000);
        m.resume_at = Some(now + chrono::Duration::seconds(secs));
    }
    m
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The one sentence saying how and when the run ended and why.
pub(super) fn summary(o: &Outcome) -> String {
    let phase = o.sim.phase();
    let at = o.ended_at.format("%Y-%m-%d %H:%M:%S UTC");
    let elapsed = format_duration(Duration::from_secs(
        (o.ended_at - o.started_at)
            .num_seconds()
            .max(0)
            .unsigned_abs(),
    ));
    let decided = o
        .sim
        .metrics()
        .iter()
        .zip(o.sim.results())
        .filter(|(m, r)| !m.dry_run && r.phase == phase)
        .min_by_key(|(_, r)| r.completed_at);
    if phase != RunPhase::Successful {
        if let Some((m, r)) = decided {
            return format!(
                "{phase} at {at} ({elapsed} after the start): {}",
                why(m, r),
                phase = phase.as_str()
            );
        }
        return format!("{} at {at} ({elapsed} after the start)", phase.as_str());
    }
    if o.terminated_at_end {
        return format!(
            "Successful at {at} ({elapsed} after the start): no metric failed before the window ended, so the run was terminated Successful as Argo ends a background analysis"
        );
    }
    format!("Successful at {at} ({elapsed} after the start): every metric completed without breaking a limit")
}

/// Why one metric reached its verdict, in words.
fn why(m: &crate::engine::run::RunMetric, r: &crate::engine::run::MetricResult) -> String {
    let limits = m.limits;
    match failure_inconclusive_or_error(m, r) {
        Some((RunPhase::Failed, _)) => times(&m.name, "failed", r.failed, "failureLimit", limits.failure_limit),
        Some((RunPhase::Inconclusive, _)) => times(&m.name, "was inconclusive", r.inconclusive, "inconclusiveLimit", limits.inconclusive_limit),
        Some((_, _)) => format!(
            "{} had {} errors in a row, consecutiveErrorLimit {} (last: {})",
            m.name,
            r.consecutive_error,
            limits
                .consecutive_error_limit
                .unwrap_or(crate::engine::run::DEFAULT_CONSECUTIVE_ERROR_LIMIT),
            r.measurements.last().map(|x| x.message.as_str()).unwrap_or("")
        ),
        None => format!(
            "{} took its {} measurements without {} consecutive successes (consecutiveSuccessLimit)",
            m.name,
            r.count,
            limits.consecutive_success_limit.unwrap_or(0)
        ),
    }
}

/// `error-rate failed 3 times, failureLimit 2`.
fn times(name: &str, what: &str, n: i64, limit_name: &str, limit: Option<i64>) -> String {
    let s = if n == 1 { "" } else { "s" };
    format!(
        "{name} {what} {n} time{s}, {limit_name} {}",
        limit.unwrap_or(0)
    )
}

fn print_table(o: &Outcome) {
    let mut lines = vec![vec![
        "TIME".to_string(),
        "METRIC".into(),
        "PHASE".into(),
        "VALUE".into(),
        "MESSAGE".into(),
    ]];
    for e in &o.timeline {
        let dry = o
            .sim
            .metrics()
            .iter()
            .any(|m| m.name == e.metric && m.dry_run);
        lines.push(vec![
            e.time.format("%Y-%m-%d %H:%M:%S").to_string(),
            if dry {
                format!("{} (dryRun)", e.metric)
            } else {
                e.metric.clone()
            },
            e.measurement.phase.to_string(),
            shorten(&e.measurement.value, 40),
            e.measurement.message.clone(),
        ]);
    }
    print_columns(&lines);
    for (name, provider) in &o.skipped {
        outln!("skipped: {name} (provider {provider} is not one rollgate can evaluate)");
    }
    outln!();
    outln!("{}", summary(o));
}

/// `-o json`'s document. Every object's keys are in byte order, as in the measurement values
/// (field order here, `json!` maps elsewhere): a script diffing two runs sees stable text.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonDocument<'a> {
    ended_at: String,
    from: String,
    message: &'a str,
    metrics: Vec<serde_json::Value>,
    phase: &'a str,
    queries: serde_json::Value,
    skipped: Vec<serde_json::Value>,
    summary: String,
    terminated_at_window_end: bool,
    timeline: Vec<JsonLine<'a>>,
    to: String,
}

/// One `timeline[]` entry of `-o json` (keys in byte order, as the document's).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonLine<'a> {
    message: &'a str,
    metric: &'a str,
    phase: &'a str,
    resume_at: Option<String>,
    time: String,
    value: &'a str,
}

fn print_json(o: &Outcome, args: &Window, backend: &Backend) {
    let metrics = o
        .sim
        .metrics()
        .iter()
        .zip(o.sim.results())
        .map(|(m, r)| {
            json!({
                "name": m.name,
                "phase": r.phase.as_str(),
                "dryRun": m.dry_run,
                "count": r.count,
                "successful": r.successful,
                "failed": r.failed,
                "inconclusive": r.inconclusive,
                "error": r.error,
                "consecutiveError": r.consecutive_error,
                "consecutiveSuccess": r.consecutive_success,
                "reason": r.reason,
                "completedAt": r.completed_at.map(rfc3339),
            })
        })
        .collect();
    let timeline = o
        .timeline
        .iter()
        .map(|e| JsonLine {
            message: &e.measurement.message,
            metric: &e.metric,
            phase: e.measurement.phase.as_str(),
            resume_at: e.measurement.resume_at.map(rfc3339),
            time: rfc3339(e.time),
            value: &e.measurement.value,
        })
        .collect();
    let skipped = o
        .skipped
        .iter()
        .map(|(name, provider)| json!({"name": name, "provider": provider, "phase": "Skipped"}))
        .collect();
    let queries = match backend {
        Backend::Cached(cache) => {
            let s = cache.stats();
            json!({"servedFromRange": s.served, "passedThrough": s.passed_through, "rangeFetches": s.range_fetches})
        }
        _ => json!({"batched": false}),
    };
    let document = JsonDocument {
        ended_at: rfc3339(o.ended_at),
        from: rfc3339(args.from),
        message: o.sim.message(),
        metrics,
        phase: o.sim.phase().as_str(),
        queries,
        skipped,
        summary: summary(o),
        terminated_at_window_end: o.terminated_at_end,
        timeline,
        to: rfc3339(args.to),
    };
    // Streamed through a buffer, not built as one string: a week at 1m is 20,000 lines (10 MB),
    // written 64 KiB at a time rather than in 1,200 writes of the default 8 KiB.
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    if serde_json::to_writer_pretty(&mut out, &document).is_ok() {
        let _ = writeln!(out);
    }
    let _ = out.flush();
}
