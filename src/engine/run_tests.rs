//! The run rules of argo-rollouts v1.9.1 `analysis/analysis.go`, case by case.

use super::*;
use chrono::TimeZone;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 29, 12, 0, 0).unwrap()
}

fn secs(s: i64) -> DateTime<Utc> {
    t0() + chrono::Duration::seconds(s)
}

fn metric(name: &str, interval: Option<u64>, count: Option<u32>) -> RunMetric {
    RunMetric {
        name: name.into(),
        interval: interval.map(Duration::from_secs),
        count,
        ..RunMetric::default()
    }
}

fn m(phase: Phase) -> Measurement {
    Measurement::finished(phase, phase.as_str(), t0())
}

/// Drives a run as the controller would until it completes or `end`, then terminates it.
/// `answer(metric, n, time, kind)` gives the n-th measurement (0-based) of a metric.
/// Returns every (metric, time, phase) taken, the run's phase and when it ended.
fn drive(
    metrics: Vec<RunMetric>,
    end: DateTime<Utc>,
    mut answer: impl FnMut(usize, usize, DateTime<Utc>, TaskKind) -> Measurement,
) -> (RunSim, Vec<(usize, i64, Phase)>, DateTime<Utc>) {
    let mut sim = RunSim::new(metrics, t0());
    let mut log = Vec::new();
    let mut now = t0();
    let mut taken = vec![0usize; sim.metrics().len()];
    for _ in 0..10_000 {
        for task in sim.due(now) {
            let n = taken[task.metric];
            if task.kind == TaskKind::Run {
                taken[task.metric] += 1;
            }
            let mut meas = answer(task.metric, n, now, task.kind);
            if task.kind == TaskKind::Terminate {
                meas = Measurement::finished(Phase::Inconclusive, "terminated", now);
            }
            log.push((task.metric, (now - t0()).num_seconds(), meas.phase));
            sim.record(task, meas, now);
        }
        if sim.assess(now).completed() {
            return (sim, log, now);
        }
        match sim.next_reconcile(now) {
            Some(next) if next <= end => now = next,
            _ => {
                now = end;
                sim.request_terminate();
            }
        }
    }
    panic!("run did not end");
}

#[test]
fn failure_limit_defaults_to_zero_so_the_first_failure_fails_the_run() {
    let (sim, log, at) = drive(
        vec![metric("a", Some(60), Some(5))],
        secs(3600),
        |_, n, _, _| {
            m(if n == 2 {
                Phase::Failed
            } else {
                Phase::Successful
            })
        },
    );
    assert_eq!(sim.phase(), RunPhase::Failed);
    assert_eq!(at, secs(120));
    assert_eq!(log.len(), 3);
    assert_eq!(
        sim.message(),
        "Metric \"a\" assessed Failed due to failed (1) > failureLimit (0)"
    );
}

#[test]
fn failure_limit_two_fails_on_the_third_failure() {
    let mut a = metric("a", Some(60), Some(10));
    a.limits.failure_limit = Some(2);
    let (sim, log, at) = drive(vec![a], secs(3600), |_, n, _, _| {
        m(if n % 2 == 1 {
            Phase::Failed
        } else {
            Phase::Successful
        })
    });
    assert_eq!(sim.phase(), RunPhase::Failed);
    // failures at n = 1, 3, 5 -> the run fails at the sixth measurement (t = 300 s)
    assert_eq!(at, secs(300));
    assert_eq!(log.len(), 6);
    assert_eq!(sim.results()[0].failed, 3);
}

#[test]
fn negative_failure_limit_never_fails_and_count_makes_it_successful() {
    let mut a = metric("a", Some(60), Some(3));
    a.limits.failure_limit = Some(-1);
    let (sim, _, at) = drive(vec![a], secs(3600), |_, _, _, _| m(Phase::Failed));
    assert_eq!(sim.phase(), RunPhase::Successful);
    assert_eq!(at, secs(120));
}

