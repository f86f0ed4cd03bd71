//! The plugin process's start-up contract, as the controller sees it: cookie, protocol
//! versions, the one handshake line on stdout, the socket's mode, and signals.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn plugin() -> Command {
    let mut cmd = Command::new(crate::support::rollgate_bin());
    cmd.env_remove("ARGO_ROLLOUTS_RPC_PLUGIN")
        .env_remove("PLUGIN_PROTOCOL_VERSIONS")
        .env_remove("PLUGIN_UNIX_SOCKET_DIR")
        .env_remove("PLUGIN_UNIX_SOCKET_GROUP")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn wait_bounded(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            panic!("plugin did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} failed");
}

#[test]
fn without_the_cookie_it_explains_and_exits_with_a_usage_error() {
    // Run by hand: the help, which says how the controller starts plugin mode (64: a usage
    // error, as for every command line that cannot run).
    let out = plugin().output().unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("ARGO_ROLLOUTS_RPC_PLUGIN=metricprovider"),
        "{err}"
    );
    // A wrong cookie: go-plugin's guidance.
    let out = plugin()
        .env("ARGO_ROLLOUTS_RPC_PLUGIN", "trafficrouter")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("This binary is a plugin"), "{err}");
}

#[test]
fn unsupported_protocol_versions_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let out = plugin()
        .env("ARGO_ROLLOUTS_RPC_PLUGIN", "metricprovider")
        .env("PLUGIN_PROTOCOL_VERSIONS", "2,3")
        .env("PLUGIN_UNIX_SOCKET_DIR", dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("2,3") && err.contains("version 1"), "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn announces_a_private_socket_ignores_sigint_and_cleans_up_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = plugin()
        .env("ARGO_ROLLOUTS_RPC_PLUGIN", "metricprovider")
        .env("PLUGIN_PROTOCOL_VERSIONS", "1")
        .env("PLUGIN_MIN_PORT", "10000")
        .env("PLUGIN_MAX_PORT", "25000")
        .env("PLUGIN_UNIX_SOCKET_DIR", dir.path())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let fields: Vec<&str> = line.trim_end_matches('\n').split('|').collect();
    assert_eq!(fields.len(), 6, "{line:?}");
    assert_eq!(&fields[..3], ["1", "1", "unix"]);
    assert_eq!(&fields[4..], ["netrpc", ""]);
    let socket = PathBuf::from(fields[3]);
    assert!(socket.starts_with(dir.path()), "{socket:?}");
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    signal(&child, "-INT");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "SIGINT ended the plugin"
    );

    signal(&child, "-TERM");
    let status = wait_bounded(&mut child, Duration::from_secs(5));
    assert!(status.success(), "{status:?}");
    assert!(!socket.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // Nothing but the handshake line was written to stdout.
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert_eq!(rest, "");
}

/// The level a go-plugin host logs one plugin stderr line at (hashicorp/go-plugin v1.6.3,
/// client.go `logStderr` and log_entry.go `parseJSON`): lines longer than the 64 KiB read
/// buffer at debug; a JSON object by its `@level` (a string `@message` and a `@timestamp` in
/// `2006-01-02T15:04:05.000000Z07:00` are required for it to parse), with no level at debug;
/// plain text by its `[TRACE]`..`[ERROR]` prefix, else debug.
fn go_plugin_level(line: &str) -> String {
    if line.len() >= 64 * 1024 {
        return "debug".into();
    }
    let json = serde_json::from_str::<serde_json::Value>(line)
        .ok()
        .filter(|v| v.is_object());
    if let Some(v) = json {
        let message_ok = v.get("@message").is_none_or(|m| m.is_string());
        let ts_ok = v
            .get("@timestamp")
            .is_none_or(|t| t.as_str().is_some_and(go_hclog_time));
        if message_ok && ts_ok {
            // hclog.LevelFromString: case-insensitive names; anything else is no level.
            let level = v["@level"].as_str().unwrap_or("").to_ascii_lowercase();
            return match level.as_str() {
                "trace" | "debug" | "info" | "warn" | "error" => level,
                _ => "debug".into(),
            };
        }
    }
    for (prefix, level) in [
        ("[TRACE]", "trace"),
        ("[DEBUG]", "debug"),
        ("[INFO]", "info"),
        ("[WARN]", "warn"),
        ("[ERROR]", "error"),
    ] {
        if line.starts_with(prefix) {
            return level.into();
        }
    }
    "debug".into()
}

