//! The operation catalog and the global-id helpers, as Python sees them.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::core::graphql::OperationKind;
use crate::core::operations::{self, Returns};
use crate::py::errors::to_py as err;

/// The SDL the package was built against (`schema/schema.graphql`, the emulator's too), the
/// fallback when a server refuses introspection. Built in with or without the emulator.
#[pyfunction]
pub(crate) fn builtin_sdl() -> &'static str {
    secfindings_schema::SDL
}

/// Every catalog entry as a dict (what the generator of the typed methods reads).
#[pyfunction]
pub(crate) fn catalog(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let out = PyList::empty(py);
    for op in operations::catalog() {
        let d = PyDict::new(py);
        d.set_item("name", op.name)?;
        d.set_item("kind", if op.kind == OperationKind::Mutation { "mutation" } else { "query" })?;
        d.set_item("doc", op.doc)?;
        let args = PyList::empty(py);
        for a in op.args {
            args.append(PyTuple::new(py, [a.name, a.ty])?)?;
        }
        d.set_item("args", args)?;
        let returns = match op.returns {
            Returns::Object(_) => "object",
            Returns::Connection(_) => "connection",
            Returns::Scalar(_) => "scalar",
        };
        d.set_item("returns", returns)?;
        d.set_item("type", op.returns.type_name())?;
        d.set_item("selection", op.selection)?;
        d.set_item("deprecated", op.deprecated)?;
        d.set_item("resendable", op.retry == crate::core::retry::RetryClass::Idempotent)?;
        out.append(d)?;
    }
    Ok(out)
}

/// The fields of the input objects the client checks, by type name.
#[pyfunction]
pub(crate) fn input_objects(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    for (name, fields) in operations::INPUT_OBJECTS {
        let list = PyList::empty(py);
        for a in *fields {
            list.append(PyTuple::new(py, [a.name, a.ty])?)?;
        }
        out.set_item(*name, list)?;
    }
    Ok(out)
}

/// `to_global_id("Finding", 17)` -> `"RmluZGluZzoxNw=="`.
#[pyfunction]
pub(crate) fn to_global_id(type_name: &str, pk: &Bound<'_, PyAny>) -> PyResult<String> {
    let pk: String = match pk.extract::<i64>() {
        Ok(i) if !pk.is_instance_of::<pyo3::types::PyBool>() => i.to_string(),
        _ => pk
            .extract::<String>()
            .map_err(|_| err(crate::core::Error::Validation("pk must be a str or an int".into())))?,
    };
    crate::core::ids::to_global_id(type_name, &pk).map_err(err)
}

/// `from_global_id("RmluZGluZzoxNw==")` -> `("Finding", "17")`.
#[pyfunction]
pub(crate) fn from_global_id(id: &str) -> PyResult<(String, String)> {
    crate::core::ids::from_global_id(id).map_err(err)
}
