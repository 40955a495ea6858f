//! Scoring rules and status rules.

use super::schema_tables as args;
use super::types::{mutation, query, Operation, Returns, ID_ONLY};
use crate::core::retry::RetryClass::Mutation as NotResent;

pub(super) const OPERATIONS: &[Operation] = &[
    query(
        "scoring_rules",
        "All scoring rules.",
        args::SCORING_RULES,
        Returns::Connection("ScoringRule"),
        ID_ONLY,
    ),
    mutation(
        "add_scoring_rule",
        "Create a scoring rule.",
        args::ADD_SCORING_RULE,
        Returns::Object("AddScoringRule"),
        "ok",
        NotResent,
    ),
    mutation(
        "edit_scoring_rule",
        "Modify a scoring rule's logic and parameters.",
        args::EDIT_SCORING_RULE,
        Returns::Object("EditScoringRule"),
        "ok",
        NotResent,
    ),
    mutation(
        "activate_scoring_rule",
        "Activate or deactivate a scoring rule. Inactive rules are not applied to new findings.",
        args::ACTIVATE_SCORING_RULE,
        Returns::Object("ActivateScoringRule"),
        "ok",
        NotResent,
    ),
    mutation(
        "delete_scoring_rule",
        "Delete a scoring rule. Scores already assigned by the rule remain unchanged.",
        args::DELETE_SCORING_RULE,
        Returns::Object("DeleteScoringRule"),
        "ok",
        NotResent,
    ),
    query(
        "status_rules",
        "All status rules.",
        args::STATUS_RULES,
        Returns::Connection("StatusRuleObject"),
        ID_ONLY,
    ),
    mutation(
        "add_status_rule",
        "Create a status rule.",
        args::ADD_STATUS_RULE,
        Returns::Object("AddStatusRule"),
        "ok",
        NotResent,
    ),
    mutation(
        "edit_status_rule",
        "Modify a status rule's conditions and actions.",
        args::EDIT_STATUS_RULE,
        Returns::Object("EditStatusRule"),
        "ok",
        NotResent,
    ),
    mutation(
        "enable_status_rule",
        "Enable or disable a status rule. Controls automatic status assignment.",
        args::ENABLE_STATUS_RULE,
        Returns::Object("EnableStatusRule"),
        "ok",
        NotResent,
    ),
    mutation(
        "delete_status_rule",
        "Delete a status rule. Findings whose status the rule already set are not affected.",
        args::DELETE_STATUS_RULE,
        Returns::Object("DeleteStatusRule"),
        "ok",
        NotResent,
    ),
];
