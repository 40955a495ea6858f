//! How async results reach asyncio without the I/O thread ever taking the GIL.
//!
//! Each event loop gets one [`Completions`]: a queue of finished calls and a socket pair. A task
//! on the I/O runtime that finishes pushes its result (still bytes) onto the queue and, if the
//! queue was empty, writes one byte to the socket. The loop watches the other end with
//! `add_reader`, so a single wake-up on the loop's own thread hands over every result finished by
//! then; decoding and resolving the asyncio futures happen there, where the GIL already is.
//!
//! The generic route (`pyo3_async_runtimes::future_into_py`) takes the GIL on the I/O thread for
//! every result, and with many calls in flight that thread queues behind the busy event loop.

use bytes::Bytes;
use pyo3::prelude::*;

use crate::core::secret::Redactor;
use crate::py::errors::to_py as err;

#[cfg(not(unix))]
pub(crate) use generic as submit;
#[cfg(unix)]
pub(crate) use queue::submit;

/// Turns a finished result into Python objects, on the loop's thread (where the GIL is).
pub(crate) type Convert = Box<dyn FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send>;

/// A finished call's result, decoded into Python objects on the loop's thread.
/// A body carries the client's redactor: a GraphQL error found while decoding is scrubbed with it.
/// Results of other shapes bring their own conversion, so this module (a leaf of the glue) knows
/// nothing of the callers above it.
pub(crate) enum Outcome {
    /// A response body: its `data`.
    Data(Bytes, Redactor),
    /// Something became ready (resolves to None).
    Ready,
    /// Anything else, with the conversion its caller gives.
    Other(Convert),
}

impl Outcome {
    /// A result converted by `convert` on the loop's thread.
    pub(crate) fn with(convert: impl FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send + 'static) -> Self {
        Self::Other(Box::new(convert))
    }

    fn into_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match self {
            Self::Data(body, r) => Ok(crate::py::decode::data(py, &body, &r)?.unbind()),
            Self::Ready => Ok(py.None()),
            Self::Other(convert) => convert(py),
        }
    }
}

/// Runs `work`, turning a panic into an error: a panic must neither reach Python nor leave an
/// awaiting future unresolved.
pub(crate) async fn unpanicked<F>(work: F) -> crate::core::Result<Outcome>
where
    F: std::future::Future<Output = crate::core::Result<Outcome>>,
{
    use futures_util::FutureExt as _;
    match std::panic::AssertUnwindSafe(work).catch_unwind().await {
        Ok(result) => result,
        Err(panic) => Err(crate::py::runtime::panic_error(&*panic)),
    }
}

/// The generic route, which converts on the I/O thread: used where there are no Unix sockets,
/// and for event loops that cannot watch a socket (`add_reader` not implemented).
pub(crate) fn generic<'py, F>(py: Python<'py>, work: F) -> PyResult<Bound<'py, PyAny>>
where
    F: std::future::Future<Output = crate::core::Result<Outcome>> + Send + 'static,
{
    if !crate::py::runtime::async_usable() {
        return Err(err(crate::core::Error::Closed(
            "async calls are not available in a process forked after the first call; use Client here".into(),
        )));
    }
    let work = crate::py::observe::scoped(py, work);
    pyo3_async_runtimes::tokio::future_into_py(py, async move {
        let outcome = unpanicked(work).await.map_err(err)?;
        Python::attach(|py| outcome.into_py(py))
    })
}

