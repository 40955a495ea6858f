//! The GraphQL side of the emulator: schema, seeded store and resolvers.
//!
//! INTERFACE used by the HTTP layer (keep these signatures):
//! - `GraphqlService::new(findings, seed) -> Result<GraphqlService, String>`
//! - `GraphqlService::execute(&self, request, caller) -> async_graphql::Response`
//! - `GraphqlService::sdl(&self) -> String`
//!
//! Layout: `schema/schema.graphql` (the `secfindings-schema` crate) is the whole model (with descriptions); `engine` turns it into a
//! dynamic schema with generic resolvers; `query` / `mutation` hold the root resolvers;
//! `data` seeds the deterministic store (SplitMix64, see `util::Rng`); `filter` implements the
//! filter JSON language; `findings` derives finding values and caches sorted views; `paging`
//! is graphene-django's Relay paging.
//!
//! Resolver errors are reported with their `path` (so the HTTP layer answers 200 with partial
//! data, as graphene does) and the failing field becomes null.

mod data;
mod engine;
mod events;
mod filter;
mod findings;
mod known;
mod mutation;
mod paging;
mod query;
mod scopes;
mod util;

#[cfg(test)]
mod known_tests;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;

use crate::caller::Caller;
use engine::{Env, RootFn};
pub use known::Profile;

/// The SDL of the emulated API.
pub const SCHEMA_SDL: &str = secfindings_schema::SDL;

/// How many (filters, sort) result lists of findings_view stay cached for deep paging.
const VIEW_CACHE_ENTRIES: usize = 16;

fn roots() -> HashMap<&'static str, RootFn> {
    use mutation as m;
    use query as q;
    use scopes as s;
    let list: [(&'static str, RootFn); 46] = [
        ("Query.finding", q::q_finding),
        ("Query.finding_filters", q::q_finding_filters),
        ("Query.findings_view", q::q_findings_view),
        ("Query.get_resources", q::q_get_resources),
        ("Query.get_resources_ch", q::q_get_resources_ch),
        ("Query.remediation_queues", q::q_remediation_queues),
        ("Query.scope_hierarchy", q::q_scope_hierarchy),
        ("Query.scoring_rules", q::q_scoring_rules),
        ("Query.sla_groups", q::q_sla_groups),
        ("Query.sla_preferences", q::q_sla_preferences),
        ("Query.status_rules", q::q_status_rules),
        ("Query.ticket_sla_rules", q::q_ticket_sla_rules),
        ("Query.trends", q::q_trends),
        ("Query.subscription_cursor", q::q_subscription_cursor),
        ("Mutation.activate_scoring_rule", m::activate_scoring_rule),
        ("Mutation.activate_sla_rule", m::activate_sla_rule),
        ("Mutation.add_scoring_rule", m::add_scoring_rule),
        ("Mutation.add_sla_group", m::add_sla_group),
        ("Mutation.add_sla_rule", m::add_sla_rule),
        ("Mutation.add_status_rule", m::add_status_rule),
        ("Mutation.add_ticket_sla_rule", m::add_ticket_sla_rule),
        ("Mutation.create_scope_group", s::create_scope_group),
        ("Mutation.delete_finding_filter", s::delete_finding_filter),
        ("Mutation.delete_finding_filter_v2", s::delete_finding_filter_v2),
        ("Mutation.delete_finding_scope_v2", s::delete_finding_scope_v2),
        ("Mutation.delete_scope_group", s::delete_scope_group),
        ("Mutation.delete_scoring_rule", m::delete_scoring_rule),
        ("Mutation.delete_sla_rule", m::delete_sla_rule),
        ("Mutation.delete_status_rule", m::delete_status_rule),
        ("Mutation.delete_ticket_sla_rule", m::delete_ticket_sla_rule),
        ("Mutation.edit_scope_group", s::edit_scope_group),
        ("Mutation.edit_scoring_rule", m::edit_scoring_rule),
        ("Mutation.edit_sla_rule", m::edit_sla_rule),
        ("Mutation.edit_status_rule", m::edit_status_rule),
        ("Mutation.edit_ticket_sla_rule", m::edit_ticket_sla_rule),
        ("Mutation.enable_status_rule", m::enable_status_rule),
        ("Mutation.enable_ticket_sla_rule", m::enable_ticket_sla_rule),
        ("Mutation.new_finding_filter", s::new_finding_filter),
        ("Mutation.new_finding_filter_v2", s::new_finding_filter_v2),
        ("Mutation.new_finding_scope_v2", s::new_finding_scope_v2),
        ("Mutation.save_scope_hierarchy", s::save_scope_hierarchy),
        ("Mutation.set_user_sla_and_comment", m::set_user_sla_and_comment),
        ("Mutation.update_finding_filter", s::update_finding_filter),
        ("Mutation.update_finding_filter_v2", s::update_finding_filter_v2),
        ("Mutation.update_finding_scope_v2", s::update_finding_scope_v2),
        ("Mutation.update_sla_settings_v2", m::update_sla_settings_v2),
    ];
    list.into_iter().collect()
}