/// Whether Go's `time.Parse("2006-01-02T15:04:05.000000Z07:00", t)` accepts `t`: exactly six
/// fraction digits, then `Z` or a `±hh:mm` offset.
fn go_hclog_time(t: &str) -> bool {
    let (Some(head), Some(rest)) = (t.get(..19), t.get(19..)) else {
        return false;
    };
    let digits = rest
        .get(1..7)
        .is_some_and(|d| d.bytes().all(|b| b.is_ascii_digit()));
    let zone = rest.get(7..).unwrap_or("");
    let zone_ok = zone == "Z"
        || (zone.len() == 6
            && zone.starts_with(['+', '-'])
            && chrono::NaiveTime::parse_from_str(&zone[1..], "%H:%M").is_ok());
    chrono::NaiveDateTime::parse_from_str(head, "%Y-%m-%dT%H:%M:%S").is_ok()
        && rest.starts_with('.')
        && digits
        && zone_ok
}

#[test]
fn go_plugin_level_reads_lines_as_the_host_does() {
    let ok = r#"{"@level":"error","@message":"m","@timestamp":"2026-01-02T03:04:05.000000Z"}"#;
    assert_eq!(go_plugin_level(ok), "error");
    let bad_ts = r#"{"@level":"error","@message":"m","@timestamp":"2026-01-02T03:04:05Z"}"#;
    assert_eq!(go_plugin_level(bad_ts), "debug");
    let offset =
        r#"{"@level":"WARN","@message":"m","@timestamp":"2026-01-02T03:04:05.123456+02:00"}"#;
    assert_eq!(go_plugin_level(offset), "warn");
    assert_eq!(
        go_plugin_level(r#"{"@level":"error","@message":3}"#),
        "debug"
    );
    assert_eq!(go_plugin_level("[ERROR] plain"), "error");
    assert_eq!(go_plugin_level("error: plain"), "debug");
}

/// Starts the plugin under the cookie with `args` and `env`; returns (exit code, stdout,
/// stderr lines).
fn start_failing(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = plugin();
    cmd.env("ARGO_ROLLOUTS_RPC_PLUGIN", "metricprovider")
        .env("PLUGIN_PROTOCOL_VERSIONS", "1")
        .env("PLUGIN_UNIX_SOCKET_DIR", dir.path())
        .env_remove("ROLLGATE_LOG")
        .env_remove("ROLLGATE_PROMETHEUS_ADDRESS")
        .env_remove("ROLLGATE_PLUGIN_PROTOCOL")
        .args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let status = wait_bounded(&mut child, Duration::from_secs(10));
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let lines = err.lines().map(str::to_string).collect();
    (status.code(), out, lines)
}

/// A start-up failure: what, the arguments, the environment, words the message must contain.
type FailureCase<'a> = (&'a str, Vec<&'a str>, Vec<(&'a str, &'a str)>, Vec<&'a str>);

