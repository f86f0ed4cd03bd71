//! The run tracker: where a call stands in its run, for the surfaces whose caller does not say.
//! Flagger calls the same hook at every interval of its analysis, Argo's `web` provider posts
//! the same body at every interval, and a gRPC `Analyze` carries no AnalysisRun; but the
//! compare kind spends its error budget over a run's repeated checks and needs the run's start
//! (the Argo plugin surfaces read it from the AnalysisRun). So the engine remembers when it
//! first saw each (run, metric), keyed by what the calls of one run have in common (the surface
//! says what that is: [`RunKey`]); calls further apart than `STALE_INTERVALS` intervals start
//! a new run. docs/serve.md ("Runs of repeated calls") gives each surface's key and its limits.
//!
//! Memory is per process. That is safe with the spending of `crate::stats::sequential`: its
//! per-check levels grow with the check's index, so a replica or a restart that counts from 1
//! again spends `alpha * (j^2 + m^2) / N^2 <= alpha * ((j + m) / N)^2` over `j + m` checks.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};

/// A run is over when its metric was not called for this many intervals.
pub(crate) const STALE_INTERVALS: u32 = 3;

/// Most runs remembered. Beyond it the stale ones are forgotten; a live run never is (its
/// next call would count from check 1 again, at the first check's strictest level, and a
/// caller who can start runs could so reset a failing one), so while every remembered run is
/// live a new run gets an Error instead ([`RunsFull`]).
const MAX_RUNS: usize = 10_000;

/// No room to remember another run: every remembered one is still live.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "rollgate is already tracking {max} runs that are all still being called (a run ends {STALE_INTERVALS} intervals after its last call), so it cannot place this new one: no verdict until some end",
    max = MAX_RUNS
)]
pub(crate) struct RunsFull;

/// One metric of one run, as the surface identifies it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct RunKey {
    /// What every call of the run carries and other runs do not: Flagger's canary
    /// `namespace/name` and revision checksum, the web provider's request selection and
    /// arguments, a gRPC call's spec and arguments. Prefixed by the surface, so surfaces never
    /// share a run.
    pub run: String,
    /// The template (or `inline`) and metric name.
    pub metric: String,
}

#[derive(Debug, Clone, Copy)]
struct Seen {
    first: DateTime<Utc>,
    last: DateTime<Utc>,
    stale_after: chrono::Duration,
}

/// First and last calls of each run. Keys are kept as keyed hashes (random per process), so
/// memory stays bounded whatever a request carries (an inline spec can be large), and a caller
/// who cannot see the key cannot aim a request at another run.
#[derive(Debug, Default)]
pub(crate) struct RunClock {
    runs: Mutex<HashMap<u64, Seen>>,
    hasher: RandomState,
}

