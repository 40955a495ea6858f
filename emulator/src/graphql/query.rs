//! Root Query resolvers, argument helpers and the output values of the stored records.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use async_graphql::dynamic::{FieldValue, ObjectAccessor, ResolverContext, ValueAccessor};
use async_graphql::Value;

use super::data::{
    Data, FilterRec, FiltersConfig, Hierarchy, HierarchyNode, QueueRec, ScopeGroupRec, ScoringRuleRec,
    SlaGroupRec, SlaRuleRec, StatusRuleRec, TicketSlaRec,
};
use super::engine::{field_name, ConnPage, Env, NodeItem};
use super::filter::{self, compile_config, matching, FV};
use super::findings::{resource_value, sort_ids, status_value, FindingObj};
use super::paging::PageArgs;
use super::util::{
    civil_from_days, days_from_civil, dt, enum_v, format_date_days, from_json, obj, opt, parse_datetime,
    parse_id, s, strings, to_global_id, to_json, DAY,
};

pub type Res = Result<Option<FieldValue<'static>>, String>;

// ------------------------------------------------------------------ argument helpers

pub fn get<'a>(o: &'a ObjectAccessor<'a>, name: &str) -> Option<ValueAccessor<'a>> {
    o.get(name).filter(|v| !v.is_null())
}

pub fn get_str(o: &ObjectAccessor<'_>, name: &str) -> Result<Option<String>, String> {
    Ok(get(o, name).map(|v| match v.as_value() {
        Value::String(s) => s.clone(),
        Value::Enum(n) => n.to_string(),
        other => other.to_string(),
    }))
}

pub fn get_i64(o: &ObjectAccessor<'_>, name: &str) -> Result<Option<i64>, String> {
    get(o, name).map(|v| v.i64().map_err(|e| e.message)).transpose()
}

pub fn get_f64(o: &ObjectAccessor<'_>, name: &str) -> Result<Option<f64>, String> {
    get(o, name).map(|v| v.f64().map_err(|e| e.message)).transpose()
}

pub fn get_bool(o: &ObjectAccessor<'_>, name: &str) -> Result<Option<bool>, String> {
    get(o, name).map(|v| v.boolean().map_err(|e| e.message)).transpose()
}

pub fn get_list(o: &ObjectAccessor<'_>, name: &str) -> Option<Vec<Value>> {
    get(o, name).map(|v| match v.as_value() {
        Value::List(items) => items.iter().filter(|x| !matches!(x, Value::Null)).cloned().collect(),
        other => vec![other.clone()],
    })
}

pub fn get_str_list(o: &ObjectAccessor<'_>, name: &str) -> Option<Vec<String>> {
    get_list(o, name).map(|items| {
        items
            .into_iter()
            .map(|v| match v {
                Value::String(s) => s,
                Value::Enum(n) => n.to_string(),
                other => other.to_string(),
            })
            .collect()
    })
}

pub fn get_id(o: &ObjectAccessor<'_>, name: &str, type_name: &str) -> Result<Option<u64>, String> {
    get(o, name).map(|v| parse_id(v.as_value(), type_name)).transpose()
}

pub fn get_obj<'a>(o: &'a ObjectAccessor<'a>, name: &str) -> Result<Option<ObjectAccessor<'a>>, String> {
    get(o, name).map(|v| v.object().map_err(|e| e.message)).transpose()
}

/// A JSONString input: a JSON text (graphene parses it with json.loads); other values are
/// taken as already-decoded JSON. Returned as compact JSON text.
pub fn get_json_text(o: &ObjectAccessor<'_>, name: &str) -> Result<Option<String>, String> {
    get(o, name)
        .map(|v| match v.as_value() {
            Value::String(s) => serde_json::from_str::<serde_json::Value>(s)
                .map(|j| j.to_string())
                .map_err(|e| format!("Badly formed JSONString: {e}")),
            other => Ok(to_json(other).to_string()),
        })
        .transpose()
}

