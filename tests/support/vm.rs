//! A real single-node VictoriaMetrics with imported data, for tests.
//!
//! `VmServer::start` runs Debian's `victoria-metrics` on a free 127.0.0.1 port under the same
//! watchdog as the Prometheus harness (`prom::spawn_watched`: nothing outlives the test process),
//! waits for `/health`, imports the data set through `POST /api/v1/import/prometheus` (the
//! OpenMetrics text of `scenarios`, converted by `scenarios::to_prometheus_import`), then calls
//! `/internal/force_flush` so that every sample is searchable at once.
//!
//! What makes queries at the scenario times deterministic (VictoriaMetrics v1.79.5, the Debian
//! package; files of github.com/VictoriaMetrics/VictoriaMetrics at tag v1.79.5):
//! - `-retentionPeriod=100y`: rows older than the retention are dropped at ingestion
//!   (`lib/storage/storage.go`, "too small timestamp"); rows more than 2 days ahead are too
//!   (`lib/storage/table.go` `getMinMaxTimestamps`). The data spans base-3h..base+1h.
//! - `-search.latencyOffset=1s` (the smallest value it takes): an instant query whose `time` is
//!   within the offset of "now" is moved back by it (`app/vmselect/prometheus/prometheus.go`
//!   `QueryHandler`), and a range query's last points are adjusted. `start` returns only when
//!   `base` is more than 2 s in the past.
//! - `-search.disableCache`: no rollup result cached from before the import is ever served.
//! - no `-dedup.minScrapeInterval` (single-node default): every sample is kept.
//!
//! The import is checked: `vm_rows_ignored_total` (too small/big timestamps) must stay 0.
//! NaN samples are dropped at ingestion by design (`storage.go`: "Skip NaNs other than
//! Prometheus staleness marker"), see docs/backends.md.
//!
//! `VICTORIA_METRICS` in the environment overrides the binary (default: from `PATH`).

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, ChildStdin};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::prom::{
    binary, free_port, http_get, read_answer, spawn_watched, start_once, tail, wait_ready,
};
use super::scenarios;

/// How long VictoriaMetrics may take to answer `/health` before the test fails.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// `-search.latencyOffset`; queries at `base` are only sent once `base` is older than this
/// (plus a margin).
const LATENCY_OFFSET: Duration = Duration::from_secs(1);

/// A running VictoriaMetrics loaded with a data set; stopped (and its data removed) on drop.
pub struct VmServer {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The listening address.
    pub addr: SocketAddr,
    /// The data set's time base (Unix seconds, a whole minute; see `scenarios`).
    pub base: i64,
    /// Rows the import handler parsed (`vm_rows_inserted_total{type="prometheus"}`; NaN
    /// samples are counted there, then dropped by the storage).
    pub imported: u64,
    pid: u32,
    watchdog: Child,
    stdin: Option<ChildStdin>,
    dir: Option<tempfile::TempDir>,
}

impl VmServer {
    /// Starts VictoriaMetrics and imports `dataset` (OpenMetrics text ending in `# EOF`,
    /// generated for time base `base`). Panics with its log on failure.
    pub fn start(base: i64, dataset: &str) -> VmServer {
        let dir = tempfile::Builder::new()
            .prefix("rollgate-vm-")
            .tempdir()
            .expect("temp dir");
        let log = dir.path().join("victoria-metrics.log");
        let data = dir.path().join("data");
        let mut last_error = String::new();
        // A port found free may be taken before VictoriaMetrics binds it: try a few.
        for _attempt in 0..5 {
            let port = free_port();
            let args = [
                format!("-storageDataPath={}", data.display()),
                format!("-httpListenAddr=127.0.0.1:{port}"),
                "-retentionPeriod=100y".to_string(),
                format!("-search.latencyOffset={}s", LATENCY_OFFSET.as_secs()),
                "-search.disableCache".to_string(),
                "-loggerLevel=WARN".to_string(),
            ];
            let (watchdog, stdin, pid) = spawn_watched(
                "rollgate-vm-watchdog",
                dir.path(),
                &log,
                &binary("VICTORIA_METRICS", "victoria-metrics"),
                &args,
            );
            let mut server = VmServer {
                url: format!("http://127.0.0.1:{port}"),
                addr: SocketAddr::from(([127, 0, 0, 1], port)),
                base,
                imported: 0,
                pid,
                watchdog,
                stdin: Some(stdin),
                dir: None,
            };
            match wait_ready(server.addr, "/health", pid, &log, READY_TIMEOUT) {
                Ok(()) => {
                    server.dir = Some(dir);
                    server.import(dataset, &log);
                    server.wait_past_latency_offset();
                    return server;
                }
                Err(e) => {
                    server.stop(true);
                    if !e.contains("address already in use") {
                        panic!("victoria-metrics did not start: {e}");
                    }
                    last_error = e;
                }
            }
        }
        panic!("victoria-metrics did not start: {last_error}");
    }

