//! What the response bodies of one call, or of every request of one pool, may hold in memory
//! together, beside each body's own `max_body`.
//!
//! Why: the PHP binding caps bodies at what `memory_limit` leaves (a body is Rust memory PHP
//! does not see until it becomes a string). A pool holds all its bodies until it returns, so a
//! limit per body would let ten of them take ten times what is left. The bodies share one
//! [`SharedBodyLimit`] instead; `body_limit.rs` reserves in it as bytes arrive.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{AcqRel, Acquire};
use std::sync::Arc;

/// The bytes the bodies of one call (or of one pool's requests) may hold in memory together.
/// Each body reserves its bytes as they arrive (its announced length at once) and gives them
/// back when it is thrown away (its read failed; the call retried, or followed a redirect,
/// past it). A body kept keeps them for as long as the call runs; after it, PHP counts the
/// bodies its `Resilient\Response` objects hold.
#[derive(Debug)]
pub struct SharedBodyLimit {
    limit: u64,
    held: AtomicU64,
}

impl SharedBodyLimit {
    pub fn new(limit: u64) -> Arc<Self> {
        Arc::new(Self {
            limit,
            held: AtomicU64::new(0),
        })
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The bytes reserved now.
    pub fn held(&self) -> u64 {
        self.held.load(Acquire)
    }

    /// Takes `bytes` more, or nothing when that would pass the limit.
    pub(crate) fn reserve(&self, bytes: u64) -> bool {
        self.held
            .fetch_update(AcqRel, Acquire, |held| {
                held.checked_add(bytes).filter(|&t| t <= self.limit)
            })
            .is_ok()
    }

    /// Gives back the bytes of a body thrown away.
    pub fn give_back(&self, bytes: u64) {
        let _ = self
            .held
            .fetch_update(AcqRel, Acquire, |held| Some(held.saturating_sub(bytes)));
    }
}

/// One limit per identity: two calls' limits are never the same one.
impl PartialEq for SharedBodyLimit {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}
impl Eq for SharedBodyLimit {}

/// A body's limits: its own (`max_body`), and the one it shares with the other bodies of its
/// call or pool, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyLimit {
    pub max: u64,
    pub shared: Option<Arc<SharedBodyLimit>>,
}

impl From<u64> for BodyLimit {
    fn from(max: u64) -> Self {
        BodyLimit { max, shared: None }
    }
}
