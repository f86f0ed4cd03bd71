//! Open-ended `compare` runs (no `count`) of the ratio and histogram forms: the e-detectors of
//! [`crate::stats::EDetector`] and [`crate::stats::HistogramDetector`] over each interval's own
//! counts (ratio) or bucket counts (histogram).
//!
//! The counts of each interval ("cell") come from the metric's own queries with their window
//! set to the interval: `[[run.elapsed]]`, or the one range the queries use, becomes the
//! interval in seconds, and a range query with that step returns one count per cell. Cells are
//! aligned to multiples of the interval since the Unix epoch and start at the first whole cell
//! after the run's start, so the evidence is a function of the data and the run's start only —
//! not of which check this is, which process answers, or whether it restarted. Each process
//! keeps the detector of each run it serves and reads only the cells that closed since its last
//! call; a process that has not seen the run (a restart, another replica) reads them all again
//! (up to [`MAX_CELLS_READ`]).

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, TimeZone, Utc};

use crate::measurement::Phase;
use crate::prometheus::{QueryData, QueryRequest};
use crate::spec::CompareSpec;
use crate::stats::{Buckets, EDetector, HistogramDetector, RatioInput, Tolerance, Verdict};

use super::{insufficient, Ctx, Engine, Outcome};
use crate::spec::run_clock::cell_query;

/// At most this many cells are read in one call (Prometheus refuses range queries of more than
/// 11,000 points); older ones are skipped, which only leaves out possible starts.
pub(crate) const MAX_CELLS_READ: i64 = 10_000;

/// Most runs whose detectors are kept; beyond it the least recently used half is forgotten.
const MAX_DETECTORS: usize = 10_000;

#[derive(Debug, Clone)]
struct Entry {
    /// The metric's queries with their window set to the interval.
    cells_q: Arc<[String]>,
    detector: Detector,
    /// End (Unix seconds) of the next cell to read.
    next_end: i64,
    /// Cells fetched at once (a backtest reads ahead), end and contents; those from `unread` on
    /// had not closed at the checks so far. Shared, not copied: every check clones its entry,
    /// and a copy of hundreds of cells per check was most of a backtest's own time.
    ahead: Arc<[(i64, Cell)]>,
    /// The first cell of `ahead` not yet pushed to the detector.
    unread: usize,
    used: i64,
}

/// The detector of one run, by form.
#[derive(Debug, Clone)]
enum Detector {
    Ratio(EDetector),
    Histogram(HistogramDetector),
}

/// One interval's data, by form.
#[derive(Debug, Clone)]
enum Cell {
    /// Canary bad, total, stable bad, total.
    Counts([u64; 4]),
    /// Both sides' buckets; `Ok(None)` when a side has no data in the interval, `Err` when a
    /// side's answer is not a histogram (the message names it).
    Buckets(Result<Option<Box<(Buckets, Buckets)>>, String>),
}

/// What an open-ended metric compares: its form's keys that the detector needs.
#[derive(Debug, Clone, Copy)]
pub(super) enum OpenForm {
    /// Counts of bad and all events; `margin`.
    Ratio { margin: f64 },
    /// Bucket vectors; the threshold test's bound and `margin`.
    Histogram { threshold: Option<f64>, margin: f64 },
}

/// A check of the past reads this many cells past its own, for the checks after it (a backtest
/// says how far its window goes instead, [`super::EvalOptions::replay_until`]): one range query
/// per side per half a day at 1m instead of four queries per check. Only cells that have closed
/// by a check's time are ever judged at it.
const READ_AHEAD_CELLS: i64 = 720;

/// The detectors of the open-ended runs this process serves.
#[derive(Debug, Default)]
pub(crate) struct Detectors {
    entries: Mutex<HashMap<u64, Entry>>,
    hasher: RandomState,
}

impl Detectors {
    fn get(&self, key: u64) -> Option<Entry> {
        let entries = match self.entries.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        entries.get(&key).cloned()
    }

    fn put(&self, key: u64, entry: Entry) {
        let mut entries = match self.entries.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if !entries.contains_key(&key) && entries.len() >= MAX_DETECTORS {
            let mut used: Vec<i64> = entries.values().map(|e| e.used).collect();
            used.sort_unstable();
            let median = used.get(used.len() / 2).copied().unwrap_or(i64::MAX);
            entries.retain(|_, e| e.used > median);
        }
        entries.insert(key, entry);
    }
}

