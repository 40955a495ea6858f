//! GraphQL documents executed through `GraphqlService::execute`, for every query and mutation.

use serde_json::{json, Value as J};

use super::GraphqlService;
use crate::caller::Caller;

const QUERIES: [&str; 13] = [
    "finding",
    "finding_filters",
    "findings_view",
    "get_resources",
    "get_resources_ch",
    "remediation_queues",
    "scope_hierarchy",
    "scoring_rules",
    "sla_groups",
    "sla_preferences",
    "status_rules",
    "ticket_sla_rules",
    "trends",
];

const MUTATIONS: [&str; 32] = [
    "activate_scoring_rule",
    "activate_sla_rule",
    "add_scoring_rule",
    "add_sla_group",
    "add_sla_rule",
    "add_status_rule",
    "add_ticket_sla_rule",
    "create_scope_group",
    "delete_finding_filter",
    "delete_finding_scope_v2",
    "delete_scope_group",
    "delete_scoring_rule",
    "delete_sla_rule",
    "delete_status_rule",
    "delete_ticket_sla_rule",
    "edit_scope_group",
    "edit_scoring_rule",
    "edit_sla_rule",
    "edit_status_rule",
    "edit_ticket_sla_rule",
    "enable_status_rule",
    "enable_ticket_sla_rule",
    "new_finding_filter",
    "new_finding_scope_v2",
    "save_scope_hierarchy",
    "set_user_sla_and_comment",
    "update_finding_filter",
    "update_finding_scope_v2",
    "update_sla_settings_v2",
    "delete_finding_filter_v2",
    "new_finding_filter_v2",
    "update_finding_filter_v2",
];

fn svc() -> GraphqlService {
    GraphqlService::new(2000, 7).unwrap()
}

fn caller() -> Caller {
    Caller { customer: "acme".into(), token_name: "ci-token".into(), subject: "0000-sub".into() }
}

async fn exec(s: &GraphqlService, query: &str, vars: J) -> J {
    let req = async_graphql::Request::new(query).variables(async_graphql::Variables::from_json(vars));
    serde_json::to_value(s.execute(req, caller()).await).unwrap()
}

/// Runs a document that must succeed and returns its `data`.
async fn data(s: &GraphqlService, query: &str, vars: J) -> J {
    let resp = exec(s, query, vars).await;
    assert!(resp.get("errors").is_none(), "unexpected errors: {resp}\nfor {query}");
    resp["data"].clone()
}

/// Runs a document that must fail in a resolver and returns the first error message; checks
/// that the error carries a path (the HTTP layer relies on it).
async fn error(s: &GraphqlService, query: &str, vars: J) -> String {
    let resp = exec(s, query, vars).await;
    let errors = resp["errors"].as_array().unwrap_or_else(|| panic!("expected errors: {resp}"));
    assert!(errors.iter().all(|e| e.get("path").is_some()), "error without path: {resp}");
    errors[0]["message"].as_str().unwrap().to_string()
}

fn gid(ty: &str, pk: u64) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(format!("{ty}:{pk}"))
}

// ------------------------------------------------------------------ schema

#[test]
fn sdl_names_every_query_and_mutation_of_the_spec() {
    let s = svc();
    let doc = async_graphql::parser::parse_schema(s.sdl()).unwrap();
    let mut fields = std::collections::HashMap::new();
    for def in doc.definitions {
        if let async_graphql::parser::types::TypeSystemDefinition::Type(t) = def {
            if let async_graphql::parser::types::TypeKind::Object(o) = &t.node.kind {
                let names: Vec<String> = o.fields.iter().map(|f| f.node.name.node.to_string()).collect();
                fields.insert(t.node.name.node.to_string(), names);
            }
        }
    }
    let mut q = fields["Query"].clone();
    // Modelled for subscriptions, not an operation of the specification.
    q.retain(|n| n != "subscription_cursor");
    q.sort();
    let mut want: Vec<String> = QUERIES.iter().map(|x| x.to_string()).collect();
    want.sort();
    assert_eq!(q, want);
    let mut m = fields["Mutation"].clone();
    m.sort();
    let mut want: Vec<String> = MUTATIONS.iter().map(|x| x.to_string()).collect();
    want.sort();
    assert_eq!(m, want);
    let sdl = s.sdl();
    if std::env::var_os("PRINT_SDL").is_some() {
        println!("{sdl}");
    }
    assert!(sdl.contains("@deprecated(reason: \"Use get_resources_ch\")"));
    assert!(sdl.contains("@deprecated(reason: \"Use new_finding_filter_v2\")"));
    for ty in
        ["FindingConnection", "FindingsView", "CHResourcesConnection", "StatusRulesConnection", "PageInfo"]
    {
        assert!(fields.contains_key(ty), "{ty}");
    }
}

#[tokio::test]
async fn introspection_is_on() {
    let s = svc();
    let d = data(
        &s,
        r#"{ __schema { queryType { name } mutationType { name } }
             __type(name: "Finding") { fields { name } } }"#,
        json!({}),
    )
    .await;
    assert_eq!(d["__schema"]["queryType"]["name"], "Query");
    let names: Vec<&str> =
        d["__type"]["fields"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    for f in
        ["id", "id_int", "finding_id", "finding_score", "description", "comments", "attachments", "tickets"]
    {
        assert!(names.contains(&f), "{f}");
    }
}

