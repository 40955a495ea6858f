//! Findings as columns: pages decoded from response bytes straight into Arrow record batches,
//! never through Python objects.
//!
//! A [`Layout`] says which columns a walk has and of what type. For a typed operation it comes
//! from the selection and the schema's field types (`DateTime` -> timestamp UTC, `Int` -> int64,
//! nested objects flattened to dotted columns, lists of scalars as list columns); for any other
//! document it is inferred from the data and widened page by page (null -> a type, int ->
//! float). A value that does not fit its column is an error that names the column and the row,
//! never a silent null.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use arrow_array::builder::{
    ArrayBuilder, BooleanBuilder, Date32Builder, Float64Builder, Int64Builder, ListBuilder, NullBuilder,
    StringBuilder, TimestampMicrosecondBuilder,
};
use arrow_array::{new_null_array, Array, ArrayRef, RecordBatch, RecordBatchOptions};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use serde_json::Value;

use super::error::{Error, Result};
use super::paging::RawPage;
use super::scalars::{parse_date, parse_datetime_us};

/// The schema the typed operations are checked against (the emulator's SDL, which models the
/// specification): output fields' types by `Type.field`.
const SDL: &str = secfindings_schema::SDL;

/// A column's type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
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
    fn data_type(&self) -> DataType {
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

    fn name(&self) -> String {
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
    fn of(v: &Value) -> Self {
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
    fn widen(&self, seen: &Self) -> Option<Self> {
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

/// One column: its name (dotted for nested fields), where it is in a node, and its type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    pub path: Vec<String>,
    pub kind: Kind,
    /// From the schema: a value of another type is an error, the type never widens.
    pub typed: bool,
}

/// The columns of a walk.
#[derive(Clone, Debug, Default)]
pub struct Layout {
    columns: Vec<Column>,
    by_name: HashMap<String, usize>,
    /// The dotted names of the objects that columns sit in (`actual_status` of
    /// `actual_status.category`): a null there is a null object, not a new column.
    parents: std::collections::HashSet<String>,
    /// Fixed after the first batch of a stream: a stream has one schema.
    frozen: bool,
}

impl Layout {
    /// An empty layout: every column is inferred from the data.
    pub fn inferred() -> Self {
        Self::default()
    }

    /// The columns of a typed operation's nodes: `type_name`'s fields in `selection`, typed
    /// from the schema. Fields the schema does not know are inferred from the data.
    pub fn typed(type_name: &str, selection: &str) -> Result<Self> {
        let tree = parse_selection(selection)?;
        let mut layout = Self::default();
        layout.add_typed(Some(type_name), &tree, &mut Vec::new());
        Ok(layout)
    }

    fn add_typed(&mut self, type_name: Option<&str>, sel: &[Selected], prefix: &mut Vec<String>) {
        for s in sel {
            let field = type_name.and_then(|t| schema().field(t, &s.name));
            prefix.push(s.key().to_string());
            match (field, s.children.is_empty()) {
                (Some(f), false) if !f.list && !schema().is_connection(&f.type_name) => {
                    self.add_typed(Some(&f.type_name), &s.children, prefix);
                }
                // A list of objects, or a nested connection: one column of JSON text.
                (Some(_), false) => self.push(prefix.clone(), Kind::Json, true),
                (Some(f), true) => {
                    let base = scalar_kind(&f.type_name);
                    let kind = if f.list { Kind::List(Box::new(base)) } else { base };
                    self.push(prefix.clone(), kind, true);
                }
                // Not in the schema the client knows: flattened and typed from the data.
                (None, false) => self.add_typed(None, &s.children, prefix),
                (None, true) if s.name == "__typename" => self.push(prefix.clone(), Kind::Str, true),
                (None, true) => self.push(prefix.clone(), Kind::Null, false),
            }
            prefix.pop();
        }
    }

    fn push(&mut self, path: Vec<String>, kind: Kind, typed: bool) {
        let name = path.join(".");
        if self.by_name.contains_key(&name) {
            return;
        }
        self.by_name.insert(name.clone(), self.columns.len());
        for n in 1..path.len() {
            self.parents.insert(path[..n].join("."));
        }
        self.columns.push(Column { name, path, kind, typed });
    }

    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// The Arrow schema of the columns as they stand.
    pub fn schema(&self) -> SchemaRef {
        Arc::new(Schema::new(
            self.columns.iter().map(|c| Field::new(&c.name, c.kind.data_type(), true)).collect::<Vec<_>>(),
        ))
    }

    /// Takes in what a page's nodes show: new columns, and types for the untyped ones.
    fn learn(&mut self, nodes: &[&Value], first_row: usize) -> Result<()> {
        for (i, node) in nodes.iter().enumerate() {
            if let Value::Object(_) = node {
                let mut prefix = Vec::new();
                self.learn_value(node, &mut prefix, first_row.saturating_add(i))?;
            }
        }
        Ok(())
    }

    fn learn_value(&mut self, v: &Value, prefix: &mut Vec<String>, row: usize) -> Result<()> {
        match v {
            Value::Object(map) => {
                if let Some(idx) = self.column_at(prefix, row)? {
                    // A typed (or already seen) column holds this object as a whole.
                    return self.learn_kind(idx, Kind::Json, row);
                }
                for (k, child) in map {
                    if k.contains('\0') {
                        // Arrow hands names over as C strings: the name would be cut or refused.
                        return Err(Error::Transport(format!(
                            "row {row}: the key {k:?} holds a NUL character, which no column name can \
                             carry; read these rows with to_list() or write_jsonl()"
                        )));
                    }
                    prefix.push(k.clone());
                    self.learn_value(child, prefix, row)?;
                    prefix.pop();
                }
                Ok(())
            }
            other => {
                let kind = Kind::of(other);
                if kind == Kind::Null && self.parents.contains(&prefix.join(".")) {
                    return Ok(());
                }
                match self.column_at(prefix, row)? {
                    Some(idx) => self.learn_kind(idx, kind, row),
                    None if self.frozen => Err(self.frozen_error(&prefix.join("."), row)),
                    None => {
                        self.push(prefix.clone(), kind, false);
                        Ok(())
                    }
                }
            }
        }
    }

    /// The column of `path`; an error when another path flattens to the same name (a key
    /// `x.y` beside `x { y }`): one of them would be dropped.
    fn column_at(&self, path: &[String], row: usize) -> Result<Option<usize>> {
        let Some(&idx) = self.by_name.get(&path.join(".")) else { return Ok(None) };
        match self.columns.get(idx) {
            Some(c) if c.path != path => Err(Error::Transport(format!(
                "columns collide at row {row}: {} and {} both flatten to the column {:?}; select \
                 one of them under an alias, or read the rows as dicts (to_list())",
                describe_path(&c.path),
                describe_path(path),
                c.name
            ))),
            _ => Ok(Some(idx)),
        }
    }

    fn learn_kind(&mut self, idx: usize, seen: Kind, row: usize) -> Result<()> {
        let Some(col) = self.columns.get(idx) else { return Ok(()) };
        if col.typed || seen == Kind::Null || col.kind == seen {
            // Typed columns are checked when the value is appended.
            return Ok(());
        }
        // Objects under an inferred column that already holds scalars, and the like.
        let widened = if col.kind == Kind::Json { Some(Kind::Json) } else { col.kind.widen(&seen) };
        match widened {
            Some(k) if k == col.kind => Ok(()),
            Some(_) if self.frozen => Err(self.frozen_error(&col.name, row)),
            Some(k) => {
                if let Some(c) = self.columns.get_mut(idx) {
                    c.kind = k;
                }
                Ok(())
            }
            None => Err(Error::Transport(format!(
                "column {:?}: row {row} has a {} where earlier rows have a {}; the column cannot hold both",
                col.name,
                seen.name(),
                col.kind.name()
            ))),
        }
    }

    fn frozen_error(&self, name: &str, row: usize) -> Error {
        Error::Transport(format!(
            "column {name:?} changes type or first appears at row {row}, after the stream's schema was fixed \
             from its first page; use to_arrow() (which widens the schema over every page) or a typed method"
        ))
    }
}

/// A column's path as the reader sees it in the JSON: `the key "x.y"` or `the field x { y }`.
fn describe_path(path: &[String]) -> String {
    match path.split_last() {
        None => "the empty key".into(),
        Some((one, [])) => format!("the key {one:?}"),
        Some((last, outer)) => {
            let mut text = String::from("the field ");
            for key in outer {
                text.push_str(&format!("{key:?} {{ "));
            }
            text.push_str(&format!("{last:?}"));
            text.push_str(&" }".repeat(outer.len()));
            text
        }
    }
}

/// Finds the connection's nodes in a page answer (`path` or the only field of `data`), at most
/// `take` of them. A null node counts as a row of nulls.
fn page_nodes<'v>(data: &'v Value, path: Option<&[String]>, take: usize) -> Result<Vec<&'v Value>> {
    let vanished = || Error::pagination("the connection vanished from the decoded page");
    let mut conn = data.get("data").ok_or_else(vanished)?;
    match path {
        Some(path) => {
            for key in path {
                conn = conn.get(key).ok_or_else(vanished)?;
            }
        }
        None => conn = conn.as_object().and_then(|m| m.values().next()).ok_or_else(vanished)?,
    }
    if let Some(Value::Array(edges)) = conn.get("edges") {
        return Ok(edges.iter().take(take).map(|e| e.get("node").unwrap_or(&Value::Null)).collect());
    }
    if let Some(Value::Array(nodes)) = conn.get("nodes") {
        return Ok(nodes.iter().take(take).collect());
    }
    Ok(Vec::new())
}

/// Decodes one page answer into a record batch of `layout`'s columns. The fast route parses the
/// bytes once, straight into the column builders; a page that shows something the layout does
/// not hold yet (a new column, a wider type) takes the slow route, which learns it first.
/// `first_row` numbers rows in messages.
pub fn page_batch(
    body: &[u8],
    path: Option<&[String]>,
    take: usize,
    layout: &mut Layout,
    first_row: usize,
) -> Result<RecordBatch> {
    if !layout.columns.is_empty() {
        if let Some(trie) = Trie::of(&layout.columns) {
            match fast::page(body, path, take, layout, &trie, first_row) {
                Ok(Some(batch)) => return exact(batch, body, first_row),
                Ok(None) => {} // the layout must learn from this page first
                Err(e) => return Err(e),
            }
        }
    }
    exact(slow_page_batch(body, path, take, layout, first_row)?, body, first_row)
}

/// The batch, unless a float column took an integer literal beyond 64 bits (which JSON parsing
/// turns into the nearest float: a silent change of the value). Whole floats that large are
/// rare, so the body is looked at again only when one shows.
fn exact(batch: RecordBatch, body: &[u8], first_row: usize) -> Result<RecordBatch> {
    use arrow_array::Array as _;
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        let Some(floats) = column.as_any().downcast_ref::<arrow_array::Float64Array>() else { continue };
        let suspicious = floats.iter().flatten().any(|v| v.fract() == 0.0 && v.abs() >= 9.2e18);
        if suspicious {
            if let Some(literal) = wide_int_literal(body) {
                let shown: String = literal.chars().take(40).collect();
                return Err(Error::Transport(format!(
                    "column {:?} (float), page from row {first_row}: the integer {shown} does not fit 64 bits, \
                     and a float would change it; read these rows with to_list() (which keeps it exact), \
                     or leave the field out",
                    field.name()
                )));
            }
        }
    }
    Ok(batch)
}