fn ceil_div(a: i64, b: i64) -> i64 {
    a.div_euclid(b) + i64::from(a.rem_euclid(b) != 0)
}

/// Per cell end (Unix seconds), the query's numbers summed over its series.
fn per_cell(data: &QueryData) -> HashMap<i64, f64> {
    let mut sums = HashMap::new();
    let mut add = |t: f64, v: f64| {
        if v.is_finite() {
            #[allow(clippy::cast_possible_truncation)]
            let t = t.round() as i64;
            *sums.entry(t).or_insert(0.0) += v;
        }
    };
    match data {
        QueryData::Scalar(s) => add(s.timestamp, s.value),
        QueryData::Vector(series) => {
            for s in series {
                add(s.sample.timestamp, s.sample.value);
            }
        }
        QueryData::Matrix(series) => {
            for s in series {
                for p in &s.samples {
                    add(p.timestamp, p.value);
                }
            }
        }
    }
    sums
}

/// Per cell end (Unix seconds), the `(le, value)` pairs of a bucket query's series.
fn per_cell_le(data: &QueryData) -> HashMap<i64, Vec<(Option<String>, f64)>> {
    let mut cells: HashMap<i64, Vec<(Option<String>, f64)>> = HashMap::new();
    let mut add = |le: Option<&str>, t: f64, v: f64| {
        #[allow(clippy::cast_possible_truncation)]
        let t = t.round() as i64;
        cells
            .entry(t)
            .or_default()
            .push((le.map(str::to_string), v));
    };
    match data {
        QueryData::Scalar(_) => {}
        QueryData::Vector(series) => {
            for s in series {
                add(s.labels.get("le"), s.sample.timestamp, s.sample.value);
            }
        }
        QueryData::Matrix(series) => {
            for s in series {
                for p in &s.samples {
                    add(s.labels.get("le"), p.timestamp, p.value);
                }
            }
        }
    }
    cells
}

/// One side's buckets of one cell: `Ok(None)` without data (no series or a NaN).
fn cell_buckets(
    side: &'static str,
    pairs: Option<&Vec<(Option<String>, f64)>>,
) -> Result<Option<Buckets>, String> {
    let Some(pairs) = pairs.filter(|p| !p.is_empty() && p.iter().all(|(_, v)| !v.is_nan())) else {
        return Ok(None);
    };
    let series: Vec<(Option<&str>, f64)> =
        pairs.iter().map(|(le, v)| (le.as_deref(), *v)).collect();
    Buckets::from_cumulative(side, &series)
        .map(Some)
        .map_err(|e| format!("compare.histogram.{side}: {e}"))
}

impl Engine {
    /// The cells ending at `from`, `from + g`, ..., `to`, by range queries: four count queries
    /// (ratio form) or two bucket queries (histogram form).
    async fn read_cells(
        &self,
        cx: &Ctx<'_>,
        cells_q: &[String],
        from: i64,
        to: i64,
        g: i64,
    ) -> Result<Vec<(i64, Cell)>, String> {
        if let [canary, stable] = cells_q {
            return self
                .read_bucket_cells(cx, [canary, stable], from, to, g)
                .await;
        }
        let counts = self.read_count_cells(cx, cells_q, from, to, g).await?;
        Ok(counts
            .into_iter()
            .map(|(t, c)| (t, Cell::Counts(c)))
            .collect())
    }

