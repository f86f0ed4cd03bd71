//! `backtest --releases FILE [--set METRIC.KEY=V1,V2]...`: replay past releases and score the
//! template (and alternatives) with a confusion table.
//!
//! ```yaml
//! releases:
//!   - name: v1.4.2
//!     start: 2026-11-29T19:00:00Z
//!     duration: 4h            # or end: RFC 3339
//!     args: {service: bad}
//!     outcome: bad            # good | bad: what the release turned out to be
//! ```

use super::stdout::outln;
use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Utc};
use indicatif::ProgressBar;
use serde_json::{json, Value};

use crate::engine::run::RunPhase;
use crate::engine::Engine;
use crate::spec::reader::{invalid, ObjectReader};
use crate::spec::Template;

use super::backtest::{
    batching, prepare, runtime, simulate, summary, BacktestArgs, Outcome, Prepared, Window,
};
use super::dry_run::{address_policy, open_backend, save_recording, OutputFormat};
use super::exit;
use super::output::print_columns;

/// One past release.
struct Release {
    name: String,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    args: Vec<(String, String)>,
    bad: bool,
}

/// Reads the releases file; a bad entry is named with its key.
fn read_releases(path: &Path) -> Result<Vec<Release>, String> {
    let source = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {source}: {e}"))?;
    let doc: Value = serde_yaml_ng::from_str(&text).map_err(|e| format!("{source}: {e}"))?;
    let err = |e: crate::spec::SpecError| format!("{source}: {e}");
    let mut top = ObjectReader::new("", &doc).map_err(err)?;
    let Some(Value::Array(items)) = top.get("releases") else {
        return Err(format!("{source}: releases: expected a list of releases"));
    };
    top.finish().map_err(err)?;
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let mut r = ObjectReader::new(&format!("releases[{i}]"), item).map_err(err)?;
        let name = r
            .required_string("name", "the release's name")
            .map_err(err)?;
        let start_key = r.path_of("start");
        let start = r
            .required_string("start", "an RFC 3339 time")
            .map_err(err)?;
        let from = parse_time(&start).ok_or_else(|| {
            err(invalid(
                &start_key,
                "an RFC 3339 time like 2026-11-29T12:00:00Z",
                &Value::String(start),
            ))
        })?;
        let end_key = r.path_of("end");
        let end = r.string("end").map_err(err)?;
        let duration = r.duration("duration").map_err(err)?;
        let to = match (end, duration) {
            (Some(end), None) => parse_time(&end)
                .ok_or_else(|| err(invalid(&end_key, "an RFC 3339 time", &Value::String(end))))?,
            (None, Some(d)) => {
                from + chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
            }
            _ => {
                return Err(format!(
                    "{source}: releases[{i}]: give exactly one of end or duration"
                ))
            }
        };
        if to <= from {
            return Err(format!(
                "{source}: {end_key}: the release must end after its start"
            ));
        }
        let args = r.string_map("args").map_err(err)?;
        let outcome_key = r.path_of("outcome");
        let bad = match r
            .required_string("outcome", "good or bad")
            .map_err(err)?
            .as_str()
        {
            "bad" => true,
            "good" => false,
            other => {
                return Err(err(invalid(
                    &outcome_key,
                    "good or bad",
                    &Value::String(other.into()),
                )))
            }
        };
        r.finish().map_err(err)?;
        out.push(Release {
            name,
            from,
            to,
            args,
            bad,
        });
    }
    if out.is_empty() {
        return Err(format!("{source}: releases: the list is empty"));
    }
    Ok(out)
}

fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// The alternatives: the template as written, then one per `--set` value.
fn alternatives(
    templates: &[Template],
    sets: &[String],
) -> Result<Vec<(String, Vec<Template>)>, String> {
    let mut out = vec![("as written".to_string(), templates.to_vec())];
    for set in sets {
        let (key, values) = set
            .split_once('=')
            .ok_or_else(|| format!("--set {set:?}: expected METRIC.KEY=V1,V2"))?;
        let (metric, path) = key
            .split_once('.')
            .ok_or_else(|| format!("--set {set:?}: expected METRIC.KEY=V1,V2"))?;
        for value in values.split(',') {
            let mut changed = Vec::new();
            let mut found = false;
            for t in templates {
                match t.with_setting(metric, path, value.trim()) {
                    Ok(t) => {
                        found = true;
                        changed.push(t);
                    }
                    Err(_) => changed.push(t.clone()),
                }
            }
            if !found {
                return Err(format!(
                    "--set {set:?}: no metric named {metric:?} in the templates"
                ));
            }
            out.push((format!("{key}={}", value.trim()), changed));
        }
    }
    Ok(out)
}

