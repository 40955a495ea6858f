//! An observer of HTTP attempts, as httpx's `event_hooks` are: after every attempt of every
//! request the transport makes, the observer (when one is set) gets what happened, named by the
//! call it belongs to. Telemetry (`secfindings.otel`) reads it instead of log text.
//!
//! A call is named by a number its caller chooses: the glue runs each call's future inside
//! [`scope`], and every attempt made while that future runs (its retries, a JWT refresh, the
//! pages a walk fetches ahead, whatever thread polls it) carries the number. Concurrent calls of
//! the same operation are told apart exactly. With no observer set an attempt costs one atomic
//! load more.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

tokio::task_local! {
    static CALL: u64;
}

/// What one HTTP attempt did.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AttemptEvent {
    /// The number of the call it belongs to (0: none was given).
    pub call: u64,
    /// The operation (the request's label).
    pub operation: String,
    /// 1 for the first attempt of a request, 2 after one retry, ...
    pub attempt: u32,
    /// The HTTP status; 0 when no answer came (a connection lost, a timeout).
    pub status: u16,
    /// When the request was sent, in seconds since the Unix epoch.
    pub started: f64,
    /// How long the attempt took.
    pub elapsed: Duration,
    /// The wait before this attempt, after the previous one failed.
    pub waited: Duration,
    /// When the retry policy sent this attempt again: the previous attempt's status (0: it got
    /// no answer). `None` for a first attempt, and for the one after a JWT refresh.
    pub retry_of: Option<u16>,
    /// A 429's `Retry-After`, as sent.
    pub retry_after: Option<String>,
    /// Bytes of the answer read (after decompression).
    pub bytes: u64,
}

/// Receives each attempt; it must be quick (it runs on the thread that made the attempt).
pub(crate) type Observer = Arc<dyn Fn(&AttemptEvent) + Send + Sync>;

static OBSERVED: AtomicBool = AtomicBool::new(false);
static OBSERVER: RwLock<Option<Observer>> = RwLock::new(None);

/// Sets (or with `None` removes) the observer of every client of this process.
pub(crate) fn set(observer: Option<Observer>) {
    let on = observer.is_some();
    if let Ok(mut slot) = OBSERVER.write() {
        *slot = observer;
    }
    OBSERVED.store(on, Ordering::Release);
}

/// Whether an observer is set (checked before an event is made at all).
pub(crate) fn observed() -> bool {
    OBSERVED.load(Ordering::Acquire)
}

/// Hands `event` to the observer, if one is set.
pub(crate) fn emit(event: &AttemptEvent) {
    let observer = OBSERVER.read().ok().and_then(|g| g.clone());
    if let Some(observer) = observer {
        observer(event);
    }
}

/// The number of the call whose future is running (0 outside any).
pub(crate) fn current_call() -> u64 {
    CALL.try_with(|c| *c).unwrap_or(0)
}

/// Runs `fut` as call number `call` (0: as no call, unchanged).
pub(crate) async fn scope<F: std::future::Future>(call: u64, fut: F) -> F::Output {
    if call == 0 {
        fut.await
    } else {
        CALL.scope(call, fut).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[tokio::test]
    async fn a_scope_names_its_attempts_and_the_observer_gets_them() {
        assert_eq!(current_call(), 0);
        assert_eq!(scope(7, async { current_call() }).await, 7);
        assert_eq!(scope(0, async { current_call() }).await, 0);
        // Nested: the inner call is the one that counts.
        assert_eq!(scope(7, async { scope(8, async { current_call() }).await }).await, 8);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        set(Some(Arc::new(move |e: &AttemptEvent| sink.lock().unwrap().push(e.call))));
        assert!(observed());
        let event = AttemptEvent {
            call: 3,
            operation: "op".into(),
            attempt: 1,
            status: 200,
            started: 0.0,
            elapsed: Duration::ZERO,
            waited: Duration::ZERO,
            retry_of: None,
            retry_after: None,
            bytes: 0,
        };
        emit(&event);
        set(None);
        assert!(!observed());
        emit(&event);
        assert_eq!(*seen.lock().unwrap(), vec![3]);
    }
}
