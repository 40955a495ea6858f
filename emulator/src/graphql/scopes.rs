//! Root Mutation resolvers of finding filters, finding scopes, scope groups and the scope
//! hierarchy (the rules and SLAs are in `mutation`, whose helpers these share).

use std::sync::Arc;

use async_graphql::dynamic::{ObjectAccessor, ResolverContext};
use async_graphql::Value;

use super::data::{Data, FilterRec, ScopeGroupRec};
use super::engine::Env;
use super::filter;
use super::mutation::{id_arg, input, missing, now, ok, required, who, SCOPE_GROUPS};
use super::query::{
    compute_hierarchy, filter_value, get, get_json_text, get_list, get_str, get_str_list, hierarchy_value,
    scope_group_value, Res,
};
use super::util::parse_id;

// ------------------------------------------------------------------ finding filters and scopes

fn filter_input(f: &mut FilterRec, o: &ObjectAccessor<'_>) -> Result<(), String> {
    if let Some(v) = get_str(o, "name")? {
        f.name = v;
    }
    if get(o, "description").is_some() {
        f.description = get_str(o, "description")?;
    }
    if let Some(text) = get_json_text(o, "filter")? {
        filter::validate(&text)?;
        f.filter = text;
    }
    Ok(())
}

fn create_filter(
    env: &Env,
    ctx: &ResolverContext<'_>,
    o: &ObjectAccessor<'_>,
    scope: bool,
) -> Result<Value, String> {
    let by = who(ctx);
    env.store.write(|d| {
        let mut f = FilterRec {
            pk: 0,
            name: String::new(),
            description: None,
            scope,
            filter: String::new(),
            created_by: by,
            created: now(d),
            updated: now(d),
        };
        filter_input(&mut f, o)?;
        if f.name.trim().is_empty() {
            return Err("name is required".into());
        }
        if f.filter.is_empty() {
            return Err("filter is required".into());
        }
        f.pk = d.alloc_pk("filter");
        let v = filter_value(&f);
        d.filters.push(f);
        Ok(v)
    })
}

fn update_filter(env: &Env, pk: u64, o: &ObjectAccessor<'_>, scope: bool) -> Result<Value, String> {
    env.store.write(|d| {
        let now = now(d);
        let f = d
            .filters
            .iter_mut()
            .find(|f| f.pk == pk && f.scope == scope)
            .ok_or_else(|| missing(if scope { "FindingScope" } else { "FindingFilter" }, pk))?;
        filter_input(f, o)?;
        f.updated = now;
        Ok(filter_value(f))
    })
}

fn delete_filter(env: &Env, pk: u64, scope: bool) -> Result<(), String> {
    env.store.write(|d| {
        let pos = d
            .filters
            .iter()
            .position(|f| f.pk == pk && f.scope == scope)
            .ok_or_else(|| missing(if scope { "FindingScope" } else { "FindingFilter" }, pk))?;
        d.filters.remove(pos);
        if scope {
            for g in &mut d.scope_groups {
                g.scopes.retain(|s| *s != pk);
            }
        }
        Ok(())
    })
}

pub fn new_finding_filter_v2(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let o = input(ctx, "finding_filter")?;
    let v = create_filter(env, ctx, &o, false)?;
    ok(vec![("finding_filter", v)])
}

pub fn update_finding_filter_v2(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let pk = id_arg(ctx, "FindingFilter")?;
    let o = input(ctx, "finding_filter")?;
    let v = update_filter(env, pk, &o, false)?;
    ok(vec![("finding_filter", v)])
}

pub fn delete_finding_filter_v2(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let pk = id_arg(ctx, "FindingFilter")?;
    delete_filter(env, pk, false)?;
    ok(vec![])
}

/// The deprecated v1 operations take flat arguments: the arguments object is the input.
pub fn new_finding_filter(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let v = create_filter(env, ctx, &ctx.args, false)?;
    ok(vec![("finding_filter", v)])
}

pub fn update_finding_filter(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let pk = id_arg(ctx, "FindingFilter")?;
    let v = update_filter(env, pk, &ctx.args, false)?;
    ok(vec![("finding_filter", v)])
}

pub fn delete_finding_filter(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    delete_finding_filter_v2(env, ctx)
}

pub fn new_finding_scope_v2(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let o = input(ctx, "finding_scope")?;
    let v = create_filter(env, ctx, &o, true)?;
    ok(vec![("finding_scope", v)])
}

pub fn update_finding_scope_v2(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let pk = id_arg(ctx, "FindingFilter")?;
    let o = input(ctx, "finding_scope")?;
    let v = update_filter(env, pk, &o, true)?;
    ok(vec![("finding_scope", v)])
}

pub fn delete_finding_scope_v2(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let pk = id_arg(ctx, "FindingFilter")?;
    delete_filter(env, pk, true)?;
    ok(vec![])
}

// ------------------------------------------------------------------ scope groups and hierarchy

fn scope_ids(a: &ObjectAccessor<'_>, d: &Data) -> Result<Option<Vec<u64>>, String> {
    let Some(list) = get_list(a, "scope_ids") else { return Ok(None) };
    let mut out = Vec::new();
    for v in list {
        let pk = parse_id(&v, "FindingFilter")?;
        if !d.filters.iter().any(|f| f.pk == pk && f.scope) {
            return Err(missing("FindingScope", pk));
        }
        if !out.contains(&pk) {
            out.push(pk);
        }
    }
    Ok(Some(out))
}

pub fn create_scope_group(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let a = &ctx.args;
    let name = required(get_str(a, "name")?, "name")?;
    if name.trim().is_empty() {
        return Err("name is required".into());
    }
    let description = get_str(a, "description")?;
    let users = get_str_list(a, "users").unwrap_or_default();
    let v = env.store.write(|d| {
        let scopes = scope_ids(a, d)?.unwrap_or_default();
        let g = ScopeGroupRec {
            pk: d.alloc_pk("scope_group"),
            name,
            description,
            scopes,
            users,
            created: now(d),
            updated: now(d),
        };
        let v = scope_group_value(&g, d);
        d.scope_groups.push(g);
        Ok(v)
    })?;
    ok(vec![("scope_group", v)])
}

pub fn edit_scope_group(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let pk = id_arg(ctx, "ScopeGroup")?;
    let a = &ctx.args;
    let name = get_str(a, "name")?;
    let description = get(a, "description").map(|_| get_str(a, "description")).transpose()?;
    let users = get_str_list(a, "users");
    let v = env.store.write(|d| {
        let scopes = scope_ids(a, d)?;
        let now = now(d);
        SCOPE_GROUPS.edit(d, pk, |d, g| {
            if let Some(n) = name {
                g.name = n;
            }
            if let Some(desc) = description {
                g.description = desc;
            }
            if let Some(u) = users {
                g.users = u;
            }
            if let Some(s) = scopes {
                g.scopes = s;
            }
            g.updated = now;
            Ok(scope_group_value(g, d))
        })
    })?;
    ok(vec![("scope_group", v)])
}

pub fn delete_scope_group(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    SCOPE_GROUPS.delete(env, ctx)
}

pub fn save_scope_hierarchy(env: &Env, _ctx: &ResolverContext<'_>) -> Res {
    let v = env.store.write(|d| {
        let mut h = compute_hierarchy(d)?;
        h.generated = now(d);
        let v = hierarchy_value(&h, d, false);
        d.hierarchy = Some(Arc::new(h));
        Ok(v)
    })?;
    ok(vec![("scope_hierarchy", v)])
}
