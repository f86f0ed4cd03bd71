//! Compares the statistics with values computed independently by scipy / mpmath
//! (`tests/reference/gen_stats_reference.py`, output committed as `stats_reference.json`).

use rollgate::stats::{
    compare_histograms, fisher_exact_one_sided, hodges_lehmann, mann_whitney_u_with, ratio_p_value,
    Alternative, Buckets, HistogramOptions, Method, MethodChoice, RatioInput,
};
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Reference {
    fisher: Vec<FisherCase>,
    ratio: Vec<RatioCase>,
    mann_whitney: Vec<MannWhitneyCase>,
    hodges_lehmann: Vec<HodgesLehmannCase>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FisherCase {
    canary_bad: u64,
    canary_total: u64,
    stable_bad: u64,
    stable_total: u64,
    odds_ratio: f64,
    p: f64,
    scipy_p: f64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RatioCase {
    canary_bad: u64,
    canary_total: u64,
    stable_bad: u64,
    stable_total: u64,
    max_increase: f64,
    margin: f64,
    p: f64,
    relative_p: Option<f64>,
    relative_estimated_p: Option<f64>,
    relative_null_stable_rate: Option<f64>,
    relative_score: Option<Value>,
    odds_ratio_bound: Option<Value>,
    fisher_relative_p: Option<f64>,
    absolute_p: Option<f64>,
    null_stable_rate: Option<f64>,
}

#[derive(Deserialize)]
struct MannWhitneyCase {
    x: Vec<f64>,
    y: Vec<f64>,
    alternative: String,
    method: String,
    u: f64,
    p: f64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HodgesLehmannCase {
    x: Vec<f64>,
    y: Vec<f64>,
    confidence: f64,
    estimate: f64,
    lower: f64,
    upper: f64,
    achieved_confidence: f64,
    method: String,
}

fn load() -> Reference {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/reference/stats_reference.json"
    );
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Relative tolerance `rel` for values above 1e-12, absolute 1e-20 below (deep tails).
fn close(got: f64, want: f64, rel: f64) -> bool {
    if want.abs() < 1e-12 {
        (got - want).abs() < 1e-20 + rel * want.abs()
    } else {
        ((got - want) / want).abs() <= rel
    }
}

#[test]
fn fisher_matches_scipy_and_mpmath() {
    let reference = load();
    assert!(reference.fisher.len() >= 50);
    for (i, c) in reference.fisher.iter().enumerate() {
        let input = RatioInput {
            canary_bad: c.canary_bad,
            canary_total: c.canary_total,
            stable_bad: c.stable_bad,
            stable_total: c.stable_total,
        };
        let got = fisher_exact_one_sided(&input, c.odds_ratio);
        assert!(close(got, c.p, 1e-11), "case {i}: {got:e} vs {:e}", c.p);
        // scipy's noncentral distribution is only accurate to ~1e-8.
        let tol = if c.odds_ratio == 1.0 { 1e-9 } else { 1e-6 };
        assert!(
            close(got, c.scipy_p, tol),
            "case {i}: {got:e} vs scipy {:e}",
            c.scipy_p
        );
    }
}

#[test]
fn ratio_test_matches_reference() {
    let reference = load();
    assert!(reference.ratio.len() >= 50);
    for (i, c) in reference.ratio.iter().enumerate() {
        let input = RatioInput {
            canary_bad: c.canary_bad,
            canary_total: c.canary_total,
            stable_bad: c.stable_bad,
            stable_total: c.stable_total,
        };
        let got = ratio_p_value(&input, c.max_increase, c.margin).unwrap();
        let ctx = format!(
            "case {i}: {}/{} vs {}/{}, r {} m {}",
            c.canary_bad, c.canary_total, c.stable_bad, c.stable_total, c.max_increase, c.margin
        );
        assert!(
            close(got.p_value, c.p, 1e-9),
            "{ctx}: p {:e} vs {:e}",
            got.p_value,
            c.p
        );
        same_part(&ctx, "relative", got.relative_p_value, c.relative_p);
        same_part(&ctx, "absolute", got.absolute_p_value, c.absolute_p);
        same_part(
            &ctx,
            "E-test",
            got.relative_estimated_p_value,
            c.relative_estimated_p,
        );
        same_rate(
            &ctx,
            "relative null rate",
            got.relative_null_stable_rate,
            c.relative_null_stable_rate,
        );
        match (got.relative_score, &c.relative_score) {
            (Some(g), Some(Value::Number(w))) => {
                let w = w.as_f64().unwrap();
                assert!(
                    (g - w).abs() <= 1e-9 * w.abs().max(1.0),
                    "{ctx}: score {g} vs {w}"
                );
            }
            (Some(g), Some(Value::String(s))) => {
                assert!(
                    g.is_infinite() && (g > 0.0) == (s == "inf"),
                    "{ctx}: score {g}"
                );
            }
            (None, None) => {}
            other => panic!("{ctx}: score {other:?}"),
        }
        // Fisher's conditional test at the tolerance's odds ratio, which the relative half used
        // before: still public, still equal to the 50-digit sum.
        match (&c.odds_ratio_bound, c.fisher_relative_p) {
            (Some(Value::Number(psi)), Some(w)) => {
                let g = fisher_exact_one_sided(&input, psi.as_f64().unwrap());
                assert!(close(g, w, 1e-9), "{ctx}: Fisher {g:e} vs {w:e}");
            }
            (Some(Value::String(s)), Some(w)) if s == "inf" => assert_eq!(w, 1.0, "{ctx}"),
            (None, None) => {}
            other => panic!("{ctx}: Fisher part {other:?}"),
        }
        same_rate(&ctx, "null rate", got.null_stable_rate, c.null_stable_rate);
    }
}

/// A part of the ratio test: both present and equal to 1e-9 relative, or both absent.
fn same_part(ctx: &str, what: &str, got: Option<f64>, want: Option<f64>) {
    match (got, want) {
        (Some(g), Some(w)) => assert!(close(g, w, 1e-9), "{ctx}: {what} {g:e} vs {w:e}"),
        (None, None) => {}
        other => panic!("{ctx}: {what} part {other:?}"),
    }
}

/// A null rate, where both sides give one: equal to 1e-9 relative (1e-12 absolute near 0).
fn same_rate(ctx: &str, what: &str, got: Option<f64>, want: Option<f64>) {
    if let (Some(g), Some(w)) = (got, want) {
        assert!(
            (g - w).abs() <= 1e-12 + 1e-9 * w,
            "{ctx}: {what} {g} vs {w}"
        );
    }
}

#[test]
fn mann_whitney_matches_scipy() {
    let reference = load();
    let exact = reference
        .mann_whitney
        .iter()
        .filter(|c| c.method == "exact")
        .count();
    let asymptotic = reference.mann_whitney.len() - exact;
    assert!(exact >= 50 && asymptotic >= 50);
    assert!(reference
        .mann_whitney
        .iter()
        .any(|c| c.method == "asymptotic" && has_ties(&c.x, &c.y)));
    for (i, c) in reference.mann_whitney.iter().enumerate() {
        let alternative = match c.alternative.as_str() {
            "two-sided" => Alternative::TwoSided,
            "greater" => Alternative::Greater,
            _ => Alternative::Less,
        };
        let (choice, method) = if c.method == "exact" {
            (MethodChoice::Exact, Method::Exact)
        } else {
            (MethodChoice::Asymptotic, Method::Asymptotic)
        };
        let got = mann_whitney_u_with(&c.x, &c.y, alternative, choice).unwrap();
        assert_eq!(got.method, method);
        assert_eq!(got.u, c.u, "case {i}");
        assert!(
            close(got.p_value, c.p, 1e-9),
            "case {i} ({} {}): {:e} vs {:e}",
            c.method,
            c.alternative,
            got.p_value,
            c.p
        );
    }
}

#[test]
fn hodges_lehmann_matches_brute_force_reference() {
    let reference = load();
    assert!(reference.hodges_lehmann.len() >= 50);
    let first = &reference.hodges_lehmann[0];
    assert_eq!(
        (first.lower, first.upper, first.estimate),
        (6.0, 39.0, 22.5),
        "the issue's example"
    );
    for (i, c) in reference.hodges_lehmann.iter().enumerate() {
        let got = hodges_lehmann(&c.x, &c.y, c.confidence).unwrap();
        let method = if c.method == "exact" {
            Method::Exact
        } else {
            Method::Asymptotic
        };
        assert_eq!(got.method, method, "case {i}");
        // Order statistics of the same floating-point differences: identical values.
        assert_eq!(got.lower, c.lower, "case {i}: lower");
        assert_eq!(got.upper, c.upper, "case {i}: upper");
        assert!(
            (got.estimate - c.estimate).abs() <= 1e-12 * c.estimate.abs().max(1.0),
            "case {i}: estimate {} vs {}",
            got.estimate,
            c.estimate
        );
        assert!(
            (got.achieved_confidence - c.achieved_confidence).abs() < 1e-9,
            "case {i}: achieved {} vs {}",
            got.achieved_confidence,
            c.achieved_confidence
        );
    }
}

fn has_ties(x: &[f64], y: &[f64]) -> bool {
    let mut pooled: Vec<f64> = x.iter().chain(y).copied().collect();
    pooled.sort_unstable_by(f64::total_cmp);
    pooled.windows(2).any(|w| w[0] == w[1])
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HistogramCase {
    canary: Vec<u64>,
    stable: Vec<u64>,
    theta: f64,
    brunner_munzel: Option<f64>,
}

/// The histogram form's rank test at `maxIncrease: 0` against scipy on the same requests
/// expanded to ordinal bucket indices (`tests/reference/gen_histogram_reference.py`):
/// `theta = U/(nm)` of `mannwhitneyu` and the statistic of `brunnermunzel(distribution="normal")`.
#[test]
fn histogram_rank_test_matches_scipy_on_expanded_requests() {
    #[derive(Deserialize)]
    struct File {
        cases: Vec<HistogramCase>,
    }
    let text = include_str!("../reference/histogram_reference.json");
    let file: File = serde_json::from_str(text).unwrap();
    assert_eq!(file.cases.len(), 60);
    for (i, case) in file.cases.iter().enumerate() {
        let bounds: Vec<f64> = (1..case.canary.len()).map(|b| b as f64 / 10.0).collect();
        let side = |counts: &[u64]| Buckets::from_counts(bounds.clone(), counts.to_vec()).unwrap();
        let out = compare_histograms(
            &side(&case.canary),
            &side(&case.stable),
            &HistogramOptions::new(0.0, 0.95),
        )
        .unwrap();
        let rank = out.rank.unwrap();
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
        assert!(
            close(rank.theta, case.theta),
            "case {i}: {rank:?} vs {}",
            case.theta
        );
        assert!(close(rank.theta_untolerated, case.theta), "case {i}");
        match (rank.brunner_munzel, case.brunner_munzel) {
            (Some(a), Some(b)) => assert!(close(a, b), "case {i}: {a} vs scipy {b}"),
            (a, b) => assert_eq!(a.is_none(), b.is_none(), "case {i}: {a:?} vs {b:?}"),
        }
    }
}
