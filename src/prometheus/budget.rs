//! The operator's bounds on upstream answers: the largest one a spec may ask for, and the bytes
//! of answers held at once across all queries of the process.
//!
//! A spec's `maxResponseBytes` alone bounds one answer, and a caller who may send specs (or a
//! template author, in plugin mode) chooses it; with every answer buffered whole, a few
//! concurrent large answers took a server far past its container's memory limit. So a
//! long-running process (serve, plugin mode) gives its client [`Limits`]: a cap no spec can
//! raise, and a byte budget that every answer draws on while it is read, decoded and used. An
//! answer that finds the budget spent waits for it (within its query's time) and is then an
//! Error; memory stays bounded by the budget, never by what callers send.
//!
//! An answer is charged before its body's bytes are buffered (by the buffer's capacity, which
//! is what is allocated) for those bytes and for what decoding and judging them builds beside
//! them: [`DECODE_FACTOR`] times as much (measured: a 16 MB vector answer took serve's peak
//! RSS up by 80 MB — the decoded series, which vectors grow by doubling, the condition's
//! `result` list, the value string). A body's first charge is for its declared length (or
//! [`FIRST_CHARGE`] bytes when it declares none), taken while holding nothing; an answer that
//! must grow past it waits for its turn (one grows at a time), so two answers never each hold
//! part of the budget waiting for the other's. The charge is held until the last copy of the
//! decoded answer is dropped, when its measurement is done.

use std::sync::Arc;
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// The largest answer a long-running process takes unless its operator says otherwise: well
/// above a canary query's answer (kilobytes), and with [`DEFAULT_MAX_BUFFERED_BYTES`] within
/// the shipped Deployment's 128 MiB memory limit.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 8 << 20;
/// The bytes of answers a long-running process holds at once unless its operator says
/// otherwise: one largest answer with what it builds, and room for small ones beside it.
pub const DEFAULT_MAX_BUFFERED_BYTES: u64 = 48 << 20;

/// What decoding and judging an answer allocates beside its body, per body byte.
pub(crate) const DECODE_FACTOR: u64 = 4;
/// The first charge of a body that declares no length: most answers to a canary's queries fit.
pub(crate) const FIRST_CHARGE: usize = 64 << 10;

/// The operator's bounds for one client (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    /// The largest answer any spec may allow (`--max-response-bytes`); a spec's
    /// `maxResponseBytes` above it is refused, and a spec without one gets it. `None`: the
    /// spec decides (the command line, whose user is the operator).
    pub max_response_bytes: Option<u64>,
    /// Bytes of answers held at once, bodies and decoded results (`--max-buffered-bytes`).
    /// `None`: unbounded.
    pub max_buffered_bytes: Option<u64>,
}

impl Limits {
    /// The size cap for one answer when a spec asks for `asked` (`maxResponseBytes`): the
    /// spec's, which may only lower the operator's.
    pub(crate) fn response_limit(&self, asked: Option<u64>) -> Result<u64, super::PrometheusError> {
        match (asked, self.max_response_bytes) {
            (Some(asked), Some(cap)) if asked > cap => Err(super::PrometheusError::Config(format!(
                "maxResponseBytes {asked} is above this server's limit of {cap} bytes (--max-response-bytes / ROLLGATE_MAX_RESPONSE_BYTES): lower it or leave it out"
            ))),
            (Some(asked), _) => Ok(asked),
            (None, Some(cap)) => Ok(cap),
            // The command line's cap (its user is the operator); a server's comes from
            // `for_server`.
            (None, None) => Ok(super::config::DEFAULT_MAX_RESPONSE_BYTES),
        }
    }

    /// The bounds of a long-running process, from its flags (each `None` takes the default).
    pub fn for_server(max_response_bytes: Option<u64>, max_buffered_bytes: Option<u64>) -> Limits {
        Limits {
            max_response_bytes: Some(max_response_bytes.unwrap_or(DEFAULT_MAX_RESPONSE_BYTES)),
            max_buffered_bytes: Some(max_buffered_bytes.unwrap_or(DEFAULT_MAX_BUFFERED_BYTES)),
        }
    }

    /// Checks that the two bounds fit together: one answer of the largest size must fit in
    /// the budget, or it could never be read. `flags` names them for the message.
    pub fn check(&self, flags: &str) -> Result<(), LimitsError> {
        if let (Some(one), Some(all)) = (self.max_response_bytes, self.max_buffered_bytes) {
            if one > all {
                return Err(LimitsError::AnswerOverBudget {
                    flags: flags.to_string(),
                    one,
                    all,
                });
            }
            if one == 0 {
                return Err(LimitsError::ZeroAnswer(flags.to_string()));
            }
        }
        Ok(())
    }
}

