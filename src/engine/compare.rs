//! The `compare` kind: canary versus stable over the same window, judged by the statistics in
//! [`crate::stats`]. The queries, the no-data and too-little-data rules are decided here; the
//! tests and the error spending over repeated checks are the statistics module's.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::condition::Value;
use crate::measurement::Phase;
use crate::prometheus::{PrometheusError, QueryData, QueryRequest, QueryResponse};
use crate::spec::{CompareForm, CompareSpec, Metric, RatioQueries};
use crate::stats::{self, Design, DistOptions, Look, RatioInput, RatioOptions, Verdict};

use super::no_data::{self, NoData};
use super::result::{format_count, numbers};
use super::{insufficient, Ctx, Engine, EvalOptions, Outcome};

impl Engine {
    /// Measures a `compare` metric.
    pub(super) async fn measure_compare(&self, cx: &Ctx<'_>, spec: &CompareSpec) -> Outcome {
        let (metric, no_data, config, opts, started_at) =
            (cx.metric, cx.no_data, cx.config, cx.opts, cx.started_at);
        let mut out = Outcome::new();
        let look = look(metric, opts, opts.at.unwrap_or(started_at), spec.design);
        if !opts.skip_metadata {
            describe(spec, &mut out.metadata);
            out.metadata.insert("check".into(), look_text(look));
            let basis = if opts.checks_done.is_some() {
                "the run's recorded measurements"
            } else if look == Look::single() {
                "a single check"
            } else {
                "wall time since the run began"
            };
            out.metadata.insert("check.from".into(), basis.into());
        }
        if let Some(e) = super::run_clock_missing(form_queries(&spec.form), opts) {
            return out.error(e);
        }
        match &spec.form {
            CompareForm::Ratio {
                canary,
                stable,
                margin,
                min_requests,
            } => {
                let queries = [
                    canary.bad.as_str(),
                    canary.total.as_str(),
                    stable.bad.as_str(),
                    stable.total.as_str(),
                ];
                let form = super::open_ended::OpenForm::Ratio { margin: *margin };
                let mut out = match self
                    .measure_open_ended(out, cx, spec, &queries, form, *min_requests)
                    .await
                {
                    Ok(done) => return done,
                    Err(out) => out,
                };
                let counts = self.ratio_counts(config, canary, stable, opts).await;
                let [cb, ct, sb, st] = match counts {
                    Err((what, e)) => return out.error(format!("compare.{what} failed: {e}")),
                    Ok((c, warnings)) => {
                        out.note_warning_texts(&warnings);
                        c
                    }
                };
                for (what, query, reading) in [
                    ("compare.canary.total", &canary.total, &ct),
                    ("compare.stable.total", &stable.total, &st),
                ] {
                    if let Err(why) = reading {
                        let (phase, message) = no_data::verdict(no_data, what, query, why);
                        out.metadata
                            .insert("noData".into(), format!("{what} {}", why.describe()));
                        return out.finish(phase, message);
                    }
                }
                let (ct, st) = (ct.unwrap_or(0.0), st.unwrap_or(0.0));
                // A bad-event counter with no series while the side has traffic means no bad events
                // happened (many exporters create the 5xx series only on the first 5xx); NaN is no data.
                let mut bad = [0.0; 2];
                for (i, (what, query, reading)) in [
                    ("compare.canary.bad", &canary.bad, &cb),
                    ("compare.stable.bad", &stable.bad, &sb),
                ]
                .into_iter()
                .enumerate()
                {
                    match reading {
                        Ok(v) => bad[i] = *v,
                        Err(NoData::Empty) => {
                            out.metadata
                                .insert(format!("{what}.empty"), "no series: counted as 0".into());
                        }
                        Err(why) => {
                            let (phase, message) = no_data::verdict(no_data, what, query, why);
                            return out.finish(phase, message);
                        }
                    }
                }
                let input = RatioInput {
                    canary_bad: count(bad[0]).min(count(ct)),
                    canary_total: count(ct),
                    stable_bad: count(bad[1]).min(count(st)),
                    stable_total: count(st),
                };
                let fewest = input.canary_total.min(input.stable_total);
                if fewest < *min_requests {
                    let why = format!(
                        "{} canary and {} stable requests seen, {} needed on each side",
                        format_count(input.canary_total as f64),
                        format_count(input.stable_total as f64),
                        format_count(*min_requests as f64)
                    );
                    return insufficient(out, spec.on_insufficient, &why, cx);
                }
                let options = RatioOptions {
                    max_increase: spec.max_increase,
                    margin: *margin,
                    confidence: spec.confidence,
                    // Already checked above; passed on so that the value states the real guard.
                    min_requests: *min_requests,
                    look,
                };
                let small = input.canary_total.max(input.stable_total) < INLINE_REQUESTS;
                match run_test(small, move || stats::compare_ratio(&input, &options)).await {
                    Err(e) => out.error(e),
                    Ok(Err(e)) => out.error(format!("compare: {e}")),
                    Ok(Ok(o)) => judge(out, metric, o.verdict, &o, o.message("error rate")),
                }
            }
            CompareForm::Distribution {
                canary,
                stable,
                window,
                step,
                direction,
                min_samples,
                correct_autocorrelation,
            } => {
                let end = opts.at.unwrap_or(started_at);
                let (c, s) = futures::join!(
                    self.samples(config, canary, end, *window, *step, opts),
                    self.samples(config, stable, end, *window, *step, opts),
                );
                let mut sides = Vec::with_capacity(2);
                for (what, query, result) in
                    [("compare.canary", canary, c), ("compare.stable", stable, s)]
                {
                    match result {
                        Err(e) => return out.error(format!("{what} failed: {e}")),
                        Ok((data, warnings)) => {
                            out.note_warning_texts(&warnings);
                            let values = numbers(&data);
                            if values.is_empty() {
                                let (phase, message) =
                                    no_data::verdict(no_data, what, query, &NoData::Empty);
                                return out.finish(phase, message);
                            }
                            sides.push(values);
                        }
                    }
                }
                let usable = |v: &[f64]| v.iter().filter(|x| !x.is_nan()).count();
                let (cn, sn) = (usable(&sides[0]), usable(&sides[1]));
                if cn.min(sn) < *min_samples {
                    let why = format!("{cn} canary and {sn} stable samples (NaN removed), {min_samples} needed on each side");
                    return insufficient(out, spec.on_insufficient, &why, cx);
                }
                let options = DistOptions {
                    direction: *direction,
                    max_increase: spec.max_increase,
                    confidence: spec.confidence,
                    min_samples: *min_samples,
                    look,
                    correct_autocorrelation: *correct_autocorrelation,
                };
                let (c, s) = (std::mem::take(&mut sides[0]), std::mem::take(&mut sides[1]));
                let small = c.len().max(s.len()) < INLINE_SAMPLES;
                match run_test(small, move || {
                    stats::compare_distributions(&c, &s, &options)
                })
                .await
                {
                    Err(e) => out.error(e),
                    Ok(Err(e)) => out.error(format!("compare: {e}")),
                    Ok(Ok(o)) => judge(out, metric, o.verdict, &o, o.message("value")),
                }
            }
            CompareForm::Histogram {
                canary,
                stable,
                threshold,
                margin,
                min_requests,
            } => {
                let form = super::compare_histogram::HistogramQueries {
                    canary,
                    stable,
                    threshold: *threshold,
                    margin: *margin,
                    min_requests: *min_requests,
                };
                self.measure_histogram(out, cx, spec, form, look).await
            }
        }
    }

