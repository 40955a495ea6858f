//! The one GraphQL front end of the core: documents, selections and SDL are read by
//! async-graphql-parser (the parser the emulator's engine is built on), not by scanners of our
//! own. What the core needs of a document (each operation's kind, name and variable
//! definitions) is kept per document text, so the per-call path is a lookup.
//!
//! Hostile input is bounded before the parser sees it: nesting deeper than [`MAX_NESTING`]
//! (braces, brackets, parentheses) is refused, so a document of 100,000 `[` cannot exhaust the
//! stack of a recursive parser.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

use async_graphql_parser::types::{
    BaseType, DocumentOperations, OperationDefinition, OperationType, Selection, SelectionSet, Type,
    TypeKind, TypeSystemDefinition,
};
use async_graphql_parser::Positioned;

use super::error::{Error, Result};
use super::retry::RetryClass;

/// The deepest nesting of braces, brackets and parentheses read (documents people write stay
/// far below; the parser's own limit for selection sets is 64 too).
pub(crate) const MAX_NESTING: usize = 64;
/// Documents remembered with what the core needs of them (a program sends a few distinct ones).
const CACHE_ENTRIES: usize = 256;
/// Longer documents are read each time instead of being held in memory.
const CACHE_MAX_TEXT: usize = 16 * 1024;

/// A variable's declared type, as far as the checks need it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TypeRef {
    Named(String),
    List(Box<TypeRef>),
    NonNull(Box<TypeRef>),
}

impl TypeRef {
    pub fn render(&self) -> String {
        match self {
            Self::Named(n) => n.clone(),
            Self::List(t) => format!("[{}]", t.render()),
            Self::NonNull(t) => format!("{}!", t.render()),
        }
    }

    fn of(t: &Type) -> Self {
        let base = match &t.base {
            BaseType::Named(n) => Self::Named(n.to_string()),
            BaseType::List(inner) => Self::List(Box::new(Self::of(inner))),
        };
        if t.nullable {
            base
        } else {
            Self::NonNull(Box::new(base))
        }
    }
}

/// One operation of a document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationInfo {
    pub kind: OperationKind,
    pub name: Option<String>,
    pub variables: Vec<(String, TypeRef)>,
    /// The variables declared with a default value (`$first: Int = 10`).
    pub defaulted: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperationKind {
    Query,
    Mutation,
    Subscription,
}

impl OperationInfo {
    pub fn retry_class(&self) -> RetryClass {
        match self.kind {
            OperationKind::Mutation => RetryClass::Mutation,
            OperationKind::Query | OperationKind::Subscription => RetryClass::Idempotent,
        }
    }

    fn of(name: Option<String>, op: &OperationDefinition) -> Self {
        let kind = match op.ty {
            OperationType::Query => OperationKind::Query,
            OperationType::Mutation => OperationKind::Mutation,
            OperationType::Subscription => OperationKind::Subscription,
        };
        let mut variables = Vec::with_capacity(op.variable_definitions.len());
        let mut defaulted = Vec::new();
        for v in &op.variable_definitions {
            let name = v.node.name.node.to_string();
            if v.node.default_value.is_some() {
                defaulted.push(name.clone());
            }
            variables.push((name, TypeRef::of(&v.node.var_type.node)));
        }
        Self { kind, name, variables, defaulted }
    }
}