#[test]
fn every_startup_failure_is_one_hclog_error_line() {
    let not_a_dir = tempfile::NamedTempFile::new().unwrap();
    let not_a_dir = not_a_dir.path().to_str().unwrap().to_string();
    let cases: Vec<FailureCase<'_>> = vec![
        (
            "unknown argument",
            vec!["--prometheus-url", "x"],
            vec![],
            vec!["--prometheus-url"],
        ),
        (
            "bad protocol",
            vec!["--protocol", "http"],
            vec![],
            vec!["http", "netrpc"],
        ),
        (
            "bad --prometheus",
            vec!["--prometheus", "ftp://p:9090"],
            vec![],
            vec!["--prometheus", "http://"],
        ),
        (
            "bad ROLLGATE_PROMETHEUS_ADDRESS",
            vec![],
            vec![("ROLLGATE_PROMETHEUS_ADDRESS", "prometheus:9090")],
            vec!["ROLLGATE_PROMETHEUS_ADDRESS", "http://"],
        ),
        (
            "bad --log-level",
            vec!["--log-level", "verbose"],
            vec![],
            vec![
                "\"verbose\"",
                "--log-level",
                "error, warn, info, debug, trace",
            ],
        ),
        (
            "bad ROLLGATE_LOG",
            vec![],
            vec![("ROLLGATE_LOG", "loud")],
            vec![
                "\"loud\"",
                "ROLLGATE_LOG",
                "error, warn, info, debug, trace",
            ],
        ),
        (
            "socket dir not a directory",
            vec![],
            vec![("PLUGIN_UNIX_SOCKET_DIR", not_a_dir.as_str())],
            vec!["cannot create the plugin socket", not_a_dir.as_str()],
        ),
        (
            "unsupported protocol version",
            vec![],
            vec![("PLUGIN_PROTOCOL_VERSIONS", "2,3")],
            vec!["2,3", "version 1"],
        ),
        (
            "wrong cookie",
            vec![],
            vec![("ARGO_ROLLOUTS_RPC_PLUGIN", "trafficrouter")],
            vec!["This binary is a plugin"],
        ),
    ];
    for (what, args, env, words) in cases {
        let (code, out, lines) = start_failing(&args, &env);
        assert_eq!(code, Some(1), "{what}: {lines:?}");
        assert_eq!(out, "", "{what}: stdout");
        assert_eq!(
            lines.len(),
            1,
            "{what}: one stderr line expected: {lines:?}"
        );
        assert_eq!(go_plugin_level(&lines[0]), "error", "{what}: {}", lines[0]);
        let v: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        let message = v["@message"].as_str().unwrap();
        for w in words {
            assert!(message.contains(w), "{what}: {w:?} not in {message:?}");
        }
    }
}

#[test]
fn every_argument_can_be_set_by_environment_alone() {
    // Argo Rollouts before v1.7 passes no `args`: ROLLGATE_* set the same things. A valid
    // environment starts the plugin; ROLLGATE_PLUGIN_PROTOCOL=grpc shows in the handshake.
    let dir = tempfile::tempdir().unwrap();
    let mut child = plugin()
        .env("ARGO_ROLLOUTS_RPC_PLUGIN", "metricprovider")
        .env("PLUGIN_PROTOCOL_VERSIONS", "1")
        .env("PLUGIN_UNIX_SOCKET_DIR", dir.path())
        .env("ROLLGATE_LOG", "debug")
        .env("ROLLGATE_PROMETHEUS_ADDRESS", "http://127.0.0.1:9")
        .env("ROLLGATE_PLUGIN_PROTOCOL", "grpc")
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    signal(&child, "-TERM");
    let status = wait_bounded(&mut child, Duration::from_secs(5));
    assert!(line.contains("|grpc|"), "{line:?}");
    assert!(status.success(), "{status:?}");
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    // ROLLGATE_LOG=debug took effect: the serving debug line is there, as hclog JSON.
    assert!(
        err.lines()
            .any(|l| go_plugin_level(l) == "debug" && l.contains("serving")),
        "{err}"
    );
}

