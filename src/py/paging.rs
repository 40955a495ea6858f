//! A connection walk handed to Python one page at a time; the Python Paginator classes iterate
//! the items. One page ahead is fetched in the background by the core stream.

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::core::paging::{Page, PageStream};
use crate::py::convert::Builder;
use crate::py::errors::to_py as err;
use crate::py::runtime::block_on;

#[pyclass(frozen, module = "secfindings._native")]
pub struct NativePages {
    stream: Arc<tokio::sync::Mutex<PageStream>>,
    cursor: Arc<Mutex<Option<String>>>,
}

impl NativePages {
    pub fn new(stream: PageStream) -> Self {
        let cursor = stream.cursor().map(str::to_string);
        Self { stream: Arc::new(tokio::sync::Mutex::new(stream)), cursor: Arc::new(Mutex::new(cursor)) }
    }
}

/// (items, page_info, item_cursors) for Python, or None at the end; item_cursors is empty when
/// the query does not select the edges' cursors.
fn page_to_py(py: Python<'_>, page: Option<Page>) -> PyResult<Py<PyAny>> {
    let Some(page) = page else { return Ok(py.None()) };
    // One builder for the page: every node shares the key strings.
    let mut builder = Builder::new(py);
    let nodes = page.nodes.iter().map(|n| builder.value(n)).collect::<PyResult<Vec<_>>>()?;
    let items = PyList::new(py, nodes)?;
    let info = PyDict::new(py);
    info.set_item("has_next_page", page.info.has_next_page)?;
    info.set_item("has_previous_page", page.info.has_previous_page)?;
    info.set_item("start_cursor", page.info.start_cursor)?;
    info.set_item("end_cursor", page.info.end_cursor)?;
    Ok((items, info, page.cursors).into_pyobject(py)?.into_any().unbind())
}

async fn next(
    stream: Arc<tokio::sync::Mutex<PageStream>>,
    cursor: Arc<Mutex<Option<String>>>,
) -> crate::core::Result<Option<Page>> {
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

    fn next_page(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let (stream, cursor) = (Arc::clone(&self.stream), Arc::clone(&self.cursor));
        let page = block_on(py, next(stream, cursor))?.map_err(err)?;
        page_to_py(py, page)
    }

    fn next_page_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (stream, cursor) = (Arc::clone(&self.stream), Arc::clone(&self.cursor));
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            let page = next(stream, cursor).await.map_err(err)?;
            Python::attach(|py| page_to_py(py, page))
        })
    }
}
