//! What the gRPC tests and the gRPC benchmark share: `grpchost` (the Go go-plugin host that
//! allows gRPC, tests/gohost/cmd/grpchost) built once per process by `support::gohost::go_build`,
//! and the API's descriptor set written to a file for it. Needs `mod support;` beside it.
//!
//! Include with `#[path = "grpc_support/mod.rs"] mod grpc_support;` (benches: `../tests/...`).
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::OnceLock;

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

fn build() -> Result<PathBuf, String> {
    let root = work_dir();
    // Build into a private name, then rename: concurrent test processes never run a
    // half-written binary.
    let staging = root.join(format!("grpchost.tmp.{}", std::process::id()));
    let target = root.join("grpchost");
    if let Err(e) = crate::support::gohost::go_build(&root, &["cmd/grpchost"], &staging) {
        let _ = std::fs::remove_file(&staging);
        return Err(e);
    }
    std::fs::rename(&staging, &target)
        .map_err(|e| format!("moving grpchost to {}: {e}", target.display()))?;
    Ok(target)
}