#[test]
fn inconclusive_limit_is_zero_by_default_and_honoured_when_set() {
    let (sim, _, at) = drive(
        vec![metric("a", Some(60), Some(5))],
        secs(3600),
        |_, _, _, _| m(Phase::Inconclusive),
    );
    assert_eq!((sim.phase(), at), (RunPhase::Inconclusive, secs(0)));
    let mut a = metric("a", Some(60), Some(5));
    a.limits.inconclusive_limit = Some(1);
    let (sim, _, at) = drive(vec![a], secs(3600), |_, n, _, _| {
        m(if n >= 2 {
            Phase::Inconclusive
        } else {
            Phase::Successful
        })
    });
    assert_eq!((sim.phase(), at), (RunPhase::Inconclusive, secs(180)));
    assert!(sim
        .message()
        .contains("inconclusive (2) > inconclusiveLimit (1)"));
}

#[test]
fn five_consecutive_errors_retried_every_ten_seconds_error_the_run() {
    let (sim, log, at) = drive(
        vec![metric("a", Some(60), None)],
        secs(3600),
        |_, _, _, _| m(Phase::Error),
    );
    assert_eq!(sim.phase(), RunPhase::Error);
    let times: Vec<i64> = log.iter().map(|l| l.1).collect();
    assert_eq!(times, vec![0, 10, 20, 30, 40]);
    assert_eq!(at, secs(40));
    assert!(sim
        .message()
        .contains("consecutiveErrors (5) > consecutiveErrorLimit (4)"));
}

#[test]
fn a_success_resets_the_error_streak_and_errors_do_not_count() {
    let mut a = metric("a", Some(60), Some(3));
    a.limits.consecutive_error_limit = Some(2);
    // E E S E E S E E S: never three errors in a row; count (3) excludes the errors.
    let (sim, log, _) = drive(vec![a], secs(3600), |_, n, _, _| {
        m(if n % 3 == 2 {
            Phase::Successful
        } else {
            Phase::Error
        })
    });
    assert_eq!(sim.phase(), RunPhase::Successful);
    assert_eq!(log.len(), 9);
    assert_eq!(sim.results()[0].count, 3);
    assert_eq!(sim.results()[0].error, 6);
    // after an error: +10 s; after a success: +interval
    let times: Vec<i64> = log.iter().map(|l| l.1).collect();
    assert_eq!(times, vec![0, 10, 20, 80, 90, 100, 160, 170, 180]);
}

#[test]
fn dry_run_metrics_are_recorded_but_never_decide_the_run() {
    let mut dry = metric("dry", Some(60), Some(3));
    dry.dry_run = true;
    let real = metric("real", Some(60), Some(3));
    let (sim, log, at) = drive(vec![dry, real], secs(3600), |i, _, _, _| {
        m(if i == 0 {
            Phase::Failed
        } else {
            Phase::Successful
        })
    });
    assert_eq!(sim.phase(), RunPhase::Successful);
    assert_eq!(sim.results()[0].phase, RunPhase::Failed);
    assert_eq!(at, secs(120));
    // the real metric kept measuring after the dry-run one failed
    assert_eq!(log.iter().filter(|l| l.0 == 1).count(), 3);
}

#[test]
fn dry_run_rules_are_unanchored_regexes_and_star_means_all() {
    let names = vec!["error-rate".to_string(), "latency".to_string()];
    assert_eq!(
        dry_run_matches(&["rate".into()], &names).unwrap(),
        vec![true, false]
    );
    assert_eq!(
        dry_run_matches(&["*".into()], &names).unwrap(),
        vec![true, true]
    );
    let err = dry_run_matches(&["cpu".into()], &names).unwrap_err();
    assert!(err.contains("spec.dryRun[0]"), "{err}");
}

#[test]
fn initial_delay_postpones_the_first_measurement() {
    let mut a = metric("a", Some(60), Some(2));
    a.initial_delay = Some(Duration::from_secs(300));
    let (sim, log, at) = drive(vec![a], secs(3600), |_, _, _, _| m(Phase::Successful));
    assert_eq!(sim.phase(), RunPhase::Successful);
    let times: Vec<i64> = log.iter().map(|l| l.1).collect();
    assert_eq!(times, vec![300, 360]);
    assert_eq!(at, secs(360));
}