/// Starts the plugin with its socket under `dir`; returns it and the announced socket path.
fn start_serving(dir: &std::path::Path) -> (Child, PathBuf) {
    let mut child = plugin()
        .env("ARGO_ROLLOUTS_RPC_PLUGIN", "metricprovider")
        .env("PLUGIN_PROTOCOL_VERSIONS", "1")
        .env("PLUGIN_UNIX_SOCKET_DIR", dir)
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let socket = PathBuf::from(line.trim_end().split('|').nth(3).unwrap_or_default());
    assert!(socket.starts_with(dir), "{line:?}");
    (child, socket)
}

#[test]
fn the_socket_directory_of_a_killed_plugin_is_removed_by_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let (mut first, first_socket) = start_serving(dir.path());
    signal(&first, "-KILL");
    wait_bounded(&mut first, Duration::from_secs(5));
    let leftover = first_socket.parent().unwrap().to_path_buf();
    assert!(first_socket.exists(), "SIGKILL leaves the socket behind");
    let (mut second, second_socket) = start_serving(dir.path());
    assert!(!leftover.exists(), "{} is still there", leftover.display());
    assert!(second_socket.exists());
    signal(&second, "-TERM");
    assert!(wait_bounded(&mut second, Duration::from_secs(5)).success());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// Both plugin modes start through one host layer (src/plugin_host): for the same environment,
/// including blank and whitespace-only variables (which the two modes used to read
/// differently), the handshake lines agree in every field but the protocol and the socket's
/// unique directory name, and both end on SIGTERM with their directory removed.
#[test]
fn both_plugin_modes_print_the_same_handshake_for_the_same_environment() {
    let dir = tempfile::tempdir().unwrap();
    let envs: [&[(&str, &str)]; 3] = [
        &[("PLUGIN_PROTOCOL_VERSIONS", "1")],
        &[("PLUGIN_PROTOCOL_VERSIONS", "3, 1, x")],
        // Blank means not given: no group, default versions, no AutoMTLS.
        &[
            ("PLUGIN_PROTOCOL_VERSIONS", " "),
            ("PLUGIN_UNIX_SOCKET_GROUP", " "),
            ("PLUGIN_CLIENT_CERT", "  "),
        ],
    ];
    for env in envs {
        let mut lines = Vec::new();
        for protocol in ["netrpc", "grpc"] {
            let mut cmd = plugin();
            cmd.env("ARGO_ROLLOUTS_RPC_PLUGIN", "metricprovider")
                .env("ROLLGATE_PLUGIN_PROTOCOL", protocol)
                .env("PLUGIN_UNIX_SOCKET_DIR", dir.path())
                .envs(env.iter().copied());
            let mut child = cmd.spawn().unwrap();
            let mut line = String::new();
            BufReader::new(child.stdout.take().unwrap())
                .read_line(&mut line)
                .unwrap();
            signal(&child, "-TERM");
            let status = wait_bounded(&mut child, Duration::from_secs(5));
            assert!(status.success(), "{protocol} {env:?}: {status:?}");
            lines.push(line);
        }
        let fields = |l: &str| -> Vec<String> {
            l.trim_end_matches('\n')
                .split('|')
                .map(str::to_string)
                .collect()
        };
        let (net, grpc) = (fields(&lines[0]), fields(&lines[1]));
        assert_eq!(net.len(), 6, "{lines:?}");
        assert_eq!(grpc.len(), 6, "{lines:?}");
        assert_eq!((net[4].as_str(), grpc[4].as_str()), ("netrpc", "grpc"));
        assert_eq!(net[..3], grpc[..3], "{env:?}: {lines:?}");
        assert_eq!(net[5], grpc[5], "{env:?}: {lines:?}");
        // Same place and name of the socket, in each process's own directory.
        for f in [&net, &grpc] {
            let p = std::path::Path::new(&f[3]);
            assert_eq!(
                p.parent().and_then(|d| d.parent()),
                Some(dir.path()),
                "{f:?}"
            );
            assert_eq!(p.file_name().unwrap(), "plugin.sock", "{f:?}");
        }
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "a socket directory was left behind"
        );
    }
}
