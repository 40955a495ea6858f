//! Scope hierarchy and scope groups.

use super::{arg, mutation, query, Operation, Returns, TYPENAME_ONLY};
use crate::core::retry::RetryClass::Mutation as NotResent;

pub(super) const OPERATIONS: &[Operation] = &[
    // No field of ScopeHierarchy is documented: the default asks for nothing the production
    // schema might lack; `fields=` selects the rest.
    query(
        "scope_hierarchy",
        "Hierarchical structure of scopes, optionally including unscoped resources.",
        &[arg("include_unscoped", "Boolean")],
        Returns::Object("ScopeHierarchy"),
        TYPENAME_ONLY,
    ),
    mutation(
        "save_scope_hierarchy",
        "Generate and save the scope hierarchy from the current configuration.",
        &[],
        Returns::Object("GenerateScopes"),
        "ok",
        NotResent,
    ),
    mutation(
        "create_scope_group",
        "Create a scope group (organizes access permissions).",
        &[
            arg("name", "String!"),
            arg("description", "String"),
            arg("scope_ids", "[ID]"),
            arg("users", "[String]"),
        ],
        Returns::Object("CreateScopeGroup"),
        "ok",
        NotResent,
    ),
    mutation(
        "edit_scope_group",
        "Modify a scope group's configuration and permissions.",
        &[
            arg("id", "ID!"),
            arg("name", "String"),
            arg("description", "String"),
            arg("scope_ids", "[ID]"),
            arg("users", "[String]"),
        ],
        Returns::Object("EditScopeGroup"),
        "ok",
        NotResent,
    ),
    mutation(
        "delete_scope_group",
        "Delete a scope group. Affects users and rules assigned to the group.",
        &[arg("id", "ID!")],
        Returns::Object("DeleteScopeGroup"),
        "ok",
        NotResent,
    ),
];
