//! Writing the CLI's results to standard output.
//!
//! `print!` panics when the reader has gone (`rollgate rules … | head` exits 101 on EPIPE).
//! As ripgrep does, a closed pipe means the reader has what it wanted: stop quietly with
//! success. Any other write error is reported once and ends the process with the Error code.

use std::io::{ErrorKind, Write};

use super::exit;

/// Writes `args` to standard output and flushes it.
// Exits from here: the caller is deep in a command's output, and a closed pipe ends the whole
// process (as ripgrep does); there is nothing left to unwind to.
#[allow(clippy::exit)]
pub(crate) fn print(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        if e.kind() == ErrorKind::BrokenPipe {
            std::process::exit(i32::from(exit::SUCCESSFUL));
        }
        eprintln!("rollgate: cannot write to standard output: {e}");
        std::process::exit(i32::from(exit::ERROR));
    }
}

/// `println!` through [`print`].
macro_rules! outln {
    () => {
        $crate::cli::stdout::print(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::stdout::print(format_args!("{}\n", format_args!($($arg)*)))
    };
}
pub(crate) use outln;
