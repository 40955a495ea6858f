//! The catalog's vocabulary: what an operation, its arguments and its result are, and the
//! selections entries share. The ground floor of `operations`: the area files (findings, rules,
//! ...) and the builder in `mod.rs` import it; it imports none of them.

use crate::core::graphql::OperationKind;
use crate::core::retry::RetryClass;

/// One argument: its GraphQL name and type text (`"ID!"`, `"[FindingsViewSortEnum]"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Arg {
    pub name: &'static str,
    pub ty: &'static str,
}

pub(crate) const fn arg(name: &'static str, ty: &'static str) -> Arg {
    Arg { name, ty }
}

/// What an operation's field returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Returns {
    /// An object type (the name of the typed model).
    Object(&'static str),
    /// A Relay connection of this node type: the typed method returns a paginator.
    Connection(&'static str),
    /// A scalar (no selection set), passed through as JSON.
    Scalar(&'static str),
}

impl Returns {
    /// The GraphQL type name of the result (of the node, for a connection).
    pub(crate) fn type_name(self) -> &'static str {
        match self {
            Self::Object(t) | Self::Connection(t) | Self::Scalar(t) => t,
        }
    }
}

/// One catalog entry.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Operation {
    pub name: &'static str,
    pub kind: OperationKind,
    pub doc: &'static str,
    pub args: &'static [Arg],
    pub returns: Returns,
    /// The default selection set (of the node, for a connection); empty for a scalar.
    pub selection: &'static str,
    /// The successor's name, for a deprecated operation.
    pub deprecated: Option<&'static str>,
    /// Whether the request may be resent after a failure that could have reached the server.
    pub retry: RetryClass,
}

pub(crate) const fn query(
    name: &'static str,
    doc: &'static str,
    args: &'static [Arg],
    returns: Returns,
    selection: &'static str,
) -> Operation {
    Operation {
        name,
        kind: OperationKind::Query,
        doc,
        args,
        returns,
        selection,
        deprecated: None,
        retry: RetryClass::Idempotent,
    }
}

pub(crate) const fn mutation(
    name: &'static str,
    doc: &'static str,
    args: &'static [Arg],
    returns: Returns,
    selection: &'static str,
    retry: RetryClass,
) -> Operation {
    Operation { name, kind: OperationKind::Mutation, doc, args, returns, selection, deprecated: None, retry }
}

impl Operation {
    pub(crate) const fn deprecated(mut self, successor: &'static str) -> Self {
        self.deprecated = Some(successor);
        self
    }

    pub(crate) fn is_connection(&self) -> bool {
        matches!(self.returns, Returns::Connection(_))
    }
}

/// The spec's Finding table, and nothing more.
pub(crate) const FINDING_FIELDS: &str =
    "id id_int finding_id last_reported_time discovered_time cloud_provider \
     original_status cloud_account package_name datasource { friendly_name } main_resource { resource_name } \
     title finding_score { score severity original_score } age description";

/// The FindingsView node fields the fact sheet saw in use (6.1); tickets are opt-in.
pub(crate) const FINDINGS_VIEW_FIELDS: &str = "id id_int title score remediation_sub_phase cloud_account \
     cloud_account_friendly_name cloud_provider resource_name resource_type sla_status age \
     datasource_tags_values source actual_status { category }";

/// For objects whose fields are not documented: the Relay node id only.
pub(crate) const ID_ONLY: &str = "id";

/// For an object with no documented field at all: valid on any GraphQL object type.
pub(crate) const TYPENAME_ONLY: &str = "__typename";
