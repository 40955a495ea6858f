//! A connection walk handed to Python one page at a time; the Python Paginator classes iterate
//! the items. One page ahead is fetched in the background by the core stream.

use std::sync::{Arc, Mutex};

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use crate::core::paging::{PageStream, RawPage};
use crate::core::secret::Redactor;
use crate::core::Error;
use crate::py::completions::{self, Outcome};
use crate::py::decode;
use crate::py::errors::to_py as err;
use crate::py::runtime::{block_on, runtime};

#[pyclass(frozen, module = "secfindings._native")]
pub struct NativePages {
    stream: Arc<tokio::sync::Mutex<PageStream>>,
    cursor: Arc<Mutex<Option<String>>>,
    redactor: Redactor,
}

impl NativePages {
    pub fn new(stream: PageStream, redactor: Redactor) -> Self {
        let cursor = stream.cursor().map(str::to_string);
        Self {
            stream: Arc::new(tokio::sync::Mutex::new(stream)),
            cursor: Arc::new(Mutex::new(cursor)),
            redactor,
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
    stream: Arc<tokio::sync::Mutex<PageStream>>,
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

#[pymethods]
impl NativePages {
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
        completions::submit(py, async move { next(stream, cursor).await.map(|p| Outcome::Page(p, redactor)) })
    }
}