/// Refuses text nested deeper than [`MAX_NESTING`], strings and comments skipped.
fn check_nesting(text: &str, what: &str) -> Result<()> {
    let b = text.as_bytes();
    let (mut depth, mut i) = (0usize, 0usize);
    while let Some(&c) = b.get(i) {
        match c {
            b'#' => {
                while b.get(i).is_some_and(|c| *c != b'\n' && *c != b'\r') {
                    i += 1;
                }
            }
            b'"' if b.get(i..i + 3) == Some(b"\"\"\"") => {
                i += 3;
                while i < b.len() && b.get(i..i + 3) != Some(b"\"\"\"") {
                    i += if b.get(i..i + 4) == Some(b"\\\"\"\"") { 4 } else { 1 };
                }
                i += 2;
            }
            b'"' => {
                i += 1;
                while b.get(i).is_some_and(|c| *c != b'"' && *c != b'\n' && *c != b'\r') {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'{' | b'[' | b'(' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(Error::validation(format!(
                        "the {what} nests deeper than {MAX_NESTING} levels of braces, brackets or parentheses"
                    )));
                }
            }
            b'}' | b']' | b')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

type Cache = RwLock<HashMap<Box<str>, Arc<[OperationInfo]>, rustc_hash::FxBuildHasher>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(Cache::default)
}

/// The operations of a document, in document order (the query shorthand `{ ... }` included).
pub(crate) fn operations(doc: &str) -> Result<Arc<[OperationInfo]>> {
    let cached = doc.len() <= CACHE_MAX_TEXT;
    if cached {
        if let Some(hit) = cache().read().ok().and_then(|c| c.get(doc).cloned()) {
            return Ok(hit);
        }
    }
    let ops: Arc<[OperationInfo]> = read_operations(doc)?.into();
    if cached {
        if let Ok(mut c) = cache().write() {
            if c.len() >= CACHE_ENTRIES {
                c.clear();
            }
            c.insert(doc.into(), Arc::clone(&ops));
        }
    }
    Ok(ops)
}

fn read_operations(doc: &str) -> Result<Vec<OperationInfo>> {
    check_nesting(doc, "document")?;
    let parsed = async_graphql_parser::parse_query(doc)
        .map_err(|e| Error::validation(format!("the document is not valid GraphQL: {e}")))?;
    Ok(match parsed.operations {
        DocumentOperations::Single(op) => vec![OperationInfo::of(None, &op.node)],
        DocumentOperations::Multiple(named) => {
            let mut ops: Vec<_> = named.iter().collect();
            ops.sort_by_key(|(_, op)| (op.pos.line, op.pos.column));
            ops.into_iter().map(|(name, op)| OperationInfo::of(Some(name.to_string()), &op.node)).collect()
        }
    })
}

/// One field of a selection set: its name, its alias, and what is selected under it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Selected {
    pub name: String,
    pub alias: Option<String>,
    pub children: Vec<Selected>,
}

impl Selected {
    /// The key the field has in the answer.
    pub(crate) fn key(&self) -> &str {
        self.alias.as_deref().unwrap_or(&self.name)
    }
}

/// Reads a selection set's text (`id title actual_status { category } alias: name(x: 1)`):
/// the fields with their aliases; inline fragments count as their fields, fragment spreads
/// (defined elsewhere) are left out. An error says what does not parse.
pub(crate) fn selection(text: &str) -> Result<Vec<Selected>> {
    check_nesting(text, "selection")?;
    // Read as it will be sent, inside braces: a comment that swallows the closing brace there
    // is an error here too.
    let doc = format!("{{{text}}}");
    let parsed = async_graphql_parser::parse_query(&doc)
        .map_err(|e| Error::validation(format!("not a selection set: {e}")))?;
    match parsed.operations {
        DocumentOperations::Single(op) if parsed.fragments.is_empty() => Ok(fields(&op.node.selection_set)),
        _ => Err(Error::validation("not a selection set: it closes its braces and goes on")),
    }
}

fn fields(set: &Positioned<SelectionSet>) -> Vec<Selected> {
    let mut out = Vec::with_capacity(set.node.items.len());
    for item in &set.node.items {
        match &item.node {
            Selection::Field(f) => out.push(Selected {
                name: f.node.name.node.to_string(),
                alias: f.node.alias.as_ref().map(|a| a.node.to_string()),
                children: fields(&f.node.selection_set),
            }),
            Selection::InlineFragment(frag) => out.extend(fields(&frag.node.selection_set)),
            Selection::FragmentSpread(_) => {}
        }
    }
    out
}

/// One field of an object or interface type of a schema: its named type, and whether it is a list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FieldType {
    pub type_name: String,
    pub list: bool,
}

