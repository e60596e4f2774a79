//! `meshsim._native`: the meshsim library inside a Python interpreter. It runs meshsim's
//! command line in-process ([`meshsim::api::invoke`]), on a thread of its own with the GIL
//! released, and turns Ctrl-C (Python's `KeyboardInterrupt`) into meshsim's sweep interrupt.
//! The typed Python API (`python/meshsim/`) builds the arguments and reads the JSON results.

use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::Duration;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

/// How often a running command looks for a pending Python signal (Ctrl-C).
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// Stack of the thread a command runs on: the binary's main thread has 8 MiB.
const STACK_BYTES: usize = 8 << 20;

/// What a command gave: `(code, stdout, failure)`, where `failure` is `None` or
/// `(kind, message, report)` with `kind` one of `"input"`, `"simulation"`, `"output"`,
/// `"internal"`.
type Outcome = (u8, String, Option<(&'static str, String, String)>);

/// Runs `meshsim ARGS...` in this process and returns `(code, stdout, failure)`.
///
/// The GIL is released while meshsim runs, so other Python threads go on. A signal that
/// raises in Python (Ctrl-C's `KeyboardInterrupt`) stops a sweep as Ctrl-C stops the
/// binary's: no new point starts; once the points running have finished, the exception is
/// raised here.
#[pyfunction]
fn invoke(py: Python<'_>, args: Vec<String>) -> PyResult<Outcome> {
    let (done, finished) = channel();
    // Waited on with the GIL released, from whichever thread holds it: behind a lock.
    let finished = std::sync::Mutex::new(finished);
    let worker = std::thread::Builder::new()
        .name("meshsim".into())
        .stack_size(STACK_BYTES)
        .spawn(move || {
            let run = meshsim::api::invoke(&args);
            let _ = done.send(());
            run
        })
        .map_err(|e| PyRuntimeError::new_err(format!("meshsim: cannot start a thread: {e}")))?;
    loop {
        let wait =
            || finished.lock().map_or(Err(RecvTimeoutError::Disconnected), |f| f.recv_timeout(SIGNAL_POLL));
        match py.detach(wait) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {}
        }
        if let Err(signal) = py.check_signals() {
            meshsim::api::interrupt();
            let _ = py.detach(|| worker.join());
            return Err(signal);
        }
    }
    let run = py.detach(|| worker.join()).map_err(|_| {
        PyRuntimeError::new_err("meshsim: internal error (please report): its thread panicked")
    })?;
    let failure = run.failure.map(|f| {
        let kind = match f.kind {
            _ if run.internal => "internal",
            meshsim::api::FailureKind::BadInput => "input",
            meshsim::api::FailureKind::Simulation => "simulation",
            meshsim::api::FailureKind::Output => "output",
        };
        (kind, f.message, f.report)
    });
    Ok((run.code, run.stdout, failure))
}

/// The version of the meshsim library this module was built from.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// The native module: [`invoke`] and [`version`].
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(invoke, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    Ok(())
}
