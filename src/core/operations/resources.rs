//! Cloud resources and remediation queues.

use super::{arg, query, Operation, Returns, ID_ONLY};

pub(super) const OPERATIONS: &[Operation] = &[
    query(
        "get_resources",
        "Cloud resources. Kept for backwards compatibility.",
        &[
            arg("resource_type", "String"),
            arg("cloud_provider", "String"),
            arg("cloud_account", "String"),
            arg("search", "String"),
            arg("sort", "[ResourcesSortBy]"),
        ],
        Returns::Connection("CHResource"),
        ID_ONLY,
    )
    .deprecated("get_resources_ch"),
    query(
        "get_resources_ch",
        "Cloud resources (replacement for get_resources).",
        &[
            arg("resource_type", "[String]"),
            arg("cloud_provider", "[String]"),
            arg("cloud_account", "[String]"),
            arg("search", "String"),
            arg("has_findings", "Boolean"),
            arg("sort", "[ResourcesSortBy]"),
        ],
        Returns::Connection("CHResource"),
        ID_ONLY,
    ),
    query(
        "remediation_queues",
        "All remediation queues, with optional filtering and sorting.",
        &[
            arg("state", "RemediationQueueState"),
            arg("title", "String"),
            arg("sort", "[RemediationQueueSortEnum]"),
        ],
        Returns::Connection("RemediationQueue"),
        ID_ONLY,
    ),
];
