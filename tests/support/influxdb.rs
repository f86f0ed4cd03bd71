//! A real InfluxDB 1.x (Debian's `influxdb`, 1.6) with generated data, for tests.
//!
//! `InfluxServer::start` writes a config whose every listener is on 127.0.0.1 (HTTP on a free
//! port, the RPC service on another; UDP, Graphite, collectd and OpenTSDB inputs stay off by
//! default), with authentication on, the `_internal` monitor store, continuous queries and
//! reporting off (they only cost CPU). `influxd` reads `INFLUXDB_*` variables over its config
//! file, so it runs with a clean environment (`env -i`). It runs under the Prometheus harness's
//! watchdog (`prom::spawn_watched`): nothing outlives the test process.
//!
//! Once `/ping` answers, the first user (`admin`) is created (InfluxDB allows that one
//! without credentials), then the database `rollgate`, the read-only user `reader` and the
//! data: one `POST /write` of line protocol.
//!
//! Data (measurement `requests`, tags `service` and `track`, float fields `total` and `errors`
//! per 15 s point from base-3h to base+1h; figures over the 5 minutes ending at `base`, i.e.
//! 20 points, and over 10 minutes for the compare pairs):
//!
//! | service | track | 5 m total / errors |
//! |---|---|---|
//! | `healthy` | canary | 30000 / 30 (0.1 %) |
//! | `bad` | canary | 30000 / 1500 (5 %) |
//! | `lowtraffic` | canary | 15 / 0 |
//! | `idle` | canary | 0 / 0 (InfluxQL's 0/0 is 0, not NaN) |
//! | `cmp-healthy` | canary, stable | 10 m: 60000 / 60 each |
//! | `cmp-bad` | canary / stable | 10 m: 60000 / 600 against 60000 / 60 |
//!
//! Measurement `latency` (field `seconds`, tags `service`, `track`, every 15 s): `lat-shift`
//! canary 40 % above stable, `lat-same` equal (both spread by a fixed pattern). Measurements
//! `argo` and `argo_ts` hold the two values Argo's own provider tests feed (see
//! `tests/it/backend_influxdb.rs`).
//!
//! `INFLUXD` in the environment overrides the binary (default: from `PATH`).

use std::fmt::Write as _;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, ChildStdin};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::prom::{
    alive, binary, free_port, http_get, read_answer, spawn_watched, tail, urlencode,
};
use super::scenarios::base_now;

/// How long influxd may take to answer `/ping` before the test fails.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Seconds between points.
pub const STEP: i64 = 15;
/// The database the data is in.
pub const DATABASE: &str = "rollgate";
/// The read-only user the tests query as.
pub const READER: &str = "reader";
/// Its password.
pub const READER_PASSWORD: &str = "r3ader-pa55word-4-tests";
const ADMIN: &str = "admin";
const ADMIN_PASSWORD: &str = "adm1n-pa55word-4-tests";

/// One request-count series: per point `total` requests and `errors` of them.
#[derive(Clone, Copy, Debug)]
pub struct Requests {
    /// The `service` tag.
    pub service: &'static str,
    /// The `track` tag.
    pub track: &'static str,
    /// Requests per 15 s point.
    pub total: f64,
    /// Errors per 15 s point.
    pub errors: f64,
}

impl Requests {
    fn filter(&self) -> String {
        format!(
            "\"service\" = '{}' AND \"track\" = '{}'",
            self.service, self.track
        )
    }

    /// The error ratio over the window `$timeFilter` sets.
    pub fn ratio_query(&self) -> String {
        format!(
            "SELECT sum(\"errors\") / sum(\"total\") FROM \"requests\" WHERE {} AND $timeFilter",
            self.filter()
        )
    }

    /// The request count over the window.
    pub fn total_query(&self) -> String {
        format!(
            "SELECT sum(\"total\") FROM \"requests\" WHERE {} AND $timeFilter",
            self.filter()
        )
    }

    /// The error count over the window.
    pub fn bad_query(&self) -> String {
        format!(
            "SELECT sum(\"errors\") FROM \"requests\" WHERE {} AND $timeFilter",
            self.filter()
        )
    }
}

