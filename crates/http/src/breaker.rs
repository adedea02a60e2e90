//! The circuit breaker as a [`Guard`]: refuses every attempt while the upstream's breaker is
//! open, lets the host's one probe through when it is half-open, and tells the breaker how each
//! attempt it admitted ended.
//!
//! The state lives behind [`BreakerStore`] (the host-wide shared memory's
//! `resilient_core::CircuitBreaker` now, Redis later); this file only decides what counts as a
//! failure and carries the probe's ticket from its admission to its outcome.
//!
//! A failure is what the client would retry: a transient transport failure (timeout,
//! connection refused or closed) or a status in `retry_on`. A 404 or a 500 not in `retry_on`
//! is an answer: the upstream is up.
//!
//! The ticket's way to the outcome: the loop drops an attempt's permits and then tells every
//! guard the outcome with no `await` in between (crates/http/src/call.rs), so both happen on one
//! thread with nothing of this process running between them. The probe's permit, when dropped,
//! leaves its ticket in a thread-local slot keyed by the guard; `outcome` takes it from there.
//! A probe's permit dropped with no outcome after it (a later guard refused the attempt, e.g. the
//! funnel was full; or its call was cancelled) leaves its ticket in the slot: the next `admit`
//! on this thread finds it there and gives it back, so the next caller probes at once; if no
//! admit comes, the breaker gives the ticket up at its bound.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use resilient_core::{Admission, CircuitBreaker, Ticket, Transition};

use crate::call_events::CallEvents;
use crate::decision::Outcome;
use crate::guard::{Guard, Permit, Refusal};

/// Where a breaker's state lives: asked to admit, told how attempts ended.
pub trait BreakerStore: Send + Sync {
    /// May an attempt go out now?
    fn admit(&self, now_ms: u64) -> Admission;
    /// An attempt admitted while closed ended. `jitter`: a uniform random u64 (the open
    /// period's jitter, if this opens the breaker).
    fn record(&self, failure: bool, now_ms: u64, jitter: u64) -> Option<Transition>;
    /// The probe holding `ticket` ended; `None` when its ticket had been given up.
    fn resolve(
        &self,
        ticket: Ticket,
        success: bool,
        now_ms: u64,
        jitter: u64,
    ) -> Option<Transition>;
    /// The probe holding `ticket` ended without an outcome: the next caller may probe.
    fn give_back(&self, ticket: Ticket, now_ms: u64) -> bool;
}

impl BreakerStore for CircuitBreaker {
    fn admit(&self, now_ms: u64) -> Admission {
        CircuitBreaker::admit(self, now_ms)
    }
    fn record(&self, failure: bool, now_ms: u64, jitter: u64) -> Option<Transition> {
        CircuitBreaker::record(self, failure, now_ms, jitter)
    }
    fn resolve(
        &self,
        ticket: Ticket,
        success: bool,
        now_ms: u64,
        jitter: u64,
    ) -> Option<Transition> {
        CircuitBreaker::resolve(self, ticket, success, now_ms, jitter)
    }
    fn give_back(&self, ticket: Ticket, now_ms: u64) -> bool {
        CircuitBreaker::give_back(self, ticket, now_ms)
    }
}

thread_local! {
    /// The ticket of a probe whose permit was just dropped: (guard id, ticket).
    static PROBE_ENDED: Cell<Option<(usize, Ticket)>> = const { Cell::new(None) };
}

/// Tells guards apart in [`PROBE_ENDED`].
static NEXT_ID: AtomicUsize = AtomicUsize::new(1);

/// The breaker of one upstream as an admission guard.
pub struct BreakerGuard {
    store: Arc<dyn BreakerStore>,
    /// Told each transition (host-wide metrics), if any.
    events: Option<Arc<dyn CallEvents>>,
    retry_on: Vec<u16>,
    id: usize,
}

