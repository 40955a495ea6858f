//! The operation catalog: every query and mutation of the spec as data (name, kind, arguments,
//! result, default selection, deprecation successor, retry class), and the one function that turns
//! an entry plus the caller's arguments into a checked GraphQL request.
//!
//! The typed Python methods and their signatures are generated from this table
//! (`scripts/gen_operations.py`), and a test regenerates them to prove they have not drifted.
//!
//! Argument names and types, and the fields of input objects, are generated from the one schema
//! file (`schema/schema.graphql`, by `scripts/gen_schema_tables.py` into `schema_tables.rs`): the
//! spec names the operations but shows the arguments of `finding` only, so the schema the
//! emulator serves is the model. Default selections ask only for fields
//! the spec or the service fact sheet document, because the production schema may differ from the
//! emulator's and one unknown field fails the whole request; everything else is opt-in (`fields=`).
//! For mutation results that is `ok`, the one result field the fact sheet shows (6.4).
//!
//! Every mutation has the retry class `Mutation`: it is resent only when the server cannot have
//! processed it (no connection, 429), never after a 5xx or a broken connection.

mod filters;
mod findings;
mod resources;
mod rules;
mod schema_tables;
mod scopes;
mod sla;
mod types;

use serde_json::{Map, Value};

use super::error::{Error, Result};
use super::graphql::OperationKind;
use super::scalars::{is_aware_datetime, INT_MAX};
pub(crate) use types::{Arg, Operation, Returns};

const GROUPS: [&[Operation]; 6] = [
    findings::OPERATIONS,
    filters::OPERATIONS,
    resources::OPERATIONS,
    scopes::OPERATIONS,
    rules::OPERATIONS,
    sla::OPERATIONS,
];

/// Every operation, queries first, each group in name order.
pub(crate) fn catalog() -> Vec<&'static Operation> {
    let mut all: Vec<&'static Operation> = GROUPS.iter().flat_map(|g| g.iter()).collect();
    all.sort_by_key(|op| (op.kind != OperationKind::Query, op.name));
    all
}

/// The entry for `name`.
pub(crate) fn find(name: &str) -> Result<&'static Operation> {
    GROUPS
        .iter()
        .flat_map(|g| g.iter())
        .find(|op| op.name == name)
        .ok_or_else(|| Error::validation(format!("no operation named {name:?} in the catalog")))
}

/// The input objects the client checks field by field, generated from the schema.
/// `JSONText` is a String on the wire holding JSON: a non-string value is serialized for the caller.
pub(crate) use schema_tables::INPUT_OBJECTS;

const SCALARS: &[&str] = &[
    "ID",
    "String",
    "Int",
    "Float",
    "Boolean",
    "DateTime",
    "Date",
    "JSONString",
    "JSONText",
    "GenericScalar",
];

/// How a type name is handled when a value is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TypeKind {
    Scalar,
    Input(&'static [Arg]),
    Enum,
}

/// Scalars by name, the modelled input objects, and every other name is an enum.
pub(crate) fn type_kind(name: &str) -> TypeKind {
    if SCALARS.contains(&name) {
        return TypeKind::Scalar;
    }
    match INPUT_OBJECTS.iter().find(|(n, _)| *n == name) {
        Some((_, fields)) => TypeKind::Input(fields),
        None => TypeKind::Enum,
    }
}

/// A type text split into its wrappers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty<'a> {
    NonNull(&'a str),
    List(&'a str),
    Named(&'a str),
}

fn split_type(text: &str) -> Ty<'_> {
    if let Some(inner) = text.strip_suffix('!') {
        Ty::NonNull(inner)
    } else if let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        Ty::List(inner)
    } else {
        Ty::Named(text)
    }
}

#[cfg(test)]
/// The type name inside the wrappers (`"[SLARuleInput!]!"` -> `"SLARuleInput"`).
pub(crate) fn base_type(text: &str) -> &str {
    text.trim_matches(|c| c == '[' || c == ']' || c == '!')
}

pub(crate) fn is_required(text: &str) -> bool {
    text.ends_with('!')
}

use super::suggest::closest;

