//! Findings: one by id, the paged view, a manual SLA with a comment, and trend analytics.

use super::{arg, mutation, query, Operation, Returns, FINDINGS_VIEW_FIELDS, FINDING_FIELDS};
use crate::core::retry::RetryClass::Mutation as NotResent;

pub(super) const OPERATIONS: &[Operation] = &[
    query(
        "finding",
        "One finding by its unique identifier (a global id string or the integer id).",
        &[arg("id", "ID!")],
        Returns::Object("Finding"),
        FINDING_FIELDS,
    ),
    query(
        "findings_view",
        "Paginated list of findings with optional filtering and sorting (FindingsViewSortEnum values).",
        &[arg("filters_config", "FiltersConfigInput"), arg("sort", "[FindingsViewSortEnum]")],
        Returns::Connection("FindingsView"),
        FINDINGS_VIEW_FIELDS,
    ),
    mutation(
        "set_user_sla_and_comment",
        "Manually set the SLA due date of findings (by id and/or filter) and add an explanatory comment.",
        &[
            arg("due_date", "DateTime!"),
            arg("comment", "String!"),
            arg("finding_ids", "[ID]"),
            arg("filters_config", "FiltersConfigInput"),
        ],
        Returns::Object("UpdateUserSLAWithComment"),
        "ok",
        NotResent,
    ),
    query(
        "trends",
        "Trend analytics with a time scale (TimeScales), grouping and aggregate function (AggregateFunctions).",
        &[
            arg("time_scale", "TimeScales!"),
            arg("aggregate_function", "AggregateFunctions!"),
            arg("field", "String"),
            arg("group_by", "String"),
            arg("date_field", "String"),
            arg("filters_config", "FiltersConfigInput"),
            arg("start", "DateTime"),
            arg("end", "DateTime"),
        ],
        Returns::Scalar("GenericScalar"),
        "",
    ),
];
