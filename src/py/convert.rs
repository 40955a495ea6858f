//! Python objects -> JSON values for arguments and variables, checked on the way (the other
//! direction, which needs no errors of ours, is `py::values`).

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

use crate::core::Error;
use crate::py::errors::to_py as err;

/// Where a value is in the arguments, kept as segments and formatted only for a message (a long
/// key repeated at every level must not cost memory in the square of the depth).
#[derive(Default)]
struct Path {
    root: String,
    segs: Vec<Seg>,
}

enum Seg {
    Key(String),
    Index(usize),
}

impl Path {
    fn render(&self) -> String {
        const KEEP: usize = 60;
        let mut out = self.root.clone();
        for seg in &self.segs {
            if out.chars().count() > KEEP {
                out.push_str("...");
                break;
            }
            match seg {
                Seg::Key(k) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.extend(k.chars().take(KEEP));
                }
                Seg::Index(i) => out.push_str(&format!("[{i}]")),
            }
        }
        if out.is_empty() {
            "value".into()
        } else {
            out
        }
    }

    fn invalid(&self, what: &str) -> PyErr {
        err(Error::Validation(format!("{} {what}", self.render())))
    }

    /// The name of the argument the value belongs to (the first segment).
    fn argument(&self) -> String {
        if !self.root.is_empty() {
            return self.root.clone();
        }
        match self.segs.first() {
            Some(Seg::Key(k)) => k.chars().take(60).collect(),
            _ => "value".into(),
        }
    }
}

/// The deepest nesting of lists and dicts accepted in variables and arguments. Deeper values
/// (or a structure that contains itself) are refused instead of exhausting the stack; the
/// deepest legitimate value (a filter tree inside a rule) is far shallower, and the request
/// stays within the 128 levels a default JSON parser (serde_json's) reads back.
pub(crate) const MAX_DEPTH: usize = 120;

/// Converts Python values to JSON, refusing what JSON or GraphQL cannot carry (NaN, infinities,
/// ints beyond 64 bits, bytes, naive datetimes, arbitrary objects, nesting deeper than
/// [`MAX_DEPTH`] or a structure that contains itself) instead of changing it silently. An
/// exception raised by a value's own `isoformat()` or `to_dict()` propagates as it is.
fn from_py_at(obj: &Bound<'_, PyAny>, path: &mut Path) -> PyResult<Value> {
    if path.segs.len() > MAX_DEPTH {
        return Err(err(Error::Validation(format!(
            "{} nests deeper than {MAX_DEPTH} levels (at {}); does it contain itself?",
            path.argument(),
            path.render()
        ))));
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
        return Err(path.invalid("is an int too large to encode"));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        let x = f.value();
        return Number::from_f64(x)
            .map(Value::Number)
            .ok_or_else(|| path.invalid(&format!("is {x}, which JSON cannot carry")));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return s
            .to_str()
            .map(|s| Value::String(s.to_string()))
            .map_err(|_| path.invalid("is not valid UTF-8 text"));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        return dict_at(d, path).map(Value::Object);
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        // A snapshot: a value that changes the list while it is read cannot derail the walk.
        let items: Vec<Bound<'_, PyAny>> = obj.try_iter()?.collect::<PyResult<_>>()?;
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            path.segs.push(Seg::Index(i));
            let v = from_py_at(item, path);
            path.segs.pop();
            out.push(v?);
        }
        return Ok(Value::Array(out));
    }
    // Dates, datetimes, enums and models: their JSON form by their own protocol.
    let type_name = obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
    if is_naive_datetime(obj)? {
        return Err(path.invalid(
            "is a naive datetime (no timezone), which the server would read in its own zone; give a \
             timezone-aware one, e.g. datetime.now(timezone.utc) or dt.replace(tzinfo=timezone.utc)",
        ));
    }
    if obj.hasattr("isoformat")? {
        if let Ok(s) = obj.call_method0("isoformat")?.extract::<String>() {
            return Ok(Value::String(s));
        }
    }
    if obj.hasattr("value")? && obj.get_type().hasattr("__members__")? {
        let v = obj.getattr("value")?;
        path.segs.push(Seg::Key("value".into()));
        let out = from_py_at(&v, path);
        path.segs.pop();
        return out;
    }
    if obj.hasattr("to_dict")? {
        let d = obj.call_method0("to_dict").map_err(|e| {
            if e.is_instance_of::<pyo3::exceptions::PyRecursionError>(obj.py()) {
                path.invalid("nests too deeply (does it contain itself?)")
            } else {
                e
            }
        })?;
        path.segs.push(Seg::Key(format!("{type_name}.to_dict()")));
        let out = from_py_at(&d, path);
        path.segs.pop();
        return out;
    }
    Err(path.invalid(&format!("has type {type_name}, which cannot be encoded as JSON")))
}

/// A `datetime.datetime` (it has a date, a time of day and an offset) without a UTC offset.
fn is_naive_datetime(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    for a in ["date", "hour", "utcoffset"] {
        if !obj.hasattr(a)? {
            return Ok(false);
        }
    }
    Ok(obj.call_method0("utcoffset")?.is_none())
}

/// Converts a variables mapping; keys must be strings. `root` names it in messages.
pub(crate) fn from_dict(d: &Bound<'_, PyDict>, root: &str) -> PyResult<Map<String, Value>> {
    let mut path = Path { root: root.to_string(), segs: Vec::new() };
    dict_at(d, &mut path)
}

fn dict_at(d: &Bound<'_, PyDict>, path: &mut Path) -> PyResult<Map<String, Value>> {
    // A snapshot of the items: a value whose conversion changes the dict (a to_dict() with side
    // effects) cannot make the iteration fail.
    let items = d.items();
    let mut map = Map::with_capacity(items.len());
    for item in items.iter() {
        let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
        let key: String = k.extract().map_err(|_| path.invalid("has a key that is not a str"))?;
        path.segs.push(Seg::Key(key.clone()));
        let value = from_py_at(&v, path);
        path.segs.pop();
        map.insert(key, value?);
    }
    Ok(map)
}

/// Reads an optional `variables=` argument: None or a mapping.
pub(crate) fn variables(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Map<String, Value>>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => match o.cast::<PyDict>() {
            Ok(d) => from_dict(d, "variables").map(Some),
            Err(_) => Err(PyTypeError::new_err("variables must be a dict or None")),
        },
    }
}
