//! Serving a backtest's instant queries from range queries fetched once.
//!
//! Prometheus evaluates a range query at every step exactly as an instant query at that time
//! (same lookback and staleness rules), so the instant answer at a step-aligned `t` is the
//! range answer's sample at `t`. A backtest registers its schedule as [`Grid`]s; an instant
//! query at a grid time is answered from a range fetch of the grid's chunk around it (at most
//! [`MAX_POINTS`] steps: Prometheus refuses more than 11,000 points per series). Everything
//! else goes to the inner backend unchanged: times off the grid (error retries, waits), range
//! queries, range-selector and string expressions, answers with more than one series at `t`
//! (an instant vector's series order is the server's, a range matrix is sorted), and keys whose
//! range fetch failed or carried warnings.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use promql_parser::parser::value::ValueType;
use tokio::sync::OnceCell;
use tokio::time::Instant;

use super::{
    Backend, PrometheusConfig, PrometheusError, QueryData, QueryRequest, QueryResponse,
    RangeSeries, Sample, Series,
};

/// Points per series per range request; Prometheus' limit is 11,000.
pub(crate) const MAX_POINTS: i64 = 11_000;

/// Step-aligned evaluation times `start + k * step` up to `end` (inclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    pub start: DateTime<Utc>,
    pub step: Duration,
    pub end: DateTime<Utc>,
}

impl Grid {
    /// The step index of `t`, when `t` lies on the grid (asked for every query of every
    /// check: plain millisecond arithmetic).
    fn index_of(&self, t: DateTime<Utc>) -> Option<i64> {
        let step = i64::try_from(self.step.as_millis())
            .ok()
            .filter(|s| *s > 0)?;
        let nanos = (
            t.timestamp_nanos_opt(),
            self.start.timestamp_nanos_opt(),
            self.end.timestamp_nanos_opt(),
        );
        let (on, offset) = match nanos {
            // The same test as below in integer nanoseconds (times from 1677 to 2262).
            (Some(t), Some(start), Some(end)) => {
                let offset = t.checked_sub(start)?;
                (offset >= 0 && t <= end, offset / 1_000_000)
            }
            _ => (
                t >= self.start && t <= self.end,
                (t - self.start).num_milliseconds(),
            ),
        };
        (on && offset % step == 0).then_some(offset / step)
    }

    fn at(&self, index: i64) -> DateTime<Utc> {
        let step = i64::try_from(self.step.as_millis()).unwrap_or(i64::MAX);
        self.start + chrono::Duration::milliseconds(index.saturating_mul(step))
    }
}

/// Where one chunk's data came from, besides its query (the outer map's key).
#[derive(Debug)]
struct Source {
    address: String,
    headers: Vec<(String, String)>,
    grid: usize,
    chunk: i64,
}

impl Source {
    fn is(&self, cfg: &PrometheusConfig, grid: usize, chunk: i64) -> bool {
        self.grid == grid
            && self.chunk == chunk
            && self.address == cfg.address
            && self.headers == cfg.headers
    }
}

/// One fetched chunk: the matrix, or `None` when it cannot serve (error, warnings).
type Chunk = Option<Arc<Vec<RangeSeries>>>;

/// A chunk's cell, fetched once, with where it comes from.
type Sourced = (Source, Arc<OnceCell<Chunk>>);

/// What is known of one query: its PromQL value type, parsed once (`None`: does not parse),
/// and its chunks by source.
#[derive(Debug)]
struct Entry {
    value_type: Option<ValueType>,
    chunks: Vec<Sourced>,
}

/// A multiply-rotate hash taking eight bytes at a time: the map's keys are the template's own
/// PromQL queries (nothing an attacker chooses to collide), hashed once per query of every
/// check, where SipHash over a 100-byte query was a visible share of a backtest.
#[derive(Debug, Default, Clone, Copy)]
struct WordHasher(u64);

impl WordHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let mut word = [0u8; 8];
            word.copy_from_slice(w);
            self.add(u64::from_le_bytes(word));
        }
        let rest = words.remainder();
        let mut word = [0u8; 8];
        word[..rest.len()].copy_from_slice(rest);
        // The length tells "ab" from "ab\0" apart.
        let len = u64::try_from(rest.len()).unwrap_or_default();
        self.add(u64::from_le_bytes(word) ^ (len << 56));
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// How many instant queries were answered from range data and how many went through.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub served: u64,
    pub passed_through: u64,
    pub range_fetches: u64,
}