pub const HEALTHY: Requests = Requests {
    service: "healthy",
    track: "canary",
    total: 1500.0,
    errors: 1.5,
};
pub const BAD: Requests = Requests {
    service: "bad",
    track: "canary",
    total: 1500.0,
    errors: 75.0,
};
pub const LOWTRAFFIC: Requests = Requests {
    service: "lowtraffic",
    track: "canary",
    total: 0.75,
    errors: 0.0,
};
pub const IDLE: Requests = Requests {
    service: "idle",
    track: "canary",
    total: 0.0,
    errors: 0.0,
};
/// A service with no points at all.
pub const ABSENT: Requests = Requests {
    service: "absent",
    track: "canary",
    total: 0.0,
    errors: 0.0,
};
pub const CMP_HEALTHY_CANARY: Requests = Requests {
    service: "cmp-healthy",
    track: "canary",
    total: 1500.0,
    errors: 1.5,
};
pub const CMP_HEALTHY_STABLE: Requests = Requests {
    track: "stable",
    ..CMP_HEALTHY_CANARY
};
pub const CMP_BAD_CANARY: Requests = Requests {
    service: "cmp-bad",
    track: "canary",
    total: 1500.0,
    errors: 15.0,
};
pub const CMP_BAD_STABLE: Requests = Requests {
    track: "stable",
    errors: 1.5,
    ..CMP_BAD_CANARY
};
const WRITTEN: &[Requests] = &[
    HEALTHY,
    BAD,
    LOWTRAFFIC,
    IDLE,
    CMP_HEALTHY_CANARY,
    CMP_HEALTHY_STABLE,
    CMP_BAD_CANARY,
    CMP_BAD_STABLE,
];

/// A latency series: `base_seconds` times a fixed spread pattern.
#[derive(Clone, Copy, Debug)]
pub struct Latency {
    /// The `service` tag.
    pub service: &'static str,
    /// The `track` tag.
    pub track: &'static str,
    /// The middle of the spread.
    pub seconds: f64,
}

impl Latency {
    /// The mean latency per `$interval` bucket over `$timeFilter`.
    pub fn query(&self) -> String {
        format!(
            "SELECT mean(\"seconds\") FROM \"latency\" WHERE \"service\" = '{}' AND \"track\" = '{}' AND $timeFilter GROUP BY time($interval)",
            self.service, self.track
        )
    }
}

pub const LAT_SHIFT_STABLE: Latency = Latency {
    service: "lat-shift",
    track: "stable",
    seconds: 0.1,
};
pub const LAT_SHIFT_CANARY: Latency = Latency {
    track: "canary",
    seconds: 0.14,
    ..LAT_SHIFT_STABLE
};
pub const LAT_SAME_STABLE: Latency = Latency {
    service: "lat-same",
    track: "stable",
    seconds: 0.1,
};
pub const LAT_SAME_CANARY: Latency = Latency {
    track: "canary",
    ..LAT_SAME_STABLE
};
const LATENCIES: &[Latency] = &[
    LAT_SHIFT_STABLE,
    LAT_SHIFT_CANARY,
    LAT_SAME_STABLE,
    LAT_SAME_CANARY,
];

/// The values Argo's provider tests feed (metricproviders/influxdb/influxdb_test.go, v1.9.1):
/// `TestRunSuccessfully` (measurement `argo`) and `TestRunWithTimeseries` (`argo_ts`), at
/// these seconds before `base`.
pub const ARGO_POINTS: &[(&str, i64, &str)] = &[
    ("argo", -200, "1.0"),
    ("argo", -100, "6.6"),
    ("argo_ts", -200, "10"),
    ("argo_ts", -100, "20"),
];

/// The line protocol of the whole data set for `base`.
pub fn dataset(base: i64) -> String {
    let mut out = String::new();
    let from = base - 3 * 3600;
    let to = base + 3600;
    let mut t = from;
    let mut i = 0usize;
    while t <= to {
        for r in WRITTEN {
            let _ = writeln!(
                out,
                "requests,service={},track={} total={:?},errors={:?} {t}",
                r.service, r.track, r.total, r.errors
            );
        }
        // A fixed spread around the middle: 0.8, 0.9, 1.0, 1.1, 1.2 times it.
        let spread = 0.8 + 0.1 * (i % 5) as f64;
        for l in LATENCIES {
            let _ = writeln!(
                out,
                "latency,service={},track={} seconds={:?} {t}",
                l.service,
                l.track,
                l.seconds * spread
            );
        }
        t += STEP;
        i += 1;
    }
    for (m, at, v) in ARGO_POINTS {
        let _ = writeln!(out, "{m},a=1,b=adsfasdf f={v} {}", base + at);
    }
    out
}

/// A running influxd with the data set; stopped (and its data removed) on drop.
pub struct InfluxServer {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The HTTP listener.
    pub addr: SocketAddr,
    /// The data set's time base (Unix seconds, a whole minute).
    pub base: i64,
    /// A file holding `READER_PASSWORD`.
    pub password_file: PathBuf,
    /// From spawn to data written.
    pub started_in: Duration,
    pid: u32,
    watchdog: Child,
    stdin: Option<ChildStdin>,
    _dir: tempfile::TempDir,
}

