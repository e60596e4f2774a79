//! meshsim's command line run inside another program, its output returned instead of printed:
//! the way the Python package calls meshsim. Every command, flag, check and message is the
//! binary's own, so a result equals the binary's on the same arguments.

use std::sync::atomic::Ordering;

pub use crate::{Failure, FailureKind};

/// What one command gave: its exit code, everything it printed, and why it failed if it did.
pub struct Invocation {
    /// The exit code the binary would return: 0 success, 1 a check or the simulation failed,
    /// 2 bad input, 130 a sweep interrupted by [`interrupt`].
    pub code: u8,
    /// What the binary would print on standard output.
    pub stdout: String,
    /// The error it ended with, if any; `None` also when a check failed with a verdict in
    /// `stdout` (a calibration point out of tolerance, a moved regression scenario).
    pub failure: Option<Failure>,
    /// Whether meshsim panicked: a bug in meshsim, `failure` holding the panic's message.
    pub internal: bool,
}

/// Runs `meshsim ARGS...` in this process and thread (`args` without the program's name) and
/// returns what it printed. Clears a previous [`interrupt`] first.
pub fn invoke(args: &[String]) -> Invocation {
    crate::STOP.store(false, Ordering::SeqCst);
    let argv: Vec<std::ffi::OsString> =
        std::iter::once("meshsim".into()).chain(args.iter().map(Into::into)).collect();
    match std::panic::catch_unwind(|| crate::out::capture(|| crate::execute(&argv))) {
        Ok((ended, stdout)) => Invocation {
            code: ended.code,
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            failure: ended.failure,
            internal: false,
        },
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("a panic without a message");
            let message = format!("internal error (please report): {what}");
            Invocation {
                code: 1,
                stdout: String::new(),
                failure: Some(Failure { report: message.clone(), message, kind: FailureKind::Simulation }),
                internal: true,
            }
        }
    }
}

/// Stops the sweep running (in any thread) as Ctrl-C stops the binary's: no new point starts,
/// the points running finish, and the sweep returns what finished with code 130.
pub fn interrupt() {
    crate::STOP.store(true, Ordering::SeqCst);
}
