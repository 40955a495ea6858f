//! The client both Python classes share: settings -> transport, execute and paginate.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Map, Value};

use super::config::{Settings, SettingsInput};
use super::error::{Error, Result};
use super::graphql::{decode_response, prepare};
use super::paging::{PageSpec, PageStream};
use super::prepared::{prepare_operation, Prepared};
use super::transport::Transport;

/// One client: one connection pool, one token provider. Cheap to clone (an `Arc`).
#[derive(Clone)]
pub struct CoreClient {
    transport: Arc<Transport>,
    lookups: super::lookup::Lookups,
}

impl CoreClient {
    /// Resolves settings (arguments, then the process environment) and builds the transport.
    pub fn new(input: SettingsInput) -> Result<Self> {
        let settings = Settings::resolve(input, &|k| std::env::var(k).ok())?;
        Self::with_settings(settings)
    }

    pub fn with_settings(settings: Settings) -> Result<Self> {
        Ok(Self {
            transport: Arc::new(Transport::new(settings)?),
            lookups: super::lookup::Lookups::default(),
        })
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

    /// Runs one operation and returns its `data` (GraphQL `errors` fail, with the partial data).
    pub async fn execute(
        &self,
        query: &str,
        variables: Option<&Map<String, Value>>,
        operation_name: Option<&str>,
    ) -> Result<Value> {
        decode_response(&self.execute_raw(query, variables, operation_name).await?)
            .map_err(|e| e.redact(&self.settings().redactor))
    }

    /// Runs one operation and returns the body of its 2xx answer, undecoded: the caller decodes
    /// it once, into its own objects, and must check its `errors` (the Python layer does).
    pub async fn execute_raw(
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
    pub fn subscribe(
        &self,
        spec: super::subscribe::SubscribeSpec,
        handle: &tokio::runtime::Handle,
    ) -> Result<super::subscribe::Subscription> {
        super::subscribe::Subscription::start(Arc::clone(&self.transport), spec, handle)
    }

    /// A lazy, prefetching walk over a connection. Nothing is sent until the first page is asked for.
    pub fn paginate(&self, spec: PageSpec) -> Result<PageStream> {
        PageStream::new(Arc::clone(&self.transport), spec)
    }

    /// Runs one catalog operation and returns its field's value (`data[name]`).
    pub async fn call(&self, name: &str, args: Map<String, Value>, fields: Option<&str>) -> Result<Value> {
        let body = self.call_raw(name, args, fields).await?;
        match decode_response(&body).map_err(|e| e.redact(&self.settings().redactor))? {
            Value::Object(mut m) => Ok(m.remove(name).unwrap_or(Value::Null)),
            _ => Ok(Value::Null),
        }
    }

    /// Runs one catalog operation and returns the body of its answer, undecoded (see
    /// [`execute_raw`](Self::execute_raw)); the result is `data[name]`.
    pub async fn call_raw(
        &self,
        name: &str,
        args: Map<String, Value>,
        fields: Option<&str>,
    ) -> Result<Bytes> {
        self.call_prepared(&prepare_operation(name, args, fields)?).await
    }

    /// Sends a catalog operation built by [`prepare_operation`] as it was built (and checked).
    pub async fn call_prepared(&self, prepared: &Prepared) -> Result<Bytes> {
        self.transport.send(prepared.request()?).await
    }

    /// Many lookups of one object by id in few requests (see [`super::lookup`]).
    pub async fn lookup(
        &self,
        name: &str,
        ids: Vec<Value>,
        fields: Option<&str>,
        batch_size: usize,
    ) -> Result<Vec<Option<Value>>> {
        self.lookups.fetch(&self.transport, name, ids, fields, batch_size).await
    }

    /// The shared request budget of this client's token, as `client.budget()` shows it.
    pub fn budget(&self) -> super::budget::View {
        self.transport.budget().view()
    }

    /// A lazy walk over a catalog operation that returns a connection.
    pub fn paginate_operation(
        &self,
        name: &str,
        args: Map<String, Value>,
        fields: Option<&str>,
        page_size: u32,
        limit: Option<u64>,
    ) -> Result<PageStream> {
        self.paginate(prepare_operation(name, args, fields)?.page_spec(page_size, limit)?)
    }
}
