//! The retry budget on Redis: one EVALSHA per original and one per retry decision (and one
//! more for a retry counted that our guards then refused, given back), with the
//! shared memory's arithmetic over the same 20 buckets, on the server's clock
//! (`scripts::BUDGET`).
//!
//! An original's record is sent without waiting for its reply (read with the next command's,
//! `connection::Pipelined::send_script`): its answer decides nothing, and a call would
//! otherwise wait one round trip for it before its first attempt. A retry's decision waits
//! for its answer. Redis runs the commands of one connection in order, so a process's retry is
//! decided with its own originals counted; across processes and hosts a decision is exact up
//! to the commands in flight, as it would be if every record waited.
//!
//! Error bound: an original is lost (not counted, with no fallback) only when Redis does not
//! run a record it was written: a connection dropped before Redis read it (a restart between
//! two calls: that one record), or an error reply. NOSCRIPT (the scripts flushed on a live
//! connection) has the script loaded again; any other error (READONLY, OOM, NOPERM, MOVED...)
//! has the next records waited for until one runs, so that each refused one falls back to the
//! local budget with the back-off of any failed command. Either way at most the 16 records
//! sent before the error reply is read are lost, per process and event. Each lost original
//! makes the budget stricter, by `ratio` of a retry, never looser.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use resilient_http::RetryAllowance;

use crate::backend::Fallback;
use crate::connection::{evalsha, Server};
use crate::scripts::{BUDGET, GIVE_BACK};

pub struct RedisBudget {
    pub(crate) server: Arc<Server>,
    pub(crate) key: String,
    pub(crate) bucket_ms: u64,
    pub(crate) window: std::time::Duration,
    pub(crate) floor: u32,
    pub(crate) ratio: f64,
    pub(crate) fallback: Fallback<Arc<dyn RetryAllowance>>,
    /// When the last retries granted without Redis (its `on_backend_error` behaviour) were
    /// counted: given back there, not on Redis.
    pub(crate) granted_without_redis: Mutex<Vec<u64>>,
    /// The last retry decision was made without Redis (its `on_backend_error` behaviour): what
    /// a refusal's message tells.
    pub(crate) fell_back: AtomicBool,
}

/// How many retries granted without Redis are remembered to be given back there (a call gives
/// one back within its backoff, so only the last few can be).
const REMEMBERED: usize = 16;

impl RedisBudget {
    fn granted_without_redis(&self) -> MutexGuard<'_, Vec<u64>> {
        self.granted_without_redis
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The budget script's command for `op` (`o`: an original, `r`: a retry).
    fn command(&self, op: &str) -> redis::Cmd {
        let mut command = evalsha(&BUDGET, &[&self.key]);
        command
            .arg(op)
            .arg(self.bucket_ms)
            .arg(self.floor)
            .arg(self.ratio);
        command
    }
}

impl RetryAllowance for RedisBudget {
    fn record_original(&self, now_ms: u64) {
        let record = self.command("o");
        if self
            .server
            .route(&self.key)
            .run(|c| c.send_script(&BUDGET, &record))
            .is_err()
        {
            self.fallback
                .decide(|local| local.record_original(now_ms), || (), || ());
        }
    }

    fn try_consume(&self, now_ms: u64) -> bool {
        let decision = self.command("r");
        let answered = self
            .server
            .route(&self.key)
            .run(|c| c.query_script::<i64>(&BUDGET, &decision));
        self.fell_back.store(answered.is_err(), Ordering::Relaxed);
        answered.map(|n| n == 1).unwrap_or_else(|_| {
            let granted =
                self.fallback
                    .decide(|local| local.try_consume(now_ms), || true, || false);
            if granted {
                let mut remembered = self.granted_without_redis();
                if remembered.len() == REMEMBERED {
                    remembered.remove(0);
                }
                remembered.push(now_ms);
            }
            granted
        })
    }

    /// Where Redis decided: the budget's rule (its numbers live in Redis, asked for nothing
    /// more on a refusal). Without Redis: why, and what decided instead.
    fn refused_because(&self, now_ms: u64) -> Option<String> {
        if !self.fell_back.load(Ordering::Relaxed) {
            return Some(format!(
                "the budget every host shares through Redis allows floor {} + ratio {} × originals per {}s",
                self.floor,
                self.ratio,
                self.window.as_secs_f64()
            ));
        }
        let why =
            crate::connection::why_unreachable().unwrap_or_else(|| "Redis unreachable".into());
        Some(match &self.fallback {
            Fallback::Local { store, .. } => match store.refused_because(now_ms) {
                Some(local) => {
                    format!("{why}; this host's share of the budget decides meanwhile: {local}")
                }
                None => format!("{why}; this host's share of the budget decides meanwhile"),
            },
            _ => format!("{why}; on_backend_error 'closed' denies every retry meanwhile"),
        })
    }

    /// Where the retry was granted: without Redis, there (the local budget; nothing under
    /// `open`); else on Redis, by its age on the server's clock, sent without waiting as an
    /// original's record. Redis unreachable then, the retry stays counted: the budget stricter
    /// by one retry, never looser.
    fn give_back(&self, consumed_at_ms: u64, now_ms: u64) {
        let without_redis = {
            let mut remembered = self.granted_without_redis();
            let found = remembered.iter().rposition(|at| *at == consumed_at_ms);
            found.map(|i| remembered.remove(i)).is_some()
        };
        if without_redis {
            if let Fallback::Local { store, .. } = &self.fallback {
                store.give_back(consumed_at_ms, now_ms);
            }
            return;
        }
        let mut give_back = evalsha(&GIVE_BACK, &[&self.key]);
        give_back
            .arg(self.bucket_ms)
            .arg(now_ms.saturating_sub(consumed_at_ms));
        let _ = self
            .server
            .route(&self.key)
            .run(|c| c.send_script(&GIVE_BACK, &give_back));
    }
}