/// The first integer literal of a JSON text that no 64-bit integer holds (strings skipped).
fn wide_int_literal(body: &[u8]) -> Option<String> {
    let mut i = 0;
    let mut in_string = false;
    while let Some(&b) = body.get(i) {
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'-' | b'0'..=b'9' => {
                let start = i;
                while body.get(i).is_some_and(|c| matches!(c, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'))
                {
                    i += 1;
                }
                let token = body.get(start..i).unwrap_or_default();
                let integral = !token.iter().any(|c| matches!(c, b'.' | b'e' | b'E'));
                if integral {
                    let text = String::from_utf8_lossy(token);
                    if text.parse::<i64>().is_err() && text.parse::<u64>().is_err() {
                        return Some(text.into_owned());
                    }
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Decodes one page answer through a JSON tree, learning new columns and types from it first
/// (unless the layout is frozen).
fn slow_page_batch(
    body: &[u8],
    path: Option<&[String]>,
    take: usize,
    layout: &mut Layout,
    first_row: usize,
) -> Result<RecordBatch> {
    let data: Value = serde_json::from_slice(body).map_err(|e| {
        Error::Transport(format!("the response body is not the JSON a GraphQL server sends ({e})"))
    })?;
    let nodes = page_nodes(&data, path, take)?;
    layout.learn(&nodes, first_row)?;
    let mut builders: Vec<Builder> =
        layout.columns.iter().map(|c| Builder::new(&c.kind, nodes.len())).collect();
    for (i, node) in nodes.iter().enumerate() {
        for (col, builder) in layout.columns.iter().zip(builders.iter_mut()) {
            let value = col.path.iter().try_fold(*node, |v, key| v.get(key)).unwrap_or(&Value::Null);
            builder.append(value).map_err(|what| {
                Error::Transport(format!(
                    "column {:?} ({}): row {} {what}",
                    col.name,
                    col.kind.name(),
                    first_row.saturating_add(i)
                ))
            })?;
        }
    }
    let arrays: Vec<ArrayRef> = builders.into_iter().map(Builder::finish).collect();
    RecordBatch::try_new_with_options(
        layout.schema(),
        arrays,
        &RecordBatchOptions::new().with_row_count(Some(nodes.len())),
    )
    .map_err(|e| Error::Transport(format!("cannot assemble the page's columns: {e}")))
}

/// Freezes the layout: a stream's later pages must fit the schema of its first.
pub fn freeze(layout: &mut Layout) {
    layout.frozen = true;
}

/// Brings batches made while the layout was still widening to its final schema: columns that
/// appeared later are nulls in earlier batches, and narrower types are cast up.
pub fn unify(batches: Vec<RecordBatch>, layout: &Layout) -> Result<(Vec<RecordBatch>, SchemaRef)> {
    let schema = layout.schema();
    let mut out = Vec::with_capacity(batches.len());
    for batch in batches {
        if batch.schema() == schema {
            out.push(batch);
            continue;
        }
        let rows = batch.num_rows();
        let mut arrays = Vec::with_capacity(schema.fields().len());
        for field in schema.fields() {
            let array = match batch.column_by_name(field.name()) {
                Some(a) if a.data_type() == field.data_type() => Arc::clone(a),
                Some(a) if a.data_type() == &DataType::Null => new_null_array(field.data_type(), rows),
                Some(a) if empty_lists_as_json(a, field.data_type()) => {
                    let texts: arrow_array::StringArray =
                        (0..a.len()).map(|i| (!a.is_null(i)).then_some("[]")).collect();
                    Arc::new(texts)
                }
                Some(a) => arrow_cast::cast(a, field.data_type()).map_err(|e| {
                    Error::Transport(format!("column {:?} cannot be widened: {e}", field.name()))
                })?,
                None => new_null_array(field.data_type(), rows),
            };
            arrays.push(array);
        }
        let batch = RecordBatch::try_new_with_options(
            Arc::clone(&schema),
            arrays,
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )
        .map_err(|e| Error::Transport(format!("cannot assemble the columns: {e}")))?;
        out.push(batch);
    }
    Ok((out, schema))
}

/// The columns' paths as a tree, to match a node's keys while it is parsed.
#[derive(Debug, Default)]
struct Trie {
    entries: Vec<(String, Slot)>,
}

#[derive(Debug)]
enum Slot {
    Column(usize),
    Object(Trie),
}

impl Trie {
    /// `None` when a column sits where other columns' object is (then only the slow route can
    /// tell them apart).
    fn of(columns: &[Column]) -> Option<Self> {
        let mut root = Trie::default();
        for (i, c) in columns.iter().enumerate() {
            let mut node = &mut root;
            let (last, parents) = c.path.split_last()?;
            for key in parents {
                let pos = match node.entries.iter().position(|(k, _)| k == key) {
                    Some(p) => p,
                    None => {
                        node.entries.push((key.clone(), Slot::Object(Trie::default())));
                        node.entries.len() - 1
                    }
                };
                node = match &mut node.entries[pos].1 {
                    Slot::Object(t) => t,
                    Slot::Column(_) => return None,
                };
            }
            if node.entries.iter().any(|(k, _)| k == last) {
                return None;
            }
            node.entries.push((last.clone(), Slot::Column(i)));
        }
        Some(root)
    }

    fn get(&self, key: &str, hint: &mut usize) -> Option<&Slot> {
        // Nodes of a page repeat their keys in the same order: try the one after the last first.
        if let Some((k, slot)) = self.entries.get(*hint) {
            if k == key {
                *hint += 1;
                return Some(slot);
            }
        }
        let pos = self.entries.iter().position(|(k, _)| k == key)?;
        *hint = pos + 1;
        Some(&self.entries[pos].1)
    }
}

/// The fast route: serde visitors that append each value to its column as it is parsed.
mod fast {
    use std::fmt;

    use serde::de::{
        self, Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor,
    };
    use serde_json::Value;

    use super::{append_item, datetime_str, Builder, Column, Kind, Layout, Slot, Trie};
    use crate::core::error::{Error, Result};
    use crate::core::scan::Key;

    /// The message of the error that stops the fast route so the slow one can learn.
    const RELEARN: &str = "(the layout must learn from this page)";

    /// The visits of a value that should be an object (or null) but is not: the slow route
    /// learns what it is instead (a scalar where a nested object's columns were, and the like).
    macro_rules! not_an_object {
        () => {
            fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<(), E> {
                Err(self.ctx.relearn())
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> std::result::Result<(), E> {
                Err(self.ctx.relearn())
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> std::result::Result<(), E> {
                Err(self.ctx.relearn())
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<(), E> {
                Err(self.ctx.relearn())
            }
            fn visit_str<E: de::Error>(self, _: &str) -> std::result::Result<(), E> {
                Err(self.ctx.relearn())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> std::result::Result<(), A::Error> {
                Err(self.ctx.relearn())
            }
        };
    }

    struct Ctx<'c> {
        columns: &'c [Column],
        builders: Vec<Builder>,
        /// The walk's row number of the node being read.
        row: usize,
        taken: usize,
        take: usize,
        relearn: bool,
        frozen: bool,
    }

    impl Ctx<'_> {
        fn relearn<E: de::Error>(&mut self) -> E {
            self.relearn = true;
            E::custom(RELEARN)
        }

        /// A value the column cannot hold: an error for a typed or frozen column, otherwise a
        /// reason to learn (the column may widen).
        fn misfit<E: de::Error>(&mut self, col: usize, what: String) -> E {
            let c = &self.columns[col];
            if c.typed {
                E::custom(format!("column {:?} ({}): row {} {what}", c.name, c.kind.name(), self.row))
            } else if self.frozen {
                E::custom(format!(
                    "column {:?} ({}): row {} {what}, after the stream's schema was fixed from its first \
                     page; use to_arrow() (which widens the schema over every page) or a typed method",
                    c.name,
                    c.kind.name(),
                    self.row
                ))
            } else {
                self.relearn()
            }
        }

        /// Ends a node's row: every column it did not fill is null.
        fn end_row(&mut self) {
            let filled = self.taken + 1;
            for b in &mut self.builders {
                if b.len() < filled {
                    b.append_null();
                }
            }
            self.taken = filled;
            self.row += 1;
        }
    }

    /// Decodes a page on the fast route: `Ok(None)` when the layout must learn from it first.
    pub(super) fn page(
        body: &[u8],
        path: Option<&[String]>,
        take: usize,
        layout: &Layout,
        trie: &Trie,
        first_row: usize,
    ) -> Result<Option<arrow_array::RecordBatch>> {
        let mut ctx = Ctx {
            columns: &layout.columns,
            builders: layout.columns.iter().map(|c| Builder::new(&c.kind, take.min(1024))).collect(),
            row: first_row,
            taken: 0,
            take,
            relearn: false,
            frozen: layout.frozen,
        };
        let mut de = serde_json::Deserializer::from_slice(body);
        let found =
            Envelope { ctx: &mut ctx, trie, path }.deserialize(&mut de).and_then(|f| de.end().map(|()| f));
        match found {
            Err(_) if ctx.relearn => Ok(None),
            Err(e) => Err(Error::Transport(format!("cannot read the page into columns: {e}"))),
            Ok(false) => Err(Error::pagination("the connection vanished from the page")),
            Ok(true) => {
                let rows = ctx.taken;
                let arrays = ctx.builders.into_iter().map(Builder::finish).collect();
                arrow_array::RecordBatch::try_new_with_options(
                    layout.schema(),
                    arrays,
                    &arrow_array::RecordBatchOptions::new().with_row_count(Some(rows)),
                )
                .map(Some)
                .map_err(|e| Error::Transport(format!("cannot assemble the page's columns: {e}")))
            }
        }
    }

    /// `{"data": ..., "errors": ...}`: true when the connection was found.
    struct Envelope<'a, 'c, 'p> {
        ctx: &'a mut Ctx<'c>,
        trie: &'a Trie,
        path: Option<&'p [String]>,
    }

    impl<'de> DeserializeSeed<'de> for Envelope<'_, '_, '_> {
        type Value = bool;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<bool, D::Error> {
            d.deserialize_map(self)
        }
    }

    impl<'de> Visitor<'de> for Envelope<'_, '_, '_> {
        type Value = bool;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a GraphQL response")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<bool, A::Error> {
            let mut found = false;
            while let Some(key) = map.next_key::<Key<'de>>()? {
                if key.as_str() == "data" {
                    found =
                        map.next_value_seed(Data { ctx: &mut *self.ctx, trie: self.trie, path: self.path })?;
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(found)
        }
    }

    /// `data`, then down `path` (or the only field) to the connection.
    struct Data<'a, 'c, 'p> {
        ctx: &'a mut Ctx<'c>,
        trie: &'a Trie,
        path: Option<&'p [String]>,
    }

    impl<'de> DeserializeSeed<'de> for Data<'_, '_, '_> {
        type Value = bool;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<bool, D::Error> {
            d.deserialize_map(self)
        }
    }

    impl<'de> Visitor<'de> for Data<'_, '_, '_> {
        type Value = bool;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<bool, A::Error> {
            let mut found = false;
            let mut first = true;
            while let Some(key) = map.next_key::<Key<'de>>()? {
                let (wanted, rest) = match self.path {
                    Some([head, rest @ ..]) => (key.as_str() == head, Some(rest)),
                    Some([]) => (false, None),
                    None => (first, None),
                };
                first = false;
                if !wanted || found {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
                found = match rest {
                    Some(rest) if !rest.is_empty() => {
                        map.next_value_seed(Data { ctx: &mut *self.ctx, trie: self.trie, path: Some(rest) })?
                    }
                    _ => map.next_value_seed(Connection { ctx: &mut *self.ctx, trie: self.trie })?,
                };
            }
            Ok(found)
        }
    }

    /// The connection: its `edges` (or `nodes`) list, the rest skipped.
    struct Connection<'a, 'c> {
        ctx: &'a mut Ctx<'c>,
        trie: &'a Trie,
    }

    impl<'de> DeserializeSeed<'de> for Connection<'_, '_> {
        type Value = bool;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<bool, D::Error> {
            d.deserialize_map(self)
        }
    }

    impl<'de> Visitor<'de> for Connection<'_, '_> {
        type Value = bool;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a connection")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<bool, A::Error> {
            let (mut edges, mut nodes) = (false, false);
            while let Some(key) = map.next_key::<Key<'de>>()? {
                match key.as_str() {
                    "edges" if !nodes => {
                        edges = true;
                        map.next_value_seed(List { ctx: &mut *self.ctx, trie: self.trie, edges: true })?;
                    }
                    // Edges are what the walker hands out when both are selected.
                    "nodes" if !edges => {
                        nodes = true;
                        map.next_value_seed(List { ctx: &mut *self.ctx, trie: self.trie, edges: false })?;
                    }
                    _ => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Ok(true)
        }
    }

    /// The edges or nodes: each is a row, up to `take`.
    struct List<'a, 'c> {
        ctx: &'a mut Ctx<'c>,
        trie: &'a Trie,
        edges: bool,
    }

    impl<'de> DeserializeSeed<'de> for List<'_, '_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for List<'_, '_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list")
        }
        fn visit_unit<E: de::Error>(self) -> std::result::Result<(), E> {
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
            loop {
                if self.ctx.taken >= self.ctx.take {
                    while seq.next_element::<IgnoredAny>()?.is_some() {}
                    return Ok(());
                }
                let seed = Row { ctx: &mut *self.ctx, trie: self.trie, edge: self.edges };
                if seq.next_element_seed(seed)?.is_none() {
                    return Ok(());
                }
                self.ctx.end_row();
            }
        }
    }

    /// One edge (its `node` is the row) or one node.
    struct Row<'a, 'c> {
        ctx: &'a mut Ctx<'c>,
        trie: &'a Trie,
        edge: bool,
    }

    impl<'de> DeserializeSeed<'de> for Row<'_, '_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Row<'_, '_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an edge or a node")
        }
        // A null node (or edge) is a row of nulls.
        fn visit_unit<E: de::Error>(self) -> std::result::Result<(), E> {
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<(), A::Error> {
            if !self.edge {
                return Object { ctx: self.ctx, trie: self.trie }.visit_map(map);
            }
            while let Some(key) = map.next_key::<Key<'de>>()? {
                if key.as_str() == "node" {
                    map.next_value_seed(Row { ctx: &mut *self.ctx, trie: self.trie, edge: false })?;
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(())
        }
        not_an_object!();
    }

    /// An object of the node (the node itself, or a nested one whose fields are columns).
    struct Object<'a, 'c> {
        ctx: &'a mut Ctx<'c>,
        trie: &'a Trie,
    }

    impl<'de> DeserializeSeed<'de> for Object<'_, '_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Object<'_, '_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object")
        }
        // A null object: its columns are null in this row.
        fn visit_unit<E: de::Error>(self) -> std::result::Result<(), E> {
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<(), A::Error> {
            let mut hint = 0;
            while let Some(key) = map.next_key::<Key<'de>>()? {
                match self.trie.get(key.as_str(), &mut hint) {
                    Some(Slot::Column(i)) => map.next_value_seed(Cell { ctx: &mut *self.ctx, col: *i })?,
                    Some(Slot::Object(sub)) => {
                        map.next_value_seed(Object { ctx: &mut *self.ctx, trie: sub })?
                    }
                    None if self.ctx.frozen => {
                        return Err(de::Error::custom(format!(
                            "a field {:?} at row {} that the stream's schema (fixed by its first page) does \
                             not have; use to_arrow() or a typed method",
                            key.as_str(),
                            self.ctx.row
                        )))
                    }
                    None => return Err(self.ctx.relearn()),
                }
            }
            Ok(())
        }
        not_an_object!();
    }

    /// One value into its column.
    struct Cell<'a, 'c> {
        ctx: &'a mut Ctx<'c>,
        col: usize,
    }

    impl<'de> DeserializeSeed<'de> for Cell<'_, '_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
            if matches!(self.ctx.builders[self.col], Builder::Json(_)) {
                // JSON text is kept as sent: the raw value (a JSON string's content, as a
                // JSONString scalar carries JSON text in a string).
                // The same text the slow route makes (compact, serde_json's escaping), whatever
                // the server's spacing and escapes: equal values give equal cells.
                let value = Value::deserialize(d)?;
                let ctx = self.ctx;
                if ctx.builders[self.col].len() > ctx.taken {
                    return Err(ctx.relearn());
                }
                if let Builder::Json(b) = &mut ctx.builders[self.col] {
                    match value {
                        Value::Null => b.append_null(),
                        other => b.append_value(super::json_text(&other)),
                    }
                }
                return Ok(());
            }
            // A key twice in one object: the slow route reads it, the last one wins as in a dict.
            if self.ctx.builders[self.col].len() > self.ctx.taken {
                return Err(self.ctx.relearn());
            }
            d.deserialize_any(self)
        }
    }

    impl Cell<'_, '_> {
        fn builder(&mut self) -> &mut Builder {
            &mut self.ctx.builders[self.col]
        }

        fn misfit<E: de::Error>(self, what: &str) -> E {
            let col = self.col;
            self.ctx.misfit(col, format!("is {what}, not a {}", self.ctx.columns[col].kind.name()))
        }
    }

    impl<'de> Visitor<'de> for Cell<'_, '_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a value")
        }
        fn visit_unit<E: de::Error>(mut self) -> std::result::Result<(), E> {
            self.builder().append_null();
            Ok(())
        }
        fn visit_none<E: de::Error>(self) -> std::result::Result<(), E> {
            self.visit_unit()
        }
        fn visit_bool<E: de::Error>(mut self, v: bool) -> std::result::Result<(), E> {
            match self.builder() {
                Builder::Bool(b) => b.append_value(v),
                _ => return Err(self.misfit("a bool")),
            }
            Ok(())
        }
        fn visit_i64<E: de::Error>(mut self, v: i64) -> std::result::Result<(), E> {
            let typed = self.ctx.columns[self.col].typed;
            match self.builder() {
                Builder::Int(b) => b.append_value(v),
                #[allow(clippy::cast_precision_loss)]
                Builder::Float(b) => b.append_value(v as f64),
                Builder::Str(b) if typed => b.append_value(v.to_string()),
                _ => return Err(self.misfit("a number")),
            }
            Ok(())
        }
        fn visit_u64<E: de::Error>(mut self, v: u64) -> std::result::Result<(), E> {
            let typed = self.ctx.columns[self.col].typed;
            match self.builder() {
                Builder::Int(b) => match i64::try_from(v) {
                    Ok(i) => b.append_value(i),
                    Err(_) => {
                        return Err(self.misfit(&format!("{v}, which does not fit a 64-bit int column")))
                    }
                },
                #[allow(clippy::cast_precision_loss)]
                Builder::Float(b) => b.append_value(v as f64),
                Builder::Str(b) if typed => b.append_value(v.to_string()),
                _ => return Err(self.misfit("a number")),
            }
            Ok(())
        }
        fn visit_f64<E: de::Error>(mut self, v: f64) -> std::result::Result<(), E> {
            let typed = self.ctx.columns[self.col].typed;
            match self.builder() {
                Builder::Float(b) => b.append_value(v),
                Builder::Str(b) if typed => b.append_value(v.to_string()),
                _ => return Err(self.misfit(&format!("{v}"))),
            }
            Ok(())
        }
        fn visit_str<E: de::Error>(mut self, v: &str) -> std::result::Result<(), E> {
            match self.builder() {
                Builder::Str(b) => b.append_value(v),
                Builder::DateTime(b) => match datetime_str(v) {
                    Some(t) => b.append_value(t),
                    None => return Err(self.misfit(&format!("{v:?}, not an ISO 8601 datetime,"))),
                },
                Builder::Date(_) => {
                    let d = super::date(&Value::String(v.to_string()));
                    match (d, self.builder()) {
                        (Ok(d), Builder::Date(b)) => b.append_value(d),
                        _ => return Err(self.misfit(&format!("{v:?}, not an ISO 8601 date,"))),
                    }
                }
                _ => return Err(self.misfit("a string")),
            }
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> std::result::Result<(), A::Error> {
            let col = self.col;
            let kind = match &self.ctx.columns[col].kind {
                Kind::List(inner) => (**inner).clone(),
                _ => return Err(self.misfit("a list")),
            };
            while let Some(item) = seq.next_element::<Value>()? {
                let fits = match self.builder() {
                    Builder::List(b, _) => append_item(b.values().as_mut(), &kind, &item),
                    _ => Err("has a list the client cannot build".into()),
                };
                if let Err(what) = fits {
                    return Err(self.ctx.misfit(col, what));
                }
            }
            if let Builder::List(b, _) = self.builder() {
                b.append(true);
            }
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, _: A) -> std::result::Result<(), A::Error> {
            Err(self.misfit("an object"))
        }
    }
}

