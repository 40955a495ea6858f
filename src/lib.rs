//! secfindings: the Rust core of the Python client for the Security Findings Management API.
//!
//! `core` knows nothing of Python; `py` is the PyO3 glue and the `_native` module below.
#![cfg_attr(not(feature = "python"), allow(dead_code, unreachable_pub, unused_imports))]

// With the Python glue (the shipped build) the core is private to the crate, so that
// `unreachable_pub` and dead-code checks see every item no one reaches; the core-only build (its
// unit tests, `--no-default-features`) has no caller of its own, so dead code is not counted there.
#[cfg(feature = "python")]
mod core;
#[cfg(not(feature = "python"))]
pub mod core;

#[cfg(feature = "python")]
mod py;

#[cfg(feature = "python")]
#[pyo3::pymodule]
fn _native(m: &pyo3::Bound<'_, pyo3::types::PyModule>) -> pyo3::PyResult<()> {
    use pyo3::prelude::*;
    py::init_logging();
    py::runtime::init_async_runtime().map_err(py::errors::to_py)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("BATCH_CURSOR_PREFIX", core::batched::CURSOR_PREFIX)?;
    m.add_class::<py::client::NativeClient>()?;
    m.add_class::<py::paging::NativePages>()?;
    m.add_class::<py::subscribe::NativeSubscription>()?;
    #[cfg(feature = "emulator")]
    m.add_class::<py::emulator::NativeEmulator>()?;
    m.add_function(wrap_pyfunction!(py::client::prepare_request, m)?)?;
    m.add_function(wrap_pyfunction!(py::client::decode_json, m)?)?;
    m.add_function(wrap_pyfunction!(py::client::poll_backoff, m)?)?;
    m.add_function(wrap_pyfunction!(py::reset_log_cache, m)?)?;
    m.add_function(wrap_pyfunction!(py::operations::catalog, m)?)?;
    m.add_function(wrap_pyfunction!(py::operations::builtin_sdl, m)?)?;
    m.add_function(wrap_pyfunction!(py::operations::input_objects, m)?)?;
    m.add_function(wrap_pyfunction!(py::prepared::prepare_operation, m)?)?;
    m.add_class::<py::prepared::PreparedOperation>()?;
    m.add_function(wrap_pyfunction!(py::prepared::forget_batch_sizes, m)?)?;
    m.add_function(wrap_pyfunction!(py::prepared::is_batch_cursor, m)?)?;
    m.add_function(wrap_pyfunction!(py::prepared::batch_pages_for, m)?)?;
    m.add_function(wrap_pyfunction!(py::operations::to_global_id, m)?)?;
    m.add_function(wrap_pyfunction!(py::operations::from_global_id, m)?)?;
    m.add_function(wrap_pyfunction!(py::observe::observe_attempts, m)?)?;
    m.add_function(wrap_pyfunction!(py::observe::call_var, m)?)?;
    m.add_function(wrap_pyfunction!(py::text::parse_datetime, m)?)?;
    m.add_function(wrap_pyfunction!(py::text::suggestions, m)?)?;
    Ok(())
}
