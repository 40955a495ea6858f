//! Tests of the columns: layouts, both routes, JSON lines, hostile pages.
use super::*;
use arrow_schema::{DataType, TimeUnit};
use serde_json::Value;

use super::fast::Trie;
use super::layout::schema;
use super::page::{slow_page_batch, wide_int_literal};
use crate::core::gql::selection as parse_selection;
use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, TimestampMicrosecondType};
use arrow_array::Array;
use serde_json::json;

fn page(nodes: Value) -> Vec<u8> {
    let edges: Vec<Value> =
        nodes.as_array().unwrap().iter().map(|n| json!({"cursor": "c", "node": n})).collect();
    serde_json::to_vec(&json!({"data": {"items": {"edges": edges, "pageInfo": {"hasNextPage": false}}}}))
        .unwrap()
}

fn raw_page(body: Vec<u8>) -> RawPage {
    RawPage { body: body.into(), take: usize::MAX, info: Default::default(), path: None }
}

#[test]
fn integers_beyond_64_bits_are_refused_not_rounded() {
    let body = br#"{"data": {"items": {"edges": [{"node": {"s": "99999999999999999999999", "n": 1180591620717411303424}}],
        "pageInfo": {"hasNextPage": false}}}}"#;
    let err = Columnar::new(None).unwrap().batch(&raw_page(body.to_vec())).unwrap_err().to_string();
    assert!(err.contains("1180591620717411303424") && err.contains("\"n\""), "{err}");
    // A float that large, written as a float, is a float.
    let body = br#"{"data": {"items": {"edges": [{"node": {"s": "123456789012345678901", "n": 1.5e21}}],
        "pageInfo": {"hasNextPage": false}}}}"#;
    assert!(Columnar::new(None).unwrap().batch(&raw_page(body.to_vec())).is_ok());
    assert_eq!(wide_int_literal(br#"{"a": "1234567890123456789012", "b": -9223372036854775808}"#), None);
    assert_eq!(
        wide_int_literal(br#"{"a": "x\"1", "b": -9223372036854775809}"#).as_deref(),
        Some("-9223372036854775809")
    );
    assert_eq!(
        wide_int_literal(br#"[18446744073709551615, 18446744073709551616]"#).as_deref(),
        Some("18446744073709551616")
    );
}

#[test]
fn a_key_with_a_nul_is_an_error_naming_it() {
    let err = Columnar::new(None).unwrap().batch(&raw_page(page(json!([{"a\u{0}b": 1}])))).unwrap_err();
    assert!(err.to_string().contains("NUL"), "{err}");
}

#[test]
fn a_key_with_a_dot_beside_a_nested_field_is_an_error_naming_both() {
    for nodes in [json!([{"x.y": 1, "x": {"y": 2}}]), json!([{"x": {"y": 2}, "x.y": 1}])] {
        let body = page(nodes);
        let raw = raw_page(body);
        let mut c = Columnar::new(None).unwrap();
        let err = c.batch(&raw).unwrap_err().to_string();
        assert!(err.contains("the key \"x.y\""), "{err}");
        assert!(err.contains("the field \"x\" { \"y\" }"), "{err}");
    }
    // Across pages, on the fast route: the second page brings the literal key.
    let mut c = Columnar::new(None).unwrap();
    c.batch(&raw_page(page(json!([{"x": {"y": 2}}])))).unwrap();
    let err = c.batch(&raw_page(page(json!([{"x": {"y": 3}, "x.y": 4}]))));
    assert!(err.unwrap_err().to_string().contains("collide"));
}

#[test]
fn the_schema_types_the_findings_view() {
    let f = schema().field("FindingsView", "due_date").unwrap();
    assert_eq!((f.type_name.as_str(), f.list), ("DateTime", false));
    let f = schema().field("FindingsView", "datasource_tags_values").unwrap();
    assert_eq!((f.type_name.as_str(), f.list), ("String", true));
    assert!(schema().field("FindingsView", "tickets").is_some());
    assert!(schema().is_connection("TicketConnection"));
    assert!(!schema().is_connection("FindingsView"));
}

#[test]
fn typed_layouts_flatten_and_type_columns() {
    let l = Layout::typed(
        "FindingsView",
        "id id_int score due_date actual_status { category } datasource_tags_values \
         tickets(first: 5) { edges { node { id } } } renamed: title mystery __typename",
    )
    .unwrap();
    let cols: Vec<(&str, Kind)> = l.columns().iter().map(|c| (c.name.as_str(), c.kind.clone())).collect();
    assert_eq!(
        cols,
        vec![
            ("id", Kind::Str),
            ("id_int", Kind::Int),
            ("score", Kind::Float),
            ("due_date", Kind::DateTime),
            ("actual_status.category", Kind::Str),
            ("datasource_tags_values", Kind::List(Box::new(Kind::Str))),
            ("tickets", Kind::Json),
            ("renamed", Kind::Str),
            ("mystery", Kind::Null),
            ("__typename", Kind::Str),
        ]
    );
}

#[test]
fn pages_become_typed_batches() {
    let mut l =
        Layout::typed("FindingsView", "id_int due_date actual_status { category } datasource_tags_values")
            .unwrap();
    let body = page(json!([
        {"id_int": 1, "due_date": "2024-01-01T00:00:00+00:00", "actual_status": {"category": "OPEN"}, "datasource_tags_values": ["a", "b"]},
        {"id_int": null, "due_date": null, "actual_status": null, "datasource_tags_values": null},
        null
    ]));
    let b = page_batch(&body, None, 10, &mut l, 0).unwrap();
    assert_eq!(b.num_rows(), 3);
    let ids = b.column(0).as_primitive::<Int64Type>();
    assert_eq!((ids.value(0), ids.is_null(1), ids.is_null(2)), (1, true, true));
    let due = b.column(1).as_primitive::<TimestampMicrosecondType>();
    assert_eq!(due.value(0), 1_704_067_200_000_000);
    assert_eq!(
        b.schema().field(1).data_type(),
        &DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
    );
    assert_eq!(b.column(2).as_string::<i32>().value(0), "OPEN");
    assert_eq!(b.column(3).as_list::<i32>().value(0).as_string::<i32>().value(1), "b");
    // take cuts the page short
    assert_eq!(page_batch(&body, None, 1, &mut l, 0).unwrap().num_rows(), 1);
}

#[test]
fn a_value_that_does_not_fit_is_an_error_naming_the_column() {
    let mut l = Layout::typed("FindingsView", "id_int due_date").unwrap();
    let e =
        page_batch(&page(json!([{"id_int": "seven", "due_date": null}])), None, 10, &mut l, 5).unwrap_err();
    assert!(e.to_string().contains("\"id_int\"") && e.to_string().contains("row 5"), "{e}");
    let e =
        page_batch(&page(json!([{"id_int": 1, "due_date": "yesterday"}])), None, 10, &mut l, 0).unwrap_err();
    assert!(e.to_string().contains("due_date"), "{e}");
    let e = page_batch(&page(json!([{"id_int": 1.5, "due_date": null}])), None, 10, &mut l, 0).unwrap_err();
    assert!(e.to_string().contains("id_int"), "{e}");
}

#[test]
fn inferred_layouts_widen_over_pages_and_unify() {
    let mut l = Layout::inferred();
    let b1 = page_batch(&page(json!([{"a": 1, "n": null, "o": {"x": true}}])), None, 10, &mut l, 0).unwrap();
    let b2 = page_batch(
        &page(json!([{"a": 2.5, "n": "late", "o": {"x": false}, "new": []}])),
        None,
        10,
        &mut l,
        1,
    )
    .unwrap();
    let b3 = page_batch(&page(json!([{"a": 3, "new": [1, 2]}])), None, 10, &mut l, 2).unwrap();
    let names: Vec<&str> = l.columns().iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, vec!["a", "n", "o.x", "new"]);
    let (batches, schema) = unify(vec![b1, b2, b3], &l).unwrap();
    assert_eq!(schema.field(0).data_type(), &DataType::Float64);
    assert_eq!(schema.field(1).data_type(), &DataType::Utf8);
    assert_eq!(l.columns()[3].kind, Kind::List(Box::new(Kind::Int)));
    assert!(batches.iter().all(|b| b.schema() == schema));
    assert_eq!(batches[0].column(3).null_count(), 1);
    // A string where ints were: an error, not a null.
    let e = page_batch(&page(json!([{"a": "x"}])), None, 10, &mut l, 2).unwrap_err();
    assert!(e.to_string().contains("\"a\"") && e.to_string().contains("row 2"), "{e}");
}

/// The fast route (straight into builders) and the slow one (through a JSON tree) give the
/// same batch, for typed and learnt layouts.
#[test]
fn fast_and_slow_routes_agree() {
    let pages = [
        json!([
            {"id_int": 1, "score": 2.5, "due_date": "2024-01-01T00:00:00Z", "actual_status": {"category": "OPEN"},
             "datasource_tags_values": ["a"], "tickets": {"edges": [{"node": {"id": "t"}}]}, "title": "x\u{e9}"},
            {"id_int": 2, "score": 3, "due_date": null, "actual_status": null, "datasource_tags_values": [],
             "tickets": null, "title": null},
            null,
            {"id_int": null}
        ]),
        json!([]),
    ];
    let sel = "id_int score due_date actual_status { category } datasource_tags_values tickets { edges { node { id } } } title";
    for nodes in &pages {
        let body = page(nodes.clone());
        let mut a = Layout::typed("FindingsView", sel).unwrap();
        let mut b = a.clone();
        let fast = page_batch(&body, None, 3, &mut a, 0).unwrap();
        let slow = slow_page_batch(&body, None, 3, &mut b, 0).unwrap();
        assert_eq!(fast, slow);
        let trie = Trie::of(&a.columns).unwrap();
        assert!(fast::page(&body, None, 3, &a, &trie, 0).unwrap().is_some(), "the fast route took it");
    }
    // Learnt layout: after the first page, same-shaped pages take the fast route.
    let mut l = Layout::inferred();
    page_batch(&page(json!([{"a": 1, "o": {"x": "s"}}])), None, 10, &mut l, 0).unwrap();
    let body = page(json!([{"a": 2, "o": {"x": "t"}}, {"a": null, "o": null}]));
    let trie = Trie::of(&l.columns).unwrap();
    let fast = fast::page(&body, None, 10, &l, &trie, 1).unwrap().unwrap();
    let slow = slow_page_batch(&body, None, 10, &mut l.clone(), 1).unwrap();
    assert_eq!(fast, slow);
    // A float where ints were: the fast route defers to learning.
    let body = page(json!([{"a": 2.5, "o": {"x": "t"}}]));
    assert!(fast::page(&body, None, 10, &l, &trie, 1).unwrap().is_none());
}

#[test]
fn json_lines_keep_numbers_and_strings_exactly() {
    let body = br#"{"data": {"items": {"edges": [
        {"cursor": "a", "node": {"n": 12345678901234567890123, "f": 1.10, "s": "a  b\"c", "x": [1, 2]}},
        {"cursor": "b", "node": null}, null
    ], "pageInfo": {"hasNextPage": false}}}}"#;
    let page = RawPage { body: body.to_vec().into(), take: 10, info: Default::default(), path: None };
    let text = String::from_utf8(page_jsonl(&page).unwrap()).unwrap();
    assert_eq!(
        text,
        "{\"n\":12345678901234567890123,\"f\":1.10,\"s\":\"a  b\\\"c\",\"x\":[1,2]}\nnull\nnull\n"
    );
    let cut = RawPage { take: 1, ..page };
    assert_eq!(String::from_utf8(page_jsonl(&cut).unwrap()).unwrap().lines().count(), 1);
}

