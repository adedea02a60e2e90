//! Where a client's shared state lives: [`SharedMemory`] here (the host's segment), Redis in
//! `crates/redis` (the same trait, for limits across hosts).
//!
//! A [`Backend`] turns typed configurations into the guards (funnel, circuit breaker state) and
//! the retry allowance the loop runs on. A client obtains them once, when it is built
//! ([`crate::HttpClientBuilder::backend`]); the loop only sees the [`Guard`] and
//! [`RetryAllowance`] traits, so a new backend changes nothing in it. A new kind of guard adds
//! a method here, which every backend then implements (Redis's with its fallback).

use std::sync::Arc;

use resilient_core::{
    BreakerConfig, BudgetConfig, CircuitBreaker, Funnel, FunnelConfig, LeaseId, RetryBudget,
    Segment,
};

use std::time::Duration;

use resilient_core::adaptive_limit::Sample;

use crate::breaker::BreakerStore;
use crate::decision::Outcome;
use crate::guard::{Ended, Guard, Permit, Refusal, RetryAllowance, FUNNEL_LEASE};
use crate::transport::FailureKind;

/// Makes a client's funnel, retry budget and circuit breaker.
pub trait Backend: Send + Sync {
    /// The funnel named `name` as a guard. `background`: the caller may not use the reserved
    /// slots (CLI, queue workers).
    fn funnel(
        &self,
        name: &str,
        config: FunnelConfig,
        background: bool,
    ) -> Result<Arc<dyn Guard>, resilient_core::Error>;
    /// The retry budget named `name`.
    fn budget(
        &self,
        name: &str,
        config: BudgetConfig,
    ) -> Result<Arc<dyn RetryAllowance>, resilient_core::Error>;
    /// The circuit breaker state of upstream `name` (one per name, whatever the client).
    fn breaker(
        &self,
        name: &str,
        config: BreakerConfig,
    ) -> Result<Arc<dyn BreakerStore>, resilient_core::Error>;
}

/// Told about every lease taken and given back, so the binding can release leftovers at request
/// end (a fatal error or timeout long-jumps past the Rust frames that would drop them).
pub trait LeaseRegistry: Send + Sync {
    fn held(&self, id: LeaseId);
    fn released(&self, id: LeaseId);
}

/// The host-wide shared-memory segment of `resilient_core`.
pub struct SharedMemory {
    segment: Arc<Segment>,
    registry: Option<Arc<dyn LeaseRegistry>>,
}

impl SharedMemory {
    pub fn new(segment: Arc<Segment>) -> Self {
        Self {
            segment,
            registry: None,
        }
    }
    /// `registry` learns every lease held and released.
    pub fn with_registry(mut self, registry: Arc<dyn LeaseRegistry>) -> Self {
        self.registry = Some(registry);
        self
    }
}

impl Backend for SharedMemory {
    fn funnel(
        &self,
        name: &str,
        config: FunnelConfig,
        background: bool,
    ) -> Result<Arc<dyn Guard>, resilient_core::Error> {
        let funnel = Funnel::new(self.segment.clone(), name, config)?;
        Ok(Arc::new(FunnelGuard {
            background,
            lease_ms: funnel.config().lease_ms(),
            funnel,
            registry: self.registry.clone(),
        }))
    }

    fn budget(
        &self,
        name: &str,
        config: BudgetConfig,
    ) -> Result<Arc<dyn RetryAllowance>, resilient_core::Error> {
        Ok(Arc::new(RetryBudget::new(
            self.segment.clone(),
            name,
            config,
        )?))
    }

    fn breaker(
        &self,
        name: &str,
        config: BreakerConfig,
    ) -> Result<Arc<dyn BreakerStore>, resilient_core::Error> {
        Ok(Arc::new(CircuitBreaker::new(
            self.segment.clone(),
            name,
            config,
        )?))
    }
}

/// A `resilient_core::Funnel` as a guard: one slot per attempt.
struct FunnelGuard {
    funnel: Funnel,
    /// No reserved slots (CLI); what it may take is read once per admission (a learned limit
    /// moves, and with `share` so does the background's demand).
    background: bool,
    lease_ms: u64,
    registry: Option<Arc<dyn LeaseRegistry>>,
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