/// Bounds that do not fit together, naming the flags that set them.
#[derive(Debug, thiserror::Error)]
pub enum LimitsError {
    /// The largest answer could never be read within the budget.
    #[error("{flags}: the largest answer ({one} bytes) must not exceed the bytes of answers held at once ({all} bytes)")]
    AnswerOverBudget {
        /// The flags, as the message names them.
        flags: String,
        /// The largest answer, in bytes.
        one: u64,
        /// The bytes of answers held at once.
        all: u64,
    },
    /// No answer could be read at all.
    #[error("{0}: the largest answer must be at least 1 byte")]
    ZeroAnswer(String),
}

/// The shared byte budget of a client: a semaphore with one permit per byte.
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    semaphore: Arc<Semaphore>,
    total: u64,
    /// Held by the one answer that may wait for more while holding some.
    growing: Arc<tokio::sync::Mutex<()>>,
}

/// The budget could not give the bytes asked for in time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spent;

impl Budget {
    /// A budget of `total` bytes (at most what a semaphore can count).
    pub(crate) fn new(total: u64) -> Budget {
        let total = total.min(u64::try_from(Semaphore::MAX_PERMITS).unwrap_or(u64::MAX));
        Budget {
            semaphore: Arc::new(Semaphore::new(usize::try_from(total).unwrap_or(0))),
            total,
            growing: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    /// The whole budget.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// Room for a body buffer of `capacity` bytes and its decoding in `held`; an answer that
    /// already holds some takes `turn` first (kept until the answer is read).
    pub(crate) async fn charge_body(
        &self,
        held: &mut Held,
        turn: &mut Option<tokio::sync::OwnedMutexGuard<()>>,
        capacity: usize,
    ) -> Result<(), Spent> {
        let wanted = u64::try_from(capacity)
            .unwrap_or(u64::MAX)
            .saturating_mul(1 + DECODE_FACTOR)
            .saturating_sub(held.bytes);
        if wanted == 0 {
            return Ok(());
        }
        if held.bytes > 0 && turn.is_none() {
            *turn = Some(self.growing.clone().lock_owned().await);
        }
        self.grow(held, wanted, None).await
    }

    /// Grows `held` by `bytes` (at most the whole budget for one holder, so a single answer
    /// always fits when it is alone), waiting until `until` at most.
    pub(crate) async fn grow(
        &self,
        held: &mut Held,
        bytes: u64,
        until: Option<Instant>,
    ) -> Result<(), Spent> {
        let room = self.total.saturating_sub(held.bytes);
        let mut wanted = bytes.min(room);
        while wanted > 0 {
            let step = u32::try_from(wanted).unwrap_or(u32::MAX);
            let acquire = self.semaphore.acquire_many(step);
            let permit = match until {
                Some(until) => tokio::time::timeout_at(until, acquire)
                    .await
                    .map_err(|_| Spent)?,
                None => acquire.await,
            }
            .map_err(|_| Spent)?;
            permit.forget();
            held.add(&self.semaphore, u64::from(step));
            wanted -= u64::from(step);
        }
        Ok(())
    }
}

/// Bytes drawn from a [`Budget`], given back when dropped.
#[derive(Default)]
pub(crate) struct Held {
    semaphore: Option<Arc<Semaphore>>,
    bytes: u64,
}

impl Held {
    fn add(&mut self, semaphore: &Arc<Semaphore>, bytes: u64) {
        self.semaphore.get_or_insert_with(|| semaphore.clone());
        self.bytes += bytes;
    }

    /// Gives back all but `keep` bytes.
    pub(crate) fn shrink_to(&mut self, keep: u64) {
        if let Some(semaphore) = &self.semaphore {
            let back = self.bytes.saturating_sub(keep);
            semaphore.add_permits(usize::try_from(back).unwrap_or(0));
            self.bytes -= back;
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.shrink_to(0);
    }
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} bytes", self.bytes)
    }
}

/// An answer's share of the budget, shared by its clones and given back with the last.
/// Never part of what an answer is: any two compare equal.
#[derive(Debug, Clone, Default)]
pub(crate) struct Charge(#[allow(dead_code)] Option<Arc<Held>>);

impl Charge {
    pub(crate) fn new(held: Held) -> Charge {
        Charge((held.bytes > 0).then(|| Arc::new(held)))
    }
}

impl PartialEq for Charge {
    fn eq(&self, _: &Charge) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(flavor = "current_thread")]
    async fn bytes_come_back_when_the_holder_is_dropped() {
        let budget = Budget::new(100);
        let mut a = Held::default();
        budget.grow(&mut a, 60, None).await.unwrap();
        let mut b = Held::default();
        let soon = Instant::now() + Duration::from_millis(50);
        assert!(budget.grow(&mut b, 60, Some(soon)).await.is_err());
        a.shrink_to(10);
        let soon = Instant::now() + Duration::from_millis(50);
        budget.grow(&mut b, 60, Some(soon)).await.unwrap();
        drop(a);
        drop(b);
        // One holder may take the whole budget, never more.
        let mut c = Held::default();
        budget.grow(&mut c, 1_000, None).await.unwrap();
        assert_eq!(c.bytes, 100);
        drop(c);
        assert_eq!(budget.semaphore.available_permits(), 100);
    }
}
