//! The GraphQL endpoint, in front of which sit the gateway concerns of the real service: bearer
//! JWT checks and the global / customer / token rate limits.

use bytes::Bytes;
use hyper::header::{HeaderValue, AUTHORIZATION, RETRY_AFTER, WWW_AUTHENTICATE};
use hyper::http::request::Parts;
use hyper::{Method, Response, StatusCode};
use serde::Serialize;

use crate::fault::{is_mutation, Fault};
use crate::response::{json, status_fault, truncate, with_header, Conn, ResetConnection, RespBody};
use crate::state::Shared;
use crate::stats::{Counters, LoggedRequest};

/// The members of a GraphQL POST body, as sent.
struct GqlBody {
    query: Option<String>,
    operation_name: Option<String>,
    variables: serde_json::Value,
}

/// graphene-django's messages for bodies it cannot use.
const INVALID_JSON: &[u8] = br#"{"errors":[{"message":"POST body sent invalid JSON."}]}"#;
const NO_QUERY: &[u8] = br#"{"errors":[{"message":"Must provide query string."}]}"#;
const BAD_VARIABLES: &[u8] = br#"{"errors":[{"message":"Variables are invalid JSON."}]}"#;
const BAD_METHOD: &[u8] = br#"{"errors":[{"message":"GraphQL only supports GET and POST requests."}]}"#;
const RATE_LIMITED: &[u8] = br#"{"error":"rate_limited","message":"Too Many Requests"}"#;
const UNAUTHORIZED: &[u8] = br#"{"message":"Unauthorized"}"#;

pub(crate) async fn handle(
    conn: &Conn,
    parts: &Parts,
    body: Bytes,
) -> Result<Response<RespBody>, ResetConnection> {
    let shared = &conn.shared;
    Counters::bump(&shared.counters.api_requests);
    if let Some(latency) = shared.knobs.latency() {
        tokio::time::sleep(latency).await;
    }
    let parsed = parse(&body);
    let logged = parsed.as_ref().map(|b| LoggedRequest {
        operation_name: b.operation_name.clone(),
        query: b.query.clone().unwrap_or_default(),
        variables: b.variables.clone(),
        status: 0,
    });
    let api_fault = shared.api_faults.take();
    if api_fault.is_none() {
        let mutation = parsed.as_ref().and_then(|b| b.query.as_deref()).is_some_and(is_mutation);
        if let Some((fault, applied)) = mutation.then(|| shared.mutation_faults.take()).flatten() {
            if applied {
                return after_applying(conn, parts, parsed, body.len(), logged, fault).await;
            }
            return with_fault(conn, parts, parsed, body.len(), logged, Some(fault)).await;
        }
    }
    with_fault(conn, parts, parsed, body.len(), logged, api_fault).await
}

/// The answer to one request, with `fault` (if any) served in its place or around it.
async fn with_fault(
    conn: &Conn,
    parts: &Parts,
    parsed: Option<GqlBody>,
    body_len: usize,
    logged: Option<LoggedRequest>,
    fault: Option<Fault>,
) -> Result<Response<RespBody>, ResetConnection> {
    let shared = &conn.shared;
    let mut truncated = false;
    let faulted = match fault {
        None => None,
        Some(Fault::Delay(delay)) => {
            tokio::time::sleep(delay).await;
            None
        }
        Some(Fault::Truncated) => {
            truncated = true;
            None
        }
        Some(Fault::Reset) => {
            if let Some(entry) = logged {
                shared.log.push(entry);
            }
            return Err(conn.reset());
        }
        Some(fault) => Some(fault_response(shared, fault)),
    };
    let response = match faulted {
        Some(response) => response,
        None => process(shared, parts, parsed, body_len).await,
    };
    if let Some(mut entry) = logged {
        entry.status = response.status().as_u16();
        shared.log.push(entry);
    }
    Ok(if truncated { truncate(response) } else { response })
}

/// A mutation that runs, and whose answer `fault` then replaces (a status, a reset), cuts short
/// or delays: the change is kept although the client sees a failure.
async fn after_applying(
    conn: &Conn,
    parts: &Parts,
    parsed: Option<GqlBody>,
    body_len: usize,
    logged: Option<LoggedRequest>,
    fault: Fault,
) -> Result<Response<RespBody>, ResetConnection> {
    let shared = &conn.shared;
    let response = process(shared, parts, parsed, body_len).await;
    let response = match fault {
        Fault::Reset => {
            if let Some(entry) = logged {
                shared.log.push(entry);
            }
            return Err(conn.reset());
        }
        Fault::Truncated => truncate(response),
        Fault::Delay(delay) => {
            tokio::time::sleep(delay).await;
            response
        }
        other => fault_response(shared, other),
    };
    if let Some(mut entry) = logged {
        entry.status = response.status().as_u16();
        shared.log.push(entry);
    }
    Ok(response)
}

