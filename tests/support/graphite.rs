//! A real graphite-web (Debian's graphite-web 1.1.8) over whisper files, for the Graphite
//! backend's tests.
//!
//! `GraphiteServer::start` writes the data set as text, then runs `graphite_web.py` under
//! Debian's own python3 (Django and graphite live there; another python3 first on `PATH` has
//! neither) and the Prometheus harness's watchdog (`prom::spawn_watched`: nothing outlives the
//! test process). The script writes one whisper file per metric (60 s points, 7 days), writes
//! graphite-web's settings module (no carbon links, `REPLICATION_FACTOR = 0`, UTC) and serves
//! graphite-web on 127.0.0.1 on a port the kernel picks, which it prints to its log. No carbon
//! daemon runs: the render API reads whisper files directly, and a file written before the
//! server starts is complete.
//!
//! The data (`dataset`) ends at `base` (a whole minute, two minutes before the start, so every
//! point lies in the past: graphite-web's whisper reader never answers beyond the real now)
//! and starts three hours earlier; one point per minute on whole minutes. Queries at `base`
//! with `from=-5min` see the five points `base-4m ..= base`.
//!
//! `GRAPHITE_PYTHON` overrides the interpreter (default `/usr/bin/python3`).

use std::fmt::Write as _;
use std::io::Write;
use std::net::SocketAddr;
use std::process::{Child, ChildStdin};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::prom::{spawn_watched, tail, wait_ready};

/// How long graphite-web may take to start before the test fails.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Minutes of history before `base`.
const HISTORY_MINUTES: i64 = 180;

/// One scenario: per-minute counts of requests and errors under `app.<name>.<track>.`.
#[derive(Clone, Copy, Debug)]
pub struct Counts {
    /// The metric path's service part.
    pub service: &'static str,
    /// `canary` or `stable`.
    pub track: &'static str,
    /// Requests per minute.
    pub requests: u64,
    /// Errors per minute.
    pub errors: u64,
    /// Minutes before `base` after which no point is stored (`None`: points up to `base`).
    pub stops: Option<i64>,
}

impl Counts {
    /// `app.<service>.<track>.<what>`.
    pub fn path(&self, what: &str) -> String {
        format!("app.{}.{}.{what}", self.service, self.track)
    }

    /// The window's sum of a count, as one point (`summarize` aligned to `from`).
    pub fn sum_query(&self, what: &str, minutes: u32) -> String {
        format!(
            "target=summarize({}, \"{minutes}min\", \"sum\", true)&from=-{minutes}min",
            self.path(what)
        )
    }

    /// The window's error ratio, as one point.
    pub fn ratio_query(&self, minutes: u32) -> String {
        format!(
            "target=divideSeries(summarize({}, \"{minutes}min\", \"sum\", true), summarize({}, \"{minutes}min\", \"sum\", true))&from=-{minutes}min",
            self.path("errors"),
            self.path("requests")
        )
    }
}

/// 6000 requests a minute, 0.1 % errors: 5 min at base: 30000 / 30.
pub const HEALTHY: Counts = Counts {
    service: "healthy",
    track: "canary",
    requests: 6000,
    errors: 6,
    stops: None,
};
/// 6000 requests a minute, 5 % errors: 5 min at base: 30000 / 1500.
pub const BAD: Counts = Counts {
    service: "bad",
    errors: 300,
    ..HEALTHY
};
/// 3 requests a minute, no errors: 15 per 5 min.
pub const LOWTRAFFIC: Counts = Counts {
    service: "lowtraffic",
    requests: 3,
    errors: 0,
    ..HEALTHY
};
/// No requests at all (stored zeros): the ratio is 0/0, which divideSeries answers as null.
pub const IDLE: Counts = Counts {
    service: "idle",
    requests: 0,
    errors: 0,
    ..HEALTHY
};
/// Healthy, but the last two minutes are not stored yet (null points at the window's end).
pub const LATE: Counts = Counts {
    service: "late",
    stops: Some(2),
    ..HEALTHY
};
/// A service with no metrics at all.
pub const ABSENT_SERVICE: &str = "absent";
/// Compare, equal: canary 2400 / 12 a minute (0.5 %), stable 2640 / 13 (0.49 %).
pub const CMP_EQUAL_CANARY: Counts = Counts {
    service: "cmp-healthy",
    track: "canary",
    requests: 2400,
    errors: 12,
    stops: None,
};
/// See [`CMP_EQUAL_CANARY`].
pub const CMP_EQUAL_STABLE: Counts = Counts {
    track: "stable",
    requests: 2640,
    errors: 13,
    ..CMP_EQUAL_CANARY
};
/// Compare, canary worse: canary 2400 / 72 a minute (3 %), stable as [`CMP_EQUAL_STABLE`].
pub const CMP_BAD_CANARY: Counts = Counts {
    service: "cmp-bad",
    errors: 72,
    ..CMP_EQUAL_CANARY
};
/// See [`CMP_BAD_CANARY`].
pub const CMP_BAD_STABLE: Counts = Counts {
    service: "cmp-bad",
    ..CMP_EQUAL_STABLE
};

