//! Recording live answers to a file and answering queries from such a file.
//!
//! # File format (version 1)
//!
//! ```json
//! {"version": 1, "entries": [
//!   {"kind": "instant", "query": "sum(up)", "time": "2024-04-05T12:00:00Z",
//!    "status": 200, "body": "{\"status\":\"success\",\"data\":{...}}"},
//!   {"kind": "range", "query": "up", "start": "2024-04-05T11:00:00Z",
//!    "end": "2024-04-05T12:00:00Z", "step": 60, "status": 200, "body": "..."}
//! ]}
//! ```
//!
//! - `time` (instant only) is RFC 3339 or `null` (the server's "now"; a missing `time` is `null`).
//! - `start`, `end` (RFC 3339) and `step` (seconds, may be fractional) are required for `range`.
//! - `status` is the HTTP status and `body` the raw response body as a JSON string; replay runs
//!   them through the same decoder as live answers, so a recorded error replays as that error.
//! - The server address is not recorded: replay answers whatever address is configured.
//!
//! # Matching
//!
//! A request matches entries of the same kind and query string (and, for range queries, the
//! same step). Among those, entries whose `time` (instant) or `start` and `end` (range) equal
//! the request's are preferred; several such entries are served in recorded order, the last one
//! repeating. With no exact match, a single candidate answers; several or none is a
//! [`PrometheusError::ReplayMiss`] naming the query.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};

use super::error::{Origin, PrometheusError};
use super::request::QueryRequest;
use super::response::{decode, QueryResponse};

const VERSION: u32 = 1;

/// Collects every final HTTP answer (status and body) of a recording backend, in order.
/// Thread-safe; clones share the same recording.
#[derive(Clone, Default)]
pub struct Recorder {
    entries: Arc<Mutex<Vec<Entry>>>,
}

/// Answers queries from a recording instead of a server.
#[derive(Clone)]
pub struct Replay {
    entries: Arc<Vec<Entry>>,
    /// Next exact match to serve, by the index of the group's first entry.
    cursors: Arc<Mutex<HashMap<usize, usize>>>,
}

#[derive(Debug, Clone, PartialEq)]
enum Key {
    Instant {
        time: Option<DateTime<Utc>>,
    },
    Range {
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        step: Duration,
    },
}

#[derive(Debug, Clone, PartialEq)]
struct Entry {
    query: String,
    key: Key,
    status: u16,
    body: String,
}

impl Entry {
    fn of(req: &QueryRequest, status: u16, body: &[u8]) -> Entry {
        let key = match req {
            QueryRequest::Instant { time, .. } => Key::Instant { time: *time },
            QueryRequest::Range {
                start, end, step, ..
            } => Key::Range {
                start: *start,
                end: *end,
                step: *step,
            },
        };
        Entry {
            query: req.query().to_string(),
            key,
            status,
            body: String::from_utf8_lossy(body).into_owned(),
        }
    }
}

impl Serialize for Entry {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        match &self.key {
            Key::Instant { time } => {
                map.serialize_entry("kind", "instant")?;
                map.serialize_entry("query", &self.query)?;
                map.serialize_entry("time", time)?;
            }
            Key::Range { start, end, step } => {
                map.serialize_entry("kind", "range")?;
                map.serialize_entry("query", &self.query)?;
                map.serialize_entry("start", start)?;
                map.serialize_entry("end", end)?;
                map.serialize_entry("step", &step.as_secs_f64())?;
            }
        }
        map.serialize_entry("status", &self.status)?;
        map.serialize_entry("body", &self.body)?;
        map.end()
    }
}

/// The on-disk shape of an entry, checked into an [`Entry`] after reading.
#[derive(Deserialize)]
struct EntryRepr {
    kind: String,
    query: String,
    #[serde(default)]
    time: Option<DateTime<Utc>>,
    #[serde(default)]
    start: Option<DateTime<Utc>>,
    #[serde(default)]
    end: Option<DateTime<Utc>>,
    #[serde(default)]
    step: Option<f64>,
    status: u16,
    body: String,
}

#[derive(Serialize)]
struct FileOut<'a> {
    version: u32,
    entries: &'a [Entry],
}

#[derive(Deserialize)]
struct FileIn {
    version: u32,
    entries: Vec<EntryRepr>,
}