    /// The four counts of the ratio form, queried concurrently, and the servers' warnings.
    /// `Err` names the failed query.
    async fn ratio_counts(
        &self,
        config: super::Target<'_>,
        canary: &RatioQueries,
        stable: &RatioQueries,
        opts: &EvalOptions,
    ) -> Result<([Result<f64, NoData>; 4], Vec<String>), (&'static str, PrometheusError)> {
        let (cb, ct, sb, st) = futures::join!(
            self.instant(config, &canary.bad, opts),
            self.instant(config, &canary.total, opts),
            self.instant(config, &stable.bad, opts),
            self.instant(config, &stable.total, opts)
        );
        let mut warnings = Vec::new();
        let mut read = |what: &'static str, r: Result<QueryResponse, PrometheusError>| {
            let resp = r.map_err(|e| (what, e))?;
            warnings.extend(resp.warnings);
            Ok(single_number(&resp.data))
        };
        let counts = [
            read("canary.bad", cb)?,
            read("canary.total", ct)?,
            read("stable.bad", sb)?,
            read("stable.total", st)?,
        ];
        Ok((counts, warnings))
    }

    /// The samples of one side: a range query over `window` ending at `end`.
    async fn samples(
        &self,
        config: super::Target<'_>,
        query: &str,
        end: DateTime<Utc>,
        window: Duration,
        step: Duration,
        opts: &EvalOptions,
    ) -> Result<(QueryData, Vec<String>), PrometheusError> {
        let start = end - chrono::Duration::from_std(window).unwrap_or(chrono::Duration::zero());
        let request = QueryRequest::Range {
            query: super::run_clocked(query, opts),
            start,
            end,
            step,
        };
        let response = self.query(config, &request, opts.deadline).await?;
        Ok((response.data, response.warnings))
    }
}

