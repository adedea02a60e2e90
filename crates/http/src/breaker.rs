//! The circuit breaker as a [`Guard`]: refuses every attempt while the upstream's breaker is
//! open, lets the host's one probe through when it is half-open, and tells the breaker how each
//! attempt it admitted ended.
//!
//! The state lives behind [`BreakerStore`] (the host-wide shared memory's
//! `resilient_core::CircuitBreaker`, or Redis's in `crates/redis`); this file only decides what
//! counts as a failure and carries the probe's ticket from its admission to its outcome.
//!
//! A failure is what the client would retry: a transient transport failure (timeout,
//! connection refused or closed) or a 5xx status in `retry_on`. A 404 or a 500 not in
//! `retry_on` is an answer: the upstream is up; so is a 4xx in `retry_on` (a 429 is the
//! upstream asking for less, which the budget and `Retry-After` already obey: it must not cut
//! every caller off for `open_for`).
//!
//! A timeout counts also when the call's deadline cut the attempt short: where every caller's
//! deadline is shorter than the client's timeout, every attempt is cut, and a hung upstream
//! must still open the breaker. Not quite so for the probe: one caller's lack of time must not
//! keep the upstream cut off for another `open_for`. A probe its caller's deadline ended before
//! it waited half of what the client's own settings give an attempt (its timeout, or the
//! client's `deadline` if shorter: [`Ended::cut_early`]) gives its ticket back, and the next
//! caller probes at once; one that waited longer is a failure, so a hung upstream reopens the
//! breaker however short the callers' deadlines are, down to half that.
//!
//! An attempt sent before the breaker last closed is not counted when it ends after the close
//! (the store gets when it was sent): it tells of the outage the probe saw end.
//!
//! The ticket's way to the outcome: the loop ends an attempt's permits and then tells every
//! guard the outcome with no `await` in between (crates/http/src/call.rs), so both happen on one
//! thread with nothing of this process running between them. The probe's permit, when ended,
//! leaves its ticket in a thread-local slot keyed by the guard; `ended` takes it from there.
//! A probe's permit dropped without an outcome (a later guard refused the attempt, e.g. the
//! funnel was full; or its call was cancelled) gives its ticket back at once, so the next
//! caller of the host probes instead of everyone waiting for the bound; the same guard asking
//! again (a funnel wait polls) is not counted as another half-open transition.
//!
//! A probe's attempt lasts at most the client's `timeout` (its permit says so), also when the
//! request asks for a longer one: the ticket is given up after that plus a margin, and a probe
//! outliving its ticket would let a second probe out beside it.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use resilient_core::{Admission, CircuitBreaker, Ticket, Transition};

use crate::call_events::CallEvents;
use crate::decision::Outcome;
use crate::error::UnavailableKind;
use crate::guard::{Ended, Guard, Permit, Refusal};

/// Where a breaker's state lives: asked to admit, told how attempts ended.
pub trait BreakerStore: Send + Sync {
    /// May an attempt go out now?
    fn admit(&self, now_ms: u64) -> Admission;
    /// An attempt admitted while closed ended. `jitter`: a uniform random u64 (the open
    /// period's jitter, if this opens the breaker).
    /// `started_ms`: when the attempt was sent.
    fn record(
        &self,
        failure: bool,
        started_ms: u64,
        now_ms: u64,
        jitter: u64,
    ) -> Option<Transition>;
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
    /// Whether `granted` is the ticket of the admission right after `returned` was given back
    /// (the same caller asking again, not a new half-open period).
    fn retakes(&self, returned: Ticket, granted: Ticket) -> bool;
    /// Why the store gave no answer to the admission it just answered
    /// [`Admission::Unreachable`] ([`Guard::why_down`]).
    fn why_down(&self) -> Option<String> {
        None
    }
}

