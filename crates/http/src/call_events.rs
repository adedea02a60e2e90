//! The seam for what a call does as it happens, told without text or allocation: the hook
//! host-wide metrics record through.
//!
//! A [`Guard`](crate::guard::Guard) decides; [`CallEvents`] only watches, and sees what a guard
//! cannot: the start and end of a call (originals, successes, our refusals by reason: a budget
//! that denies a retry, a deadline, a funnel or a circuit that refuses) and each attempt's
//! latency. One per [`CallEnv`](crate::CallEnv), set when the client is built.

use std::time::Duration;

use crate::decision::Outcome;
use crate::error::UnavailableKind;
use crate::guard::Permit;

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallEnd {
    /// Attempts sent.
    pub attempts: u32,
    /// `Ok(status)`: the answer returned (any status the loop returns, 4xx included);
    /// `Err(kind)`: the call was unavailable, by our refusal or an upstream failure.
    pub result: Result<u16, UnavailableKind>,
}

/// Told what a call does. Must be cheap and must not block (it runs inside the attempt loop).
pub trait CallEvents: Send + Sync {
    /// A call started (an original).
    fn call_started(&self) {}
    /// Attempt `attempt` (1-based) was admitted and is being sent. It is in flight until the
    /// returned permit is dropped: right after the attempt, or when the call is abandoned
    /// mid-attempt (its future dropped).
    fn attempt_sent(&self, _attempt: u32) -> Permit {
        Permit::free()
    }
    /// The attempt ended with `outcome` after `duration` (its permit already dropped).
    fn attempt_ended(&self, _attempt: u32, _outcome: Outcome, _duration: Duration) {}
    /// The call ended (once per call; a call abandoned mid-way never ends).
    fn call_ended(&self, _end: CallEnd) {}
    /// The name's circuit breaker changed state, in this process.
    fn breaker_transition(&self, _transition: resilient_core::Transition) {}
    /// An admission found the breaker closed or open, as another process or host may have
    /// left it (a breaker on Redis): no transition of this process's.
    fn breaker_found(&self, _state: resilient_core::CircuitState) {}
    /// The caller used its fallback value instead of the call's `Unavailable`.
    fn fallback_used(&self) {}
    /// A guard decided without its shared backend (Redis down or slow).
    fn backend_fallback(&self) {}
}
