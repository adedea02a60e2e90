//! The host's funnel (`resilient_core::Funnel`, in the shared segment) as a [`Guard`]: one
//! slot per attempt, held from admission until the attempt ends, and, for a learned limit
//! (`'limit' => 'auto'`), what each attempt's end teaches it: its latency, or a drop (see
//! `is_drop`), or nothing (an error page).

use std::sync::Arc;
use std::time::Duration;

use resilient_core::adaptive_limit::Sample;
use resilient_core::{Funnel, LeaseId};

use crate::decision::Outcome;
use crate::guard::{Ended, Guard, Permit, Refusal, FUNNEL_LEASE};
use crate::transport::FailureKind;

/// Told about every lease taken and given back, so the binding can release leftovers at request
/// end (a fatal error or timeout long-jumps past the Rust frames that would drop them).
pub trait LeaseRegistry: Send + Sync {
    fn held(&self, id: LeaseId);
    fn released(&self, id: LeaseId);
}

/// A `resilient_core::Funnel` as a guard: one slot per attempt.
pub(crate) struct FunnelGuard {
    funnel: Funnel,
    /// No reserved slots (CLI); what it may take is read once per admission (a learned limit
    /// moves, and with `share` so does the background's demand).
    background: bool,
    lease_ms: u64,
    registry: Option<Arc<dyn LeaseRegistry>>,
}

impl FunnelGuard {
    pub(crate) fn new(
        funnel: Funnel,
        background: bool,
        registry: Option<Arc<dyn LeaseRegistry>>,
    ) -> Self {
        Self {
            lease_ms: funnel.config().lease_ms(),
            funnel,
            background,
            registry,
        }
    }
}

impl Guard for FunnelGuard {
    fn why_full(&self, now_ms: u64) -> Option<String> {
        Some(self.funnel.why_full(self.background, now_ms))
    }

    fn admit(&self, _attempt: u32, now_ms: u64) -> Result<Permit, Refusal> {
        let lease = self
            .funnel
            .admit(self.background, now_ms, self.lease_ms)
            .ok_or(Refusal::Full)?;
        let registry = self.registry.clone();
        if let Some(r) = &registry {
            r.held(lease.id());
        }
        let learned = self.funnel.config().adaptive_bounds().is_some();
        let permit = Permit::ending(move |ended| {
            let id = match ended {
                // A learned limit keeps an abandoned attempt's slot a while: see `abandoned`.
                Some(end) if learned && abandoned(end.outcome) => {
                    lease.hold_until(end.now_ms.saturating_add(end.duration.as_millis() as u64))
                }
                _ => {
                    let id = lease.id();
                    lease.release();
                    id
                }
            };
            if let Some(r) = registry {
                r.released(id);
            }
        });
        // The slot lapses at its lease's end: the attempt must be over by then.
        Ok(permit.lasting(Duration::from_millis(self.lease_ms), FUNNEL_LEASE))
    }

    /// A learned limit learns from every attempt it admitted.
    fn ended(&self, end: &Ended) {
        if self.funnel.config().adaptive_bounds().is_none() {
            return;
        }
        let (outcome, duration, now_ms) = (end.outcome, end.duration, end.now_ms);
        if teaches_nothing(outcome) {
            return;
        }
        let sample = Sample {
            latency_us: duration.as_micros().min(u64::MAX as u128) as u64,
            drop: is_drop(outcome),
            deadline_cut: end.by_deadline(),
            // Its own slot was given back just before, unless it is kept (abandoned).
            inflight: self.funnel.counted(now_ms) + u32::from(!abandoned(outcome)),
        };
        self.funnel.record(sample, now_ms);
    }
}

/// An attempt we gave up on while the upstream may still be working on it (a timeout): a
/// server does not notice that its client left, so the request keeps its place in the
/// upstream's queue. With a learned limit its slot stays counted for as long again as the
/// attempt took, so the funnel does not send a new attempt in its place into that queue.
fn abandoned(outcome: Outcome) -> bool {
    matches!(outcome, Outcome::Failed(FailureKind::Timeout))
}

/// What tells a learned limit that the upstream is over capacity: a timeout, a connection
/// that failed or broke, 429, 503, and a gateway's 502 and 504 (the upstream behind it down
/// or too slow).
fn is_drop(outcome: Outcome) -> bool {
    matches!(
        outcome,
        Outcome::Status(429 | 502 | 503 | 504)
            | Outcome::Failed(FailureKind::Timeout | FailureKind::Connect | FailureKind::Closed)
    )
}

/// An error page (any other 5xx): neither a drop nor a latency, which would be the error's
/// and not the upstream's queue's (a 500 in 0.3 ms from an upstream that answers in 60 ms
/// would teach the limit that every later answer queued).
fn teaches_nothing(outcome: Outcome) -> bool {
    matches!(outcome, Outcome::Status(500..=599)) && !is_drop(outcome)
}
