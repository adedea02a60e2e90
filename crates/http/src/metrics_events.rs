//! Host-wide metrics as [`CallEvents`]: every call and attempt of a client recorded in its
//! name's entry of the shared segment (`resilient_core::Metrics`, relaxed atomic adds).
//!
//! The mapping is policy, kept here: a status below 400 is a success, 4xx and 5xx are upstream
//! failures by class, an attempt without an answer is a timeout, a connection failure or
//! another failure; a call that ends unavailable by the funnel, the budget, the deadline or the
//! circuit is our refusal, counted apart (an upstream-failed call was already counted by its
//! attempts).

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use resilient_core::{
    AttemptClass, CircuitState, FailureClass, Metrics, RefusalReason, Transition,
};

use crate::call_events::{CallEnd, CallEvents};
use crate::decision::Outcome;
use crate::error::UnavailableKind;
use crate::fork_local::ForkLocal;
use crate::guard::Permit;
use crate::transport::FailureKind;

/// Records a client's calls in the metrics of its name.
pub struct MetricsEvents(Arc<Metrics>);

impl MetricsEvents {
    pub fn new(metrics: Metrics) -> Self {
        Self(Arc::new(metrics))
    }
}

/// The attempts this thread counts in flight, per metrics handle, so that the request's end can
/// end those a fatal error cut mid-way (PHP's bailout long-jumps past the Rust frames whose
/// permits would end them). Ending them starts a new generation: a permit of an older one that
/// still runs later (a pool task left on the runtime) does not end its attempt twice.
///
/// The ledger holds the handles, so that a permit need not: it names its handle by address and
/// ends its attempt through the ledger's. A handle stays listed at zero (no reference counts
/// touched per attempt) until a new handle finds it unused elsewhere, or the request ends.
#[derive(Default)]
struct Open {
    generation: u64,
    counts: Vec<(Arc<Metrics>, u64)>,
}

impl Drop for Open {
    /// A thread that ends with attempts still counted ends them: a permit that outlives its
    /// thread's ledger (moved to another thread) finds nothing to end them through later.
    fn drop(&mut self) {
        end_all(std::mem::take(&mut self.counts));
    }
}

/// Ends the attempts `counts` holds in flight; returns how many.
fn end_all(counts: Vec<(Arc<Metrics>, u64)>) -> u64 {
    let mut ended = 0;
    for (metrics, n) in counts {
        for _ in 0..n {
            metrics.attempt_released();
        }
        ended += n;
    }
    ended
}

thread_local! {
    /// The binding drives its calls on this thread's runtime, so their permits end here. A
    /// forked child does not see the parent's (the parent ends them).
    static OPEN: RefCell<ForkLocal<Open>> = const {
        RefCell::new(ForkLocal::new(Open {
            generation: 0,
            counts: Vec::new(),
        }))
    };
}

/// Counts one more attempt of `metrics` in flight on this thread; returns the generation, or
/// `None` when this thread keeps no ledger any more (it is exiting).
fn opened(metrics: &Arc<Metrics>) -> Option<u64> {
    OPEN.try_with(|open| {
        let mut open = open.borrow_mut();
        let open = open.here();
        match open
            .counts
            .iter_mut()
            .find(|(m, _)| Arc::ptr_eq(m, metrics))
        {
            Some((_, n)) => *n += 1,
            None => {
                open.counts
                    .retain(|(m, n)| *n > 0 || Arc::strong_count(m) > 1);
                open.counts.push((metrics.clone(), 1));
            }
        }
        open.generation
    })
    .ok()
}

