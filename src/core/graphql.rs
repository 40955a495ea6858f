//! GraphQL request and response envelopes, and the checks made before anything is sent.
//!
//! Documents are read by the core's one GraphQL front end (`gql`, async-graphql-parser), which
//! remembers what it read per document text: each operation's kind, name and variables.

use serde_json::{Map, Value};

use super::error::{Error, Result};
use super::retry::RetryClass;

pub(crate) use super::scalars::INT_MAX;

pub(crate) use super::gql::{OperationInfo, OperationKind, TypeRef};

/// Picks the operation that will run: the named one, or the only one.
pub(crate) fn select_operation(doc: &str, operation_name: Option<&str>) -> Result<OperationInfo> {
    let ops = super::gql::operations(doc)?;
    if ops.is_empty() {
        return Err(Error::validation(
            "query contains no operation (expected `query`, `mutation` or `{ ... }`)",
        ));
    }
    match operation_name {
        Some(name) => ops.iter().find(|o| o.name.as_deref() == Some(name)).cloned().ok_or_else(|| {
            Error::validation(format!("operation_name {name:?} is not an operation of the query"))
        }),
        None if ops.len() == 1 => ops.first().cloned().ok_or_else(|| Error::validation("no operation")),
        None => Err(Error::validation("query has several operations: pass operation_name to choose one")),
    }
}

fn check_value(name: &str, ty: &TypeRef, value: &Value) -> Result<()> {
    let bad = |what: &str| Err(Error::validation(format!("variable ${name} ({}) {what}", ty.render())));
    match (ty, value) {
        (TypeRef::NonNull(_), Value::Null) => bad("must not be null"),
        (TypeRef::NonNull(inner), v) => check_value(name, inner, v),
        (_, Value::Null) => Ok(()),
        (TypeRef::List(inner), Value::Array(items)) => {
            items.iter().try_for_each(|v| check_value(name, inner, v))
        }
        // GraphQL coerces a single value to a one-item list.
        (TypeRef::List(inner), v) => check_value(name, inner, v),
        (TypeRef::Named(n), v) => match (n.as_str(), v) {
            ("Int", Value::Number(num)) => match num.as_i64() {
                Some(i) if (-INT_MAX..=INT_MAX).contains(&i) => Ok(()),
                _ if num.is_f64() => bad(&format!("must be a whole number, got {num}")),
                _ => bad(&format!("is outside the Int range -(2**31 - 1) .. 2**31 - 1: {num}")),
            },
            ("Int", _) => bad("must be an int"),
            ("Float", Value::Number(_)) => Ok(()),
            ("Float", _) => bad("must be a number"),
            ("ID", Value::String(_)) => Ok(()),
            ("ID", Value::Number(num)) if num.is_i64() || num.is_u64() => Ok(()),
            ("ID", _) => bad("must be a str or an int"),
            ("String", Value::String(_)) => Ok(()),
            ("String", _) => bad("must be a str"),
            ("Boolean", Value::Bool(_)) => Ok(()),
            ("Boolean", _) => bad("must be a bool"),
            ("DateTime", Value::String(t)) if !super::scalars::is_aware_datetime(t) => bad(&format!(
                "must be a timezone-aware ISO 8601 date-time that exists (with Z or +HH:MM), got {:?}",
                t.chars().take(40).collect::<String>()
            )),
            _ => Ok(()),
        },
    }
}

