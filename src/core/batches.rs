//! A walk's pages as record batches or JSON lines, and the rule that keeps resuming exact: only a
//! page that was handed out whole (decoded into a batch, or into lines) moves the walk's cursor,
//! so resuming after a page that failed to decode does not skip it.

use std::future::Future;
use std::sync::{Arc, Mutex};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

use super::columns::{page_jsonl, Columnar};
use super::error::{Error, Result};
use super::paging::RawPage;
use super::secret::Redactor;
use super::walk::Walk;

/// Where pages come from: the network walk ([`Walk`]), or a test's own pages.
pub(crate) trait Pages: Send {
    fn next_page(&mut self) -> impl Future<Output = Result<Option<RawPage>>> + Send;
    /// The cursor after the last page given.
    fn cursor(&self) -> Option<&str>;
    /// The node's type and selection, for a catalog operation.
    fn node(&self) -> Option<(&str, &str)>;
}

impl Pages for Walk {
    fn next_page(&mut self) -> impl Future<Output = Result<Option<RawPage>>> + Send {
        Walk::next_page(self)
    }
    fn cursor(&self) -> Option<&str> {
        Walk::cursor(self)
    }
    fn node(&self) -> Option<(&str, &str)> {
        Walk::node(self)
    }
}

/// The pages of one walk as batches, shared by the paginator's Python methods.
pub(crate) struct BatchSource<P = Walk> {
    stream: Arc<tokio::sync::Mutex<P>>,
    cursor: Arc<Mutex<Option<String>>>,
    columnar: Arc<Mutex<Option<Columnar>>>,
    redactor: Redactor,
}

/// A page's rows as a record batch, and the cursor after it.
pub(crate) type Batch = (RecordBatch, Option<String>);

fn poisoned() -> Error {
    Error::Transport("a walk's state was poisoned by an earlier failure".into())
}

impl<P> Clone for BatchSource<P> {
    fn clone(&self) -> Self {
        Self {
            stream: Arc::clone(&self.stream),
            cursor: Arc::clone(&self.cursor),
            columnar: Arc::clone(&self.columnar),
            redactor: self.redactor.clone(),
        }
    }
}

impl<P: Pages> BatchSource<P> {
    /// A source over a walk's shared state: its pages, its cursor (moved only by a page handed
    /// out whole) and its columns (made on the first batch).
    pub(crate) fn new(
        stream: Arc<tokio::sync::Mutex<P>>,
        cursor: Arc<Mutex<Option<String>>>,
        columnar: Arc<Mutex<Option<Columnar>>>,
        redactor: Redactor,
    ) -> Self {
        Self { stream, cursor, columnar, redactor }
    }

    /// The next page, decoded into columns (on the calling thread, while the page after it is
    /// fetched); `None` at the end.
    pub(crate) async fn next(&self) -> Result<Option<Batch>> {
        let mut s = self.stream.lock().await;
        let Some(page) = s.next_page().await? else { return Ok(None) };
        let cursor = s.cursor().map(str::to_string);
        let batch = {
            let mut guard = self.columnar.lock().map_err(|_| poisoned())?;
            if guard.is_none() {
                *guard = Some(Columnar::new(s.node())?);
            }
            guard.as_mut().ok_or_else(poisoned)?.batch(&page)
        };
        let batch = batch.map_err(|e| e.redact(&self.redactor))?;
        // Only a page that became a batch moves the walk's cursor: resuming from it after a
        // page that failed to decode must not skip that page.
        if let Ok(mut c) = self.cursor.lock() {
            c.clone_from(&cursor);
        }
        Ok(Some((batch, cursor)))
    }

    /// Batches of this walk brought to the widest schema seen.
    pub(crate) fn finish(&self, batches: Vec<RecordBatch>) -> Result<(Vec<RecordBatch>, SchemaRef)> {
        let guard = self.columnar.lock().map_err(|_| poisoned())?;
        match guard.as_ref() {
            Some(c) => c.finish(batches),
            None => Columnar::new(None)?.finish(batches),
        }
    }

