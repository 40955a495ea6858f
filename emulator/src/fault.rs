//! Faults injected into the next requests of one endpoint, to exercise a client's error handling.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Which side of the emulator a fault applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultTarget {
    /// The GraphQL endpoint (`/api/v1`).
    Api,
    /// The identity provider (`POST /`).
    Idp,
}

/// What an injected fault does to one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Answer with this status: 502 gets a load balancer's HTML page, 503 / 504 an API gateway's
    /// JSON message, 500 a plain-text body, anything else `{"message": <reason>}`.
    Status(u16),
    /// Read the request, then abort the connection (RST) without answering.
    Reset,
    /// Answer normally but close the connection after half of the body, with the `Content-Length`
    /// of the full body.
    Truncated,
    /// Answer normally after this delay.
    Delay(Duration),
    /// On the API: 429 with `Retry-After`, as a real rate-limit breach. On the identity provider:
    /// Cognito's `TooManyRequestsException` (which carries no `Retry-After`).
    RateLimited { retry_after: u64 },
    /// A Cognito-style error answer (meant for [`FaultTarget::Idp`]).
    IdpError { error_type: String, message: String, status: u16 },
    /// `InitiateAuth` answers with a challenge instead of tokens (meant for [`FaultTarget::Idp`]).
    Challenge(String),
}

/// FIFO of `(fault, remaining uses)`.
#[derive(Default)]
pub(crate) struct FaultQueue {
    // Entries in `queue`; lets requests skip the lock when nothing is injected.
    pending: AtomicUsize,
    queue: Mutex<VecDeque<(Fault, u32)>>,
}

impl FaultQueue {
    pub fn push(&self, fault: Fault, count: u32) {
        if count == 0 {
            return;
        }
        let mut queue = crate::locks::lock(&self.queue);
        queue.push_back((fault, count));
        self.pending.store(queue.len(), Ordering::Release);
    }

    pub fn clear(&self) {
        let mut queue = crate::locks::lock(&self.queue);
        queue.clear();
        self.pending.store(0, Ordering::Release);
    }

    /// The fault for the current request, if any.
    pub fn take(&self) -> Option<Fault> {
        if self.pending.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut queue = crate::locks::lock(&self.queue);
        let (fault, remaining) = queue.front_mut()?;
        *remaining = remaining.saturating_sub(1);
        let taken =
            if *remaining == 0 { queue.pop_front().map(|(fault, _)| fault) } else { Some(fault.clone()) };
        self.pending.store(queue.len(), Ordering::Release);
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_with_counts() {
        let queue = FaultQueue::default();
        assert_eq!(queue.take(), None);
        queue.push(Fault::Status(502), 2);
        queue.push(Fault::Reset, 1);
        queue.push(Fault::Truncated, 0);
        assert_eq!(queue.take(), Some(Fault::Status(502)));
        assert_eq!(queue.take(), Some(Fault::Status(502)));
        assert_eq!(queue.take(), Some(Fault::Reset));
        assert_eq!(queue.take(), None);
        queue.push(Fault::Reset, 5);
        queue.clear();
        assert_eq!(queue.take(), None);
    }
}
