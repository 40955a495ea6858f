//! An optional cache of whole query responses, so that a benchmark measures the clients and not
//! the GraphQL engine. A query document answered once is answered again from memory, byte for
//! byte, until anything that might change data (any document mentioning `mutation`) runs; that
//! empties the cache. Authentication, rate limits, faults and the request log still apply to every
//! request, because they are handled before the cache is consulted.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use bytes::Bytes;

/// The most response bytes kept; the oldest entries go first.
const MAX_BYTES: usize = 256 * 1024 * 1024;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    customer: String,
    query: String,
    variables: String,
    operation_name: Option<String>,
}

impl Key {
    pub(crate) fn new(
        customer: &str,
        query: &str,
        variables: &serde_json::Value,
        operation_name: Option<&str>,
    ) -> Self {
        Self {
            customer: customer.to_string(),
            query: query.to_string(),
            variables: variables.to_string(),
            operation_name: operation_name.map(str::to_string),
        }
    }
}

#[derive(Default)]
struct Inner {
    entries: HashMap<Key, Bytes>,
    order: VecDeque<Key>,
    bytes: usize,
}

#[derive(Default)]
pub(crate) struct ResponseCache {
    inner: Mutex<Inner>,
}

/// Whether a document may change data: any `mutation` keyword (or the word anywhere) counts.
pub(crate) fn may_mutate(query: &str) -> bool {
    query.contains("mutation")
}

impl ResponseCache {
    pub(crate) fn get(&self, key: &Key) -> Option<Bytes> {
        self.inner.lock().ok()?.entries.get(key).cloned()
    }

    pub(crate) fn put(&self, key: Key, body: Bytes) {
        let Ok(mut inner) = self.inner.lock() else { return };
        if body.len() > MAX_BYTES || inner.entries.contains_key(&key) {
            return;
        }
        while inner.bytes + body.len() > MAX_BYTES {
            let Some(old) = inner.order.pop_front() else { break };
            if let Some(b) = inner.entries.remove(&old) {
                inner.bytes -= b.len();
            }
        }
        inner.bytes += body.len();
        inner.order.push_back(key.clone());
        inner.entries.insert(key, body);
    }

    pub(crate) fn clear(&self) {
        if let Ok(mut inner) = self.inner.lock() {
            *inner = Inner::default();
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().map(|i| i.entries.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_separate_customers_variables_and_operations() {
        let c = ResponseCache::default();
        let k = |cust: &str, v: serde_json::Value| Key::new(cust, "{ a }", &v, None);
        c.put(k("acme", json!({"id": 1})), Bytes::from_static(b"one"));
        assert_eq!(c.get(&k("acme", json!({"id": 1}))).as_deref(), Some(&b"one"[..]));
        assert!(c.get(&k("acme", json!({"id": 2}))).is_none());
        assert!(c.get(&k("other", json!({"id": 1}))).is_none());
        assert!(c.get(&Key::new("acme", "{ a }", &json!({"id": 1}), Some("Q"))).is_none());
        c.clear();
        assert_eq!(c.len(), 0);
        assert!(may_mutate("mutation M { x }"));
        assert!(!may_mutate("query Q { findings_view { edges { node { id } } } }"));
    }
}