    /// The histogram form's cells: both sides' `le` vectors per interval.
    async fn read_bucket_cells(
        &self,
        cx: &Ctx<'_>,
        cells_q: [&String; 2],
        from: i64,
        to: i64,
        g: i64,
    ) -> Result<Vec<(i64, Cell)>, String> {
        let (opts, config) = (cx.opts, cx.config);
        let asks = cell_ranges(cells_q, from, to, g)?;
        let (c, s) = futures::join!(
            self.query(config, &asks[0], opts.deadline),
            self.query(config, &asks[1], opts.deadline),
        );
        let c = per_cell_le(
            &c.map_err(|e| format!("compare.histogram.canary failed: {e}"))?
                .data,
        );
        let s = per_cell_le(
            &s.map_err(|e| format!("compare.histogram.stable failed: {e}"))?
                .data,
        );
        let mut cells = Vec::new();
        let mut t = from;
        while t <= to {
            let cell = match (
                cell_buckets("canary", c.get(&t)),
                cell_buckets("stable", s.get(&t)),
            ) {
                (Err(e), _) | (_, Err(e)) => Err(e),
                (Ok(Some(cb)), Ok(Some(sb))) => Ok(Some(Box::new((cb, sb)))),
                _ => Ok(None),
            };
            cells.push((t, Cell::Buckets(cell)));
            t += g;
        }
        Ok(cells)
    }

    /// The counts of the cells ending at `from`, `from + g`, ..., `to`, by range queries.
    async fn read_count_cells(
        &self,
        cx: &Ctx<'_>,
        cells_q: &[String],
        from: i64,
        to: i64,
        g: i64,
    ) -> Result<Vec<(i64, [u64; 4])>, String> {
        let (opts, config) = (cx.opts, cx.config);
        let asks = cell_ranges(cells_q, from, to, g)?;
        let (cb, ct, sb, st) = futures::join!(
            self.query(config, &asks[0], opts.deadline),
            self.query(config, &asks[1], opts.deadline),
            self.query(config, &asks[2], opts.deadline),
            self.query(config, &asks[3], opts.deadline),
        );
        let mut sums = Vec::with_capacity(4);
        for (what, r) in [
            ("canary.bad", cb),
            ("canary.total", ct),
            ("stable.bad", sb),
            ("stable.total", st),
        ] {
            match r {
                Err(e) => return Err(format!("compare.{what} failed: {e}")),
                Ok(resp) => sums.push(per_cell(&resp.data)),
            }
        }
        let mut cells = Vec::new();
        let mut t = from;
        while t <= to {
            let n = |i: usize| super::compare::count(sums[i].get(&t).copied().unwrap_or(0.0));
            cells.push((t, [n(0), n(1), n(2), n(3)]));
            t += g;
        }
        Ok(cells)
    }