#[test]
fn impossible_dates_and_duplicate_keys() {
    let mut l = Layout::typed("FindingsView", "id_int due_date title").unwrap();
    let e =
        page_batch(&page(json!([{"id_int": 1, "due_date": "2024-02-30T00:00:00Z"}])), None, 10, &mut l, 0);
    assert!(e.unwrap_err().to_string().contains("due_date"));
    // A key twice: the last one wins, as in a dict, and the next row keeps its own values.
    let body = br#"{"data":{"v":{"edges":[{"node":{"title":"first","title":"second"}},{"node":{"id_int":2}}],"pageInfo":{"hasNextPage":false}}}}"#;
    let b = page_batch(body, None, 10, &mut l, 0).unwrap();
    let titles = b.column(2).as_string::<i32>();
    assert_eq!((titles.value(0), titles.is_null(1)), ("second", true));
}

#[test]
fn empty_lists_then_objects_become_json_text() {
    let mut l = Layout::inferred();
    let b1 = page_batch(&page(json!([{"t": {"edges": []}}])), None, 10, &mut l, 0).unwrap();
    let b2 =
        page_batch(&page(json!([{"t": {"edges": [{"node": {"id": "x"}}]}}])), None, 10, &mut l, 1).unwrap();
    let (batches, schema) = unify(vec![b1, b2], &l).unwrap();
    assert_eq!(schema.field(0).data_type(), &DataType::Utf8);
    assert_eq!(batches[0].column(0).as_string::<i32>().value(0), "[]");
    assert_eq!(batches[1].column(0).as_string::<i32>().value(0), r#"[{"node":{"id":"x"}}]"#);
}

#[test]
fn json_text_is_the_same_on_both_routes() {
    let sel = "tickets { edges { node { id } } }";
    let body = br#"{"data":{"v":{"edges":[{"node":{"tickets": {"edges": [ {"node": {"id": "T\u00e9"}} ]}}}],"pageInfo":{"hasNextPage":false}}}}"#;
    let mut a = Layout::typed("FindingsView", sel).unwrap();
    let fast = page_batch(body, None, 10, &mut a, 0).unwrap();
    let slow = slow_page_batch(body, None, 10, &mut a.clone(), 0).unwrap();
    assert_eq!(fast, slow);
    assert_eq!(fast.column(0).as_string::<i32>().value(0), r#"{"edges":[{"node":{"id":"Té"}}]}"#);
}

#[test]
fn a_frozen_layout_refuses_to_change() {
    let mut l = Layout::inferred();
    page_batch(&page(json!([{"a": 1, "n": null}])), None, 10, &mut l, 0).unwrap();
    freeze(&mut l);
    assert!(page_batch(&page(json!([{"a": 2, "n": null}])), None, 10, &mut l, 1).is_ok());
    assert!(page_batch(&page(json!([{"a": 2, "n": "x"}])), None, 10, &mut l, 1).is_err());
    assert!(page_batch(&page(json!([{"a": 2, "z": 1}])), None, 10, &mut l, 1).is_err());
}

#[test]
fn selection_text_with_aliases_args_and_directives() {
    let s = parse_selection("a b: c(x: 1) { d @include(if: true) e } f").unwrap();
    assert_eq!(s.len(), 3);
    assert_eq!((s[1].name.as_str(), s[1].alias.as_deref()), ("c", Some("b")));
    assert_eq!(s[1].children.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), vec!["d", "e"]);
    let deep = format!("{}x{}", "a { ".repeat(100), " }".repeat(100));
    assert!(parse_selection(&deep).is_err());
}
