//! Root Mutation resolvers. Every mutation changes the shared store atomically (one write
//! of a new store version) and returns graphene-style result objects `{ ok, <object> }`.
//!
//! Rule effects: an active scoring / status / SLA rule is applied to the findings it matches
//! when it is created, edited or (re)activated, since the emulator ingests no new findings;
//! deleting or deactivating a rule leaves the values it set. Timestamps of changes are on the
//! dataset's clock (its fixed "today" plus the store version in seconds), so runs repeat.

use std::sync::Arc;

use async_graphql::dynamic::{FieldValue, ObjectAccessor, ResolverContext};
use async_graphql::Value;

use super::data::{
    status_index, status_open, CommentRec, Data, FiltersConfig, ScopeGroupRec, ScoringRuleRec, SlaGroupRec,
    SlaRuleRec, StatusRuleRec, TicketSlaRec, FLAG_USER_SLA, PHASE_CLOSED, STATUSES,
};
use super::engine::Env;
use super::filter::{compile_config, matching};
use super::query::{
    filters_config, finding_index, get, get_bool, get_f64, get_i64, get_id, get_list, get_obj, get_str,
    scoring_value, sla_group_value, sla_rule_value, status_rule_value, ticket_sla_value, Res,
};
use super::util::{parse_datetime, parse_id, DAY};
use crate::caller::Caller;

pub(super) fn who(ctx: &ResolverContext<'_>) -> String {
    ctx.data::<Caller>().map(|c| c.token_name.clone()).unwrap_or_else(|_| "api".into())
}

pub(super) fn now(d: &Data) -> i64 {
    d.today + 12 * 3600 + d.version as i64
}

pub(super) fn ok(pairs: Vec<(&str, Value)>) -> Res {
    let mut m = super::util::Map::new();
    m.insert(async_graphql::Name::new("ok"), Value::Boolean(true));
    for (k, v) in pairs {
        m.insert(async_graphql::Name::new(k), v);
    }
    Ok(Some(FieldValue::value(Value::Object(m))))
}

pub(super) fn id_arg(ctx: &ResolverContext<'_>, type_name: &str) -> Result<u64, String> {
    let v = ctx.args.try_get("id").map_err(|e| e.message)?;
    parse_id(v.as_value(), type_name)
}

pub(super) fn input<'a>(ctx: &'a ResolverContext<'a>, name: &str) -> Result<ObjectAccessor<'a>, String> {
    get_obj(&ctx.args, name)?.ok_or_else(|| format!("{name} is required"))
}

pub(super) fn missing(type_name: &str, pk: u64) -> String {
    format!("{type_name} matching query does not exist (id {pk}).")
}

pub(super) fn position<T>(
    items: &[T],
    pk: u64,
    pk_of: impl Fn(&T) -> u64,
    type_name: &str,
) -> Result<usize, String> {
    items.iter().position(|x| pk_of(x) == pk).ok_or_else(|| missing(type_name, pk))
}

/// A table of records addressed by global id: where it is in the store, a record's pk and the
/// GraphQL type its ids name.
pub(super) struct Table<R: 'static> {
    rows: fn(&mut Data) -> &mut Vec<R>,
    pk: fn(&R) -> u64,
    type_name: &'static str,
}

pub(super) const SCORING_RULES: Table<ScoringRuleRec> =
    Table { rows: |d| &mut d.scoring_rules, pk: |r| r.pk, type_name: "ScoringRule" };
pub(super) const STATUS_RULES: Table<StatusRuleRec> =
    Table { rows: |d| &mut d.status_rules, pk: |r| r.pk, type_name: "StatusRuleObject" };
pub(super) const TICKET_SLA_RULES: Table<TicketSlaRec> =
    Table { rows: |d| &mut d.ticket_sla_rules, pk: |r| r.pk, type_name: "TicketSLARule" };
pub(super) const SLA_RULES: Table<SlaRuleRec> =
    Table { rows: |d| &mut d.sla_rules, pk: |r| r.pk, type_name: "SLAPreference" };