pub fn filters_config(o: Option<&ObjectAccessor<'_>>) -> Result<FiltersConfig, String> {
    let Some(o) = o else { return Ok(FiltersConfig::default()) };
    let json = |name: &str| -> Result<Option<String>, String> {
        let text = get_str(o, name)?.filter(|t| !t.trim().is_empty());
        if let Some(t) = &text {
            filter::validate(t).map_err(|e| format!("{name}: {e}"))?;
        }
        Ok(text)
    };
    Ok(FiltersConfig {
        filtersjson: json("filtersjson")?,
        scopesjson: json("scopesjson")?,
        scopesid: get_id(o, "scopesid", "ScopeGroup")?,
        filtersid: get_id(o, "filtersid", "FindingFilter")?,
        filters_fields_to_exclude: get_str_list(o, "filters_fields_to_exclude").unwrap_or_default(),
        filters_fields_to_include: get_str_list(o, "filters_fields_to_include").unwrap_or_default(),
        filters_fields_to_override: get_str_list(o, "filters_fields_to_override").unwrap_or_default(),
        scopes_fields_to_exclude: get_str_list(o, "scopes_fields_to_exclude").unwrap_or_default(),
        scopes_fields_to_include: get_str_list(o, "scopes_fields_to_include").unwrap_or_default(),
        scopes_fields_to_override: get_str_list(o, "scopes_fields_to_override").unwrap_or_default(),
        scope_group: get_id(o, "scope_group", "ScopeGroup")?,
    })
}

pub fn args_fc(ctx: &ResolverContext<'_>) -> Result<FiltersConfig, String> {
    let o = get_obj(&ctx.args, "filters_config")?;
    filters_config(o.as_ref())
}

fn page(ctx: &ResolverContext<'_>, items: Vec<Value>) -> Res {
    let args = PageArgs::from_args(&ctx.args)?;
    Ok(Some(FieldValue::owned_any(ConnPage::from_values(&args, items, field_name(ctx))?)))
}

fn name_matches(name: &str, needle: &Option<String>) -> bool {
    needle.as_ref().is_none_or(|n| name.to_lowercase().contains(&n.to_lowercase()))
}

#[derive(Clone, PartialEq, PartialOrd)]
pub enum SortKey {
    Int(i64),
    Str(String),
}

/// Sorts by UPPER_SNAKE `<FIELD>_ASC|DESC` values; earlier values take precedence and the
/// original order breaks ties.
pub fn sort_by_enum<T>(
    items: &mut [T],
    sort: &[String],
    key: impl Fn(&T, &str) -> Option<SortKey>,
) -> Result<(), String> {
    for value in sort.iter().rev() {
        let (field, desc) = match value.rsplit_once('_') {
            Some((f, "ASC")) => (f, false),
            Some((f, "DESC")) => (f, true),
            _ => return Err(format!("Unknown sort value {value:?}")),
        };
        if let Some(first) = items.first() {
            if key(first, field).is_none() {
                return Err(format!("Unknown sort value {value:?}"));
            }
        }
        items.sort_by(|a, b| {
            let o = key(a, field).partial_cmp(&key(b, field)).unwrap_or(Ordering::Equal);
            if desc {
                o.reverse()
            } else {
                o
            }
        });
    }
    Ok(())
}

fn sort_arg(ctx: &ResolverContext<'_>) -> Vec<String> {
    get_str_list(&ctx.args, "sort").unwrap_or_default()
}

// ------------------------------------------------------------------ record values

pub fn fc_value(fc: &FiltersConfig) -> Value {
    obj([
        ("filtersjson", opt(fc.filtersjson.clone())),
        ("scopesjson", opt(fc.scopesjson.clone())),
        ("scopesid", opt(fc.scopesid.map(|p| to_global_id("ScopeGroup", p)))),
        ("filtersid", opt(fc.filtersid.map(|p| to_global_id("FindingFilter", p)))),
        ("filters_fields_to_exclude", strings(&fc.filters_fields_to_exclude)),
        ("filters_fields_to_include", strings(&fc.filters_fields_to_include)),
        ("filters_fields_to_override", strings(&fc.filters_fields_to_override)),
        ("scopes_fields_to_exclude", strings(&fc.scopes_fields_to_exclude)),
        ("scopes_fields_to_include", strings(&fc.scopes_fields_to_include)),
        ("scopes_fields_to_override", strings(&fc.scopes_fields_to_override)),
        ("scope_group", opt(fc.scope_group.map(|p| to_global_id("ScopeGroup", p)))),
    ])
}

pub fn filter_value(f: &FilterRec) -> Value {
    obj([
        ("id", Value::String(to_global_id("FindingFilter", f.pk))),
        ("id_int", Value::from(f.pk)),
        ("name", s(&f.name)),
        ("description", opt(f.description.clone())),
        ("type", enum_v(if f.scope { "SCOPE" } else { "FILTER" })),
        ("filter", s(&f.filter)),
        ("created_by", s(&f.created_by)),
        ("created_time", dt(f.created)),
        ("last_updated_time", dt(f.updated)),
    ])
}

