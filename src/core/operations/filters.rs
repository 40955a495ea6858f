//! Finding filters and finding scopes (a scope is a finding filter of type SCOPE).

use super::{arg, mutation, query, Operation, Returns, ID_ONLY};
use crate::core::retry::RetryClass::Mutation as NotResent;

pub(super) const OPERATIONS: &[Operation] = &[
    query(
        "finding_filters",
        "All finding filters.",
        &[
            arg("type", "FindingFilterTypeEnum"),
            arg("name", "String"),
            arg("sort", "[FindingFilterSortEnum]"),
        ],
        Returns::Connection("FindingFilter"),
        ID_ONLY,
    ),
    mutation(
        "new_finding_filter_v2",
        "Create a finding filter.",
        &[arg("finding_filter", "FindingFilterInput!")],
        Returns::Object("NewFindingFilterV2"),
        "ok",
        NotResent,
    ),
    mutation(
        "update_finding_filter_v2",
        "Update a finding filter.",
        &[arg("id", "ID!"), arg("finding_filter", "FindingFilterInput!")],
        Returns::Object("UpdateFindingFilterV2"),
        "ok",
        NotResent,
    ),
    mutation(
        "delete_finding_filter_v2",
        "Delete a finding filter.",
        &[arg("id", "ID!")],
        Returns::Object("DeleteFindingFilterV2"),
        "ok",
        NotResent,
    ),
    mutation(
        "new_finding_filter",
        "Creates a finding filter.",
        &[arg("name", "String!"), arg("filter", "JSONString!"), arg("description", "String")],
        Returns::Object("NewFindingFilterV2"),
        "ok",
        NotResent,
    )
    .deprecated("new_finding_filter_v2"),
    mutation(
        "update_finding_filter",
        "Updates a finding filter.",
        &[arg("id", "ID!"), arg("name", "String"), arg("filter", "JSONString"), arg("description", "String")],
        Returns::Object("UpdateFindingFilterV2"),
        "ok",
        NotResent,
    )
    .deprecated("update_finding_filter_v2"),
    mutation(
        "delete_finding_filter",
        "Deletes a finding filter.",
        &[arg("id", "ID!")],
        Returns::Object("DeleteFindingFilterV2"),
        "ok",
        NotResent,
    )
    .deprecated("delete_finding_filter_v2"),
    mutation(
        "new_finding_scope_v2",
        "Create a finding scope filter (which findings are included in queries and rules).",
        &[arg("finding_scope", "FindingFilterInput!")],
        Returns::Object("NewFindingScopeV2"),
        "ok",
        NotResent,
    ),
    mutation(
        "update_finding_scope_v2",
        "Update a finding scope filter's configuration.",
        &[arg("id", "ID!"), arg("finding_scope", "FindingFilterInput!")],
        Returns::Object("UpdateFindingScopeV2"),
        "ok",
        NotResent,
    ),
    mutation(
        "delete_finding_scope_v2",
        "Delete a finding scope filter. Affects any rules or queries that use the scope.",
        &[arg("id", "ID!")],
        Returns::Object("DeleteFindingScopeV2"),
        "ok",
        NotResent,
    ),
];
