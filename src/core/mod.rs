//! The pure core: no PyO3 here. `cargo test --no-default-features` builds and tests it.

pub mod auth;
#[cfg(feature = "arrow")]
pub mod batches;
pub mod budget;
pub mod client;
#[cfg(feature = "arrow")]
pub mod columns;
pub mod config;
pub mod error;
pub mod gql;
pub mod graphql;
pub mod http;
pub mod ids;
pub mod limit;
pub mod lookup;
pub mod observe;
pub mod operations;
pub mod paging;
pub mod prepared;
pub mod retry;
pub mod scalars;
pub mod scan;
pub mod secret;
pub mod subscribe;
pub mod suggest;
pub mod transport;

pub use client::CoreClient;
pub use error::{Error, Result};