pub fn scope_group_value(g: &ScopeGroupRec, data: &Data) -> Value {
    let scopes: Vec<Value> = g
        .scopes
        .iter()
        .filter_map(|pk| data.filters.iter().find(|f| f.pk == *pk))
        .map(filter_value)
        .collect();
    obj([
        ("id", Value::String(to_global_id("ScopeGroup", g.pk))),
        ("id_int", Value::from(g.pk)),
        ("name", s(&g.name)),
        ("description", opt(g.description.clone())),
        ("scopes", Value::List(scopes)),
        ("users", strings(&g.users)),
        ("created_time", dt(g.created)),
        ("last_updated_time", dt(g.updated)),
    ])
}

pub fn scoring_value(r: &ScoringRuleRec) -> Value {
    obj([
        ("id", Value::String(to_global_id("ScoringRule", r.pk))),
        ("id_int", Value::from(r.pk)),
        ("name", s(&r.name)),
        ("description", opt(r.description.clone())),
        ("filters_config", fc_value(&r.fc)),
        ("method", enum_v(&r.method)),
        ("value", Value::from(r.value)),
        ("round_function", r.round.as_deref().map_or(Value::Null, enum_v)),
        ("priority", Value::from(r.priority)),
        ("active", Value::Boolean(r.active)),
        ("affected_findings", Value::from(r.affected)),
        ("created_by", s(&r.created_by)),
        ("created_time", dt(r.created)),
        ("last_updated_time", dt(r.updated)),
    ])
}

pub fn status_rule_value(r: &StatusRuleRec) -> Value {
    let status =
        super::data::status_index(&r.status_key).map_or(Value::Null, |i| status_value(usize::from(i)));
    obj([
        ("id", Value::String(to_global_id("StatusRuleObject", r.pk))),
        ("id_int", Value::from(r.pk)),
        ("name", s(&r.name)),
        ("description", opt(r.description.clone())),
        ("filters_config", fc_value(&r.fc)),
        ("status_key", s(&r.status_key)),
        ("status", status),
        ("enabled", Value::Boolean(r.enabled)),
        ("priority", Value::from(r.priority)),
        ("affected_findings", Value::from(r.affected)),
        ("created_by", s(&r.created_by)),
        ("created_time", dt(r.created)),
        ("last_updated_time", dt(r.updated)),
    ])
}

pub fn sla_rule_value(r: &SlaRuleRec, data: &Data) -> Value {
    let group = data.sla_groups.iter().find(|g| g.pk == r.group);
    obj([
        ("id", Value::String(to_global_id("SLAPreference", r.pk))),
        ("id_int", Value::from(r.pk)),
        ("name", s(&r.name)),
        ("sla_group_id", Value::String(to_global_id("SLAGroup", r.group))),
        ("sla_group_name", opt(group.map(|g| g.name.clone()))),
        ("severity", Value::from(r.severity)),
        ("days", Value::from(r.days)),
        ("at_risk_days", Value::from(r.at_risk_days)),
        ("filters_config", fc_value(&r.fc)),
        ("active", Value::Boolean(r.active)),
        ("affected_findings", Value::from(r.affected)),
        ("created_time", dt(r.created)),
        ("last_updated_time", dt(r.updated)),
    ])
}

pub fn sla_group_value(g: &SlaGroupRec, data: &Data) -> Value {
    let rules: Vec<Value> =
        data.sla_rules.iter().filter(|r| r.group == g.pk).map(|r| sla_rule_value(r, data)).collect();
    obj([
        ("id", Value::String(to_global_id("SLAGroup", g.pk))),
        ("id_int", Value::from(g.pk)),
        ("name", s(&g.name)),
        ("description", opt(g.description.clone())),
        ("filters_config", fc_value(&g.fc)),
        ("priority", Value::from(g.priority)),
        ("sla_rules", Value::List(rules)),
        ("created_time", dt(g.created)),
    ])
}

pub fn ticket_sla_value(r: &TicketSlaRec) -> Value {
    obj([
        ("id", Value::String(to_global_id("TicketSLARule", r.pk))),
        ("id_int", Value::from(r.pk)),
        ("name", s(&r.name)),
        ("description", opt(r.description.clone())),
        ("filters_config", fc_value(&r.fc)),
        ("days", Value::from(r.days)),
        ("provider_type", r.provider.as_deref().map_or(Value::Null, enum_v)),
        ("enabled", Value::Boolean(r.enabled)),
        ("priority", Value::from(r.priority)),
        ("created_time", dt(r.created)),
        ("last_updated_time", dt(r.updated)),
    ])
}