fn fault_response(shared: &Shared, fault: Fault) -> Response<RespBody> {
    match fault {
        Fault::Status(code) => status_fault(code),
        Fault::RateLimited { retry_after } => rate_limited(shared, retry_after),
        // Identity-provider faults on the API answer the same way they would on the IdP, so a
        // misdirected injection is visible rather than silently ignored.
        Fault::IdpError { error_type, message, status } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
            json(
                status,
                Bytes::from(serde_json::json!({"__type": error_type, "message": message}).to_string()),
            )
        }
        Fault::Challenge(name) => json(
            StatusCode::OK,
            Bytes::from(serde_json::json!({"ChallengeName": name, "ChallengeParameters": {}}).to_string()),
        ),
        Fault::Delay(_) | Fault::Reset | Fault::Truncated => status_fault(500),
    }
}

async fn process(
    shared: &Shared,
    parts: &Parts,
    parsed: Option<GqlBody>,
    body_len: usize,
) -> Response<RespBody> {
    // Requests the gateway cannot attribute still count against the global limit.
    if let Err(retry_after) = shared.global_limit.check("") {
        return rate_limited(shared, retry_after);
    }
    if parts.method != Method::POST {
        return json(StatusCode::METHOD_NOT_ALLOWED, Bytes::from_static(BAD_METHOD));
    }
    let caller = parts
        .headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer)
        .and_then(|token| shared.auth.verify(token));
    let Some(caller) = caller else {
        Counters::bump(&shared.counters.unauthorized);
        let response = json(StatusCode::UNAUTHORIZED, Bytes::from_static(UNAUTHORIZED));
        return with_header(response, WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    };
    if let Err(retry_after) = shared.customer_limit.check(&caller.customer) {
        return rate_limited(shared, retry_after);
    }
    if let Err(retry_after) = shared.token_limit.check(&caller.subject) {
        return rate_limited(shared, retry_after);
    }
    if let Some(max) = shared.knobs.max_document_bytes().filter(|max| body_len > *max) {
        let message = format!("Request body too large: {body_len} bytes (limit {max}).");
        let body = serde_json::json!({"errors": [{"message": message}]});
        return json(StatusCode::PAYLOAD_TOO_LARGE, Bytes::from(body.to_string()));
    }
    let Some(body) = parsed else {
        return json(StatusCode::BAD_REQUEST, Bytes::from_static(INVALID_JSON));
    };
    let Some(query) = body.query.filter(|q| !q.is_empty()) else {
        return json(StatusCode::BAD_REQUEST, Bytes::from_static(NO_QUERY));
    };
    if let Some(max) = shared.knobs.max_aliases() {
        let count = count_aliases(&query);
        if count > max {
            let message = format!("Query has too many aliases: {count} (limit {max}).");
            let body = serde_json::json!({"errors": [{"message": message}]});
            return json(StatusCode::BAD_REQUEST, Bytes::from(body.to_string()));
        }
    }
    let Some(variables) = variables(body.variables) else {
        return json(StatusCode::BAD_REQUEST, Bytes::from_static(BAD_VARIABLES));
    };
    let cache_key = match &shared.cache {
        Some(cache) if crate::cache::may_mutate(&query) => {
            cache.clear();
            None
        }
        Some(cache) => {
            let key =
                crate::cache::Key::new(&caller.customer, &query, &variables, body.operation_name.as_deref());
            if let Some(hit) = cache.get(&key) {
                return json(StatusCode::OK, hit);
            }
            Some(key)
        }
        None => None,
    };
    let mut request =
        async_graphql::Request::new(query).variables(async_graphql::Variables::from_json(variables));
    if let Some(name) = body.operation_name {
        request = request.operation_name(name);
    }
    let response = shared.graphql.execute(request, caller).await;
    let (status, body) = graphql_body(&response);
    if let (Some(cache), Some(key)) = (&shared.cache, cache_key) {
        // Only clean answers: an error may depend on state the key does not capture.
        if response.errors.is_empty() {
            cache.put(key, body.clone());
        }
    }
    json(status, body)
}

#[derive(Serialize)]
struct ErrorsOnly<'a> {
    errors: &'a [async_graphql::ServerError],
}

/// graphene-django's rule: errors without a path (parse or validation) make a 400 with only
/// `errors`; resolver errors come back with 200 next to the (partial) data.
#[cfg(test)]
fn graphql_response(response: &async_graphql::Response) -> Response<RespBody> {
    let (status, body) = graphql_body(response);
    json(status, body)
}