/// One release replayed under one alternative.
struct Scored {
    alternative: usize,
    release: usize,
    outcome: Outcome,
}

/// Runs every release under every alternative and prints the confusion table.
pub(super) fn run(args: &BacktestArgs, file: &Path) -> Result<u8, String> {
    let releases = read_releases(file)?;
    let text = std::fs::read_to_string(&args.file)
        .map_err(|e| format!("cannot read {}: {e}", args.file.display()))?;
    let source = args.file.display().to_string();
    let templates = Template::parse_all(&text, &source).map_err(|e| format!("{source}: {e}"))?;
    let alts = alternatives(&templates, &args.set)?;

    // Everything is prepared (and every window checked) before the first query.
    let mut plans: Vec<(Window, Vec<Prepared>)> = Vec::new();
    for release in &releases {
        let window = Window::new(release.from, release.to, args)
            .map_err(|e| format!("release {}: {e}", release.name))?;
        let mut prepared = Vec::new();
        for (label, ts) in &alts {
            let mut work = Vec::new();
            let mut release_args = args.args.clone();
            release_args.extend(release.args.iter().cloned());
            crate::spec::check_declared(
                ts.iter().flat_map(|t| t.args.keys().map(String::as_str)),
                release_args.iter().map(|(k, _)| k.as_str()),
            )
            .map_err(|e| format!("release {}: {source}: {e}", release.name))?;
            for t in ts {
                let metrics = t
                    .metrics(&release_args)
                    .map_err(|e| format!("release {} ({label}): {source}: {e}", release.name))?;
                work.extend(metrics.into_iter().map(|m| (t.name.clone(), m)));
            }
            let p = prepare(ts, work)?;
            window
                .check_plan(&p.run_metrics)
                .map_err(|e| format!("release {}: {e}", release.name))?;
            prepared.push(p);
        }
        plans.push((window, prepared));
    }

    let base = open_backend(args.source.replay.as_deref(), args.source.record.is_some())?;
    let addresses = address_policy(args.source.prometheus.as_deref())?;
    let rt = runtime()?;
    let mut scored = Vec::new();
    let mut record_from = None;
    for (r, (window, prepared)) in plans.iter().enumerate() {
        // One cache per release, shared by its alternatives: their data is fetched once.
        let runs: Vec<&[crate::engine::run::RunMetric]> =
            prepared.iter().map(|p| p.run_metrics.as_slice()).collect();
        let engine = Engine::new(
            batching(base.clone(), args, &runs, window),
            addresses.clone(),
        );
        for (a, p) in prepared.iter().enumerate() {
            let outcome = rt.block_on(simulate(&engine, p, window, &ProgressBar::hidden()))?;
            scored.push(Scored {
                alternative: a,
                release: r,
                outcome,
            });
        }
        record_from = Some(base.clone());
    }
    if let Some(b) = record_from {
        save_recording(args.source.record.as_deref(), &b)?;
    }
    match args.source.output {
        OutputFormat::Table => print_table(&releases, &alts, &scored),
        OutputFormat::Json => print_json(&releases, &alts, &scored),
    }
    Ok(exit::SUCCESSFUL)
}

/// The counts of one row of the confusion table.
#[derive(Default)]
struct Tally {
    bad: u32,
    caught: u32,
    catch_times: Vec<Duration>,
    good: u32,
    good_stopped: u32,
    inconclusive: u32,
    error: u32,
}

impl Tally {
    fn add(&mut self, bad: bool, phase: RunPhase, took: Duration) {
        match phase {
            RunPhase::Inconclusive => self.inconclusive += 1,
            RunPhase::Error => self.error += 1,
            _ => {}
        }
        if bad {
            self.bad += 1;
            if phase == RunPhase::Failed {
                self.caught += 1;
                self.catch_times.push(took);
            }
        } else {
            self.good += 1;
            if phase != RunPhase::Successful {
                self.good_stopped += 1;
            }
        }
    }

