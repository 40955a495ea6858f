//! Response bytes straight to Python objects, in one pass: serde_json's parser drives visitors
//! that build dicts, lists, strs and ints as it goes, with no intermediate tree. Dict keys repeat
//! on every node of a page, so each distinct key string is made once per response and shared
//! (its hash is computed once too), as orjson does.

use std::cell::RefCell;
use std::fmt;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyList, PyString};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::core::graphql::{bad_data, decode_response};
use crate::core::scan::Key;
use crate::core::secret::Redactor;
use crate::core::Error;
use crate::py::errors::to_py as err;

/// The most distinct keys shared per response; keys beyond it are made each time.
const MAX_KEYS: usize = 64;

/// The most dict shapes (key sequences) remembered per response.
const MAX_SHAPES: usize = 16;
/// Dicts with at least this many keys are made by copying a dict of the same shape: a new dict
/// has room for five keys and grows (a rehash) on the sixth; a copy is made at its final size.
const SHAPE_MIN_KEYS: usize = 6;

/// A dict shape seen before: its keys, in order, and an empty-valued dict of them to copy.
struct Shape<'py> {
    keys: Vec<Bound<'py, PyString>>,
    dict: Bound<'py, PyDict>,
}

struct Decoder<'py> {
    py: Python<'py>,
    keys: Vec<(Box<str>, Bound<'py, PyString>)>,
    /// Where the last key was found in `keys`: the next key of a repeated shape is usually next.
    last_key: usize,
    shapes: Vec<Shape<'py>>,
    /// The keys and values of the dicts being read, innermost last (one allocation per response).
    pending_keys: Vec<Bound<'py, PyString>>,
    pending_values: Vec<Bound<'py, PyAny>>,
    /// A Python error met inside a visitor (serde's error type cannot carry it).
    failed: RefCell<Option<PyErr>>,
    /// A number was read as a float although it may have been an integer beyond 64 bits (serde
    /// reads those as floats): the document is read again, exactly, by Python's json module.
    inexact: bool,
}

impl<'py> Decoder<'py> {
    fn new(py: Python<'py>) -> Self {
        Self {
            py,
            keys: Vec::new(),
            last_key: 0,
            shapes: Vec::new(),
            pending_keys: Vec::new(),
            pending_values: Vec::new(),
            failed: RefCell::new(None),
            inexact: false,
        }
    }

    fn key(&mut self, k: &str) -> Bound<'py, PyString> {
        let same = |c: &str| c.len() == k.len() && c == k;
        let next = self.last_key + 1;
        if let Some((c, s)) = self.keys.get(next) {
            if same(c) {
                self.last_key = next;
                return s.clone();
            }
        }
        if let Some(i) = self.keys.iter().position(|(c, _)| same(c)) {
            self.last_key = i;
            return self.keys[i].1.clone();
        }
        let s = PyString::new(self.py, k);
        if self.keys.len() < MAX_KEYS {
            self.last_key = self.keys.len();
            self.keys.push((k.into(), s.clone()));
        }
        s
    }

    /// The dict of the pending entries from `start` on, which are taken off the stack.
    fn dict(&mut self, start: usize) -> PyResult<Bound<'py, PyDict>> {
        let keys = &self.pending_keys[start..];
        let n = keys.len();
        let shape = if n >= SHAPE_MIN_KEYS {
            self.shapes
                .iter()
                .position(|s| s.keys.len() == n && s.keys.iter().zip(keys).all(|(a, b)| a.is(b)))
        } else {
            None
        };
        let dict = match shape {
            Some(i) => self.shapes[i].dict.copy()?,
            None => PyDict::new(self.py),
        };
        for (k, v) in keys.iter().zip(self.pending_values.drain(start..)) {
            dict.set_item(k, v)?;
        }
        if shape.is_none() && n >= SHAPE_MIN_KEYS && self.shapes.len() < MAX_SHAPES {
            let template = PyDict::new(self.py);
            for k in keys {
                template.set_item(k, self.py.None())?;
            }
            self.shapes.push(Shape { keys: keys.to_vec(), dict: template });
        }
        self.pending_keys.truncate(start);
        Ok(dict)
    }

    fn fail<E: de::Error>(&self, e: PyErr) -> E {
        *self.failed.borrow_mut() = Some(e);
        E::custom("a Python object could not be created")
    }

    /// Turns a parse failure into the Python error it stands for.
    fn error(&self, e: &serde_json::Error) -> PyErr {
        match self.failed.borrow_mut().take() {
            Some(py_err) => py_err,
            None => err(Error::Transport(format!(
                "the response body is not the JSON a GraphQL server sends ({e})"
            ))),
        }
    }
}

/// Any JSON value, as a Python object.
struct ValueSeed<'a, 'py>(&'a mut Decoder<'py>);

