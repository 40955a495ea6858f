//! secfindings: the Rust core of the Python client for the Security Findings Management API.

pub mod core;
