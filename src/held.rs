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
    /// The Fiber whose code took it ([`crate::fiber_states::running`]), `None`: the main
    /// context's.
    fiber: Option<usize>,
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
            fiber: crate::fiber_states::running(),
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

/// The Fiber of `context` has ended, or its context was freed: what it took counts as nobody's
/// Fiber's now (the engine gives a freed context's address to the next Fiber, which may be
/// suspended when a fatal error comes).
pub fn fiber_gone(context: usize) {
    let _ = HELD.try_with(|held| {
        if let Ok(mut h) = held.try_borrow_mut() {
            h.iter_mut()
                .filter(|e| e.fiber == Some(context))
                .for_each(|e| e.fiber = None);
        }
    });
}

/// `id` is still listed: not given back by a release, nor by the end of the code that held it
/// (a fatal error, [`release_ended_by_bailout`]).
pub fn contains(id: LeaseId) -> bool {
    HELD.try_with(|held| {
        held.try_borrow()
            .is_ok_and(|h| h.iter().any(|e| e.id == id))
    })
    .unwrap_or(false)
}

/// Releases every lease this thread still lists; returns how many were
/// still ours. Entries inherited from a parent process are dropped unreleased.
pub fn release_all() -> usize {
    release_where(|_| true)
}

/// Releases the leases of the code a bailout ends: all but those a suspended Fiber took (a
/// shutdown function may resume it, and it goes on under them; see `fiber_states`).
pub fn release_ended_by_bailout() -> usize {
    release_where(|h| !h.fiber.is_some_and(crate::fiber_states::is_suspended))
}

/// Releases and unlists the entries `ended` picks. Not while the list is in use (an error
/// raised in the middle of `add`): RSHUTDOWN releases them.
fn release_where(ended: impl Fn(&Held) -> bool) -> usize {
    let taken = HELD
        .try_with(|held| {
            held.try_borrow_mut().map(|mut h| {
                let (ended, kept): (Vec<_>, Vec<_>) =
                    std::mem::take(&mut *h).into_iter().partition(|e| ended(e));
                *h = kept;
                ended
            })
        })
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    taken
        .into_iter()
        .filter(|h| h.segment.release(h.id))
        .count()
}