    /// The VictoriaMetrics process id (to check that it is gone after drop).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The directory holding its data and log (removed after drop).
    pub fn dir(&self) -> Option<std::path::PathBuf> {
        self.dir.as_ref().map(|d| d.path().to_path_buf())
    }

    /// Imports the data set, flushes it to searchable parts and checks that nothing was dropped
    /// for its timestamp.
    fn import(&mut self, dataset: &str, log: &Path) {
        let text = scenarios::to_prometheus_import(dataset);
        let (status, body) = http_post(self.addr, "/api/v1/import/prometheus", text.as_bytes())
            .unwrap_or_else(|e| panic!("import: {e}; log:\n{}", tail(log)));
        assert!(
            (200..300).contains(&status),
            "import: HTTP {status}: {}",
            String::from_utf8_lossy(&body)
        );
        let (status, body) = http_get(self.addr, "/internal/force_flush", Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("force_flush: {e}"));
        assert_eq!(
            status,
            200,
            "force_flush: {}",
            String::from_utf8_lossy(&body)
        );
        let metrics = self.metrics();
        for reason in ["big_timestamp", "small_timestamp"] {
            let ignored = metric_value(
                &metrics,
                &format!("vm_rows_ignored_total{{reason=\"{reason}\"}}"),
            );
            assert_eq!(
                ignored,
                Some(0.0),
                "rows ignored for {reason}; log:\n{}",
                tail(log)
            );
        }
        self.imported = metric_value(&metrics, "vm_rows_inserted_total{type=\"prometheus\"}")
            .unwrap_or(0.0) as u64;
    }

    /// The server's own `/metrics` text.
    pub fn metrics(&self) -> String {
        let (_, body) = http_get(self.addr, "/metrics", Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("GET /metrics: {e}"));
        String::from_utf8_lossy(&body).into_owned()
    }

    /// Sleeps until `base` is older than `-search.latencyOffset` plus a margin, so that an
    /// instant query at `base` is evaluated at `base` (never moved back).
    fn wait_past_latency_offset(&self) {
        let ready_at = self.base as f64 + LATENCY_OFFSET.as_secs_f64() + 1.0;
        let wait = ready_at - super::prom::now();
        if wait > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(wait));
        }
    }

    fn stop(&mut self, keep_data: bool) {
        if let Some(mut stdin) = self.stdin.take() {
            if keep_data {
                let _ = stdin.write_all(b"keep\n");
            }
        }
        let _ = self.watchdog.wait();
    }
}

impl Drop for VmServer {
    fn drop(&mut self) {
        self.stop(false);
    }
}

/// The value of the exposition line starting with `series ` in `/metrics` text.
fn metric_value(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|l| {
        l.strip_prefix(series)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
    })
}

/// A minimal blocking HTTP/1.0 POST of `body` (the answer ends at EOF): (status, body).
fn http_post(addr: SocketAddr, path: &str, body: &[u8]) -> std::io::Result<(u16, Vec<u8>)> {
    let timeout = Duration::from_secs(120);
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    write!(
        s,
        "POST {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    s.write_all(body)?;
    read_answer(&mut s)
}

static SHARED: OnceLock<Result<VmServer, String>> = OnceLock::new();

/// The test binary's one VictoriaMetrics with `scenarios::standard_dataset` imported (started
/// on first use, stopped when the process exits).
pub fn shared() -> &'static VmServer {
    start_once(&SHARED, "VictoriaMetrics", |base, text| {
        let t = Instant::now();
        let server = VmServer::start(base, text);
        let what = format!(
            "at {}: {} samples imported, ready in {:?}",
            server.url,
            server.imported,
            t.elapsed()
        );
        (server, what)
    })
}
