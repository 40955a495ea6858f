//! Findings as columns: pages decoded from response bytes straight into Arrow record batches,
//! never through Python objects.
//!
//! A [`Layout`] says which columns a walk has and of what type. For a typed operation it comes
//! from the selection and the schema's field types (`DateTime` -> timestamp UTC, `Int` -> int64,
//! nested objects flattened to dotted columns, lists of scalars as list columns); for any other
//! document it is inferred from the data and widened page by page (null -> a type, int ->
//! float). A value that does not fit its column is an error that names the column and the row,
//! never a silent null.

mod builders;
mod fast;
mod jsonl;
mod kind;
mod layout;
mod page;
#[cfg(test)]
mod tests;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

pub(crate) use jsonl::page_jsonl;
#[cfg(test)]
use kind::Kind;
pub(crate) use layout::Layout;
pub(crate) use page::{freeze, page_batch, unify};

use super::error::Result;
use super::paging::RawPage;

/// A walk's pages as record batches: the layout (typed for a catalog operation, inferred for
/// any other document) and the rows decoded so far.
#[derive(Debug)]
pub(crate) struct Columnar {
    layout: Layout,
    rows: usize,
}

impl Columnar {
    /// `node`: the node's type and selection of a catalog operation; `None` infers the columns.
    pub(crate) fn new(node: Option<(&str, &str)>) -> Result<Self> {
        let layout = match node {
            Some((type_name, selection)) => Layout::typed(type_name, selection)?,
            None => Layout::inferred(),
        };
        Ok(Self { layout, rows: 0 })
    }

    /// One page's rows as a record batch (of the layout as it stands after this page).
    pub(crate) fn batch(&mut self, page: &RawPage) -> Result<RecordBatch> {
        let batch = page_batch(&page.body, page.path.as_deref(), page.take, &mut self.layout, self.rows)?;
        self.rows = self.rows.saturating_add(batch.num_rows());
        Ok(batch)
    }

    /// Fixes the schema (a stream has one): later pages must fit it.
    pub(crate) fn freeze(&mut self) {
        freeze(&mut self.layout);
    }

    /// Every batch brought to the final, widest schema.
    pub(crate) fn finish(&self, batches: Vec<RecordBatch>) -> Result<(Vec<RecordBatch>, SchemaRef)> {
        unify(batches, &self.layout)
    }
}