/// Every counts scenario of the data set.
pub const COUNTS: &[Counts] = &[
    HEALTHY,
    BAD,
    LOWTRAFFIC,
    IDLE,
    LATE,
    CMP_EQUAL_CANARY,
    CMP_EQUAL_STABLE,
    CMP_BAD_CANARY,
    CMP_BAD_STABLE,
];

/// `app.lat.<track>.p99` gauges for the distribution form: stable around 100 ms, canary around
/// 100 ms (`lat-same`) or 140 ms (`lat-shift`), with a deterministic wobble of ±5 ms.
pub fn latency_path(service: &str, track: &str) -> String {
    format!("app.{service}.{track}.p99")
}

/// The data set's lines (`path unix_seconds value`).
pub fn dataset(base: i64) -> String {
    let mut out = String::new();
    for minute in -HISTORY_MINUTES..=0 {
        let t = base + minute * 60;
        for c in COUNTS {
            if c.stops.is_some_and(|stop| minute > -stop) {
                continue;
            }
            let _ = writeln!(out, "{} {t} {}", c.path("requests"), c.requests);
            let _ = writeln!(out, "{} {t} {}", c.path("errors"), c.errors);
        }
        let wobble = ((minute * 7).rem_euclid(11) - 5) as f64 / 1000.0;
        for (service, track, ms) in [
            ("lat-same", "stable", 0.100),
            ("lat-same", "canary", 0.100),
            ("lat-shift", "stable", 0.100),
            ("lat-shift", "canary", 0.140),
        ] {
            let _ = writeln!(out, "{} {t} {}", latency_path(service, track), ms + wobble);
        }
    }
    out
}

/// A running graphite-web over the data set; stopped (its files removed) on drop.
pub struct GraphiteServer {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The data set's end (Unix seconds, a whole minute).
    pub base: i64,
    /// From spawning the interpreter until the render API answered.
    pub ready_in: Duration,
    watchdog: Child,
    stdin: Option<ChildStdin>,
    _dir: tempfile::TempDir,
}

impl GraphiteServer {
    /// Writes the data set ending at `base` and starts graphite-web over it. Panics with its
    /// log on failure.
    pub fn start(base: i64) -> GraphiteServer {
        let dir = tempfile::Builder::new()
            .prefix("rollgate-graphite-")
            .tempdir()
            .expect("temp dir");
        let data = dir.path().join("data.txt");
        std::fs::write(&data, dataset(base)).expect("write data");
        let log = dir.path().join("graphite-web.log");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/graphite_web.py");
        let python = std::env::var("GRAPHITE_PYTHON").unwrap_or_else(|_| "/usr/bin/python3".into());
        let started = Instant::now();
        let (watchdog, stdin, pid) = spawn_watched(
            "rollgate-graphite-watchdog",
            dir.path(),
            &log,
            &python,
            &[
                "-u".to_string(),
                script.to_string(),
                dir.path().display().to_string(),
                data.display().to_string(),
            ],
        );
        let mut server = GraphiteServer {
            url: String::new(),
            base,
            ready_in: Duration::ZERO,
            watchdog,
            stdin: Some(stdin),
            _dir: dir,
        };
        let port = loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(port) = text
                .lines()
                .find_map(|l| l.strip_prefix("listening ")?.trim().parse::<u16>().ok())
            {
                break port;
            }
            if !super::prom::alive(pid) || started.elapsed() > READY_TIMEOUT {
                server.stop();
                panic!("graphite-web did not start; its log:\n{}", tail(&log));
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        if let Err(e) = wait_ready(
            addr,
            "/render?target=app.healthy.canary.requests&format=json&from=-10min",
            pid,
            &log,
            READY_TIMEOUT,
        ) {
            server.stop();
            panic!("graphite-web did not answer: {e}");
        }
        server.url = format!("http://{addr}");
        server.ready_in = started.elapsed();
        server
    }

    fn stop(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.flush();
        }
        let _ = self.watchdog.wait();
    }
}

impl Drop for GraphiteServer {
    fn drop(&mut self) {
        self.stop();
    }
}

static SHARED: OnceLock<Result<GraphiteServer, String>> = OnceLock::new();

/// The test binary's one graphite-web (started on first use, stopped when the process exits);
/// a failed start fails every test that needs it, without starting another.
pub fn shared() -> &'static GraphiteServer {
    let server = SHARED.get_or_init(|| {
        std::panic::catch_unwind(|| {
            let now = super::prom::now() as i64;
            let base = now - now.rem_euclid(60) - 120;
            let server = GraphiteServer::start(base);
            eprintln!(
                "shared graphite-web at {}: ready in {:?}",
                server.url, server.ready_in
            );
            server
        })
        .map_err(|e| {
            e.downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        })
    });
    match server {
        Ok(s) => s,
        Err(e) => panic!("the shared graphite-web did not start: {e}"),
    }
}
