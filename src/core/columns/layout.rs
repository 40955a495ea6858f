//! Which columns a walk has and of what type: typed from the selection and the schema for a
//! catalog operation, inferred from the data (and widened page by page) for any other document.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use arrow_schema::{Field, Schema, SchemaRef};
use serde_json::Value;

use super::kind::Kind;
use crate::core::error::{Error, Result};
use crate::core::gql::{object_types, selection as parse_selection, FieldType, Selected};

/// The schema the typed operations are checked against (the emulator's SDL, which models the
/// specification): output fields' types by `Type.field`.
pub(super) const SDL: &str = secfindings_schema::SDL;

/// One column: its name (dotted for nested fields), where it is in a node, and its type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Column {
    pub name: String,
    pub path: Vec<String>,
    pub kind: Kind,
    /// From the schema: a value of another type is an error, the type never widens.
    pub typed: bool,
}

/// The columns of a walk.
#[derive(Clone, Debug, Default)]
pub(crate) struct Layout {
    pub(super) columns: Vec<Column>,
    by_name: HashMap<String, usize>,
    /// The dotted names of the objects that columns sit in (`actual_status` of
    /// `actual_status.category`): a null there is a null object, not a new column.
    parents: std::collections::HashSet<String>,
    /// Fixed after the first batch of a stream: a stream has one schema.
    pub(super) frozen: bool,
}

impl Layout {
    /// An empty layout: every column is inferred from the data.
    pub(crate) fn inferred() -> Self {
        Self::default()
    }

    /// The columns of a typed operation's nodes: `type_name`'s fields in `selection`, typed
    /// from the schema. Fields the schema does not know are inferred from the data.
    pub(crate) fn typed(type_name: &str, selection: &str) -> Result<Self> {
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

    #[cfg(test)]
    pub(crate) fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// The Arrow schema of the columns as they stand.
    pub(crate) fn schema(&self) -> SchemaRef {
        Arc::new(Schema::new(
            self.columns.iter().map(|c| Field::new(&c.name, c.kind.data_type(), true)).collect::<Vec<_>>(),
        ))
    }

    /// Takes in what a page's nodes show: new columns, and types for the untyped ones.
    pub(super) fn learn(&mut self, nodes: &[&Value], first_row: usize) -> Result<()> {
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
                            "row {row}: the key {:?} holds a NUL character, which no column name can \
                             carry; read these rows with to_list() or write_jsonl()",
                            shown(k)
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

/// A key as messages show it: at most 80 characters (a server chooses its keys' length).
fn shown(key: &str) -> String {
    match key.char_indices().nth(80) {
        Some((cut, _)) => format!("{}...", &key[..cut]),
        None => key.to_string(),
    }
}

/// A column's path as the reader sees it in the JSON: `the key "x.y"` or `the field x { y }`.
pub(super) fn describe_path(path: &[String]) -> String {
    match path.split_last() {
        None => "the empty key".into(),
        Some((one, [])) => format!("the key {:?}", shown(one)),
        Some((last, outer)) => {
            let mut text = String::from("the field ");
            for key in outer {
                text.push_str(&format!("{:?} {{ ", shown(key)));
            }
            text.push_str(&format!("{:?}", shown(last)));
            text.push_str(&" }".repeat(outer.len()));
            text
        }
    }
}

pub(super) fn scalar_kind(type_name: &str) -> Kind {
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

/// The output types of the schema: `Type` -> `field` -> its type (read by the front end).
#[derive(Debug, Default)]
pub(super) struct SchemaTypes {
    types: HashMap<String, HashMap<String, FieldType>>,
}

impl SchemaTypes {
    pub(super) fn field(&self, type_name: &str, field: &str) -> Option<&FieldType> {
        self.types.get(type_name)?.get(field)
    }

    pub(super) fn is_connection(&self, type_name: &str) -> bool {
        self.types.get(type_name).is_some_and(|t| t.contains_key("edges") && t.contains_key("pageInfo"))
    }
}

pub(super) fn schema() -> &'static SchemaTypes {
    static TYPES: OnceLock<SchemaTypes> = OnceLock::new();
    // The built-in schema is part of the build and read by tests: it parses.
    TYPES.get_or_init(|| SchemaTypes { types: object_types(SDL).unwrap_or_default() })
}
