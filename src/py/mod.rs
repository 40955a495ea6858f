//! Thin PyO3 glue over the core: conversion, error mapping, the runtime. It decides nothing.

pub mod client;
pub mod completions;
pub mod convert;
pub mod decode;
#[cfg(feature = "emulator")]
pub mod emulator;
pub mod errors;
pub mod observe;
pub mod operations;
pub mod paging;
pub mod prepared;
pub mod runtime;
pub mod subscribe;
pub mod text;
pub mod values;

use std::sync::OnceLock;

use pyo3::prelude::*;

static LOG_RESET: OnceLock<pyo3_log::ResetHandle> = OnceLock::new();

/// Forwards the core's `log` records to Python's `logging` (logger `secfindings...`).
pub fn init_logging() {
    let logger = pyo3_log::Logger::default()
        .filter(log::LevelFilter::Off)
        .filter_target("secfindings".to_owned(), log::LevelFilter::Debug);
    if let Ok(handle) = logger.install() {
        let _ = LOG_RESET.set(handle);
    }
}

/// Re-reads Python's logging levels (after the user changed them).
#[pyfunction]
pub fn reset_log_cache() {
    if let Some(h) = LOG_RESET.get() {
        h.reset();
    }
}
