//! The one place core errors become Python exceptions. The classes live in
//! `secfindings.errors` (Python), so they can also subclass ValueError, ConnectionError and
//! TimeoutError; they are looked up once and cached.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyModule};

use crate::core::Error;
use crate::py::values::to_py as value_to_py;

static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

fn class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    let module = ERRORS.get_or_try_init(py, || py.import("secfindings.errors").map(Bound::unbind))?;
    module.bind(py).getattr(name)
}

fn headers<'py>(py: Python<'py>, pairs: &[(String, String)]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in pairs {
        d.set_item(k, v)?;
    }
    Ok(d)
}

fn build(py: Python<'_>, err: Error) -> PyResult<PyErr> {
    let kw = PyDict::new(py);
    let (name, message) = match err {
        Error::Configuration(m) => ("ConfigurationError", m),
        Error::Validation(m) => ("ValidationError", m),
        Error::Authentication { error_type, message } => {
            kw.set_item("error_type", error_type)?;
            ("AuthenticationError", message)
        }
        Error::Transport(m) => ("TransportError", m),
        Error::Timeout(m) => ("TimeoutError", m),
        Error::ApiStatus { status, message, body, headers: h } => {
            kw.set_item("status_code", status)?;
            kw.set_item("body", body)?;
            kw.set_item("headers", headers(py, &h)?)?;
            ("APIStatusError", format!("HTTP {status}: {message}"))
        }
        Error::RateLimit { status, message, body, headers: h, retry_after } => {
            kw.set_item("status_code", status)?;
            kw.set_item("body", body)?;
            kw.set_item("headers", headers(py, &h)?)?;
            kw.set_item("retry_after", retry_after)?;
            ("RateLimitError", message)
        }
        Error::GraphQL { message, errors, data, not_found } => {
            let list = PyList::empty(py);
            for e in &errors {
                list.append(value_to_py(py, e)?)?;
            }
            kw.set_item("errors", list)?;
            kw.set_item(
                "data",
                match &data {
                    Some(d) => value_to_py(py, d)?,
                    None => py.None().into_bound(py),
                },
            )?;
            // Decided by the core from the answer: the subclass a caller catches for "no such finding".
            (if not_found { "NotFoundError" } else { "GraphQLError" }, message)
        }
        Error::Pagination { message, cursor } => {
            kw.set_item("cursor", cursor)?;
            ("PaginationError", message)
        }
        Error::Subscription { message, cursor } => {
            kw.set_item("cursor", cursor)?;
            ("SubscriptionError", message)
        }
        Error::Closed(m) => ("ClientClosedError", m),
    };
    let cls = class(py, name)?;
    let instance = cls.call((message,), Some(&kw))?;
    Ok(PyErr::from_value(instance))
}

/// Converts a core error into the matching `secfindings` exception.
pub(crate) fn to_py(err: Error) -> PyErr {
    Python::attach(|py| match build(py, err) {
        Ok(e) => e,
        Err(lookup) => {
            PyRuntimeError::new_err(format!("secfindings could not build its exception: {lookup}"))
        }
    })
}