// ------------------------------------------------------------------ findings

const FINDING: &str = r#"query F($id: ID!) { finding(id: $id) {
    id id_int finding_id last_reported_time discovered_time cloud_provider original_status
    cloud_account package_name datasource { friendly_name } main_resource { resource_name }
    title finding_score { score severity original_score } age description
    status { key category }
    comments(first: 2) { edges { cursor node { id text author } } pageInfo { hasNextPage endCursor } }
    attachments { edges { node { file_name } } }
    tickets { edges { node { id status external_id link } } }
    additional_data { data } } }"#;

#[tokio::test]
async fn finding_by_int_or_global_id() {
    let s = svc();
    let a = data(&s, FINDING, json!({"id": 5})).await;
    let b = data(&s, FINDING, json!({"id": gid("Finding", 5)})).await;
    let c = data(&s, FINDING, json!({"id": "5"})).await;
    assert_eq!(a, b);
    assert_eq!(a, c);
    let f = &a["finding"];
    assert_eq!(f["id"], gid("Finding", 5));
    assert_eq!(f["id_int"], 5);
    let sev = f["finding_score"]["severity"].as_i64().unwrap();
    assert!((1..=5).contains(&sev));
    assert!(f["description"].as_str().unwrap().contains('\n'));
    assert!(f["discovered_time"].as_str().unwrap().ends_with("+00:00"));
    // JSONString: a JSON text inside a string.
    let raw: J = serde_json::from_str(f["additional_data"]["data"].as_str().unwrap()).unwrap();
    assert!(raw.get("resource_id").is_some());
    // The FindingsView global id is accepted too.
    let d =
        data(&s, "query($id: ID!) { finding(id: $id) { id_int } }", json!({"id": gid("FindingsView", 9)}))
            .await;
    assert_eq!(d["finding"]["id_int"], 9);
}

#[tokio::test]
async fn unknown_finding_is_a_resolver_error_with_path() {
    let s = svc();
    let resp = exec(&s, "{ finding(id: 999999) { id } }", json!({})).await;
    assert_eq!(resp["data"]["finding"], J::Null);
    assert_eq!(resp["errors"][0]["path"], json!(["finding"]));
    assert!(resp["errors"][0]["message"].as_str().unwrap().contains("does not exist"));
    let msg = error(&s, "{ finding(id: \"U2NvcGVHcm91cDox\") { id } }", json!({})).await;
    assert!(msg.contains("Finding"), "{msg}");
}

const VIEW: &str = r#"query V($fc: FiltersConfigInput, $sort: [FindingsViewSortEnum], $first: Int, $after: String, $offset: Int, $last: Int, $before: String) {
  findings_view(filters_config: $fc, sort: $sort, first: $first, after: $after, offset: $offset, last: $last, before: $before) {
    total_count
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    edges { cursor node { id id_int title score severity remediation_sub_phase cloud_account
      cloud_account_friendly_name cloud_provider resource_name resource_type sla_status age
      datasource_tags_values source actual_status { category key } tickets { edges { node { status } } } } }
  } }"#;

fn ids(d: &J) -> Vec<i64> {
    d["findings_view"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["node"]["id_int"].as_i64().unwrap())
        .collect()
}

#[tokio::test]
async fn findings_view_pages_with_cursors_offset_and_cap() {
    let s = svc();
    let p1 = data(&s, VIEW, json!({"first": 10})).await;
    assert_eq!(ids(&p1), (1..=10).collect::<Vec<_>>());
    assert_eq!(p1["findings_view"]["total_count"], 2000);
    assert_eq!(p1["findings_view"]["pageInfo"]["hasNextPage"], true);
    let after = p1["findings_view"]["pageInfo"]["endCursor"].clone();
    let p2 = data(&s, VIEW, json!({"first": 10, "after": after})).await;
    assert_eq!(ids(&p2), (11..=20).collect::<Vec<_>>());
    let off = data(&s, VIEW, json!({"first": 5, "offset": 100})).await;
    assert_eq!(ids(&off), (101..=105).collect::<Vec<_>>());
    // No first/last: 100 records.
    let all = data(&s, VIEW, json!({})).await;
    assert_eq!(ids(&all).len(), 100);
    let last = data(&s, VIEW, json!({"last": 3})).await;
    assert_eq!(ids(&last), vec![1998, 1999, 2000]);
    assert_eq!(last["findings_view"]["pageInfo"]["hasPreviousPage"], true);
    let msg = error(&s, VIEW, json!({"first": 101})).await;
    assert_eq!(
        msg,
        "Requesting 101 records on the `findings_view` connection exceeds the `first` limit of 100 records."
    );
    let msg =
        error(&s, VIEW, json!({"offset": 3, "before": p1["findings_view"]["pageInfo"]["endCursor"]})).await;
    assert!(msg.contains("offset"));
}