impl BreakerGuard {
    /// `retry_on`: the statuses the client retries, which count as failures.
    pub fn new(store: Arc<dyn BreakerStore>, retry_on: &[u16]) -> Self {
        Self {
            store,
            events: None,
            retry_on: retry_on.to_vec(),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Tells `events` each transition this process makes (host-wide metrics).
    pub fn with_events(mut self, events: Arc<dyn CallEvents>) -> Self {
        self.events = Some(events);
        self
    }

    fn is_failure(&self, outcome: Outcome) -> bool {
        match outcome {
            Outcome::Status(s) => self.retry_on.contains(&s),
            Outcome::Failed(kind) => kind.is_transient(),
        }
    }

    /// The ticket of this guard's probe whose permit was dropped on this thread, if any.
    fn take_ended_probe(&self) -> Option<Ticket> {
        PROBE_ENDED.with(|p| match p.get() {
            Some((id, ticket)) if id == self.id => {
                p.set(None);
                Some(ticket)
            }
            _ => None,
        })
    }

    fn transition(&self, t: Option<Transition>) {
        if let (Some(t), Some(events)) = (t, &self.events) {
            events.breaker_transition(t);
        }
    }
}

impl Guard for BreakerGuard {
    fn admit(&self, _attempt: u32, now_ms: u64) -> Result<Permit, Refusal> {
        if let Some(ticket) = self.take_ended_probe() {
            // Its attempt was never sent, or its call was dropped: nothing to decide on.
            self.store.give_back(ticket, now_ms);
        }
        match self.store.admit(now_ms) {
            Admission::Closed => Ok(Permit::free()),
            Admission::Refused { .. } => Err(Refusal::CircuitOpen),
            Admission::Probe { ticket, took_over } => {
                self.transition(Some(match took_over {
                    true => Transition::ProbeGivenUp,
                    false => Transition::HalfOpened,
                }));
                let id = self.id;
                Ok(Permit::holding(move || {
                    PROBE_ENDED.with(|p| p.set(Some((id, ticket))))
                }))
            }
        }
    }

    fn outcome(&self, outcome: Outcome, now_ms: u64) {
        let failure = self.is_failure(outcome);
        if let Some(ticket) = self.take_ended_probe() {
            if let Some(t) = self.store.resolve(ticket, !failure, now_ms, jitter()) {
                return self.transition(Some(t));
            }
        }
        self.transition(self.store.record(failure, now_ms, jitter()));
    }
}

/// A cheap uniform u64 (the open period's jitter): the clock, the pid and a counter mixed, so
/// processes and hosts that open at once draw apart. Not for anything secret.
fn jitter() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut z = crate::clock::monotonic_ns()
        ^ (std::process::id() as u64).rotate_left(40)
        ^ COUNTER
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::FailureKind;
    use std::sync::Mutex;

    /// A store that records what it is told, with a scripted admission.
    struct Scripted {
        admission: Mutex<Admission>,
        told: Mutex<Vec<String>>,
    }

    impl BreakerStore for Scripted {
        fn admit(&self, _: u64) -> Admission {
            *self.admission.lock().unwrap()
        }
        fn record(&self, failure: bool, _: u64, _: u64) -> Option<Transition> {
            self.told.lock().unwrap().push(format!("record {failure}"));
            None
        }
        fn resolve(&self, _: Ticket, success: bool, _: u64, _: u64) -> Option<Transition> {
            self.told.lock().unwrap().push(format!("resolve {success}"));
            Some(Transition::Closed)
        }
        fn give_back(&self, _: Ticket, _: u64) -> bool {
            self.told.lock().unwrap().push("give back".into());
            true
        }
    }

    #[test]
    fn only_what_the_client_would_retry_is_a_failure() {
        let store = Arc::new(Scripted {
            admission: Mutex::new(Admission::Closed),
            told: Mutex::default(),
        });
        let g = BreakerGuard::new(store.clone(), &[429, 503]);
        for o in [
            Outcome::Status(503),
            Outcome::Status(404),
            Outcome::Status(500),
            Outcome::Failed(FailureKind::Timeout),
            Outcome::Failed(FailureKind::TooLarge),
        ] {
            let p = g.admit(1, 0).unwrap();
            drop(p);
            g.outcome(o, 0);
        }
        assert_eq!(
            *store.told.lock().unwrap(),
            [
                "record true",
                "record false",
                "record false",
                "record true",
                "record false"
            ]
        );
    }

    #[test]
    fn the_probes_outcome_resolves_its_ticket_and_nothing_else_does() {
        let seg_path = std::env::temp_dir().join(format!(
            "resilient-breaker-guard-{}.shm",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&seg_path);
        let seg = Arc::new(resilient_core::Segment::open(&seg_path, 4).unwrap());
        let s = std::time::Duration::from_secs;
        let config = resilient_core::BreakerConfig::new(1.0, 1, s(10), s(5), s(1)).unwrap();
        let store = Arc::new(CircuitBreaker::new(seg.clone(), "up", config).unwrap());
        let a = BreakerGuard::new(store.clone(), &[503]);
        let b = BreakerGuard::new(store.clone(), &[503]);
        drop(a.admit(1, 0).unwrap());
        a.outcome(Outcome::Status(503), 0);
        assert_eq!(a.admit(1, 1).err(), Some(Refusal::CircuitOpen));
        let probe = b.admit(1, 7_000).expect("the probe");
        assert_eq!(a.admit(1, 7_000).err(), Some(Refusal::CircuitOpen));
        drop(probe);
        // Another guard's outcome on this thread does not take b's ticket.
        a.outcome(Outcome::Status(200), 7_010);
        assert_eq!(a.admit(1, 7_010).err(), Some(Refusal::CircuitOpen));
        b.outcome(Outcome::Status(200), 7_020);
        assert!(a.admit(1, 7_020).is_ok(), "closed by the probe's success");

        // A probe refused by a later guard (its permit dropped, no outcome): the next admit on
        // this thread gives its ticket back and probes at once, instead of waiting for the bound.
        drop(a.admit(1, 7_030).unwrap());
        a.outcome(Outcome::Status(503), 7_030);
        let probe = b.admit(1, 20_000).expect("the probe");
        drop(probe); // the funnel refused the attempt
        let again = b
            .admit(1, 20_001)
            .expect("given back, probing again at once");
        drop(again);
        b.outcome(Outcome::Status(200), 20_002);
        assert!(a.admit(1, 20_002).is_ok());
        std::fs::remove_file(seg_path).unwrap();
    }
}