/// Checks the variables against the operation's declarations, before anything is sent: every
/// variable given is declared, every required one (non-null, no default) is given, and each
/// value fits its type.
pub(crate) fn check_variables(op: &OperationInfo, variables: &Map<String, Value>) -> Result<()> {
    let declared = || {
        if op.variables.is_empty() {
            "the operation declares no variables".to_string()
        } else {
            let list: Vec<String> =
                op.variables.iter().map(|(n, t)| format!("${n}: {}", t.render())).collect();
            format!("the operation declares {}", list.join(", "))
        }
    };
    for name in variables.keys() {
        if !op.variables.iter().any(|(n, _)| n == name) {
            let hint = super::suggest::closest(name, op.variables.iter().map(|(n, _)| n.as_str()))
                .map(|c| format!(" (did you mean ${c}?)"))
                .unwrap_or_default();
            let shown: String = name.chars().take(64).collect();
            return Err(Error::validation(format!(
                "variable ${shown} is not declared{hint}; {}",
                declared()
            )));
        }
    }
    for (name, ty) in &op.variables {
        match variables.get(name) {
            Some(v) => check_value(name, ty, v)?,
            None if matches!(ty, TypeRef::NonNull(_)) && !op.defaulted.contains(name) => {
                return Err(Error::validation(format!(
                    "variable ${name} ({}) is required and was not given (it is non-null and has no default)",
                    ty.render()
                )));
            }
            None => {}
        }
    }
    Ok(())
}

/// A request ready to send: the serialized body and what retrying needs to know.
#[derive(Clone, Debug)]
pub struct PreparedRequest {
    pub body: bytes::Bytes,
    pub operation: OperationInfo,
    pub label: String,
    /// From the operation's kind; a catalog entry may mark a mutation as safe to resend.
    pub retry: RetryClass,
}

/// Validates and serializes `{query, variables, operationName}`.
pub(crate) fn prepare(
    query: &str,
    variables: Option<&Map<String, Value>>,
    operation_name: Option<&str>,
) -> Result<PreparedRequest> {
    if query.trim().is_empty() {
        return Err(Error::validation("query is empty"));
    }
    let operation = select_operation(query, operation_name)?;
    let empty = Map::new();
    let vars = variables.unwrap_or(&empty);
    check_variables(&operation, vars)?;
    let op_name = operation_name.map(str::to_string).or_else(|| operation.name.clone());
    let mut body = Map::with_capacity(3);
    body.insert("query".into(), Value::String(query.to_string()));
    body.insert("variables".into(), Value::Object(vars.clone()));
    if let Some(n) = &op_name {
        body.insert("operationName".into(), Value::String(n.clone()));
    }
    let bytes = serde_json::to_vec(&Value::Object(body))
        .map_err(|e| Error::validation(format!("variables cannot be encoded as JSON: {e}")))?;
    let label = op_name.unwrap_or_else(|| "anonymous".to_string());
    let retry = operation.retry_class();
    Ok(PreparedRequest { body: bytes.into(), operation, label, retry })
}

/// A response body's `data` and `errors`, as sent (an error when it is not a GraphQL answer).
pub(crate) fn envelope(body: &[u8]) -> Result<(Option<Value>, Vec<Value>)> {
    #[derive(serde::Deserialize)]
    struct Envelope {
        #[serde(default)]
        data: Option<Value>,
        #[serde(default)]
        errors: Option<Vec<Value>>,
    }
    let env: Envelope = serde_json::from_slice(body).map_err(|e| {
        Error::Transport(format!("the response body is not the JSON a GraphQL server sends ({e})"))
    })?;
    Ok((env.data, env.errors.unwrap_or_default()))
}

/// Splits a response body into data or a GraphQL error, keeping partial data with the errors.
pub(crate) fn decode_response(body: &[u8]) -> Result<Value> {
    let (data, errors) = envelope(body)?;
    if !errors.is_empty() {
        return Err(Error::graphql(errors, data.filter(|d| !d.is_null())));
    }
    match data {
        Some(data @ Value::Object(_)) => Ok(data),
        other => Err(bad_data(other.as_ref())),
    }
}

