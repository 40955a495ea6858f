//! The Arrow builders of the columns, and how one JSON value is appended to each kind.

use arrow_array::builder::*;
use arrow_array::{Array, ArrayRef};
use std::sync::Arc;

use arrow_schema::{DataType, Field};
use serde_json::Value;

use super::kind::Kind;
use crate::core::scalars::{parse_date, parse_datetime_us};

/// A column of lists of nothing (only empty lists or nulls so far) that is now JSON text.
pub(super) fn empty_lists_as_json(a: &ArrayRef, target: &DataType) -> bool {
    matches!(a.data_type(), DataType::List(f) if f.data_type() == &DataType::Null)
        && target == &DataType::Utf8
}

/// One column being built.
pub(super) enum Builder {
    Null(NullBuilder),
    Int(Int64Builder),
    Float(Float64Builder),
    Bool(BooleanBuilder),
    Str(StringBuilder),
    Json(StringBuilder),
    DateTime(TimestampMicrosecondBuilder),
    Date(Date32Builder),
    List(ListBuilder<Box<dyn ArrayBuilder>>, Kind),
}

pub(super) fn scalar_builder(kind: &Kind, rows: usize) -> Box<dyn ArrayBuilder> {
    match kind {
        Kind::Null => Box::new(NullBuilder::new()),
        Kind::Int => Box::new(Int64Builder::with_capacity(rows)),
        Kind::Float => Box::new(Float64Builder::with_capacity(rows)),
        Kind::Bool => Box::new(BooleanBuilder::with_capacity(rows)),
        Kind::DateTime => Box::new(TimestampMicrosecondBuilder::with_capacity(rows).with_timezone("UTC")),
        Kind::Date => Box::new(Date32Builder::with_capacity(rows)),
        _ => Box::new(StringBuilder::with_capacity(rows, rows.saturating_mul(8))),
    }
}

/// Appends one scalar to a boxed builder of `kind` (the items of a list column).
pub(super) fn append_item(
    builder: &mut dyn ArrayBuilder,
    kind: &Kind,
    v: &Value,
) -> std::result::Result<(), String> {
    let any = builder.as_any_mut();
    macro_rules! to {
        ($ty:ty) => {
            any.downcast_mut::<$ty>().ok_or_else(|| "has a list the client cannot build".to_string())?
        };
    }
    match (kind, v) {
        (_, Value::Null) => match kind {
            Kind::Null => to!(NullBuilder).append_null(),
            Kind::Int => to!(Int64Builder).append_null(),
            Kind::Float => to!(Float64Builder).append_null(),
            Kind::Bool => to!(BooleanBuilder).append_null(),
            Kind::DateTime => to!(TimestampMicrosecondBuilder).append_null(),
            Kind::Date => to!(Date32Builder).append_null(),
            _ => to!(StringBuilder).append_null(),
        },
        (Kind::Int, v) => to!(Int64Builder).append_value(int(v)?),
        (Kind::Float, v) => to!(Float64Builder).append_value(float(v)?),
        (Kind::Bool, Value::Bool(b)) => to!(BooleanBuilder).append_value(*b),
        (Kind::DateTime, v) => to!(TimestampMicrosecondBuilder).append_value(datetime(v)?),
        (Kind::Date, v) => to!(Date32Builder).append_value(date(v)?),
        (Kind::Str, Value::String(s)) => to!(StringBuilder).append_value(s),
        (Kind::Json, v) => to!(StringBuilder).append_value(json_text(v)),
        (k, v) => return Err(mismatch(k, v)),
    }
    Ok(())
}

pub(super) fn mismatch(kind: &Kind, v: &Value) -> String {
    let what = match v {
        Value::Null => "null",
        Value::Bool(_) => "a bool",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    };
    format!("is {what}, not a {}", kind.name())
}

pub(super) fn int(v: &Value) -> std::result::Result<i64, String> {
    v.as_i64().ok_or_else(|| match v {
        Value::Number(n) => format!("is {n}, which does not fit a 64-bit int column"),
        other => mismatch(&Kind::Int, other),
    })
}

pub(super) fn float(v: &Value) -> std::result::Result<f64, String> {
    v.as_f64().ok_or_else(|| mismatch(&Kind::Float, v))
}