/// The GraphQL service: the executable schema over a seeded, shared, mutable store.
pub struct GraphqlService {
    schema: async_graphql::dynamic::Schema,
    env: Arc<Env>,
}

impl GraphqlService {
    /// Builds the schema and seeds the store deterministically from `seed` (same seed, same
    /// data; timestamps count from a fixed "today" derived from the seed, not the wall clock).
    pub fn new(findings: usize, seed: u64) -> Result<Self, String> {
        Self::with_profile(findings, seed, Profile::Default)
    }

    /// As [`GraphqlService::new`], serving the model of `profile` (see `known.rs`).
    pub fn with_profile(findings: usize, seed: u64, profile: Profile) -> Result<Self, String> {
        let mut data = data::seed(findings, seed)?;
        data.profile = profile;
        let store = data::Store::new(data);
        let env = Arc::new(Env {
            store,
            views: findings::ViewCache::new(VIEW_CACHE_ENTRIES),
            events: Arc::new(events::EventBus::default()),
            mutations_applied: std::sync::atomic::AtomicU64::new(0),
        });
        let sdl = match profile {
            Profile::Default => SCHEMA_SDL.to_owned(),
            Profile::Known => known::sdl(SCHEMA_SDL)?,
        };
        let schema = engine::build(&sdl, Arc::clone(&env), &roots())?;
        Ok(Self { schema, env })
    }