fn graphql_body(response: &async_graphql::Response) -> (StatusCode, Bytes) {
    let request_error = !response.errors.is_empty() && response.errors.iter().all(|e| e.path.is_empty());
    let (status, encoded) = if request_error {
        (StatusCode::BAD_REQUEST, serde_json::to_vec(&ErrorsOnly { errors: &response.errors }))
    } else {
        (StatusCode::OK, serde_json::to_vec(response))
    };
    match encoded {
        Ok(bytes) => (status, Bytes::from(bytes)),
        Err(e) => {
            let body = serde_json::json!({"errors": [{"message": e.to_string()}]});
            (StatusCode::INTERNAL_SERVER_ERROR, Bytes::from(body.to_string()))
        }
    }
}

fn rate_limited(shared: &Shared, retry_after: u64) -> Response<RespBody> {
    Counters::bump(&shared.counters.rate_limited);
    let response = json(StatusCode::TOO_MANY_REQUESTS, Bytes::from_static(RATE_LIMITED));
    with_header(response, RETRY_AFTER, HeaderValue::from(retry_after))
}

/// Aliased fields in a document, fragments included (0 when it does not parse: the engine says why).
/// The aliases a document holds (every aliased field, at any depth; 0 when it does not parse).
pub fn count_aliases(query: &str) -> u32 {
    use async_graphql::parser::types::{Selection, SelectionSet};
    fn walk(set: &SelectionSet) -> u32 {
        set.items.iter().fold(0u32, |n, item| {
            n.saturating_add(match &item.node {
                Selection::Field(f) => {
                    u32::from(f.node.alias.is_some()).saturating_add(walk(&f.node.selection_set.node))
                }
                Selection::InlineFragment(f) => walk(&f.node.selection_set.node),
                Selection::FragmentSpread(_) => 0,
            })
        })
    }
    let Ok(doc) = async_graphql::parser::parse_query(query) else { return 0 };
    let operations =
        doc.operations.iter().fold(0u32, |n, (_, op)| n.saturating_add(walk(&op.node.selection_set.node)));
    doc.fragments.values().fold(operations, |n, f| n.saturating_add(walk(&f.node.selection_set.node)))
}

fn bearer(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}

/// `None` when the body is not a JSON object (graphene answers "POST body sent invalid JSON.").
fn parse(body: &[u8]) -> Option<GqlBody> {
    let serde_json::Value::Object(mut members) = serde_json::from_slice(body).ok()? else {
        return None;
    };
    let query = match members.remove("query") {
        Some(serde_json::Value::String(query)) => Some(query),
        _ => None,
    };
    let operation_name = match members.remove("operationName") {
        Some(serde_json::Value::String(name)) => Some(name),
        _ => None,
    };
    let variables = members.remove("variables").unwrap_or(serde_json::Value::Null);
    Some(GqlBody { query, operation_name, variables })
}

/// Variables as a JSON object (or null); graphene also accepts them as a JSON text in a string.
fn variables(value: serde_json::Value) -> Option<serde_json::Value> {
    match value {
        serde_json::Value::Null | serde_json::Value::Object(_) => Some(value),
        serde_json::Value::String(text) => match serde_json::from_str(&text).ok()? {
            parsed @ (serde_json::Value::Null | serde_json::Value::Object(_)) => Some(parsed),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_graphql::{PathSegment, ServerError, Value};

    fn body_json(response: &Response<RespBody>) -> serde_json::Value {
        serde_json::from_slice(response.body().bytes().unwrap()).unwrap()
    }

    #[test]
    fn resolver_errors_keep_data_and_status_200() {
        let mut error = ServerError::new("boom", None);
        error.path = vec![PathSegment::Field("ping".to_owned())];
        let mut response =
            async_graphql::Response::new(Value::from_json(serde_json::json!({"ping": null})).unwrap());
        response.errors = vec![error];
        let http = graphql_response(&response);
        assert_eq!(http.status(), StatusCode::OK);
        let body = body_json(&http);
        assert_eq!(body["data"], serde_json::json!({"ping": null}));
        assert_eq!(body["errors"][0]["path"], serde_json::json!(["ping"]));
    }

    #[test]
    fn pathless_errors_are_400_without_data() {
        let response = async_graphql::Response::from_errors(vec![ServerError::new("bad", None)]);
        let http = graphql_response(&response);
        assert_eq!(http.status(), StatusCode::BAD_REQUEST);
        assert_eq!(body_json(&http), serde_json::json!({"errors": [{"message": "bad"}]}));
    }

    #[test]
    fn counts_aliases_in_operations_and_fragments() {
        assert_eq!(count_aliases("{ a: finding(id: 1) { id } b: finding(id: 2) { t: title } }"), 3);
        assert_eq!(count_aliases("query { ...F } fragment F on Query { x: ping }"), 1);
        assert_eq!(count_aliases("{ ping }"), 0);
        assert_eq!(count_aliases("{ unbalanced"), 0);
    }

    #[test]
    fn bearer_scheme() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer"), None);
    }
}
