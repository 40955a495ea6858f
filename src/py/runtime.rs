//! One tokio runtime per process, shared by the sync and async clients (reqwest's pool belongs
//! to the runtime that made it). A child after `fork()` gets a new runtime of its own, because
//! the parent's worker threads do not exist in the child.

use std::future::Future;
use std::pin::pin;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use pyo3::prelude::*;
use tokio::runtime::Runtime;

use crate::core::Error;

struct Owned {
    pid: u32,
    runtime: &'static Runtime,
}

static CURRENT: Mutex<Option<Owned>> = Mutex::new(None);
static ASYNC_RUNTIME: OnceLock<&'static Runtime> = OnceLock::new();

fn build() -> Result<&'static Runtime, Error> {
    // One worker by default: a sequential sync call then costs one hand-off each way instead of
    // waking a second, work-stealing worker too (measured: 159 -> 108 us per call on 2 cores, and
    // async throughput within 10%). SECFINDINGS_RUNTIME_THREADS overrides it for heavy async use.
    let workers =
        std::env::var("SECFINDINGS_RUNTIME_THREADS").ok().and_then(|v| v.parse().ok()).unwrap_or(1usize);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers.clamp(1, 64))
        .thread_name("secfindings")
        .enable_all()
        .build()
        .map_err(|e| Error::Transport(format!("cannot start the I/O runtime: {e}")))?;
    // Leaked on purpose: it lives as long as the process; after a fork the old one cannot be
    // dropped safely (its threads are gone), so it is simply left behind.
    Ok(Box::leak(Box::new(rt)))
}

/// The runtime of this process, started on first use.
pub fn runtime() -> Result<&'static Runtime, Error> {
    let pid = std::process::id();
    let mut guard = CURRENT.lock().map_err(|_| Error::Transport("runtime lock poisoned".into()))?;
    if let Some(o) = guard.as_ref() {
        if o.pid == pid {
            return Ok(o.runtime);
        }
    }
    let runtime = build()?;
    *guard = Some(Owned { pid, runtime });
    Ok(runtime)
}

/// The runtime that pyo3-async-runtimes spawns on; it is set once, in the first process.
pub fn init_async_runtime() -> Result<(), Error> {
    let rt = runtime()?;
    if ASYNC_RUNTIME.set(rt).is_ok() {
        // A second init (another interpreter) is refused by the library; ours is in place.
        let _ = pyo3_async_runtimes::tokio::init_with_runtime(rt);
    }
    Ok(())
}

/// Whether the generic async route can run in this process (not in a child forked after first
/// use: pyo3-async-runtimes keeps the first process's runtime).
pub fn async_usable() -> bool {
    match (ASYNC_RUNTIME.get(), runtime()) {
        (Some(a), Ok(r)) => std::ptr::eq(*a, r),
        _ => false,
    }
}

/// Runs `fut` to completion on the runtime with the GIL released, checking for Ctrl-C every
/// 100 ms so a long call can be interrupted (the request is dropped, which cancels it).
pub fn block_on<F, T>(py: Python<'_>, fut: F) -> PyResult<T>
where
    F: Future<Output = T> + Send,
    T: Send,
{
    let rt = runtime().map_err(crate::py::errors::to_py)?;
    py.detach(|| {
        rt.block_on(async {
            use futures_util::FutureExt as _;
            let mut fut = pin!(std::panic::AssertUnwindSafe(fut).catch_unwind());
            loop {
                tokio::select! {
                    out = &mut fut => {
                        return out.map_err(|panic| crate::py::errors::to_py(panic_error(&*panic)));
                    }
                    () = tokio::time::sleep(Duration::from_millis(100)) => {
                        Python::attach(|py| py.check_signals())?;
                    }
                }
            }
        })
    })
}

/// The error a caught panic becomes: a bug of ours, reported as a `TransportError` (a
/// `SecFindingsError`) instead of a `PanicException` that escapes `except Exception`.
pub(crate) fn panic_error(panic: &(dyn std::any::Any + Send)) -> Error {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    Error::Transport(format!("internal error in secfindings (please report it): {what}"))
}
