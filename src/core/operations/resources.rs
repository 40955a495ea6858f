//! Cloud resources and remediation queues.

use super::schema_tables as args;
use super::types::{query, Operation, Returns, ID_ONLY};

pub(super) const OPERATIONS: &[Operation] = &[
    query(
        "get_resources",
        "Cloud resources. Kept for backwards compatibility.",
        args::GET_RESOURCES,
        Returns::Connection("CHResource"),
        ID_ONLY,
    )
    .deprecated("get_resources_ch"),
    query(
        "get_resources_ch",
        "Cloud resources (replacement for get_resources).",
        args::GET_RESOURCES_CH,
        Returns::Connection("CHResource"),
        ID_ONLY,
    ),
    query(
        "remediation_queues",
        "All remediation queues, with optional filtering and sorting.",
        args::REMEDIATION_QUEUES,
        Returns::Connection("RemediationQueue"),
        ID_ONLY,
    ),
];
