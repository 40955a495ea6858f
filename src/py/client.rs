//! The native client both Python classes wrap: `Client` blocks on the core future with the GIL
//! released, `AsyncClient` awaits the same future through asyncio. Nothing is decided here.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::core::config::SettingsInput;
use crate::core::paging::PageSpec;
use crate::core::secret::Redactor;
use crate::core::{CoreClient, Error};
use crate::py::completions::{self, Outcome};
use crate::py::decode;
use crate::py::errors::to_py as err;
use crate::py::paging::NativePages;
use crate::py::prepared::PreparedOperation;
use crate::py::runtime::{block_on, runtime};

#[pyclass(frozen, module = "secfindings._native")]
pub struct NativeClient {
    core: CoreClient,
    pid: u32,
}

impl NativeClient {
    fn check(&self) -> PyResult<&CoreClient> {
        if self.pid != std::process::id() {
            return Err(err(Error::Closed(
                "this client was created in another process (before fork()); create a new client in this process"
                    .into(),
            )));
        }
        if self.core.is_closed() {
            return Err(err(Error::Closed("the client is closed".into())));
        }
        Ok(&self.core)
    }
}

#[pymethods]
impl NativeClient {
    #[new]
    #[pyo3(signature = (
        api_token=None, *, base_url=None, region=None, auth_url=None, jwt=None, timeout=None,
        max_retries=None, max_retry_wait=None, proxy=None, ca_bundle=None,
        refresh_advisory=None, refresh_mandatory=None, max_response_bytes=None, rate_limit=None,
        budget=None, budget_required=false
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        api_token: Option<String>,
        base_url: Option<String>,
        region: Option<String>,
        auth_url: Option<String>,
        jwt: Option<String>,
        timeout: Option<f64>,
        max_retries: Option<Bound<'_, PyAny>>,
        max_retry_wait: Option<f64>,
        proxy: Option<String>,
        ca_bundle: Option<String>,
        refresh_advisory: Option<f64>,
        refresh_mandatory: Option<f64>,
        max_response_bytes: Option<Bound<'_, PyAny>>,
        rate_limit: Option<Bound<'_, PyAny>>,
        budget: Option<String>,
        budget_required: bool,
    ) -> PyResult<Self> {
        let config = |m: String| err(Error::Configuration(m));
        let rate_limit = match rate_limit.filter(|r| !r.is_none()) {
            None => None,
            Some(r) => {
                let (n, per) = r.extract::<(Bound<'_, PyAny>, f64)>().map_err(|_| {
                    config("rate_limit must be a (requests, per_seconds) pair, e.g. (100, 60.0)".into())
                })?;
                let n = int_arg(Some(&n), "rate_limit requests").map_err(config)?.unwrap_or(0);
                Some((n, per))
            }
        };
        let max_retries = int_arg(max_retries.as_ref(), "max_retries").map_err(config)?;
        let max_response_bytes =
            int_arg(max_response_bytes.as_ref(), "max_response_bytes").map_err(config)?;
        let input = SettingsInput {
            api_token,
            jwt,
            base_url,
            region,
            auth_url,
            timeout,
            max_retries,
            max_retry_wait,
            proxy,
            ca_bundle,
            refresh_advisory,
            refresh_mandatory,
            max_response_bytes,
            rate_limit,
            budget,
            budget_required,
        };
        let rt = runtime().map_err(err)?;
        // reqwest's connector belongs to the runtime it is built in.
        let _entered = rt.enter();
        let core = CoreClient::new(input).map_err(err)?;
        Ok(Self { core, pid: std::process::id() })
    }

    #[getter]
    fn base_url(&self) -> String {
        self.core.settings().base_url.to_string()
    }

    #[getter]
    fn auth_url(&self) -> String {
        self.core.settings().auth_url.to_string()
    }

    #[getter]
    fn region(&self) -> String {
        self.core.settings().region.clone()
    }

    #[getter]
    fn closed(&self) -> bool {
        self.core.is_closed()
    }

    /// Token exchanges this client made.
    #[getter]
    fn exchanges(&self) -> u64 {
        self.core.exchanges()
    }

    fn close(&self) {
        self.core.close();
    }

    /// The JWT the client would send now (obtained or refreshed if needed), for a shell user's
    /// curl (`secfindings token`). Anything holding it can act as the API token's owner.
    fn current_jwt(&self, py: Python<'_>) -> PyResult<String> {
        let core = self.check()?.clone();
        let token = block_on(py, async move { core.transport().tokens().get().await })?.map_err(err)?;
        let header = token.header.to_str().map_err(|_| {
            err(Error::Authentication { error_type: None, message: "the JWT is not text".into() })
        })?;
        Ok(header.strip_prefix("Bearer ").unwrap_or(header).to_string())
    }

    /// What this client has done so far: requests, retries, waits, token exchanges, bytes.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        use std::sync::atomic::Ordering::Relaxed;
        let s = self.core.transport().stats();
        let secs = |us: u64| us as f64 / 1e6;
        let d = PyDict::new(py);
        d.set_item("requests", s.requests.load(Relaxed))?;
        d.set_item("retries", s.retries.load(Relaxed))?;
        d.set_item("retry_wait_seconds", secs(s.retry_wait_us.load(Relaxed)))?;
        d.set_item("rate_limited", s.rate_limited.load(Relaxed))?;
        d.set_item("limiter_waits", s.limiter_waits.load(Relaxed))?;
        d.set_item("limiter_wait_seconds", secs(s.limiter_wait_us.load(Relaxed)))?;
        d.set_item("token_exchanges", self.core.exchanges())?;
        d.set_item("bytes_received", s.bytes_received.load(Relaxed))?;
        Ok(d)
    }

    /// The settings a pickled client is rebuilt from: the API token and the options, never a
    /// JWT. A client made with `jwt=` cannot be pickled (the JWT would travel with it).
    fn pickle_state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        use crate::core::config::Credential;
        let s = self.core.settings();
        let token = match &s.credential {
            Credential::ApiToken(t) => t.expose_text().to_string(),
            Credential::Jwt(_) => {
                return Err(pyo3::exceptions::PyTypeError::new_err(
                    "a client made with jwt= cannot be pickled (the JWT would travel with it); \
                     make it with api_token= instead",
                ))
            }
        };
        let d = PyDict::new(py);
        d.set_item("api_token", token)?;
        d.set_item("base_url", s.base_url.as_str())?;
        d.set_item("auth_url", s.auth_url.as_str())?;
        d.set_item("region", &s.region)?;
        d.set_item("timeout", s.timeout.as_secs_f64())?;
        d.set_item("max_retries", s.max_retries)?;
        d.set_item("max_retry_wait", s.max_retry_wait.as_secs_f64())?;
        d.set_item("proxy", s.proxy.as_ref().map(url::Url::as_str))?;
        d.set_item("ca_bundle", s.ca_bundle.as_ref().map(|p| p.display().to_string()))?;
        d.set_item("refresh_advisory", s.refresh_advisory.as_secs_f64())?;
        d.set_item("refresh_mandatory", s.refresh_mandatory.as_secs_f64())?;
        d.set_item("max_response_bytes", s.max_response_bytes)?;
        d.set_item("rate_limit", s.rate_limit.map(|(n, per)| (n, per.as_secs_f64())))?;
        let budget = match (&s.budget_store, &s.budget_dir) {
            // The whole URL (its password too), as the API token travels: the copy must book there.
            (Some(store), _) => store.expose_url().to_string(),
            (None, Some(dir)) => dir.display().to_string(),
            (None, None) => "off".to_string(),
        };
        d.set_item("budget", budget)?;
        d.set_item("budget_required", s.budget_required)?;
        Ok(d)
    }

    #[pyo3(signature = (query, variables=None, operation_name=None))]
    fn execute(
        &self,
        py: Python<'_>,
        query: String,
        variables: Option<Bound<'_, PyAny>>,
        operation_name: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        let core = self.check()?.clone();
        let vars = crate::py::convert::variables(variables.as_ref())?;
        let out =
            block_on(
                py,
                async move { core.execute_raw(&query, vars.as_ref(), operation_name.as_deref()).await },
            )?;
        let body = out.map_err(err)?;
        Ok(decode::data(py, &body, &self.core.settings().redactor)?.unbind())
    }

    #[pyo3(signature = (query, variables=None, operation_name=None))]
    fn execute_async<'py>(
        &self,
        py: Python<'py>,
        query: String,
        variables: Option<Bound<'py, PyAny>>,
        operation_name: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let core = self.check()?.clone();
        let vars = crate::py::convert::variables(variables.as_ref())?;
        let redactor = core.settings().redactor.clone();
        completions::submit(py, async move {
            let body = core.execute_raw(&query, vars.as_ref(), operation_name.as_deref()).await?;
            Ok(Outcome::Data(body, redactor))
        })
    }

    #[pyo3(signature = (query, variables=None, operation_name=None, path=None, page_size=None, limit=None))]
    fn paginate(
        &self,
        query: String,
        variables: Option<Bound<'_, PyAny>>,
        operation_name: Option<String>,
        path: Option<String>,
        page_size: Option<Bound<'_, PyAny>>,
        limit: Option<Bound<'_, PyAny>>,
    ) -> PyResult<NativePages> {
        let core = self.check()?.clone();
        let vars = crate::py::convert::variables(variables.as_ref())?.unwrap_or_default();
        let (page_size, limit) = page_bounds(page_size.as_ref(), limit.as_ref())?;
        let spec = PageSpec { query, variables: vars, operation_name, path, page_size, limit, node: None };
        let stream = core.paginate(spec).map_err(err)?;
        Ok(NativePages::new(stream, core.settings().redactor.clone()))
    }

    /// Sends a catalog operation built by `prepare_operation` as it was built (and checked) and
    /// returns its field's value (`data[name]`).
    fn call_prepared(&self, py: Python<'_>, prepared: &PreparedOperation) -> PyResult<Py<PyAny>> {
        let core = self.check()?.clone();
        let prepared = Arc::clone(&prepared.inner);
        let out = block_on(py, async { core.call_prepared(&prepared).await })?;
        let body = out.map_err(err)?;
        field(py, &body, prepared.operation().name, &core.settings().redactor)
    }

    /// The awaitable twin of `call_prepared`.
    fn call_prepared_async<'py>(
        &self,
        py: Python<'py>,
        prepared: &PreparedOperation,
    ) -> PyResult<Bound<'py, PyAny>> {
        let core = self.check()?.clone();
        let prepared = Arc::clone(&prepared.inner);
        let redactor = core.settings().redactor.clone();
        completions::submit(py, async move {
            let body = core.call_prepared(&prepared).await?;
            let name = prepared.operation().name;
            Ok(Outcome::with(move |py| field(py, &body, name, &redactor)))
        })
    }

    /// Looks up many objects by id (`finding`), in batches of aliased selections: a list in
    /// input order, None where an id names nothing.
    #[pyo3(signature = (name, ids, fields=None, batch_size=100))]
    fn lookup(
        &self,
        py: Python<'_>,
        name: String,
        ids: Bound<'_, PyAny>,
        fields: Option<String>,
        batch_size: usize,
    ) -> PyResult<Py<PyAny>> {
        let core = self.check()?.clone();
        let ids = id_list(&ids)?;
        let out = block_on(py, async { core.lookup(&name, ids, fields.as_deref(), batch_size).await })?;
        let values = out.map_err(err)?;
        lookup_list(py, &values)
    }

    /// The awaitable twin of `lookup`.
    #[pyo3(signature = (name, ids, fields=None, batch_size=100))]
    fn lookup_async<'py>(
        &self,
        py: Python<'py>,
        name: String,
        ids: Bound<'py, PyAny>,
        fields: Option<String>,
        batch_size: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let core = self.check()?.clone();
        let ids = id_list(&ids)?;
        completions::submit(py, async move {
            let values = core.lookup(&name, ids, fields.as_deref(), batch_size).await?;
            Ok(Outcome::with(move |py| lookup_list(py, &values)))
        })
    }

    /// The request budget this client's token shares on this machine.
    fn budget<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let core = self.core.clone();
        let v = block_on(py, async move { core.budget().await })?;
        let d = PyDict::new(py);
        d.set_item("limit", v.limit.map(|(n, _)| n))?;
        d.set_item("window", v.limit.map(|(_, w)| w))?;
        d.set_item("used", v.used)?;
        d.set_item("remaining", v.remaining)?;
        d.set_item("resets_at", v.resets_at)?;
        d.set_item("blocked_until", v.blocked_until)?;
        d.set_item("shared", v.path.is_some())?;
        d.set_item("path", v.path.map(|p| p.display().to_string()))?;
        d.set_item("store", v.store)?;
        d.set_item("location", v.location)?;
        d.set_item("error", v.error)?;
        Ok(d)
    }

    /// A lazy walk over a catalog operation (built by `prepare_operation`) that returns a
    /// connection: its document as built, `first` and `after` added per page.
    #[pyo3(signature = (prepared, page_size=None, limit=None))]
    fn paginate_prepared(
        &self,
        prepared: &PreparedOperation,
        page_size: Option<Bound<'_, PyAny>>,
        limit: Option<Bound<'_, PyAny>>,
    ) -> PyResult<NativePages> {
        let core = self.check()?.clone();
        let (page_size, limit) = page_bounds(page_size.as_ref(), limit.as_ref())?;
        let spec = prepared.inner.page_spec(page_size, limit).map_err(err)?;
        let stream = core.paginate(spec).map_err(err)?;
        Ok(NativePages::new(stream, core.settings().redactor.clone()))
    }

    /// A walk of a catalog connection (built by `prepare_operation`) in aliased page batches:
    /// `pages_per_request` pages of `page_size` rows per request, from offset `start`, in id
    /// order, each row once (see `core::batched`). The connection must take `offset` and the
    /// selection must hold `id`.
    #[pyo3(signature = (prepared, page_size=None, limit=None, pages_per_request=10, start=0, resume=None))]
    fn paginate_batched(
        &self,
        prepared: &PreparedOperation,
        page_size: Option<Bound<'_, PyAny>>,
        limit: Option<Bound<'_, PyAny>>,
        pages_per_request: u32,
        start: u64,
        resume: Option<&str>,
    ) -> PyResult<NativePages> {
        let core = self.check()?.clone();
        let (page_size, limit) = page_bounds(page_size.as_ref(), limit.as_ref())?;
        // A batched walk's own cursor (`sfb1:<offset>:<key>`): it starts there, past that key.
        let (start, last) = match resume {
            None => (start, None),
            Some(text) => match crate::core::batched::parse_cursor(text) {
                Some((offset, key)) => (offset, Some(key)),
                None => {
                    return Err(err(crate::core::Error::Validation(
                        "resume is not a cursor of a batched walk (sfb1:...)".into(),
                    )))
                }
            },
        };
        let spec = crate::core::batched::BatchSpec { page_size, pages_per_request, start, limit, last };
        let stream =
            crate::core::batched::BatchStream::new(Arc::clone(core.transport()), &prepared.inner, spec)
                .map_err(err)?;
        Ok(NativePages::new(stream, core.settings().redactor.clone()))
    }

    /// Starts a subscription over WebSocket (see `secfindings.Client.subscribe`).
    #[pyo3(signature = (query, variables=None, operation_name=None, resume=None, queue_size=256, max_reconnects=10))]
    fn subscribe(
        &self,
        query: String,
        variables: Option<Bound<'_, PyAny>>,
        operation_name: Option<String>,
        resume: Option<String>,
        queue_size: usize,
        max_reconnects: u32,
    ) -> PyResult<crate::py::subscribe::NativeSubscription> {
        let core = self.check()?.clone();
        let vars = crate::py::convert::variables(variables.as_ref())?.unwrap_or_default();
        if queue_size == 0 {
            return Err(err(crate::core::Error::Validation("queue_size must be at least 1".into())));
        }
        let spec = crate::core::subscribe::SubscribeSpec {
            query,
            variables: vars,
            operation_name,
            resume,
            queue: queue_size,
            max_reconnects,
        };
        let rt = crate::py::runtime::runtime().map_err(err)?;
        let sub = core.subscribe(spec, rt.handle()).map_err(err)?;
        Ok(crate::py::subscribe::NativeSubscription::new(sub, core.settings().redactor.clone()))
    }

    fn __repr__(&self) -> String {
        format!("NativeClient(base_url={:?}, region={:?})", self.base_url(), self.region())
    }
}

