//! The emulator exposed to Python (`secfindings.testing.Emulator` wraps it).

use std::time::Duration;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use secfindings_emulator::{
    Emulator, EmulatorConfig, Fault, FaultTarget, FindingUpdate, LimitScope, Profile, RateLimit,
};

use crate::py::values::to_py;

fn limit(v: Option<(u32, f64)>) -> PyResult<Option<RateLimit>> {
    match v {
        None => Ok(None),
        Some((requests, window)) if window.is_finite() && window > 0.0 => {
            match Duration::try_from_secs_f64(window) {
                Ok(window) => Ok(Some(RateLimit { requests, window })),
                Err(_) => {
                    Err(PyValueError::new_err(format!("a rate-limit window of {window} s is too long")))
                }
            }
        }
        Some((_, window)) => {
            Err(PyValueError::new_err(format!("a rate-limit window must be > 0 s, got {window}")))
        }
    }
}

fn secs(name: &str, v: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(v)
        .map_err(|_| PyValueError::new_err(format!("{name} must be >= 0 seconds, got {v}")))
}

#[pyclass(frozen, module = "secfindings._native")]
pub struct NativeEmulator {
    inner: Emulator,
}

#[pymethods]
impl NativeEmulator {
    #[new]
    #[pyo3(signature = (
        findings=5000, seed=7, port=0, host="127.0.0.1", jwt_lifetime=3600.0,
        global_limit=None, customer_limit=None, token_limit=None, idp_limit=None, response_cache=false,
        latency_ms=0.0, max_aliases=None, max_document_bytes=None, profile="default"
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        findings: usize,
        seed: u64,
        port: u16,
        host: &str,
        jwt_lifetime: f64,
        global_limit: Option<(u32, f64)>,
        customer_limit: Option<(u32, f64)>,
        token_limit: Option<(u32, f64)>,
        idp_limit: Option<(u32, f64)>,
        response_cache: bool,
        latency_ms: f64,
        max_aliases: Option<u32>,
        max_document_bytes: Option<usize>,
        profile: &str,
    ) -> PyResult<Self> {
        let profile = Profile::parse(profile).map_err(PyValueError::new_err)?;
        let host = host
            .parse()
            .map_err(|_| PyValueError::new_err(format!("host must be an IP address, got {host:?}")))?;
        let config = EmulatorConfig {
            host,
            port,
            findings,
            seed,
            jwt_lifetime: secs("jwt_lifetime", jwt_lifetime)?,
            global_limit: limit(global_limit)?,
            customer_limit: limit(customer_limit)?,
            token_limit: limit(token_limit)?,
            idp_limit: limit(idp_limit)?,
            response_cache,
            latency: secs("latency_ms", latency_ms / 1000.0)?,
            max_aliases,
            max_document_bytes,
            profile,
            ..EmulatorConfig::default()
        };
        let inner = py
            .detach(|| Emulator::start(config))
            .map_err(|e| PyRuntimeError::new_err(format!("the emulator could not start: {e}")))?;
        Ok(Self { inner })
    }

    #[getter]
    fn base_url(&self) -> String {
        self.inner.base_url()
    }

    #[getter]
    fn auth_url(&self) -> String {
        self.inner.auth_url()
    }

    #[getter]
    fn port(&self) -> u16 {
        self.inner.port()
    }

    #[pyo3(signature = (customer="acme", name="default"))]
    fn create_api_token(&self, customer: &str, name: &str) -> String {
        self.inner.create_api_token(customer, name)
    }

    fn revoke_api_token(&self, api_token: &str) -> bool {
        self.inner.revoke_api_token(api_token)
    }

    #[pyo3(signature = (customer="acme", name="default", lifetime=3600.0))]
    fn issue_jwt(&self, customer: &str, name: &str, lifetime: f64) -> PyResult<String> {
        Ok(self.inner.issue_jwt(customer, name, secs("lifetime", lifetime)?))
    }

    fn expire_jwts(&self) {
        self.inner.expire_jwts();
    }

    /// A new finding of `severity` (1-5), published to `finding_created`: (id, event cursor).
    #[pyo3(signature = (severity, status=None, due=None))]
    fn create_finding(
        &self,
        severity: u8,
        status: Option<&str>,
        due: Option<i64>,
    ) -> PyResult<(u64, String)> {
        self.inner.create_finding(severity, status, due).map_err(PyValueError::new_err)
    }

    /// The model served: "default" or "known".
    #[getter]
    fn profile(&self) -> &'static str {
        self.inner.profile().name()
    }

    /// Publishes a `finding_changed` event for finding `id`; returns its cursor.
    #[pyo3(signature = (id, kind="changed"))]
    fn change_finding(&self, id: u64, kind: &str) -> PyResult<String> {
        self.inner.change_finding(id, kind).map_err(PyValueError::new_err)
    }

    /// The emulator's clock in unix seconds.
    fn now(&self) -> i64 {
        self.inner.now()
    }

    /// Changes or removes finding `id`, publishing `finding_changed` of `kind`; returns its cursor.
    #[pyo3(signature = (id, *, severity=None, score=None, status=None, last_reported=None, remove=false, kind="updated"))]
    #[allow(clippy::too_many_arguments)]
    fn update_finding(
        &self,
        id: u64,
        severity: Option<u8>,
        score: Option<f64>,
        status: Option<String>,
        last_reported: Option<i64>,
        remove: bool,
        kind: &str,
    ) -> PyResult<String> {
        let update = FindingUpdate { severity, score, status, last_reported, remove };
        self.inner.update_finding(id, update, kind).map_err(PyValueError::new_err)
    }

    /// Every API request waits `ms` milliseconds before it is answered.
    fn set_latency(&self, ms: f64) -> PyResult<()> {
        self.inner.set_latency(secs("latency_ms", ms / 1000.0)?);
        Ok(())
    }

    #[pyo3(signature = (max_aliases=None, max_bytes=None))]
    fn set_document_limits(&self, max_aliases: Option<u32>, max_bytes: Option<usize>) {
        self.inner.set_document_limits(max_aliases, max_bytes);
    }

    /// (subscriptions open on the server, sockets open, sockets accepted so far).
    fn subscription_stats(&self) -> (usize, u64, u64) {
        self.inner.subscription_stats()
    }

    fn drop_websockets(&self) {
        self.inner.drop_websockets();
    }

    fn drop_next_websockets(&self, count: u64) {
        self.inner.drop_next_websockets(count);
    }

    fn set_ws_protocols(&self, protocols: &str) -> PyResult<()> {
        use secfindings_emulator::WsProtocols;
        let p = match protocols {
            "both" => WsProtocols::Both,
            "graphql-transport-ws" => WsProtocols::TransportWs,
            "graphql-ws" => WsProtocols::LegacyOnly,
            other => {
                return Err(PyValueError::new_err(format!(
                    "protocols must be 'both', 'graphql-transport-ws' or 'graphql-ws', got {other:?}"
                )))
            }
        };
        self.inner.set_ws_protocols(p);
        Ok(())
    }

    fn set_jwt_lifetime(&self, seconds: f64) -> PyResult<()> {
        self.inner.set_jwt_lifetime(secs("jwt_lifetime", seconds)?);
        Ok(())
    }

    #[pyo3(signature = (scope, limit=None))]
    fn set_rate_limit(&self, scope: &str, limit: Option<(u32, f64)>) -> PyResult<()> {
        let scope = match scope {
            "global" => LimitScope::Global,
            "customer" => LimitScope::Customer,
            "token" => LimitScope::Token,
            "idp" => LimitScope::Idp,
            other => {
                return Err(PyValueError::new_err(format!(
                    "scope must be 'global', 'customer', 'token' or 'idp', got {other:?}"
                )))
            }
        };
        self.inner.set_rate_limit(scope, self::limit(limit)?);
        Ok(())
    }

    #[pyo3(signature = (
        kind, count=1, *, target="api", status=None, retry_after=None, delay=None,
        error_type=None, message=None, after_mutations=None, applied=false
    ))]
    #[allow(clippy::too_many_arguments)]
    fn inject(
        &self,
        kind: &str,
        count: u32,
        target: &str,
        status: Option<u16>,
        retry_after: Option<u64>,
        delay: Option<f64>,
        error_type: Option<String>,
        message: Option<String>,
        after_mutations: Option<u32>,
        applied: bool,
    ) -> PyResult<()> {
        if applied && after_mutations.is_none() {
            return Err(PyValueError::new_err(
                "applied=True is for mutation faults: give after_mutations too",
            ));
        }
        let target = match target {
            "api" => FaultTarget::Api,
            "idp" => FaultTarget::Idp,
            other => {
                return Err(PyValueError::new_err(format!("target must be 'api' or 'idp', got {other:?}")))
            }
        };
        let fault = match kind {
            "status" => Fault::Status(status.unwrap_or(503)),
            "reset" => Fault::Reset,
            "truncated" => Fault::Truncated,
            "delay" => Fault::Delay(secs("delay", delay.unwrap_or(1.0))?),
            "rate_limit" => Fault::RateLimited { retry_after: retry_after.unwrap_or(1) },
            "idp_error" => Fault::IdpError {
                error_type: error_type.unwrap_or_else(|| "InternalErrorException".into()),
                message: message.unwrap_or_else(|| "An internal error occurred.".into()),
                status: status.unwrap_or(400),
            },
            "challenge" => Fault::Challenge(error_type.unwrap_or_else(|| "NEW_PASSWORD_REQUIRED".into())),
            other => {
                return Err(PyValueError::new_err(format!(
                    "kind must be one of status, reset, truncated, delay, rate_limit, idp_error, challenge; got {other:?}"
                )))
            }
        };
        match after_mutations {
            Some(_) if target != FaultTarget::Api => {
                Err(PyValueError::new_err("after_mutations is for target='api' (mutations reach the API)"))
            }
            Some(after) => {
                self.inner.inject_mutation(fault, after, count, applied);
                Ok(())
            }
            None => {
                self.inner.inject(target, fault, count);
                Ok(())
            }
        }
    }

    fn clear_faults(&self) {
        self.inner.clear_faults();
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.stats();
        let d = PyDict::new(py);
        d.set_item("api_requests", s.api_requests)?;
        d.set_item("idp_requests", s.idp_requests)?;
        d.set_item("token_exchanges", s.token_exchanges)?;
        d.set_item("rate_limited", s.rate_limited)?;
        d.set_item("unauthorized", s.unauthorized)?;
        d.set_item("mutations_applied", s.mutations_applied)?;
        Ok(d)
    }

    fn reset_stats(&self) {
        self.inner.reset_stats();
    }

    fn request_log<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for r in self.inner.request_log() {
            let d = PyDict::new(py);
            d.set_item("operation_name", r.operation_name)?;
            // Counted when read, so that serving requests pays nothing for it.
            d.set_item("aliases", secfindings_emulator::count_aliases(&r.query))?;
            d.set_item("query", r.query)?;
            d.set_item("variables", to_py(py, &r.variables)?)?;
            d.set_item("status", r.status)?;

            list.append(d)?;
        }
        Ok(list)
    }

    fn clear_request_log(&self) {
        self.inner.clear_request_log();
    }

    fn sdl(&self) -> String {
        self.inner.sdl()
    }

    fn shutdown(&self, py: Python<'_>) {
        py.detach(|| self.inner.shutdown());
    }
}