/// The object and interface types of an SDL document: type -> field -> its type.
pub(crate) fn object_types(sdl: &str) -> Result<HashMap<String, HashMap<String, FieldType>>> {
    check_nesting(sdl, "schema")?;
    let doc = async_graphql_parser::parse_schema(sdl)
        .map_err(|e| Error::validation(format!("the schema is not valid GraphQL SDL: {e}")))?;
    let mut out = HashMap::new();
    for def in doc.definitions {
        let TypeSystemDefinition::Type(t) = def else { continue };
        let defs = match &t.node.kind {
            TypeKind::Object(o) => &o.fields,
            TypeKind::Interface(i) => &i.fields,
            _ => continue,
        };
        let mut fields = HashMap::with_capacity(defs.len());
        for f in defs {
            let ty = &f.node.ty.node;
            let mut inner = ty;
            while let BaseType::List(t) = &inner.base {
                inner = t;
            }
            let type_name = match &inner.base {
                BaseType::Named(n) => n.to_string(),
                BaseType::List(_) => String::new(),
            };
            let list = matches!(ty.base, BaseType::List(_));
            fields.insert(f.node.name.node.to_string(), FieldType { type_name, list });
        }
        out.insert(t.node.name.node.to_string(), fields);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kinds_names_variables_and_defaults() {
        let doc = r#"
            # a comment with query mutation { }
            query Finding($id: ID!, $first: Int = 10, $tags: [String!]) {
              finding(id: $id) { title description(format: "} {") }
            }
            fragment F on Finding { id }
            mutation AddRule($rule: ScoringRuleInput!) { add_scoring_rule(rule: $rule) { ok } }
        "#;
        let ops = operations(doc).unwrap();
        assert_eq!(ops.len(), 2);
        assert_eq!((ops[0].kind, ops[0].name.as_deref()), (OperationKind::Query, Some("Finding")));
        assert_eq!(ops[0].defaulted, vec!["first".to_string()]);
        assert_eq!(ops[0].variables[2].1.render(), "[String!]");
        assert_eq!(ops[1].kind, OperationKind::Mutation);
        assert_eq!(ops[1].retry_class(), RetryClass::Mutation);
        // Remembered: the same text gives the same answer without reading it again.
        assert!(Arc::ptr_eq(&ops, &operations(doc).unwrap()));
        assert_eq!(operations("{ finding(id: 1) { id } }").unwrap()[0].kind, OperationKind::Query);
    }

    #[test]
    fn bad_and_hostile_documents_are_validation_errors() {
        for bad in ["", "query {", "not graphql", "{ a } { b }", "query Q { a } query Q { b }"] {
            assert!(matches!(operations(bad), Err(Error::Validation(_))), "{bad:?}");
        }
        let deep = format!("query Q($a: {}Int{}) {{ a }}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(matches!(operations(&deep), Err(Error::Validation(m)) if m.contains("nests deeper")));
        let deep = format!("{{ {}a{} }}", "b { ".repeat(70), " }".repeat(70));
        assert!(operations(&deep).is_err());
        // Brackets inside strings and comments do not count.
        let doc = format!("query Q {{ a(s: \"{}\") # {}\n }}", "[".repeat(200), "{".repeat(200));
        assert!(operations(&doc).is_ok());
    }

    #[test]
    fn selections_with_aliases_arguments_directives_and_fragments() {
        let s = selection("a b: c(x: 1) { d @include(if: true) e } f ... on T { g }").unwrap();
        let keys: Vec<&str> = s.iter().map(Selected::key).collect();
        assert_eq!(keys, vec!["a", "b", "f", "g"]);
        assert_eq!(s[1].name, "c");
        assert_eq!(s[1].children.len(), 2);
        for bad in ["", "id } mutation { x", "id { title", "id # c", "a(b: \"x)", "a } { b"] {
            assert!(selection(bad).is_err(), "{bad:?}");
        }
        assert!(selection("id d: description(f: \"}\")").is_ok());
    }

    #[test]
    fn object_types_of_an_sdl() {
        let types = object_types(
            "\"\"\"doc { [\"\"\" type T implements N { a: [String!]! b(x: Int): U @deprecated(reason: \"x\") }\n\
             interface N { id: ID! } enum E { X } input I { z: Int }",
        )
        .unwrap();
        assert_eq!(types["T"]["a"], FieldType { type_name: "String".into(), list: true });
        assert_eq!(types["T"]["b"], FieldType { type_name: "U".into(), list: false });
        assert!(types.contains_key("N"));
        assert!(!types.contains_key("E") && !types.contains_key("I"));
    }
}
