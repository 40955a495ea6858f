//! Response bytes straight to Python objects, in one pass: serde_json's parser drives visitors
//! that build dicts, lists, strs and ints as it goes, with no intermediate tree. Dict keys repeat
//! on every node of a page, so each distinct key string is made once per response and shared
//! (its hash is computed once too), as orjson does.

use std::cell::RefCell;
use std::fmt;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyList, PyString};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::core::graphql::decode_response;
use crate::core::scan::Key;
use crate::core::Error;
use crate::py::errors::to_py as err;

/// The most distinct keys shared per response; keys beyond it are made each time.
const MAX_KEYS: usize = 64;

struct Decoder<'py> {
    py: Python<'py>,
    keys: Vec<(Box<str>, Bound<'py, PyString>)>,
    /// A Python error met inside a visitor (serde's error type cannot carry it).
    failed: RefCell<Option<PyErr>>,
}

impl<'py> Decoder<'py> {
    fn new(py: Python<'py>) -> Self {
        Self { py, keys: Vec::new(), failed: RefCell::new(None) }
    }

    fn key(&mut self, k: &str) -> Bound<'py, PyString> {
        if let Some((_, s)) = self.keys.iter().find(|(c, _)| c.len() == k.len() && **c == *k) {
            return s.clone();
        }
        let s = PyString::new(self.py, k);
        if self.keys.len() < MAX_KEYS {
            self.keys.push((k.into(), s.clone()));
        }
        s
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
        let dict = PyDict::new(self.0.py);
        while let Some(key) = map.next_key_seed(KeySeed(&mut *self.0))? {
            let value = map.next_value_seed(ValueSeed(&mut *self.0))?;
            dict.set_item(key, value).map_err(|e| self.0.fail(e))?;
        }
        Ok(dict.into_any())
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

/// Any JSON document as Python objects.
pub fn json<'py>(py: Python<'py>, body: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    let mut dec = Decoder::new(py);
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = ValueSeed(&mut dec).deserialize(&mut de).map_err(|e| dec.error(&e))?;
    de.end().map_err(|e| dec.error(&e))?;
    Ok(value)
}

/// A GraphQL response body's `data` as Python objects; a response with `errors` raises the
/// matching error (with partial data), as the core decodes it.
pub fn data<'py>(py: Python<'py>, body: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    let mut dec = Decoder::new(py);
    let mut de = serde_json::Deserializer::from_slice(body);
    let (data, errors) = EnvelopeSeed(&mut dec).deserialize(&mut de).map_err(|e| dec.error(&e))?;
    de.end().map_err(|e| dec.error(&e))?;
    if errors {
        decode_response(body).map_err(err)?;
    }
    Ok(data.unwrap_or_else(|| py.None().into_bound(py)))
}
