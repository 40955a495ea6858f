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

/// A fault that waits for `skip` mutations to pass, then hits the next `count` mutations. With
/// `applied` the mutation runs first and the fault replaces (or follows) its answer: the case of a
/// change that reached the server although the client saw a failure.
struct MutationFault {
    fault: Fault,
    skip: u32,
    count: u32,
    applied: bool,
}

/// FIFO of faults for mutation requests only; queries pass untouched and are not counted.
#[derive(Default)]
pub(crate) struct MutationFaults {
    pending: AtomicUsize,
    queue: Mutex<VecDeque<MutationFault>>,
}

impl MutationFaults {
    pub fn push(&self, fault: Fault, after: u32, count: u32, applied: bool) {
        if count == 0 {
            return;
        }
        let mut queue = crate::locks::lock(&self.queue);
        queue.push_back(MutationFault { fault, skip: after, count, applied });
        self.pending.store(queue.len(), Ordering::Release);
    }

    pub fn clear(&self) {
        let mut queue = crate::locks::lock(&self.queue);
        queue.clear();
        self.pending.store(0, Ordering::Release);
    }

    /// For a request that is a mutation: `(fault, applied)` when one hits it. A mutation that
    /// passes counts down the first entry's `skip`.
    pub fn take(&self) -> Option<(Fault, bool)> {
        if self.pending.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut queue = crate::locks::lock(&self.queue);
        let front = queue.front_mut()?;
        if front.skip > 0 {
            front.skip -= 1;
            return None;
        }
        front.count = front.count.saturating_sub(1);
        let taken = (front.fault.clone(), front.applied);
        if front.count == 0 {
            queue.pop_front();
        }
        self.pending.store(queue.len(), Ordering::Release);
        Some(taken)
    }
}

/// Whether a GraphQL document's first definition is a mutation (whitespace, commas, a BOM and
/// `#` comments skipped). A document of several operations counts by its first.
pub(crate) fn is_mutation(query: &str) -> bool {
    let mut rest = query;
    loop {
        rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ',' || c == '\u{feff}');
        match rest.strip_prefix('#') {
            Some(comment) => rest = comment.split_once('\n').map_or("", |(_, after)| after),
            None => break,
        }
    }
    rest.strip_prefix("mutation")
        .is_some_and(|after| !after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_'))
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

    #[test]
    fn mutation_faults_wait_for_their_turn() {
        let faults = MutationFaults::default();
        assert_eq!(faults.take(), None);
        faults.push(Fault::Reset, 2, 1, true);
        faults.push(Fault::Status(502), 0, 2, false);
        assert_eq!(faults.take(), None);
        assert_eq!(faults.take(), None);
        assert_eq!(faults.take(), Some((Fault::Reset, true)));
        assert_eq!(faults.take(), Some((Fault::Status(502), false)));
        assert_eq!(faults.take(), Some((Fault::Status(502), false)));
        assert_eq!(faults.take(), None);
        faults.push(Fault::Reset, 0, 1, false);
        faults.clear();
        assert_eq!(faults.take(), None);
    }

    #[test]
    fn mutations_are_told_from_queries() {
        assert!(is_mutation("mutation { a }"));
        assert!(is_mutation("\u{feff} # note\n , mutation M($x: ID) { a }"));
        assert!(is_mutation("mutation{a}"));
        assert!(!is_mutation("query Q { mutation }"));
        assert!(!is_mutation("{ mutations }"));
        assert!(!is_mutation("mutations { a }"));
        assert!(!is_mutation("# mutation\n{ a }"));
        assert!(!is_mutation(""));
    }
}