/// A backend layer answering step-aligned instant queries from range fetches.
pub struct RangeCache {
    inner: Backend,
    grids: Vec<Grid>,
    /// Each query's type and chunks: one lock and one lookup per check, by reference (a check
    /// allocates no key).
    entries: Mutex<HashMap<String, Entry, BuildHasherDefault<WordHasher>>>,
    served: AtomicU64,
    passed: AtomicU64,
    fetches: AtomicU64,
}

impl std::fmt::Debug for RangeCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeCache")
            .field("inner", &self.inner)
            .field("grids", &self.grids)
            .finish_non_exhaustive()
    }
}

impl RangeCache {
    /// A cache over `inner` for instant queries on `grids`.
    pub fn new(inner: Backend, grids: Vec<Grid>) -> RangeCache {
        RangeCache {
            inner,
            grids,
            entries: Mutex::new(HashMap::default()),
            served: AtomicU64::new(0),
            passed: AtomicU64::new(0),
            fetches: AtomicU64::new(0),
        }
    }

    /// The backend below (to save its recording).
    pub fn inner(&self) -> &Backend {
        &self.inner
    }

    /// Counters so far.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            served: self.served.load(Ordering::Relaxed),
            passed_through: self.passed.load(Ordering::Relaxed),
            range_fetches: self.fetches.load(Ordering::Relaxed),
        }
    }

    /// Answers `req`: from range data when it can, else from the inner backend.
    pub async fn query(
        &self,
        cfg: &PrometheusConfig,
        req: &QueryRequest,
        deadline: Option<Instant>,
    ) -> Result<QueryResponse, PrometheusError> {
        if let Some(answer) = self.try_serve(cfg, req, deadline).await {
            self.served.fetch_add(1, Ordering::Relaxed);
            return Ok(answer);
        }
        self.passed.fetch_add(1, Ordering::Relaxed);
        Box::pin(self.inner.query(cfg, req, deadline)).await
    }

    async fn try_serve(
        &self,
        cfg: &PrometheusConfig,
        req: &QueryRequest,
        deadline: Option<Instant>,
    ) -> Option<QueryResponse> {
        let QueryRequest::Instant {
            query,
            time: Some(t),
        } = req
        else {
            return None;
        };
        let (grid_no, grid, index) = self
            .grids
            .iter()
            .enumerate()
            .find_map(|(i, g)| g.index_of(*t).map(|k| (i, *g, k)))?;
        let chunk = index / MAX_POINTS;
        let (value_type, cell) = {
            let mut entries = self.entries.lock().ok()?;
            // Looked up by reference first: the key is cloned once per query, not per check.
            let entry = match entries.get_mut(query.as_str()) {
                Some(entry) => entry,
                None => entries.entry(query.clone()).or_insert_with(|| Entry {
                    value_type: promql_parser::parser::parse(query)
                        .ok()
                        .map(|e| e.value_type()),
                    chunks: Vec::new(),
                }),
            };
            let value_type = entry.value_type?;
            if !matches!(value_type, ValueType::Vector | ValueType::Scalar) {
                return None;
            }
            let cell = match entry.chunks.iter().find(|(s, _)| s.is(cfg, grid_no, chunk)) {
                Some((_, cell)) => cell.clone(),
                None => {
                    let cell = Arc::new(OnceCell::new());
                    let source = Source {
                        address: cfg.address.clone(),
                        headers: cfg.headers.clone(),
                        grid: grid_no,
                        chunk,
                    };
                    entry.chunks.push((source, cell.clone()));
                    cell
                }
            };
            (value_type, cell)
        };
        let matrix = cell
            .get_or_init(|| self.fetch(cfg, query, grid, chunk, deadline))
            .await
            .clone()?;
        // Where `t` sits in a series with a sample at every step of the chunk.
        let position = usize::try_from(index - chunk * MAX_POINTS).ok();
        answer_at(&matrix, *t, position, value_type)
    }

    async fn fetch(
        &self,
        cfg: &PrometheusConfig,
        query: &str,
        grid: Grid,
        chunk: i64,
        deadline: Option<Instant>,
    ) -> Chunk {
        let first = chunk * MAX_POINTS;
        let last_on_grid = grid.index_of(grid.end).unwrap_or_else(|| {
            let step = i64::try_from(grid.step.as_millis())
                .unwrap_or(i64::MAX)
                .max(1);
            (grid.end - grid.start).num_milliseconds() / step
        });
        let last = (first + MAX_POINTS - 1).min(last_on_grid);
        let req = QueryRequest::Range {
            query: query.to_string(),
            start: grid.at(first),
            end: grid.at(last),
            step: grid.step,
        };
        self.fetches.fetch_add(1, Ordering::Relaxed);
        match Box::pin(self.inner.query(cfg, &req, deadline)).await {
            // Only a clean answer is reused: warnings or info notes belong to the query as
            // sent, and an instant answer built from the matrix would lose them.
            Ok(QueryResponse {
                data: QueryData::Matrix(series),
                warnings,
                infos,
                ..
            }) if warnings.is_empty() && infos.is_empty() => Some(Arc::new(series)),
            _ => None,
        }
    }
}

