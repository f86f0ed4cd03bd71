//! Builds and runs `gohost`, the Go program that plays the Argo Rollouts controller against a
//! plugin binary, and `goplugin-baseline`, a plain Go plugin (see tests/gohost/README.md).
//!
//! Both are built once per test process with Debian's Go toolchain in GOPATH mode (no network),
//! into `$CARGO_TARGET_TMPDIR/gohost/bin`.
#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

/// Where the gocode tree of Debian's golang-*-dev packages lives; override with `GOHOST_GOCODE`.
const DEFAULT_GOCODE: &str = "/usr/share/gocode";

/// Import path under which the GOPATH sees tests/gohost.
const IMPORT_ROOT: &str = "rollgate.test/gohost";

/// How long to wait for gohost's pipes to close once it has exited.
const PIPE_GRACE: Duration = Duration::from_secs(10);

/// Default wall-clock limit for one gohost run.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// Paths of the two built Go binaries.
#[derive(Debug, Clone)]
pub struct GoHost {
    /// The controller stand-in (`gohost <subcommand> -plugin BIN ...`).
    pub host: PathBuf,
    /// The Go baseline metric plugin.
    pub baseline_plugin: PathBuf,
}

/// The outcome of one gohost run.
#[derive(Debug)]
pub struct HostRun {
    /// Exit status (0: all checks passed, 1: a check failed, 2: usage or set-up error).
    pub status: ExitStatus,
    /// Whether the run was killed for exceeding its time limit.
    pub timed_out: bool,
    /// Everything gohost printed on stdout.
    pub stdout: String,
    /// Everything gohost (and, unless redirected, the plugin) printed on stderr.
    pub stderr: String,
    /// Each non-empty stdout line parsed as JSON (gohost prints one JSON value per line).
    pub json: Vec<serde_json::Value>,
}

impl HostRun {
    /// True when gohost exited 0 in time.
    pub fn ok(&self) -> bool {
        !self.timed_out && self.status.success()
    }

    /// The single JSON value printed by every subcommand but `calls`; panics with the output
    /// if there is not exactly one.
    pub fn value(&self) -> &serde_json::Value {
        match self.json.as_slice() {
            [v] => v,
            _ => panic!(
                "expected one JSON value from gohost, got {}\nstdout:\n{}\nstderr:\n{}",
                self.json.len(),
                self.stdout,
                self.stderr
            ),
        }
    }

    /// Panics with stdout and stderr unless gohost exited 0 in time.
    pub fn assert_ok(&self) -> &Self {
        assert!(
            self.ok(),
            "gohost failed ({}, timed out: {})\nstdout:\n{}\nstderr:\n{}",
            self.status,
            self.timed_out,
            self.stdout,
            self.stderr
        );
        self
    }
}

/// Builds both binaries (once per process) and returns their paths; panics with go's stderr if
/// the build fails.
pub fn build() -> GoHost {
    static BUILT: OnceLock<Result<GoHost, String>> = OnceLock::new();
    match BUILT.get_or_init(build_uncached) {
        Ok(h) => h.clone(),
        Err(e) => panic!("building gohost failed: {e}"),
    }
}

fn work_dir() -> PathBuf {
    // Set by cargo for integration tests and benches only.
    match option_env!("CARGO_TARGET_TMPDIR") {
        Some(d) => PathBuf::from(d).join("gohost"),
        None => std::env::temp_dir().join("rollgate-gohost"),
    }
}

fn source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("gohost")
}

/// Makes `<gopath>/src/rollgate.test/gohost` a symlink to tests/gohost (tolerating another test
/// process doing the same at the same time).
fn link_sources(gopath: &Path) -> Result<(), String> {
    let link = gopath.join("src").join(IMPORT_ROOT);
    let target = source_dir();
    if let Some(parent) = link.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("creating {}: {e}", parent.display()))?;
    }
    if std::fs::read_link(&link).is_ok_and(|t| t == target) {
        return Ok(());
    }
    let _ = std::fs::remove_file(&link);
    match std::os::unix::fs::symlink(&target, &link) {
        Ok(()) => Ok(()),
        Err(_) if std::fs::read_link(&link).is_ok_and(|t| t == target) => Ok(()),
        Err(e) => Err(format!(
            "linking {} -> {}: {e}",
            link.display(),
            target.display()
        )),
    }
}