impl BreakerStore for CircuitBreaker {
    fn admit(&self, now_ms: u64) -> Admission {
        CircuitBreaker::admit(self, now_ms)
    }
    fn record(
        &self,
        failure: bool,
        started_ms: u64,
        now_ms: u64,
        jitter: u64,
    ) -> Option<Transition> {
        CircuitBreaker::record(self, failure, started_ms, now_ms, jitter)
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
    fn retakes(&self, returned: Ticket, granted: Ticket) -> bool {
        granted.retakes(returned)
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
    /// The longest a probe's attempt may last (the client's `timeout`).
    probe_attempt: Duration,
    /// The ticket this guard gave back at its last admission's end (its word; 0: none).
    returned: Arc<AtomicU64>,
    id: usize,
}

impl BreakerGuard {
    /// `retry_on`: the statuses the client retries, whose 5xx count as failures.
    /// `probe_attempt`: the longest a probe's attempt may last, within the store's probe bound.
    pub fn new(store: Arc<dyn BreakerStore>, retry_on: &[u16], probe_attempt: Duration) -> Self {
        Self {
            store,
            events: None,
            retry_on: retry_on.to_vec(),
            probe_attempt,
            returned: Arc::default(),
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
            Outcome::Status(s) => s >= 500 && self.retry_on.contains(&s),
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

    fn found(&self, state: resilient_core::CircuitState) {
        if let Some(events) = &self.events {
            events.breaker_found(state);
        }
    }

    fn transition(&self, t: Option<Transition>) {
        if let (Some(t), Some(events)) = (t, &self.events) {
            events.breaker_transition(t);
        }
    }
}

impl Guard for BreakerGuard {
    fn why_down(&self) -> Option<String> {
        self.store.why_down()
    }

    fn admit(&self, _attempt: u32, now_ms: u64) -> Result<Permit, Refusal> {
        let asked = Instant::now();
        let admission = self.store.admit(now_ms);
        // A ticket given back matters to this admission only (it may be its retake).
        let returned = self.returned.load(Ordering::Relaxed);
        if returned != 0 {
            self.returned.store(0, Ordering::Relaxed);
        }
        match admission {
            Admission::Closed => {
                self.found(resilient_core::CircuitState::Closed);
                Ok(Permit::free())
            }
            Admission::Refused { .. } => {
                self.found(resilient_core::CircuitState::Open);
                Err(Refusal::CircuitOpen)
            }
            // Not the breaker's state: the gauge keeps what was last found.
            Admission::Unreachable => Err(Refusal::BackendDown(UnavailableKind::CircuitOpen)),
            Admission::Probe { ticket, took_over } => {
                let asked_again =
                    returned != 0 && self.store.retakes(Ticket::from_word(returned), ticket);
                if took_over {
                    self.transition(Some(Transition::ProbeGivenUp));
                } else if !asked_again {
                    self.transition(Some(Transition::HalfOpened));
                }
                let (id, store, returned) = (self.id, self.store.clone(), self.returned.clone());
                let permit = Permit::ending(move |ended| match ended {
                    Some(_) => PROBE_ENDED.with(|p| p.set(Some((id, ticket)))),
                    // Never sent, or its call dropped: nothing to decide on. Given back as
                    // of its admission, so the next admission finds the period over.
                    None => {
                        if store.give_back(ticket, now_ms) {
                            returned.store(ticket.to_word(), Ordering::Relaxed);
                        }
                    }
                });
                // The store's bound (`timeout` + PROBE_MARGIN) runs from when the admission
                // ran there, after `asked` (on Redis, half a round trip later).
                Ok(permit.lasting(
                    self.probe_attempt.saturating_sub(asked.elapsed()),
                    "the breaker's probe time (the client's option 'timeout')",
                ))
            }
        }
    }

    fn ended(&self, end: &Ended) {
        let (outcome, now_ms) = (end.outcome, end.now_ms);
        let failure = self.is_failure(outcome);
        if let Some(ticket) = self.take_ended_probe() {
            // The caller's own deadline ended the probe early: no verdict on the upstream, the
            // next caller probes (given back as of now, so at once). One that waited half of
            // what the client allows an attempt or more is a failure: where every caller's
            // deadline is as short (or the client's `deadline` shorter than its `timeout`), a
            // hung upstream must reopen the breaker, or each next caller would probe it at
            // once for as long as it hangs.
            if end.cut_early() && self.store.give_back(ticket, now_ms) {
                return;
            }
            if let Some(t) = self.store.resolve(ticket, !failure, now_ms, jitter()) {
                return self.transition(Some(t));
            }
        }
        let started_ms = now_ms.saturating_sub(end.duration.as_millis() as u64);
        self.transition(self.store.record(failure, started_ms, now_ms, jitter()));
    }
}

/// A cheap uniform u64 (the open period's jitter): the clock, the pid and a counter mixed, so
/// processes and hosts that open at once draw apart. Not for anything secret.
fn jitter() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let z = crate::clock::monotonic_ns()
        ^ (std::process::id() as u64).rotate_left(40)
        ^ COUNTER
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    crate::backoff::splitmix64(z.wrapping_add(0x9E37_79B9_7F4A_7C15))
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
        fn record(&self, failure: bool, started: u64, _: u64, _: u64) -> Option<Transition> {
            self.told
                .lock()
                .unwrap()
                .push(format!("record {failure} sent at {started}"));
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
        fn retakes(&self, _: Ticket, _: Ticket) -> bool {
            false
        }
    }

    /// The transitions a guard reports (what the host-wide metrics count).
    #[derive(Default)]
    struct Transitions(Mutex<Vec<Transition>>);

    impl CallEvents for Transitions {
        fn breaker_transition(&self, t: Transition) {
            self.0.lock().unwrap().push(t);
        }
    }

    fn segment(tag: &str) -> (Arc<resilient_core::Segment>, std::path::PathBuf) {
        let path = std::env::temp_dir().join(format!(
            "resilient-breaker-guard-{tag}-{}.shm",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&path);
        (
            Arc::new(resilient_core::Segment::open(&path, 4).unwrap()),
            path,
        )
    }

    /// A shared-memory breaker on a segment of its own that opens at the first failure
    /// (window 10 s, open for 5 s ± 20 %, probe bound 1 s), and the segment's file.
    fn opening_at_first_failure(tag: &str) -> (Arc<CircuitBreaker>, std::path::PathBuf) {
        let (seg, seg_path) = segment(tag);
        let s = std::time::Duration::from_secs;
        let config = resilient_core::BreakerConfig::new(1.0, 1, s(10), s(5), s(1)).unwrap();
        (
            Arc::new(CircuitBreaker::new(seg, "up", config).unwrap()),
            seg_path,
        )
    }

    const SECOND: Duration = Duration::from_secs(1);

    fn ended(status: u16, now_ms: u64) -> Ended {
        took(Outcome::Status(status), Duration::ZERO, now_ms)
    }

    /// How an attempt of `duration` ended at `now_ms`, its timeout not cut by a deadline.
    fn took(outcome: Outcome, duration: Duration, now_ms: u64) -> Ended {
        Ended {
            outcome,
            duration,
            now_ms,
            cut_short: false,
            allowed: SECOND,
        }
    }

    /// Another host made the transitions (a breaker on Redis): this host's state gauge
    /// follows what its admissions find, without counting a transition of its own. (Before,
    /// a host that saw the breaker open read "open" for good once another host closed it.)
    #[test]
    fn an_admission_sets_the_state_gauge_to_what_it_found() {
        use resilient_core::CircuitState;
        let (seg, seg_path) = segment("gauge");
        let metrics =
            crate::MetricsEvents::new(resilient_core::Metrics::new(seg.clone(), "up").unwrap());
        let store = Arc::new(Scripted {
            admission: Mutex::new(Admission::Refused { until_ms: 5_000 }),
            told: Mutex::default(),
        });
        let g = BreakerGuard::new(store.clone(), &[503], SECOND).with_events(Arc::new(metrics));
        let seen = || {
            resilient_core::Metrics::new(seg.clone(), "up")
                .unwrap()
                .snapshot()
        };
        assert!(g.admit(1, 0).is_err());
        assert_eq!(seen().breaker(), CircuitState::Open, "refused: open");
        *store.admission.lock().unwrap() = Admission::Closed;
        drop(g.admit(1, 6_000).unwrap());
        assert_eq!(seen().breaker(), CircuitState::Closed, "closed elsewhere");
        assert_eq!(seen().breaker_transitions, [0, 0, 0], "none made here");
        // Half-open here: the calls refused while its probe is out leave it so.
        resilient_core::Metrics::new(seg.clone(), "up")
            .unwrap()
            .breaker_transition(CircuitState::HalfOpen);
        *store.admission.lock().unwrap() = Admission::Refused { until_ms: 7_000 };
        assert!(g.admit(1, 6_500).is_err());
        assert_eq!(seen().breaker(), CircuitState::HalfOpen);
        std::fs::remove_file(seg_path).unwrap();
    }

    #[test]
    fn only_what_the_client_would_retry_is_a_failure() {
        let store = Arc::new(Scripted {
            admission: Mutex::new(Admission::Closed),
            told: Mutex::default(),
        });
        let g = BreakerGuard::new(store.clone(), &[429, 503], SECOND);
        for o in [
            Outcome::Status(503),
            Outcome::Status(404),
            Outcome::Status(500),
            Outcome::Status(429),
            Outcome::Failed(FailureKind::Timeout),
            Outcome::Failed(FailureKind::TooLarge),
        ] {
            let p = g.admit(1, 10_000).unwrap();
            drop(p);
            g.ended(&took(o, Duration::from_millis(300), 10_000));
        }
        assert_eq!(
            *store.told.lock().unwrap(),
            [
                "record true sent at 9700",
                "record false sent at 9700",
                "record false sent at 9700",
                "record false sent at 9700", // a 4xx never, even one the client retries
                "record true sent at 9700",
                "record false sent at 9700"
            ]
        );
    }

    #[test]
    fn the_probes_outcome_resolves_its_ticket_and_nothing_else_does() {
        let (store, seg_path) = opening_at_first_failure("resolve");
        let a = BreakerGuard::new(store.clone(), &[503], SECOND);
        let b = BreakerGuard::new(store.clone(), &[503], SECOND);
        drop(a.admit(1, 0).unwrap());
        a.ended(&took(Outcome::Status(503), Duration::ZERO, 0));
        assert_eq!(a.admit(1, 1).err(), Some(Refusal::CircuitOpen));
        let probe = b.admit(1, 7_000).expect("the probe");
        assert_eq!(a.admit(1, 7_000).err(), Some(Refusal::CircuitOpen));
        probe.end(&ended(200, 7_005));
        // Another guard's outcome on this thread does not take b's ticket.
        a.ended(&took(Outcome::Status(200), Duration::ZERO, 7_010));
        assert_eq!(a.admit(1, 7_010).err(), Some(Refusal::CircuitOpen));
        b.ended(&took(Outcome::Status(200), Duration::ZERO, 7_020));
        assert!(a.admit(1, 7_020).is_ok(), "closed by the probe's success");

        // A probe refused by a later guard (its permit dropped, no outcome) gives its ticket
        // back: the next admission probes at once, instead of waiting for the bound.
        drop(a.admit(1, 7_030).unwrap());
        a.ended(&took(Outcome::Status(503), Duration::ZERO, 7_030));
        let probe = b.admit(1, 20_000).expect("the probe");
        drop(probe); // the funnel refused the attempt
        let again = b
            .admit(1, 20_001)
            .expect("given back, probing again at once");
        again.end(&ended(200, 20_002));
        b.ended(&took(Outcome::Status(200), Duration::ZERO, 20_002));
        assert_eq!(
            store.state(20_002).phase,
            resilient_core::breaker::Phase::Closed
        );
        std::fs::remove_file(seg_path).unwrap();
    }

    #[test]
    fn a_probe_never_sent_is_given_back_at_once_and_asking_again_is_not_a_new_period() {
        let (store, seg_path) = opening_at_first_failure("given-back");
        let seen = Arc::new(Transitions::default());
        let a = BreakerGuard::new(store.clone(), &[503], SECOND).with_events(seen.clone());
        drop(a.admit(1, 0).unwrap());
        a.ended(&took(Outcome::Status(503), Duration::ZERO, 0));
        // The probe's moment; a funnel wait polls: each poll takes the probe and a full funnel
        // drops it. One half-open period, counted once.
        for ms in 7_000..7_005 {
            drop(
                a.admit(1, ms)
                    .expect("the probe, given back and taken again"),
            );
        }
        // Another request's client (a fresh guard, as in the next FPM request) probes at once:
        // the ticket did not wait for its bound in this thread.
        let b = BreakerGuard::new(store.clone(), &[503], SECOND).with_events(seen.clone());
        let probe = b.admit(1, 7_010).expect("given back, so b probes");
        assert_eq!(
            *seen.0.lock().unwrap(),
            [
                Transition::Opened,
                Transition::HalfOpened,
                Transition::HalfOpened
            ],
            "a's period once, b's once"
        );
        let lasts = probe.lasts().expect("bounded");
        assert!(
            lasts <= SECOND && lasts > SECOND - Duration::from_millis(100),
            "a probe's attempt lasts the client's timeout: {lasts:?}"
        );
        probe.end(&ended(200, 7_015));
        b.ended(&took(Outcome::Status(200), Duration::from_millis(5), 7_015));
        assert!(a.admit(1, 7_016).is_ok(), "closed by b's probe");
        std::fs::remove_file(seg_path).unwrap();
    }

    /// A probe won by a caller with little time left (its deadline ended the attempt before
    /// half the client's timeout) says nothing of the upstream: the ticket is given back and the
    /// next caller probes at once. (Before, one page's deadline reopened the breaker of a
    /// healthy upstream for the whole host for another `open_for`.) A probe that ran its full
    /// timeout still reopens it, and while closed a deadline-cut timeout still counts (a hung
    /// upstream must open the breaker where every caller's deadline is short).
    #[test]
    fn a_probe_ended_by_its_callers_deadline_gives_its_ticket_back() {
        let (store, seg_path) = opening_at_first_failure("deadline-probe");
        let g = BreakerGuard::new(store.clone(), &[503], SECOND);
        let timeout = Outcome::Failed(FailureKind::Timeout);
        let cut = |now_ms| Ended {
            cut_short: true,
            ..took(timeout, Duration::from_millis(70), now_ms)
        };
        drop(g.admit(1, 0).unwrap());
        g.ended(&cut(70));
        assert_eq!(g.admit(1, 100).err(), Some(Refusal::CircuitOpen), "opened");

        let probe = g.admit(1, 7_000).expect("the probe");
        probe.end(&cut(7_070));
        g.ended(&cut(7_070));
        let probe = g
            .admit(1, 7_071)
            .expect("no verdict: the next caller probes at once");
        probe.end(&took(timeout, SECOND, 8_071));
        g.ended(&took(timeout, SECOND, 8_071));
        assert_eq!(
            g.admit(1, 8_072).err(),
            Some(Refusal::CircuitOpen),
            "a probe that ran its whole timeout reopens it"
        );
        std::fs::remove_file(seg_path).unwrap();
    }

    /// A probe its caller's deadline ended once it had waited half the client's timeout or more
    /// is a failure: a hung upstream reopens the breaker though every caller's deadline is no
    /// longer than the timeout (before, each such probe was no verdict, and the next caller
    /// probed at once, for as long as the upstream hung).
    #[test]
    fn a_probe_cut_by_the_deadline_after_half_its_timeout_reopens_the_breaker() {
        let (store, seg_path) = opening_at_first_failure("deadline-probe-long");
        let g = BreakerGuard::new(store.clone(), &[503], SECOND);
        let cut = |waited_ms, now_ms| Ended {
            cut_short: true,
            ..took(
                Outcome::Failed(FailureKind::Timeout),
                Duration::from_millis(waited_ms),
                now_ms,
            )
        };
        drop(g.admit(1, 0).unwrap());
        g.ended(&cut(70, 70));
        assert_eq!(g.admit(1, 100).err(), Some(Refusal::CircuitOpen), "opened");

        let probe = g.admit(1, 7_000).expect("the probe");
        probe.end(&cut(500, 7_500));
        g.ended(&cut(500, 7_500));
        assert_eq!(
            g.admit(1, 7_501).err(),
            Some(Refusal::CircuitOpen),
            "half the timeout waited without an answer: reopened"
        );
        assert_eq!(
            store.state(7_501).phase,
            resilient_core::breaker::Phase::Open
        );
        std::fs::remove_file(seg_path).unwrap();
    }
}
