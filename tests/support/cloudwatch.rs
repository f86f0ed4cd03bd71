//! CloudWatch for the tests: moto's server (PyPI `moto[server]`) on 127.0.0.1, loaded by
//! `cloudwatch_moto.py` through CloudWatch's own PutMetricData, one per test binary.
//!
//! Namespace `Rollgate/Test`, one datapoint a minute from `base - 2h` to `base + 1h` (`base`:
//! a whole minute when the server started), so a check at `base` over 5m sees five datapoints:
//!
//! | Service (dimension) | Requests/min | Errors/min | ErrorRate | 5m at base |
//! |---|---|---|---|---|
//! | `healthy` | 6000 | 6 | 0.001 | 30000 requests, 30 errors |
//! | `bad` | 6000 | 300 | 0.05 | 30000, 1500 |
//! | `lowtraffic` | 3 | 0 | 0 | 15, 0 |
//! | `idle` | 0 | 0 | none (0/0) | 0, 0 |
//! | `absent` | none | none | none | no datapoints |
//! | `cmp-healthy`, Track `canary`/`stable` | 600 each | 6 each | | 10m: 6000 / 60 a side |
//! | `cmp-bad`, Track `canary`/`stable` | 600 each | 60 / 6 | | 10m: 6000 / 600 against 6000 / 60 |
//!
//! Latency (ms, one a minute): `lat-shift` Track `stable` between 100 and 120, `canary` 1.4
//! times it; `lat-same` both the same.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};

/// The shared moto server.
pub struct Moto {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The whole minute the data is written around (Unix seconds).
    pub base: i64,
    /// Kept open: the server stops when it closes (when the test process ends).
    _process: Mutex<(Child, ChildStdin)>,
}

static SHARED: OnceLock<Result<Moto, String>> = OnceLock::new();

/// The test binary's one moto server with the scenarios above (started on first use).
pub fn shared() -> &'static Moto {
    let server = SHARED.get_or_init(|| {
        let base = super::scenarios::base_now();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/cloudwatch_moto.py");
        let mut child = Command::new("python3")
            .arg(script)
            .args(["--base", &base.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("python3: {e}"))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().ok_or("no stdout")?)
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        let port = line.strip_prefix("READY ").ok_or_else(|| {
            format!("moto did not start (is it installed? `pip install 'moto[server]'`): {line:?}")
        })?;
        Ok(Moto {
            url: format!("http://127.0.0.1:{}", port.trim()),
            base,
            _process: Mutex::new((child, stdin)),
        })
    });
    match server {
        Ok(s) => s,
        Err(e) => panic!("the shared moto server did not start: {e}"),
    }
}