impl<'de, 'py> DeserializeSeed<'de> for ValueSeed<'_, 'py> {
    type Value = Bound<'py, PyAny>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, 'py> Visitor<'de> for ValueSeed<'_, 'py> {
    type Value = Bound<'py, PyAny>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(self.0.py.None().into_bound(self.0.py))
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.visit_unit()
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(PyBool::new(self.0.py, v).to_owned().into_any())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        match v.into_pyobject(self.0.py) {
            Ok(i) => Ok(i.into_any()),
        }
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        match v.into_pyobject(self.0.py) {
            Ok(i) => Ok(i.into_any()),
        }
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        // Integers up to 2**64 arrive as i64/u64; a whole float this large may be an integer
        // literal that did not fit (123456789012345678901234567890).
        if v.fract() == 0.0 && v.abs() >= 9.2e18 {
            self.0.inexact = true;
        }
        Ok(PyFloat::new(self.0.py, v).into_any())
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(PyString::new(self.0.py, v).into_any())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element_seed(ValueSeed(&mut *self.0))? {
            items.push(item);
        }
        PyList::new(self.0.py, items).map(Bound::into_any).map_err(|e| self.0.fail(e))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let dec = self.0;
        let start = dec.pending_keys.len();
        while let Some(key) = map.next_key_seed(KeySeed(&mut *dec))? {
            let value = map.next_value_seed(ValueSeed(&mut *dec))?;
            dec.pending_keys.push(key);
            dec.pending_values.push(value);
        }
        dec.dict(start).map(Bound::into_any).map_err(|e| dec.fail(e))
    }
}

/// A dict key, shared with the earlier keys of the same text.
struct KeySeed<'a, 'py>(&'a mut Decoder<'py>);

impl<'de, 'py> DeserializeSeed<'de> for KeySeed<'_, 'py> {
    type Value = Bound<'py, PyString>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de, 'py> Visitor<'de> for KeySeed<'_, 'py> {
    type Value = Bound<'py, PyString>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(self.0.key(v))
    }
}

/// The response envelope: `data` decoded, `errors` only looked at.
struct EnvelopeSeed<'a, 'py>(&'a mut Decoder<'py>);

impl<'de, 'py> DeserializeSeed<'de> for EnvelopeSeed<'_, 'py> {
    type Value = (Option<Bound<'py, PyAny>>, bool);
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, 'py> Visitor<'de> for EnvelopeSeed<'_, 'py> {
    type Value = (Option<Bound<'py, PyAny>>, bool);
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a GraphQL response object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut data, mut errors) = (None, false);
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.as_str() {
                "data" => data = Some(map.next_value_seed(ValueSeed(&mut *self.0))?),
                "errors" => {
                    errors = map.next_value::<Option<Vec<IgnoredAny>>>()?.is_some_and(|e| !e.is_empty());
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok((data, errors))
    }
}

/// The document read by Python's json module, which keeps integers of any size exact; used
/// only for the rare document with a number too large for 64 bits.
fn exact<'py>(py: Python<'py>, body: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.call_method1("loads", (PyBytes::new(py, body),)).map_err(|e| {
        err(Error::Transport(format!("the response body is not the JSON a GraphQL server sends ({e})")))
    })
}

/// Any JSON document as Python objects.
pub(crate) fn json<'py>(py: Python<'py>, body: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    let mut dec = Decoder::new(py);
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = ValueSeed(&mut dec).deserialize(&mut de).map_err(|e| dec.error(&e))?;
    de.end().map_err(|e| dec.error(&e))?;
    if dec.inexact {
        return exact(py, body);
    }
    Ok(value)
}

/// A GraphQL response body's `data` as Python objects (a dict); a response with `errors` raises
/// the matching error (with partial data), scrubbed of the client's secrets, and one without
/// `data` as an object raises a TransportError that says what came instead.
pub(crate) fn data<'py>(py: Python<'py>, body: &[u8], redactor: &Redactor) -> PyResult<Bound<'py, PyAny>> {
    let mut dec = Decoder::new(py);
    let mut de = serde_json::Deserializer::from_slice(body);
    let (data, errors) = EnvelopeSeed(&mut dec).deserialize(&mut de).map_err(|e| dec.error(&e))?;
    de.end().map_err(|e| dec.error(&e))?;
    if errors {
        decode_response(body).map_err(|e| err(e.redact(redactor)))?;
    }
    let data = match data {
        Some(d) if dec.inexact => Some(exact(py, body)?.get_item("data").unwrap_or(d)),
        other => other,
    };
    match data {
        Some(d) if d.is_instance_of::<PyDict>() => Ok(d),
        other => {
            let shape = other.map(|d| {
                if d.is_none() {
                    serde_json::Value::Null
                } else if d.is_instance_of::<PyList>() {
                    serde_json::Value::Array(Vec::new())
                } else if d.is_instance_of::<PyString>() {
                    serde_json::Value::String(String::new())
                } else {
                    serde_json::Value::Bool(false)
                }
            });
            Err(err(bad_data(shape.as_ref())))
        }
    }
}
