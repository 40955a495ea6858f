//! A connection walk handed to Python one page at a time; the Python Paginator classes iterate
//! the items. One page ahead is fetched in the background by the core stream.

use std::sync::{Arc, Mutex};

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::{ArrowError, SchemaRef};
use pyo3::types::PyBytes;
use pyo3_arrow::{PyRecordBatch, PyRecordBatchReader, PyTable};

use crate::core::batches::{Batch, BatchSource};
use crate::core::columns::Columnar;
use crate::core::paging::RawPage;
use crate::core::secret::Redactor;
use crate::core::walk::Walk;
use crate::core::Error;
use crate::py::completions::{self, Outcome};
use crate::py::decode;
use crate::py::errors::to_py as err;
use crate::py::runtime::{block_on, runtime};

#[pyclass(frozen, module = "secfindings._native")]
pub struct NativePages {
    stream: Arc<tokio::sync::Mutex<Walk>>,
    cursor: Arc<Mutex<Option<String>>>,
    redactor: Redactor,
    /// The walk as columns, made on the first batch asked for.
    columnar: Arc<Mutex<Option<Columnar>>>,
}

impl NativePages {
    pub(crate) fn new(stream: impl Into<Walk>, redactor: Redactor) -> Self {
        let stream: Walk = stream.into();
        let cursor = stream.cursor().map(str::to_string);
        Self {
            stream: Arc::new(tokio::sync::Mutex::new(stream)),
            cursor: Arc::new(Mutex::new(cursor)),
            redactor,
            columnar: Arc::new(Mutex::new(None)),
        }
    }
}

/// (items, page_info, item_cursors) for Python, or None at the end; item_cursors is empty when
/// the query does not select the edges' cursors. The body is decoded here, once, straight into
/// Python objects; the core has only scanned it.
pub(crate) fn page_to_py(py: Python<'_>, page: Option<RawPage>, redactor: &Redactor) -> PyResult<Py<PyAny>> {
    let Some(page) = page else { return Ok(py.None()) };
    let data = decode::data(py, &page.body, redactor)?;
    let vanished = || err(Error::pagination("the connection vanished from the decoded page"));
    let mut conn = data;
    match &page.path {
        Some(path) => {
            for key in path.iter() {
                conn = conn
                    .cast_into::<PyDict>()
                    .map_err(|_| vanished())?
                    .get_item(key)?
                    .ok_or_else(vanished)?;
            }
        }
        None => {
            let d = conn.cast_into::<PyDict>().map_err(|_| vanished())?;
            conn = d.values().get_item(0).map_err(|_| vanished())?;
        }
    }
    let conn = conn.cast_into::<PyDict>().map_err(|_| vanished())?;
    let items = PyList::empty(py);
    let cursors = PyList::empty(py);
    let (mut with_cursor, mut count) = (false, 0usize);
    if let Some(edges) = conn.get_item(intern!(py, "edges"))? {
        if let Ok(edges) = edges.cast::<PyList>() {
            for edge in edges.iter().take(page.take) {
                let (node, cursor) = match edge.cast::<PyDict>() {
                    Ok(e) => (e.get_item(intern!(py, "node"))?, e.get_item(intern!(py, "cursor"))?),
                    Err(_) => (None, None),
                };
                items.append(node.unwrap_or_else(|| py.None().into_bound(py)))?;
                match cursor {
                    Some(c) if c.is_instance_of::<PyString>() => {
                        if !with_cursor {
                            for _ in 0..count {
                                cursors.append(py.None())?;
                            }
                            with_cursor = true;
                        }
                        cursors.append(c)?;
                    }
                    _ if with_cursor => cursors.append(py.None())?,
                    _ => {}
                }
                count += 1;
            }
        }
    } else if let Some(nodes) = conn.get_item(intern!(py, "nodes"))? {
        if let Ok(nodes) = nodes.cast::<PyList>() {
            for node in nodes.iter().take(page.take) {
                items.append(node)?;
            }
        }
    }
    let info = PyDict::new(py);
    info.set_item(intern!(py, "has_next_page"), page.info.has_next_page)?;
    info.set_item(intern!(py, "has_previous_page"), page.info.has_previous_page)?;
    info.set_item(intern!(py, "start_cursor"), page.info.start_cursor)?;
    info.set_item(intern!(py, "end_cursor"), page.info.end_cursor)?;
    Ok((items, info, cursors).into_pyobject(py)?.into_any().unbind())
}

