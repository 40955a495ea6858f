use serde_json::json;

use super::*;
use crate::core::ids::to_global_id;
use crate::core::prepared::prepare_operation;

fn walker(pages: u32, limit: Option<u64>) -> BatchWalker {
    let mut args = Map::new();
    args.insert(
        "filters_config".into(),
        json!({"filtersjson": {"field": "severity", "condition": "in", "value": ["5"]}}),
    );
    let prepared = prepare_operation("findings_view", args, Some("id title")).unwrap();
    BatchWalker::new(
        &prepared,
        BatchSpec { page_size: 3, pages_per_request: pages, start: 0, limit, last: None },
    )
    .unwrap()
}

fn node(k: u64) -> Value {
    json!({"node": {"id": to_global_id("FindingsView", &k.to_string()).unwrap(), "title": format!("t{k}")}})
}

/// An answer to the walker's next document over `rows` (the list as the server holds it): each
/// page from the offset the document names.
fn answer(w: &BatchWalker, rows: &[u64], pages: u32) -> Vec<u8> {
    let doc = w.document(pages);
    let mut data = Map::new();
    let size = w.spec.page_size as usize;
    for (i, part) in doc.split("offset: ").skip(1).enumerate() {
        let at: usize = part.split(',').next().unwrap().parse().unwrap();
        let edges: Vec<Value> = rows.iter().skip(at).take(size).map(|k| node(*k)).collect();
        data.insert(format!("p{i}"), json!({ "edges": edges }));
    }
    serde_json::to_vec(&json!({ "data": data })).unwrap()
}

fn handed_out(w: &mut BatchWalker) -> Vec<u64> {
    let mut out = Vec::new();
    while let Some(page) = w.pop() {
        let body: Value = serde_json::from_slice(&page.body).unwrap();
        for edge in body["data"]["p"]["edges"].as_array().unwrap().iter().take(page.take) {
            let id = edge["node"]["id"].as_str().unwrap();
            out.push(from_global_id(id).unwrap().1.parse().unwrap());
        }
    }
    out
}

#[test]
fn a_walk_reads_every_row_once_in_batches() {
    let rows: Vec<u64> = (1..=20).collect();
    let mut w = walker(2, None);
    let mut seen = Vec::new();
    let mut requests = 0;
    while !w.done {
        let body = answer(&w, &rows, 2);
        w.take(&body, 2).unwrap();
        requests += 1;
        seen.extend(handed_out(&mut w));
    }
    assert_eq!(seen, rows);
    assert_eq!(requests, 4); // 6 rows, then 5 new a request (one overlaps): 6, 11, 16, 20
    let doc = w.document(2);
    assert!(
        doc.contains(
            "p1: findings_view(first: 3, offset: 18, sort: [ID_ASC], filters_config: $filters_config)"
        ),
        "{doc}"
    );
    assert!(doc.starts_with("query findings_view_pages($filters_config: FiltersConfigInput) {"), "{doc}");
}

#[test]
fn rows_removed_behind_the_walk_are_not_skipped_and_none_comes_twice() {
    let mut rows: Vec<u64> = (1..=30).collect();
    let mut w = walker(2, None);
    let mut seen = Vec::new();
    let mut step = 0;
    while !w.done {
        let body = answer(&w, &rows, 2);
        w.take(&body, 2).unwrap();
        seen.extend(handed_out(&mut w));
        step += 1;
        if step == 1 {
            // Between requests: four rows already handed out go, and one added at the end.
            rows.retain(|k| ![1, 2, 3, 5].contains(k));
            rows.push(31);
        }
        assert!(step < 50, "the walk does not end");
    }
    let mut sorted = seen.clone();
    sorted.dedup();
    assert_eq!(sorted.len(), seen.len(), "a row came twice: {seen:?}");
    for k in 6..=30 {
        assert!(seen.contains(&k), "row {k} present at both ends was skipped: {seen:?}");
    }
    assert!(w.shifts >= 1);
}

#[test]
fn rows_added_before_the_walks_position_come_once() {
    // A server that gives new rows lower keys: rows shift forward, and the rows seen again are
    // not handed out twice.
    let mut rows: Vec<u64> = (10..=40).collect();
    let mut w = walker(2, None);
    let mut seen = Vec::new();
    let mut step = 0;
    while !w.done {
        let body = answer(&w, &rows, 2);
        w.take(&body, 2).unwrap();
        seen.extend(handed_out(&mut w));
        step += 1;
        if step == 1 {
            rows.splice(0..0, [1, 2]);
        }
    }
    let mut once = seen.clone();
    once.dedup();
    assert_eq!(once, seen);
    for k in 10..=40 {
        assert!(seen.contains(&k), "{k} missing: {seen:?}");
    }
}