pub(super) const SCOPE_GROUPS: Table<ScopeGroupRec> =
    Table { rows: |d| &mut d.scope_groups, pk: |g| g.pk, type_name: "ScopeGroup" };

impl<R: Clone> Table<R> {
    /// Edits record `pk`: `change` edits a copy (with the store at hand, e.g. to apply a rule to
    /// the findings) and the copy is put back only when the change succeeds.
    pub(super) fn edit<T>(
        &self,
        d: &mut Data,
        pk: u64,
        change: impl FnOnce(&mut Data, &mut R) -> Result<T, String>,
    ) -> Result<T, String> {
        let pos = position((self.rows)(d), pk, self.pk, self.type_name)?;
        let mut r = (self.rows)(d).get(pos).cloned().ok_or_else(|| missing(self.type_name, pk))?;
        let v = change(d, &mut r)?;
        if let Some(slot) = (self.rows)(d).get_mut(pos) {
            *slot = r;
        }
        Ok(v)
    }

    /// A `delete_*` mutation: removes the record whose global id is the `id` argument.
    pub(super) fn delete(&self, env: &Env, ctx: &ResolverContext<'_>) -> Res {
        let pk = id_arg(ctx, self.type_name)?;
        env.store.write(|d| {
            let pos = position((self.rows)(d), pk, self.pk, self.type_name)?;
            (self.rows)(d).remove(pos);
            Ok(())
        })?;
        ok(vec![])
    }
}

pub(super) fn required<T>(v: Option<T>, what: &str) -> Result<T, String> {
    v.ok_or_else(|| format!("{what} is required"))
}

pub(super) fn check_fc(fc: &FiltersConfig, d: &Data) -> Result<(), String> {
    compile_config(fc, d).map(|_| ())
}

pub(super) fn opt_fc(o: &ObjectAccessor<'_>) -> Result<Option<FiltersConfig>, String> {
    if get(o, "filters_config").is_none() {
        return Ok(None);
    }
    let inner = get_obj(o, "filters_config")?;
    filters_config(inner.as_ref()).map(Some)
}

// ------------------------------------------------------------------ rule effects

pub(super) fn new_score(current: u16, method: &str, value: f64, round: Option<&str>) -> u16 {
    let cur = f64::from(current) / 100.0;
    let x = match method {
        "SET" => value,
        "INCREASE" => cur + value,
        "DECREASE" => cur - value,
        "MULTIPLY" => cur * value,
        _ => cur,
    };
    let x = x.clamp(0.0, 10.0);
    let x = match round {
        Some("ROUND") => (x * 10.0).round() / 10.0,
        Some("FLOOR") => (x * 10.0).floor() / 10.0,
        Some("CEIL") => (x * 10.0).ceil() / 10.0,
        _ => (x * 100.0).round() / 100.0,
    };
    (x * 100.0).round() as u16
}

pub(super) fn apply_scoring(d: &mut Data, r: &ScoringRuleRec) -> Result<i64, String> {
    let ids = matching(d, &compile_config(&r.fc, d)?);
    let findings = Arc::make_mut(&mut d.findings);
    let mut changed = 0;
    for i in ids {
        if let Some(f) = findings.get_mut(i as usize) {
            let s = new_score(f.score, &r.method, r.value, r.round.as_deref());
            if s != f.score {
                f.score = s;
                changed += 1;
            }
        }
    }
    Ok(changed)
}

pub(super) fn apply_status(d: &mut Data, r: &StatusRuleRec) -> Result<i64, String> {
    let idx = status_index(&r.status_key).ok_or_else(|| unknown_status(&r.status_key))?;
    let ids = matching(d, &compile_config(&r.fc, d)?);
    let findings = Arc::make_mut(&mut d.findings);
    let mut changed = 0;
    for i in ids {
        if let Some(f) = findings.get_mut(i as usize) {
            if f.status != idx {
                f.status = idx;
                if !status_open(idx) {
                    f.sub_phase = PHASE_CLOSED;
                } else if f.sub_phase == PHASE_CLOSED {
                    f.sub_phase = 1;
                }
                changed += 1;
            }
        }
    }
    Ok(changed)
}

