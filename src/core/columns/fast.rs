//! The fast route: serde visitors that append each value of a page to its column as the body
//! is parsed, matching keys against the columns' paths (a trie); a page the layout has not
//! learnt yet is handed back to the slow route (`page`).

use std::fmt;

use serde::de::{
    self, Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use serde_json::Value;

use super::builders::{append_item, datetime_str, Builder};
use super::kind::Kind;
use super::layout::{Column, Layout};
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
                Some(Slot::Object(sub)) => map.next_value_seed(Object { ctx: &mut *self.ctx, trie: sub })?,
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
                    other => b.append_value(super::builders::json_text(&other)),
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
                Err(_) => return Err(self.misfit(&format!("{v}, which does not fit a 64-bit int column"))),
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
                let d = super::builders::date(&Value::String(v.to_string()));
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

/// The columns' paths as a tree, to match a node's keys while it is parsed.
#[derive(Debug, Default)]
pub(super) struct Trie {
    entries: Vec<(String, Slot)>,
}

#[derive(Debug)]
pub(super) enum Slot {
    Column(usize),
    Object(Trie),
}

impl Trie {
    /// `None` when a column sits where other columns' object is (then only the slow route can
    /// tell them apart).
    pub(super) fn of(columns: &[Column]) -> Option<Self> {
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

    pub(super) fn get(&self, key: &str, hint: &mut usize) -> Option<&Slot> {
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
