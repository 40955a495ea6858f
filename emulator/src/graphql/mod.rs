//! The GraphQL side of the emulator: schema, seeded store and resolvers.
//!
//! INTERFACE used by the HTTP layer (keep these signatures):
//! - `GraphqlService::new(findings, seed) -> Result<GraphqlService, String>`
//! - `GraphqlService::execute(&self, request, caller) -> async_graphql::Response`
//! - `GraphqlService::sdl(&self) -> String`
//!
//! Layout: `schema.graphql` is the whole model (with descriptions); `engine` turns it into a
//! dynamic schema with generic resolvers; `query` / `mutation` hold the root resolvers;
//! `data` seeds the deterministic store (SplitMix64, see `util::Rng`); `filter` implements the
//! filter JSON language; `findings` derives finding values and caches sorted views; `paging`
//! is graphene-django's Relay paging.
//!
//! Resolver errors are reported with their `path` (so the HTTP layer answers 200 with partial
//! data, as graphene does) and the failing field becomes null.

mod data;
mod engine;
mod filter;
mod findings;
mod mutation;
mod paging;
mod query;
mod util;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;

use crate::caller::Caller;
use engine::{Env, RootFn};

/// The SDL of the emulated API.
pub const SCHEMA_SDL: &str = include_str!("schema.graphql");

/// How many (filters, sort) result lists of findings_view stay cached for deep paging.
const VIEW_CACHE_ENTRIES: usize = 16;

fn roots() -> HashMap<&'static str, RootFn> {
    use mutation as m;
    use query as q;
    let list: [(&'static str, RootFn); 45] = [
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
        ("Mutation.activate_scoring_rule", m::activate_scoring_rule),
        ("Mutation.activate_sla_rule", m::activate_sla_rule),
        ("Mutation.add_scoring_rule", m::add_scoring_rule),
        ("Mutation.add_sla_group", m::add_sla_group),
        ("Mutation.add_sla_rule", m::add_sla_rule),
        ("Mutation.add_status_rule", m::add_status_rule),
        ("Mutation.add_ticket_sla_rule", m::add_ticket_sla_rule),
        ("Mutation.create_scope_group", m::create_scope_group),
        ("Mutation.delete_finding_filter", m::delete_finding_filter),
        ("Mutation.delete_finding_filter_v2", m::delete_finding_filter_v2),
        ("Mutation.delete_finding_scope_v2", m::delete_finding_scope_v2),
        ("Mutation.delete_scope_group", m::delete_scope_group),
        ("Mutation.delete_scoring_rule", m::delete_scoring_rule),
        ("Mutation.delete_sla_rule", m::delete_sla_rule),
        ("Mutation.delete_status_rule", m::delete_status_rule),
        ("Mutation.delete_ticket_sla_rule", m::delete_ticket_sla_rule),
        ("Mutation.edit_scope_group", m::edit_scope_group),
        ("Mutation.edit_scoring_rule", m::edit_scoring_rule),
        ("Mutation.edit_sla_rule", m::edit_sla_rule),
        ("Mutation.edit_status_rule", m::edit_status_rule),
        ("Mutation.edit_ticket_sla_rule", m::edit_ticket_sla_rule),
        ("Mutation.enable_status_rule", m::enable_status_rule),
        ("Mutation.enable_ticket_sla_rule", m::enable_ticket_sla_rule),
        ("Mutation.new_finding_filter", m::new_finding_filter),
        ("Mutation.new_finding_filter_v2", m::new_finding_filter_v2),
        ("Mutation.new_finding_scope_v2", m::new_finding_scope_v2),
        ("Mutation.save_scope_hierarchy", m::save_scope_hierarchy),
        ("Mutation.set_user_sla_and_comment", m::set_user_sla_and_comment),
        ("Mutation.update_finding_filter", m::update_finding_filter),
        ("Mutation.update_finding_filter_v2", m::update_finding_filter_v2),
        ("Mutation.update_finding_scope_v2", m::update_finding_scope_v2),
        ("Mutation.update_sla_settings_v2", m::update_sla_settings_v2),
    ];
    list.into_iter().collect()
}

/// The GraphQL service: the executable schema over a seeded, shared, mutable store.
pub struct GraphqlService {
    schema: async_graphql::dynamic::Schema,
}

impl GraphqlService {
    /// Builds the schema and seeds the store deterministically from `seed` (same seed, same
    /// data; timestamps count from a fixed "today" derived from the seed, not the wall clock).
    pub fn new(findings: usize, seed: u64) -> Result<Self, String> {
        let store = data::Store::new(data::seed(findings, seed)?);
        let env = Arc::new(Env { store, views: findings::ViewCache::new(VIEW_CACHE_ENTRIES) });
        let schema = engine::build(SCHEMA_SDL, env, &roots())?;
        Ok(Self { schema })
    }

    /// Executes one GraphQL request on behalf of `caller`.
    pub async fn execute(&self, request: async_graphql::Request, caller: Caller) -> async_graphql::Response {
        self.schema.execute(request.data(caller)).await
    }

    /// The schema in SDL, for documentation and tests.
    pub fn sdl(&self) -> String {
        self.schema.sdl()
    }
}
