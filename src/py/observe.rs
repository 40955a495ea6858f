//! The core's attempt observer (core/observe.rs) handed to Python: a callback of the caller's
//! gets each attempt, and the number of the call it belongs to comes from a context variable
//! that Python sets around a call (so concurrent asyncio tasks on one thread keep their own).

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyTuple;

use crate::core::observe::{self, AttemptEvent};

static CALL_VAR: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// The context variable that names the call a future belongs to (`int`, 0 or unset: none).
#[pyfunction]
pub(crate) fn call_var(py: Python<'_>) -> PyResult<Py<PyAny>> {
    let var = CALL_VAR.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
        let contextvars = py.import("contextvars")?;
        Ok(contextvars.getattr("ContextVar")?.call1(("secfindings_call",))?.unbind())
    })?;
    Ok(var.clone_ref(py))
}

/// The number of the call the code running now belongs to: 0 unless an observer is set and
/// Python named one (read when a call's future is made, on the caller's thread).
pub(crate) fn current(py: Python<'_>) -> u64 {
    if !observe::observed() {
        return 0;
    }
    let Some(var) = CALL_VAR.get(py) else { return 0 };
    var.bind(py).call_method1("get", (0u64,)).and_then(|v| v.extract::<u64>()).unwrap_or(0)
}

/// Runs `fut` as the call Python named (see [`current`]).
pub(crate) fn scoped<F: std::future::Future>(
    py: Python<'_>,
    fut: F,
) -> impl std::future::Future<Output = F::Output> {
    observe::scope(current(py), fut)
}

fn as_tuple<'py>(py: Python<'py>, e: &AttemptEvent) -> PyResult<Bound<'py, PyTuple>> {
    (
        e.call,
        e.operation.as_str(),
        e.attempt,
        e.status,
        e.started,
        e.elapsed.as_secs_f64(),
        e.waited.as_secs_f64(),
        e.retry_of,
        e.retry_after.as_deref(),
        e.bytes,
    )
        .into_pyobject(py)
}

/// Sets the callback that gets every HTTP attempt of every client of this process (None
/// removes it): a tuple (call, operation, attempt, status, started, elapsed, waited, retry_of,
/// retry_after, bytes), on whichever thread made the attempt. An exception it raises is
/// dropped: telemetry never breaks a call.
#[pyfunction]
#[pyo3(signature = (callback=None))]
pub(crate) fn observe_attempts(py: Python<'_>, callback: Option<Py<PyAny>>) -> PyResult<()> {
    call_var(py)?;
    match callback {
        None => observe::set(None),
        Some(callback) => {
            let callback = Arc::new(callback);
            observe::set(Some(Arc::new(move |e: &AttemptEvent| {
                Python::attach(|py| {
                    if let Ok(args) = as_tuple(py, e) {
                        let _ = callback.bind(py).call1((args,));
                    }
                });
            })));
        }
    }
    Ok(())
}
