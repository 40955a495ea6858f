//! Scope hierarchy and scope groups.

use super::schema_tables as args;
use super::types::{mutation, query, Operation, Returns, TYPENAME_ONLY};
use crate::core::retry::RetryClass::Mutation as NotResent;

pub(super) const OPERATIONS: &[Operation] = &[
    // No field of ScopeHierarchy is documented: the default asks for nothing the production
    // schema might lack; `fields=` selects the rest.
    query(
        "scope_hierarchy",
        "Hierarchical structure of scopes, optionally including unscoped resources.",
        args::SCOPE_HIERARCHY,
        Returns::Object("ScopeHierarchy"),
        TYPENAME_ONLY,
    ),
    mutation(
        "save_scope_hierarchy",
        "Generate and save the scope hierarchy from the current configuration.",
        args::SAVE_SCOPE_HIERARCHY,
        Returns::Object("GenerateScopes"),
        "ok",
        NotResent,
    ),
    mutation(
        "create_scope_group",
        "Create a scope group (organizes access permissions).",
        args::CREATE_SCOPE_GROUP,
        Returns::Object("CreateScopeGroup"),
        "ok",
        NotResent,
    ),
    mutation(
        "edit_scope_group",
        "Modify a scope group's configuration and permissions.",
        args::EDIT_SCOPE_GROUP,
        Returns::Object("EditScopeGroup"),
        "ok",
        NotResent,
    ),
    mutation(
        "delete_scope_group",
        "Delete a scope group. Affects users and rules assigned to the group.",
        args::DELETE_SCOPE_GROUP,
        Returns::Object("DeleteScopeGroup"),
        "ok",
        NotResent,
    ),
];