/// A column of lists of nothing (only empty lists or nulls so far) that is now JSON text.
fn empty_lists_as_json(a: &ArrayRef, target: &DataType) -> bool {
    matches!(a.data_type(), DataType::List(f) if f.data_type() == &DataType::Null)
        && target == &DataType::Utf8
}

/// One column being built.
enum Builder {
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

fn scalar_builder(kind: &Kind, rows: usize) -> Box<dyn ArrayBuilder> {
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
fn append_item(builder: &mut dyn ArrayBuilder, kind: &Kind, v: &Value) -> std::result::Result<(), String> {
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

fn mismatch(kind: &Kind, v: &Value) -> String {
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

fn int(v: &Value) -> std::result::Result<i64, String> {
    v.as_i64().ok_or_else(|| match v {
        Value::Number(n) => format!("is {n}, which does not fit a 64-bit int column"),
        other => mismatch(&Kind::Int, other),
    })
}

fn float(v: &Value) -> std::result::Result<f64, String> {
    v.as_f64().ok_or_else(|| mismatch(&Kind::Float, v))
}

fn json_text(v: &Value) -> String {
    match v {
        // A JSONString scalar is already JSON text.
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn datetime(v: &Value) -> std::result::Result<i64, String> {
    let s = v.as_str().ok_or_else(|| mismatch(&Kind::DateTime, v))?;
    datetime_str(s).ok_or_else(|| format!("is {s:?}, not an ISO 8601 datetime"))
}

fn datetime_str(s: &str) -> Option<i64> {
    parse_datetime_us(s)
}

fn date(v: &Value) -> std::result::Result<i32, String> {
    let s = v.as_str().ok_or_else(|| mismatch(&Kind::Date, v))?;
    let d = s.get(..10).and_then(parse_date).ok_or_else(|| format!("is {s:?}, not an ISO 8601 date"))?;
    i32::try_from(d).map_err(|_| format!("is {s:?}, out of range"))
}

impl Builder {
    fn new(kind: &Kind, rows: usize) -> Self {
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

    fn append(&mut self, v: &Value) -> std::result::Result<(), String> {
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

    fn len(&self) -> usize {
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

    fn append_null(&mut self) {
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

    fn finish(self) -> ArrayRef {
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

/// Where a scalar type's values go.
fn scalar_kind(type_name: &str) -> Kind {
    match type_name {
        "Int" => Kind::Int,
        "Float" => Kind::Float,
        "Boolean" => Kind::Bool,
        "DateTime" => Kind::DateTime,
        "Date" => Kind::Date,
        "JSONString" | "GenericScalar" | "JSON" => Kind::Json,
        // String, ID, enums, and object types selected without fields (not valid GraphQL).
        _ => Kind::Str,
    }
}

/// One field of an object type in the schema.
#[derive(Clone, Debug)]
struct FieldType {
    type_name: String,
    list: bool,
}

/// The output types of the schema: `Type` -> `field` -> its type.
#[derive(Debug, Default)]
struct SchemaTypes {
    types: HashMap<String, HashMap<String, FieldType>>,
}

impl SchemaTypes {
    fn field(&self, type_name: &str, field: &str) -> Option<&FieldType> {
        self.types.get(type_name)?.get(field)
    }

    fn is_connection(&self, type_name: &str) -> bool {
        self.types.get(type_name).is_some_and(|t| t.contains_key("edges") && t.contains_key("pageInfo"))
    }
}

fn schema() -> &'static SchemaTypes {
    static TYPES: OnceLock<SchemaTypes> = OnceLock::new();
    TYPES.get_or_init(|| parse_sdl(SDL))
}

/// The index after the block that opens at `open` (a `{` or `(`), nested ones included.
fn skip_block(toks: &[&str], open: usize) -> usize {
    let (o, c) = if toks.get(open) == Some(&"(") { ("(", ")") } else { ("{", "}") };
    let mut depth = 0usize;
    let mut j = open;
    while j < toks.len() {
        if toks[j] == o {
            depth += 1;
        } else if toks[j] == c {
            depth = depth.saturating_sub(1);
            if depth == 0 {
                return j + 1;
            }
        }
        j += 1;
    }
    toks.len()
}

/// Reads the object and interface types of an SDL document: enough for column types (names,
/// list-ness, the named type), not a validator. Other definitions are skipped whole.
fn parse_sdl(sdl: &str) -> SchemaTypes {
    let toks = sdl_tokens(sdl);
    let mut out = SchemaTypes::default();
    let mut i = 0;
    while i < toks.len() {
        match toks[i] {
            "{" => i = skip_block(&toks, i),
            "type" | "interface" if i + 1 < toks.len() => {
                let name = toks[i + 1].to_string();
                let mut open = i + 2;
                while open < toks.len() && toks[open] != "{" {
                    open += 1;
                }
                let end = skip_block(&toks, open);
                out.types
                    .insert(name, parse_fields(toks.get(open + 1..end.saturating_sub(1)).unwrap_or(&[])));
                i = end;
            }
            _ => i += 1,
        }
    }
    out
}

/// The fields of one type's body: `name(args): [Type!]! @directive(...)`.
fn parse_fields(body: &[&str]) -> HashMap<String, FieldType> {
    let mut fields = HashMap::new();
    let mut j = 0;
    while j < body.len() {
        let field = body[j];
        j += 1;
        if body.get(j) == Some(&"(") {
            j = skip_block(body, j);
        }
        if body.get(j) != Some(&":") {
            continue;
        }
        j += 1;
        let (mut list, mut type_name) = (false, String::new());
        while j < body.len() {
            match body[j] {
                "[" => list = true,
                "]" | "!" => {}
                t if type_name.is_empty() => type_name = t.to_string(),
                _ => break,
            }
            j += 1;
        }
        while body.get(j) == Some(&"@") {
            j += 2;
            if body.get(j) == Some(&"(") {
                j = skip_block(body, j);
            }
        }
        fields.insert(field.to_string(), FieldType { type_name, list });
    }
    fields
}

/// SDL tokens: names and punctuation; descriptions, strings and comments dropped.
fn sdl_tokens(sdl: &str) -> Vec<&str> {
    let b = sdl.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'"' if b[i..].starts_with(b"\"\"\"") => {
                i += 3;
                while i < b.len() && !b[i..].starts_with(b"\"\"\"") {
                    i += 1;
                }
                i += 3;
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            c if c.is_ascii_alphanumeric() || c == b'_' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                out.push(sdl.get(start..i).unwrap_or(""));
            }
            b'{' | b'}' | b'(' | b')' | b'[' | b']' | b'!' | b':' | b'@' | b'=' | b'&' | b'|' => {
                out.push(sdl.get(i..=i).unwrap_or(""));
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}

/// One field of a selection set.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Selected {
    name: String,
    alias: Option<String>,
    children: Vec<Selected>,
}

impl Selected {
    /// The key the field has in the answer.
    fn key(&self) -> &str {
        self.alias.as_deref().unwrap_or(&self.name)
    }
}

/// The deepest selection read (GraphQL documents a client sends are far shallower).
const MAX_SELECTION_DEPTH: usize = 32;

/// Parses a selection set's text (`id title actual_status { category } alias: name`);
/// arguments and directives are skipped, fragments are not supported for columns.
fn parse_selection(text: &str) -> Result<Vec<Selected>> {
    let toks = sdl_tokens(text);
    let mut pos = 0;
    let sel = selection_at(&toks, &mut pos, 0)?;
    Ok(sel)
}

fn selection_at(toks: &[&str], pos: &mut usize, depth: usize) -> Result<Vec<Selected>> {
    if depth > MAX_SELECTION_DEPTH {
        return Err(Error::validation("the selection nests too deeply for columns"));
    }
    let mut out = Vec::new();
    while let Some(&t) = toks.get(*pos) {
        match t {
            "}" => {
                *pos += 1;
                return Ok(out);
            }
            "(" => {
                let mut d = 0usize;
                while let Some(&t) = toks.get(*pos) {
                    *pos += 1;
                    match t {
                        "(" => d += 1,
                        ")" => {
                            d = d.saturating_sub(1);
                            if d == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                }
            }
            "{" => {
                *pos += 1;
                let children = selection_at(toks, pos, depth + 1)?;
                if let Some(last) = out.last_mut() {
                    last.children = children;
                }
            }
            "@" => *pos += 2,
            ":" => {
                // `alias: name`: the previous token was the alias.
                *pos += 1;
                if let (Some(last), Some(&name)) = (out.last_mut(), toks.get(*pos)) {
                    let alias = std::mem::replace(&mut last.name, name.to_string());
                    last.alias = Some(alias);
                }
                *pos += 1;
            }
            name => {
                out.push(Selected { name: name.to_string(), alias: None, children: Vec::new() });
                *pos += 1;
            }
        }
    }
    Ok(out)
}

/// A walk's pages as record batches: the layout (typed for a catalog operation, inferred for
/// any other document) and the rows decoded so far.
#[derive(Debug)]
pub struct Columnar {
    layout: Layout,
    rows: usize,
}

impl Columnar {
    /// `node`: the node's type and selection of a catalog operation; `None` infers the columns.
    pub fn new(node: Option<(&str, &str)>) -> Result<Self> {
        let layout = match node {
            Some((type_name, selection)) => Layout::typed(type_name, selection)?,
            None => Layout::inferred(),
        };
        Ok(Self { layout, rows: 0 })
    }

    /// One page's rows as a record batch (of the layout as it stands after this page).
    pub fn batch(&mut self, page: &RawPage) -> Result<RecordBatch> {
        let batch = page_batch(&page.body, page.path.as_deref(), page.take, &mut self.layout, self.rows)?;
        self.rows = self.rows.saturating_add(batch.num_rows());
        Ok(batch)
    }

    /// Fixes the schema (a stream has one): later pages must fit it.
    pub fn freeze(&mut self) {
        freeze(&mut self.layout);
    }

    pub fn schema(&self) -> SchemaRef {
        self.layout.schema()
    }

    /// Every batch brought to the final, widest schema.
    pub fn finish(&self, batches: Vec<RecordBatch>) -> Result<(Vec<RecordBatch>, SchemaRef)> {
        unify(batches, &self.layout)
    }
}

/// One page's nodes as JSON lines, as the server sent them: the raw text of each node with the
/// spacing between tokens taken out, so numbers (an integer beyond 64 bits too) and strings are
/// kept exactly. A null node is `null`.
pub fn page_jsonl(page: &RawPage) -> Result<Vec<u8>> {
    use std::borrow::Cow;
    use std::collections::HashMap;

    use serde_json::value::RawValue;

    type Object<'a> = HashMap<Cow<'a, str>, &'a RawValue>;
    let bad = |e: serde_json::Error| {
        Error::Transport(format!("the response body is not the JSON a GraphQL server sends ({e})"))
    };
    let vanished = || Error::pagination("the connection vanished from the page");
    let text = std::str::from_utf8(&page.body)
        .map_err(|_| Error::Transport("the response body is not UTF-8 text".into()))?;
    let envelope: Object<'_> = serde_json::from_str(text).map_err(bad)?;
    let mut conn: &RawValue = envelope.get("data").copied().ok_or_else(vanished)?;
    match page.path.as_deref() {
        Some(path) => {
            for key in path {
                let obj: Object<'_> = serde_json::from_str(conn.get()).map_err(bad)?;
                conn = obj.get(key.as_str()).copied().ok_or_else(vanished)?;
            }
        }
        None => {
            let obj: Object<'_> = serde_json::from_str(conn.get()).map_err(bad)?;
            conn = obj.values().next().copied().ok_or_else(vanished)?;
        }
    }
    let conn: Object<'_> = serde_json::from_str(conn.get()).map_err(bad)?;
    let nodes: Vec<&RawValue> = match (conn.get("edges"), conn.get("nodes")) {
        (Some(edges), _) => {
            let edges: Option<Vec<Option<Object<'_>>>> = serde_json::from_str(edges.get()).map_err(bad)?;
            let none: &RawValue = null();
            edges
                .unwrap_or_default()
                .into_iter()
                .map(|e| e.and_then(|e| e.get("node").copied()).unwrap_or(none))
                .collect()
        }
        (None, Some(nodes)) => {
            let nodes: Option<Vec<&RawValue>> = serde_json::from_str(nodes.get()).map_err(bad)?;
            nodes.unwrap_or_default()
        }
        (None, None) => Vec::new(),
    };
    let mut out = Vec::with_capacity(page.body.len());
    for node in nodes.into_iter().take(page.take) {
        minify_into(node.get(), &mut out);
        out.push(b'\n');
    }
    Ok(out)
}

/// The JSON `null`, as a raw value.
fn null() -> &'static serde_json::value::RawValue {
    static NULL: OnceLock<Box<serde_json::value::RawValue>> = OnceLock::new();
    NULL.get_or_init(|| serde_json::value::RawValue::from_string("null".into()).unwrap_or_default())
}

/// JSON text without the whitespace between its tokens (strings untouched).
fn minify_into(json: &str, out: &mut Vec<u8>) {
    let (mut in_string, mut escaped) = (false, false);
    for &b in json.as_bytes() {
        if in_string {
            out.push(b);
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if !b.is_ascii_whitespace() {
            out.push(b);
            in_string = b == b'"';
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int64Type, TimestampMicrosecondType};
    use arrow_array::Array;
    use serde_json::json;

    fn page(nodes: Value) -> Vec<u8> {
        let edges: Vec<Value> =
            nodes.as_array().unwrap().iter().map(|n| json!({"cursor": "c", "node": n})).collect();
        serde_json::to_vec(&json!({"data": {"items": {"edges": edges, "pageInfo": {"hasNextPage": false}}}}))
            .unwrap()
    }

    fn raw_page(body: Vec<u8>) -> RawPage {
        RawPage { body: body.into(), take: usize::MAX, info: Default::default(), path: None }
    }

    #[test]
    fn integers_beyond_64_bits_are_refused_not_rounded() {
        let body = br#"{"data": {"items": {"edges": [{"node": {"s": "99999999999999999999999", "n": 1180591620717411303424}}],
            "pageInfo": {"hasNextPage": false}}}}"#;
        let err = Columnar::new(None).unwrap().batch(&raw_page(body.to_vec())).unwrap_err().to_string();
        assert!(err.contains("1180591620717411303424") && err.contains("\"n\""), "{err}");
        // A float that large, written as a float, is a float.
        let body = br#"{"data": {"items": {"edges": [{"node": {"s": "123456789012345678901", "n": 1.5e21}}],
            "pageInfo": {"hasNextPage": false}}}}"#;
        assert!(Columnar::new(None).unwrap().batch(&raw_page(body.to_vec())).is_ok());
        assert_eq!(wide_int_literal(br#"{"a": "1234567890123456789012", "b": -9223372036854775808}"#), None);
        assert_eq!(
            wide_int_literal(br#"{"a": "x\"1", "b": -9223372036854775809}"#).as_deref(),
            Some("-9223372036854775809")
        );
        assert_eq!(
            wide_int_literal(br#"[18446744073709551615, 18446744073709551616]"#).as_deref(),
            Some("18446744073709551616")
        );
    }

    #[test]
    fn a_key_with_a_nul_is_an_error_naming_it() {
        let err = Columnar::new(None).unwrap().batch(&raw_page(page(json!([{"a\u{0}b": 1}])))).unwrap_err();
        assert!(err.to_string().contains("NUL"), "{err}");
    }

    #[test]
    fn a_key_with_a_dot_beside_a_nested_field_is_an_error_naming_both() {
        for nodes in [json!([{"x.y": 1, "x": {"y": 2}}]), json!([{"x": {"y": 2}, "x.y": 1}])] {
            let body = page(nodes);
            let raw = raw_page(body);
            let mut c = Columnar::new(None).unwrap();
            let err = c.batch(&raw).unwrap_err().to_string();
            assert!(err.contains("the key \"x.y\""), "{err}");
            assert!(err.contains("the field \"x\" { \"y\" }"), "{err}");
        }
        // Across pages, on the fast route: the second page brings the literal key.
        let mut c = Columnar::new(None).unwrap();
        c.batch(&raw_page(page(json!([{"x": {"y": 2}}])))).unwrap();
        let err = c.batch(&raw_page(page(json!([{"x": {"y": 3}, "x.y": 4}]))));
        assert!(err.unwrap_err().to_string().contains("collide"));
    }

    #[test]
    fn the_schema_types_the_findings_view() {
        let f = schema().field("FindingsView", "due_date").unwrap();
        assert_eq!((f.type_name.as_str(), f.list), ("DateTime", false));
        let f = schema().field("FindingsView", "datasource_tags_values").unwrap();
        assert_eq!((f.type_name.as_str(), f.list), ("String", true));
        assert!(schema().field("FindingsView", "tickets").is_some());
        assert!(schema().is_connection("TicketConnection"));
        assert!(!schema().is_connection("FindingsView"));
    }

    #[test]
    fn typed_layouts_flatten_and_type_columns() {
        let l = Layout::typed(
            "FindingsView",
            "id id_int score due_date actual_status { category } datasource_tags_values \
             tickets(first: 5) { edges { node { id } } } renamed: title mystery __typename",
        )
        .unwrap();
        let cols: Vec<(&str, Kind)> = l.columns().iter().map(|c| (c.name.as_str(), c.kind.clone())).collect();
        assert_eq!(
            cols,
            vec![
                ("id", Kind::Str),
                ("id_int", Kind::Int),
                ("score", Kind::Float),
                ("due_date", Kind::DateTime),
                ("actual_status.category", Kind::Str),
                ("datasource_tags_values", Kind::List(Box::new(Kind::Str))),
                ("tickets", Kind::Json),
                ("renamed", Kind::Str),
                ("mystery", Kind::Null),
                ("__typename", Kind::Str),
            ]
        );
    }

    #[test]
    fn pages_become_typed_batches() {
        let mut l = Layout::typed(
            "FindingsView",
            "id_int due_date actual_status { category } datasource_tags_values",
        )
        .unwrap();
        let body = page(json!([
            {"id_int": 1, "due_date": "2024-01-01T00:00:00+00:00", "actual_status": {"category": "OPEN"}, "datasource_tags_values": ["a", "b"]},
            {"id_int": null, "due_date": null, "actual_status": null, "datasource_tags_values": null},
            null
        ]));
        let b = page_batch(&body, None, 10, &mut l, 0).unwrap();
        assert_eq!(b.num_rows(), 3);
        let ids = b.column(0).as_primitive::<Int64Type>();
        assert_eq!((ids.value(0), ids.is_null(1), ids.is_null(2)), (1, true, true));
        let due = b.column(1).as_primitive::<TimestampMicrosecondType>();
        assert_eq!(due.value(0), 1_704_067_200_000_000);
        assert_eq!(
            b.schema().field(1).data_type(),
            &DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        );
        assert_eq!(b.column(2).as_string::<i32>().value(0), "OPEN");
        assert_eq!(b.column(3).as_list::<i32>().value(0).as_string::<i32>().value(1), "b");
        // take cuts the page short
        assert_eq!(page_batch(&body, None, 1, &mut l, 0).unwrap().num_rows(), 1);
    }

    #[test]
    fn a_value_that_does_not_fit_is_an_error_naming_the_column() {
        let mut l = Layout::typed("FindingsView", "id_int due_date").unwrap();
        let e = page_batch(&page(json!([{"id_int": "seven", "due_date": null}])), None, 10, &mut l, 5)
            .unwrap_err();
        assert!(e.to_string().contains("\"id_int\"") && e.to_string().contains("row 5"), "{e}");
        let e = page_batch(&page(json!([{"id_int": 1, "due_date": "yesterday"}])), None, 10, &mut l, 0)
            .unwrap_err();
        assert!(e.to_string().contains("due_date"), "{e}");
        let e =
            page_batch(&page(json!([{"id_int": 1.5, "due_date": null}])), None, 10, &mut l, 0).unwrap_err();
        assert!(e.to_string().contains("id_int"), "{e}");
    }

    #[test]
    fn inferred_layouts_widen_over_pages_and_unify() {
        let mut l = Layout::inferred();
        let b1 =
            page_batch(&page(json!([{"a": 1, "n": null, "o": {"x": true}}])), None, 10, &mut l, 0).unwrap();
        let b2 = page_batch(
            &page(json!([{"a": 2.5, "n": "late", "o": {"x": false}, "new": []}])),
            None,
            10,
            &mut l,
            1,
        )
        .unwrap();
        let b3 = page_batch(&page(json!([{"a": 3, "new": [1, 2]}])), None, 10, &mut l, 2).unwrap();
        let names: Vec<&str> = l.columns().iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, vec!["a", "n", "o.x", "new"]);
        let (batches, schema) = unify(vec![b1, b2, b3], &l).unwrap();
        assert_eq!(schema.field(0).data_type(), &DataType::Float64);
        assert_eq!(schema.field(1).data_type(), &DataType::Utf8);
        assert_eq!(l.columns()[3].kind, Kind::List(Box::new(Kind::Int)));
        assert!(batches.iter().all(|b| b.schema() == schema));
        assert_eq!(batches[0].column(3).null_count(), 1);
        // A string where ints were: an error, not a null.
        let e = page_batch(&page(json!([{"a": "x"}])), None, 10, &mut l, 2).unwrap_err();
        assert!(e.to_string().contains("\"a\"") && e.to_string().contains("row 2"), "{e}");
    }

    /// The fast route (straight into builders) and the slow one (through a JSON tree) give the
    /// same batch, for typed and learnt layouts.
    #[test]
    fn fast_and_slow_routes_agree() {
        let pages = [
            json!([
                {"id_int": 1, "score": 2.5, "due_date": "2024-01-01T00:00:00Z", "actual_status": {"category": "OPEN"},
                 "datasource_tags_values": ["a"], "tickets": {"edges": [{"node": {"id": "t"}}]}, "title": "x\u{e9}"},
                {"id_int": 2, "score": 3, "due_date": null, "actual_status": null, "datasource_tags_values": [],
                 "tickets": null, "title": null},
                null,
                {"id_int": null}
            ]),
            json!([]),
        ];
        let sel = "id_int score due_date actual_status { category } datasource_tags_values tickets { edges { node { id } } } title";
        for nodes in &pages {
            let body = page(nodes.clone());
            let mut a = Layout::typed("FindingsView", sel).unwrap();
            let mut b = a.clone();
            let fast = page_batch(&body, None, 3, &mut a, 0).unwrap();
            let slow = slow_page_batch(&body, None, 3, &mut b, 0).unwrap();
            assert_eq!(fast, slow);
            let trie = Trie::of(&a.columns).unwrap();
            assert!(fast::page(&body, None, 3, &a, &trie, 0).unwrap().is_some(), "the fast route took it");
        }
        // Learnt layout: after the first page, same-shaped pages take the fast route.
        let mut l = Layout::inferred();
        page_batch(&page(json!([{"a": 1, "o": {"x": "s"}}])), None, 10, &mut l, 0).unwrap();
        let body = page(json!([{"a": 2, "o": {"x": "t"}}, {"a": null, "o": null}]));
        let trie = Trie::of(&l.columns).unwrap();
        let fast = fast::page(&body, None, 10, &l, &trie, 1).unwrap().unwrap();
        let slow = slow_page_batch(&body, None, 10, &mut l.clone(), 1).unwrap();
        assert_eq!(fast, slow);
        // A float where ints were: the fast route defers to learning.
        let body = page(json!([{"a": 2.5, "o": {"x": "t"}}]));
        assert!(fast::page(&body, None, 10, &l, &trie, 1).unwrap().is_none());
    }

    #[test]
    fn json_lines_keep_numbers_and_strings_exactly() {
        let body = br#"{"data": {"items": {"edges": [
            {"cursor": "a", "node": {"n": 12345678901234567890123, "f": 1.10, "s": "a  b\"c", "x": [1, 2]}},
            {"cursor": "b", "node": null}, null
        ], "pageInfo": {"hasNextPage": false}}}}"#;
        let page = RawPage { body: body.to_vec().into(), take: 10, info: Default::default(), path: None };
        let text = String::from_utf8(page_jsonl(&page).unwrap()).unwrap();
        assert_eq!(
            text,
            "{\"n\":12345678901234567890123,\"f\":1.10,\"s\":\"a  b\\\"c\",\"x\":[1,2]}\nnull\nnull\n"
        );
        let cut = RawPage { take: 1, ..page };
        assert_eq!(String::from_utf8(page_jsonl(&cut).unwrap()).unwrap().lines().count(), 1);
    }

    #[test]
    fn impossible_dates_and_duplicate_keys() {
        let mut l = Layout::typed("FindingsView", "id_int due_date title").unwrap();
        let e = page_batch(
            &page(json!([{"id_int": 1, "due_date": "2024-02-30T00:00:00Z"}])),
            None,
            10,
            &mut l,
            0,
        );
        assert!(e.unwrap_err().to_string().contains("due_date"));
        // A key twice: the last one wins, as in a dict, and the next row keeps its own values.
        let body = br#"{"data":{"v":{"edges":[{"node":{"title":"first","title":"second"}},{"node":{"id_int":2}}],"pageInfo":{"hasNextPage":false}}}}"#;
        let b = page_batch(body, None, 10, &mut l, 0).unwrap();
        let titles = b.column(2).as_string::<i32>();
        assert_eq!((titles.value(0), titles.is_null(1)), ("second", true));
    }

    #[test]
    fn empty_lists_then_objects_become_json_text() {
        let mut l = Layout::inferred();
        let b1 = page_batch(&page(json!([{"t": {"edges": []}}])), None, 10, &mut l, 0).unwrap();
        let b2 = page_batch(&page(json!([{"t": {"edges": [{"node": {"id": "x"}}]}}])), None, 10, &mut l, 1)
            .unwrap();
        let (batches, schema) = unify(vec![b1, b2], &l).unwrap();
        assert_eq!(schema.field(0).data_type(), &DataType::Utf8);
        assert_eq!(batches[0].column(0).as_string::<i32>().value(0), "[]");
        assert_eq!(batches[1].column(0).as_string::<i32>().value(0), r#"[{"node":{"id":"x"}}]"#);
    }

    #[test]
    fn json_text_is_the_same_on_both_routes() {
        let sel = "tickets { edges { node { id } } }";
        let body = br#"{"data":{"v":{"edges":[{"node":{"tickets": {"edges": [ {"node": {"id": "T\u00e9"}} ]}}}],"pageInfo":{"hasNextPage":false}}}}"#;
        let mut a = Layout::typed("FindingsView", sel).unwrap();
        let fast = page_batch(body, None, 10, &mut a, 0).unwrap();
        let slow = slow_page_batch(body, None, 10, &mut a.clone(), 0).unwrap();
        assert_eq!(fast, slow);
        assert_eq!(fast.column(0).as_string::<i32>().value(0), r#"{"edges":[{"node":{"id":"Té"}}]}"#);
    }

    #[test]
    fn a_frozen_layout_refuses_to_change() {
        let mut l = Layout::inferred();
        page_batch(&page(json!([{"a": 1, "n": null}])), None, 10, &mut l, 0).unwrap();
        freeze(&mut l);
        assert!(page_batch(&page(json!([{"a": 2, "n": null}])), None, 10, &mut l, 1).is_ok());
        assert!(page_batch(&page(json!([{"a": 2, "n": "x"}])), None, 10, &mut l, 1).is_err());
        assert!(page_batch(&page(json!([{"a": 2, "z": 1}])), None, 10, &mut l, 1).is_err());
    }

    #[test]
    fn selection_text_with_aliases_args_and_directives() {
        let s = parse_selection("a b: c(x: 1) { d @include(if: true) e } f").unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!((s[1].name.as_str(), s[1].alias.as_deref()), ("c", Some("b")));
        assert_eq!(s[1].children.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), vec!["d", "e"]);
        let deep = format!("{}x{}", "a { ".repeat(100), " }".repeat(100));
        assert!(parse_selection(&deep).is_err());
    }
}
