//! Tests of the protocols' messages, cursors and backoff.
use super::*;
use bytes::Bytes;

use super::position::{cursor_order, Recent, RECENT_CURSORS};
use super::task::{backoff, BACKOFF_BASE};
use std::time::Duration;

#[test]
fn urls() {
    assert_eq!(
        ws_url("https://api.example.com/api/v1").ok().as_deref(),
        Some("wss://api.example.com/api/v1")
    );
    assert_eq!(ws_url("http://127.0.0.1:9/api/v1").ok().as_deref(), Some("ws://127.0.0.1:9/api/v1"));
    assert!(ws_url("ftp://x").is_err());
}

#[test]
fn messages_of_both_protocols() {
    assert_eq!(parse(r#"{"type":"connection_ack"}"#), Ok(Incoming::Ack));
    assert_eq!(parse(r#"{"type":"ka"}"#), Ok(Incoming::Alive));
    assert_eq!(parse(r#"{"type":"ping","payload":{}}"#), Ok(Incoming::Ping));
    assert_eq!(
        parse(r#"{"type":"next","id":"1","payload":{"data":{"a":1}}}"#),
        Ok(Incoming::Next(Bytes::from_static(br#"{"data":{"a":1}}"#)))
    );
    assert_eq!(
        parse(r#"{"type":"data","id":"1","payload":{"data":null}}"#),
        Ok(Incoming::Next(Bytes::from_static(br#"{"data":null}"#)))
    );
    // Another operation's event is not ours.
    assert_eq!(parse(r#"{"type":"next","id":"2","payload":{"data":{}}}"#), Ok(Incoming::Other));
    assert_eq!(parse(r#"{"type":"complete","id":"1"}"#), Ok(Incoming::Complete));
    assert!(
        matches!(parse(r#"{"type":"error","id":"1","payload":[{"message":"no"}]}"#), Ok(Incoming::Error(e)) if e.len() == 1)
    );
    assert!(
        matches!(parse(r#"{"type":"error","id":"1","payload":{"message":"no"}}"#), Ok(Incoming::Error(e)) if e.len() == 1)
    );
    assert!(matches!(parse(r#"{"type":"error","id":"1"}"#), Ok(Incoming::Error(e)) if e.len() == 1));
    assert_eq!(parse(r#"{"type":"surprise"}"#), Ok(Incoming::Other));
}

#[test]
fn hostile_messages_are_errors_not_panics() {
    for bad in [
        "",
        "[]",
        "null",
        "{",
        r#"{"type":1}"#,
        r#"{"type":"next","id":"1","payload":[1]}"#,
        r#"{"type":"next","id":"1"}"#,
    ] {
        assert!(parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn client_messages() {
    let init: Value = serde_json::from_str(&Proto::TransportWs.init("Bearer x")).unwrap_or_default();
    assert_eq!(init["payload"]["Authorization"], "Bearer x");
    let sub: Value = serde_json::from_str(&Proto::Legacy.subscribe(&serde_json::json!({"query": "q"})))
        .unwrap_or_default();
    assert_eq!(sub["type"], "start");
    let stop: Value = serde_json::from_str(&Proto::TransportWs.stop()).unwrap_or_default();
    assert_eq!(stop["type"], "complete");
    let stop: Value = serde_json::from_str(&Proto::Legacy.stop()).unwrap_or_default();
    assert_eq!(stop["type"], "stop");
}

#[test]
fn cursors_of_events() {
    assert_eq!(
        event_cursor(br#"{"data":{"finding_created":{"cursor":"42","kind":"x"}}}"#).as_deref(),
        Some("42")
    );
    assert_eq!(event_cursor(br#"{"data":{"e":{"cursor":7}}}"#).as_deref(), Some("7"));
    assert_eq!(event_cursor(br#"{"data":{"e":{}}}"#), None);
    assert_eq!(event_cursor(br#"{"data":null}"#), None);
    assert_eq!(event_cursor(b"garbage"), None);
    assert_eq!(event_cursor(br#"{"data":{"e":null}}"#), None);
    assert_eq!(
        event_cursor(br#"{"data":{"e":{"cursor":"9","big":[1,{"x":[2]}]}},"errors":[]}"#).as_deref(),
        Some("9")
    );
}

#[test]
fn cursors_are_ordered_when_they_show_their_place() {
    use std::cmp::Ordering::{Equal, Greater, Less};
    assert_eq!(cursor_order("9", "10"), Some(Less));
    assert_eq!(cursor_order("10", "10"), Some(Equal));
    assert_eq!(cursor_order("11", "10"), Some(Greater));
    // Relay cursors: base64 of "arrayconnection:N".
    assert_eq!(cursor_order("YXJyYXljb25uZWN0aW9uOjk=", "YXJyYXljb25uZWN0aW9uOjEw"), Some(Less));
    assert_eq!(cursor_order("opaque-a", "opaque-b"), None);
    assert_eq!(cursor_order("opaque-a", "opaque-a"), Some(Equal));
    assert_eq!(cursor_order("1", "YXJyYXljb25uZWN0aW9uOjEw"), None);
    assert_eq!(cursor_order("", "1"), None);
    assert_eq!(cursor_order(&"9".repeat(60), "1"), None);
}

#[test]
fn recent_cursors_are_bounded() {
    let mut r = Recent::default();
    for i in 0..(RECENT_CURSORS + 10) {
        r.push(&i.to_string());
        r.push(&i.to_string());
    }
    assert!(!r.contains("0"));
    assert!(r.contains(&(RECENT_CURSORS + 9).to_string()));
    assert_eq!(r.order.len(), RECENT_CURSORS);
    assert_eq!(r.set.len(), RECENT_CURSORS);
}

#[test]
fn backoff_grows_and_is_capped() {
    let cap = Duration::from_secs(2);
    assert!(backoff(1, cap) <= BACKOFF_BASE);
    assert!(backoff(3, cap) >= BACKOFF_BASE * 2);
    assert!(backoff(u32::MAX, cap) <= cap);
}
