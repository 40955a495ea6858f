//! One tokio runtime per process, shared by the sync and async clients (reqwest's pool belongs
//! to the runtime that made it). A child after `fork()` gets a new runtime of its own, because
//! the parent's worker threads do not exist in the child.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

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
pub(crate) fn runtime() -> Result<&'static Runtime, Error> {
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
pub(crate) fn init_async_runtime() -> Result<(), Error> {
    let rt = runtime()?;
    if ASYNC_RUNTIME.set(rt).is_ok() {
        // A second init (another interpreter) is refused by the library; ours is in place.
        let _ = pyo3_async_runtimes::tokio::init_with_runtime(rt);
    }
    Ok(())
}

/// Whether the generic async route can run in this process (not in a child forked after first
/// use: pyo3-async-runtimes keeps the first process's runtime).
pub(crate) fn async_usable() -> bool {
    match (ASYNC_RUNTIME.get(), runtime()) {
        (Some(a), Ok(r)) => std::ptr::eq(*a, r),
        _ => false,
    }
}

/// How long a waiting caller keeps looking for its result (yielding its core to anyone who needs
/// it) before it parks. On an idle machine a parked thread takes tens of microseconds to run
/// again after it is woken; a short call's answer often comes back within this window.
/// Measured (benches/latency.py): 50 us helps idle and loaded; 150 us cost CPU under load.
/// `SECFINDINGS_SPIN_US` overrides it (0: park at once).
fn spin() -> Duration {
    static SPIN: OnceLock<Duration> = OnceLock::new();
    *SPIN.get_or_init(|| {
        let us = std::env::var("SECFINDINGS_SPIN_US").ok().and_then(|v| v.parse().ok()).unwrap_or(50u64);
        Duration::from_micros(us.min(10_000))
    })
}

/// A yield that takes longer than this means another thread ran on the core.
const YIELD_BUSY: Duration = Duration::from_micros(20);

/// Wakes the caller that polls a future by hand: a flag it looks at while it spins, and an
/// unpark for when it has parked.
struct Signal {
    woken: AtomicBool,
    thread: std::thread::Thread,
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// Runs `fut` to completion with the GIL released: polled on the calling thread inside the
/// runtime's context (the I/O itself is driven by the runtime's worker), spinning briefly before
/// parking, and checking for Ctrl-C every 100 ms so a long call can be interrupted (the request
/// is dropped, which cancels it). A panic becomes an error.
pub(crate) fn block_on<F, T>(py: Python<'_>, fut: F) -> PyResult<T>
where
    F: Future<Output = T> + Send,
    T: Send,
{
    use futures_util::FutureExt as _;
    let rt = runtime().map_err(crate::py::errors::to_py)?;
    let fut = crate::py::observe::scoped(py, fut);
    py.detach(|| {
        let _entered = rt.enter();
        let signal = Arc::new(Signal { woken: AtomicBool::new(true), thread: std::thread::current() });
        let waker = Waker::from(Arc::clone(&signal));
        let mut cx = Context::from_waker(&waker);
        let mut fut = pin!(std::panic::AssertUnwindSafe(fut).catch_unwind());
        let mut checked = Instant::now();
        let spin = spin();
        loop {
            if signal.woken.swap(false, Ordering::Acquire) {
                if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
                    return out.map_err(|panic| crate::py::errors::to_py(panic_error(&*panic)));
                }
                continue;
            }
            let waiting = Instant::now();
            while !signal.woken.load(Ordering::Acquire) && waiting.elapsed() < spin {
                let before = Instant::now();
                std::thread::yield_now();
                // A yield that took long gave the core to someone who needed it: the machine is
                // busy, and spinning would only slow the I/O thread and the server. Park.
                if before.elapsed() > YIELD_BUSY {
                    break;
                }
            }
            if !signal.woken.load(Ordering::Acquire) {
                std::thread::park_timeout(Duration::from_millis(100));
            }
            if checked.elapsed() >= Duration::from_millis(100) {
                checked = Instant::now();
                Python::attach(|py| py.check_signals())?;
            }
        }
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