/// Ends one attempt of the handle at address `metrics` opened in `generation`, through the
/// ledger's handle; nothing when the request's end already ended it. A permit dropped on
/// another thread (never in the binding) finds nothing there: its attempt stays counted until
/// the sending thread's request end, or that thread's end.
fn closed(metrics: usize, generation: u64) {
    let _ = OPEN.try_with(|open| {
        let mut open = open.borrow_mut();
        let open = open.here();
        if open.generation != generation {
            return;
        }
        if let Some((m, n)) = open
            .counts
            .iter_mut()
            .find(|(m, n)| *n > 0 && Arc::as_ptr(m) as usize == metrics)
        {
            *n -= 1;
            m.attempt_released();
        }
    });
}

/// Ends every attempt this thread still counts in flight; the binding calls it at the end of a
/// request, when none of its calls can still be running. Returns how many it ended.
pub fn end_open_attempts() -> u64 {
    let counts = OPEN
        .try_with(|open| {
            let mut open = open.borrow_mut();
            let open = open.here();
            open.generation += 1;
            std::mem::take(&mut open.counts)
        })
        .unwrap_or_default();
    end_all(counts)
}

/// How metrics class an attempt's outcome; `None` for a failure of ours (the sink file could
/// not be written, the request could not be made), which is neither an answer nor an upstream
/// failure.
pub fn attempt_class(outcome: Outcome) -> Option<AttemptClass> {
    Some(match outcome {
        Outcome::Status(s) if s < 400 => AttemptClass::Success,
        Outcome::Status(s) if s < 500 => AttemptClass::Failure(FailureClass::Status4xx),
        Outcome::Status(_) => AttemptClass::Failure(FailureClass::Status5xx),
        Outcome::Failed(FailureKind::Timeout) => AttemptClass::Failure(FailureClass::Timeout),
        Outcome::Failed(FailureKind::Connect) => AttemptClass::Failure(FailureClass::Connection),
        Outcome::Failed(kind) if kind.is_ours() => return None,
        Outcome::Failed(_) => AttemptClass::Failure(FailureClass::Other),
    })
}

/// Our refusal behind an unavailable call; `None` for an upstream failure.
pub fn refusal_of(kind: UnavailableKind) -> Option<RefusalReason> {
    match kind {
        UnavailableKind::FunnelFull => Some(RefusalReason::Funnel),
        UnavailableKind::BudgetExhausted => Some(RefusalReason::Budget),
        UnavailableKind::DeadlineExceeded => Some(RefusalReason::Deadline),
        UnavailableKind::CircuitOpen => Some(RefusalReason::Circuit),
        UnavailableKind::UpstreamFailed => None,
    }
}

impl CallEvents for MetricsEvents {
    fn breaker_transition(&self, transition: Transition) {
        self.0.breaker_transition(match transition {
            Transition::Opened | Transition::Reopened => CircuitState::Open,
            Transition::HalfOpened | Transition::ProbeGivenUp => CircuitState::HalfOpen,
            Transition::Closed => CircuitState::Closed,
        });
    }
    fn breaker_found(&self, state: CircuitState) {
        self.0.breaker_found(state);
    }
    fn fallback_used(&self) {
        self.0.fallback_used();
    }
    fn backend_fallback(&self) {
        self.0.backend_fallback();
    }

    fn call_started(&self) {
        self.0.call_started();
    }

    fn attempt_sent(&self, attempt: u32) -> Permit {
        self.0.attempt_sent(attempt);
        match opened(&self.0) {
            Some(generation) => Permit::calling(closed, Arc::as_ptr(&self.0) as usize, generation),
            None => {
                let metrics = self.0.clone();
                Permit::holding(move || metrics.attempt_released())
            }
        }
    }

    fn attempt_ended(&self, _attempt: u32, outcome: Outcome, duration: Duration) {
        if let Some(class) = attempt_class(outcome) {
            self.0.attempt_ended(class, duration);
        }
    }

    fn call_ended(&self, end: CallEnd) {
        match end.result {
            Ok(status) if status < 400 => self.0.call_succeeded(end.attempts),
            Ok(_) => {}
            Err(kind) => {
                if let Some(reason) = refusal_of(kind) {
                    self.0.refused(reason);
                }
            }
        }
    }
}
