//! A catalog operation built once (`core::prepared`), as Python holds it: the live-schema layer
//! checks its `query` and `variables`, then hands the same object to the client to send.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::core::prepared::{self, Prepared};
use crate::py::errors::to_py as err;

/// A catalog operation with its arguments checked and its document built; opaque but for what
/// the checks read. Sent as it is by `NativeClient.call_prepared` / `paginate_prepared`.
#[pyclass(frozen, module = "secfindings._native")]
pub struct PreparedOperation {
    pub(crate) inner: Arc<Prepared>,
    fields: Option<String>,
}

#[pymethods]
impl PreparedOperation {
    /// The catalog operation's name (the field of `data` its result is under).
    #[getter]
    fn name(&self) -> &'static str {
        self.inner.operation().name
    }

    /// The selection asked for (`None`: the catalog's default).
    #[getter]
    fn fields(&self) -> Option<&str> {
        self.fields.as_deref()
    }

    /// The GraphQL document, as sent.
    #[getter]
    fn query(&self) -> &str {
        self.inner.query()
    }

    /// The variables, as sent (a new dict each time).
    #[getter]
    fn variables<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        crate::py::values::dict(py, self.inner.variables())
    }

    fn __repr__(&self) -> String {
        format!("<PreparedOperation {}>", self.inner.operation().name)
    }
}

/// Checks `args` of the catalog operation `name` and builds its document, without sending it.
#[pyfunction]
#[pyo3(signature = (name, args, fields=None))]
pub(crate) fn prepare_operation(
    name: &str,
    args: Bound<'_, PyDict>,
    fields: Option<String>,
) -> PyResult<PreparedOperation> {
    let args = crate::py::convert::from_dict(&args, "")?;
    let inner = prepared::prepare_operation(name, args, fields.as_deref()).map_err(err)?;
    Ok(PreparedOperation { inner: Arc::new(inner), fields })
}

/// Forgets what was learnt of the server at `base_url` about batched walks (the pages per
/// request it took): a new server answers there.
#[pyfunction]
pub(crate) fn forget_batch_sizes(base_url: &str) {
    crate::core::batched::forget(base_url);
}

/// The pages per request the server at `base_url` took after refusing more (None: it refused
/// none in this process), for `estimate()`.
#[pyfunction]
pub(crate) fn batch_pages_for(base_url: &str) -> Option<u32> {
    crate::core::batched::remembered_for(base_url)
}

/// Whether `cursor` is a batched walk's own (`sfb1:...`): only a batched walk resumes from it.
#[pyfunction]
pub(crate) fn is_batch_cursor(cursor: &str) -> bool {
    crate::core::batched::parse_cursor(cursor).is_some()
}
