//! Finding filters and finding scopes (a scope is a finding filter of type SCOPE).

use super::schema_tables as args;
use super::types::{mutation, query, Operation, Returns, ID_ONLY};
use crate::core::retry::RetryClass::Mutation as NotResent;

pub(super) const OPERATIONS: &[Operation] = &[
    query(
        "finding_filters",
        "All finding filters.",
        args::FINDING_FILTERS,
        Returns::Connection("FindingFilter"),
        ID_ONLY,
    ),
    mutation(
        "new_finding_filter_v2",
        "Create a finding filter.",
        args::NEW_FINDING_FILTER_V2,
        Returns::Object("NewFindingFilterV2"),
        "ok",
        NotResent,
    ),
    mutation(
        "update_finding_filter_v2",
        "Update a finding filter.",
        args::UPDATE_FINDING_FILTER_V2,
        Returns::Object("UpdateFindingFilterV2"),
        "ok",
        NotResent,
    ),
    mutation(
        "delete_finding_filter_v2",
        "Delete a finding filter.",
        args::DELETE_FINDING_FILTER_V2,
        Returns::Object("DeleteFindingFilterV2"),
        "ok",
        NotResent,
    ),
    mutation(
        "new_finding_filter",
        "Creates a finding filter.",
        args::NEW_FINDING_FILTER,
        Returns::Object("NewFindingFilterV2"),
        "ok",
        NotResent,
    )
    .deprecated("new_finding_filter_v2"),
    mutation(
        "update_finding_filter",
        "Updates a finding filter.",
        args::UPDATE_FINDING_FILTER,
        Returns::Object("UpdateFindingFilterV2"),
        "ok",
        NotResent,
    )
    .deprecated("update_finding_filter_v2"),
    mutation(
        "delete_finding_filter",
        "Deletes a finding filter.",
        args::DELETE_FINDING_FILTER,
        Returns::Object("DeleteFindingFilterV2"),
        "ok",
        NotResent,
    )
    .deprecated("delete_finding_filter_v2"),
    mutation(
        "new_finding_scope_v2",
        "Create a finding scope filter (which findings are included in queries and rules).",
        args::NEW_FINDING_SCOPE_V2,
        Returns::Object("NewFindingScopeV2"),
        "ok",
        NotResent,
    ),
    mutation(
        "update_finding_scope_v2",
        "Update a finding scope filter's configuration.",
        args::UPDATE_FINDING_SCOPE_V2,
        Returns::Object("UpdateFindingScopeV2"),
        "ok",
        NotResent,
    ),
    mutation(
        "delete_finding_scope_v2",
        "Delete a finding scope filter. Affects any rules or queries that use the scope.",
        args::DELETE_FINDING_SCOPE_V2,
        Returns::Object("DeleteFindingScopeV2"),
        "ok",
        NotResent,
    ),
];
