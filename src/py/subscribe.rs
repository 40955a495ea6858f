//! The Python face of a subscription: a blocking `next()` and an awaitable `next_async()` over the
//! core's [`Subscription`]; the Python classes in `_subscribe.py` make them iterators.

use std::sync::Arc;

use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;

use crate::core::secret::Redactor;
use crate::core::subscribe::Subscription;
use crate::py::completions::{self, Outcome};
use crate::py::errors::to_py as err;
use crate::py::runtime::block_on;

#[pyclass(frozen, module = "secfindings._native")]
pub struct NativeSubscription {
    inner: Arc<Subscription>,
    redactor: Redactor,
}

impl NativeSubscription {
    pub fn new(inner: Subscription, redactor: Redactor) -> Self {
        Self { inner: Arc::new(inner), redactor }
    }
}

#[pymethods]
impl NativeSubscription {
    /// The next event's `data` (blocking, GIL released, Ctrl-C honoured); StopIteration at the end.
    fn next(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let inner = Arc::clone(&self.inner);
        match block_on(py, async move { inner.next().await })? {
            None => Err(PyStopIteration::new_err(())),
            Some(Err(e)) => Err(err(e)),
            Some(Ok(body)) => Ok(crate::py::decode::data(py, &body, &self.redactor)?.unbind()),
        }
    }

    /// An event already received, without waiting: `(data,)`; `()` at the end; None when no
    /// event is queued. Lets the iterators skip the wait (a round trip through the event loop,
    /// or a release of the GIL) while events are queued.
    fn try_next(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        match self.inner.try_next() {
            None => Ok(None),
            Some(None) => Ok(Some(pyo3::types::PyTuple::empty(py).into_any().unbind())),
            Some(Some(Err(e))) => Err(err(e)),
            Some(Some(Ok(body))) => {
                let data = crate::py::decode::data(py, &body, &self.redactor)?;
                Ok(Some(pyo3::types::PyTuple::new(py, [data])?.into_any().unbind()))
            }
        }
    }

    /// An awaitable that resolves (to None) once `try_next` has something to give. It takes
    /// nothing itself, so cancelling it never loses an event.
    fn wait_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let inner = Arc::clone(&self.inner);
        completions::submit(py, async move {
            inner.wait_ready().await;
            Ok(Outcome::Ready)
        })
    }

    /// Blocks (GIL released, Ctrl-C honoured) until the start position is fixed: from then on
    /// nothing the server publishes is missed, however early the socket drops.
    fn wait_started(&self, py: Python<'_>) -> PyResult<()> {
        let inner = Arc::clone(&self.inner);
        block_on(py, async move { inner.started().await })
    }

    /// An awaitable that resolves (to None) once the start position is fixed.
    fn started_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let inner = Arc::clone(&self.inner);
        completions::submit(py, async move {
            inner.started().await;
            Ok(Outcome::Ready)
        })
    }

    /// Ends the subscription on the server; a waiting `next` returns the end.
    fn close(&self) {
        self.inner.close();
    }

    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// The last event's cursor (where a resume starts after), when events carry one.
    #[getter]
    fn cursor(&self) -> Option<String> {
        self.inner.cursor().map(|c| self.redactor.scrub(&c))
    }

    /// The WebSocket subprotocol in use: graphql-transport-ws or graphql-ws.
    #[getter]
    fn protocol(&self) -> Option<&'static str> {
        self.inner.protocol()
    }

    /// Events received and not yet consumed.
    #[getter]
    fn buffered(&self) -> usize {
        self.inner.buffered()
    }

    /// Connections made so far (1 + reconnects).
    #[getter]
    fn connects(&self) -> u64 {
        self.inner.stats().connects.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Events received so far.
    #[getter]
    fn events(&self) -> u64 {
        self.inner.stats().events.load(std::sync::atomic::Ordering::Relaxed)
    }
}
