//! The `rollgate` binary: chooses plugin mode or the CLI, and maps errors to exit codes.

use std::process::ExitCode;

fn main() -> ExitCode {
    rollgate::cli::main()
}
