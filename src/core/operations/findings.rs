//! Findings: one by id, the paged view, a manual SLA with a comment, and trend analytics.

use super::schema_tables as args;
use super::types::{mutation, query, Operation, Returns, FINDINGS_VIEW_FIELDS, FINDING_FIELDS};
use crate::core::retry::RetryClass::Mutation as NotResent;

pub(super) const OPERATIONS: &[Operation] = &[
    query(
        "finding",
        "One finding by its unique identifier (a global id string or the integer id).",
        args::FINDING,
        Returns::Object("Finding"),
        FINDING_FIELDS,
    ),
    query(
        "findings_view",
        "Paginated list of findings with optional filtering and sorting (FindingsViewSortEnum values).",
        args::FINDINGS_VIEW,
        Returns::Connection("FindingsView"),
        FINDINGS_VIEW_FIELDS,
    ),
    mutation(
        "set_user_sla_and_comment",
        "Manually set the SLA due date of findings (by id and/or filter) and add an explanatory comment.",
        args::SET_USER_SLA_AND_COMMENT,
        Returns::Object("UpdateUserSLAWithComment"),
        "ok",
        NotResent,
    ),
    query(
        "trends",
        "Trend analytics with a time scale (TimeScales), grouping and aggregate function (AggregateFunctions).",
        args::TRENDS,
        Returns::Scalar("GenericScalar"),
        "",
    ),
];
