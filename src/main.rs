//! The `rollgate` binary: chooses plugin mode or the CLI, and maps errors to exit codes.

use std::process::ExitCode;

/// mimalloc instead of glibc's allocator: a Flagger check through `serve` makes about 200
/// allocations (most in hyper and reqwest), and glibc's malloc and free were a fifth of
/// serve's instructions per check (`cargo bench --bench serve_load instructions`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    rollgate::cli::main()
}