/// A JSON document decoded by the client's one-pass decoder (for tests and benchmarks).
#[pyfunction]
pub(crate) fn decode_json<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    decode::json(py, data)
}

/// Seconds a watch waits after its `failures`-th 429 in a row: the core's rule
/// ([`crate::core::retry::poll_backoff`]). `retry_after`: the server's ask, if any.
#[pyfunction]
#[pyo3(signature = (failures, retry_after, interval))]
pub(crate) fn poll_backoff(failures: u32, retry_after: Option<f64>, interval: f64) -> PyResult<f64> {
    let secs = |v: f64, what: &str| {
        std::time::Duration::try_from_secs_f64(v).map_err(|_| {
            pyo3::exceptions::PyValueError::new_err(format!(
                "{what} must be a number of seconds >= 0, not {v}"
            ))
        })
    };
    let asked = retry_after.map(|v| secs(v, "retry_after")).transpose()?;
    Ok(crate::core::retry::poll_backoff(failures, asked, secs(interval, "interval")?).as_secs_f64())
}

/// Checks and converts variables without sending anything (used by typed operations' tests).
#[pyfunction]
#[pyo3(signature = (query, variables=None, operation_name=None))]
pub(crate) fn prepare_request(
    py: Python<'_>,
    query: &str,
    variables: Option<Bound<'_, PyAny>>,
    operation_name: Option<&str>,
) -> PyResult<Py<PyDict>> {
    let vars = crate::py::convert::variables(variables.as_ref())?;
    let req = crate::core::graphql::prepare(query, vars.as_ref(), operation_name).map_err(err)?;
    let d = decode::json(py, &req.body)?.cast_into::<PyDict>()?;
    d.set_item("kind", format!("{:?}", req.operation.kind).to_lowercase())?;
    Ok(d.unbind())
}