    /// Every remaining page, as one table of the widest schema.
    pub(crate) async fn all(&self) -> Result<(Vec<RecordBatch>, SchemaRef)> {
        let mut batches = Vec::new();
        while let Some((b, _)) = self.next().await? {
            batches.push(b);
        }
        // A walk with no page at all still has the columns of its selection.
        let node = {
            let s = self.stream.lock().await;
            s.node().map(|(t, sel)| (t.to_string(), sel.to_string()))
        };
        let mut guard = self.columnar.lock().map_err(|_| poisoned())?;
        if guard.is_none() {
            *guard = Some(Columnar::new(node.as_ref().map(|(t, s)| (t.as_str(), s.as_str())))?);
        }
        guard.as_ref().ok_or_else(poisoned)?.finish(batches)
    }

    /// The next page's nodes as JSON lines, and the cursor after it.
    pub(crate) async fn next_jsonl(&self) -> Result<Option<(Vec<u8>, Option<String>)>> {
        let mut s = self.stream.lock().await;
        let Some(page) = s.next_page().await? else { return Ok(None) };
        let cursor = s.cursor().map(str::to_string);
        let lines = page_jsonl(&page)?;
        if let Ok(mut c) = self.cursor.lock() {
            c.clone_from(&cursor);
        }
        Ok(Some((lines, cursor)))
    }

    pub(crate) fn freeze(&self) {
        if let Ok(mut guard) = self.columnar.lock() {
            if let Some(c) = guard.as_mut() {
                c.freeze();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Pages of a test: each a body (or a broken one) and the cursor after it.
    struct Fake {
        pages: std::collections::VecDeque<(Vec<u8>, &'static str)>,
        cursor: Option<String>,
    }

    impl Pages for Fake {
        async fn next_page(&mut self) -> Result<Option<RawPage>> {
            Ok(self.pages.pop_front().map(|(body, cursor)| {
                self.cursor = Some(cursor.to_string());
                RawPage { body: body.into(), take: usize::MAX, info: Default::default(), path: None }
            }))
        }
        fn cursor(&self) -> Option<&str> {
            self.cursor.as_deref()
        }
        fn node(&self) -> Option<(&str, &str)> {
            None
        }
    }

    fn body(nodes: serde_json::Value) -> Vec<u8> {
        let edges: Vec<_> = nodes.as_array().unwrap().iter().map(|n| json!({"node": n})).collect();
        serde_json::to_vec(&json!({"data": {"c": {"edges": edges, "pageInfo": {"hasNextPage": true}}}}))
            .unwrap()
    }

    fn source(pages: Vec<(Vec<u8>, &'static str)>) -> BatchSource<Fake> {
        BatchSource::new(
            Arc::new(tokio::sync::Mutex::new(Fake { pages: pages.into(), cursor: None })),
            Arc::new(Mutex::new(None)),
            Arc::new(Mutex::new(None)),
            Redactor::default(),
        )
    }

    #[tokio::test]
    async fn only_a_page_that_became_a_batch_moves_the_cursor() {
        // The second page holds a key the columns cannot take (a NUL): it fails to decode.
        let s = source(vec![
            (body(json!([{"a": 1}])), "A"),
            (body(json!([{"a\u{0}": 2}])), "B"),
            (body(json!([{"a": 3}])), "C"),
        ]);
        let (b, cursor) = s.next().await.unwrap().unwrap();
        assert_eq!((b.num_rows(), cursor.as_deref()), (1, Some("A")));
        assert_eq!(s.cursor.lock().unwrap().as_deref(), Some("A"));
        assert!(s.next().await.is_err());
        // Resuming from here repeats the page that failed instead of skipping it.
        assert_eq!(s.cursor.lock().unwrap().as_deref(), Some("A"));
        let (_, cursor) = s.next().await.unwrap().unwrap();
        assert_eq!(cursor.as_deref(), Some("C"));
        assert_eq!(s.cursor.lock().unwrap().as_deref(), Some("C"));
        assert!(s.next().await.unwrap().is_none());
    }

    #[tokio::test]
    async fn json_lines_move_the_cursor_too_and_all_widens() {
        let s = source(vec![(body(json!([{"a": 1}])), "A"), (body(json!([{"a": 2.5}])), "B")]);
        let (lines, cursor) = s.next_jsonl().await.unwrap().unwrap();
        assert_eq!((lines, cursor.as_deref()), (b"{\"a\":1}\n".to_vec(), Some("A")));
        assert_eq!(s.cursor.lock().unwrap().as_deref(), Some("A"));
        let (batches, schema) = s.all().await.unwrap();
        assert_eq!((batches.len(), schema.field(0).data_type()), (1, &arrow_schema::DataType::Float64));
        assert_eq!(s.cursor.lock().unwrap().as_deref(), Some("B"));
    }
}