#[test]
fn the_limit_cuts_the_walk() {
    let rows: Vec<u64> = (1..=20).collect();
    let mut w = walker(2, Some(7));
    let mut seen = Vec::new();
    while !w.done {
        let body = answer(&w, &rows, 2);
        w.take(&body, 2).unwrap();
        seen.extend(handed_out(&mut w));
    }
    assert_eq!(seen, (1..=7).collect::<Vec<_>>());
}

#[test]
fn a_server_that_ignores_the_order_is_an_error_and_bad_specs_are_refused() {
    let mut w = walker(1, None);
    let body = serde_json::to_vec(&json!({"data": {"p0": {"edges": [node(3), node(1), node(2)]}}})).unwrap();
    assert!(matches!(w.take(&body, 1), Err(Error::Pagination { .. })));
    let prepared = prepare_operation("findings_view", Map::new(), Some("title")).unwrap();
    let spec = BatchSpec { page_size: 3, pages_per_request: 2, start: 0, limit: None, last: None };
    assert!(BatchWalker::new(&prepared, spec.clone()).is_err(), "no id in the selection");
    let mut args = Map::new();
    args.insert("sort".into(), json!(["SEVERITY_DESC"]));
    let prepared = prepare_operation("findings_view", args, Some("id")).unwrap();
    assert!(BatchWalker::new(&prepared, spec.clone()).is_err(), "another sort");
    let prepared = prepare_operation("findings_view", Map::new(), Some("id")).unwrap();
    let bad = BatchSpec { pages_per_request: 0, ..spec };
    assert!(BatchWalker::new(&prepared, bad).is_err());
}

