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
    /// The step index of `t`, when `t` lies on the grid.
    fn index_of(&self, t: DateTime<Utc>) -> Option<i64> {
        let step = i64::try_from(self.step.as_millis())
            .ok()
            .filter(|s| *s > 0)?;
        let offset = (t - self.start).num_milliseconds();
        (t >= self.start && t <= self.end && offset % step == 0).then_some(offset / step)
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
    /// Chunks by query, then by source: looked up by reference, so a check allocates no key.
    chunks: Mutex<HashMap<String, Vec<Sourced>>>,
    /// Each query's PromQL value type, parsed once (`None`: does not parse).
    types: Mutex<HashMap<String, Option<ValueType>>>,
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
            chunks: Mutex::new(HashMap::new()),
            types: Mutex::new(HashMap::new()),
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
        let value_type = {
            let mut types = self.types.lock().ok()?;
            // Looked up by reference first: the key is cloned once per query, not per check.
            match types.get(query.as_str()) {
                Some(known) => *known,
                None => {
                    let parsed = promql_parser::parser::parse(query)
                        .ok()
                        .map(|e| e.value_type());
                    types.insert(query.clone(), parsed);
                    parsed
                }
            }
        }?;
        if !matches!(value_type, ValueType::Vector | ValueType::Scalar) {
            return None;
        }
        let (grid_no, grid, index) = self
            .grids
            .iter()
            .enumerate()
            .find_map(|(i, g)| g.index_of(*t).map(|k| (i, *g, k)))?;
        let chunk = index / MAX_POINTS;
        let cell = {
            let mut chunks = self.chunks.lock().ok()?;
            let sources = match chunks.get_mut(query.as_str()) {
                Some(sources) => sources,
                None => chunks.entry(query.clone()).or_default(),
            };
            match sources.iter().find(|(s, _)| s.is(cfg, grid_no, chunk)) {
                Some((_, cell)) => cell.clone(),
                None => {
                    let cell = Arc::new(OnceCell::new());
                    let source = Source {
                        address: cfg.address.clone(),
                        headers: cfg.headers.clone(),
                        grid: grid_no,
                        chunk,
                    };
                    sources.push((source, cell.clone()));
                    cell
                }
            }
        };
        let matrix = cell
            .get_or_init(|| self.fetch(cfg, query, grid, chunk, deadline))
            .await
            .clone()?;
        answer_at(&matrix, *t, value_type)
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
fn answer_at(
    matrix: &[RangeSeries],
    t: DateTime<Utc>,
    value_type: ValueType,
) -> Option<QueryResponse> {
    let ts = t.timestamp_millis() as f64 / 1000.0;
    let mut present = matrix.iter().filter_map(|s| {
        s.samples
            .binary_search_by(|p| p.timestamp.total_cmp(&ts))
            .ok()
            .map(|i| (s, s.samples[i]))
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
    Some(QueryResponse {
        data,
        warnings: Vec::new(),
        infos: Vec::new(),
        histogram_only: Vec::new(),
    })
}
