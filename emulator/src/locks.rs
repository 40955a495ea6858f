//! Locks that ignore poisoning.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks, ignoring poisoning: every critical section leaves its data consistent.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
