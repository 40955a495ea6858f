//! Many single-object lookups in few requests: one document of aliased selections
//! (`f0: finding(id: $i0) { ... } f1: finding(id: $i1) { ... }`) per batch.
//!
//! The API's limits count requests, so 1,000 findings by id cost 10 requests of 100 instead of
//! 1,000. A server may refuse a large document (413, too many aliases, too complex or too deep, a
//! timeout): the batch is halved and the lookup goes on, and the size that worked is remembered
//! for the client (so the next lookup starts there). Up to [`CONCURRENT`] batches are in flight
//! at once: over a network, the round trips overlap. An id that names nothing comes back as
//! `None` in its place without failing the others; any other error fails the lookup.
//!
//! Pure parts (the document, the split of an answer, what counts as a refusal) are unit-tested
//! here; [`Lookups`] drives them over a transport.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::{StreamExt as _, TryStreamExt as _};
use serde_json::{Map, Value};

use super::error::{Error, Result};
use super::graphql::{prepare, OperationKind};
use super::operations::{self, coerce, Operation, Returns};
use super::retry::RetryClass;
use super::transport::Transport;

/// The most selections one document carries, whatever the caller asks.
pub(crate) const MAX_BATCH: usize = 1000;
/// Batches of one lookup in flight at once.
pub(crate) const CONCURRENT: usize = 4;

/// Whether `op` is a query of one object by one `id: ID!` (what a batched lookup serves).
fn serves(op: &Operation) -> bool {
    op.kind == OperationKind::Query
        && matches!(op.returns, Returns::Object(_))
        && matches!(op.args, [a] if a.name == "id" && a.ty == "ID!")
}

/// The catalog entry `name`, if it is a query of one object by one `id: ID!`.
pub(crate) fn lookup_operation(name: &str) -> Result<&'static Operation> {
    let op = operations::find(name)?;
    if !serves(op) {
        return Err(Error::validation(format!(
            "{name}() is not a lookup of one object by id; batched lookups serve: {}",
            lookups().join(", ")
        )));
    }
    Ok(op)
}

/// The operations a batched lookup serves.
pub(crate) fn lookups() -> Vec<&'static str> {
    operations::catalog().into_iter().filter(|op| serves(op)).map(|op| op.name).collect()
}

/// The document for `n` lookups of `op` with `selection`.
pub(crate) fn document(op: &Operation, selection: &str, n: usize) -> String {
    let mut doc = String::with_capacity(64 + n * (selection.len() + op.name.len() + 24));
    doc.push_str("query ");
    doc.push_str(op.name);
    doc.push_str("_batch(");
    for i in 0..n {
        if i > 0 {
            doc.push_str(", ");
        }
        doc.push_str(&format!("$i{i}: ID!"));
    }
    doc.push_str(") {");
    for i in 0..n {
        doc.push_str(&format!(" f{i}: {}(id: $i{i}) {{ {selection} }}", op.name));
    }
    doc.push_str(" }");
    doc
}

/// Whether an error is a server refusing a document for its size (so a smaller one may pass).
pub(crate) fn is_refusal(e: &Error) -> bool {
    const HINTS: [&str; 8] = [
        "too many aliases",
        "too large",
        "too big",
        "complexity",
        "too complex",
        "depth",
        "too deep",
        "too long",
    ];
    let text_says = |m: &str| {
        let m = m.to_ascii_lowercase();
        HINTS.iter().any(|h| m.contains(h))
    };
    match e {
        Error::ApiStatus { status: 413 | 414 | 431, .. } | Error::Timeout(_) => true,
        Error::ApiStatus { status: 400, body, .. } => text_says(body),
        Error::GraphQL { errors, .. } => errors.iter().any(|err| {
            err.get("path").is_none_or(Value::is_null)
                && err.get("message").and_then(Value::as_str).is_some_and(text_says)
        }),
        _ => false,
    }
}