pub(super) fn apply_sla(d: &mut Data, r: &SlaRuleRec) -> Result<i64, String> {
    let group = d.sla_groups.iter().find(|g| g.pk == r.group).ok_or_else(|| missing("SLAGroup", r.group))?;
    let gp = compile_config(&group.fc, d)?;
    let rp = compile_config(&r.fc, d)?;
    let ids: Vec<u32> = d
        .findings
        .iter()
        .enumerate()
        .filter(|(i, f)| {
            i64::from(f.severity) == r.severity
                && !f.removed()
                && f.flags & FLAG_USER_SLA == 0
                && gp.test(d, *i, f)
                && rp.test(d, *i, f)
        })
        .map(|(i, _)| i as u32)
        .collect();
    let findings = Arc::make_mut(&mut d.findings);
    let mut changed = 0;
    for i in ids {
        if let Some(f) = findings.get_mut(i as usize) {
            let due = (i64::from(f.discovered) + r.days * DAY).clamp(1, i64::from(u32::MAX)) as u32;
            if due != f.due {
                f.due = due;
                changed += 1;
            }
        }
    }
    Ok(changed)
}

pub(super) fn unknown_status(key: &str) -> String {
    let keys: Vec<&str> = STATUSES.iter().map(|s| s.key).collect();
    format!("Unknown status key {key:?}; expected one of {}", keys.join(", "))
}

// ------------------------------------------------------------------ scoring rules

pub(super) fn scoring_input(r: &mut ScoringRuleRec, o: &ObjectAccessor<'_>) -> Result<(), String> {
    if let Some(v) = get_str(o, "name")? {
        r.name = v;
    }
    if get(o, "description").is_some() {
        r.description = get_str(o, "description")?;
    }
    if let Some(fc) = opt_fc(o)? {
        r.fc = fc;
    }
    if let Some(v) = get_str(o, "method")? {
        r.method = v;
    }
    if let Some(v) = get_f64(o, "value")? {
        if !v.is_finite() {
            return Err("value must be a finite number".into());
        }
        r.value = v;
    }
    if get(o, "round_function").is_some() {
        r.round = get_str(o, "round_function")?;
    }
    if let Some(v) = get_i64(o, "priority")? {
        r.priority = v;
    }
    if let Some(v) = get_bool(o, "active")? {
        r.active = v;
    }
    Ok(())
}

pub fn add_scoring_rule(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let o = input(ctx, "scoring_rule")?;
    let by = who(ctx);
    let v = env.store.write(|d| {
        let mut r = ScoringRuleRec {
            pk: 0,
            name: String::new(),
            description: None,
            fc: FiltersConfig::default(),
            method: String::new(),
            value: f64::NAN,
            round: None,
            priority: d.scoring_rules.len() as i64 + 1,
            active: true,
            affected: 0,
            created_by: by,
            created: now(d),
            updated: now(d),
        };
        scoring_input(&mut r, &o)?;
        if r.name.trim().is_empty() {
            return Err("scoring_rule.name is required".into());
        }
        if r.method.is_empty() {
            return Err("scoring_rule.method is required".into());
        }
        if !r.value.is_finite() {
            return Err("scoring_rule.value is required".into());
        }
        check_fc(&r.fc, d)?;
        r.pk = d.alloc_pk("scoring_rule");
        if r.active {
            r.affected = apply_scoring(d, &r)?;
        }
        let v = scoring_value(&r);
        d.scoring_rules.push(r);
        Ok(v)
    })?;
    ok(vec![("scoring_rule", v)])
}

pub fn edit_scoring_rule(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let pk = id_arg(ctx, "ScoringRule")?;
    let o = input(ctx, "scoring_rule")?;
    let v = env.store.write(|d| {
        SCORING_RULES.edit(d, pk, |d, r| {
            scoring_input(r, &o)?;
            check_fc(&r.fc, d)?;
            r.updated = now(d);
            if r.active {
                r.affected = apply_scoring(d, r)?;
            }
            Ok(scoring_value(r))
        })
    })?;
    ok(vec![("scoring_rule", v)])
}

