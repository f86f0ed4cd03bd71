//! `onInsufficient: wait`: ask Argo to come back later, but never for longer than one interval.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::spec::duration::format_duration;

/// How often a waiting measurement is re-evaluated.
pub(crate) const WAIT_RETRY: Duration = Duration::from_secs(30);
/// The wait bound for a metric with no interval (measured once).
pub(crate) const DEFAULT_WAIT_BOUND: Duration = Duration::from_secs(300);

/// Whether to keep waiting for traffic.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum WaitDecision {
    /// Return Running with this `resumeAt`.
    WaitUntil(DateTime<Utc>),
    /// The bound has passed; stop waiting (the text says how long it waited).
    GiveUp(String),
}

/// Decides the next step of a wait that began at `waiting_since` (or now, for a new one).
pub(crate) fn decide(
    interval: Option<Duration>,
    waiting_since: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> WaitDecision {
    let bound = interval
        .filter(|d| !d.is_zero())
        .unwrap_or(DEFAULT_WAIT_BOUND);
    let since = waiting_since.unwrap_or(now);
    let deadline = since + chrono::Duration::from_std(bound).unwrap_or(chrono::Duration::MAX);
    if now >= deadline {
        let waited = (now - since).to_std().unwrap_or_default();
        return WaitDecision::GiveUp(format_duration(Duration::from_secs(waited.as_secs())));
    }
    let next =
        now + chrono::Duration::from_std(WAIT_RETRY.min(bound)).unwrap_or(chrono::Duration::MAX);
    WaitDecision::WaitUntil(next.min(deadline))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_within_the_interval_then_gives_up() {
        let t0 = Utc::now();
        let minute = Some(Duration::from_secs(60));
        assert_eq!(
            decide(minute, None, t0),
            WaitDecision::WaitUntil(t0 + chrono::Duration::seconds(30))
        );
        let later = t0 + chrono::Duration::seconds(45);
        assert_eq!(
            decide(minute, Some(t0), later),
            WaitDecision::WaitUntil(t0 + chrono::Duration::seconds(60))
        );
        let past = t0 + chrono::Duration::seconds(61);
        assert_eq!(
            decide(minute, Some(t0), past),
            WaitDecision::GiveUp("1m1s".into())
        );
    }

    #[test]
    fn short_intervals_cap_the_retry() {
        let t0 = Utc::now();
        let ten = Some(Duration::from_secs(10));
        assert_eq!(
            decide(ten, None, t0),
            WaitDecision::WaitUntil(t0 + chrono::Duration::seconds(10))
        );
    }
}
