//! The simulation figures of docs/statistics.md, asserted loosely.
//!
//! Debug builds simulate 1,000 rollouts per scenario; release builds (`cargo test --release`)
//! the full 10,000 of the documented table.

use rollgate::stats::Design;

use crate::simulation::{
    histogram_scenarios, latency_scenarios, simulate, simulate_histogram, simulate_latency,
    standard_scenarios_with, wilson, SimulationRow,
};

fn runs() -> usize {
    if cfg!(debug_assertions) {
        1_000
    } else {
        10_000
    }
}

fn row(name: &str) -> SimulationRow {
    row_with(Design::Sliding, name)
}

#[test]
fn healthy_canaries_fail_at_most_one_minus_confidence_over_the_run() {
    for name in [
        "healthy 1 %",
        "healthy 0.1 %",
        "healthy 1 %, zero tolerance",
        "at tolerance: 5 % vs 6 %",
        "healthy, 5 % canary weight, 2 %",
        "healthy 1 %, count unknown",
    ] {
        let r = row(name);
        assert!(r.failed_rate <= 0.05, "{name}: {r:?}");
        assert_eq!(
            r.failed + r.successful_at_end + r.inconclusive_at_end,
            r.runs
        );
    }
    // The least favourable healthy canary (exactly at the tolerance) does get failed sometimes:
    // the test is not vacuous.
    assert!(row("at tolerance: 5 % vs 6 %").failed > 0);
}

#[test]
fn a_doubled_error_rate_is_caught() {
    let r = row("2x: 5 % -> 10 %");
    assert!(r.failed_rate >= 0.8, "{r:?}");
    // At 1 % -> 2 % the same 2,000 requests per side are not enough (see the sample-size table).
    let r = row("2x: 1 % -> 2 %");
    assert!(r.failed_rate > 0.15 && r.failed_rate < 0.6, "{r:?}");
}

#[test]
fn low_traffic_is_inconclusive_never_failed() {
    let r = row("low traffic, 2x: 5 % -> 10 %");
    assert_eq!(r.failed, 0);
    assert_eq!(r.inconclusive_at_end, r.runs);
}

fn latency_row(correct: bool, name: &str) -> SimulationRow {
    let scenarios = latency_scenarios(correct);
    let (i, scenario) = scenarios
        .iter()
        .enumerate()
        .find(|(_, s)| s.name == name)
        .unwrap();
    simulate_latency(scenario, runs() / 2, 20_240_701 + i as u64).unwrap()
}

#[test]
fn latency_checks_keep_the_run_level_rate_and_catch_a_doubling() {
    for correct in [false, true] {
        let healthy = latency_row(correct, "healthy latency");
        let boundary = latency_row(correct, "latency +10 % (at tolerance)");
        let doubled = latency_row(correct, "latency x2");
        assert!(healthy.failed_rate <= 0.05, "{healthy:?}");
        assert!(boundary.failed_rate <= 0.05, "{boundary:?}");
        assert!(doubled.failed_rate >= 0.95, "{doubled:?}");
    }
}

/// On autocorrelated series Mann-Whitney alone fails identical canaries far beyond
/// the budget; with the correction (the default) every healthy layout stays within 5 %.
#[test]
fn autocorrelated_series_keep_the_level_with_the_correction() {
    let ignored = latency_row(false, "healthy, AR(1) rho 0.8");
    assert!(
        ignored.failed_rate > 0.08,
        "the scenario shows the problem: {ignored:?}"
    );
    for name in [
        "healthy, AR(1) rho 0.5",
        "healthy, AR(1) rho 0.8",
        "healthy, AR(1) rho 0.9",
        "+10 % (at tolerance), AR(1) rho 0.8",
        "healthy, rate[1m] at 15 s step",
        "+10 % (at tolerance), rate[1m] at 15 s step",
        // Weak correlation, which the test for serial correlation can miss.
        "+10 % (at tolerance), AR(1) rho 0.1",
        "+10 % (at tolerance), AR(1) rho 0.2",
        "+10 % (at tolerance), AR(1) rho 0.3",
        "+10 % (at tolerance), AR(1) rho 0.5",
        "+10 % (at tolerance), rho 0.2, 5 new per check",
        "+10 % (at tolerance), rho 0.3, 5 new per check",
    ] {
        let r = latency_row(true, name);
        assert!(r.failed_rate <= 0.05, "{name}: {r:?}");
    }
    // Without the correction the weakly correlated sliding layout breaks the level: these
    // rows test something.
    let weak = latency_row(false, "+10 % (at tolerance), rho 0.3, 5 new per check");
    assert!(weak.failed_rate > 0.08, "{weak:?}");
    // The correction costs power (docs/statistics.md), but a real shift is still seen.
    let shifted = latency_row(true, "+50 %, rate[1m] at 15 s step");
    assert!(shifted.failed_rate >= 0.15, "{shifted:?}");
    let doubled = latency_row(true, "latency x2");
    assert!(doubled.failed_rate >= 0.95, "{doubled:?}");
}

