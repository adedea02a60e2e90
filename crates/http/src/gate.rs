//! The shared guards the loop consults: a funnel slot per attempt and a retry budget.
//!
//! The loop sees them through two small traits, so it runs unchanged over the host-wide
//! shared-memory state of `resilient_core` (adapters below) and over in-memory fakes in tests.
//! A [`Slot`] is RAII: dropping it gives the slot back, so no path through the loop can hold a
//! slot into a sleep.

use std::sync::Arc;

use resilient_core::{BudgetConfig, Funnel, FunnelConfig, LeaseId, RetryBudget, Segment};

use crate::options::ClientConfig;
use crate::policy::Policy;

/// One held funnel slot. Released exactly once: by [`Slot::release`] or on drop.
pub struct Slot {
    release: Option<Box<dyn FnOnce() + Send>>,
}

impl Slot {
    pub fn new(release: impl FnOnce() + Send + 'static) -> Self {
        Self {
            release: Some(Box::new(release)),
        }
    }
    pub fn release(mut self) {
        if let Some(f) = self.release.take() {
            f();
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(f) = self.release.take() {
            f();
        }
    }
}

/// Admission per attempt (the funnel / bulkhead). Never waits: `None` means full.
pub trait AttemptGate: Send + Sync {
    fn try_enter(&self, now_ms: u64) -> Option<Slot>;
}

/// The retry budget: originals deposit, retries withdraw.
pub trait RetryAllowance: Send + Sync {
    fn record_original(&self, now_ms: u64);
    /// May one retry go out now? Counts it when yes.
    fn try_consume(&self, now_ms: u64) -> bool;
}

/// Told about every lease taken and given back, so the binding can release leftovers at request
/// end (a fatal error or timeout long-jumps past the Rust frames that would drop them).
pub trait LeaseRegistry: Send + Sync {
    fn held(&self, id: LeaseId);
    fn released(&self, id: LeaseId);
}

/// A `resilient_core::Funnel` as an [`AttemptGate`].
pub struct FunnelGate {
    funnel: Funnel,
    cap: u32,
    lease_ms: u64,
    registry: Option<Arc<dyn LeaseRegistry>>,
}

impl FunnelGate {
    /// `cap`: `funnel.cap(background)` (web callers may use the reserved slots).
    /// `lease_ms`: how long a slot survives a killed worker (default 2 × attempt timeout).
    pub fn new(funnel: Funnel, cap: u32, lease_ms: u64) -> Self {
        Self {
            funnel,
            cap,
            lease_ms,
            registry: None,
        }
    }
    pub fn with_registry(mut self, registry: Arc<dyn LeaseRegistry>) -> Self {
        self.registry = Some(registry);
        self
    }
    pub fn funnel(&self) -> &Funnel {
        &self.funnel
    }
}

impl AttemptGate for FunnelGate {
    fn try_enter(&self, now_ms: u64) -> Option<Slot> {
        let lease = self
            .funnel
            .try_acquire_for(self.cap, now_ms, self.lease_ms)?;
        let registry = self.registry.clone();
        if let Some(r) = &registry {
            r.held(lease.id());
        }
        Some(Slot::new(move || {
            let id = lease.id();
            lease.release();
            if let Some(r) = registry {
                r.released(id);
            }
        }))
    }
}

impl RetryAllowance for RetryBudget {
    fn record_original(&self, now_ms: u64) {
        RetryBudget::record_original(self, now_ms)
    }
    fn try_consume(&self, now_ms: u64) -> bool {
        RetryBudget::try_consume(self, now_ms)
    }
}

/// The guards a client's options ask for, on the host-wide shared memory: a funnel when
/// `funnel` is set (lease default 2 × the attempt timeout, seed 000), a budget unless disabled.
/// `background`: CLI callers may not use the funnel's reserved slots. `registry` learns every
/// lease held and released (request-end cleanup in the binding).
pub fn shared_guards(
    segment: Arc<Segment>,
    name: &str,
    config: &ClientConfig,
    policy: &Policy,
    background: bool,
    registry: Option<Arc<dyn LeaseRegistry>>,
) -> Result<
    (
        Option<Arc<dyn AttemptGate>>,
        Option<Arc<dyn RetryAllowance>>,
    ),
    resilient_core::Error,
> {
    let gate: Option<Arc<dyn AttemptGate>> = match config.funnel {
        Some(f) => {
            let lease = f.lease.unwrap_or(policy.timeout.saturating_mul(2));
            let funnel = Funnel::new(
                segment.clone(),
                name,
                FunnelConfig::new(f.limit.into(), f.reserve.into(), lease)?,
            )?;
            let cap = funnel.cap(background);
            let lease_ms = funnel.config().lease_ms();
            let mut gate = FunnelGate::new(funnel, cap, lease_ms);
            if let Some(registry) = registry {
                gate = gate.with_registry(registry);
            }
            Some(Arc::new(gate))
        }
        None => None,
    };
    let budget: Option<Arc<dyn RetryAllowance>> = match config.budget {
        Some(b) => Some(Arc::new(RetryBudget::new(
            segment,
            name,
            BudgetConfig::new(b.ratio, b.floor, b.window)?,
        )?)),
        None => None,
    };
    Ok((gate, budget))
}