fn queue_value(q: &QueueRec) -> Value {
    obj([
        ("id", Value::String(to_global_id("RemediationQueue", q.pk))),
        ("id_int", Value::from(q.pk)),
        ("title", s(&q.title)),
        ("description", s(&q.description)),
        ("cron", s(&q.cron)),
        ("state", enum_v(q.state)),
        ("status", enum_v(q.status)),
        ("priority", enum_v(q.priority)),
        ("endpoint_type", enum_v(q.endpoint)),
        ("ticket_provider_type", q.provider.map_or(Value::Null, enum_v)),
        ("max_concurrent_opened_tickets", Value::from(q.max_tickets)),
        ("opened_tickets_count", Value::from(q.opened)),
        ("filters_config", fc_value(&q.fc)),
        ("created_time", dt(q.created)),
        ("last_run_time", q.last_run.map_or(Value::Null, dt)),
    ])
}

fn node_value(n: &HierarchyNode, node_type: &str, type_name: &str) -> Value {
    obj([
        ("id", Value::String(to_global_id(type_name, n.pk))),
        ("name", s(&n.name)),
        ("node_type", s(node_type)),
        ("findings_count", Value::from(n.count)),
        (
            "children",
            Value::List(n.children.iter().map(|c| node_value(c, "SCOPE", "FindingFilter")).collect()),
        ),
    ])
}

pub fn hierarchy_value(h: &Hierarchy, data: &Data, include_unscoped: bool) -> Value {
    let mut nodes: Vec<Value> = h.groups.iter().map(|g| node_value(g, "SCOPE_GROUP", "ScopeGroup")).collect();
    if include_unscoped {
        nodes.push(obj([
            ("id", Value::Null),
            ("name", s("Unscoped")),
            ("node_type", s("UNSCOPED")),
            ("findings_count", Value::from(h.unscoped)),
            ("children", Value::List(Vec::new())),
        ]));
    }
    obj([
        ("generated_time", dt(h.generated)),
        ("total_findings", Value::from(h.total)),
        ("nodes", Value::List(nodes)),
        ("scope_groups", Value::List(data.scope_groups.iter().map(|g| scope_group_value(g, data)).collect())),
    ])
}

/// Counts the findings of every scope and scope group in one pass over the findings.
pub fn compute_hierarchy(data: &Data) -> Result<Hierarchy, String> {
    let scopes: Vec<&FilterRec> = data.filters.iter().filter(|f| f.scope).collect();
    let preds = scopes
        .iter()
        .map(|f| compile_config(&FiltersConfig::json(&f.filter), data))
        .collect::<Result<Vec<_>, _>>()?;
    let mut scope_counts = vec![0usize; scopes.len()];
    let mut group_counts = vec![0usize; data.scope_groups.len()];
    let group_members: Vec<Vec<usize>> = data
        .scope_groups
        .iter()
        .map(|g| g.scopes.iter().filter_map(|pk| scopes.iter().position(|f| f.pk == *pk)).collect())
        .collect();
    let mut unscoped = 0;
    let mut hits = vec![false; scopes.len()];
    for (i, rec) in data.findings.iter().enumerate().filter(|(_, r)| !r.removed()) {
        let mut any = false;
        for (k, p) in preds.iter().enumerate() {
            let hit = p.test(data, i, rec);
            if let Some(h) = hits.get_mut(k) {
                *h = hit;
            }
            if hit {
                any = true;
                if let Some(c) = scope_counts.get_mut(k) {
                    *c += 1;
                }
            }
        }
        if !any {
            unscoped += 1;
        }
        for (g, members) in group_members.iter().enumerate() {
            if members.iter().any(|k| hits.get(*k).copied().unwrap_or(false)) {
                if let Some(c) = group_counts.get_mut(g) {
                    *c += 1;
                }
            }
        }
    }
    let groups = data
        .scope_groups
        .iter()
        .zip(group_members.iter())
        .zip(group_counts.iter())
        .map(|((g, members), count)| HierarchyNode {
            pk: g.pk,
            name: g.name.clone(),
            count: *count,
            children: members
                .iter()
                .filter_map(|k| {
                    let f = scopes.get(*k)?;
                    Some(HierarchyNode {
                        pk: f.pk,
                        name: f.name.clone(),
                        count: scope_counts.get(*k).copied().unwrap_or(0),
                        children: Vec::new(),
                    })
                })
                .collect(),
        })
        .collect();
    Ok(Hierarchy { generated: data.today, total: data.findings.len(), groups, unscoped })
}