impl RunClock {
    /// When the run that this call (at `now`, of a metric measured every `interval`) belongs to
    /// started; [`RunsFull`] for a new run when every remembered run is live.
    pub(crate) fn started(
        &self,
        key: RunKey,
        interval: Duration,
        now: DateTime<Utc>,
    ) -> Result<DateTime<Utc>, RunsFull> {
        let key = self.hasher.hash_one(&key);
        let stale_after = interval
            .checked_mul(STALE_INTERVALS)
            .and_then(|d| chrono::Duration::from_std(d).ok())
            .unwrap_or(chrono::Duration::MAX);
        let mut runs = match self.runs.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        let is_stale = |seen: &Seen| now - seen.last > seen.stale_after;
        if !runs.contains_key(&key) && runs.len() >= MAX_RUNS {
            runs.retain(|_, seen| !is_stale(seen));
            if runs.len() >= MAX_RUNS {
                return Err(RunsFull);
            }
        }
        let seen = runs.entry(key).or_insert(Seen {
            first: now,
            last: now,
            stale_after,
        });
        if is_stale(seen) {
            seen.first = now;
        }
        // A call that says it is earlier than the last one (a caller's evaluation time) does
        // not move the run's clock back.
        seen.last = seen.last.max(now);
        seen.stale_after = stale_after;
        Ok(seen.first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl RunClock {
        fn started_ok(&self, key: RunKey, interval: Duration, now: DateTime<Utc>) -> DateTime<Utc> {
            self.started(key, interval, now).unwrap()
        }
    }

    fn key(canary: &str, checksum: &str) -> RunKey {
        RunKey {
            run: format!("flagger {canary}@{checksum}"),
            metric: "t/m".into(),
        }
    }

    #[test]
    fn a_run_lasts_while_calls_keep_coming() {
        let clock = RunClock::default();
        let minute = Duration::from_secs(60);
        let t0 = Utc::now();
        let at = |m: i64| t0 + chrono::Duration::minutes(m);
        assert_eq!(clock.started_ok(key("a/b", "1"), minute, at(0)), t0);
        assert_eq!(clock.started_ok(key("a/b", "1"), minute, at(1)), t0);
        assert_eq!(
            clock.started_ok(key("a/b", "1"), minute, at(4)),
            t0,
            "3 intervals apart"
        );
        // Another revision or canary is another run.
        assert_eq!(clock.started_ok(key("a/b", "2"), minute, at(5)), at(5));
        assert_eq!(clock.started_ok(key("a/c", "1"), minute, at(5)), at(5));
        // Silent for more than 3 intervals: the next call starts a new run.
        assert_eq!(clock.started_ok(key("a/b", "1"), minute, at(8)), at(8));
        assert_eq!(clock.started_ok(key("a/b", "1"), minute, at(9)), at(8));
        // An interval too long to multiply never ends the run (and never panics).
        let forever = Duration::MAX;
        assert_eq!(clock.started_ok(key("a/d", "1"), forever, at(0)), t0);
        assert_eq!(clock.started_ok(key("a/d", "1"), forever, at(9_999)), t0);
    }

    #[test]
    fn memory_is_bounded() {
        let clock = RunClock::default();
        let second = Duration::from_secs(1);
        let len = || clock.runs.lock().unwrap().len();
        let t0 = Utc::now();
        for i in 0..MAX_RUNS {
            clock.started_ok(key("a/b", &format!("old-{i}")), second, t0);
        }
        assert_eq!(len(), MAX_RUNS);
        // Stale runs make room for a new one.
        let later = t0 + chrono::Duration::seconds(10);
        clock.started_ok(key("a/b", "new"), second, later);
        assert_eq!(len(), 1);
        // With none stale, a new run is refused rather than memory growing.
        for i in 1..MAX_RUNS {
            clock.started_ok(key("a/b", &format!("busy-{i}")), second, later);
        }
        assert_eq!(len(), MAX_RUNS);
        for i in 0..10 {
            let refused = clock.started(key("a/b", &format!("more-{i}")), second, later);
            assert_eq!(refused, Err(RunsFull));
            assert_eq!(len(), MAX_RUNS);
        }
    }

    #[test]
    fn a_live_run_is_never_forgotten_to_make_room() {
        // A run at its fifth check of eight (Failed so far), then more distinct runs than the
        // tracker holds, all within the first run's life: it must stay at its fifth check, or
        // its next call would be judged as a first check, at the loosest spending.
        let clock = RunClock::default();
        let minute = Duration::from_secs(60);
        let t0 = Utc::now();
        let at = |m: i64| t0 + chrono::Duration::minutes(m);
        let failing = key("prod/payments", "rev-1");
        for check in 0..5 {
            assert_eq!(clock.started_ok(failing.clone(), minute, at(check)), t0);
        }
        let mut refused = 0;
        for i in 0..MAX_RUNS + 400 {
            if clock
                .started(key("prod/other", &format!("{i}")), minute, at(4))
                .is_err()
            {
                refused += 1;
            }
        }
        assert_eq!(
            refused, 401,
            "the tracker held the failing run and the rest"
        );
        assert_eq!(
            clock.started_ok(failing.clone(), minute, at(5)),
            t0,
            "the failing run still starts at its first check"
        );
        // Once the others have gone quiet, new runs find room again; the failing run, called
        // on, keeps its place.
        assert_eq!(clock.started_ok(failing.clone(), minute, at(7)), t0);
        let later = at(7) + chrono::Duration::seconds(30);
        assert_eq!(clock.started_ok(key("prod/new", "1"), minute, later), later);
        // A call claiming an earlier time does not move the clock back.
        assert_eq!(clock.started_ok(failing.clone(), minute, at(2)), t0);
        assert_eq!(clock.started_ok(failing, minute, at(9)), t0);
    }
}