pub fn activate_scoring_rule(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let pk = id_arg(ctx, "ScoringRule")?;
    let active = required(get_bool(&ctx.args, "active")?, "active")?;
    let v = env.store.write(|d| {
        SCORING_RULES.edit(d, pk, |d, r| {
            r.active = active;
            r.updated = now(d);
            if active {
                r.affected = apply_scoring(d, r)?;
            }
            Ok(scoring_value(r))
        })
    })?;
    ok(vec![("scoring_rule", v)])
}

pub fn delete_scoring_rule(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    SCORING_RULES.delete(env, ctx)
}

// ------------------------------------------------------------------ status rules

pub(super) fn status_input(r: &mut StatusRuleRec, o: &ObjectAccessor<'_>) -> Result<(), String> {
    if let Some(v) = get_str(o, "name")? {
        r.name = v;
    }
    if get(o, "description").is_some() {
        r.description = get_str(o, "description")?;
    }
    if let Some(fc) = opt_fc(o)? {
        r.fc = fc;
    }
    if let Some(v) = get_str(o, "status_key")? {
        status_index(&v).ok_or_else(|| unknown_status(&v))?;
        r.status_key = v;
    }
    if let Some(v) = get_bool(o, "enabled")? {
        r.enabled = v;
    }
    if let Some(v) = get_i64(o, "priority")? {
        r.priority = v;
    }
    Ok(())
}

pub fn add_status_rule(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let o = input(ctx, "status_rule")?;
    let by = who(ctx);
    let v = env.store.write(|d| {
        let mut r = StatusRuleRec {
            pk: 0,
            name: String::new(),
            description: None,
            fc: FiltersConfig::default(),
            status_key: String::new(),
            enabled: true,
            priority: d.status_rules.len() as i64 + 1,
            affected: 0,
            created_by: by,
            created: now(d),
            updated: now(d),
        };
        status_input(&mut r, &o)?;
        if r.name.trim().is_empty() {
            return Err("status_rule.name is required".into());
        }
        if r.status_key.is_empty() {
            return Err("status_rule.status_key is required".into());
        }
        check_fc(&r.fc, d)?;
        r.pk = d.alloc_pk("status_rule");
        if r.enabled {
            r.affected = apply_status(d, &r)?;
        }
        let v = status_rule_value(&r);
        d.status_rules.push(r);
        Ok(v)
    })?;
    ok(vec![("status_rule", v)])
}

pub fn edit_status_rule(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let pk = id_arg(ctx, "StatusRuleObject")?;
    let o = input(ctx, "status_rule")?;
    let v = env.store.write(|d| {
        STATUS_RULES.edit(d, pk, |d, r| {
            status_input(r, &o)?;
            check_fc(&r.fc, d)?;
            r.updated = now(d);
            if r.enabled {
                r.affected = apply_status(d, r)?;
            }
            Ok(status_rule_value(r))
        })
    })?;
    ok(vec![("status_rule", v)])
}

pub fn enable_status_rule(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let pk = id_arg(ctx, "StatusRuleObject")?;
    let enabled = required(get_bool(&ctx.args, "enabled")?, "enabled")?;
    let v = env.store.write(|d| {
        STATUS_RULES.edit(d, pk, |d, r| {
            r.enabled = enabled;
            r.updated = now(d);
            if enabled {
                r.affected = apply_status(d, r)?;
            }
            Ok(status_rule_value(r))
        })
    })?;
    ok(vec![("status_rule", v)])
}

pub fn delete_status_rule(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    STATUS_RULES.delete(env, ctx)
}

// ------------------------------------------------------------------ ticket SLA rules