// ------------------------------------------------------------------ queries

pub fn finding_index(data: &Data, v: &Value) -> Result<usize, String> {
    let pk = parse_id(v, "Finding").or_else(|e| parse_id(v, "FindingsView").map_err(|_| e))?;
    let idx = (pk as usize).checked_sub(1).filter(|i| data.finding(*i).is_some_and(|r| !r.removed()));
    idx.ok_or_else(|| format!("Finding matching query does not exist (id {pk})."))
}

pub fn q_finding(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let data = env.store.snapshot();
    let id = ctx.args.try_get("id").map_err(|e| e.message)?;
    let idx = finding_index(&data, id.as_value())?;
    Ok(Some(FieldValue::owned_any(FindingObj { data, idx: idx as u32, view: false })))
}

pub fn q_findings_view(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let data = env.store.snapshot();
    let fc = args_fc(ctx)?;
    let sort = sort_arg(ctx);
    let args = PageArgs::from_args(&ctx.args)?;
    let key = format!("{}|{:?}|{:?}", data.version, fc, sort);
    let ids = env.views.get_or_compute(key, || {
        let pred = compile_config(&fc, &data)?;
        let mut ids = matching(&data, &pred);
        sort_ids(&data, &mut ids, &sort)?;
        Ok(ids)
    })?;
    let page = ConnPage::build(&args, ids.len(), field_name(ctx), |i| match ids.get(i) {
        Some(idx) => NodeItem::Finding(FindingObj { data: Arc::clone(&data), idx: *idx, view: true }),
        None => NodeItem::Val(Value::Null),
    })?;
    Ok(Some(FieldValue::owned_any(page)))
}

pub fn q_finding_filters(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let data = env.store.snapshot();
    let ty = get_str(&ctx.args, "type")?;
    let name = get_str(&ctx.args, "name")?;
    let mut items: Vec<&FilterRec> = data
        .filters
        .iter()
        .filter(|f| ty.as_deref().is_none_or(|t| (t == "SCOPE") == f.scope))
        .filter(|f| name_matches(&f.name, &name))
        .collect();
    sort_by_enum(&mut items, &sort_arg(ctx), |f, k| match k {
        "ID" => Some(SortKey::Int(f.pk as i64)),
        "NAME" => Some(SortKey::Str(f.name.to_lowercase())),
        "CREATED_TIME" => Some(SortKey::Int(f.created)),
        _ => None,
    })?;
    page(ctx, items.into_iter().map(filter_value).collect())
}

fn resources(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let data = env.store.snapshot();
    let a = &ctx.args;
    let types = get_str_list(a, "resource_type");
    let providers = get_str_list(a, "cloud_provider");
    let accounts = get_str_list(a, "cloud_account");
    let search = get_str(a, "search")?.map(|s| s.to_lowercase());
    let has_findings = get_bool(a, "has_findings")?;
    let res = &data.statics.resources;
    let mut ids: Vec<u32> = res
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            let acct = r.account();
            types.as_ref().is_none_or(|t| t.iter().any(|x| x == r.rtype()))
                && providers.as_ref().is_none_or(|p| p.iter().any(|x| x.eq_ignore_ascii_case(acct.provider)))
                && accounts.as_ref().is_none_or(|c| c.iter().any(|x| x == acct.id || x == acct.name))
                && has_findings.is_none_or(|h| h == (r.findings > 0))
                && search.as_ref().is_none_or(|q| {
                    r.name().to_lowercase().contains(q.as_str())
                        || r.resource_id().to_lowercase().contains(q.as_str())
                })
        })
        .map(|(i, _)| i as u32)
        .collect();
    let sort = sort_arg(ctx);
    let ranks = sort.iter().any(|s| s.starts_with("RESOURCE_NAME")).then(|| data.resource_name_rank());
    sort_by_enum(&mut ids, &sort, |i, k| {
        let r = res.get(*i as usize)?;
        match k {
            "ID" => Some(SortKey::Int(i64::from(*i))),
            "RESOURCE_NAME" => {
                Some(SortKey::Int(ranks.and_then(|n| n.get(*i as usize)).map_or(0, |v| i64::from(*v))))
            }
            "FINDINGS_COUNT" => Some(SortKey::Int(i64::from(r.findings))),
            "LAST_SEEN" => Some(SortKey::Int(i64::from(r.last_seen))),
            _ => None,
        }
    })?;
    let args = PageArgs::from_args(a)?;
    let page = ConnPage::build(&args, ids.len(), field_name(ctx), |i| {
        match ids.get(i).and_then(|idx| res.get(*idx as usize).map(|r| (idx, r))) {
            Some((idx, r)) => NodeItem::Val(resource_value(*idx as usize, r)),
            None => NodeItem::Val(Value::Null),
        }
    })?;
    Ok(Some(FieldValue::owned_any(page)))
}

