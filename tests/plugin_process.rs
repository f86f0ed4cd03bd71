//! The plugin process's start-up contract, as the controller sees it: cookie, protocol
//! versions, the one handshake line on stdout, the socket's mode, and signals.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn plugin() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rollgate"));
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
fn without_the_cookie_it_explains_and_exits_1() {
    // Run by hand: the help, which says how the controller starts plugin mode.
    let out = plugin().output().unwrap();
    assert_eq!(out.status.code(), Some(1));
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