pub(super) fn ticket_sla_input(r: &mut TicketSlaRec, o: &ObjectAccessor<'_>) -> Result<(), String> {
    if let Some(v) = get_str(o, "name")? {
        r.name = v;
    }
    if get(o, "description").is_some() {
        r.description = get_str(o, "description")?;
    }
    if let Some(fc) = opt_fc(o)? {
        r.fc = fc;
    }
    if let Some(v) = get_i64(o, "days")? {
        if v < 0 {
            return Err("days must not be negative".into());
        }
        r.days = v;
    }
    if get(o, "provider_type").is_some() {
        r.provider = get_str(o, "provider_type")?;
    }
    if let Some(v) = get_bool(o, "enabled")? {
        r.enabled = v;
    }
    if let Some(v) = get_i64(o, "priority")? {
        r.priority = v;
    }
    Ok(())
}

pub fn add_ticket_sla_rule(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let o = input(ctx, "ticket_sla")?;
    let v = env.store.write(|d| {
        let mut r = TicketSlaRec {
            pk: 0,
            name: String::new(),
            description: None,
            fc: FiltersConfig::default(),
            days: -1,
            provider: None,
            enabled: true,
            priority: d.ticket_sla_rules.len() as i64 + 1,
            created: now(d),
            updated: now(d),
        };
        ticket_sla_input(&mut r, &o)?;
        if r.name.trim().is_empty() {
            return Err("ticket_sla.name is required".into());
        }
        if r.days < 0 {
            return Err("ticket_sla.days is required".into());
        }
        check_fc(&r.fc, d)?;
        r.pk = d.alloc_pk("ticket_sla_rule");
        let v = ticket_sla_value(&r);
        d.ticket_sla_rules.push(r);
        Ok(v)
    })?;
    ok(vec![("ticket_sla_rule", v)])
}

pub fn edit_ticket_sla_rule(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let pk = id_arg(ctx, "TicketSLARule")?;
    let o = input(ctx, "ticket_sla")?;
    let v = env.store.write(|d| {
        TICKET_SLA_RULES.edit(d, pk, |d, r| {
            ticket_sla_input(r, &o)?;
            check_fc(&r.fc, d)?;
            r.updated = now(d);
            Ok(ticket_sla_value(r))
        })
    })?;
    ok(vec![("ticket_sla_rule", v)])
}

pub fn enable_ticket_sla_rule(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let pk = id_arg(ctx, "TicketSLARule")?;
    let enabled = required(get_bool(&ctx.args, "enabled")?, "enabled")?;
    let v = env.store.write(|d| {
        let now = now(d);
        let r =
            d.ticket_sla_rules.iter_mut().find(|r| r.pk == pk).ok_or_else(|| missing("TicketSLARule", pk))?;
        r.enabled = enabled;
        r.updated = now;
        Ok(ticket_sla_value(r))
    })?;
    ok(vec![("ticket_sla_rule", v)])
}

pub fn delete_ticket_sla_rule(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    TICKET_SLA_RULES.delete(env, ctx)
}

// ------------------------------------------------------------------ SLA groups, rules, settings

pub fn add_sla_group(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let a = &ctx.args;
    let name = required(get_str(a, "name")?, "name")?;
    if name.trim().is_empty() {
        return Err("name is required".into());
    }
    let description = get_str(a, "description")?;
    let fc = filters_config(get_obj(a, "filters_config")?.as_ref())?;
    let priority = get_i64(a, "priority")?;
    let v = env.store.write(|d| {
        check_fc(&fc, d)?;
        let g = SlaGroupRec {
            pk: d.alloc_pk("sla_group"),
            name,
            description,
            fc,
            priority: priority.unwrap_or(d.sla_groups.len() as i64 + 1),
            created: now(d),
        };
        let v = sla_group_value(&g, d);
        d.sla_groups.push(g);
        Ok(v)
    })?;
    ok(vec![("sla_group", v)])
}

