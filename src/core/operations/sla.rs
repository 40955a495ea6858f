//! SLA groups, SLA rules (SLA preferences), global SLA settings and ticket SLA rules.

use super::schema_tables as args;
use super::types::{mutation, query, Operation, Returns, ID_ONLY};
use crate::core::retry::RetryClass::Mutation as NotResent;

pub(super) const OPERATIONS: &[Operation] = &[
    query("sla_groups", "All SLA groups.", args::SLA_GROUPS, Returns::Connection("SLAGroup"), ID_ONLY),
    mutation(
        "add_sla_group",
        "Create an SLA group.",
        args::ADD_SLA_GROUP,
        Returns::Object("AddSLAGroup"),
        "ok",
        NotResent,
    ),
    query(
        "sla_preferences",
        "SLA preferences (settings and thresholds).",
        args::SLA_PREFERENCES,
        Returns::Connection("SLAPreference"),
        ID_ONLY,
    ),
    mutation(
        "add_sla_rule",
        "Create an SLA rule.",
        args::ADD_SLA_RULE,
        Returns::Object("AddSLARule"),
        "ok",
        NotResent,
    ),
    mutation(
        "edit_sla_rule",
        "Modify an SLA rule's timeframes and conditions.",
        args::EDIT_SLA_RULE,
        Returns::Object("EditSLARule"),
        "ok",
        NotResent,
    ),
    mutation(
        "activate_sla_rule",
        "Activate or deactivate an SLA rule. Controls automatic SLA assignment.",
        args::ACTIVATE_SLA_RULE,
        Returns::Object("ActivateSLAStatus"),
        "ok",
        NotResent,
    ),
    mutation(
        "delete_sla_rule",
        "Delete an SLA rule. Active SLAs created by the rule remain in effect.",
        args::DELETE_SLA_RULE,
        Returns::Object("DeleteSLAStatus"),
        "ok",
        NotResent,
    ),
    mutation(
        "update_sla_settings_v2",
        "Update global SLA settings (v2).",
        args::UPDATE_SLA_SETTINGS_V2,
        Returns::Object("UpdateSLAV2"),
        "ok",
        NotResent,
    ),
    query(
        "ticket_sla_rules",
        "Ticket SLA rules.",
        args::TICKET_SLA_RULES,
        Returns::Connection("TicketSLARule"),
        ID_ONLY,
    ),
    mutation(
        "add_ticket_sla_rule",
        "Create a ticket SLA rule.",
        args::ADD_TICKET_SLA_RULE,
        Returns::Object("AddTicketSLARule"),
        "ok",
        NotResent,
    ),
    mutation(
        "edit_ticket_sla_rule",
        "Modify a ticket SLA rule's parameters and conditions.",
        args::EDIT_TICKET_SLA_RULE,
        Returns::Object("EditTicketSLARule"),
        "ok",
        NotResent,
    ),
    mutation(
        "enable_ticket_sla_rule",
        "Enable or disable a ticket SLA rule. Controls application to new tickets.",
        args::ENABLE_TICKET_SLA_RULE,
        Returns::Object("EnableTicketSLARule"),
        "ok",
        NotResent,
    ),
    mutation(
        "delete_ticket_sla_rule",
        "Delete a ticket SLA rule. Active ticket SLAs are not affected.",
        args::DELETE_TICKET_SLA_RULE,
        Returns::Object("DeleteTicketSLARule"),
        "ok",
        NotResent,
    ),
];
