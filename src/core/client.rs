//! The client both Python classes share: settings -> transport, execute and paginate.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::config::{Settings, SettingsInput};
use super::error::Result;
use super::graphql::prepare;
use super::paging::{PageSpec, PageStream};
use super::transport::Transport;

/// One client: one connection pool, one token provider. Cheap to clone (an `Arc`).
#[derive(Clone)]
pub struct CoreClient {
    transport: Arc<Transport>,
}

impl CoreClient {
    /// Resolves settings (arguments, then the process environment) and builds the transport.
    pub fn new(input: SettingsInput) -> Result<Self> {
        let settings = Settings::resolve(input, &|k| std::env::var(k).ok())?;
        Self::with_settings(settings)
    }

    pub fn with_settings(settings: Settings) -> Result<Self> {
        Ok(Self { transport: Arc::new(Transport::new(settings)?) })
    }

    pub fn settings(&self) -> &Settings {
        self.transport.settings()
    }

    pub fn transport(&self) -> &Arc<Transport> {
        &self.transport
    }

    pub fn close(&self) {
        self.transport.close();
    }

    pub fn is_closed(&self) -> bool {
        self.transport.is_closed()
    }

    /// Token exchanges made so far.
    pub fn exchanges(&self) -> u64 {
        self.transport.tokens().exchanges()
    }

    /// Runs one operation and returns its `data`.
    pub async fn execute(
        &self,
        query: &str,
        variables: Option<&Map<String, Value>>,
        operation_name: Option<&str>,
    ) -> Result<Value> {
        let req = prepare(query, variables, operation_name)?;
        self.transport.execute(&req).await
    }

    /// A lazy, prefetching walk over a connection. Nothing is sent until the first page is asked for.
    pub fn paginate(&self, spec: PageSpec) -> Result<PageStream> {
        PageStream::new(Arc::clone(&self.transport), spec)
    }
}
