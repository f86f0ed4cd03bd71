//! The `compare` kind's histogram form: one `sum by (le) (increase(..._bucket[W]))` vector per
//! side, read into per-request bucket counts and judged by [`stats::compare_histograms`]. The
//! queries, the no-data and too-little-traffic rules are decided here.

use crate::prometheus::QueryData;
use crate::spec::CompareSpec;
use crate::stats::{self, Buckets, HistogramOptions, Look};

use super::compare::{judge, run_test, INLINE_REQUESTS};
use super::no_data::{self, NoData};
use super::result::format_count;
use super::{insufficient, Ctx, Engine, Outcome};

/// The histogram form's queries and keys, as the spec holds them.
pub(super) struct HistogramQueries<'a> {
    pub canary: &'a str,
    pub stable: &'a str,
    pub threshold: Option<f64>,
    pub margin: f64,
    pub min_requests: u64,
}

/// Why a side's answer is not a bucket vector.
enum Read {
    NoData(NoData),
    Invalid(String),
}

impl Engine {
    /// Measures a histogram-form compare metric; `out` already carries the check's metadata.
    pub(super) async fn measure_histogram(
        &self,
        out: Outcome,
        cx: &Ctx<'_>,
        spec: &CompareSpec,
        form: HistogramQueries<'_>,
        look: Look,
    ) -> Outcome {
        let open = super::open_ended::OpenForm::Histogram {
            threshold: form.threshold,
            margin: form.margin,
        };
        let mut out = match self
            .measure_open_ended(
                out,
                cx,
                spec,
                &[form.canary, form.stable],
                open,
                form.min_requests.max(1),
            )
            .await
        {
            Ok(done) => return done,
            Err(out) => out,
        };
        let (metric, no_data, config, opts) = (cx.metric, cx.no_data, cx.config, cx.opts);
        let (c, s) = futures::join!(
            self.instant(config, form.canary, opts),
            self.instant(config, form.stable, opts),
        );
        let mut sides = Vec::with_capacity(2);
        for (what, side, query, response) in [
            ("compare.histogram.canary", "canary", form.canary, c),
            ("compare.histogram.stable", "stable", form.stable, s),
        ] {
            let response = match response {
                Err(e) => return out.error(format!("{what} failed: {e}")),
                Ok(r) => r,
            };
            out.note_warnings(&response);
            match buckets(side, &response.data) {
                Ok(b) => sides.push(b),
                Err(Read::NoData(why)) => {
                    out.metadata
                        .insert("noData".into(), format!("{what} {}", why.describe()));
                    let (phase, message) = no_data::verdict(no_data, what, query, &why);
                    return out.finish(phase, message);
                }
                Err(Read::Invalid(why)) => return out.error(format!("{what}: {why}")),
            }
        }
        let (canary, stable) = (&sides[0], &sides[1]);
        if let Err(e) = Buckets::same_layout(canary, stable) {
            return out.error(format!("compare.histogram: {e}"));
        }
        let (cn, sn) = (canary.total(), stable.total());
        if cn.min(sn) < form.min_requests.max(1) {
            let why = format!(
                "{} canary and {} stable requests seen, {} needed on each side",
                format_count(cn as f64),
                format_count(sn as f64),
                format_count(form.min_requests.max(1) as f64)
            );
            return insufficient(out, spec.on_insufficient, &why, cx);
        }
        let options = HistogramOptions {
            max_increase: spec.max_increase,
            margin: form.margin,
            confidence: spec.confidence,
            min_requests: form.min_requests,
            threshold: form.threshold,
            look,
        };
        let small = cn.max(sn) < INLINE_REQUESTS;
        let (canary, stable) = (canary.clone(), stable.clone());
        match run_test(small, move || stats::compare_histograms(&canary, &stable, &options)).await
        {
            Err(e) => out.error(e),
            Ok(Err(stats::HistogramError::Threshold { threshold, bounds })) => out.error(format!(
                "compare.threshold: {threshold} is not a bucket bound (le) of the histogram; bounds: {bounds}"
            )),
            Ok(Err(e)) => out.error(format!("compare: {e}")),
            Ok(Ok(o)) => judge(out, metric, o.verdict, &o, o.message()),
        }
    }
}

/// One side's answer as buckets: an instant vector with one series per `le`.
fn buckets(side: &'static str, data: &QueryData) -> Result<Buckets, Read> {
    if let Some(why) = no_data::detect(data) {
        return Err(Read::NoData(why));
    }
    let QueryData::Vector(series) = data else {
        return Err(Read::Invalid(
            "expected an instant vector with one series per `le` bucket, e.g. `sum by (le) (increase(http_request_duration_seconds_bucket{...}[5m]))`".into(),
        ));
    };
    let pairs: Vec<(Option<&str>, f64)> = series
        .iter()
        .map(|s| (s.labels.get("le"), s.sample.value))
        .collect();
    Buckets::from_cumulative(side, &pairs).map_err(|e| Read::Invalid(e.to_string()))
}
