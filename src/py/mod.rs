//! Thin PyO3 glue over the core: conversion, error mapping, the runtime. It decides nothing.

pub(crate) mod client;
pub(crate) mod completions;
pub(crate) mod convert;
pub(crate) mod decode;
#[cfg(feature = "emulator")]
pub(crate) mod emulator;
pub(crate) mod errors;
pub(crate) mod observe;
pub(crate) mod operations;
pub(crate) mod paging;
pub(crate) mod prepared;
pub(crate) mod runtime;
pub(crate) mod subscribe;
pub(crate) mod text;
pub(crate) mod values;

use std::sync::OnceLock;

use pyo3::prelude::*;

static LOG_RESET: OnceLock<pyo3_log::ResetHandle> = OnceLock::new();

/// Forwards the core's `log` records to Python's `logging` (logger `secfindings...`).
pub(crate) fn init_logging() {
    let logger = pyo3_log::Logger::default()
        .filter(log::LevelFilter::Off)
        .filter_target("secfindings".to_owned(), log::LevelFilter::Debug);
    if let Ok(handle) = logger.install() {
        let _ = LOG_RESET.set(handle);
    }
}

/// Re-reads Python's logging levels (after the user changed them).
#[pyfunction]
pub(crate) fn reset_log_cache() {
    if let Some(h) = LOG_RESET.get() {
        h.reset();
    }
}