impl InfluxServer {
    /// Starts influxd and loads the data set for `base`. Panics with its log on failure.
    pub fn start(base: i64) -> InfluxServer {
        let started = Instant::now();
        let dir = tempfile::Builder::new()
            .prefix("rollgate-influx-")
            .tempdir()
            .expect("temp dir");
        let log = dir.path().join("influxd.log");
        let config = dir.path().join("influxdb.conf");
        let port = free_port();
        let rpc = free_port();
        let root = dir.path().display().to_string();
        std::fs::write(
            &config,
            format!(
                r#"reporting-disabled = true
bind-address = "127.0.0.1:{rpc}"
[meta]
  dir = "{root}/meta"
[data]
  dir = "{root}/data"
  wal-dir = "{root}/wal"
  query-log-enabled = false
[monitor]
  store-enabled = false
[http]
  bind-address = "127.0.0.1:{port}"
  auth-enabled = true
  log-enabled = false
[continuous_queries]
  enabled = false
[subscriber]
  enabled = false
"#
            ),
        )
        .expect("write config");
        let password_file = dir.path().join("reader-password");
        std::fs::write(&password_file, format!("{READER_PASSWORD}\n")).expect("password file");
        let args = vec![
            "-i".to_string(),
            "PATH=/usr/sbin:/usr/bin:/sbin:/bin".to_string(),
            binary("INFLUXD", "influxd"),
            "-config".to_string(),
            config.display().to_string(),
        ];
        let (watchdog, stdin, pid) =
            spawn_watched("rollgate-influx-watchdog", dir.path(), &log, "env", &args);
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut server = InfluxServer {
            url: format!("http://127.0.0.1:{port}"),
            addr,
            base,
            password_file,
            started_in: Duration::ZERO,
            pid,
            watchdog,
            stdin: Some(stdin),
            _dir: dir,
        };
        wait_ping(addr, pid, &log);
        let admin = Some((ADMIN, ADMIN_PASSWORD));
        server.admin_query(
            None,
            &format!("CREATE USER {ADMIN} WITH PASSWORD '{ADMIN_PASSWORD}' WITH ALL PRIVILEGES"),
        );
        server.admin_query(admin, &format!("CREATE DATABASE {DATABASE}"));
        server.admin_query(
            admin,
            &format!("CREATE USER {READER} WITH PASSWORD '{READER_PASSWORD}'"),
        );
        server.admin_query(admin, &format!("GRANT READ ON {DATABASE} TO {READER}"));
        let (status, body) = server.post(
            &format!("/write?db={DATABASE}&precision=s"),
            admin,
            dataset(base).as_bytes(),
        );
        assert_eq!(
            status,
            204,
            "write: {}; log:\n{}",
            String::from_utf8_lossy(&body),
            tail(&log)
        );
        server.started_in = started.elapsed();
        server
    }

    /// The influxd process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    fn admin_query(&self, user: Option<(&str, &str)>, q: &str) {
        let (status, body) = self.post("/query", user, format!("q={}", urlencode(q)).as_bytes());
        let text = String::from_utf8_lossy(&body);
        assert!(
            status == 200 && !text.contains("\"error\""),
            "{q}: HTTP {status} {text}"
        );
    }

    /// A blocking HTTP/1.0 POST (form body for `/query`, line protocol for `/write`).
    pub fn post(&self, path: &str, user: Option<(&str, &str)>, body: &[u8]) -> (u16, Vec<u8>) {
        let mut s =
            TcpStream::connect_timeout(&self.addr, Duration::from_secs(10)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let auth = user
            .map(|(u, p)| {
                format!(
                    "Authorization: Basic {}\r\n",
                    super::stub::base64(format!("{u}:{p}").as_bytes())
                )
            })
            .unwrap_or_default();
        let content_type = if path.starts_with("/query") {
            "application/x-www-form-urlencoded"
        } else {
            "text/plain"
        };
        write!(
            s,
            "POST {path} HTTP/1.0\r\nHost: {}\r\n{auth}Content-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.addr,
            body.len()
        )
        .unwrap();
        s.write_all(body).unwrap();
        read_answer(&mut s).expect("answer")
    }
}

/// Polls `/ping` until it answers 204 (1.6 has no 200 form of it); panics with the log when
/// influxd exits or `READY_TIMEOUT` passes.
fn wait_ping(addr: SocketAddr, pid: u32, log: &std::path::Path) {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Ok((204, _)) = http_get(addr, "/ping", Duration::from_secs(2)) {
            return;
        }
        assert!(alive(pid), "influxd exited; its log:\n{}", tail(log));
        assert!(
            Instant::now() < deadline,
            "influxd did not answer /ping within {READY_TIMEOUT:?}; its log:\n{}",
            tail(log)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Drop for InfluxServer {
    fn drop(&mut self) {
        self.stdin.take();
        let _ = self.watchdog.wait();
    }
}

static SHARED: OnceLock<Result<InfluxServer, String>> = OnceLock::new();

/// The test binary's one influxd with `dataset(base_now())` (started on first use, stopped
/// when the process exits).
pub fn shared() -> &'static InfluxServer {
    let server = SHARED.get_or_init(|| {
        std::panic::catch_unwind(|| {
            let server = InfluxServer::start(base_now());
            eprintln!(
                "shared InfluxDB at {}: started and loaded in {:?}",
                server.url, server.started_in
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
        Err(e) => panic!("the shared InfluxDB did not start: {e}"),
    }
}
