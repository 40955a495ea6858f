//! Text rules of the core offered to Python, so the package has one of each: the ISO 8601
//! datetime parser of `core::scalars` and the "did you mean" of `core::suggest`.

use pyo3::prelude::*;

use crate::core::{scalars, suggest};

/// An ISO 8601 datetime (or date) as an aware `datetime` with the offset given (UTC when none),
/// or `None` when the text is not one. The forms taken are `core::scalars::parse_datetime`'s.
#[pyfunction]
pub(crate) fn parse_datetime(text: &str) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    // Python's datetime starts at year 1: year 0 (which ISO 8601 and chrono take) is not one.
    scalars::parse_datetime(text).filter(|t| chrono::Datelike::year(t) >= 1)
}

/// What `name` was probably meant to be among `candidates`, best first (see
/// `core::suggest::suggestions`): the same but for case; else, with `prefixes`, the few that
/// start with it; else the nearest by edit distance. Bounded work for any number of candidates.
#[pyfunction]
#[pyo3(signature = (name, candidates, n=3, prefixes=true))]
pub(crate) fn suggestions(name: &str, candidates: Vec<String>, n: usize, prefixes: bool) -> Vec<String> {
    let refs: Vec<&str> = candidates.iter().map(String::as_str).collect();
    suggest::suggestions(name, &refs, n, prefixes).into_iter().map(str::to_owned).collect()
}