fn hint(name: &str, candidates: &[Arg]) -> String {
    match closest(name, candidates.iter().map(|a| a.name)) {
        Some(c) => format!(" (did you mean {c:?}?)"),
        None => {
            let names: Vec<&str> = candidates.iter().map(|a| a.name).collect();
            format!("; expected one of: {}", names.join(", "))
        }
    }
}

/// Checks one value against a type text and returns it in wire form (JSON text serialized,
/// a single value for a list wrapped). `path` names the value in error messages.
pub(crate) fn coerce(path: &str, ty: &str, value: Value) -> Result<Value> {
    let bad = |what: String| Err(Error::validation(format!("{path} ({ty}) {what}")));
    match split_type(ty) {
        Ty::NonNull(_) if value.is_null() => bad("must not be None".into()),
        Ty::NonNull(inner) => coerce(path, inner, value),
        _ if value.is_null() => Ok(Value::Null),
        Ty::List(inner) => match value {
            Value::Array(items) => items
                .into_iter()
                .enumerate()
                .map(|(i, v)| coerce(&format!("{path}[{i}]"), inner, v))
                .collect::<Result<Vec<_>>>()
                .map(Value::Array),
            // GraphQL input coercion: one value stands for a one-item list.
            single => Ok(Value::Array(vec![coerce(path, inner, single)?])),
        },
        Ty::Named(name) => match (type_kind(name), name, value) {
            (TypeKind::Scalar, "Int", Value::Number(n)) => match n.as_i64() {
                Some(i) if (-INT_MAX..=INT_MAX).contains(&i) => Ok(Value::Number(n)),
                _ if n.is_f64() => bad(format!("must be a whole number, got {n}")),
                _ => bad(format!("is outside the Int range -(2**31 - 1) .. 2**31 - 1: {n}")),
            },
            (TypeKind::Scalar, "Int", v) => bad(format!("must be an int, got {}", kind_of(&v))),
            (TypeKind::Scalar, "Float", v @ Value::Number(_)) => Ok(v),
            (TypeKind::Scalar, "Float", v) => bad(format!("must be a number, got {}", kind_of(&v))),
            (TypeKind::Scalar, "Boolean", v @ Value::Bool(_)) => Ok(v),
            (TypeKind::Scalar, "Boolean", v) => bad(format!("must be a bool, got {}", kind_of(&v))),
            (TypeKind::Scalar, "ID", v @ Value::String(_)) => Ok(v),
            (TypeKind::Scalar, "ID", Value::Number(n)) if n.is_i64() || n.is_u64() => Ok(Value::Number(n)),
            (TypeKind::Scalar, "ID", v) => bad(format!("must be a str or an int, got {}", kind_of(&v))),
            (TypeKind::Scalar, "String", v @ Value::String(_)) => Ok(v),
            (TypeKind::Scalar, "String", v) => bad(format!("must be a str, got {}", kind_of(&v))),
            (TypeKind::Scalar, "DateTime" | "Date", Value::String(s)) if is_aware_datetime(&s) => {
                Ok(Value::String(s))
            }
            (TypeKind::Scalar, "DateTime" | "Date", Value::String(s)) => bad(format!(
                "must be a date or a timezone-aware datetime (e.g. datetime.now(timezone.utc)), got {s:?}"
            )),
            (TypeKind::Scalar, "DateTime" | "Date", v) => {
                bad(format!("must be a datetime or an ISO 8601 string, got {}", kind_of(&v)))
            }
            // JSON carried in a string: the caller may give the structure itself.
            (TypeKind::Scalar, "JSONString" | "JSONText", v @ Value::String(_)) => {
                if let Value::String(s) = &v {
                    if serde_json::from_str::<Value>(s).is_err() {
                        return bad("is a str that is not valid JSON".into());
                    }
                }
                Ok(v)
            }
            (TypeKind::Scalar, "JSONString" | "JSONText", v) => serde_json::to_string(&v)
                .map(Value::String)
                .or_else(|e| bad(format!("cannot be encoded as JSON: {e}"))),
            (TypeKind::Scalar, _, v) => Ok(v),
            (TypeKind::Enum, _, v @ Value::String(_)) => Ok(v),
            (TypeKind::Enum, _, v) => bad(format!("must be an enum value (str), got {}", kind_of(&v))),
            (TypeKind::Input(fields), _, Value::Object(map)) => {
                let mut out = Map::with_capacity(map.len());
                for (k, v) in map {
                    let Some(field) = fields.iter().find(|f| f.name == k) else {
                        return bad(format!("has no field {k:?}{}", hint(&k, fields)));
                    };
                    let v = coerce(&format!("{path}.{k}"), field.ty, v)?;
                    out.insert(k, v);
                }
                Ok(Value::Object(out))
            }
            (TypeKind::Input(_), _, v) => bad(format!("must be a dict, got {}", kind_of(&v))),
        },
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "None",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// Checks a caller's selection text (`fields=`): it must stay inside the field's braces.
fn check_selection(op: &str, fields: &str) -> Result<()> {
    if fields.trim().is_empty() {
        return Err(Error::validation(format!(
            "{op}(fields=...) is empty: name at least one field, e.g. fields=\"id\""
        )));
    }
    // Read by the one GraphQL front end, as it will sit in the document (inside braces): unbalanced
    // braces, parentheses or quotes, a comment that swallows the rest, or text that closes the
    // selection and goes on are refused.
    super::gql::selection(fields).map(|_| ()).map_err(|e| {
        Error::validation(format!(
            "{op}(fields=...) has unbalanced braces, parentheses or quotes, or is not a selection: {e}"
        ))
    })
}

/// A checked request for one catalog operation.
#[derive(Clone, Debug)]
pub(crate) struct Built {
    pub operation: &'static Operation,
    pub query: String,
    pub variables: Map<String, Value>,
}

/// Turns the caller's arguments into the document and variables for `op`.
///
/// `args` are keyword arguments by GraphQL name; `None` (null) means "not given". A connection
/// also takes `after` (the cursor to resume from); `first` is the paginator's business.
pub(crate) fn build(op: &'static Operation, args: Map<String, Value>, fields: Option<&str>) -> Result<Built> {
    let selection = match fields {
        Some(f) => {
            if matches!(op.returns, Returns::Scalar(_)) {
                return Err(Error::validation(format!(
                    "{}() returns a {} (no fields to select): do not pass fields=",
                    op.name,
                    op.returns.type_name()
                )));
            }
            check_selection(op.name, f)?;
            f
        }
        None => op.selection,
    };
    let connection = op.is_connection();
    let mut variables = Map::with_capacity(args.len() + 2);
    for (name, value) in args {
        if connection && name == "after" {
            variables.insert(name, coerce("after", "String", value)?);
            continue;
        }
        let Some(a) = op.args.iter().find(|a| a.name == name) else {
            return Err(Error::validation(format!(
                "{}() got an unexpected argument {name:?}{}",
                op.name,
                hint(&name, op.args)
            )));
        };
        if value.is_null() && !is_required(a.ty) {
            continue;
        }
        variables.insert(name, coerce(a.name, a.ty, value)?);
    }
    if let Some(missing) = op.args.iter().find(|a| is_required(a.ty) && !variables.contains_key(a.name)) {
        return Err(Error::validation(format!(
            "{}() missing required argument {:?} ({})",
            op.name, missing.name, missing.ty
        )));
    }

    let mut decls: Vec<String> = Vec::new();
    let mut passes: Vec<String> = Vec::new();
    for a in op.args.iter().filter(|a| variables.contains_key(a.name)) {
        decls.push(format!("${}: {}", a.name, a.ty));
        passes.push(format!("{0}: ${0}", a.name));
    }
    if connection {
        decls.push("$first: Int".into());
        decls.push("$after: String".into());
        passes.push("first: $first".into());
        passes.push("after: $after".into());
    }
    let kind = match op.kind {
        OperationKind::Mutation => "mutation",
        OperationKind::Query | OperationKind::Subscription => "query",
    };
    let mut query = String::with_capacity(128 + selection.len());
    query.push_str(kind);
    query.push(' ');
    query.push_str(op.name);
    if !decls.is_empty() {
        query.push('(');
        query.push_str(&decls.join(", "));
        query.push(')');
    }
    query.push_str(" { ");
    query.push_str(op.name);
    if !passes.is_empty() {
        query.push('(');
        query.push_str(&passes.join(", "));
        query.push(')');
    }
    match op.returns {
        Returns::Scalar(_) => {}
        Returns::Object(_) => {
            query.push_str(" { ");
            query.push_str(selection);
            query.push_str(" }");
        }
        Returns::Connection(_) => {
            // Edge cursors let a paginator resume after the last item handed out, mid-page too.
            query.push_str(" { edges { cursor node { ");
            query.push_str(selection);
            query.push_str(" } } pageInfo { hasNextPage endCursor } }");
        }
    }
    query.push_str(" }");
    Ok(Built { operation: op, query, variables })
}

#[cfg(test)]
mod tests {
    use super::types::{FINDINGS_VIEW_FIELDS, FINDING_FIELDS};
    use super::*;
    use crate::core::graphql::{prepare, select_operation};
    use crate::core::retry::RetryClass;
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn catalog_has_13_queries_and_32_mutations_with_unique_names() {
        let all = catalog();
        assert_eq!(all.iter().filter(|o| o.kind == OperationKind::Query).count(), 13);
        assert_eq!(all.iter().filter(|o| o.kind == OperationKind::Mutation).count(), 32);
        let mut names: Vec<_> = all.iter().map(|o| o.name).collect();
        names.dedup();
        assert_eq!(names.len(), 45);
        for op in all.iter().filter(|o| o.kind == OperationKind::Mutation) {
            assert_eq!(op.retry, RetryClass::Mutation, "{} must not be resent", op.name);
            assert_eq!(op.selection, "ok", "{}: only `ok` is documented for mutation results", op.name);
        }
        let deprecated: Vec<_> = all.iter().filter_map(|o| o.deprecated.map(|s| (o.name, s))).collect();
        assert_eq!(deprecated.len(), 4);
        for (old, new) in deprecated {
            assert!(find(new).is_ok(), "{old} -> {new}");
        }
    }

    #[test]
    fn every_entry_builds_a_document_the_scanner_accepts() {
        for op in catalog() {
            let mut a = Map::new();
            for arg in op.args.iter().filter(|a| is_required(a.ty)) {
                let v = match base_type(arg.ty) {
                    "ID" => json!("U2NvcmluZ1J1bGU6MQ=="),
                    "String" => json!("x"),
                    "Boolean" => json!(true),
                    "DateTime" => json!("2026-01-01T00:00:00+00:00"),
                    "JSONString" => json!({"field": "id", "condition": "in", "value": [1]}),
                    "SLARuleInput" => json!({"severity": 3, "days": 7}),
                    t if matches!(type_kind(t), TypeKind::Input(_)) => json!({"name": "n"}),
                    _ => json!("DAY"),
                };
                a.insert(arg.name.into(), v);
            }
            let built = build(op, a, None).unwrap_or_else(|e| panic!("{}: {e}", op.name));
            let info = select_operation(&built.query, None).unwrap();
            assert_eq!(info.kind, op.kind, "{}", op.name);
            assert_eq!(info.name.as_deref(), Some(op.name));
            assert!(prepare(&built.query, Some(&built.variables), None).is_ok(), "{}", built.query);
            for arg in op.args.iter().filter(|a| is_required(a.ty)) {
                assert!(built.query.contains(&format!("${}: {}", arg.name, arg.ty)), "{}", built.query);
            }
        }
    }

    #[test]
    fn builds_a_connection_query_with_only_the_given_arguments() {
        let op = find("findings_view").unwrap();
        let b = build(op, args(json!({"sort": "SCORE_DESC", "filters_config": null, "after": "c1"})), None)
            .unwrap();
        assert_eq!(
            b.query,
            format!(
                "query findings_view($sort: [FindingsViewSortEnum], $first: Int, $after: String) {{ \
                 findings_view(sort: $sort, first: $first, after: $after) {{ edges {{ cursor node {{ {FINDINGS_VIEW_FIELDS} }} }} \
                 pageInfo {{ hasNextPage endCursor }} }} }}"
            )
        );
        assert_eq!(b.variables, args(json!({"sort": ["SCORE_DESC"], "after": "c1"})));
    }

    #[test]
    fn finding_asks_exactly_for_the_spec_table() {
        let b = build(find("finding").unwrap(), args(json!({"id": 7})), None).unwrap();
        assert_eq!(b.query, format!("query finding($id: ID!) {{ finding(id: $id) {{ {FINDING_FIELDS} }} }}"));
        let b =
            build(find("finding").unwrap(), args(json!({"id": "RmluZGluZzo3"})), Some("id title")).unwrap();
        assert!(b.query.ends_with("{ finding(id: $id) { id title } }"));
    }

    #[test]
    fn rejects_bad_arguments_before_sending() {
        let err = |name: &str, a: Value| build(find(name).unwrap(), args(a), None).unwrap_err().to_string();
        assert!(err("finding", json!({})).contains("missing required argument \"id\""));
        assert!(err("finding", json!({"id": null})).contains("must not be None"));
        assert!(err("finding", json!({"idd": 1})).contains("did you mean \"id\""));
        assert!(err("finding", json!({"id": 1.5})).contains("str or an int"));
        assert!(err("activate_scoring_rule", json!({"id": 1, "active": "yes"})).contains("must be a bool"));
        assert!(err("add_sla_group", json!({"name": "g", "priority": 1_i64 << 40})).contains("Int range"));
        assert!(
            err("add_scoring_rule", json!({"scoring_rule": {"nmae": "x"}})).contains("did you mean \"name\"")
        );
        assert!(err("add_scoring_rule", json!({"scoring_rule": {"value": "high"}}))
            .contains("scoring_rule.value"));
        assert!(err("findings_view", json!({"filters_config": {"filterjson": "{}"}}))
            .contains("did you mean \"filtersjson\""));
        assert!(err("findings_view", json!({"filters_config": {"filtersjson": "{not json"}}))
            .contains("not valid JSON"));
        assert!(err("set_user_sla_and_comment", json!({"due_date": "2026-01-01T00:00:00", "comment": "c"}))
            .contains("timezone-aware"));
        assert!(err("findings_view", json!({"sort": 3})).contains("enum value"));
        let e = build(
            find("trends").unwrap(),
            args(json!({"time_scale": "DAY", "aggregate_function": "COUNT"})),
            Some("x"),
        );
        assert!(e.unwrap_err().to_string().contains("do not pass fields="));
        assert!(find("nope").is_err());
    }

    #[test]
    fn serializes_json_given_as_structures() {
        let tree = json!({"operator": "and", "operands": [{"field": "severity", "condition": "in", "value": ["4"]}]});
        let b = build(
            find("findings_view").unwrap(),
            args(json!({"filters_config": {"filtersjson": tree}})),
            None,
        )
        .unwrap();
        let text = b.variables["filters_config"]["filtersjson"].as_str().unwrap();
        assert_eq!(serde_json::from_str::<Value>(text).unwrap(), tree);
        let b = build(
            find("new_finding_filter").unwrap(),
            args(json!({"name": "n", "filter": {"field": "id", "condition": "in", "value": [1]}})),
            None,
        )
        .unwrap();
        assert!(b.variables["filter"].is_string());
        let b = build(
            find("update_sla_settings_v2").unwrap(),
            args(json!({"sla_settings": {"severity": 3, "days": 5, "filters_config": {"filtersjson": {"a": 1}}}})),
            None,
        )
        .unwrap();
        assert_eq!(b.variables["sla_settings"][0]["filters_config"]["filtersjson"], "{\"a\":1}");
    }

    #[test]
    fn checks_selections() {
        let op = find("finding").unwrap();
        for bad in ["", "  ", "id } mutation { x", "id { title", "id # c", "a(b: \"x)"] {
            assert!(build(op, args(json!({"id": 1})), Some(bad)).is_err(), "{bad}");
        }
        assert!(build(op, args(json!({"id": 1})), Some("id d: description(f: \"}\")")).is_ok());
    }
}