/// The correction applies only where a test finds serial correlation, so on independent
/// samples it costs little power: a +50 % shift is caught nearly as often as without it
/// (docs/statistics.md, seeds of the example: 70.2 % against 74.5 %; the correction applied
/// at every check caught 64.0 %).
#[test]
fn the_correction_costs_little_power_on_independent_samples() {
    let with = latency_row(true, "latency +50 %");
    let without = latency_row(false, "latency +50 %");
    assert!(
        with.failed_rate >= without.failed_rate - 0.05,
        "{with:?} vs {without:?}"
    );
    if !cfg!(debug_assertions) {
        // The documented row itself: the example's seed, 10,000 rollouts.
        let scenarios = latency_scenarios(true);
        let (i, scenario) = scenarios
            .iter()
            .enumerate()
            .find(|(_, s)| s.name == "latency +50 %")
            .unwrap();
        let r = simulate_latency(scenario, 10_000, 20_240_601 + 100 + i as u64).unwrap();
        assert!(r.failed_rate >= 0.70, "{r:?}");
    }
}

fn row_with(design: Design, name: &str) -> SimulationRow {
    let scenarios = standard_scenarios_with(design);
    let (i, scenario) = scenarios
        .iter()
        .enumerate()
        .find(|(_, s)| s.name == name)
        .unwrap();
    simulate(scenario, runs(), 20_240_601 + i as u64).unwrap()
}

/// `windows: cumulative` on cumulative counts: the least favourable healthy canary uses most of
/// the 5 % budget, never more (with a planned count the union bound holds exactly; open-ended
/// runs use group-sequential boundaries), and keeping the budget for the last check detects
/// the 1 % -> 2 % regression about as often as one final check does. Release figures (10,000
/// rollouts, docs/statistics.md): 4.51 % at the tolerance and 4.86 % for identical canaries
/// under zero tolerance, 3.29 % at the tolerance with the count unknown; 58.8 % for 1 % -> 2 %
/// at 2,000 per side (39.4 % with sliding windows), 95.4 % at 6,000 per side (86.7 %), against
/// 95.5 % for the whole budget spent at one final check: the ceiling of any spending.
#[test]
fn cumulative_windows_use_the_budget_and_keep_it() {
    let cumulative = |name| row_with(Design::Cumulative, name);
    let sliding = |name| row_with(Design::Sliding, name);
    for name in [
        "healthy 1 %",
        "healthy 1 %, zero tolerance",
        "at tolerance: 5 % vs 6 %",
        "healthy, 5 % canary weight, 2 %",
        "healthy 1 %, count unknown",
        "at tolerance: 5 % vs 6 %, count unknown",
    ] {
        let r = cumulative(name);
        assert!(r.failed_rate <= 0.05, "{name}: {r:?}");
    }
    // More than twice the sliding share at the boundary: the budget is used.
    assert!(cumulative("at tolerance: 5 % vs 6 %").failed_rate > 0.04);
    assert!(sliding("at tolerance: 5 % vs 6 %").failed_rate < 0.025);
    let (c, s) = (cumulative("2x: 1 % -> 2 %"), sliding("2x: 1 % -> 2 %"));
    assert!(c.failed_rate > s.failed_rate + 0.1, "{c:?} vs {s:?}");
    if !cfg!(debug_assertions) {
        assert!(c.failed_rate >= 0.5, "{c:?}");
        let ten = cumulative("2x: 1 % -> 2 %, 6,000/side").failed_rate;
        let ceiling = cumulative("2x: 1 % -> 2 %, one final check at 6,000/side").failed_rate;
        assert!(ten >= 0.95, "{ten}");
        // Ten looks cost little against the ceiling, and never beat it (they would only if
        // the levels spent more than the budget).
        assert!(ten < ceiling && ceiling - ten <= 0.01, "{ten} vs {ceiling}");
    }
    assert_eq!(cumulative("low traffic, 2x: 5 % -> 10 %").failed, 0);
}

fn histogram_row(name: &str) -> SimulationRow {
    let scenarios = histogram_scenarios();
    let (i, scenario) = scenarios
        .iter()
        .enumerate()
        .find(|(_, s)| s.name == name)
        .unwrap();
    simulate_histogram(scenario, runs(), 20_261_201 + i as u64).unwrap()
}