/// The instant answer at `t` from a range matrix, or `None` when it would not be identical.
/// `position` is where `t`'s sample is in a series without gaps: looked at first, then the
/// series is searched.
fn answer_at(
    matrix: &[RangeSeries],
    t: DateTime<Utc>,
    position: Option<usize>,
    value_type: ValueType,
) -> Option<QueryResponse> {
    let ts = t.timestamp_millis() as f64 / 1000.0;
    let mut present = matrix.iter().filter_map(|s| {
        let guessed = position
            .and_then(|i| s.samples.get(i))
            .filter(|p| p.timestamp.total_cmp(&ts).is_eq());
        let sample = match guessed {
            Some(p) => *p,
            None => {
                let i = s
                    .samples
                    .binary_search_by(|p| p.timestamp.total_cmp(&ts))
                    .ok()?;
                *s.samples.get(i)?
            }
        };
        Some((s, sample))
    });
    let one = present.next();
    if present.next().is_some() {
        return None;
    }
    let data = match (value_type, one) {
        (ValueType::Scalar, Some((_, sample))) => QueryData::Scalar(sample),
        (ValueType::Scalar, None) => return None,
        (_, None) => QueryData::Vector(Vec::new()),
        (_, Some((series, sample))) => QueryData::Vector(vec![Series {
            labels: series.labels.clone(),
            sample: Sample {
                timestamp: ts,
                value: sample.value,
            },
        }]),
    };
    Some(QueryResponse::from_data(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid() -> Grid {
        let start = DateTime::from_timestamp(1_764_000_000, 500_000).unwrap();
        Grid {
            start,
            step: Duration::from_secs(60),
            end: start + chrono::Duration::hours(1),
        }
    }

    #[test]
    fn only_times_on_the_grid_have_an_index() {
        let g = grid();
        let at = |ms: i64| g.start + chrono::Duration::milliseconds(ms);
        assert_eq!(g.index_of(g.start), Some(0));
        assert_eq!(g.index_of(at(60_000)), Some(1));
        assert_eq!(g.index_of(g.end), Some(60));
        assert_eq!(g.index_of(at(60_000 * 61)), None);
        assert_eq!(g.index_of(at(-60_000)), None);
        assert_eq!(g.index_of(at(10_000)), None);
        // Under a millisecond off counts as on it, as the millisecond offset always did; a
        // nanosecond before the start does not.
        assert_eq!(
            g.index_of(g.start + chrono::Duration::nanoseconds(300_000)),
            Some(0)
        );
        assert_eq!(g.index_of(g.start - chrono::Duration::nanoseconds(1)), None);
    }

    #[test]
    fn the_word_hasher_finds_queries_and_tells_tails_apart() {
        let hash = |s: &str| {
            let mut h = WordHasher::default();
            h.write(s.as_bytes());
            h.finish()
        };
        assert_ne!(hash("ab"), hash("ab\0"));
        assert_ne!(hash("sum(a)"), hash("sum(b)"));
        assert_eq!(hash("sum(rate(x[5m]))"), hash("sum(rate(x[5m]))"));
        let mut map: HashMap<String, u8, BuildHasherDefault<WordHasher>> = HashMap::default();
        for (i, q) in ["a", "ab", "abcdefgh", "abcdefghi", ""]
            .into_iter()
            .enumerate()
        {
            map.insert(q.to_string(), u8::try_from(i).unwrap());
        }
        assert_eq!(map.get("abcdefgh"), Some(&2));
        assert_eq!(map.get(""), Some(&4));
        assert_eq!(map.get("abcdefg"), None);
    }
}