/// A list of ids (str or int) as JSON values; anything else is a TypeError that says what to pass.
fn id_list(ids: &Bound<'_, PyAny>) -> PyResult<Vec<serde_json::Value>> {
    use pyo3::types::{PyBool, PyInt, PyString};
    if ids.is_instance_of::<PyString>() || ids.is_instance_of::<pyo3::types::PyBytes>() {
        return Err(pyo3::exceptions::PyTypeError::new_err(
            "ids must be a list of ids, not one str (pass [id] for a single id)",
        ));
    }
    let mut out = Vec::new();
    for (i, item) in ids.try_iter()?.enumerate() {
        let item = item?;
        if item.is_instance_of::<PyString>() {
            out.push(serde_json::Value::String(item.extract::<String>()?));
        } else if item.is_instance_of::<PyInt>() && !item.is_instance_of::<PyBool>() {
            match item.extract::<i64>() {
                Ok(n) => out.push(serde_json::Value::from(n)),
                Err(_) => {
                    return Err(err(Error::Validation(format!("ids[{i}] is an int beyond 64 bits"))));
                }
            }
        } else {
            let ty = item.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "ids[{i}] must be a str or an int, got {ty}"
            )));
        }
    }
    Ok(out)
}

fn lookup_list(py: Python<'_>, values: &[Option<serde_json::Value>]) -> PyResult<Py<PyAny>> {
    let list = PyList::empty(py);
    for v in values {
        match v {
            Some(v) => list.append(crate::py::values::to_py(py, v)?)?,
            None => list.append(py.None())?,
        }
    }
    Ok(list.into_any().unbind())
}

