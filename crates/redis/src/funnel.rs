//! The funnel on Redis as a guard: one EVALSHA per admission, one ZREM per release (sent
//! without waiting for its reply, so an admission and its release cost one round trip).
//!
//! A slot is a member of the name's sorted set: the holder's token, scored with its lease's
//! expiry on the server's clock (see `scripts::FUNNEL_ACQUIRE`). Only the token's holder
//! removes it (ZREM by token), and an expired lease is dropped by the next admission, so a
//! holder that died (or lost Redis) keeps its slot until its lease ends, never longer.
//!
//! Waiting (`funnel.wait`): the loop asks again every millisecond, but this guard answers
//! "full" from memory after Redis said full, and asks Redis again only after a quiet time that
//! starts at 2 ms and doubles up to 20 ms while Redis keeps saying full (reset by any
//! admission). A waiting process so sends at most one round trip per 2–20 ms, and learns of a
//! freed slot at most 20 ms late. The quiet time is the client's, not one call's: another call
//! of the same client in this process within it is told "full" from memory too, at once when
//! its `funnel.wait` is 0 (docs/redis.md).
//!
//! `share` (web and background each keep their part under contention): the background holders'
//! tokens are also in a second sorted set, and a background caller refused sets a key that lives
//! `BACKGROUND_DEMAND_MS` (`scripts::FUNNEL_ACQUIRE_SHARED`): the shared memory's rule, counted by set
//! instead of by slot range. The background callers of a funnel with a reserve but without
//! `share` go through the same script (their cap as the limit, no demand), so that a funnel of
//! the same name with `share` counts them as background.
//!
//! When Redis does not answer in time, the client's `on_backend_error` decides (backend.rs).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use resilient_http::{Guard, Permit, Refusal, UnavailableKind, FUNNEL_LEASE};

use crate::backend::Fallback;
use crate::connection::{Server, Unreachable};
use crate::scripts::{FUNNEL_ACQUIRE, FUNNEL_ACQUIRE_SHARED};
use crate::{leftovers, token};

/// The first quiet time after Redis said full.
pub const FIRST_QUIET_MS: u64 = 2;
/// The longest quiet time.
pub const MAX_QUIET_MS: u64 = 20;

pub struct RedisFunnel {
    pub(crate) server: Arc<Server>,
    pub(crate) key: String,
    /// `limit` for web callers, `limit - reserve` in the background (with `share`: `limit` for
    /// both, the background's bound being its part).
    pub(crate) cap: u32,
    pub(crate) lease_ms: u64,
    pub(crate) fallback: Fallback<Arc<dyn Guard>>,
    /// Redis said full: answer full without asking until then (`now_ms` of the loop's clock).
    pub(crate) quiet_until_ms: AtomicU64,
    pub(crate) quiet_ms: AtomicU64,
    pub(crate) share: Option<Share>,
}

/// A funnel with `share`: where the background's holders and demand are kept, and this
/// caller's side.
pub(crate) struct Share {
    pub(crate) background_key: String,
    pub(crate) demand_key: String,
    pub(crate) background: bool,
    /// What this side keeps under contention: background `limit − reserve`, web `reserve`.
    pub(crate) part: u32,
    /// How long a refused background caller's demand holds web callers to their part
    /// ([`BACKGROUND_DEMAND_MS`](resilient_core::funnel::BACKGROUND_DEMAND_MS)); 0 for the background callers of a funnel without `share`,
    /// which are only counted in the background set.
    pub(crate) demand_ms: u64,
}

impl RedisFunnel {
    /// ZREM by the holder's token, sent without waiting for the reply (read with the reply of
    /// this connection's next command): the slot is free once Redis has the command. A release
    /// that cannot be sent now (back-off, no time left) goes with the next command that can.
    fn release(server: &Server, token: &str) {
        leftovers::release(token);
        let _ = server.send_releases();
    }

    /// The background holders' set this caller's token goes in too.
    fn background_key(&self) -> Option<&str> {
        match &self.share {
            Some(share) if share.background => Some(&share.background_key),
            _ => None,
        }
    }
}

impl Guard for RedisFunnel {
    fn why_down(&self) -> Option<String> {
        crate::connection::why_unreachable()
    }

    fn admit(&self, attempt: u32, now_ms: u64) -> Result<Permit, Refusal> {
        if now_ms < self.quiet_until_ms.load(Ordering::Relaxed) {
            return Err(Refusal::Full);
        }
        let token = token::next();
        let lease = std::time::Duration::from_millis(self.lease_ms);
        let sent = std::time::Instant::now();
        // Sent again with the same token if the connection is found dropped: the scripts
        // are idempotent by token, so a lost reply never costs a second slot. `server`: the
        // one that ran it (a cluster's node serving the key), where the slot goes back.
        let (taken, server) = self
            .server
            .route(&self.key)
            .run_idempotent(|c| match &self.share {
                None => FUNNEL_ACQUIRE
                    .key(&self.key)
                    .arg(self.cap)
                    .arg(self.lease_ms)
                    .arg(&token)
                    .invoke::<i64>(c),
                Some(share) => FUNNEL_ACQUIRE_SHARED
                    .key(&self.key)
                    .key(&share.background_key)
                    .key(&share.demand_key)
                    .arg(self.cap)
                    .arg(self.lease_ms)
                    .arg(&token)
                    .arg(if share.background { "b" } else { "w" })
                    .arg(share.part)
                    .arg(share.demand_ms)
                    .invoke::<i64>(c),
            });
        let asked = leftovers::Asked {
            server: &server,
            key: &self.key,
            background_key: self.background_key(),
            token: &token,
            sent,
            lease,
        };
        match taken {
            Ok(1) => {
                self.quiet_ms.store(FIRST_QUIET_MS, Ordering::Relaxed);
                leftovers::add(&asked);
                let server = server.clone();
                let permit = Permit::holding(move || RedisFunnel::release(&server, &token));
                // The slot lapses at its lease's end, counted on Redis from when the script
                // ran, after `sent`: the attempt must be over by then.
                Ok(permit.lasting(lease.saturating_sub(sent.elapsed()), FUNNEL_LEASE))
            }
            Ok(_) => {
                let quiet = self.quiet_ms.load(Ordering::Relaxed).max(FIRST_QUIET_MS);
                self.quiet_until_ms
                    .store(now_ms.saturating_add(quiet), Ordering::Relaxed);
                self.quiet_ms
                    .store((quiet * 2).min(MAX_QUIET_MS), Ordering::Relaxed);
                Err(Refusal::Full)
            }
            Err(unreachable) => {
                if unreachable == Unreachable::Failed {
                    // The script may have been written: Redis may run it late (a stall) and
                    // hold the token with nobody to give it back. (Not after a failed connect:
                    // a long outage would pile up tokens Redis never saw.)
                    leftovers::unanswered(&asked);
                }
                self.fallback.decide(
                    |local| local.admit(attempt, now_ms),
                    || Ok(Permit::free()),
                    || Err(Refusal::BackendDown(UnavailableKind::FunnelFull)),
                )
            }
        }
    }
}