pub(super) fn sla_input(r: &mut SlaRuleRec, o: &ObjectAccessor<'_>, d: &Data) -> Result<(), String> {
    if let Some(v) = get_str(o, "name")? {
        r.name = v;
    }
    if let Some(g) = get_id(o, "sla_group_id", "SLAGroup")? {
        d.sla_groups.iter().find(|x| x.pk == g).ok_or_else(|| missing("SLAGroup", g))?;
        r.group = g;
    }
    if let Some(v) = get_i64(o, "severity")? {
        if !(1..=5).contains(&v) {
            return Err(format!("severity must be between 1 and 5, got {v}"));
        }
        r.severity = v;
    }
    if let Some(v) = get_i64(o, "days")? {
        if v < 0 {
            return Err("days must not be negative".into());
        }
        r.days = v;
    }
    if let Some(v) = get_i64(o, "at_risk_days")? {
        r.at_risk_days = v.max(0);
    }
    if let Some(fc) = opt_fc(o)? {
        check_fc(&fc, d)?;
        r.fc = fc;
    }
    if let Some(v) = get_bool(o, "active")? {
        r.active = v;
    }
    Ok(())
}

pub(super) fn new_sla_rule(d: &mut Data, o: &ObjectAccessor<'_>) -> Result<SlaRuleRec, String> {
    let mut r = SlaRuleRec {
        pk: 0,
        name: String::new(),
        group: 0,
        severity: 0,
        days: -1,
        at_risk_days: 7,
        fc: FiltersConfig::default(),
        active: true,
        affected: 0,
        created: now(d),
        updated: now(d),
    };
    sla_input(&mut r, o, d)?;
    if r.group == 0 {
        return Err("sla_rule.sla_group_id is required".into());
    }
    if r.severity == 0 {
        return Err("sla_rule.severity is required".into());
    }
    if r.days < 0 {
        return Err("sla_rule.days is required".into());
    }
    if r.name.is_empty() {
        r.name = format!("Severity {} in {} days", r.severity, r.days);
    }
    r.pk = d.alloc_pk("sla_rule");
    if r.active {
        r.affected = apply_sla(d, &r)?;
    }
    Ok(r)
}

pub fn add_sla_rule(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let o = input(ctx, "sla_rule")?;
    let v = env.store.write(|d| {
        let r = new_sla_rule(d, &o)?;
        let v = sla_rule_value(&r, d);
        d.sla_rules.push(r);
        Ok(v)
    })?;
    ok(vec![("sla_rule", v)])
}

pub(super) fn edit_sla(d: &mut Data, r: &mut SlaRuleRec, o: &ObjectAccessor<'_>) -> Result<Value, String> {
    sla_input(r, o, d)?;
    r.updated = now(d);
    if r.active {
        r.affected = apply_sla(d, r)?;
    }
    Ok(sla_rule_value(r, d))
}

pub fn edit_sla_rule(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let pk = id_arg(ctx, "SLAPreference")?;
    let o = input(ctx, "sla_rule")?;
    let v = env.store.write(|d| SLA_RULES.edit(d, pk, |d, r| edit_sla(d, r, &o)))?;
    ok(vec![("sla_rule", v)])
}

pub fn activate_sla_rule(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let pk = id_arg(ctx, "SLAPreference")?;
    let active = required(get_bool(&ctx.args, "active")?, "active")?;
    let v = env.store.write(|d| {
        SLA_RULES.edit(d, pk, |d, r| {
            r.active = active;
            r.updated = now(d);
            if active {
                r.affected = apply_sla(d, r)?;
            }
            Ok(sla_rule_value(r, d))
        })
    })?;
    ok(vec![("sla_rule", v)])
}

pub fn delete_sla_rule(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    SLA_RULES.delete(env, ctx)
}

pub fn update_sla_settings_v2(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let settings = ctx.args.try_get("sla_settings").map_err(|e| e.message)?;
    let list = settings.list().map_err(|e| e.message)?;
    let mut inputs = Vec::new();
    for item in list.iter() {
        inputs.push(item.object().map_err(|e| e.message)?);
    }
    let v = env.store.write(|d| {
        let mut out = Vec::new();
        for o in &inputs {
            let by_id = get_id(o, "id", "SLAPreference")?;
            let pk = match by_id {
                Some(pk) => Some(pk),
                None => {
                    let group = get_id(o, "sla_group_id", "SLAGroup")?;
                    let severity = get_i64(o, "severity")?;
                    match (group, severity) {
                        (Some(g), Some(s)) => {
                            d.sla_rules.iter().find(|r| r.group == g && r.severity == s).map(|r| r.pk)
                        }
                        _ => None,
                    }
                }
            };
            let v = match pk {
                Some(pk) => SLA_RULES.edit(d, pk, |d, r| edit_sla(d, r, o))?,
                None => {
                    let r = new_sla_rule(d, o)?;
                    let v = sla_rule_value(&r, d);
                    d.sla_rules.push(r);
                    v
                }
            };
            out.push(v);
        }
        Ok(Value::List(out))
    })?;
    ok(vec![("sla_preferences", v)])
}