pub(super) fn json_text(v: &Value) -> String {
    match v {
        // A JSONString scalar is already JSON text.
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub(super) fn datetime(v: &Value) -> std::result::Result<i64, String> {
    let s = v.as_str().ok_or_else(|| mismatch(&Kind::DateTime, v))?;
    datetime_str(s).ok_or_else(|| format!("is {s:?}, not an ISO 8601 datetime"))
}

pub(super) fn datetime_str(s: &str) -> Option<i64> {
    parse_datetime_us(s)
}

pub(super) fn date(v: &Value) -> std::result::Result<i32, String> {
    let s = v.as_str().ok_or_else(|| mismatch(&Kind::Date, v))?;
    let d = s.get(..10).and_then(parse_date).ok_or_else(|| format!("is {s:?}, not an ISO 8601 date"))?;
    i32::try_from(d).map_err(|_| format!("is {s:?}, out of range"))
}

impl Builder {
    pub(super) fn new(kind: &Kind, rows: usize) -> Self {
        match kind {
            Kind::Null => Self::Null(NullBuilder::new()),
            Kind::Int => Self::Int(Int64Builder::with_capacity(rows)),
            Kind::Float => Self::Float(Float64Builder::with_capacity(rows)),
            Kind::Bool => Self::Bool(BooleanBuilder::with_capacity(rows)),
            Kind::Str => Self::Str(StringBuilder::with_capacity(rows, rows.saturating_mul(16))),
            Kind::Json => Self::Json(StringBuilder::with_capacity(rows, rows.saturating_mul(32))),
            Kind::DateTime => {
                Self::DateTime(TimestampMicrosecondBuilder::with_capacity(rows).with_timezone("UTC"))
            }
            Kind::Date => Self::Date(Date32Builder::with_capacity(rows)),
            Kind::List(inner) => Self::List(
                ListBuilder::new(scalar_builder(inner, rows)).with_field(Arc::new(Field::new(
                    "item",
                    inner.data_type(),
                    true,
                ))),
                (**inner).clone(),
            ),
        }
    }

    pub(super) fn append(&mut self, v: &Value) -> std::result::Result<(), String> {
        if v.is_null() {
            self.append_null();
            return Ok(());
        }
        match self {
            Self::Null(_) => return Err(format!("is {}, in a column of nulls", json_text(v))),
            Self::Int(b) => b.append_value(int(v)?),
            Self::Float(b) => b.append_value(float(v)?),
            Self::Bool(b) => b.append_value(v.as_bool().ok_or_else(|| mismatch(&Kind::Bool, v))?),
            Self::Str(b) => match v {
                Value::String(s) => b.append_value(s),
                // IDs and enums arrive as strings; a number in a text column is kept as its text.
                Value::Number(n) => b.append_value(n.to_string()),
                other => return Err(mismatch(&Kind::Str, other)),
            },
            Self::Json(b) => b.append_value(json_text(v)),
            Self::DateTime(b) => b.append_value(datetime(v)?),
            Self::Date(b) => b.append_value(date(v)?),
            Self::List(b, kind) => {
                let items = v.as_array().ok_or_else(|| mismatch(&Kind::List(Box::new(kind.clone())), v))?;
                for item in items {
                    append_item(b.values().as_mut(), kind, item)?;
                }
                b.append(true);
            }
        }
        Ok(())
    }

    pub(super) fn len(&self) -> usize {
        match self {
            Self::Null(b) => b.len(),
            Self::Int(b) => b.len(),
            Self::Float(b) => b.len(),
            Self::Bool(b) => b.len(),
            Self::Str(b) | Self::Json(b) => b.len(),
            Self::DateTime(b) => b.len(),
            Self::Date(b) => b.len(),
            Self::List(b, _) => b.len(),
        }
    }

    pub(super) fn append_null(&mut self) {
        match self {
            Self::Null(b) => b.append_null(),
            Self::Int(b) => b.append_null(),
            Self::Float(b) => b.append_null(),
            Self::Bool(b) => b.append_null(),
            Self::Str(b) | Self::Json(b) => b.append_null(),
            Self::DateTime(b) => b.append_null(),
            Self::Date(b) => b.append_null(),
            Self::List(b, _) => b.append_null(),
        }
    }

    pub(super) fn finish(self) -> ArrayRef {
        match self {
            Self::Null(mut b) => Arc::new(b.finish()),
            Self::Int(mut b) => Arc::new(b.finish()),
            Self::Float(mut b) => Arc::new(b.finish()),
            Self::Bool(mut b) => Arc::new(b.finish()),
            Self::Str(mut b) | Self::Json(mut b) => Arc::new(b.finish()),
            Self::DateTime(mut b) => Arc::new(b.finish()),
            Self::Date(mut b) => Arc::new(b.finish()),
            Self::List(mut b, _) => Arc::new(b.finish()),
        }
    }
}
