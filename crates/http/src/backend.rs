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
    BreakerConfig, BudgetConfig, CircuitBreaker, Funnel, FunnelConfig, RetryBudget, Segment,
};

use crate::breaker::BreakerStore;
use crate::funnel_guard::{FunnelGuard, LeaseRegistry};
use crate::guard::{Guard, RetryAllowance};

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
        Ok(Arc::new(FunnelGuard::new(
            funnel,
            background,
            self.registry.clone(),
        )))
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
