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

use std::sync::Arc;

use resilient_http::RetryAllowance;

use crate::backend::Fallback;
use crate::connection::{evalsha, Server};
use crate::scripts::{BUDGET, GIVE_BACK};

pub struct RedisBudget {
    pub(crate) server: Arc<Server>,
    pub(crate) key: String,
    pub(crate) bucket_ms: u64,
    pub(crate) floor: u32,
    pub(crate) ratio: f64,
    pub(crate) fallback: Fallback<Arc<dyn RetryAllowance>>,
}

impl RedisBudget {
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
        self.server
            .route(&self.key)
            .run(|c| c.query_script::<i64>(&BUDGET, &decision))
            .map(|n| n == 1)
            .unwrap_or_else(|_| {
                self.fallback
                    .decide(|local| local.try_consume(now_ms), || true, || false)
            })
    }

    /// Sent without waiting, as an original's record. Redis unreachable, nothing is given
    /// back (the retry may have been counted there): the budget stays stricter by that retry,
    /// never looser.
    fn give_back(&self, _consumed_at_ms: u64) {
        let give_back = evalsha(&GIVE_BACK, &[&self.key]);
        let _ = self
            .server
            .route(&self.key)
            .run(|c| c.send_script(&GIVE_BACK, &give_back));
    }
}
