//! Scoring rules and status rules.

use super::{arg, mutation, query, Operation, Returns, ID_ONLY};
use crate::core::retry::RetryClass::Mutation as NotResent;

pub(super) const OPERATIONS: &[Operation] = &[
    query(
        "scoring_rules",
        "All scoring rules.",
        &[arg("name", "String"), arg("active", "Boolean"), arg("sort", "[ScoringRuleSortEnum]")],
        Returns::Connection("ScoringRule"),
        ID_ONLY,
    ),
    mutation(
        "add_scoring_rule",
        "Create a scoring rule.",
        &[arg("scoring_rule", "ScoringRuleInput!")],
        Returns::Object("AddScoringRule"),
        "ok",
        NotResent,
    ),
    mutation(
        "edit_scoring_rule",
        "Modify a scoring rule's logic and parameters.",
        &[arg("id", "ID!"), arg("scoring_rule", "ScoringRuleInput!")],
        Returns::Object("EditScoringRule"),
        "ok",
        NotResent,
    ),
    mutation(
        "activate_scoring_rule",
        "Activate or deactivate a scoring rule. Inactive rules are not applied to new findings.",
        &[arg("id", "ID!"), arg("active", "Boolean!")],
        Returns::Object("ActivateScoringRule"),
        "ok",
        NotResent,
    ),
    mutation(
        "delete_scoring_rule",
        "Delete a scoring rule. Scores already assigned by the rule remain unchanged.",
        &[arg("id", "ID!")],
        Returns::Object("DeleteScoringRule"),
        "ok",
        NotResent,
    ),
    query(
        "status_rules",
        "All status rules.",
        &[arg("name", "String"), arg("enabled", "Boolean")],
        Returns::Connection("StatusRuleObject"),
        ID_ONLY,
    ),
    mutation(
        "add_status_rule",
        "Create a status rule.",
        &[arg("status_rule", "StatusRuleInput!")],
        Returns::Object("AddStatusRule"),
        "ok",
        NotResent,
    ),
    mutation(
        "edit_status_rule",
        "Modify a status rule's conditions and actions.",
        &[arg("id", "ID!"), arg("status_rule", "StatusRuleInput!")],
        Returns::Object("EditStatusRule"),
        "ok",
        NotResent,
    ),
    mutation(
        "enable_status_rule",
        "Enable or disable a status rule. Controls automatic status assignment.",
        &[arg("id", "ID!"), arg("enabled", "Boolean!")],
        Returns::Object("EnableStatusRule"),
        "ok",
        NotResent,
    ),
    mutation(
        "delete_status_rule",
        "Delete a status rule. Findings whose status the rule already set are not affected.",
        &[arg("id", "ID!")],
        Returns::Object("DeleteStatusRule"),
        "ok",
        NotResent,
    ),
];