async fn next(
    stream: Arc<tokio::sync::Mutex<Walk>>,
    cursor: Arc<Mutex<Option<String>>>,
) -> crate::core::Result<Option<RawPage>> {
    let mut s = stream.lock().await;
    let page = s.next_page().await?;
    if page.is_some() {
        if let Ok(mut c) = cursor.lock() {
            *c = s.cursor().map(str::to_string);
        }
    }
    Ok(page)
}

/// A stream of record batches for the Arrow C stream interface: one page each, one schema (the
/// first page's), pulled by the consumer; each pull waits for its page on the I/O runtime.
struct BatchStream {
    source: BatchSource,
    schema: SchemaRef,
    first: Option<RecordBatch>,
}

impl Iterator for BatchStream {
    type Item = Result<RecordBatch, ArrowError>;
    fn next(&mut self) -> Option<Self::Item> {
        if let Some(b) = self.first.take() {
            return Some(Ok(b));
        }
        let rt = match runtime() {
            Ok(rt) => rt,
            Err(e) => return Some(Err(ArrowError::ExternalError(Box::new(e)))),
        };
        let source = self.source.clone();
        match rt.block_on(async move { source.next().await }) {
            Ok(Some((b, _))) => Some(Ok(b)),
            Ok(None) => None,
            Err(e) => Some(Err(ArrowError::ExternalError(Box::new(e)))),
        }
    }
}

impl RecordBatchReader for BatchStream {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }
}

/// A batch and its cursor, for Python.
pub(crate) fn batch_to_py(py: Python<'_>, batch: Option<Batch>) -> PyResult<Py<PyAny>> {
    match batch {
        None => Ok(py.None()),
        Some((b, cursor)) => {
            let b = Bound::new(py, PyRecordBatch::new(b))?;
            Ok((b, cursor).into_pyobject(py)?.into_any().unbind())
        }
    }
}

/// A table for Python (an object with `__arrow_c_stream__`).
pub(crate) fn table_to_py(
    py: Python<'_>,
    batches: Vec<RecordBatch>,
    schema: SchemaRef,
) -> PyResult<Py<PyAny>> {
    Ok(Bound::new(py, PyTable::try_new(batches, schema)?)?.into_any().unbind())
}

impl NativePages {
    fn source(&self) -> BatchSource {
        BatchSource::new(
            Arc::clone(&self.stream),
            Arc::clone(&self.cursor),
            Arc::clone(&self.columnar),
            self.redactor.clone(),
        )
    }
}

#[pymethods]
impl NativePages {
    /// The next page as a record batch (an object with `__arrow_c_array__`) and the cursor after
    /// it, or None at the end. Decoded from the response bytes in Rust, with the GIL released.
    /// The batches of a stream share one schema: the first batch fixes it.
    /// `freeze=False` lets later batches widen the schema (for `finish_table`).
    #[pyo3(signature = (freeze=true))]
    fn next_batch(&self, py: Python<'_>, freeze: bool) -> PyResult<Py<PyAny>> {
        let source = self.source();
        let after = source.clone();
        let batch = block_on(py, async move { source.next().await })?.map_err(err)?;
        if freeze {
            after.freeze();
        }
        batch_to_py(py, batch)
    }