#[test]
fn refusals_in_the_errors_are_read_and_a_named_limit_is_taken() {
    let body = br#"{"errors":[{"message":"Query has too many aliases: 10 (limit 4)."}]}"#;
    let e = refusal_of(body).unwrap().unwrap();
    assert!(is_refusal(&e));
    assert_eq!(fewer(10, &e), 4);
    let vague = refusal_of(br#"{"errors":[{"message":"Query is too complex."}]}"#).unwrap().unwrap();
    assert_eq!(fewer(10, &vague), 5);
    assert_eq!(fewer(1, &vague), 1);
    assert!(refusal_of(br#"{"data":{"p0":{"edges":[]}}}"#).unwrap().is_none());
}

#[test]
fn the_overlapping_row_is_dropped_without_decoding_the_nodes() {
    let raw = serde_json::value::RawValue::from_string(
        serde_json::to_string(&json!({"edges": [node(1), node(2), node(3)]})).unwrap(),
    )
    .unwrap();
    let cursors = ["sfb1:1:2".to_string(), "sfb1:2:3".to_string()];
    let body: Value = serde_json::from_slice(&kept(&raw, &[1, 2], &cursors).unwrap()).unwrap();
    let mut two = node(2);
    two["cursor"] = json!("sfb1:1:2");
    let mut three = node(3);
    three["cursor"] = json!("sfb1:2:3");
    assert_eq!(body["data"]["p"]["edges"], json!([two, three]));
}

#[test]
fn a_server_that_ignores_the_offset_is_an_error_not_a_walk_without_end() {
    let rows: Vec<u64> = (1..=50).collect();
    let mut w = walker(2, None);
    let first_answer = |w: &BatchWalker| {
        let edges: Vec<Value> = rows.iter().take(3).map(|k| node(*k)).collect();
        let _ = w;
        serde_json::to_vec(&json!({"data": {"p0": {"edges": edges}, "p1": {"edges": edges}}})).unwrap()
    };
    w.take(&first_answer(&w), 2).unwrap(); // the first batch: rows 1-3 (twice: the second copy dropped)
    assert_eq!(handed_out(&mut w), vec![1, 2, 3]);
    let again = first_answer(&w);
    assert!(matches!(w.take(&again, 2), Err(Error::Pagination { .. })));
}

#[test]
fn every_row_seen_removed_leaves_a_walk_that_starts_again_at_the_top() {
    let mut rows: Vec<u64> = (1..=12).collect();
    let mut w = walker(2, None);
    let mut seen = Vec::new();
    let mut step = 0;
    while !w.done {
        let body = answer(&w, &rows, 2);
        w.take(&body, 2).unwrap();
        seen.extend(handed_out(&mut w));
        step += 1;
        if step == 1 {
            rows.retain(|k| *k > 6); // every row handed out so far goes
        }
        assert!(step < 20, "the walk does not end: {seen:?}");
    }
    assert_eq!(seen, (1..=12).collect::<Vec<_>>());
}

/// A walk's own cursors: each row's offset and key, on the edge and as the page's end cursor.
fn cursors_of(w: &mut BatchWalker) -> Vec<(u64, Option<String>)> {
    let mut out = Vec::new();
    while let Some(page) = w.pop() {
        let body: Value = serde_json::from_slice(&page.body).unwrap();
        let edges = body["data"]["p"]["edges"].as_array().unwrap().clone();
        for edge in edges.iter().take(page.take) {
            let id = edge["node"]["id"].as_str().unwrap();
            let key: u64 = from_global_id(id).unwrap().1.parse().unwrap();
            out.push((key, edge["cursor"].as_str().map(str::to_string)));
        }
        let last = edges.iter().take(page.take).next_back().unwrap();
        assert_eq!(page.info.end_cursor.as_deref(), last["cursor"].as_str());
    }
    out
}

#[test]
fn a_walk_paused_at_a_cursor_resumes_there_once_under_change() {
    let mut rows: Vec<u64> = (1..=40).collect();
    let mut w = walker(2, None);
    let body = answer(&w, &rows, 2);
    w.take(&body, 2).unwrap();
    let first = cursors_of(&mut w);
    assert_eq!(first.iter().map(|r| r.0).collect::<Vec<_>>(), (1..=6).collect::<Vec<_>>());
    // Paused after the fourth row: its cursor is its offset in id order and its key.
    let (paused_key, cursor) = first[3].clone();
    let cursor = cursor.unwrap();
    assert_eq!(cursor, "sfb1:3:4");
    assert_eq!(parse_cursor(&cursor), Some((3, 4)));
    // Meanwhile rows before the pause go, and one comes after it.
    rows.retain(|k| ![1, 2, 3].contains(k));
    rows.push(41);
    let (start, last) = parse_cursor(&cursor).unwrap();
    let prepared = prepare_operation("findings_view", Map::new(), Some("id title")).unwrap();
    let spec = BatchSpec { page_size: 3, pages_per_request: 2, start, limit: None, last: Some(last) };
    let mut again = BatchWalker::new(&prepared, spec).unwrap();
    let mut seen = Vec::new();
    let mut requests = 0;
    while !again.done && requests < 50 {
        let body = answer(&again, &rows, 2);
        again.take(&body, 2).unwrap();
        requests += 1;
        seen.extend(handed_out(&mut again));
    }
    let expected: Vec<u64> = rows.iter().copied().filter(|k| *k > paused_key).collect();
    assert_eq!(seen, expected, "every row after the pause once, none before it");
}

#[test]
fn only_a_walks_own_cursor_is_taken() {
    assert_eq!(parse_cursor("sfb1:0:7"), Some((0, 7)));
    for bad in [
        "",
        "sfb1:",
        "sfb1:1",
        "sfb1:-1:2",
        "sfb1:1:2:3",
        "YXJyYXljb25uZWN0aW9uOjk=",
        "sfb1:1:99999999999999999999999",
    ] {
        assert_eq!(parse_cursor(bad), None, "{bad}");
    }
}

#[test]
fn a_limited_walk_asks_only_the_pages_it_needs() {
    let rows: Vec<u64> = (1..=100).collect();
    let mut w = walker(10, Some(4));
    assert_eq!(w.pages_wanted(10), 2); // 4 rows in pages of 3
    let body = answer(&w, &rows, 2);
    w.take(&body, 2).unwrap();
    assert_eq!(handed_out(&mut w), vec![1, 2, 3, 4]);
    let open = walker(10, None);
    assert_eq!(open.pages_wanted(10), 10);
    let mut seven = walker(10, Some(7));
    let body = answer(&seven, &rows, 1);
    seven.take(&body, 1).unwrap();
    // 4 rows left and the overlapping row: 5 rows, 2 pages of 3.
    assert_eq!(seven.pages_wanted(10), 2);
}