pub fn q_get_resources(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    resources(env, ctx)
}

pub fn q_get_resources_ch(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    resources(env, ctx)
}

pub fn q_remediation_queues(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let data = env.store.snapshot();
    let state = get_str(&ctx.args, "state")?;
    let title = get_str(&ctx.args, "title")?;
    let mut items: Vec<&QueueRec> = data
        .queues
        .iter()
        .filter(|q| state.as_deref().is_none_or(|s| s == q.state) && name_matches(&q.title, &title))
        .collect();
    const PRIO: [&str; 4] = ["LOW", "MEDIUM", "HIGH", "CRITICAL"];
    sort_by_enum(&mut items, &sort_arg(ctx), |q, k| match k {
        "ID" => Some(SortKey::Int(q.pk as i64)),
        "TITLE" => Some(SortKey::Str(q.title.to_lowercase())),
        "PRIORITY" => Some(SortKey::Int(PRIO.iter().position(|p| *p == q.priority).unwrap_or(0) as i64)),
        "CREATED_TIME" => Some(SortKey::Int(q.created)),
        _ => None,
    })?;
    page(ctx, items.into_iter().map(queue_value).collect())
}

pub fn q_scope_hierarchy(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let include = get_bool(&ctx.args, "include_unscoped")?.unwrap_or(false);
    let mut data = env.store.snapshot();
    if data.hierarchy.is_none() {
        // The seeded store behaves as if the hierarchy had been saved once at startup.
        env.store.write(|d| {
            if d.hierarchy.is_none() {
                d.hierarchy = Some(Arc::new(compute_hierarchy(d)?));
            }
            Ok(())
        })?;
        data = env.store.snapshot();
    }
    let h = data.hierarchy.clone().ok_or("scope hierarchy unavailable")?;
    Ok(Some(FieldValue::value(hierarchy_value(&h, &data, include))))
}

pub fn q_scoring_rules(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let data = env.store.snapshot();
    let name = get_str(&ctx.args, "name")?;
    let active = get_bool(&ctx.args, "active")?;
    let mut items: Vec<&ScoringRuleRec> = data
        .scoring_rules
        .iter()
        .filter(|r| name_matches(&r.name, &name) && active.is_none_or(|a| a == r.active))
        .collect();
    sort_by_enum(&mut items, &sort_arg(ctx), |r, k| match k {
        "ID" => Some(SortKey::Int(r.pk as i64)),
        "NAME" => Some(SortKey::Str(r.name.to_lowercase())),
        "PRIORITY" => Some(SortKey::Int(r.priority)),
        "CREATED_TIME" => Some(SortKey::Int(r.created)),
        _ => None,
    })?;
    page(ctx, items.into_iter().map(scoring_value).collect())
}

pub fn q_sla_groups(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let data = env.store.snapshot();
    let name = get_str(&ctx.args, "name")?;
    let mut items: Vec<&SlaGroupRec> =
        data.sla_groups.iter().filter(|g| name_matches(&g.name, &name)).collect();
    sort_by_enum(&mut items, &sort_arg(ctx), |g, k| match k {
        "ID" => Some(SortKey::Int(g.pk as i64)),
        "NAME" => Some(SortKey::Str(g.name.to_lowercase())),
        "PRIORITY" => Some(SortKey::Int(g.priority)),
        _ => None,
    })?;
    page(ctx, items.into_iter().map(|g| sla_group_value(g, &data)).collect())
}

pub fn q_sla_preferences(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let data = env.store.snapshot();
    let group = get_id(&ctx.args, "sla_group_id", "SLAGroup")?;
    let severity = get_i64(&ctx.args, "severity")?;
    let active = get_bool(&ctx.args, "active")?;
    let mut items: Vec<&SlaRuleRec> = data
        .sla_rules
        .iter()
        .filter(|r| {
            group.is_none_or(|g| g == r.group)
                && severity.is_none_or(|s| s == r.severity)
                && active.is_none_or(|a| a == r.active)
        })
        .collect();
    sort_by_enum(&mut items, &sort_arg(ctx), |r, k| match k {
        "ID" => Some(SortKey::Int(r.pk as i64)),
        "SEVERITY" => Some(SortKey::Int(r.severity)),
        "DAYS" => Some(SortKey::Int(r.days)),
        _ => None,
    })?;
    page(ctx, items.into_iter().map(|r| sla_rule_value(r, &data)).collect())
}