    /// The open-ended check (ratio or histogram form, `queries` in the order the form writes
    /// them), or `Err(out)` when this metric is not one (it has a `count`, no interval, no run
    /// start, or queries whose window cannot be set to the interval): then the caller's
    /// fixed-count design applies.
    pub(super) async fn measure_open_ended(
        &self,
        out: Outcome,
        cx: &Ctx<'_>,
        spec: &CompareSpec,
        queries: &[&str],
        form: OpenForm,
        min_requests: u64,
    ) -> Result<Outcome, Outcome> {
        let (metric, opts) = (cx.metric, cx.opts);
        let g = metric
            .interval
            .and_then(|i| i64::try_from(i.as_secs()).ok())
            .filter(|g| *g > 0);
        let (Some(start), Some(g), None | Some(0)) = (opts.run_started_at, g, metric.count) else {
            return Err(out);
        };
        self.open_ended(out, cx, spec, queries, form, min_requests, start, g)
            .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn open_ended(
        &self,
        mut out: Outcome,
        cx: &Ctx<'_>,
        spec: &CompareSpec,
        queries: &[&str],
        form: OpenForm,
        min_requests: u64,
        start: DateTime<Utc>,
        g: i64,
    ) -> Result<Outcome, Outcome> {
        let (metric, opts) = (cx.metric, cx.opts);
        let config = match cx.config.prometheus() {
            Ok(config) => config,
            Err(_) if cell_queries(queries, g).is_none() => return Err(out),
            Err(message) => return Ok(Outcome::new().error(message)),
        };
        let now = opts.at.unwrap_or(cx.started_at);
        let (margin, threshold) = match form {
            OpenForm::Ratio { margin } => (margin, None),
            OpenForm::Histogram { threshold, margin } => (margin, threshold),
        };
        let key = self.detectors.hasher.hash_one((
            &metric.name,
            start.timestamp_millis(),
            // The cell queries are a function of these two, worked out once per run (below).
            queries,
            g,
            spec.confidence.to_bits(),
            spec.max_increase.to_bits(),
            margin.to_bits(),
            threshold.map(f64::to_bits),
            &config.address,
            &config.headers,
        ));
        let new_detector = || match form {
            OpenForm::Ratio { margin } => EDetector::new(
                Tolerance {
                    max_increase: spec.max_increase,
                    margin,
                },
                spec.confidence,
            )
            .map(Detector::Ratio),
            OpenForm::Histogram { threshold, margin } => {
                HistogramDetector::new(spec.max_increase, margin, threshold, spec.confidence)
                    .map(Detector::Histogram)
            }
        };
        let mut entry = match self.detectors.get(key) {
            Some(e) => e,
            None => match (cell_queries(queries, g), new_detector()) {
                (None, _) => return Err(out),
                (Some(_), Err(e)) => return Ok(out.error(format!("compare: {e}"))),
                (Some(cells_q), Ok(detector)) => Entry {
                    cells_q: cells_q.into(),
                    detector,
                    next_end: ceil_div(start.timestamp(), g)
                        .saturating_add(1)
                        .saturating_mul(g),
                    ahead: Arc::new([]),
                    unread: 0,
                    used: 0,
                },
            },
        };
        // Live, a cell that closed a moment ago may still miss its last scrape, and a cell is
        // read once: wait half an interval (at most 30 s) before reading it. A check of the past
        // (`at`) reads data that is complete.
        let settle = if opts.at.is_some() {
            0
        } else {
            (g / 2).min(30)
        };
        let last_end = (now.timestamp() - settle).div_euclid(g).saturating_mul(g);
        let unread = entry.ahead.get(entry.unread..).unwrap_or_default();
        let fetched_to = unread.last().map_or(entry.next_end - g, |c| c.0);
        if fetched_to < last_end {
            entry.ahead = Arc::new([]);
            entry.unread = 0;
            let mut from = entry.next_end;
            let todo = (last_end - from) / g + 1;
            if todo > MAX_CELLS_READ {
                let skip = todo - MAX_CELLS_READ;
                let n = u64::try_from(skip).unwrap_or(0);
                match &mut entry.detector {
                    Detector::Ratio(d) => d.skip(n),
                    Detector::Histogram(d) => d.skip(n),
                }
                from += skip * g;
                entry.next_end = from;
            }
            // Cells that closed before the real clock's last interval are final in the server.
            let settled = Utc::now()
                .timestamp()
                .div_euclid(g)
                .saturating_sub(1)
                .saturating_mul(g);
            // A replay's window is known: reading it at once is a few range queries where half
            // a day at a time was dozens (each a round trip the replay waits for).
            let ahead = match opts.replay_until {
                Some(until) => until.timestamp().div_euclid(g).saturating_mul(g),
                None => last_end.saturating_add(READ_AHEAD_CELLS * g),
            };
            let to = last_end.max(settled.min(ahead));
            let to = to
                .min(from.saturating_add((MAX_CELLS_READ - 1) * g))
                .max(last_end);
            match self.read_cells(cx, &entry.cells_q, from, to, g).await {
                Ok(cells) => entry.ahead = cells.into(),
                Err(e) => return Ok(out.error(e)),
            }
        }
        while let Some((end, cell)) = entry
            .ahead
            .get(entry.unread)
            .filter(|(end, _)| *end <= last_end)
        {
            match (&mut entry.detector, cell) {
                (Detector::Ratio(d), Cell::Counts(c)) => d.push(RatioInput {
                    canary_bad: c[0].min(c[1]),
                    canary_total: c[1],
                    stable_bad: c[2].min(c[3]),
                    stable_total: c[3],
                }),
                (Detector::Histogram(d), Cell::Buckets(b)) => {
                    // A cell that is not a histogram is an Error, and this check's state is not
                    // kept: the next check reads the cell again rather than judging around it.
                    let pushed = match b {
                        Ok(b) => d
                            .push(b.as_deref().map(|(c, s)| (c, s)))
                            .map_err(|e| histogram_error(&e)),
                        Err(e) => Err(e.clone()),
                    };
                    if let Err(e) = pushed {
                        return Ok(out.error(e));
                    }
                }
                _ => return Ok(out.error("compare: the open-ended detector's form changed".into())),
            }
            entry.next_end = end + g;
            entry.unread += 1;
        }
        entry.used = now.timestamp();
        let mut o = match &entry.detector {
            Detector::Ratio(d) => d.outcome(),
            Detector::Histogram(d) => d.outcome(),
        };
        o.elapsed = Some(crate::spec::run_clock::elapsed_duration(start, now));
        self.detectors.put(key, entry);
        if !opts.skip_metadata {
            out.metadata.insert(
                "check".into(),
                format!("{} intervals since the run began (open-ended run)", o.cells),
            );
            out.metadata.insert(
                "check.from".into(),
                "the run's start and the data (anytime-valid e-detector)".into(),
            );
        }
        if o.cells == 0 {
            // Not a lack of traffic but of time: the first whole interval has not closed yet.
            // An Inconclusive here would end an Argo run at its first check (the default
            // `inconclusiveLimit` is 0), so ask again once that interval can be read.
            let first_end = ceil_div(start.timestamp(), g)
                .saturating_add(1)
                .saturating_mul(g)
                .saturating_add(settle);
            // `resumeAt` is on the real clock, as the wait of `onInsufficient` writes it (a
            // backtest maps it back to its own): the wait from the evaluation time.
            let wait = chrono::Duration::seconds((first_end - now.timestamp()).max(1));
            out.resume_at = Some(cx.started_at + wait);
            let when = (now + wait).format("%H:%M:%S UTC");
            return Ok(out.finish(
                Phase::Running,
                format!(
                    "no whole interval since the run began yet; the first closes (and is read) at {when}, asking again then"
                ),
            ));
        }
        let (c, s) = (o.total.canary_total, o.total.stable_total);
        if o.verdict != Verdict::Worse && c.min(s) < min_requests {
            let why = format!(
                "{} canary and {} stable requests seen since the run began, {} needed on each side",
                super::result::format_count(c as f64),
                super::result::format_count(s as f64),
                super::result::format_count(min_requests as f64)
            );
            return Ok(insufficient(out, spec.on_insufficient, &why, cx));
        }
        let message = match form {
            OpenForm::Ratio { .. } => o.message("error rate"),
            OpenForm::Histogram { .. } => {
                o.message("of requests slow (the bounds are chosen from the second interval on)")
            }
        };
        Ok(super::compare::judge_detector(out, metric, &o, message))
    }
}

/// The message of a histogram cell the detector refuses, as the fixed-count form words it.
fn histogram_error(e: &crate::stats::HistogramError) -> String {
    match e {
        crate::stats::HistogramError::Threshold { threshold, bounds } => format!(
            "compare.threshold: {threshold} is not a bucket bound (le) of the histogram; bounds: {bounds}"
        ),
        e => format!("compare.histogram: {e}"),
    }
}

/// Every query with its window set to the interval `g` ([`cell_query`]), or `None` when one
/// cannot be.
fn cell_queries(queries: &[&str], g: i64) -> Option<Vec<String>> {
    queries.iter().map(|q| cell_query(q, g)).collect()
}

/// One range query per cell query, with a step of the interval `g`, for the cells ending at
/// `from`, `from + g`, ..., `to` (Unix seconds).
fn cell_ranges<Q: AsRef<str>>(
    cells_q: impl IntoIterator<Item = Q>,
    from: i64,
    to: i64,
    g: i64,
) -> Result<Vec<QueryRequest>, String> {
    let (Some(start), Some(end)) = (
        Utc.timestamp_opt(from, 0).single(),
        Utc.timestamp_opt(to, 0).single(),
    ) else {
        return Err("compare: the run's clock is out of range".to_string());
    };
    let step = std::time::Duration::from_secs(u64::try_from(g).unwrap_or(1));
    Ok(cells_q
        .into_iter()
        .map(|q| QueryRequest::Range {
            query: q.as_ref().to_string(),
            start,
            end,
            step,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceil_div_rounds_up() {
        assert_eq!(ceil_div(120, 60), 2);
        assert_eq!(ceil_div(121, 60), 3);
        assert_eq!(ceil_div(-1, 60), 0);
    }
}