/// Builds `packages` (paths below tests/gohost) with Debian's Go in GOPATH mode into `out` (a
/// file, or a directory when it ends in `/`); `root` holds the GOPATH link and the Go cache.
pub fn go_build(root: &Path, packages: &[&str], out: &Path) -> Result<(), String> {
    let gopath = root.join("gopath");
    link_sources(&gopath)?;
    let gocode = std::env::var("GOHOST_GOCODE").unwrap_or_else(|_| DEFAULT_GOCODE.to_string());
    let gocache = std::env::var_os("GOCACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("gocache"));
    let go = std::env::var("GO").unwrap_or_else(|_| "go".to_string());
    let output = Command::new(&go)
        .arg("build")
        .arg("-o")
        .arg(out)
        .args(packages.iter().map(|p| format!("{IMPORT_ROOT}/{p}")))
        .env("GO111MODULE", "off")
        .env("GOPATH", format!("{}:{gocode}", gopath.display()))
        .env("GOFLAGS", "")
        .env("CGO_ENABLED", "0")
        .env("GOCACHE", &gocache)
        .current_dir(root)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running `{go} build` (is golang-go installed?): {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{go} build` failed ({}); tests/gohost needs golang-go, golang-github-hashicorp-go-plugin-dev, golang-google-grpc-dev and golang-google-protobuf-dev:\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

fn build_uncached() -> Result<GoHost, String> {
    let root = work_dir();
    let bin = root.join("bin");
    // Build into a private directory, then rename: concurrent test processes never see a
    // half-written binary.
    let staging = root.join(format!("bin.tmp.{}", std::process::id()));
    std::fs::create_dir_all(&staging)
        .map_err(|e| format!("creating {}: {e}", staging.display()))?;
    std::fs::create_dir_all(&bin).map_err(|e| format!("creating {}: {e}", bin.display()))?;
    let mut out_dir = staging.clone().into_os_string();
    out_dir.push("/");
    if let Err(e) = go_build(
        &root,
        &["cmd/gohost", "cmd/goplugin-baseline"],
        Path::new(&out_dir),
    ) {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    for name in ["gohost", "goplugin-baseline"] {
        std::fs::rename(staging.join(name), bin.join(name))
            .map_err(|e| format!("moving {name} into {}: {e}", bin.display()))?;
    }
    let _ = std::fs::remove_dir_all(&staging);
    Ok(GoHost {
        host: bin.join("gohost"),
        baseline_plugin: bin.join("goplugin-baseline"),
    })
}

impl GoHost {
    /// A `gohost <subcommand> -plugin <plugin>` command; append flags, then plugin args after
    /// `--`.
    pub fn command(&self, subcommand: &str, plugin: &Path) -> Command {
        let mut cmd = Command::new(&self.host);
        cmd.arg(subcommand).arg("-plugin").arg(plugin);
        cmd
    }

    /// Runs `gohost <subcommand> -plugin <plugin> <args...>` with the default time limit.
    pub fn run(&self, subcommand: &str, plugin: &Path, args: &[&str]) -> HostRun {
        let mut cmd = self.command(subcommand, plugin);
        cmd.args(args);
        run_command(cmd, DEFAULT_TIMEOUT)
    }

    /// Runs `gohost calls` with `calls` (a JSON list of calls, or `{"run":..., "calls":[...]}`)
    /// written to a temporary file; `json` then holds one value per call.
    pub fn calls(&self, plugin: &Path, calls: &serde_json::Value, args: &[&str]) -> HostRun {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let dir = work_dir().join("calls");
        if let Err(e) = std::fs::create_dir_all(&dir) {
            panic!("creating {}: {e}", dir.display());
        }
        let file = dir.join(format!(
            "{}-{}.json",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        if let Err(e) = std::fs::write(&file, calls.to_string()) {
            panic!("writing {}: {e}", file.display());
        }
        let mut cmd = self.command("calls", plugin);
        cmd.arg("-calls").arg(&file).args(args);
        let run = run_command(cmd, DEFAULT_TIMEOUT);
        let _ = std::fs::remove_file(&file);
        run
    }
}

/// Reads a pipe to its end on a thread. The result comes through a channel so that a plugin
/// process that outlives a killed gohost (and holds the pipe open) cannot block the test.
fn drain<R: Read + Send + 'static>(r: Option<R>) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut r) = r {
            let _ = r.read_to_end(&mut buf);
        }
        let _ = tx.send(String::from_utf8_lossy(&buf).into_owned());
    });
    rx
}

fn wait_with_limit(child: &mut Child, limit: Duration) -> (ExitStatus, bool) {
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return (status, false),
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                match child.wait() {
                    Ok(status) => return (status, true),
                    Err(e) => panic!("waiting for gohost: {e}"),
                }
            }
        }
    }
}

/// Runs a prepared gohost command, killing it after `limit`, and parses its stdout lines.
pub fn run_command(mut cmd: Command, limit: Duration) -> HostRun {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => panic!("starting {cmd:?}: {e}"),
    };
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let (status, timed_out) = wait_with_limit(&mut child, limit);
    let stdout = out.recv_timeout(PIPE_GRACE).unwrap_or_default();
    let stderr = err.recv_timeout(PIPE_GRACE).unwrap_or_default();
    let json = stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| match serde_json::from_str(l) {
            Ok(v) => v,
            Err(e) => {
                panic!("gohost printed a line that is not JSON ({e}): {l}\nstderr:\n{stderr}")
            }
        })
        .collect();
    HostRun {
        status,
        timed_out,
        stdout,
        stderr,
        json,
    }
}