pub fn q_status_rules(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let data = env.store.snapshot();
    let name = get_str(&ctx.args, "name")?;
    let enabled = get_bool(&ctx.args, "enabled")?;
    let mut items: Vec<&StatusRuleRec> = data
        .status_rules
        .iter()
        .filter(|r| name_matches(&r.name, &name) && enabled.is_none_or(|e| e == r.enabled))
        .collect();
    items.sort_by_key(|r| (r.priority, r.pk));
    page(ctx, items.into_iter().map(status_rule_value).collect())
}

pub fn q_ticket_sla_rules(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let data = env.store.snapshot();
    let name = get_str(&ctx.args, "name")?;
    let enabled = get_bool(&ctx.args, "enabled")?;
    let mut items: Vec<&TicketSlaRec> = data
        .ticket_sla_rules
        .iter()
        .filter(|r| name_matches(&r.name, &name) && enabled.is_none_or(|e| e == r.enabled))
        .collect();
    sort_by_enum(&mut items, &sort_arg(ctx), |r, k| match k {
        "ID" => Some(SortKey::Int(r.pk as i64)),
        "NAME" => Some(SortKey::Str(r.name.to_lowercase())),
        "PRIORITY" => Some(SortKey::Int(r.priority)),
        _ => None,
    })?;
    page(ctx, items.into_iter().map(ticket_sla_value).collect())
}

// ------------------------------------------------------------------ trends

/// The first day (days since the epoch) of the bucket of `day` at `scale`.
pub fn bucket_start(day: i64, scale: &str) -> Result<i64, String> {
    let (y, m, _) = civil_from_days(day);
    Ok(match scale {
        "DAY" => day,
        // 1970-01-01 was a Thursday: Monday-based weekday = (day + 3) mod 7.
        "WEEK" => day - (day + 3).rem_euclid(7),
        "MONTH" => days_from_civil(y, m, 1),
        "QUARTER" => days_from_civil(y, (m - 1) / 3 * 3 + 1, 1),
        "YEAR" => days_from_civil(y, 1, 1),
        other => return Err(format!("Unknown time scale {other:?}")),
    })
}

#[derive(Default)]
struct Acc {
    count: u64,
    sum: f64,
    min: Option<f64>,
    max: Option<f64>,
}

fn group_keys(v: FV) -> Vec<serde_json::Value> {
    match v {
        FV::Null => vec![serde_json::Value::Null],
        FV::Int(i) => vec![i.into()],
        FV::Float(f) => vec![f.into()],
        FV::Time(t) => vec![super::util::format_datetime(t).into()],
        FV::Str(s) => vec![s.into()],
        FV::List(l) => l.into_iter().map(serde_json::Value::from).collect(),
    }
}