pub(crate) fn field(py: Python<'_>, body: &[u8], name: &str, redactor: &Redactor) -> PyResult<Py<PyAny>> {
    let data = decode::data(py, body, redactor)?;
    match data.cast::<PyDict>() {
        Ok(d) => Ok(d.get_item(name)?.map_or_else(|| py.None(), Bound::unbind)),
        Err(_) => Ok(py.None()),
    }
}

/// An optional int argument, as i64; a non-int or an int beyond 64 bits is an error that names
/// the argument (not a bare TypeError or OverflowError).
fn int_arg(obj: Option<&Bound<'_, PyAny>>, name: &str) -> Result<Option<i64>, String> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else { return Ok(None) };
    if !obj.is_instance_of::<pyo3::types::PyInt>() || obj.is_instance_of::<pyo3::types::PyBool>() {
        let ty = obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
        return Err(format!("{name} must be an int, got {ty}"));
    }
    obj.extract::<i64>().map(Some).map_err(|_| {
        let shown = obj.str().map(|s| s.to_string()).unwrap_or_default();
        format!("{name} is out of range: {}", shown.chars().take(40).collect::<String>())
    })
}

/// Python ints to the walker's bounds; the walker itself checks the cap.
fn page_bounds(
    page_size: Option<&Bound<'_, PyAny>>,
    limit: Option<&Bound<'_, PyAny>>,
) -> PyResult<(u32, Option<u64>)> {
    let invalid = |m: String| err(Error::Validation(m));
    let max = crate::core::paging::MAX_PAGE_SIZE;
    let page_size = int_arg(page_size, "page_size").map_err(invalid)?.unwrap_or(i64::from(max));
    let page_size = u32::try_from(page_size)
        .map_err(|_| invalid(format!("page_size must be between 1 and {max}, got {page_size}")))?;
    let limit = match int_arg(limit, "limit").map_err(|m| {
        invalid(if m.contains("out of range") { format!("{m} (give None for no limit)") } else { m })
    })? {
        None => None,
        Some(l) => Some(u64::try_from(l).map_err(|_| invalid(format!("limit must be >= 0, got {l}")))?),
    };
    Ok((page_size, limit))
}
