//! Standard output that fails in words, not in a panic: `print!` panics when the reader has
//! gone (`meshsim topo big.yaml | head`) or the disk is full. [`out!`] and [`outln!`] write the
//! same text and return an [`OutputError`], which `main` turns into a quiet exit (closed pipe)
//! or one line and exit 1 (any other write error).

use std::io::Write;

/// Standard output could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the output: {0}")]
pub struct OutputError(#[from] pub std::io::Error);

impl OutputError {
    /// Whether the reader closed the pipe: nobody is left to tell, so meshsim exits quietly.
    pub fn is_closed_pipe(&self) -> bool {
        self.0.kind() == std::io::ErrorKind::BrokenPipe
    }
}

/// Writes `args` to standard output and flushes it.
pub fn write(args: std::fmt::Arguments<'_>) -> Result<(), OutputError> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_fmt(args)?;
    stdout.flush()?;
    Ok(())
}

/// `print!` returning `Result<(), OutputError>`.
macro_rules! out {
    ($($arg:tt)*) => { $crate::out::write(format_args!($($arg)*)) };
}

/// `println!` returning `Result<(), OutputError>`.
macro_rules! outln {
    ($($arg:tt)*) => { $crate::out::write(format_args!("{}\n", format_args!($($arg)*))) };
}

pub(crate) use {out, outln};