pub fn trends(data: &Data, ctx_args: &ObjectAccessor<'_>, fc: &FiltersConfig) -> Result<Value, String> {
    let scale = get_str(ctx_args, "time_scale")?.ok_or("time_scale is required")?;
    let agg = get_str(ctx_args, "aggregate_function")?.ok_or("aggregate_function is required")?;
    let field = get_str(ctx_args, "field")?.unwrap_or_else(|| "score".into());
    let date_field = get_str(ctx_args, "date_field")?.unwrap_or_else(|| "discovered_time".into());
    let group_by = get_str(ctx_args, "group_by")?.map(|g| filter::F::parse(&g)).transpose()?;
    let start = get_str(ctx_args, "start")?.map(|s| parse_datetime(&s)).transpose()?;
    let end = get_str(ctx_args, "end")?.map(|s| parse_datetime(&s)).transpose()?;
    let date_f = match date_field.as_str() {
        "discovered_time" => filter::F::Discovered,
        "last_reported_time" => filter::F::LastReported,
        "due_date" => filter::F::DueDate,
        other => {
            return Err(format!(
                "Unknown date_field {other:?}; expected discovered_time, last_reported_time or due_date"
            ))
        }
    };
    let value_f = match field.as_str() {
        "score" | "finding_score.score" => filter::F::Score,
        "severity" | "finding_score.severity" => filter::F::Severity,
        "age" => filter::F::Age,
        "original_score" | "finding_score.original_score" => filter::F::OriginalScore,
        other => {
            return Err(format!(
                "Cannot aggregate field {other:?}; expected score, severity, age or original_score"
            ))
        }
    };
    if !["COUNT", "SUM", "AVG", "MIN", "MAX"].contains(&agg.as_str()) {
        return Err(format!("Unknown aggregate function {agg:?}"));
    }
    bucket_start(0, &scale)?;
    let pred = compile_config(fc, data)?;
    let mut buckets: BTreeMap<(i64, String), (serde_json::Value, Acc)> = BTreeMap::new();
    for (i, rec) in data.findings.iter().enumerate().filter(|(_, r)| !r.removed()) {
        if !pred.test(data, i, rec) {
            continue;
        }
        let FV::Time(t) = date_f.of(data, i, rec) else { continue };
        if start.is_some_and(|s| t < s) || end.is_some_and(|e| t >= e) {
            continue;
        }
        let day = bucket_start(t.div_euclid(DAY), &scale)?;
        let x = match value_f.of(data, i, rec) {
            FV::Int(v) => Some(v as f64),
            FV::Float(v) => Some(v),
            _ => None,
        };
        let groups = match group_by {
            Some(g) => group_keys(g.of(data, i, rec)),
            None => vec![serde_json::Value::Null],
        };
        for g in groups {
            let entry = buckets.entry((day, g.to_string())).or_insert_with(|| (g.clone(), Acc::default()));
            let acc = &mut entry.1;
            if agg == "COUNT" {
                acc.count += 1;
            } else if let Some(x) = x {
                acc.count += 1;
                acc.sum += x;
                acc.min = Some(acc.min.map_or(x, |m| m.min(x)));
                acc.max = Some(acc.max.map_or(x, |m| m.max(x)));
            }
        }
    }
    let round = |x: f64| (x * 10_000.0).round() / 10_000.0;
    let points: Vec<serde_json::Value> = buckets
        .into_iter()
        .map(|((day, _), (group, acc))| {
            let value: serde_json::Value = match agg.as_str() {
                "COUNT" => acc.count.into(),
                "SUM" => round(acc.sum).into(),
                "AVG" if acc.count > 0 => round(acc.sum / acc.count as f64).into(),
                "MIN" => acc.min.map_or(serde_json::Value::Null, |m| round(m).into()),
                "MAX" => acc.max.map_or(serde_json::Value::Null, |m| round(m).into()),
                _ => serde_json::Value::Null,
            };
            let mut p = serde_json::Map::new();
            p.insert("time".into(), format_date_days(day).into());
            if group_by.is_some() {
                p.insert("group".into(), group);
            }
            p.insert("value".into(), value);
            serde_json::Value::Object(p)
        })
        .collect();
    Ok(from_json(serde_json::Value::Array(points)))
}

/// `subscription_cursor`: where a subscription that starts now resumes from (modelled).
pub fn q_subscription_cursor(env: &Env, _ctx: &ResolverContext<'_>) -> Res {
    Ok(Some(FieldValue::value(Value::String(env.events.head().to_string()))))
}

pub fn q_trends(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let data = env.store.snapshot();
    let fc = args_fc(ctx)?;
    Ok(Some(FieldValue::value(trends(&data, &ctx.args, &fc)?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets() {
        let d = days_from_civil(2025, 5, 15); // a Thursday
        assert_eq!(format_date_days(bucket_start(d, "DAY").unwrap()), "2025-05-15");
        assert_eq!(format_date_days(bucket_start(d, "WEEK").unwrap()), "2025-05-12");
        assert_eq!(format_date_days(bucket_start(d, "MONTH").unwrap()), "2025-05-01");
        assert_eq!(format_date_days(bucket_start(d, "QUARTER").unwrap()), "2025-04-01");
        assert_eq!(format_date_days(bucket_start(d, "YEAR").unwrap()), "2025-01-01");
        assert!(bucket_start(d, "DECADE").is_err());
    }

    #[test]
    fn sort_by_enum_orders_and_rejects_unknown() {
        let mut v = vec![(2, "b"), (1, "c"), (3, "a")];
        sort_by_enum(&mut v, &["NAME_ASC".into()], |x, k| match k {
            "ID" => Some(SortKey::Int(x.0)),
            "NAME" => Some(SortKey::Str(x.1.into())),
            _ => None,
        })
        .unwrap();
        assert_eq!(v[0].1, "a");
        let r = sort_by_enum(&mut v, &["COLOR_ASC".into()], |_, _| None::<SortKey>);
        assert!(r.is_err());
    }
}
