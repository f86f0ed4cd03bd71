//! Generates the gRPC code from `proto/` at build time with protox (a protobuf compiler in Rust),
//! so no system `protoc` is needed, and keeps the encoded descriptors for server reflection.

use std::path::PathBuf;

/// rollgate's public API.
const API_PROTO: &str = "proto/rollgate/v1/metric_provider.proto";
/// The go-plugin services a plugin serves in gRPC mode.
const GOPLUGIN_PROTO: &str = "proto/goplugin/plugin.proto";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
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