/// The histogram form (per-request latency from buckets, Prometheus' default buckets, cumulative
/// counters read as `increase(...[5m])` at each of ten checks): healthy canaries keep the run's
/// budget, a 50 % slower canary is caught in nearly every run, low traffic is never failed.
#[test]
fn histogram_form_keeps_the_budget_and_catches_a_fifty_percent_slowdown() {
    for name in [
        "healthy",
        "+10 % (at tolerance)",
        "healthy, narrow spread, 2,000/min",
        "threshold 0.25 s, healthy",
    ] {
        let r = histogram_row(name);
        // The upper end of the Wilson 95 % interval stays within the 5 % budget.
        let (_, upper) = wilson(r.failed, r.runs);
        assert!(upper <= 0.05, "{name}: {r:?}");
    }
    for name in ["+50 %", "x2", "threshold 0.25 s, +50 %"] {
        let r = histogram_row(name);
        let (lower, _) = wilson(r.failed, r.runs);
        assert!(lower >= 0.7, "{name}: {r:?}");
    }
    // Known limit (docs/statistics.md): with buckets much wider than the spread, the tolerance
    // relies on interpolation inside buckets and is not calibrated at its boundary.
    let narrow = histogram_row("+10 % (at tolerance), narrow spread, 2,000/min");
    assert!(narrow.failed_rate > 0.05, "{narrow:?}");
    let quiet = histogram_row("low traffic 60/window, +50 %");
    assert_eq!(quiet.failed, 0, "{quiet:?}");
    assert_eq!(quiet.inconclusive_at_end, quiet.runs);
}

/// Open-ended runs (no `count`) judged by the e-detector: the table of docs/statistics.md at 200
/// runs per row (the documented table has 2,000: `cargo run --release --example
/// open_ended_simulation -- --runs 2000`). Each bound is asserted on the point estimate, and the
/// Wilson interval must not exclude it.
#[test]
fn open_ended_runs_keep_their_false_failure_bound_and_their_power_over_10000_checks() {
    use crate::simulation::{open_ended_scenarios, simulate_open_ended};
    let runs = if cfg!(debug_assertions) { 20 } else { 200 };
    let scenarios = open_ended_scenarios();
    let find = |name: &str| {
        let s = scenarios.iter().find(|s| s.name == name).unwrap();
        simulate_open_ended(s, runs, 20_240_601).unwrap()
    };
    for name in [
        "healthy 1 %, 10,000 checks",
        "at tolerance 1.2 % vs 1 %, 10,000 checks",
        "two replicas, healthy 1 %, 10,000 checks",
    ] {
        let r = find(name);
        let (lo, _) = wilson(r.failed_early, runs);
        assert!(
            r.failed_early as f64 / runs as f64 <= 0.05 && lo <= 0.05,
            "{name}: {r:?}"
        );
    }
    for (name, within, share) in [
        ("1 % -> 3 % from check 6,000", 30, 0.95),
        ("1 % -> 3 % from check 10", 15, 0.95),
        ("two replicas, 1 % -> 3 % from check 6,000", 30, 0.95),
    ] {
        let r = find(name);
        let k = r.within(within);
        let (_, hi) = wilson(k, runs);
        assert!(
            k as f64 / runs as f64 >= share && hi >= share,
            "{name}: {k} of {runs} within {within}: {r:?}"
        );
    }
    // Two replicas answering alternate checks take at most one more check than one server.
    let one = find("1 % -> 3 % from check 6,000").median_delay().unwrap();
    let two = find("two replicas, 1 % -> 3 % from check 6,000")
        .median_delay()
        .unwrap();
    assert!(two <= 2 * one, "{one} vs {two}");
}

/// Open-ended histogram-form runs (`tests/simulation/open_ended_histogram.rs`; the documented table
/// has 200 runs a row: `cargo run --release --example open_ended_simulation -- --histogram
/// --runs 200`). Few runs, to keep CI short; each bound still fails if the detector loses its
/// validity (a healthy or at-tolerance canary failed in more than one run of twelve) or its
/// power (a late +50 % slowdown missed in more than a fifth of runs within 60 checks).
#[test]
fn open_ended_histogram_runs_keep_their_bound_and_catch_a_late_slowdown() {
    use crate::simulation::open_ended_histogram::{scenarios, simulate};
    let (healthy_runs, regression_runs) = if cfg!(debug_assertions) {
        (2, 5)
    } else {
        (12, 30)
    };
    let all = scenarios();
    let find = |name: &str, runs: usize| {
        let s = all.iter().find(|s| s.name == name).unwrap();
        simulate(s, runs, 20_261_205)
    };
    for name in [
        "healthy, x1.25 buckets, 10,000 checks",
        "+10 % (at tolerance), x1.25 buckets, 10,000 checks",
        "two replicas, healthy, x1.25 buckets, 10,000 checks",
    ] {
        let r = find(name, healthy_runs);
        assert!(r.failed_early <= 1, "{name}: {r:?}");
    }
    let one = find("+50 % from check 6,000, x1.25 buckets", regression_runs);
    let two = find(
        "two replicas, +50 % from check 6,000, x1.25 buckets",
        regression_runs,
    );
    for (name, r) in [("one server", &one), ("two replicas", &two)] {
        assert_eq!(r.failed_early, 0, "{name}: {r:?}");
        assert!(
            r.within(60) * 5 >= regression_runs * 4,
            "{name}: {} of {regression_runs} within 60: {r:?}",
            r.within(60)
        );
    }
    let (d1, d2) = (one.median_delay().unwrap(), two.median_delay().unwrap());
    assert!(d2 <= 2 * d1, "{d1} vs {d2}");
}