/// The error for an answer whose `data` is not an object although it carries no `errors`.
pub(crate) fn bad_data(data: Option<&Value>) -> Error {
    let what = match data {
        None => "has neither data nor errors",
        Some(Value::Null) => "has data null and no errors",
        Some(Value::Array(_)) => "has data that is a list, not an object",
        Some(Value::String(_)) => "has data that is a string, not an object",
        Some(_) => "has data that is not an object",
    };
    Error::Transport(format!("the response {what}; it is not a GraphQL answer"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn scans_kinds_names_and_variables() {
        let doc = r#"
            # a comment with query mutation { }
            query Finding($id: ID!, $first: Int = 10, $tags: [String!]) {
              finding(id: $id) { title description(format: "} {") }
            }
            fragment F on Finding { id }
            mutation AddRule($rule: ScoringRuleInput!) { add_scoring_rule(rule: $rule) { ok } }
        "#;
        let ops = crate::core::gql::operations(doc).unwrap();
        assert_eq!(ops.len(), 2);
        assert_eq!(ops[0].kind, OperationKind::Query);
        assert_eq!(ops[0].name.as_deref(), Some("Finding"));
        assert_eq!(
            ops[0].variables,
            vec![
                ("id".into(), TypeRef::NonNull(Box::new(TypeRef::Named("ID".into())))),
                ("first".into(), TypeRef::Named("Int".into())),
                (
                    "tags".into(),
                    TypeRef::List(Box::new(TypeRef::NonNull(Box::new(TypeRef::Named("String".into())))))
                ),
            ]
        );
        assert_eq!(ops[1].kind, OperationKind::Mutation);
        assert_eq!(ops[1].retry_class(), RetryClass::Mutation);
        assert_eq!(select_operation("{ finding(id: 1) { id } }", None).unwrap().kind, OperationKind::Query);
    }

    #[test]
    fn comments_end_at_any_line_terminator_and_block_strings_escape_only_triple_quotes() {
        // graphql-core reads this as a mutation: the comment ends at \r.
        let doc = "#\rmutation Q { a(note: \"\"\"\nquery Q { x }\n\"\"\") { ok } }";
        assert_eq!(select_operation(doc, None).unwrap().kind, OperationKind::Mutation);
        // `\\"""` does not end a block string: the backslash before `"""` escapes it.
        let doc = "query Q { a(t: \"\"\"\\\\\"\"\" mutation M { b } \"\"\") }";
        let ops = crate::core::gql::operations(doc).unwrap();
        assert_eq!(ops.len(), 1, "{ops:?}");
        assert_eq!(ops[0].kind, OperationKind::Query);
    }

    #[test]
    fn naive_datetime_strings_are_refused_for_declared_datetimes() {
        let op = select_operation("query Q($t: DateTime, $s: String) { a }", None).unwrap();
        assert!(check_variables(&op, &vars(json!({"t": "2024-01-01T00:00:00Z"}))).is_ok());
        assert!(check_variables(&op, &vars(json!({"t": "2024-01-01T00:00:00+02:00"}))).is_ok());
        let e = check_variables(&op, &vars(json!({"t": "2024-01-01T00:00:00"}))).unwrap_err();
        assert!(e.to_string().contains("timezone-aware"), "{e}");
        assert!(check_variables(&op, &vars(json!({"s": "2024-01-01T00:00:00"}))).is_ok());
    }

    #[test]
    fn deep_list_types_do_not_exhaust_the_stack() {
        let doc = format!("query Q($x: {}Int{}) {{ a }}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(matches!(select_operation(&doc, None), Err(Error::Validation(_))));
        let ok = format!("query Q($x: {}Int{}) {{ a }}", "[".repeat(32), "]".repeat(32));
        assert_eq!(select_operation(&ok, None).unwrap().variables.len(), 1);
    }

    #[test]
    fn required_and_undeclared_variables_are_refused() {
        let op = select_operation("query Q($id: ID!, $n: Int! = 3, $s: String) { a }", None).unwrap();
        assert_eq!(op.defaulted, vec!["n".to_string()]);
        let e = check_variables(&op, &vars(json!({}))).unwrap_err().to_string();
        assert!(e.contains("$id (ID!) is required"), "{e}");
        let e = check_variables(&op, &vars(json!({"idd": 1}))).unwrap_err().to_string();
        assert!(e.contains("$idd is not declared (did you mean $id?)"), "{e}");
        assert!(e.contains("$id: ID!, $n: Int!, $s: String"), "{e}");
        assert!(check_variables(&op, &vars(json!({"id": 1}))).is_ok());
        let e =
            check_variables(&select_operation("{ a }", None).unwrap(), &vars(json!({"x": 1}))).unwrap_err();
        assert!(e.to_string().contains("declares no variables"), "{e}");
        // A default written as a list or an object is skipped over.
        let op =
            select_operation("query Q($l: [Int!]! = [1, 2], $o: In! = {a: {b: 1}}, $id: ID!) { a }", None)
                .unwrap();
        assert_eq!(op.defaulted, vec!["l".to_string(), "o".to_string()]);
        assert!(check_variables(&op, &vars(json!({"id": "1"}))).is_ok());
    }

    #[test]
    fn selects_the_operation() {
        let doc = "query A { a } query B { b }";
        assert_eq!(select_operation(doc, Some("B")).unwrap().name.as_deref(), Some("B"));
        assert!(select_operation(doc, None).unwrap_err().to_string().contains("operation_name"));
        assert!(select_operation(doc, Some("C")).is_err());
        assert!(select_operation("fragment F on X { a }", None).is_err());
    }

    #[test]
    fn checks_int_range_and_types() {
        let op = select_operation("query Q($n: Int, $id: ID!, $f: Float, $l: [Int!]) { a }", None).unwrap();
        let ok = |v: Value| check_variables(&op, &vars(v));
        assert!(ok(json!({"n": INT_MAX, "id": "RmluZGluZzox"})).is_ok());
        assert!(ok(json!({"n": -INT_MAX, "id": 12})).is_ok());
        assert!(ok(json!({"n": INT_MAX + 1, "id": 1})).unwrap_err().to_string().contains("Int range"));
        assert!(ok(json!({"n": -INT_MAX - 1, "id": 1})).is_err());
        assert!(ok(json!({"n": 1.5, "id": 1})).unwrap_err().to_string().contains("whole number"));
        assert!(ok(json!({"id": 1.5})).unwrap_err().to_string().contains("str or an int"));
        assert!(ok(json!({"id": null})).unwrap_err().to_string().contains("null"));
        assert!(ok(json!({"id": 1, "l": [1, 2, 3_000_000_000_i64]})).is_err());
        assert!(ok(json!({"id": 1, "f": "x"})).is_err());
    }

    #[test]
    fn prepares_body_with_operation_name() {
        let p = prepare("query Q($id: ID!) { finding(id: $id) { id } }", Some(&vars(json!({"id": 5}))), None)
            .unwrap();
        let body: Value = serde_json::from_slice(&p.body).unwrap();
        assert_eq!(body["operationName"], "Q");
        assert_eq!(body["variables"]["id"], 5);
        assert_eq!(p.label, "Q");
        assert!(prepare("  ", None, None).is_err());
    }

    #[test]
    fn decodes_data_errors_and_garbage() {
        assert_eq!(decode_response(br#"{"data":{"a":1}}"#).unwrap(), json!({"a":1}));
        match decode_response(br#"{"data":{"a":null},"errors":[{"message":"boom","path":["a"]}]}"#) {
            Err(Error::GraphQL { errors, data, message, not_found }) => {
                assert!(!not_found);
                assert_eq!(errors.len(), 1);
                assert_eq!(data, Some(json!({"a": null})));
                assert_eq!(message, "GraphQL error: boom");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            decode_response(br#"{"errors":[{"message":"x"}]}"#),
            Err(Error::GraphQL { data: None, .. })
        ));
        assert!(matches!(decode_response(b"<html>"), Err(Error::Transport(_))));
        for loose in
            [&b"{}"[..], br#"{"data":"hello"}"#, br#"{"data":[1]}"#, br#"{"data":null}"#, b"[]", b"1"]
        {
            assert!(matches!(decode_response(loose), Err(Error::Transport(_))), "{loose:?}");
        }
        assert!(matches!(decode_response(br#"{"errors":[]}"#), Err(Error::Transport(_))));
        assert!(matches!(decode_response(br#"{"data":{"a":"#), Err(Error::Transport(_))));
    }
}