pub fn set_user_sla_and_comment(env: &Env, ctx: &ResolverContext<'_>) -> Res {
    let a = &ctx.args;
    let due_text = required(get_str(a, "due_date")?, "due_date")?;
    let due = parse_datetime(&due_text)?;
    if !(1..=i64::from(u32::MAX)).contains(&due) {
        return Err(format!("due_date out of range: {due_text:?}"));
    }
    let comment = required(get_str(a, "comment")?, "comment")?;
    if comment.trim().is_empty() {
        return Err("comment must not be empty".into());
    }
    let ids = get_list(a, "finding_ids");
    let fc_obj = get_obj(a, "filters_config")?;
    if ids.is_none() && fc_obj.is_none() {
        return Err("Give finding_ids and/or filters_config to choose the findings".into());
    }
    let fc = filters_config(fc_obj.as_ref())?;
    let author = who(ctx);
    let count = env.store.write(|d| {
        let mut targets: Vec<u32> = match &ids {
            Some(list) => {
                let mut v = list
                    .iter()
                    .map(|x| finding_index(d, x).map(|i| i as u32))
                    .collect::<Result<Vec<_>, _>>()?;
                v.sort_unstable();
                v.dedup();
                v
            }
            None => (0..d.findings.len() as u32)
                .filter(|i| d.finding(*i as usize).is_some_and(|r| !r.removed()))
                .collect(),
        };
        if fc_obj.is_some() {
            let pred = compile_config(&fc, d)?;
            let data: &Data = d;
            targets.retain(|i| data.finding(*i as usize).is_some_and(|r| pred.test(data, *i as usize, r)));
        }
        let created = now(d);
        let text: Arc<str> = Arc::from(comment.as_str());
        let mut next = d.next_comment_pk;
        {
            let comments = Arc::make_mut(&mut d.extra_comments);
            for i in &targets {
                comments.entry(*i).or_default().push(CommentRec {
                    pk: next,
                    text: Arc::clone(&text),
                    author: author.clone(),
                    created,
                });
                next += 1;
            }
        }
        d.next_comment_pk = next;
        let findings = Arc::make_mut(&mut d.findings);
        for i in &targets {
            if let Some(f) = findings.get_mut(*i as usize) {
                f.due = due as u32;
                f.flags |= FLAG_USER_SLA;
            }
        }
        let severities: Vec<u8> =
            targets.iter().map(|i| findings.get(*i as usize).map_or(0, |f| f.severity)).collect();
        Ok((targets, severities, created))
    })?;
    let (targets, severities, at) = count;
    for (idx, severity) in targets.iter().zip(severities) {
        env.events.publish(
            "finding_changed",
            "sla_and_comment",
            at,
            super::events::Body::Finding { idx: *idx, severity },
        );
    }
    ok(vec![("updated_count", Value::from(targets.len()))])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_methods() {
        assert_eq!(new_score(500, "SET", 7.25, None), 725);
        assert_eq!(new_score(500, "SET", 7.25, Some("FLOOR")), 720);
        assert_eq!(new_score(500, "INCREASE", 1.0, Some("ROUND")), 600);
        assert_eq!(new_score(950, "INCREASE", 1.0, None), 1000);
        assert_eq!(new_score(50, "DECREASE", 1.0, None), 0);
        assert_eq!(new_score(400, "MULTIPLY", 1.5, Some("CEIL")), 600);
    }
}
