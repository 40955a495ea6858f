//! A catalog operation built once: the document and variables the Python layer checks against
//! the live schema are the ones sent, byte for byte, with no second build in between.
//!
//! [`prepare_operation`] runs the catalog's argument checks and coercions (`operations::build`)
//! and, for an operation answered in one request, serializes the request body there and then.
//! [`CoreClient::call_prepared`](super::client::CoreClient::call_prepared) sends that body;
//! [`Prepared::page_spec`] hands a connection's document to the paginator, which adds `first`
//! and `after` per page.

use serde_json::{Map, Value};

use super::error::{Error, Result};
use super::gql::{OperationInfo, OperationKind};
use super::graphql::PreparedRequest;
use super::operations::{build, find, Built, Operation};
use super::paging::PageSpec;

/// One catalog operation with its arguments checked and its document built.
#[derive(Clone, Debug)]
pub(crate) struct Prepared {
    built: Built,
    /// The selection of the node (a connection's) or of the object returned.
    selection: String,
    /// The request body, for an operation answered in one request (not a connection).
    request: Option<PreparedRequest>,
}

/// Checks `args` for the catalog operation `name`, builds its document and variables, and (for
/// an operation that is not a connection) serializes the request once.
pub(crate) fn prepare_operation(
    name: &str,
    args: Map<String, Value>,
    fields: Option<&str>,
) -> Result<Prepared> {
    let op = find(name)?;
    let built = build(op, args, fields)?;
    let selection = fields.unwrap_or(op.selection).to_string();
    let request = if op.is_connection() { None } else { Some(request_of(&built)?) };
    Ok(Prepared { built, selection, request })
}

/// The body of `built`'s one request. The document is the catalog's own (its selection was read
/// by the GraphQL front end in `build`), so it is not parsed again: the operation's kind, name
/// and resend class come from the catalog.
fn request_of(built: &Built) -> Result<PreparedRequest> {
    let op = built.operation;
    let mut body = Map::with_capacity(3);
    body.insert("query".into(), Value::String(built.query.clone()));
    body.insert("variables".into(), Value::Object(built.variables.clone()));
    body.insert("operationName".into(), Value::String(op.name.to_string()));
    let bytes = serde_json::to_vec(&Value::Object(body))
        .map_err(|e| Error::validation(format!("variables cannot be encoded as JSON: {e}")))?;
    let operation = OperationInfo {
        kind: op.kind,
        name: Some(op.name.to_string()),
        // Read only for subscriptions, which the catalog does not build.
        variables: Vec::new(),
        defaulted: Vec::new(),
    };
    Ok(PreparedRequest { body: bytes.into(), operation, label: op.name.to_string(), retry: op.retry })
}

impl Prepared {
    pub(crate) fn operation(&self) -> &'static Operation {
        self.built.operation
    }

    /// The node's (a connection's) or the result's selection.
    pub(crate) fn selection(&self) -> &str {
        &self.selection
    }

    /// The document, as it is (or its pages are) sent.
    pub(crate) fn query(&self) -> &str {
        &self.built.query
    }

    /// The variables, as they are sent (a connection's pages add `first` and `after`).
    pub(crate) fn variables(&self) -> &Map<String, Value> {
        &self.built.variables
    }

    /// The request of an operation answered in one request; an error for a connection.
    pub(crate) fn request(&self) -> Result<&PreparedRequest> {
        self.request.as_ref().ok_or_else(|| {
            Error::validation(format!(
                "{}() returns a connection: page it with paginate_operation",
                self.built.operation.name
            ))
        })
    }

    /// The paginator's spec for a connection; an error for any other operation.
    pub(crate) fn page_spec(&self, page_size: u32, limit: Option<u64>) -> Result<PageSpec> {
        let op = self.built.operation;
        if !op.is_connection() {
            return Err(Error::validation(format!("{}() does not return a connection", op.name)));
        }
        if op.kind != OperationKind::Query {
            return Err(Error::validation(format!("{}() is not a query: it is not paged", op.name)));
        }
        Ok(PageSpec {
            query: self.built.query.clone(),
            variables: self.built.variables.clone(),
            operation_name: Some(op.name.to_string()),
            path: Some(op.name.to_string()),
            page_size,
            limit,
            node: Some((op.returns.type_name().to_string(), self.selection.clone())),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::graphql::prepare;
    use crate::core::retry::RetryClass;

    fn args(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn the_body_is_the_one_a_second_build_would_send() {
        let p =
            prepare_operation("finding", args(serde_json::json!({"id": "RmluZGluZzox"})), Some("id title"))
                .unwrap();
        let again = prepare(p.query(), Some(p.variables()), Some("finding")).unwrap();
        assert_eq!(p.request().unwrap().body, again.body);
        assert_eq!(p.request().unwrap().retry, RetryClass::Idempotent);
        assert!(p.page_spec(100, None).is_err());
    }

    #[test]
    fn a_connection_is_paged_and_a_mutation_keeps_its_class() {
        let p = prepare_operation("findings_view", Map::new(), Some("id_int")).unwrap();
        assert!(p.request().is_err());
        let spec = p.page_spec(50, Some(10)).unwrap();
        assert_eq!(spec.node, Some(("FindingsView".into(), "id_int".into())));
        let m = prepare_operation(
            "delete_scoring_rule",
            args(serde_json::json!({"id": "U2NvcmluZ1J1bGU6MQ=="})),
            None,
        )
        .unwrap();
        assert_eq!(m.request().unwrap().retry, RetryClass::Mutation);
        assert!(prepare_operation("no_such_operation", Map::new(), None).is_err());
    }
}