/// Splits the answer to a document of `n` aliased lookups: each value, `None` where the id names
/// nothing. Any other error fails the whole batch.
pub(crate) fn split(body: &[u8], n: usize) -> Result<Vec<Option<Value>>> {
    let (data, errors) = super::graphql::envelope(body)?;
    let mut data = match data {
        Some(Value::Object(m)) => m,
        // No data is "nothing found" only with the errors that say so (checked below).
        Some(Value::Null) | None if !errors.is_empty() => Map::new(),
        other => return Err(super::graphql::bad_data(other.as_ref())),
    };
    let mut missing = vec![false; n];
    let mut other = Vec::new();
    for err in errors {
        let path = err.get("path").and_then(Value::as_array);
        // Below the alias (`["f1", "title"]`) an error is about a field of a finding that
        // exists: the finding is kept (that field null), never taken for a missing id.
        if path.is_some_and(|p| p.len() > 1) {
            if matches!(Error::graphql(vec![err.clone()], None), Error::GraphQL { not_found: true, .. }) {
                continue;
            }
            other.push(err);
            continue;
        }
        let index = path
            .and_then(|p| p.first())
            .and_then(Value::as_str)
            .and_then(|alias| alias.strip_prefix('f'))
            // Exactly the aliases this document has: `f7`, never `f07` or `f+7`.
            .and_then(|i| i.parse::<usize>().ok().filter(|k| k.to_string() == i))
            .filter(|i| *i < n);
        let gone = Error::graphql(vec![err.clone()], None);
        match (index, gone) {
            (Some(i), Error::GraphQL { not_found: true, .. }) => {
                if let Some(slot) = missing.get_mut(i) {
                    *slot = true;
                }
            }
            _ => other.push(err),
        }
    }
    if !other.is_empty() {
        return Err(Error::graphql(other, Some(Value::Object(data))));
    }
    let mut out = Vec::with_capacity(n);
    for (i, gone) in missing.into_iter().enumerate() {
        let alias = format!("f{i}");
        match data.remove(&alias) {
            _ if gone => out.push(None),
            // A null without an error is the server saying "nothing here" too.
            Some(Value::Null) => out.push(None),
            Some(v) => out.push(Some(v)),
            None => {
                return Err(Error::Transport(format!(
                    "the answer to a batched lookup has no {alias:?} and no error for it; it is \
                     not the answer to the document sent"
                )))
            }
        }
    }
    Ok(out)
}

/// The batch sizes that worked per operation, for one client (one server).
#[derive(Clone, Default, Debug)]
pub(crate) struct Lookups {
    sizes: Arc<Mutex<HashMap<&'static str, usize>>>,
}

impl Lookups {
    /// The size the next batch of `op` starts at: the caller's, or less when the server refused
    /// a larger one before.
    pub(crate) fn size_for(&self, op: &'static str, asked: usize) -> usize {
        let known = self.sizes.lock().ok().and_then(|m| m.get(op).copied());
        known.map_or(asked, |k| k.min(asked)).clamp(1, MAX_BATCH)
    }

    fn refused(&self, op: &'static str, size: usize) {
        if let Ok(mut m) = self.sizes.lock() {
            let slot = m.entry(op).or_insert(size);
            *slot = (*slot).min(size);
        }
    }

    /// Looks up every id of `ids` (checked as `ID!`), in batches of at most `batch_size`:
    /// values in input order, `None` where an id names nothing. Duplicates are asked once.
    pub(crate) async fn fetch(
        &self,
        transport: &Transport,
        name: &str,
        ids: Vec<Value>,
        fields: Option<&str>,
        batch_size: usize,
    ) -> Result<Vec<Option<Value>>> {
        let op = lookup_operation(name)?;
        if batch_size == 0 {
            return Err(Error::validation("batch_size must be at least 1"));
        }
        // The selection is checked the way a single call checks it.
        let selection = fields.unwrap_or(op.selection);
        if let Some(first) = ids.first() {
            let mut args = Map::new();
            args.insert("id".into(), first.clone());
            operations::build(op, args, fields)?;
        }
        // Unique ids in first-seen order, and where each input goes.
        let mut unique: Vec<Value> = Vec::new();
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut slots = Vec::with_capacity(ids.len());
        for (i, id) in ids.into_iter().enumerate() {
            let id = coerce(&format!("ids[{i}]"), "ID!", id)?;
            let key = id.to_string();
            let at = *seen.entry(key).or_insert_with(|| {
                unique.push(id);
                unique.len() - 1
            });
            slots.push(at);
        }
        // Up to CONCURRENT batches in flight (each through the budget, like any request), their
        // answers put back in order; a refused batch is halved until it passes.
        let size = self.size_for(op.name, batch_size);
        let batches: Vec<_> =
            unique.chunks(size).map(|chunk| self.chunk(transport, op, selection, chunk)).collect();
        let found: Vec<Vec<Option<Value>>> =
            futures_util::stream::iter(batches).buffered(CONCURRENT).try_collect().await?;
        let found: Vec<Option<Value>> = found.into_iter().flatten().collect();
        Ok(slots.into_iter().map(|i| found.get(i).cloned().flatten()).collect())
    }

