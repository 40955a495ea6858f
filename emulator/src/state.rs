//! The state every connection task shares, under the server and above its leaves: the root
//! builds it, the leaves (`http`, `api`, `idp`, `ws`, `response`) read it.

use crate::auth::Auth;
use crate::cache::ResponseCache;
use crate::config::Knobs;
use crate::fault::FaultQueue;
use crate::graphql::GraphqlService;
use crate::limits::Limiter;
use crate::sockets::WsState;
use crate::stats::{Counters, RequestLog};

/// Everything the connection tasks share.
pub(crate) struct Shared {
    pub(crate) graphql: GraphqlService,
    pub(crate) auth: Auth,
    pub(crate) global_limit: Limiter,
    pub(crate) customer_limit: Limiter,
    pub(crate) token_limit: Limiter,
    pub(crate) idp_limit: Limiter,
    pub(crate) api_faults: FaultQueue,
    pub(crate) idp_faults: FaultQueue,
    pub(crate) mutation_faults: crate::fault::MutationFaults,
    pub(crate) counters: Counters,
    pub(crate) log: RequestLog,
    /// `Some` when `EmulatorConfig::response_cache` is on.
    pub(crate) cache: Option<ResponseCache>,
    pub(crate) ws: WsState,
    pub(crate) knobs: Knobs,
}
