//! JSON values <-> Python objects, directly, without an intermediate text form.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

use crate::core::Error;

/// Builds Python objects for a JSON value: dict, list, str, int, float, bool, None.
pub fn to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Builder::new(py).value(v)
}

pub fn dict<'py>(py: Python<'py>, map: &Map<String, Value>) -> PyResult<Bound<'py, PyDict>> {
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

fn invalid(path: &str, what: &str) -> Error {
    let at = if path.is_empty() { "value".to_string() } else { path.to_string() };
    Error::Validation(format!("{at} {what}"))
}

/// The deepest nesting of lists and dicts accepted in variables and arguments. Deeper values
/// (or a structure that contains itself) are refused instead of exhausting the stack; the
/// deepest legitimate value (a filter tree inside a rule) is far shallower, and the request
/// stays within the 128 levels a default JSON parser (serde_json's) reads back.
pub const MAX_DEPTH: usize = 120;

/// A path for messages: long ones (deep values) keep their start and say how deep they went.
fn short(path: &str) -> String {
    const KEEP: usize = 60;
    match path.char_indices().nth(KEEP) {
        Some((i, _)) => format!("{}...", &path[..i]),
        None => path.to_string(),
    }
}

/// Converts Python values to JSON, refusing what JSON or GraphQL cannot carry (NaN, infinities,
/// ints beyond 64 bits, bytes, naive datetimes, arbitrary objects, nesting deeper than
/// [`MAX_DEPTH`] or a structure that contains itself) instead of changing it silently.
fn from_py_at(obj: &Bound<'_, PyAny>, path: &str, depth: usize) -> Result<Value, Error> {
    if depth > MAX_DEPTH {
        let root = path.split(['.', '[']).next().filter(|r| !r.is_empty()).unwrap_or("value");
        return Err(Error::Validation(format!(
            "{root} nests deeper than {MAX_DEPTH} levels (at {}); does it contain itself?",
            short(path)
        )));
    }
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::from(i));
        }
        if let Ok(u) = obj.extract::<u64>() {
            return Ok(Value::from(u));
        }
        return Err(invalid(path, "is an int too large to encode"));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        let x = f.value();
        return Number::from_f64(x)
            .map(Value::Number)
            .ok_or_else(|| invalid(path, &format!("is {x}, which JSON cannot carry")));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return s
            .to_str()
            .map(|s| Value::String(s.to_string()))
            .map_err(|_| invalid(path, "is not valid UTF-8 text"));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        return dict_at(d, path, depth).map(Value::Object);
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        let mut out = Vec::new();
        for (i, item) in obj.try_iter().map_err(|_| invalid(path, "cannot be iterated"))?.enumerate() {
            let item = item.map_err(|_| invalid(path, "cannot be iterated"))?;
            out.push(from_py_at(&item, &format!("{path}[{i}]"), depth + 1)?);
        }
        return Ok(Value::Array(out));
    }
    // Dates, datetimes, enums and models: their JSON form by their own protocol.
    let type_name = obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
    if is_naive_datetime(obj) {
        return Err(invalid(
            path,
            "is a naive datetime (no timezone), which the server would read in its own zone; give a \
             timezone-aware one, e.g. datetime.now(timezone.utc) or dt.replace(tzinfo=timezone.utc)",
        ));
    }
    if let Ok(iso) = obj.call_method0("isoformat") {
        if let Ok(s) = iso.extract::<String>() {
            return Ok(Value::String(s));
        }
    }
    if obj.hasattr("value").unwrap_or(false) && obj.get_type().hasattr("__members__").unwrap_or(false) {
        if let Ok(v) = obj.getattr("value") {
            return from_py_at(&v, path, depth + 1);
        }
    }
    if let Ok(d) = obj.call_method0("to_dict") {
        return from_py_at(&d, path, depth + 1);
    }
    Err(invalid(path, &format!("has type {type_name}, which cannot be encoded as JSON")))
}

/// A `datetime.datetime` (it has a date, a time of day and an offset) without a UTC offset.
fn is_naive_datetime(obj: &Bound<'_, PyAny>) -> bool {
    let is_datetime = ["date", "hour", "utcoffset"].iter().all(|a| obj.hasattr(*a).unwrap_or(false));
    is_datetime && obj.call_method0("utcoffset").is_ok_and(|o| o.is_none())
}

/// Converts a variables mapping; keys must be strings.
pub fn from_dict(d: &Bound<'_, PyDict>, path: &str) -> Result<Map<String, Value>, Error> {
    dict_at(d, path, 0)
}

fn dict_at(d: &Bound<'_, PyDict>, path: &str, depth: usize) -> Result<Map<String, Value>, Error> {
    let mut map = Map::with_capacity(d.len());
    for (k, v) in d.iter() {
        let key: String = k.extract().map_err(|_| invalid(path, "has a key that is not a str"))?;
        let child = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
        map.insert(key, from_py_at(&v, &child, depth + 1)?);
    }
    Ok(map)
}

/// Reads an optional `variables=` argument: None or a mapping.
pub fn variables(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Map<String, Value>>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => match o.cast::<PyDict>() {
            Ok(d) => from_dict(d, "variables").map(Some).map_err(crate::py::errors::to_py),
            Err(_) => Err(PyTypeError::new_err("variables must be a dict or None")),
        },
    }
}
