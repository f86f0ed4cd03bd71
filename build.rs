//! Generates the gRPC code from `proto/` at build time with protox (a protobuf compiler in Rust),
//! so no system `protoc` is needed, and keeps the encoded descriptors for server reflection.
//! Also names the commit the binary is built from, for `rollgate --version`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// rollgate's public API.
const API_PROTO: &str = "proto/rollgate/v1/metric_provider.proto";
/// The go-plugin services a plugin serves in gRPC mode.
const GOPLUGIN_PROTO: &str = "proto/goplugin/plugin.proto";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let commit = commit();
    println!("cargo:rustc-env=ROLLGATE_COMMIT={commit}");
    let out = PathBuf::from(std::env::var("OUT_DIR")?);

    let mut api = protox::Compiler::new(["proto"])?;
    api.include_imports(true).include_source_info(true);
    api.open_file(API_PROTO)?;
    std::fs::write(
        out.join("rollgate_v1_descriptor.bin"),
        api.encode_file_descriptor_set(),
    )?;
    tonic_prost_build::configure()
        .build_client(false)
        .build_transport(false)
        .compile_fds(api.file_descriptor_set())?;

    let goplugin = protox::compile([GOPLUGIN_PROTO], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(false)
        .build_transport(false)
        .compile_fds(goplugin)?;
    Ok(())
}

/// The commit being built: git's when this source tree is a git checkout, else `ROLLGATE_COMMIT`
/// (a build from a source archive), else "unknown". Only the commit, never the time or a
/// "dirty" mark, so that two builds of one commit are the same bytes.
fn commit() -> String {
    println!("cargo:rerun-if-env-changed=ROLLGATE_COMMIT");
    if let Some(commit) = git_commit() {
        return commit;
    }
    match std::env::var("ROLLGATE_COMMIT") {
        Ok(c)
            if !c.is_empty()
                && c.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) =>
        {
            c
        }
        _ => "unknown".to_string(),
    }
}

/// HEAD's hash, if git runs and this crate is the top of its checkout (a source archive
/// unpacked inside some other repository must not take that repository's commit).
fn git_commit() -> Option<String> {
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git").args(args).output().ok()?;
        if !out.status.success() {
            return None;
        }
        Some(String::from_utf8(out.stdout).ok()?.trim().to_string())
    };
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR")?);
    let top = PathBuf::from(git(&[
        "-C",
        manifest_dir.to_str()?,
        "rev-parse",
        "--show-toplevel",
    ])?);
    if top.canonicalize().ok()? != manifest_dir.canonicalize().ok()? {
        return None;
    }
    let commit = git(&["-C", manifest_dir.to_str()?, "rev-parse", "HEAD"])?;
    if commit.len() != 40 || !commit.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    // A new commit moves HEAD's branch (or HEAD itself when detached); packed refs change when
    // git packs them. Only files that exist: cargo runs the script every time for one that
    // does not.
    for path in ["HEAD", "packed-refs"]
        .into_iter()
        .map(str::to_string)
        .chain(git(&[
            "-C",
            manifest_dir.to_str()?,
            "symbolic-ref",
            "-q",
            "HEAD",
        ]))
    {
        if let Some(file) = git(&[
            "-C",
            manifest_dir.to_str()?,
            "rev-parse",
            "--git-path",
            &path,
        ]) {
            let file = manifest_dir.join(file);
            if Path::new(&file).exists() {
                println!("cargo:rerun-if-changed={}", file.display());
            }
        }
    }
    Some(commit)
}