/// Below this many requests on the larger side the ratio test runs on the async worker: it
/// takes 9–68 µs at 10,000 a side (0.07–0.7 ms at a million), the order of a hand-over to
/// another thread (about 30 µs of CPU each, below).
pub(super) const INLINE_REQUESTS: u64 = 20_000;

/// Below this many samples on the larger side the distribution test runs on the async worker
/// (about 20 µs at 30 a side, 0.2 ms at 300).
const INLINE_SAMPLES: usize = 100;

/// Runs a statistics test: inline when `small`, otherwise on tokio's blocking pool. The tests'
/// cost grows with their input — sorting samples, the ratio test's supremum over both binomial
/// supports (0.25–0.43 s at a hundred billion requests a side) — and an async worker held that
/// long stalls every request it serves meanwhile; a small one costs less than the hand-over
/// (`cargo bench --bench backtest`: its 10,080 ratio checks took 0.76 s of CPU with every test
/// handed over, 0.44 s inline). `Err` is the message for a test task that panicked or was
/// cancelled.
pub(super) async fn run_test<T: Send + 'static>(
    small: bool,
    test: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    if small {
        return Ok(test());
    }
    tokio::task::spawn_blocking(test)
        .await
        .map_err(|e| format!("compare: the statistics task failed: {e}"))
}

/// A count query's one number; several series are summed (each side's counts are totals).
fn single_number(data: &QueryData) -> Result<f64, NoData> {
    if let Some(why) = no_data::detect(data) {
        return Err(why);
    }
    Ok(numbers(data).iter().sum())
}

// A float-to-int `as` saturates: a finite positive count above u64::MAX becomes u64::MAX.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
pub(super) fn count(v: f64) -> u64 {
    if v.is_finite() && v > 0.0 {
        v.round() as u64
    } else {
        0
    }
}

/// Maps the statistical verdict to a phase; the metric's conditions, evaluated on the JSON
/// value, override it ([`verdict::built_in_unless_conditions`]).
pub(super) fn judge<T: serde::Serialize>(
    mut out: Outcome,
    metric: &Metric,
    verdict: Verdict,
    outcome: &T,
    message: String,
) -> Outcome {
    // Through serde_json's `Value`, whose objects are sorted maps: the measurement value a
    // user reads (Argo's `value`, the backtest timeline, `successCondition`'s `result`) has
    // every object's keys in byte order, whatever the field order of the stats' structs.
    let json = match serde_json::to_value(outcome) {
        Ok(json) => json,
        Err(e) => return out.error(format!("compare: cannot encode the result: {e}")),
    };
    out.value = json.to_string();
    let built_in = phase_of(verdict);
    // The conditions' `result`, built only when the metric has conditions to evaluate.
    let condition_value = || Value::from(&json);
    super::verdict::built_in_unless_conditions(out, metric, built_in, condition_value, message)
}

/// As [`judge`], for the open-ended detector's outcome, whose fields are declared in the byte
/// order of their keys (its test checks it): written directly. Going through a sorted map was a
/// tenth of a week-long backtest's own time (one value per check).
pub(super) fn judge_detector(
    mut out: Outcome,
    metric: &Metric,
    outcome: &stats::EDetectorOutcome,
    message: String,
) -> Outcome {
    out.value = match serde_json::to_string(outcome) {
        Ok(text) => text,
        Err(e) => return out.error(format!("compare: cannot encode the result: {e}")),
    };
    // The same struct has just been written, so it converts too; only conditions read it.
    let condition_value =
        || serde_json::to_value(outcome).map_or(Value::Nil, |json| Value::from(&json));
    let built_in = phase_of(outcome.verdict);
    super::verdict::built_in_unless_conditions(out, metric, built_in, condition_value, message)
}

