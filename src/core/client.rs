//! The client both Python classes share: settings -> transport, execute and paginate.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Map, Value};

use super::config::{Settings, SettingsInput};
use super::error::{Error, Result};
use super::graphql::prepare;
use super::paging::{PageSpec, PageStream};
use super::prepared::Prepared;
use super::transport::Transport;

/// One client: one connection pool, one token provider. Cheap to clone (an `Arc`).
#[derive(Clone)]
pub(crate) struct CoreClient {
    transport: Arc<Transport>,
    lookups: super::lookup::Lookups,
}

impl CoreClient {
    /// Resolves settings (arguments, then the process environment) and builds the transport.
    pub(crate) fn new(input: SettingsInput) -> Result<Self> {
        let settings = Settings::resolve(input, &|k| std::env::var(k).ok())?;
        Self::with_settings(settings)
    }

    pub(crate) fn with_settings(settings: Settings) -> Result<Self> {
        Ok(Self {
            transport: Arc::new(Transport::new(settings)?),
            lookups: super::lookup::Lookups::default(),
        })
    }

    pub(crate) fn settings(&self) -> &Settings {
        self.transport.settings()
    }

    pub(crate) fn transport(&self) -> &Arc<Transport> {
        &self.transport
    }

    pub(crate) fn close(&self) {
        self.transport.close();
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.transport.is_closed()
    }

    /// Token exchanges made so far.
    pub(crate) fn exchanges(&self) -> u64 {
        self.transport.tokens().exchanges()
    }

    /// Runs one operation and returns the body of its 2xx answer, undecoded: the caller decodes
    /// it once, into its own objects, and must check its `errors` (the Python layer does).
    pub(crate) async fn execute_raw(
        &self,
        query: &str,
        variables: Option<&Map<String, Value>>,
        operation_name: Option<&str>,
    ) -> Result<Bytes> {
        let req = prepare(query, variables, operation_name)?;
        if req.operation.kind == super::graphql::OperationKind::Subscription {
            return Err(Error::validation("a subscription is not run by execute(): use subscribe()"));
        }
        self.transport.send(&req).await
    }

    /// Starts a subscription on `handle` (see [`super::subscribe`]).
    pub(crate) fn subscribe(
        &self,
        spec: super::subscribe::SubscribeSpec,
        handle: &tokio::runtime::Handle,
    ) -> Result<super::subscribe::Subscription> {
        super::subscribe::Subscription::start(Arc::clone(&self.transport), spec, handle)
    }

    /// A lazy, prefetching walk over a connection. Nothing is sent until the first page is asked for.
    pub(crate) fn paginate(&self, spec: PageSpec) -> Result<PageStream> {
        PageStream::new(Arc::clone(&self.transport), spec)
    }

    /// Sends a catalog operation built by [`prepare_operation`](super::prepared::prepare_operation) as it was built (and checked).
    pub(crate) async fn call_prepared(&self, prepared: &Prepared) -> Result<Bytes> {
        self.transport.send(prepared.request()?).await
    }

    /// Many lookups of one object by id in few requests (see [`super::lookup`]).
    pub(crate) async fn lookup(
        &self,
        name: &str,
        ids: Vec<Value>,
        fields: Option<&str>,
        batch_size: usize,
    ) -> Result<Vec<Option<Value>>> {
        self.lookups.fetch(&self.transport, name, ids, fields, batch_size).await
    }

    /// The shared request budget of this client's token, as `client.budget()` shows it.
    pub(crate) async fn budget(&self) -> super::budget::View {
        self.transport.budget().view_now().await
    }
}