    #[pyo3(signature = (freeze=true))]
    fn next_batch_async<'py>(&self, py: Python<'py>, freeze: bool) -> PyResult<Bound<'py, PyAny>> {
        let source = self.source();
        completions::submit(py, async move {
            let batch = source.next().await;
            if freeze {
                source.freeze();
            }
            batch.map(|b| Outcome::with(move |py| batch_to_py(py, b)))
        })
    }

    /// Every remaining page as one table (`__arrow_c_stream__`), its schema widened over them.
    /// `on_page(rows, pages)` is called after each page (for progress), with the GIL.
    #[pyo3(signature = (on_page=None))]
    fn read_table(&self, py: Python<'_>, on_page: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
        let source = self.source();
        let Some(on_page) = on_page else {
            let (batches, schema) = block_on(py, async move { source.all().await })?.map_err(err)?;
            return table_to_py(py, batches, schema);
        };
        let mut batches = Vec::new();
        let mut rows = 0usize;
        loop {
            let s = source.clone();
            let Some((b, _)) = block_on(py, async move { s.next().await })?.map_err(err)? else { break };
            rows = rows.saturating_add(b.num_rows());
            batches.push(b);
            on_page.call1(py, (rows, batches.len()))?;
        }
        let (batches, schema) = source.finish(batches).map_err(err)?;
        table_to_py(py, batches, schema)
    }

    /// The batches of `next_batch(freeze=False)` as one table of the widest schema.
    fn finish_table(&self, py: Python<'_>, batches: Vec<PyRecordBatch>) -> PyResult<Py<PyAny>> {
        let batches = batches.into_iter().map(PyRecordBatch::into_inner).collect();
        let (batches, schema) = self.source().finish(batches).map_err(err)?;
        table_to_py(py, batches, schema)
    }

    /// What the client has done so far (as `Client.stats()`), for progress reports.
    fn waits(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        let Ok(s) = self.stream.try_lock() else { return (0, 0) };
        let stats = s.transport().stats();
        (stats.limiter_waits.load(Relaxed), stats.rate_limited.load(Relaxed))
    }

    fn read_table_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let source = self.source();
        completions::submit(py, async move {
            let (batches, schema) = source.all().await?;
            Ok(Outcome::with(move |py| table_to_py(py, batches, schema)))
        })
    }

    /// The remaining pages as a record batch reader (`__arrow_c_stream__`), one batch per page.
    /// The first page is read now: a stream's schema is fixed from it.
    fn batch_reader(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let source = self.source();
        let probe = source.clone();
        let (first, schema) = block_on(py, async move {
            let first = probe.next().await?;
            probe.freeze();
            let schema = match &first {
                Some((b, _)) => b.schema(),
                None => probe.all().await?.1,
            };
            Ok::<_, Error>((first.map(|(b, _)| b), schema))
        })?
        .map_err(err)?;
        let reader = BatchStream { source, schema, first };
        Ok(Bound::new(py, PyRecordBatchReader::new(Box::new(reader)))?.into_any().unbind())
    }

    /// The connection's count of its items (`totalCount` / `total_count`) when the query selects
    /// it, as the last page gave it; None otherwise (or while a page is being fetched).
    #[getter]
    fn total(&self) -> Option<u64> {
        self.stream.try_lock().ok().and_then(|s| s.total())
    }

    /// Fixes the walk's columns as they stand: later pages must fit them (a stream's schema).
    fn freeze(&self) {
        self.source().freeze();
    }

    /// `text` with the client's secrets masked (for messages and reprs that quote a server's
    /// cursor).
    fn redact(&self, text: &str) -> String {
        self.redactor.scrub(text)
    }

    /// The next page's nodes as JSON lines (bytes), exactly as sent, and the cursor after it.
    fn next_jsonl(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let source = self.source();
        match block_on(py, async move { source.next_jsonl().await })?.map_err(err)? {
            None => Ok(py.None()),
            Some((lines, cursor)) => {
                Ok((PyBytes::new(py, &lines), cursor).into_pyobject(py)?.into_any().unbind())
            }
        }
    }

    /// An awaitable of what `next_jsonl` gives: the next page's nodes as JSON lines and the
    /// cursor after it, or None at the end.
    fn next_jsonl_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let source = self.source();
        completions::submit(py, async move {
            let got = source.next_jsonl().await?;
            Ok(Outcome::with(move |py| match got {
                None => Ok(py.None()),
                Some((lines, cursor)) => {
                    Ok((PyBytes::new(py, &lines), cursor).into_pyobject(py)?.into_any().unbind())
                }
            }))
        })
    }

    /// The end cursor of the last page returned: pass it as `after` to resume.
    #[getter]
    fn cursor(&self) -> Option<String> {
        self.cursor.lock().ok().and_then(|c| c.clone())
    }

    /// The next page without waiting, when the page fetched ahead is already here (or the walk
    /// is over): a page tuple, or None at the end. False: not here yet, use `next_page[_async]`.
    /// Saves a round trip through the I/O thread for every page the prefetch has ready.
    fn try_next_page(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let not_yet = || Ok(false.into_pyobject(py)?.to_owned().into_any().unbind());
        let Ok(mut s) = self.stream.try_lock() else { return not_yet() };
        let rt = runtime().map_err(err)?;
        let done = {
            let _entered = rt.enter();
            s.try_next_page()
        };
        let Some(done) = done else { return not_yet() };
        let page = done.map_err(err)?;
        if page.is_some() {
            if let Ok(mut c) = self.cursor.lock() {
                *c = s.cursor().map(str::to_string);
            }
        }
        drop(s);
        page_to_py(py, page, &self.redactor)
    }

    fn next_page(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let (stream, cursor) = (Arc::clone(&self.stream), Arc::clone(&self.cursor));
        let page = block_on(py, next(stream, cursor))?.map_err(err)?;
        page_to_py(py, page, &self.redactor)
    }

    fn next_page_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (stream, cursor) = (Arc::clone(&self.stream), Arc::clone(&self.cursor));
        let redactor = self.redactor.clone();
        completions::submit(py, async move {
            next(stream, cursor).await.map(|p| Outcome::with(move |py| page_to_py(py, p, &redactor)))
        })
    }
}
