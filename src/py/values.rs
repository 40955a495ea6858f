//! JSON values -> Python objects, directly, without an intermediate text form. A leaf of the
//! glue: the error mapping (`py::errors`) builds on it for GraphQL errors' data.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyList, PyString};
use serde_json::{Map, Number, Value};

/// Builds Python objects for a JSON value: dict, list, str, int, float, bool, None.
pub(crate) fn to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Builder::new(py).value(v)
}

pub(crate) fn dict<'py>(py: Python<'py>, map: &Map<String, Value>) -> PyResult<Bound<'py, PyDict>> {
    Builder::new(py).dict(map)
}

/// One conversion's state: the dict keys made so far. A page of results repeats the same few
/// keys in every node, so each key string is created once per conversion and then shared (its
/// hash is computed once too), instead of once per node.
pub(crate) struct Builder<'py> {
    py: Python<'py>,
    keys: Vec<Bound<'py, PyString>>,
}

const MAX_CACHED_KEYS: usize = 64;

impl<'py> Builder<'py> {
    pub(crate) fn new(py: Python<'py>) -> Self {
        Self { py, keys: Vec::new() }
    }

    fn key(&mut self, k: &str) -> Bound<'py, PyString> {
        // Compare by content: serde_json's maps own their key strings, one per node.
        for cached in &self.keys {
            if cached.to_str().is_ok_and(|c| c == k) {
                return cached.clone();
            }
        }
        let s = PyString::new(self.py, k);
        if self.keys.len() < MAX_CACHED_KEYS {
            self.keys.push(s.clone());
        }
        s
    }

    pub(crate) fn value(&mut self, v: &Value) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        Ok(match v {
            Value::Null => py.None().into_bound(py),
            Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
            Value::Number(n) => number(py, n)?,
            Value::String(s) => PyString::new(py, s).into_any(),
            Value::Array(items) => {
                let converted = items.iter().map(|item| self.value(item)).collect::<PyResult<Vec<_>>>()?;
                PyList::new(py, converted)?.into_any()
            }
            Value::Object(map) => self.dict(map)?.into_any(),
        })
    }

    fn dict(&mut self, map: &Map<String, Value>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(self.py);
        for (k, v) in map {
            let key = self.key(k);
            d.set_item(key, self.value(v)?)?;
        }
        Ok(d)
    }
}

fn number<'py>(py: Python<'py>, n: &Number) -> PyResult<Bound<'py, PyAny>> {
    if let Some(i) = n.as_i64() {
        Ok(i.into_pyobject(py)?.into_any())
    } else if let Some(u) = n.as_u64() {
        Ok(u.into_pyobject(py)?.into_any())
    } else {
        Ok(PyFloat::new(py, n.as_f64().unwrap_or(f64::NAN)).into_any())
    }
}
