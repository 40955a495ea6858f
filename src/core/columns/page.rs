//! One page answer into a record batch: the fast route when the layout knows the page's shape,
//! else the slow route through a JSON tree that learns first; and batches brought to one schema.

use std::sync::Arc;

use arrow_array::{new_null_array, Array, ArrayRef, RecordBatch, RecordBatchOptions};
use arrow_schema::{DataType, SchemaRef};
use serde_json::Value;

use super::builders::{empty_lists_as_json, Builder};
use super::fast::{self, Trie};
use super::layout::Layout;
use crate::core::error::{Error, Result};

/// Finds the connection's nodes in a page answer (`path` or the only field of `data`), at most
/// `take` of them. A null node counts as a row of nulls.
pub(super) fn page_nodes<'v>(
    data: &'v Value,
    path: Option<&[String]>,
    take: usize,
) -> Result<Vec<&'v Value>> {
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
pub(crate) fn page_batch(
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
pub(super) fn exact(batch: RecordBatch, body: &[u8], first_row: usize) -> Result<RecordBatch> {
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
pub(super) fn wide_int_literal(body: &[u8]) -> Option<String> {
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
pub(super) fn slow_page_batch(
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
pub(crate) fn freeze(layout: &mut Layout) {
    layout.frozen = true;
}

/// Brings batches made while the layout was still widening to its final schema: columns that
/// appeared later are nulls in earlier batches, and narrower types are cast up.
pub(crate) fn unify(batches: Vec<RecordBatch>, layout: &Layout) -> Result<(Vec<RecordBatch>, SchemaRef)> {
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
