//! The retry budget on Redis: one EVALSHA per original and one per retry decision, with the
//! shared memory's arithmetic over the same 20 buckets, on the server's clock
//! (`scripts::BUDGET`). Nothing is batched, so there is no error bound to state beyond the
//! shared memory's own: a decision is exact across every host.

use std::sync::Arc;

use resilient_http::RetryAllowance;

use crate::backend::Fallback;
use crate::connection::Server;
use crate::scripts::BUDGET;

pub struct RedisBudget {
    pub(crate) server: Arc<Server>,
    pub(crate) key: String,
    pub(crate) bucket_ms: u64,
    pub(crate) floor: u32,
    pub(crate) ratio: f64,
    pub(crate) fallback: Fallback<Arc<dyn RetryAllowance>>,
}

impl RedisBudget {
    fn ask(&self, op: &str) -> Result<bool, crate::connection::Unreachable> {
        self.server.run(|c| {
            BUDGET
                .key(&self.key)
                .arg(op)
                .arg(self.bucket_ms)
                .arg(self.floor)
                .arg(self.ratio)
                .invoke::<i64>(c)
                .map(|n| n == 1)
        })
    }
}

impl RetryAllowance for RedisBudget {
    fn record_original(&self, now_ms: u64) {
        if self.ask("o").is_err() {
            self.fallback
                .decide(|local| local.record_original(now_ms), || (), || ());
        }
    }

    fn try_consume(&self, now_ms: u64) -> bool {
        self.ask("r").unwrap_or_else(|_| {
            self.fallback
                .decide(|local| local.try_consume(now_ms), || true, || false)
        })
    }
}