#[cfg(unix)]
mod queue {
    use std::future::Future;
    use std::io::{ErrorKind, Read, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    use std::sync::{Arc, Mutex};

    use pyo3::prelude::*;
    use pyo3::sync::PyOnceLock;

    use super::Outcome;
    use crate::core::Error;
    use crate::py::errors::to_py as err;
    use crate::py::runtime::runtime;

    struct Done {
        future: Py<PyAny>,
        result: crate::core::Result<Outcome>,
    }

    /// Both ends of the socket pair live here, so a task finishing after the loop is gone
    /// still writes to an open socket (never to a closed peer, which would raise SIGPIPE).
    struct Queue {
        done: Mutex<Vec<Done>>,
        writer: UnixStream,
        reader: UnixStream,
    }

    impl Queue {
        fn push(&self, item: Done) {
            let first = match self.done.lock() {
                Ok(mut q) => {
                    q.push(item);
                    q.len() == 1
                }
                // A poisoned queue cannot be reached from Python any more; the future stays pending
                // only if the loop is already gone.
                Err(_) => return,
            };
            if first {
                // Non-blocking; a full socket buffer means a wake-up is pending anyway.
                let _ = (&self.writer).write(&[1]);
            }
        }
    }

    /// The completion queue of one event loop.
    #[pyclass(frozen, module = "secfindings._native")]
    pub struct Completions {
        queue: Arc<Queue>,
        /// The process it was made in: after fork() the child makes its own.
        pid: u32,
    }

    impl Completions {
        fn new() -> PyResult<Self> {
            let io =
                |e: std::io::Error| err(Error::Transport(format!("cannot set up async completions: {e}")));
            let (reader, writer) = UnixStream::pair().map_err(io)?;
            reader.set_nonblocking(true).map_err(io)?;
            writer.set_nonblocking(true).map_err(io)?;
            let queue = Queue { done: Mutex::new(Vec::new()), writer, reader };
            Ok(Self { queue: Arc::new(queue), pid: std::process::id() })
        }
    }

    #[pymethods]
    impl Completions {
        /// The socket the event loop watches.
        fn fileno(&self) -> i32 {
            self.queue.reader.as_raw_fd()
        }

        /// Resolves every future whose call has finished. Called by the loop when the socket is readable.
        fn drain(&self, py: Python<'_>) {
            let mut buf = [0u8; 64];
            loop {
                match (&self.queue.reader).read(&mut buf) {
                    Ok(n) if n == buf.len() => continue,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    _ => break,
                }
            }
            let items = match self.queue.done.lock() {
                Ok(mut q) => std::mem::take(&mut *q),
                Err(_) => return,
            };
            for Done { future, result } in items {
                let future = future.bind(py);
                // A cancelled future is done already; its result is dropped.
                if future.call_method0(pyo3::intern!(py, "done")).and_then(|d| d.is_truthy()).unwrap_or(true)
                {
                    continue;
                }
                let settled = match result.map_err(err).and_then(|o| o.into_py(py)) {
                    Ok(value) => future.call_method1(pyo3::intern!(py, "set_result"), (value,)),
                    Err(e) => future.call_method1(pyo3::intern!(py, "set_exception"), (e.into_value(py),)),
                };
                if let Err(e) = settled {
                    e.write_unraisable(py, Some(future));
                }
            }
        }
    }

    /// Cancels the I/O task when its asyncio future is cancelled (a done-callback of the future).
    #[pyclass(frozen, module = "secfindings._native")]
    pub struct Canceller {
        abort: tokio::task::AbortHandle,
    }

    #[pymethods]
    impl Canceller {
        fn __call__(&self, future: &Bound<'_, PyAny>) -> PyResult<()> {
            if future.call_method0(pyo3::intern!(future.py(), "cancelled"))?.is_truthy()? {
                self.abort.abort();
            }
            Ok(())
        }
    }

    static GET_RUNNING_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    static BY_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

    /// The running loop's completion queue, made and registered with `add_reader` on first use;
    /// `None` for a loop that cannot watch a socket (or keep the queue), which then takes the
    /// generic route. Kept on the loop (an attribute, or a weak-keyed table for loops without
    /// one, as uvloop's), with `False` marking a loop found unable.
    fn completions<'py>(
        py: Python<'py>,
        event_loop: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, Completions>>> {
        let attr = pyo3::intern!(py, "_secfindings_completions");
        let table = BY_LOOP
            .get_or_try_init(py, || -> PyResult<Py<PyAny>> {
                Ok(py.import("weakref")?.getattr("WeakKeyDictionary")?.call0()?.unbind())
            })?
            .bind(py);
        let found = match event_loop.getattr(attr) {
            Ok(v) => Some(v),
            // not weak-referenceable either: nothing stored
            Err(_) => table.call_method1("get", (event_loop,)).ok().filter(|v| !v.is_none()),
        };
        if let Some(found) = found {
            if found.is_instance_of::<pyo3::types::PyBool>() && !found.is_truthy()? {
                return Ok(None);
            }
            if let Ok(c) = found.cast_into::<Completions>() {
                if c.get().pid == std::process::id() {
                    return Ok(Some(c));
                }
            }
        }
        let store = |value: &Bound<'py, PyAny>| -> bool {
            event_loop.setattr(attr, value).is_ok() || table.set_item(event_loop, value).is_ok()
        };
        let c = Bound::new(py, Completions::new()?)?;
        if !store(c.as_any()) {
            return Ok(None);
        }
        match event_loop.call_method1("add_reader", (c.get().fileno(), c.getattr("drain")?)) {
            Ok(_) => Ok(Some(c)),
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyNotImplementedError>(py) => {
                store(pyo3::types::PyBool::new(py, false).as_any());
                Ok(None)
            }
            Err(e) => {
                // Not kept: the next call tries again.
                if event_loop.delattr(attr).is_err() {
                    let _ = table.del_item(event_loop);
                }
                Err(e)
            }
        }
    }

    /// Runs `work` on the I/O runtime and returns an asyncio future of its outcome, resolved on the
    /// running loop's thread by [`Completions::drain`]. Cancelling the future aborts the work.
    pub(crate) fn submit<'py, F>(py: Python<'py>, work: F) -> PyResult<Bound<'py, PyAny>>
    where
        F: Future<Output = crate::core::Result<Outcome>> + Send + 'static,
    {
        let get_loop = GET_RUNNING_LOOP.import(py, "asyncio", "get_running_loop")?;
        let event_loop = get_loop.call0()?;
        let queue = match completions(py, &event_loop)? {
            Some(c) => Arc::clone(&c.get().queue),
            None => return super::generic(py, work),
        };
        let future = event_loop.call_method0(pyo3::intern!(py, "create_future"))?;
        let handle = future.clone().unbind();
        let rt = runtime().map_err(err)?;
        let work = crate::py::observe::scoped(py, work);
        let task = rt.spawn(async move {
            let result = super::unpanicked(work).await;
            queue.push(Done { future: handle, result });
        });
        let canceller = Canceller { abort: task.abort_handle() };
        if let Err(e) = future.call_method1(pyo3::intern!(py, "add_done_callback"), (canceller,)) {
            // Nobody could cancel it nor see its result: stop it before it sends anything.
            task.abort();
            return Err(e);
        }
        Ok(future)
    }
}