/// The phase a statistical verdict gives when no condition overrides it.
fn phase_of(verdict: Verdict) -> Phase {
    match verdict {
        Verdict::Worse => Phase::Failed,
        Verdict::NotWorse => Phase::Successful,
        Verdict::Undecided => Phase::Inconclusive,
    }
}

/// Which check of its run this measurement is, for the error spending of repeated checks:
/// exactly the run's recorded count plus one when the caller sent the run's history (Argo's
/// plugin interface does), else estimated from wall time since the run began. Without a run (a
/// dry run, a webhook) it is a single check.
///
/// The budget is spent by `design` only where the index is exact. `cumulative` keeps nine
/// tenths of it for the plan's last check, so a check that may not be the one it claims — an
/// index estimated from wall time (which drifts ahead of Argo's schedule) or one past the plan
/// (clamped to the last) — could get that level more than once: such checks spend as
/// `sliding`.
fn look(metric: &Metric, opts: &EvalOptions, now: DateTime<Utc>, design: Design) -> Look {
    let planned = metric.count.filter(|c| *c > 0);
    if let Some(done) = opts.checks_done {
        let index = done.saturating_add(1);
        // Argo stops measuring at `count`; a larger index means a caller that counts more than
        // Argo does, so it gets the last slice rather than an error.
        return match planned {
            Some(n) if index > n => Look::of(n, n),
            Some(n) => Look::of(index, n).with_design(design),
            None => Look::open_ended(index).with_design(design),
        };
    }
    let (Some(start), Some(interval)) = (
        opts.run_started_at,
        metric.interval.filter(|i| !i.is_zero()),
    ) else {
        return Look::single();
    };
    let delay =
        chrono::Duration::from_std(metric.initial_delay.unwrap_or_default()).unwrap_or_default();
    let elapsed = (now - start - delay).to_std().unwrap_or_default();
    let index = u32::try_from(elapsed.as_millis() / interval.as_millis().max(1))
        .unwrap_or(u32::MAX)
        .saturating_add(1);
    // An estimate: the constructors' `sliding`, whatever `design` says.
    match planned {
        Some(n) => Look::of(index.min(n), n),
        None => Look::open_ended(index),
    }
}

fn look_text(look: Look) -> String {
    match look.planned {
        Some(n) => format!("{} of {n}", look.index),
        None => format!("{} (open-ended run)", look.index),
    }
}

/// The queries a compare form is written with.
fn form_queries(form: &CompareForm) -> Vec<&str> {
    match form {
        CompareForm::Ratio { canary, stable, .. } => vec![
            canary.bad.as_str(),
            canary.total.as_str(),
            stable.bad.as_str(),
            stable.total.as_str(),
        ],
        CompareForm::Distribution { canary, stable, .. }
        | CompareForm::Histogram { canary, stable, .. } => vec![canary.as_str(), stable.as_str()],
    }
}

/// The queries a compare metric will send.
pub(super) fn describe(spec: &CompareSpec, meta: &mut BTreeMap<String, String>) {
    match &spec.form {
        CompareForm::Ratio {
            canary,
            stable,
            min_requests,
            ..
        } => {
            meta.insert("compare.canary.bad".into(), canary.bad.clone());
            meta.insert("compare.canary.total".into(), canary.total.clone());
            meta.insert("compare.stable.bad".into(), stable.bad.clone());
            meta.insert("compare.stable.total".into(), stable.total.clone());
            meta.insert("compare.minRequests".into(), min_requests.to_string());
        }
        CompareForm::Distribution {
            canary,
            stable,
            window,
            step,
            ..
        } => {
            meta.insert("compare.canary".into(), canary.clone());
            meta.insert("compare.stable".into(), stable.clone());
            meta.insert(
                "compare.window".into(),
                format!(
                    "{} at {}",
                    crate::spec::duration::format_duration(*window),
                    crate::spec::duration::format_duration(*step)
                ),
            );
        }
        CompareForm::Histogram {
            canary,
            stable,
            threshold,
            min_requests,
            ..
        } => {
            meta.insert("compare.histogram.canary".into(), canary.clone());
            meta.insert("compare.histogram.stable".into(), stable.clone());
            meta.insert("compare.minRequests".into(), min_requests.to_string());
            if let Some(t) = threshold {
                meta.insert("compare.threshold".into(), t.to_string());
            }
        }
    }
}
