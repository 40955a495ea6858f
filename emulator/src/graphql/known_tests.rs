//! The `known` profile over `GraphqlService::execute`: what it refuses, what it still serves.

use serde_json::{json, Value as J};

use super::{GraphqlService, Profile};
use crate::caller::Caller;

fn known() -> GraphqlService {
    GraphqlService::with_profile(500, 7, Profile::Known).unwrap()
}

async fn exec(s: &GraphqlService, query: &str, vars: J) -> J {
    let caller = Caller { customer: "acme".into(), token_name: "t".into(), subject: "s".into() };
    let req = async_graphql::Request::new(query).variables(async_graphql::Variables::from_json(vars));
    serde_json::to_value(s.execute(req, caller).await).unwrap()
}

fn error(resp: &J) -> String {
    resp["errors"][0]["message"].as_str().unwrap_or_default().to_owned()
}

const PAGE: &str = "query($f: FiltersConfigInput, $o: Int) { findings_view(first: 5, offset: $o, filters_config: $f, \
sort: [ID_ASC]) { edges { node { id_int title score actual_status { category } } } pageInfo { hasNextPage } } }";

#[tokio::test]
async fn the_known_profile_serves_the_facts() {
    let s = known();
    let r = exec(&s, PAGE, json!({"o": 10})).await;
    assert!(r.get("errors").is_none(), "{r}");
    assert_eq!(r["data"]["findings_view"]["edges"][0]["node"]["id_int"], 11);
    let f = json!({"filtersjson": r#"{"operator":"and","operands":[{"field":"severity","condition":"in","value":["5"]},
        {"field":"actual_status","condition":"","value":{"field":"category","condition":"in","value":["OPEN"]}}]}"#});
    let r = exec(&s, PAGE, json!({"f": f})).await;
    assert!(r.get("errors").is_none(), "{r}");
    // The Finding type keeps its fields.
    let r = exec(&s, "{ finding(id: 3) { last_reported_time finding_score { severity } } }", json!({})).await;
    assert!(r.get("errors").is_none(), "{r}");
}

#[tokio::test]
async fn the_known_profile_refuses_our_guesses() {
    let s = known();
    for field in ["due_date", "severity", "last_reported_time", "original_score"] {
        let q = format!("{{ findings_view(first: 1) {{ edges {{ node {{ id {field} }} }} }} }}");
        let r = exec(&s, &q, json!({})).await;
        assert!(error(&r).contains(field), "{field}: {r}");
    }
    let r = exec(&s, "{ findings_view(first: 1) { total_count } }", json!({})).await;
    assert!(error(&r).contains("total_count"), "{r}");
    let r =
        exec(&s, "{ findings_view(first: 1, sort: [DUE_DATE_ASC]) { pageInfo { hasNextPage } } }", json!({}))
            .await;
    assert!(r.get("errors").is_some(), "{r}");
    let gte = json!({"filtersjson": r#"{"field":"id","condition":"gte","value":3}"#});
    assert!(error(&exec(&s, PAGE, json!({"f": gte})).await).contains("Unknown filter condition"));
    let lrt = json!({"filtersjson": r#"{"field":"last_reported_time","condition":"in","value":["x"]}"#});
    assert!(error(&exec(&s, PAGE, json!({"f": lrt})).await).contains("Unknown filter field"));
    let r = exec(&s, "{ findings_view(first: 101) { pageInfo { hasNextPage } } }", json!({})).await;
    assert!(error(&r).contains("exceeds the `first` limit of 100 records"), "{r}");
    // The default profile still serves them.
    let d = GraphqlService::new(500, 7).unwrap();
    let r =
        exec(&d, "{ findings_view(first: 1) { total_count edges { node { due_date } } } }", json!({})).await;
    assert!(r.get("errors").is_none(), "{r}");
    assert!(exec(&d, PAGE, json!({"f": gte})).await.get("errors").is_none());
}

#[tokio::test]
async fn a_new_finding_is_open_and_due_by_the_sla() {
    let s = GraphqlService::new(500, 7).unwrap();
    let q = "query($id: ID!) { finding(id: $id) { status { key category } } findings_view(first: 1, \
        filters_config: {filtersjson: \"{\\\"field\\\":\\\"id\\\",\\\"condition\\\":\\\"in\\\",\\\"value\\\":[501]}\"}) \
        { edges { node { sla_status remediation_sub_phase due_date discovered_time } } } }";
    let (id, _) = s.create_finding(5, None, None).unwrap();
    assert_eq!(id, 501);
    let r = exec(&s, q, json!({"id": id.to_string()})).await;
    assert_eq!(r["data"]["finding"]["status"]["category"], "OPEN", "{r}");
    let node = &r["data"]["findings_view"]["edges"][0]["node"];
    assert_eq!(node["remediation_sub_phase"], "NEW", "{r}");
    assert_ne!(node["sla_status"], "OVERDUE", "{r}");
    assert_ne!(node["sla_status"], "CLOSED", "{r}");
    assert!(node["due_date"].as_str().unwrap() > node["discovered_time"].as_str().unwrap(), "{r}");
    let (id, _) = s.create_finding(4, Some("FIXED"), Some(1)).unwrap();
    let r = exec(
        &s,
        "query($id: ID!) { finding(id: $id) { status { category } } }",
        json!({"id": id.to_string()}),
    )
    .await;
    assert_eq!(r["data"]["finding"]["status"]["category"], "FIXED");
    assert!(s.create_finding(4, Some("NOPE"), None).is_err());
}