// No entries: they are whole Prometheus answers (and the recorder's lock is not taken here).
impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Replay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replay")
            .field("entries", &self.entries.len())
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// An empty recording.
    pub fn new() -> Self {
        Recorder::default()
    }

    /// Appends one answer.
    pub(crate) fn record(&self, req: &QueryRequest, status: u16, body: &[u8]) {
        let entry = Entry::of(req, status, body);
        self.lock().push(entry);
    }

    /// Number of recorded answers.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing was recorded yet.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// The recording in the file format described in the module documentation.
    pub fn to_json(&self) -> String {
        let entries = self.lock();
        let file = FileOut {
            version: VERSION,
            entries: &entries,
        };
        // Serializing strings, numbers and RFC 3339 times cannot fail.
        serde_json::to_string_pretty(&file).unwrap_or_default()
    }

    /// Writes the recording to `path`.
    pub fn save(&self, path: &Path) -> Result<(), PrometheusError> {
        std::fs::write(path, self.to_json()).map_err(|e| PrometheusError::Recording {
            path: path.display().to_string(),
            detail: format!("cannot write: {e}"),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Replay {
    /// Reads a recording file.
    pub fn load(path: &Path) -> Result<Replay, PrometheusError> {
        let text = std::fs::read_to_string(path).map_err(|e| PrometheusError::Recording {
            path: path.display().to_string(),
            detail: format!("cannot read: {e}"),
        })?;
        Replay::parse(&text, &path.display().to_string())
    }

    /// Parses a recording held in memory.
    pub fn from_json(text: &str) -> Result<Replay, PrometheusError> {
        Replay::parse(text, "(inline)")
    }

    /// Number of recorded answers.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the recording is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn parse(text: &str, path: &str) -> Result<Replay, PrometheusError> {
        let fail = |detail: String| PrometheusError::Recording {
            path: path.to_string(),
            detail,
        };
        let file: FileIn = serde_json::from_str(text).map_err(|e| fail(e.to_string()))?;
        if file.version != VERSION {
            return Err(fail(format!(
                "unsupported version {} (this build reads version {VERSION})",
                file.version
            )));
        }
        let entries = file
            .entries
            .into_iter()
            .enumerate()
            .map(|(i, e)| check_entry(e).map_err(|msg| fail(format!("entry {i}: {msg}"))))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Replay {
            entries: Arc::new(entries),
            cursors: Arc::default(),
        })
    }

    /// The recorded answer for `req`, decoded like a live one.
    pub fn answer(&self, req: &QueryRequest) -> Result<QueryResponse, PrometheusError> {
        let entry = self.find(req)?;
        decode(&Origin::replay(), entry.status, entry.body.as_bytes())
    }

    fn find(&self, req: &QueryRequest) -> Result<&Entry, PrometheusError> {
        let miss = |detail: String| PrometheusError::ReplayMiss {
            kind: req.kind(),
            query: req.query().to_string(),
            detail,
        };
        let wanted = Entry::of(req, 0, b"").key;
        let candidates: Vec<usize> = (0..self.entries.len())
            .filter(|&i| {
                self.entries.get(i).is_some_and(|e| {
                    e.query == req.query() && same_series_of_requests(&e.key, &wanted)
                })
            })
            .collect();
        let exact: Vec<usize> = candidates
            .iter()
            .copied()
            .filter(|&i| self.entries.get(i).is_some_and(|e| e.key == wanted))
            .collect();
        let chosen = if let Some(&group) = exact.first() {
            let mut cursors = self.cursors.lock().unwrap_or_else(|p| p.into_inner());
            let next = cursors.entry(group).or_insert(0);
            let pick = exact.get(*next).or(exact.last()).copied();
            if *next < exact.len() {
                *next += 1;
            }
            pick
        } else {
            match candidates.as_slice() {
                [] => return Err(miss("the recording has no entry for it".into())),
                [only] => Some(*only),
                several => {
                    return Err(miss(format!(
                        "{} recorded entries for it, none at the requested time",
                        several.len()
                    )))
                }
            }
        };
        chosen
            .and_then(|i| self.entries.get(i))
            .ok_or_else(|| miss("the recording has no entry for it".into()))
    }
}

/// Same kind, and for range queries the same step.
fn same_series_of_requests(recorded: &Key, wanted: &Key) -> bool {
    match (recorded, wanted) {
        (Key::Instant { .. }, Key::Instant { .. }) => true,
        (Key::Range { step: a, .. }, Key::Range { step: b, .. }) => a == b,
        _ => false,
    }
}

fn check_entry(e: EntryRepr) -> Result<Entry, String> {
    let key = match e.kind.as_str() {
        "instant" => Key::Instant { time: e.time },
        "range" => {
            let (Some(start), Some(end), Some(step)) = (e.start, e.end, e.step) else {
                return Err("a range entry needs `start`, `end` and `step`".into());
            };
            let step = Duration::try_from_secs_f64(step)
                .map_err(|_| format!("`step` {step} is not a valid number of seconds"))?;
            Key::Range { start, end, step }
        }
        other => {
            return Err(format!(
                "`kind` is `{other}`, expected `instant` or `range`"
            ))
        }
    };
    Ok(Entry {
        query: e.query,
        key,
        status: e.status,
        body: e.body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prometheus::response::QueryData;
    use chrono::TimeZone;

    fn body(value: &str) -> String {
        format!(r#"{{"status":"success","data":{{"resultType":"scalar","result":[1,"{value}"]}}}}"#)
    }

    fn scalar(r: Result<QueryResponse, PrometheusError>) -> f64 {
        match r.unwrap().data {
            QueryData::Scalar(s) => s.value,
            other => panic!("{other:?}"),
        }
    }

    fn t(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(secs, 0).unwrap()
    }

    #[test]
    fn round_trip_and_matching() {
        let rec = Recorder::new();
        let at = |s| QueryRequest::instant("q", Some(t(s)));
        rec.record(&at(100), 200, body("1").as_bytes());
        rec.record(&at(200), 200, body("2").as_bytes());
        rec.record(
            &QueryRequest::instant("only", Some(t(5))),
            200,
            body("3").as_bytes(),
        );
        let range = |step_ms| QueryRequest::Range {
            query: "q".into(),
            start: t(0),
            end: t(600),
            step: Duration::from_millis(step_ms),
        };
        rec.record(&range(1500), 200, body("4").as_bytes());
        rec.record(
            &QueryRequest::instant("now", None),
            200,
            body("5").as_bytes(),
        );
        rec.record(
            &QueryRequest::instant("now", None),
            200,
            body("6").as_bytes(),
        );
        let replay = Replay::from_json(&rec.to_json()).unwrap();
        assert_eq!(replay.len(), 6);

        assert_eq!(scalar(replay.answer(&at(200))), 2.0);
        assert_eq!(scalar(replay.answer(&at(100))), 1.0);
        // Two candidates, neither at the requested time: ambiguous.
        let e = replay.answer(&at(150)).unwrap_err();
        assert!(
            matches!(&e, PrometheusError::ReplayMiss { query, .. } if query == "q"),
            "{e}"
        );
        assert!(e.to_string().contains("`q`"), "{e}");
        // A single candidate answers whatever the time.
        assert_eq!(
            scalar(replay.answer(&QueryRequest::instant("only", None))),
            3.0
        );
        assert_eq!(scalar(replay.answer(&range(1500))), 4.0);
        // The step is part of the key.
        assert!(matches!(
            replay.answer(&range(1000)),
            Err(PrometheusError::ReplayMiss { .. })
        ));
        // Repeated exact matches are served in order, the last repeating.
        let now = QueryRequest::instant("now", None);
        assert_eq!(scalar(replay.answer(&now)), 5.0);
        assert_eq!(scalar(replay.answer(&now)), 6.0);
        assert_eq!(scalar(replay.answer(&now)), 6.0);
        let e = replay
            .answer(&QueryRequest::instant("absent{a=\"b\"}", None))
            .unwrap_err();
        assert!(e.to_string().contains("absent{a=\"b\"}"), "{e}");
    }

    #[test]
    fn errors_replay_as_errors() {
        let rec = Recorder::new();
        let req = QueryRequest::instant("bad(", None);
        rec.record(
            &req,
            400,
            br#"{"status":"error","errorType":"bad_data","error":"parse error"}"#,
        );
        let replay = Replay::from_json(&rec.to_json()).unwrap();
        match replay.answer(&req) {
            Err(PrometheusError::Api {
                status: 400,
                error_type,
                ..
            }) => assert_eq!(error_type, "bad_data"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn file_format() {
        let rec = Recorder::new();
        rec.record(&QueryRequest::instant("up", None), 200, b"{}");
        let v: serde_json::Value = serde_json::from_str(&rec.to_json()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"version":1,"entries":[
                {"kind":"instant","query":"up","time":null,"status":200,"body":"{}"}]})
        );
        let text = r#"{"version":1,"entries":[{"kind":"range","query":"up",
            "start":"2024-01-01T00:00:00Z","end":"2024-01-01T01:00:00+01:00","step":30,
            "status":200,"body":"{}"}]}"#;
        let replay = Replay::from_json(text).unwrap();
        let req = QueryRequest::Range {
            query: "up".into(),
            start: "2024-01-01T00:00:00Z".parse().unwrap(),
            end: "2024-01-01T00:00:00Z".parse().unwrap(),
            step: Duration::from_secs(30),
        };
        assert_eq!(replay.find(&req).unwrap().status, 200);
    }

    #[test]
    fn invalid_files() {
        for text in [
            "",
            "{}",
            r#"{"version":2,"entries":[]}"#,
            r#"{"version":1,"entries":[{"kind":"range","query":"q","status":200,"body":""}]}"#,
            r#"{"version":1,"entries":[{"kind":"series","query":"q","status":200,"body":""}]}"#,
            r#"{"version":1,"entries":[{"kind":"range","query":"q","start":"2024-01-01T00:00:00Z","end":"2024-01-01T00:00:00Z","step":-1,"status":200,"body":""}]}"#,
        ] {
            assert!(
                matches!(
                    Replay::from_json(text),
                    Err(PrometheusError::Recording { .. })
                ),
                "{text}"
            );
        }
        let e = Replay::load(Path::new("/nonexistent/rec.json"))
            .err()
            .unwrap();
        assert!(e.to_string().contains("/nonexistent/rec.json"), "{e}");
    }
}