#[test]
fn consecutive_success_limit_ends_the_metric_successfully_early() {
    let mut a = metric("a", Some(60), Some(10));
    a.limits.consecutive_success_limit = Some(3);
    a.limits.failure_limit = Some(5);
    let (sim, log, _) = drive(vec![a], secs(3600), |_, n, _, _| {
        m(if n == 1 {
            Phase::Failed
        } else {
            Phase::Successful
        })
    });
    assert_eq!(sim.phase(), RunPhase::Successful);
    assert_eq!(log.len(), 5); // S F S S S
}

#[test]
fn consecutive_success_limit_not_reached_by_count_is_inconclusive_or_failed() {
    let mut a = metric("a", Some(60), Some(4));
    a.limits.consecutive_success_limit = Some(3);
    a.limits.failure_limit = Some(5);
    let alternate = |_, n: usize, _, _| {
        m(if n % 2 == 1 {
            Phase::Failed
        } else {
            Phase::Successful
        })
    };
    let (sim, _, _) = drive(vec![a.clone()], secs(3600), alternate);
    assert_eq!(sim.phase(), RunPhase::Inconclusive);
    a.limits.failure_limit = Some(-1);
    let (sim, _, _) = drive(vec![a], secs(3600), alternate);
    assert_eq!(sim.phase(), RunPhase::Failed);
}

#[test]
fn a_metric_without_count_runs_until_the_window_ends_then_terminates_successful() {
    let (sim, log, at) = drive(
        vec![metric("a", Some(600), None)],
        secs(3600),
        |_, _, _, _| m(Phase::Successful),
    );
    assert_eq!(sim.phase(), RunPhase::Successful);
    assert_eq!(at, secs(3600));
    assert_eq!(log.len(), 7); // 0, 600, ..., 3600
}

#[test]
fn a_metric_without_interval_is_measured_once() {
    let (sim, log, _) = drive(vec![metric("a", None, None)], secs(3600), |_, _, _, _| {
        m(Phase::Successful)
    });
    assert_eq!(sim.phase(), RunPhase::Successful);
    assert_eq!(log.len(), 1);
}

#[test]
fn a_waiting_measurement_resumes_at_its_resume_at_and_the_interval_counts_from_its_end() {
    let a = metric("a", Some(60), Some(2));
    let (sim, log, _) = drive(vec![a], secs(3600), |_, n, now, kind| {
        if n == 0 && kind == TaskKind::Run {
            let mut w = Measurement::finished(Phase::Running, "waiting", now);
            w.finished_at = None;
            w.resume_at = Some(now + chrono::Duration::seconds(30));
            w
        } else {
            m(Phase::Successful)
        }
    });
    assert_eq!(sim.phase(), RunPhase::Successful);
    let times: Vec<(i64, Phase)> = log.iter().map(|l| (l.1, l.2)).collect();
    assert_eq!(
        times,
        vec![
            (0, Phase::Running),
            (30, Phase::Successful),
            (90, Phase::Successful)
        ]
    );
    // the resumed measurement replaced the waiting one and kept its start
    assert_eq!(sim.results()[0].measurements.len(), 2);
    assert_eq!(sim.results()[0].measurements[0].started_at, secs(0));
    assert_eq!(sim.results()[0].measurements[0].finished_at, Some(secs(30)));
}

#[test]
fn a_failure_ends_the_run_at_once_even_with_another_measurement_in_flight() {
    let a = metric("a", Some(60), None);
    let b = metric("b", Some(60), None);
    let (sim, log, at) = drive(vec![a, b], secs(3600), |i, n, now, _| {
        if i == 1 {
            let mut w = Measurement::finished(Phase::Running, "waiting", now);
            w.finished_at = None;
            w.resume_at = Some(now + chrono::Duration::seconds(30));
            return w;
        }
        m(if n == 1 {
            Phase::Failed
        } else {
            Phase::Successful
        })
    });
    assert_eq!(sim.phase(), RunPhase::Failed);
    // assessRunStatus returns the worst completed phase as soon as the run is terminating,
    // without waiting for b's in-flight measurement (resumeAt 90 s).
    assert_eq!(at, secs(60));
    assert_eq!(sim.results()[1].phase, RunPhase::Running);
    assert!(!log.iter().any(|l| l.2 == Phase::Inconclusive), "{log:?}");
}