    /// Root mutation fields that ran without an error since start (or the last reset).
    pub fn mutations_applied(&self) -> u64 {
        self.env.mutations_applied.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn reset_mutations_applied(&self) {
        self.env.mutations_applied.store(0, std::sync::atomic::Ordering::Relaxed);
    }

    /// Executes one GraphQL request on behalf of `caller`.
    pub async fn execute(&self, request: async_graphql::Request, caller: Caller) -> async_graphql::Response {
        self.schema.execute(request.data(caller)).await
    }

    /// The executable schema (a cheap handle), for the WebSocket transport of subscriptions.
    pub fn schema(&self) -> async_graphql::dynamic::Schema {
        self.schema.clone()
    }

    /// Subscriptions open on the server now.
    pub fn active_subscriptions(&self) -> usize {
        self.env.events.active()
    }

    /// Test hook: creates a finding like an existing one (same template, resource and source)
    /// with `severity` (1-5) and publishes `finding_created`. A new finding is as the service
    /// makes one: status New (OPEN), sub-phase NEW, no tickets, due as the seeded SLA groups say;
    /// `status` (a key or a category) and `due` (unix seconds) say otherwise. Returns the new
    /// finding's id and the event's cursor.
    pub fn create_finding(
        &self,
        severity: u8,
        status: Option<&str>,
        due: Option<i64>,
    ) -> Result<(u64, String), String> {
        if !(1..=5).contains(&severity) {
            return Err(format!("severity must be 1-5, not {severity}"));
        }
        let status = status_of(status.unwrap_or("10"))?;
        let due = match due {
            None => None,
            Some(t) => Some(u32::try_from(t).map_err(|_| format!("due_date out of range: {t}"))?),
        };
        let (idx, at) = self.env.store.write(|d| {
            let template = d
                .findings
                .iter()
                .find(|f| f.severity == severity)
                .or_else(|| d.findings.first())
                .copied()
                .ok_or_else(|| "the store has no finding to copy".to_string())?;
            let at = d.today + 12 * 3600 + d.version as i64;
            let mut rec = template;
            rec.severity = severity;
            rec.discovered = u32::try_from(at).unwrap_or(u32::MAX);
            rec.last_reported = rec.discovered;
            rec.status = status;
            rec.sub_phase = if data::status_open(status) { 0 } else { data::PHASE_CLOSED };
            rec.counts = 0;
            let days = data::sla_days(d.resource(rec.resource).account().env, severity);
            rec.due = match due {
                Some(t) => t,
                None => u32::try_from(at.saturating_add(days.saturating_mul(86_400))).unwrap_or(u32::MAX),
            };
            rec.flags = if due.is_some() { data::FLAG_USER_SLA } else { 0 };
            let findings = Arc::make_mut(&mut d.findings);
            findings.push(rec);
            Ok((findings.len() - 1, at))
        })?;
        let idx32 = u32::try_from(idx).map_err(|_| "too many findings".to_string())?;
        let seq = self.env.events.publish(
            "finding_created",
            "created",
            at,
            events::Body::Finding { idx: idx32, severity },
        );
        Ok((idx as u64 + 1, seq.to_string()))
    }

    /// Test hook: publishes `finding_changed` for an existing finding (by id), as a mutation would.
    pub fn change_finding(&self, id: u64, kind: &str) -> Result<String, String> {
        let data = self.env.store.snapshot();
        let idx =
            usize::try_from(id).ok().and_then(|i| i.checked_sub(1)).filter(|i| *i < data.findings.len());
        let Some(idx) = idx else { return Err(format!("Finding matching query does not exist (id {id}).")) };
        let severity = data.findings.get(idx).map_or(0, |f| f.severity);
        let at = data.today + 12 * 3600 + data.version as i64;
        let idx = u32::try_from(idx).map_err(|_| "too many findings".to_string())?;
        Ok(self
            .env
            .events
            .publish("finding_changed", kind, at, events::Body::Finding { idx, severity })
            .to_string())
    }

    /// The emulator's clock (unix seconds): the dataset's fixed "today", noon, plus one second per
    /// change of the store, so that every change happens at a later time.
    pub fn now(&self) -> i64 {
        mutation::now(&self.env.store.snapshot())
    }

    /// Test hook: changes a finding as a scanner or an analyst would and publishes
    /// `finding_changed` of `kind`. Returns the event's cursor.
    pub fn update_finding(&self, id: u64, update: FindingUpdate, kind: &str) -> Result<String, String> {
        if let Some(s) = update.severity {
            if !(1..=5).contains(&s) {
                return Err(format!("severity must be 1-5, not {s}"));
            }
        }
        let status = match update.status.as_deref() {
            None => None,
            Some(key) => Some(status_of(key)?),
        };
        let score = match update.score {
            None => None,
            Some(v) if v.is_finite() && (0.0..=100.0).contains(&v) => Some((v * 100.0).round() as u16),
            Some(v) => return Err(format!("score must be a number from 0 to 100, not {v}")),
        };
        let reported = match update.last_reported {
            None => None,
            Some(t) => Some(u32::try_from(t).map_err(|_| format!("last_reported_time out of range: {t}"))?),
        };
        let (idx, severity, at) = self.env.store.write(|d| {
            let at = mutation::now(d);
            let idx = live_index(d, id)?;
            let findings = Arc::make_mut(&mut d.findings);
            let rec = findings.get_mut(idx).ok_or_else(|| not_found(id))?;
            if let Some(s) = update.severity {
                rec.severity = s;
            }
            if let Some(s) = score {
                rec.score = s;
            }
            if let Some(st) = status {
                rec.status = st;
                rec.sub_phase = if data::status_open(st) { 1 } else { data::PHASE_CLOSED };
            }
            if let Some(t) = reported {
                rec.last_reported = t;
            }
            if update.remove {
                rec.flags |= data::FLAG_REMOVED;
            }
            Ok((idx, rec.severity, at))
        })?;
        let idx = u32::try_from(idx).map_err(|_| "too many findings".to_string())?;
        Ok(self
            .env
            .events
            .publish("finding_changed", kind, at, events::Body::Finding { idx, severity })
            .to_string())
    }

    /// The schema in SDL, for documentation and tests.
    pub fn sdl(&self) -> String {
        self.schema.sdl()
    }
}

/// What [`GraphqlService::update_finding`] changes; `None` leaves a field as it is.
#[derive(Clone, Debug, Default)]
pub struct FindingUpdate {
    pub severity: Option<u8>,
    /// The score as the API shows it (0-100).
    pub score: Option<f64>,
    /// A status key ("20") or a category (OPEN, FIXED, IGNORED: its first status).
    pub status: Option<String>,
    /// Unix seconds.
    pub last_reported: Option<i64>,
    /// Remove the finding: no query sees it afterwards.
    pub remove: bool,
}

fn not_found(id: u64) -> String {
    format!("Finding matching query does not exist (id {id}).")
}

fn live_index(d: &data::Data, id: u64) -> Result<usize, String> {
    usize::try_from(id)
        .ok()
        .and_then(|i| i.checked_sub(1))
        .filter(|i| d.finding(*i).is_some_and(|r| !r.removed()))
        .ok_or_else(|| not_found(id))
}

fn status_of(key: &str) -> Result<u8, String> {
    if let Some(i) = data::status_index(key) {
        return Ok(i);
    }
    let category = key.to_ascii_uppercase();
    data::STATUSES.iter().position(|s| s.category == category).and_then(|i| u8::try_from(i).ok()).ok_or_else(
        || {
            let keys: Vec<&str> = data::STATUSES.iter().map(|s| s.key).collect();
            format!("unknown status {key:?}: a status key ({}) or OPEN, FIXED, IGNORED", keys.join(", "))
        },
    )
}
