//! Leases held by this thread's request.
//!
//! A bailout (fatal error, `max_execution_time`) long-jumps past Rust frames
//! and the engine may never destroy the `Resilient\Lease` objects, so every
//! lease handed to PHP is also recorded here and RSHUTDOWN releases whatever
//! is still listed. Releasing is idempotent in the core (a `LeaseId` carries
//! the owner word, so a slot already reclaimed and re-acquired by someone else
//! is left alone).
//!
//! A child of `pcntl_fork` inherits this list; the core never releases a lease
//! of another process, so the parent's slots stay held.
//!
//! The list is the thread's (no lock on a funnel's hot path): leases are taken and given back
//! on the thread that runs the request, and RSHUTDOWN runs there. The client's runtime runs
//! its calls on that thread too; on a thread-safe PHP build, where it is shared by the
//! process's request threads, a pool's task may run on another request's thread and list its
//! lease there.

use std::cell::RefCell;
use std::sync::Arc;

use resilient_core::{LeaseId, Segment};

struct Held {
    segment: Arc<Segment>,
    id: LeaseId,
}

thread_local! {
    /// The request's thread's list (PHP runs a request on one thread; no lock to take).
    static HELD: RefCell<Vec<Held>> = const { RefCell::new(Vec::new()) };
}

/// Records a lease handed to PHP.
pub fn add(segment: &Arc<Segment>, id: LeaseId) {
    HELD.with_borrow_mut(|held| {
        held.push(Held {
            segment: segment.clone(),
            id,
        })
    });
}

/// Forgets a lease (released by PHP code or by its object's destruction).
/// O(held), which is a handful: a request holds a few slots at most.
/// Nothing to do once the thread's list is torn down (a lease dropped at process exit).
pub fn remove(id: LeaseId) {
    let _ = HELD.try_with(|held| {
        let mut held = held.borrow_mut();
        if let Some(i) = held.iter().position(|h| h.id == id) {
            held.swap_remove(i);
        }
    });
}

/// Releases every lease this thread still lists; returns how many were
/// still ours. Entries inherited from a parent process are dropped unreleased.
pub fn release_all() -> usize {
    let taken = HELD.with_borrow_mut(std::mem::take);
    taken
        .into_iter()
        .filter(|h| h.segment.release(h.id))
        .count()
}
