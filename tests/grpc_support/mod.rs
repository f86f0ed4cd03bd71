//! What the gRPC tests and the gRPC benchmark share: `grpchost` (the Go go-plugin host that
//! allows gRPC, tests/gohost/cmd/grpchost) built once per process with Debian's Go toolchain in
//! GOPATH mode, and the API's descriptor set written to a file for it.
//!
//! Include with `#[path = "grpc_support/mod.rs"] mod grpc_support;` (benches: `../tests/...`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Where the gocode tree of Debian's golang-*-dev packages lives; override with `GOHOST_GOCODE`.
const DEFAULT_GOCODE: &str = "/usr/share/gocode";

/// Import path under which the GOPATH sees tests/gohost.
const IMPORT_ROOT: &str = "rollgate.test/gohost";

fn work_dir() -> PathBuf {
    match option_env!("CARGO_TARGET_TMPDIR") {
        Some(d) => PathBuf::from(d).join("grpchost"),
        None => std::env::temp_dir().join("rollgate-grpchost"),
    }
}

/// The built grpchost binary; panics with go's output if the build fails.
pub fn grpchost() -> PathBuf {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match BUILT.get_or_init(build) {
        Ok(p) => p.clone(),
        Err(e) => panic!("building grpchost failed: {e}"),
    }
}

/// The encoded FileDescriptorSet of `rollgate.v1`, written to a file (once per process).
pub fn descriptor_file() -> PathBuf {
    static WRITTEN: OnceLock<PathBuf> = OnceLock::new();
    WRITTEN
        .get_or_init(|| {
            let dir = work_dir();
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join(format!("rollgate_v1-{}.bin", std::process::id()));
            std::fs::write(&path, rollgate::grpc::FILE_DESCRIPTOR_SET).unwrap();
            path
        })
        .clone()
}

fn link_sources(gopath: &Path) -> Result<(), String> {
    let link = gopath.join("src").join(IMPORT_ROOT);
    let target = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("gohost");
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
        Err(e) => Err(format!("linking {}: {e}", link.display())),
    }
}

fn build() -> Result<PathBuf, String> {
    let root = work_dir();
    let gopath = root.join("gopath");
    link_sources(&gopath)?;
    // Build into a private name, then rename: concurrent test processes never run a
    // half-written binary.
    let staging = root.join(format!("grpchost.tmp.{}", std::process::id()));
    let target = root.join("grpchost");
    let gocode = std::env::var("GOHOST_GOCODE").unwrap_or_else(|_| DEFAULT_GOCODE.to_string());
    let gocache = std::env::var_os("GOCACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("gocache"));
    let go = std::env::var("GO").unwrap_or_else(|_| "go".to_string());
    let output = Command::new(&go)
        .arg("build")
        .arg("-o")
        .arg(&staging)
        .arg(format!("{IMPORT_ROOT}/cmd/grpchost"))
        .env("GO111MODULE", "off")
        .env("GOPATH", format!("{}:{gocode}", gopath.display()))
        .env("GOFLAGS", "")
        .env("CGO_ENABLED", "0")
        .env("GOCACHE", &gocache)
        .current_dir(&root)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running `{go} build` (is golang-go installed?): {e}"))?;
    if !output.status.success() {
        let _ = std::fs::remove_file(&staging);
        return Err(format!(
            "`{go} build` failed ({}); grpchost needs golang-go, golang-github-hashicorp-go-plugin-dev, golang-google-grpc-dev and golang-google-protobuf-dev:\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    std::fs::rename(&staging, &target)
        .map_err(|e| format!("moving grpchost to {}: {e}", target.display()))?;
    Ok(target)
}