    fn cells(&self) -> Vec<String> {
        let mut times = self.catch_times.clone();
        times.sort();
        let fmt = |d: Option<&Duration>| {
            d.map_or("-".to_string(), |d| {
                crate::spec::duration::format_duration(*d)
            })
        };
        vec![
            format!("{}/{}", self.caught, self.bad),
            format!(
                "{} / {}",
                fmt(times.get(times.len() / 2)),
                fmt(times.last())
            ),
            format!("{}/{}", self.good_stopped, self.good),
            self.inconclusive.to_string(),
            self.error.to_string(),
        ]
    }

    fn json(&self) -> Value {
        json!({
            "bad": self.bad, "badCaught": self.caught,
            "secondsToCatch": self.catch_times.iter().map(Duration::as_secs).collect::<Vec<_>>(),
            "good": self.good, "goodFailedOrAborted": self.good_stopped,
            "inconclusive": self.inconclusive, "error": self.error,
        })
    }
}

/// Rows `(alternative, scope, tally)`: the run, then each metric.
fn tallies(
    releases: &[Release],
    alts: &[(String, Vec<Template>)],
    scored: &[Scored],
) -> Vec<(String, String, Tally)> {
    let mut rows = Vec::new();
    for (a, (label, _)) in alts.iter().enumerate() {
        let mine: Vec<&Scored> = scored.iter().filter(|s| s.alternative == a).collect();
        let mut run = Tally::default();
        for s in &mine {
            let took = (s.outcome.ended_at - s.outcome.started_at)
                .to_std()
                .unwrap_or_default();
            run.add(releases[s.release].bad, s.outcome.sim.phase(), took);
        }
        rows.push((label.clone(), "run".to_string(), run));
        let names: Vec<String> = mine
            .first()
            .map(|s| {
                s.outcome
                    .sim
                    .metrics()
                    .iter()
                    .map(|m| m.name.clone())
                    .collect()
            })
            .unwrap_or_default();
        for (i, name) in names.iter().enumerate() {
            let mut t = Tally::default();
            for s in &mine {
                let Some(r) = s.outcome.sim.results().get(i) else {
                    continue;
                };
                // A metric still running when the run ended did not object: it passed.
                let phase = if r.phase.completed() {
                    r.phase
                } else {
                    RunPhase::Successful
                };
                let at = r.completed_at.unwrap_or(s.outcome.ended_at);
                t.add(
                    releases[s.release].bad,
                    phase,
                    (at - s.outcome.started_at).to_std().unwrap_or_default(),
                );
            }
            rows.push((label.clone(), name.clone(), t));
        }
    }
    rows
}

fn print_table(releases: &[Release], alts: &[(String, Vec<Template>)], scored: &[Scored]) {
    let mut lines = vec![vec![
        "RELEASE".to_string(),
        "OUTCOME".into(),
        "ALTERNATIVE".into(),
        "RUN".into(),
    ]];
    for s in scored {
        let r = &releases[s.release];
        lines.push(vec![
            r.name.clone(),
            if r.bad { "bad" } else { "good" }.into(),
            alts[s.alternative].0.clone(),
            summary(&s.outcome),
        ]);
    }
    print_columns(&lines);
    outln!();
    let mut lines = vec![[
        "ALTERNATIVE",
        "SCOPE",
        "BAD CAUGHT",
        "TIME TO CATCH (median / max)",
        "GOOD FAILED/ABORTED",
        "INCONCLUSIVE",
        "ERROR",
    ]
    .map(String::from)
    .to_vec()];
    for (label, scope, t) in tallies(releases, alts, scored) {
        let mut row = vec![label, scope];
        row.extend(t.cells());
        lines.push(row);
    }
    print_columns(&lines);
}

fn print_json(releases: &[Release], alts: &[(String, Vec<Template>)], scored: &[Scored]) {
    let runs: Vec<Value> = scored
        .iter()
        .map(|s| {
            let r = &releases[s.release];
            json!({
                "release": r.name, "outcome": if r.bad { "bad" } else { "good" },
                "alternative": alts[s.alternative].0, "phase": s.outcome.sim.phase().as_str(),
                "endedAt": s.outcome.ended_at.to_rfc3339(), "summary": summary(&s.outcome),
            })
        })
        .collect();
    let table: Vec<Value> = tallies(releases, alts, scored)
        .into_iter()
        .map(|(label, scope, t)| json!({"alternative": label, "scope": scope, "counts": t.json()}))
        .collect();
    let doc = json!({"runs": runs, "confusion": table});
    outln!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
}
