//! The pure core: no PyO3 here. `cargo test --no-default-features` builds and tests it.

pub(crate) mod auth;
#[cfg(feature = "arrow")]
pub(crate) mod batched;
pub(crate) mod batches;
pub(crate) mod budget;
pub(crate) mod budget_rule;
pub(crate) mod budget_store;
pub(crate) mod client;
#[cfg(feature = "arrow")]
pub(crate) mod columns;
pub(crate) mod config;
pub(crate) mod error;
pub(crate) mod gql;
pub(crate) mod graphql;
pub(crate) mod http;
pub(crate) mod ids;
pub(crate) mod limit;
pub(crate) mod lookup;
pub(crate) mod observe;
pub(crate) mod operations;
pub(crate) mod paging;
pub(crate) mod prepared;
pub(crate) mod retry;
pub(crate) mod scalars;
pub(crate) mod scan;
pub(crate) mod secret;
pub(crate) mod subscribe;
pub(crate) mod suggest;
pub(crate) mod transport;
pub(crate) mod walk;

pub(crate) use client::CoreClient;
pub(crate) use error::{Error, Result};
