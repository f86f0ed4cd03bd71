//! Rules of a `compare` metric: both sides' rates, and the alerting approximation of the test.

use crate::spec::{CompareForm, CompareSpec, NoDataPolicy, OnInsufficient};

use super::MetricRules;

/// Ratio form: counts and rates per side; an alert when the canary's rate is above the
/// tolerated bound `max((1 + maxIncrease) * stable, stable + margin)` with both sides past
/// `minRequests`. The gate asks more (the excess must be significant at `confidence`, over
/// the run's repeated checks): the alert is its point-estimate approximation.
pub(super) fn rules(
    template: &str,
    metric: &str,
    spec: &CompareSpec,
    no_data: NoDataPolicy,
) -> MetricRules {
    let mut out = MetricRules::new(template, metric, "compare");
    out.exact = false;
    match &spec.form {
        CompareForm::Ratio {
            canary,
            stable,
            margin,
            min_requests,
        } => {
            let cb = out.record("canary_bad", &canary.bad);
            let ct = out.record("canary_total", &canary.total);
            let sb = out.record("stable_bad", &stable.bad);
            let st = out.record("stable_total", &stable.total);
            // No bad-event series while the side has traffic is no bad event, as in the gate.
            let cr = out.record(
                "canary_rate",
                &format!("({cb} or on () vector(0)) / on () {ct}"),
            );
            let sr = out.record(
                "stable_rate",
                &format!("({sb} or on () vector(0)) / on () {st}"),
            );
            let n = *min_requests;
            out.alert(
                "RollgateCanaryWorse",
                format!(
                    "{cr} > on () ({} * {sr}) and on () ({cr} > on () ({sr} + {margin})) and on () ({ct} >= {n}) and on () ({st} >= {n})",
                    1.0 + spec.max_increase
                ),
                format!(
                    "{template}/{metric}: the canary's error rate is above the tolerated bound (approximation of the gate's exact test)"
                ),
            );
            if no_data == NoDataPolicy::Fail {
                out.alert(
                    "RollgateCompareNoData",
                    format!("absent({ct}) or absent({st}) or ({ct} != {ct}) or ({st} != {st})"),
                    format!("{template}/{metric}: a side has no data, and noData: fail"),
                );
            }
            if spec.on_insufficient == OnInsufficient::Fail {
                out.alert(
                    "RollgateCompareTooFewRequests",
                    format!("({ct} < {n} and on () ({st} == {st})) or on () ({st} < {n} and on () ({ct} == {ct}))"),
                    format!("{template}/{metric}: fewer than {n} requests on a side, and onInsufficient: fail"),
                );
            }
            out.notes.push(
                "compare: the alert fires when the canary's rate is above the tolerated bound with both sides past minRequests; the gate also asks the excess to be significant (an approximation, see docs/rules.md)".into(),
            );
        }
        CompareForm::Distribution { canary, stable, .. } => {
            out.record("canary", canary);
            out.record("stable", stable);
            out.notes.push(
                "compare (distribution form): no alert; the gate tests samples over a window, which no instant PromQL expression approximates (the recording rules give both sides)".into(),
            );
        }
        CompareForm::Histogram { canary, stable, .. } => {
            out.record("canary_buckets", canary);
            out.record("stable_buckets", stable);
            out.notes.push(
                "compare (histogram form): no alert; the gate's rank test over per-request bucket counts has no PromQL equivalent (the recording rules give both sides' buckets, for histogram_quantile)".into(),
            );
        }
    }
    out
}