#[tokio::test]
async fn findings_view_filters_and_sorts() {
    let s = svc();
    let fc = json!({"filtersjson": r#"{"operator":"and","operands":[{"field":"severity","condition":"in","value":["4","5"]},{"field":"actual_status","condition":"","value":{"field":"category","condition":"in","value":["OPEN"]}}]}"#});
    let d = data(&s, VIEW, json!({"fc": fc, "sort": ["SEVERITY_DESC", "SCORE_DESC"], "first": 100})).await;
    let edges = d["findings_view"]["edges"].as_array().unwrap();
    assert!(!edges.is_empty());
    let total = d["findings_view"]["total_count"].as_i64().unwrap();
    assert!(total > 0 && total < 2000);
    let mut prev = (10, 100.0);
    for e in edges {
        let n = &e["node"];
        assert_eq!(n["actual_status"]["category"], "OPEN");
        let cur = (n["severity"].as_i64().unwrap(), n["score"].as_f64().unwrap());
        assert!(cur.0 >= 4);
        assert!(cur.0 < prev.0 || (cur.0 == prev.0 && cur.1 <= prev.1), "order {prev:?} then {cur:?}");
        prev = cur;
    }
    // Paging deep through a filtered, sorted view visits every match exactly once.
    let mut seen = std::collections::HashSet::new();
    let mut after = J::Null;
    loop {
        let p = data(&s, VIEW, json!({"fc": fc, "sort": ["AGE_ASC"], "first": 100, "after": after})).await;
        for id in ids(&p) {
            assert!(seen.insert(id));
        }
        if p["findings_view"]["pageInfo"]["hasNextPage"] == false {
            break;
        }
        after = p["findings_view"]["pageInfo"]["endCursor"].clone();
    }
    assert_eq!(seen.len() as i64, total);
    let msg =
        error(&s, VIEW, json!({"fc": {"filtersjson": r#"{"field":"bogus","condition":"in","value":[1]}"#}}))
            .await;
    assert!(msg.contains("Unknown filter field"), "{msg}");
}

// ------------------------------------------------------------------ list queries

#[tokio::test]
async fn list_queries_return_connections() {
    let s = svc();
    let conn = "total_count pageInfo { hasNextPage endCursor } edges { cursor node { id } }";
    for (field, args) in [
        ("finding_filters", ""),
        ("finding_filters", "(type: SCOPE, sort: [NAME_DESC])"),
        ("get_resources_ch", "(resource_type: [\"VIRTUAL_MACHINE\"], sort: [FINDINGS_COUNT_DESC], first: 5)"),
        ("get_resources", "(cloud_provider: \"AWS\", first: 3)"),
        ("remediation_queues", "(state: ENABLED, sort: [PRIORITY_DESC])"),
        ("scoring_rules", "(sort: [NAME_ASC])"),
        ("sla_groups", "(sort: [PRIORITY_ASC])"),
        ("sla_preferences", "(severity: 5)"),
        ("status_rules", ""),
        ("ticket_sla_rules", "(sort: [ID_DESC])"),
    ] {
        let d = data(&s, &format!("{{ {field}{args} {{ {conn} }} }}"), json!({})).await;
        let edges = d[field]["edges"].as_array().unwrap();
        assert!(!edges.is_empty(), "{field}{args}");
        assert!(edges.iter().all(|e| e["node"]["id"].is_string()));
    }
    let d = data(
        &s,
        r#"{ get_resources_ch(resource_type: ["VIRTUAL_MACHINE"], sort: [FINDINGS_COUNT_DESC], first: 5) {
              edges { node { resource_name resource_type findings_count tags cloud_provider } } } }"#,
        json!({}),
    )
    .await;
    let edges = d["get_resources_ch"]["edges"].as_array().unwrap();
    let counts: Vec<i64> = edges.iter().map(|e| e["node"]["findings_count"].as_i64().unwrap()).collect();
    assert!(counts.windows(2).all(|w| w[0] >= w[1]));
    assert!(edges.iter().all(|e| e["node"]["resource_type"] == "VIRTUAL_MACHINE"));
    assert!(edges[0]["node"]["tags"]["env"].is_string(), "GenericScalar passes objects through");
    let d = data(
        &s,
        "{ sla_preferences(severity: 5) { edges { node { severity days sla_group_name } } } }",
        json!({}),
    )
    .await;
    assert!(d["sla_preferences"]["edges"].as_array().unwrap().iter().all(|e| e["node"]["severity"] == 5));
    let msg = error(&s, "{ scoring_rules(first: 500) { edges { cursor } } }", json!({})).await;
    assert!(msg.contains("`scoring_rules` connection exceeds the `first` limit"));
}

#[tokio::test]
async fn scope_hierarchy_counts_findings() {
    let s = svc();
    let q = r#"query($u: Boolean) { scope_hierarchy(include_unscoped: $u) { total_findings generated_time
        nodes { id name node_type findings_count children { name findings_count } }
        scope_groups(first: 2) { edges { node { name scopes { name type } } } } } }"#;
    let d = data(&s, q, json!({"u": true})).await;
    let h = &d["scope_hierarchy"];
    assert_eq!(h["total_findings"], 2000);
    let nodes = h["nodes"].as_array().unwrap();
    assert_eq!(nodes.last().unwrap()["node_type"], "UNSCOPED");
    let cloud = &nodes[0];
    let kids: i64 =
        cloud["children"].as_array().unwrap().iter().map(|c| c["findings_count"].as_i64().unwrap()).sum();
    // The cloud scopes are disjoint (one provider each), so the group count is their sum.
    assert_eq!(cloud["findings_count"].as_i64().unwrap(), kids);
    let d = data(&s, q, json!({"u": false})).await;
    assert!(d["scope_hierarchy"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|n| n["node_type"] == "SCOPE_GROUP"));
}

#[tokio::test]
async fn trends_aggregate_the_store() {
    let s = svc();
    let q = r#"query($ts: TimeScales!, $af: AggregateFunctions!, $g: String, $f: String, $fc: FiltersConfigInput) {
        trends(time_scale: $ts, aggregate_function: $af, group_by: $g, field: $f, filters_config: $fc) }"#;
    let d = data(&s, q, json!({"ts": "MONTH", "af": "COUNT"})).await;
    let points = d["trends"].as_array().unwrap();
    let total: i64 = points.iter().map(|p| p["value"].as_i64().unwrap()).sum();
    assert_eq!(total, 2000);
    assert!(points.iter().all(|p| p["time"].as_str().unwrap().ends_with("-01")));
    let d = data(&s, q, json!({"ts": "YEAR", "af": "COUNT", "g": "severity"})).await;
    let total: i64 = d["trends"].as_array().unwrap().iter().map(|p| p["value"].as_i64().unwrap()).sum();
    assert_eq!(total, 2000);
    assert!(d["trends"][0].get("group").is_some());
    let d = data(&s, q, json!({"ts": "WEEK", "af": "MAX", "f": "severity"})).await;
    assert!(d["trends"].as_array().unwrap().iter().all(|p| p["value"].as_f64().unwrap() <= 5.0));
    let fc = json!({"filtersjson": r#"{"field":"severity","condition":"in","value":[5]}"#});
    let d = data(&s, q, json!({"ts": "QUARTER", "af": "AVG", "f": "severity", "fc": fc})).await;
    assert!(d["trends"].as_array().unwrap().iter().all(|p| p["value"] == 5.0));
    let msg = error(&s, q, json!({"ts": "DAY", "af": "SUM", "f": "title"})).await;
    assert!(msg.contains("Cannot aggregate"));
}

// ------------------------------------------------------------------ mutations

async fn score_of(s: &GraphqlService, id: i64) -> f64 {
    let d =
        data(s, "query($id: ID!) { finding(id: $id) { finding_score { score } } }", json!({"id": id})).await;
    d["finding"]["finding_score"]["score"].as_f64().unwrap()
}

#[tokio::test]
async fn scoring_rule_lifecycle() {
    let s = svc();
    let add = r#"mutation($r: ScoringRuleInput!) { add_scoring_rule(scoring_rule: $r) { ok scoring_rule {
        id id_int name active method value affected_findings filters_config { filtersjson } } } }"#;
    let fc = json!({"filtersjson": r#"{"field":"id","condition":"in","value":[1,2]}"#});
    let d = data(
        &s,
        add,
        json!({"r": {"name": "Crown jewels", "method": "SET", "value": 9.9, "filters_config": fc}}),
    )
    .await;
    let rule = &d["add_scoring_rule"]["scoring_rule"];
    assert_eq!(d["add_scoring_rule"]["ok"], true);
    assert_eq!(rule["active"], true);
    let id = rule["id"].as_str().unwrap().to_string();
    assert_eq!(score_of(&s, 1).await, 9.9);
    assert_eq!(score_of(&s, 2).await, 9.9);
    let list = data(&s, "{ scoring_rules(name: \"crown\") { edges { node { id name } } } }", json!({})).await;
    assert_eq!(list["scoring_rules"]["edges"][0]["node"]["id"], id);
    let edit = r#"mutation($id: ID!, $r: ScoringRuleInput!) { edit_scoring_rule(id: $id, scoring_rule: $r) { ok scoring_rule { name value } } }"#;
    let d = data(&s, edit, json!({"id": id, "r": {"name": "Crown jewels v2", "value": 8.5}})).await;
    assert_eq!(d["edit_scoring_rule"]["scoring_rule"]["name"], "Crown jewels v2");
    assert_eq!(score_of(&s, 1).await, 8.5);
    let act = r#"mutation($id: ID!, $a: Boolean!) { activate_scoring_rule(id: $id, active: $a) { ok scoring_rule { active } } }"#;
    let d = data(&s, act, json!({"id": id, "a": false})).await;
    assert_eq!(d["activate_scoring_rule"]["scoring_rule"]["active"], false);
    let del = "mutation($id: ID!) { delete_scoring_rule(id: $id) { ok } }";
    let d = data(&s, del, json!({"id": id})).await;
    assert_eq!(d["delete_scoring_rule"]["ok"], true);
    // Scores the rule set remain after deletion.
    assert_eq!(score_of(&s, 1).await, 8.5);
    let list = data(&s, "{ scoring_rules(name: \"crown\") { edges { node { id } } } }", json!({})).await;
    assert!(list["scoring_rules"]["edges"].as_array().unwrap().is_empty());
    let msg = error(&s, del, json!({"id": id})).await;
    assert!(msg.contains("does not exist"));
    let msg = error(&s, add, json!({"r": {"name": "x", "method": "SET"}})).await;
    assert!(msg.contains("value is required"));
    let resp = exec(&s, del, json!({"id": id})).await;
    assert_eq!(resp["data"]["delete_scoring_rule"], J::Null);
    assert_eq!(resp["errors"][0]["path"], json!(["delete_scoring_rule"]));
}

#[tokio::test]
async fn status_rule_lifecycle() {
    let s = svc();
    let add = r#"mutation($r: StatusRuleInput!) { add_status_rule(status_rule: $r) { ok status_rule {
        id name enabled status_key status { key category } affected_findings } } }"#;
    let fc = json!({"filtersjson": r#"{"field":"id","condition":"in","value":[3]}"#});
    let d = data(&s, add, json!({"r": {"name": "Close 3", "status_key": "20", "filters_config": fc}})).await;
    let r = &d["add_status_rule"]["status_rule"];
    assert_eq!(r["status"]["category"], "FIXED");
    let id = r["id"].as_str().unwrap().to_string();
    let f = data(&s, "{ finding(id: 3) { status { key category } } findings_view(filters_config: {filtersjson: \"{\\\"field\\\":\\\"id\\\",\\\"condition\\\":\\\"in\\\",\\\"value\\\":[3]}\"}) { edges { node { remediation_sub_phase sla_status actual_status { key } } } } }", json!({})).await;
    assert_eq!(f["finding"]["status"]["key"], "20");
    assert_eq!(f["findings_view"]["edges"][0]["node"]["remediation_sub_phase"], "CLOSED");
    assert_eq!(f["findings_view"]["edges"][0]["node"]["sla_status"], "CLOSED");
    let edit = r#"mutation($id: ID!, $r: StatusRuleInput!) { edit_status_rule(id: $id, status_rule: $r) { ok status_rule { name status_key } } }"#;
    let d = data(&s, edit, json!({"id": id, "r": {"name": "Accept 3", "status_key": "30"}})).await;
    assert_eq!(d["edit_status_rule"]["status_rule"]["status_key"], "30");
    let en = r#"mutation($id: ID!) { enable_status_rule(id: $id, enabled: false) { ok status_rule { enabled } } }"#;
    let d = data(&s, en, json!({"id": id})).await;
    assert_eq!(d["enable_status_rule"]["status_rule"]["enabled"], false);
    let d = data(&s, "mutation($id: ID!) { delete_status_rule(id: $id) { ok } }", json!({"id": id})).await;
    assert_eq!(d["delete_status_rule"]["ok"], true);
    let f = data(&s, "{ finding(id: 3) { status { key } } }", json!({})).await;
    assert_eq!(f["finding"]["status"]["key"], "30", "deleting the rule leaves the status it set");
    let msg = error(&s, add, json!({"r": {"name": "bad", "status_key": "99"}})).await;
    assert!(msg.contains("Unknown status key"));
}

#[tokio::test]
async fn ticket_sla_rule_lifecycle() {
    let s = svc();
    let add = r#"mutation($r: TicketSLAInput!) { add_ticket_sla_rule(ticket_sla: $r) { ok ticket_sla_rule { id name days provider_type enabled } } }"#;
    let d = data(&s, add, json!({"r": {"name": "Jira 5 days", "days": 5, "provider_type": "JIRA"}})).await;
    let id = d["add_ticket_sla_rule"]["ticket_sla_rule"]["id"].as_str().unwrap().to_string();
    assert_eq!(d["add_ticket_sla_rule"]["ticket_sla_rule"]["provider_type"], "JIRA");
    let edit = r#"mutation($id: ID!, $r: TicketSLAInput!) { edit_ticket_sla_rule(id: $id, ticket_sla: $r) { ok ticket_sla_rule { days } } }"#;
    let d = data(&s, edit, json!({"id": id, "r": {"days": 9}})).await;
    assert_eq!(d["edit_ticket_sla_rule"]["ticket_sla_rule"]["days"], 9);
    let en = r#"mutation($id: ID!) { enable_ticket_sla_rule(id: $id, enabled: false) { ok ticket_sla_rule { enabled } } }"#;
    let d = data(&s, en, json!({"id": id})).await;
    assert_eq!(d["enable_ticket_sla_rule"]["ticket_sla_rule"]["enabled"], false);
    let list = data(&s, "{ ticket_sla_rules(enabled: false) { edges { node { id } } } }", json!({})).await;
    assert_eq!(list["ticket_sla_rules"]["edges"][0]["node"]["id"], id);
    let d =
        data(&s, "mutation($id: ID!) { delete_ticket_sla_rule(id: $id) { ok } }", json!({"id": id})).await;
    assert_eq!(d["delete_ticket_sla_rule"]["ok"], true);
    let list = data(&s, "{ ticket_sla_rules(enabled: false) { edges { node { id } } } }", json!({})).await;
    assert!(list["ticket_sla_rules"]["edges"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn sla_groups_rules_and_settings() {
    let s = svc();
    let fc = json!({"filtersjson": r#"{"field":"id","condition":"in","value":[10,11,12,13,14,15,16,17,18,19,20]}"#});
    let d = data(
        &s,
        r#"mutation($fc: FiltersConfigInput) { add_sla_group(name: "Tiny", filters_config: $fc, priority: 0) { ok sla_group { id name sla_rules { id } } } }"#,
        json!({"fc": fc}),
    )
    .await;
    let group = d["add_sla_group"]["sla_group"]["id"].as_str().unwrap().to_string();
    // Pick a severity present among findings 10..20.
    let v = data(&s, VIEW, json!({"fc": fc})).await;
    let sev = v["findings_view"]["edges"][0]["node"]["severity"].as_i64().unwrap();
    let add = r#"mutation($r: SLARuleInput!) { add_sla_rule(sla_rule: $r) { ok sla_rule { id severity days active affected_findings sla_group_id } } }"#;
    let d = data(&s, add, json!({"r": {"sla_group_id": group, "severity": sev, "days": 1000}})).await;
    let rule = d["add_sla_rule"]["sla_rule"].clone();
    assert!(rule["affected_findings"].as_i64().unwrap() >= 1);
    let id = rule["id"].as_str().unwrap().to_string();
    let q = r#"query($fc: FiltersConfigInput) { findings_view(filters_config: $fc) { edges { node { severity sla_status due_date discovered_time } } } }"#;
    let v = data(&s, q, json!({"fc": fc})).await;
    for e in v["findings_view"]["edges"].as_array().unwrap() {
        if e["node"]["severity"] == sev {
            assert_ne!(e["node"]["sla_status"], "OVERDUE");
            assert!(e["node"]["due_date"].as_str().unwrap() > e["node"]["discovered_time"].as_str().unwrap());
        }
    }
    let edit = r#"mutation($id: ID!, $r: SLARuleInput!) { edit_sla_rule(id: $id, sla_rule: $r) { ok sla_rule { days } } }"#;
    let d = data(&s, edit, json!({"id": id, "r": {"days": 500}})).await;
    assert_eq!(d["edit_sla_rule"]["sla_rule"]["days"], 500);
    let act =
        r#"mutation($id: ID!) { activate_sla_rule(id: $id, active: false) { ok sla_rule { active } } }"#;
    let d = data(&s, act, json!({"id": id})).await;
    assert_eq!(d["activate_sla_rule"]["sla_rule"]["active"], false);
    let upd = r#"mutation($s: [SLARuleInput!]!) { update_sla_settings_v2(sla_settings: $s) { ok sla_preferences { id days severity } } }"#;
    let d = data(
        &s,
        upd,
        json!({"s": [{"id": id, "days": 42}, {"sla_group_id": group, "severity": 1, "days": 365}]}),
    )
    .await;
    let prefs = d["update_sla_settings_v2"]["sla_preferences"].as_array().unwrap();
    assert_eq!(prefs[0]["days"], 42);
    assert_eq!(prefs[1]["severity"], 1);
    let list = data(
        &s,
        "query($g: ID) { sla_preferences(sla_group_id: $g) { edges { node { days } } } }",
        json!({"g": group}),
    )
    .await;
    assert_eq!(list["sla_preferences"]["edges"].as_array().unwrap().len(), 2);
    let groups =
        data(&s, "{ sla_groups(name: \"tiny\") { edges { node { sla_rules { days } } } } }", json!({})).await;
    assert_eq!(groups["sla_groups"]["edges"][0]["node"]["sla_rules"].as_array().unwrap().len(), 2);
    let d = data(&s, "mutation($id: ID!) { delete_sla_rule(id: $id) { ok } }", json!({"id": id})).await;
    assert_eq!(d["delete_sla_rule"]["ok"], true);
    let msg = error(&s, add, json!({"r": {"sla_group_id": group, "days": 3}})).await;
    assert!(msg.contains("severity is required"));
}

#[tokio::test]
async fn set_user_sla_and_comment_changes_findings() {
    let s = svc();
    let m = r#"mutation($ids: [ID], $due: DateTime!, $c: String!) { set_user_sla_and_comment(finding_ids: $ids, due_date: $due, comment: $c) { ok updated_count } }"#;
    let d = data(&s, m, json!({"ids": [7, gid("Finding", 8)], "due": "2030-01-31T00:00:00Z", "c": "Agreed with **owner**.\nSee ticket."})).await;
    assert_eq!(d["set_user_sla_and_comment"]["updated_count"], 2);
    let f = data(
        &s,
        r#"{ finding(id: 7) { comments(last: 1) { edges { node { text author } } } }
             findings_view(filters_config: {filtersjson: "{\"field\":\"id\",\"condition\":\"in\",\"value\":[8]}"}) { edges { node { due_date } } } }"#,
        json!({}),
    )
    .await;
    assert_eq!(f["finding"]["comments"]["edges"][0]["node"]["text"], "Agreed with **owner**.\nSee ticket.");
    assert_eq!(f["finding"]["comments"]["edges"][0]["node"]["author"], "ci-token");
    assert_eq!(f["findings_view"]["edges"][0]["node"]["due_date"], "2030-01-31T00:00:00+00:00");
    let fc = json!({"filtersjson": r#"{"field":"severity","condition":"in","value":["5"]}"#});
    let m2 = r#"mutation($fc: FiltersConfigInput) { set_user_sla_and_comment(filters_config: $fc, due_date: "2031-01-01", comment: "bulk") { ok updated_count } }"#;
    let d = data(&s, m2, json!({"fc": fc})).await;
    assert!(d["set_user_sla_and_comment"]["updated_count"].as_i64().unwrap() > 0);
    let msg = error(&s, m, json!({"ids": [7], "due": "not a date", "c": "x"})).await;
    assert!(msg.contains("Invalid DateTime"));
}

#[tokio::test]
async fn finding_filters_v2_and_deprecated() {
    let s = svc();
    let new = r#"mutation($f: FindingFilterInput!) { new_finding_filter_v2(finding_filter: $f) { ok finding_filter { id name type filter } } }"#;
    let f = json!({"name": "Sev 5", "filter": r#"{"field": "severity", "condition": "in", "value": ["5"]}"#});
    let d = data(&s, new, json!({"f": f})).await;
    let ff = &d["new_finding_filter_v2"]["finding_filter"];
    assert_eq!(ff["type"], "FILTER");
    let parsed: J = serde_json::from_str(ff["filter"].as_str().unwrap()).unwrap();
    assert_eq!(parsed["field"], "severity");
    let id = ff["id"].as_str().unwrap().to_string();
    let v = data(&s, VIEW, json!({"fc": {"filtersid": id}, "first": 100})).await;
    assert!(v["findings_view"]["edges"].as_array().unwrap().iter().all(|e| e["node"]["severity"] == 5));
    let upd = r#"mutation($id: ID!, $f: FindingFilterInput!) { update_finding_filter_v2(id: $id, finding_filter: $f) { ok finding_filter { name } } }"#;
    let d = data(&s, upd, json!({"id": id, "f": {"name": "Severity 5"}})).await;
    assert_eq!(d["update_finding_filter_v2"]["finding_filter"]["name"], "Severity 5");
    let d =
        data(&s, "mutation($id: ID!) { delete_finding_filter_v2(id: $id) { ok } }", json!({"id": id})).await;
    assert_eq!(d["delete_finding_filter_v2"]["ok"], true);
    let msg = error(&s, VIEW, json!({"fc": {"filtersid": id}})).await;
    assert!(msg.contains("does not exist"));
    // Deprecated v1 operations.
    let d = data(
        &s,
        r#"mutation { new_finding_filter(name: "Old style", filter: "{\"field\":\"cloud_provider\",\"condition\":\"in\",\"value\":[\"GCP\"]}") { ok finding_filter { id id_int } } }"#,
        json!({}),
    )
    .await;
    let pk = d["new_finding_filter"]["finding_filter"]["id_int"].as_i64().unwrap();
    let d = data(&s, "mutation($id: ID!) { update_finding_filter(id: $id, name: \"Renamed\") { ok finding_filter { name } } }", json!({"id": pk})).await;
    assert_eq!(d["update_finding_filter"]["finding_filter"]["name"], "Renamed");
    let list =
        data(&s, "{ finding_filters(name: \"renamed\") { edges { node { id_int type } } } }", json!({}))
            .await;
    assert_eq!(list["finding_filters"]["edges"][0]["node"]["id_int"], pk);
    let d = data(&s, "mutation($id: ID!) { delete_finding_filter(id: $id) { ok } }", json!({"id": pk})).await;
    assert_eq!(d["delete_finding_filter"]["ok"], true);
    let msg = error(&s, new, json!({"f": {"name": "bad", "filter": "{oops"}})).await;
    assert!(msg.contains("Badly formed"));
}

#[tokio::test]
async fn scopes_groups_and_hierarchy() {
    let s = svc();
    let new = r#"mutation($f: FindingFilterInput!) { new_finding_scope_v2(finding_scope: $f) { ok finding_scope { id type } } }"#;
    let d = data(&s, new, json!({"f": {"name": "Criticals", "filter": r#"{"field":"severity","condition":"in","value":["5"]}"#}})).await;
    let scope = d["new_finding_scope_v2"]["finding_scope"]["id"].as_str().unwrap().to_string();
    assert_eq!(d["new_finding_scope_v2"]["finding_scope"]["type"], "SCOPE");
    let create = r#"mutation($s: [ID]) { create_scope_group(name: "Crit team", scope_ids: $s, users: ["a@x.io"]) { ok scope_group { id scopes { id } users } } }"#;
    let d = data(&s, create, json!({"s": [scope]})).await;
    let group = d["create_scope_group"]["scope_group"]["id"].as_str().unwrap().to_string();
    assert_eq!(d["create_scope_group"]["scope_group"]["scopes"][0]["id"], scope);
    let v = data(&s, VIEW, json!({"fc": {"scopesid": group}, "first": 50})).await;
    assert!(v["findings_view"]["edges"].as_array().unwrap().iter().all(|e| e["node"]["severity"] == 5));
    let upd = r#"mutation($id: ID!, $f: FindingFilterInput!) { update_finding_scope_v2(id: $id, finding_scope: $f) { ok finding_scope { name } } }"#;
    let d = data(
        &s,
        upd,
        json!({"id": scope, "f": {"filter": r#"{"field":"severity","condition":"in","value":["4"]}"#}}),
    )
    .await;
    assert_eq!(d["update_finding_scope_v2"]["ok"], true);
    let v = data(&s, VIEW, json!({"fc": {"scopesid": group}, "first": 50})).await;
    assert!(v["findings_view"]["edges"].as_array().unwrap().iter().all(|e| e["node"]["severity"] == 4));
    let edit = r#"mutation($id: ID!) { edit_scope_group(id: $id, name: "Renamed team") { ok scope_group { name scopes { id } } } }"#;
    let d = data(&s, edit, json!({"id": group})).await;
    assert_eq!(d["edit_scope_group"]["scope_group"]["name"], "Renamed team");
    let save =
        r#"mutation { save_scope_hierarchy { ok scope_hierarchy { nodes { name findings_count } } } }"#;
    let d = data(&s, save, json!({})).await;
    let nodes = d["save_scope_hierarchy"]["scope_hierarchy"]["nodes"].as_array().unwrap();
    let renamed = nodes.iter().find(|n| n["name"] == "Renamed team").unwrap();
    assert!(renamed["findings_count"].as_i64().unwrap() > 0);
    let d = data(&s, "mutation($id: ID!) { delete_finding_scope_v2(id: $id) { ok } }", json!({"id": scope}))
        .await;
    assert_eq!(d["delete_finding_scope_v2"]["ok"], true);
    let d = data(&s, edit, json!({"id": group})).await;
    assert!(d["edit_scope_group"]["scope_group"]["scopes"].as_array().unwrap().is_empty());
    let d = data(&s, "mutation($id: ID!) { delete_scope_group(id: $id) { ok } }", json!({"id": group})).await;
    assert_eq!(d["delete_scope_group"]["ok"], true);
    let msg = error(&s, create, json!({"s": [gid("FindingFilter", 1)]})).await;
    assert!(msg.contains("does not exist"), "a FILTER is not a scope: {msg}");
}

#[tokio::test]
async fn same_seed_same_answers() {
    let q = r#"{ findings_view(first: 20, sort: [SCORE_DESC]) { edges { node { id title score finding_id cloud_account resource_name description } } } }"#;
    let a = data(&GraphqlService::new(1500, 99).unwrap(), q, json!({})).await;
    let b = data(&GraphqlService::new(1500, 99).unwrap(), q, json!({})).await;
    let c = data(&GraphqlService::new(1500, 100).unwrap(), q, json!({})).await;
    assert_eq!(a, b);
    assert_ne!(a, c);
}

/// Timings in release: `cargo test --release -p secfindings-emulator --lib graphql::tests::perf -- --ignored --nocapture`
#[tokio::test]
#[ignore]
async fn perf() {
    use std::time::Instant;
    for n in [100_000usize, 1_000_000] {
        let t = Instant::now();
        let d = super::data::seed(n, 7).unwrap();
        let seeded = t.elapsed();
        drop(d);
        let t = Instant::now();
        let s = GraphqlService::new(n, 7).unwrap();
        let service = t.elapsed();
        let one = r#"query($id: ID!) { finding(id: $id) { id id_int finding_id last_reported_time discovered_time
            cloud_provider original_status cloud_account package_name datasource { friendly_name }
            main_resource { resource_name } title finding_score { score severity original_score } age description } }"#;
        for i in 0..50 {
            data(&s, one, json!({"id": i + 1})).await;
        }
        let runs = 2000;
        let t = Instant::now();
        for i in 0..runs {
            exec(&s, one, json!({"id": (i * 7919) % n + 1})).await;
        }
        let per_finding = t.elapsed() / runs as u32;
        let t = Instant::now();
        for _ in 0..runs {
            exec(&s, "{ __typename }", json!({})).await;
        }
        let typename = t.elapsed() / runs as u32;
        let t = Instant::now();
        for i in 0..runs {
            exec(&s, "query($id: ID!) { finding(id: $id) { id } }", json!({"id": (i * 7919) % n + 1})).await;
        }
        let finding_id_only = t.elapsed() / runs as u32;
        let page = r#"query($after: String, $fc: FiltersConfigInput, $sort: [FindingsViewSortEnum]) {
            findings_view(first: 100, after: $after, filters_config: $fc, sort: $sort) {
            pageInfo { hasNextPage endCursor } edges { cursor node { id id_int title score severity
            remediation_sub_phase cloud_account cloud_account_friendly_name cloud_provider resource_name
            resource_type sla_status age datasource_tags_values source actual_status { category } } } } }"#;
        data(&s, page, json!({})).await;
        let runs = 200;
        let t = Instant::now();
        let mut after = J::Null;
        for _ in 0..runs {
            let d = exec(&s, page, json!({"after": after})).await;
            after = d["data"]["findings_view"]["pageInfo"]["endCursor"].clone();
        }
        let per_page = t.elapsed() / runs;
        let fc = json!({"filtersjson": r#"{"operator":"and","operands":[{"field":"severity","condition":"in","value":["4","5"]},{"field":"actual_status","condition":"","value":{"field":"category","condition":"in","value":["OPEN"]}}]}"#});
        let t = Instant::now();
        let d = data(&s, page, json!({"fc": fc, "sort": ["SCORE_DESC", "AGE_ASC"]})).await;
        let cold = t.elapsed();
        let deep = super::paging::cursor(n / 5);
        let t = Instant::now();
        let runs = 100;
        for _ in 0..runs {
            data(&s, page, json!({"fc": fc, "sort": ["SCORE_DESC", "AGE_ASC"], "after": deep})).await;
        }
        let warm_deep = t.elapsed() / runs;
        assert!(d["findings_view"]["edges"].as_array().unwrap().len() == 100);
        println!(
            "n={n}: seed {seeded:?}, service {service:?}, finding(id) {per_finding:?} \
             (__typename {typename:?}, finding(id){{id}} {finding_id_only:?}), \
             view page {per_page:?}, filtered+sorted cold {cold:?}, warm deep page {warm_deep:?}"
        );
    }
}

#[test]
fn service_is_shareable_across_tasks() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<GraphqlService>();
}

/// Prints sample answers: `cargo test -p secfindings-emulator --lib graphql::tests::sample -- --ignored --nocapture`
#[tokio::test]
#[ignore]
async fn sample() {
    let s = GraphqlService::new(1000, 7).unwrap();
    let d = data(&s, FINDING, json!({"id": 42})).await;
    println!("{}", serde_json::to_string_pretty(&d).unwrap());
    let d = data(&s, VIEW, json!({"first": 2})).await;
    println!("{}", serde_json::to_string_pretty(&d).unwrap());
}
