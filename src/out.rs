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

thread_local! {
    /// Where this thread's output goes instead of standard output, while [`capture`] runs.
    static CAPTURED: std::cell::RefCell<Option<Vec<u8>>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with this thread's output collected instead of printed, and returns both. Commands
/// print from the thread that runs them (sweep points and regression scenarios run on others,
/// but their tables are printed at the end), so everything a command prints is collected.
/// If `f` panics, the thread's output goes back to where it went before.
pub fn capture<T>(f: impl FnOnce() -> T) -> (T, Vec<u8>) {
    /// Puts back the previous destination however `f` ends.
    struct Restore(Option<Vec<u8>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let before = self.0.take();
            CAPTURED.with(|c| *c.borrow_mut() = before);
        }
    }
    let restore = Restore(CAPTURED.with(|c| c.borrow_mut().replace(Vec::new())));
    let value = f();
    let text = CAPTURED.with(|c| c.borrow_mut().take()).unwrap_or_default();
    drop(restore);
    (value, text)
}

/// Writes `args` to standard output and flushes it (or to the buffer of a [`capture`]).
pub fn write(args: std::fmt::Arguments<'_>) -> Result<(), OutputError> {
    let captured = CAPTURED.with(|c| c.borrow_mut().as_mut().map(|buf| buf.write_fmt(args)));
    if let Some(result) = captured {
        return Ok(result?);
    }
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