    /// One batch, halved (and the size remembered) while the server refuses it as too large.
    fn chunk<'a>(
        &'a self,
        transport: &'a Transport,
        op: &'static Operation,
        selection: &'a str,
        ids: &'a [Value],
    ) -> futures_util::future::BoxFuture<'a, Result<Vec<Option<Value>>>> {
        Box::pin(async move {
            // A size the server refused since this lookup began applies to its later batches.
            let known = self.size_for(op.name, ids.len());
            if ids.len() > known {
                let mut out = Vec::with_capacity(ids.len());
                for part in ids.chunks(known) {
                    out.extend(self.chunk(transport, op, selection, part).await?);
                }
                return Ok(out);
            }
            match self.one(transport, op, selection, ids).await {
                Err(e) if is_refusal(&e) && ids.len() > 1 => {
                    let half = ids.len().div_ceil(2);
                    // A timeout may be the moment, not the size: this batch is split, but the
                    // client's later batches start at the size asked again.
                    if !matches!(e, Error::Timeout(_)) {
                        self.refused(op.name, half);
                    }
                    log::info!(
                        "{}: the server refused {} lookups in one request; trying {half}",
                        op.name,
                        ids.len()
                    );
                    let (first, second) = ids.split_at(half);
                    let mut out = self.chunk(transport, op, selection, first).await?;
                    out.extend(self.chunk(transport, op, selection, second).await?);
                    Ok(out)
                }
                other => other,
            }
        })
    }

    async fn one(
        &self,
        transport: &Transport,
        op: &Operation,
        selection: &str,
        ids: &[Value],
    ) -> Result<Vec<Option<Value>>> {
        let query = document(op, selection, ids.len());
        let variables: Map<String, Value> =
            ids.iter().enumerate().map(|(i, id)| (format!("i{i}"), id.clone())).collect();
        let mut req = prepare(&query, Some(&variables), None)?;
        req.retry = RetryClass::Idempotent;
        req.label = format!("{}[{}]", op.name, ids.len());
        let body = transport.send(&req).await?;
        split(&body, ids.len()).map_err(|e| e.redact(&transport.settings().redactor))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_lookups_by_id_are_served() {
        assert!(lookup_operation("finding").is_ok());
        let e = lookup_operation("findings_view").unwrap_err().to_string();
        assert!(e.contains("batched lookups serve: finding"), "{e}");
        assert!(lookup_operation("add_scoring_rule").is_err());
        assert!(lookup_operation("nope").is_err());
    }

    #[test]
    fn the_document_aliases_each_lookup_and_parses() {
        let op = lookup_operation("finding").unwrap();
        let doc = document(op, "id title", 3);
        assert_eq!(
            doc,
            "query finding_batch($i0: ID!, $i1: ID!, $i2: ID!) { f0: finding(id: $i0) { id title } \
             f1: finding(id: $i1) { id title } f2: finding(id: $i2) { id title } }"
        );
        let vars: Map<String, Value> = (0..3).map(|i| (format!("i{i}"), json!(i + 1))).collect();
        assert!(prepare(&doc, Some(&vars), None).is_ok());
    }

    #[test]
    fn an_answer_splits_in_order_with_missing_ids_as_none() {
        let body = json!({
            "data": {"f0": {"id": "a"}, "f1": null, "f2": {"id": "c"}},
            "errors": [{"message": "Finding matching query does not exist (id 9).", "path": ["f1"]}]
        });
        let got = split(body.to_string().as_bytes(), 3).unwrap();
        assert_eq!(got, vec![Some(json!({"id": "a"})), None, Some(json!({"id": "c"}))]);
    }

    #[test]
    fn a_missing_field_of_a_finding_keeps_the_finding() {
        let body = json!({
            "data": {"f0": {"id": "a"}, "f1": {"id": "b", "title": null}},
            "errors": [{"message": "Finding matching query does not exist.", "path": ["f1", "title"]}]
        });
        let got = split(body.to_string().as_bytes(), 2).unwrap();
        assert_eq!(got, vec![Some(json!({"id": "a"})), Some(json!({"id": "b", "title": null}))]);
        // Any other error below an alias still fails the batch.
        let body = json!({
            "data": {"f0": {"id": "a", "title": null}},
            "errors": [{"message": "permission denied", "path": ["f0", "title"]}]
        });
        assert!(split(body.to_string().as_bytes(), 1).is_err());
    }

    #[test]
    fn another_error_fails_the_batch() {
        let body = json!({
            "data": {"f0": {"id": "a"}, "f1": null},
            "errors": [{"message": "permission denied", "path": ["f1"]}]
        });
        let e = split(body.to_string().as_bytes(), 2).unwrap_err();
        assert!(matches!(e, Error::GraphQL { not_found: false, .. }), "{e:?}");
        // An error pointing outside the batch is not a missing id either.
        let body = json!({"data": {}, "errors": [{"message": "Finding matching query does not exist.", "path": ["f7"]}]});
        assert!(split(body.to_string().as_bytes(), 2).is_err());
        assert!(split(b"<html>", 2).is_err());
        // An alias missing without an error, or no data at all, is not "not found".
        assert!(split(json!({"data": {"f0": {"id": "a"}}}).to_string().as_bytes(), 2).is_err());
        assert!(split(json!({"data": null}).to_string().as_bytes(), 1).is_err());
        assert!(split(json!({}).to_string().as_bytes(), 1).is_err());
        // Only the aliases of the document count: `f01` is not `f1`.
        let body = json!({"data": {"f0": {"id": "a"}, "f1": {"id": "b"}},
            "errors": [{"message": "Finding matching query does not exist.", "path": ["f01"]}]});
        assert!(split(body.to_string().as_bytes(), 2).is_err());
        assert!(split(br#"{"data": [1]}"#, 2).is_err());
    }

    #[test]
    fn refusals_are_recognised() {
        let status = |status: u16, body: &str| Error::ApiStatus {
            status,
            message: String::new(),
            body: body.into(),
            headers: vec![],
        };
        assert!(is_refusal(&status(413, "")));
        assert!(is_refusal(&status(400, "Query is too complex")));
        assert!(!is_refusal(&status(400, "bad")));
        assert!(!is_refusal(&status(502, "too large")));
        assert!(is_refusal(&Error::Timeout("t".into())));
        let gql = |m: &str| Error::graphql(vec![json!({"message": m})], None);
        assert!(is_refusal(&gql("Query has too many aliases: 120 (limit 50).")));
        assert!(is_refusal(&gql("Query depth 12 exceeds the limit")));
        assert!(!is_refusal(&gql("Cannot query field \"x\" on type \"Finding\".")));
        let with_path = Error::graphql(vec![json!({"message": "too large", "path": ["f0"]})], None);
        assert!(!is_refusal(&with_path));
    }

    #[test]
    fn remembered_sizes_only_shrink() {
        let l = Lookups::default();
        assert_eq!(l.size_for("finding", 100), 100);
        l.refused("finding", 25);
        assert_eq!(l.size_for("finding", 100), 25);
        assert_eq!(l.size_for("finding", 10), 10);
        l.refused("finding", 50);
        assert_eq!(l.size_for("finding", 100), 25);
        assert_eq!(l.size_for("finding", 5000), 25);
        assert_eq!(Lookups::default().size_for("finding", 5000), MAX_BATCH);
    }
}
