//! A column's type, how it is seen in JSON values, and how it widens over pages.

use std::sync::Arc;

use arrow_schema::{DataType, Field, TimeUnit};
use serde_json::Value;

/// A column's type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Not known yet (only nulls so far): becomes the type of the first value.
    Null,
    Int,
    Float,
    Bool,
    Str,
    /// An ISO 8601 timestamp, as microseconds since the epoch in UTC.
    DateTime,
    /// An ISO 8601 date.
    Date,
    /// Kept as JSON text: a JSONString scalar, a list of objects, a nested connection.
    Json,
    /// A list of scalars of this kind.
    List(Box<Kind>),
}

impl Kind {
    pub(super) fn data_type(&self) -> DataType {
        match self {
            Self::Null => DataType::Null,
            Self::Int => DataType::Int64,
            Self::Float => DataType::Float64,
            Self::Bool => DataType::Boolean,
            Self::Str | Self::Json => DataType::Utf8,
            Self::DateTime => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            Self::Date => DataType::Date32,
            Self::List(inner) => DataType::List(Arc::new(Field::new("item", inner.data_type(), true))),
        }
    }

    pub(super) fn name(&self) -> String {
        match self {
            Self::Null => "null".into(),
            Self::Int => "int".into(),
            Self::Float => "float".into(),
            Self::Bool => "bool".into(),
            Self::Str => "string".into(),
            Self::DateTime => "datetime".into(),
            Self::Date => "date".into(),
            Self::Json => "JSON text".into(),
            Self::List(inner) => format!("list of {}", inner.name()),
        }
    }

    /// The kind of a JSON value, for inference: objects never reach here (they are flattened).
    pub(super) fn of(v: &Value) -> Self {
        match v {
            Value::Null => Self::Null,
            Value::Bool(_) => Self::Bool,
            Value::Number(n) if n.is_f64() => Self::Float,
            Value::Number(_) => Self::Int,
            Value::String(_) => Self::Str,
            Value::Object(_) => Self::Json,
            Value::Array(items) => {
                let mut inner = Self::Null;
                for item in items {
                    let k = Self::of(item);
                    inner = match (inner, k) {
                        (Self::Null, k) | (k, Self::Null) => k,
                        (a, b) if a == b => a,
                        (Self::Int, Self::Float) | (Self::Float, Self::Int) => Self::Float,
                        // Mixed or nested lists: kept as JSON text.
                        _ => return Self::Json,
                    };
                }
                match inner {
                    Self::Json | Self::List(_) => Self::Json,
                    k => Self::List(Box::new(k)),
                }
            }
        }
    }

    /// The kind that holds both, when one widens to the other.
    pub(super) fn widen(&self, seen: &Self) -> Option<Self> {
        match (self, seen) {
            (a, b) if a == b => Some(a.clone()),
            (Self::Null, b) => Some(b.clone()),
            (a, Self::Null) => Some(a.clone()),
            (Self::Int, Self::Float) | (Self::Float, Self::Int) => Some(Self::Float),
            (Self::List(a), Self::List(b)) => a.widen(b).map(|k| Self::List(Box::new(k))),
            // Empty lists so far, then a list of objects: JSON text ("[]" for the empty ones).
            (Self::List(a), Self::Json) | (Self::Json, Self::List(a)) if **a == Self::Null => {
                Some(Self::Json)
            }
            _ => None,
        }
    }
}
