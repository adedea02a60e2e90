//! A guard defined here, outside the crate, with its public API only: the loop (call.rs) needs
//! no edit to run it. It refuses every other attempt and counts what it is told.

mod support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use resilient_http::RequestOptions;
use resilient_http::{
    Ended, FailureKind, Guard, HttpClient, Outcome, Permit, Refusal, Response, Unavailable,
};
use serde_json::json;
use support::*;

/// Admits odd-numbered asks, refuses even ones (as an open circuit would); records outcomes.
#[derive(Default)]
struct EveryOther {
    asked: AtomicU32,
    refused: AtomicU32,
    held: Arc<AtomicU32>,
    outcomes: Mutex<Vec<Outcome>>,
}

impl Guard for EveryOther {
    fn admit(&self, _attempt: u32, _now_ms: u64) -> Result<Permit, Refusal> {
        if self.asked.fetch_add(1, Ordering::SeqCst) % 2 == 1 {
            self.refused.fetch_add(1, Ordering::SeqCst);
            return Err(Refusal::CircuitOpen);
        }
        self.held.fetch_add(1, Ordering::SeqCst);
        let held = self.held.clone();
        Ok(Permit::holding(move || {
            held.fetch_sub(1, Ordering::SeqCst);
        }))
    }
    fn ended(&self, end: &Ended) {
        // The permit was dropped before the outcome is told.
        assert_eq!(self.held.load(Ordering::SeqCst), 0);
        self.outcomes.lock().unwrap().push(end.outcome);
    }
}

/// Always refuses; counts asks.
#[derive(Default)]
struct Never(AtomicU32);

impl Guard for Never {
    fn admit(&self, _attempt: u32, _now_ms: u64) -> Result<Permit, Refusal> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Err(Refusal::CircuitOpen)
    }
}

async fn get(rig: &Rig, c: &HttpClient) -> Result<Response, Unavailable> {
    let req = c.prepare("GET", "/", RequestOptions::new()).unwrap();
    c.call(rig.env.clone(), req, None).await
}

#[tokio::test(start_paused = true)]
async fn a_guard_from_outside_the_crate_is_asked_and_told_every_attempt() {
    let mut rig = Rig::new(
        vec![
            status(200),
            status(503),
            Step::Fail {
                kind: FailureKind::Connect,
                after: std::time::Duration::from_millis(1),
            },
        ],
        status(200),
    );
    let guard = Arc::new(EveryOther::default());
    rig.env = rig.env.clone().guard(guard.clone());
    let c = rig.client(json!({"max_attempts": 3}));

    // Ask 1 admitted: 200.
    assert_eq!(get(&rig, &c).await.unwrap().status(), 200);
    // Ask 2 refused: nothing sent, a refusal, no record.
    let e = get(&rig, &c).await.unwrap_err();
    assert!(
        e.is_circuit_open() && e.is_refusal() && e.attempts() == 0,
        "{e}"
    );
    // Ask 3 admitted: 503, a retry wants to follow; ask 4 refuses it.
    let e = get(&rig, &c).await.unwrap_err();
    assert!(e.is_circuit_open() && e.attempts() == 1, "{e}");
    // Ask 5 admitted: connect error, retry; ask 6 refused.
    let e = get(&rig, &c).await.unwrap_err();
    assert!(e.is_circuit_open() && e.attempts() == 1, "{e}");

    assert_eq!(guard.asked.load(Ordering::SeqCst), 6);
    assert_eq!(guard.refused.load(Ordering::SeqCst), 3);
    assert_eq!(rig.sends(), 3);
    assert_eq!(
        *guard.outcomes.lock().unwrap(),
        [
            Outcome::Status(200),
            Outcome::Status(503),
            Outcome::Failed(FailureKind::Connect)
        ]
    );
    assert_eq!(guard.held.load(Ordering::SeqCst), 0);
    assert_eq!(
        rig.records.records().len(),
        3,
        "a refusal is not an attempt"
    );
}

#[tokio::test(start_paused = true)]
async fn guards_are_asked_in_order_and_a_refusal_releases_earlier_permits() {
    let mut rig = Rig::new(vec![], status(200));
    let first = Arc::new(EveryOther::default());
    let second = Arc::new(Never::default());
    rig.env = rig.env.clone().guard(first.clone()).guard(second.clone());
    let c = rig.client(json!({}));

    let e = get(&rig, &c).await.unwrap_err();
    assert!(e.is_circuit_open() && e.attempts() == 0, "{e}");
    // The first admitted, the second refused: the first's permit is back, no outcome told.
    assert_eq!(
        (
            first.asked.load(Ordering::SeqCst),
            second.0.load(Ordering::SeqCst)
        ),
        (1, 1)
    );
    assert_eq!(first.held.load(Ordering::SeqCst), 0);
    assert!(first.outcomes.lock().unwrap().is_empty());
    assert_eq!(rig.sends(), 0);

    // The first refuses now: the second is not asked.
    let e = get(&rig, &c).await.unwrap_err();
    assert!(e.is_circuit_open(), "{e}");
    assert_eq!(
        (
            first.asked.load(Ordering::SeqCst),
            second.0.load(Ordering::SeqCst)
        ),
        (2, 1)
    );
}

/// Records what each permit it gave was told (`None`: dropped without an outcome) and the
/// outcomes the loop reports to it.
#[derive(Default)]
struct Recorder {
    permits: Arc<Mutex<Vec<Option<Outcome>>>>,
    outcomes: Mutex<Vec<Outcome>>,
}

impl Guard for Recorder {
    fn admit(&self, _attempt: u32, _now_ms: u64) -> Result<Permit, Refusal> {
        let permits = self.permits.clone();
        Ok(Permit::ending(move |ended| {
            permits.lock().unwrap().push(ended.map(|e| e.outcome));
        }))
    }
    fn ended(&self, end: &Ended) {
        self.outcomes.lock().unwrap().push(end.outcome);
    }
}

#[tokio::test(start_paused = true)]
async fn a_sink_failure_is_ours_and_the_guards_learn_nothing_from_it() {
    // A breaker's probe that ended so would otherwise close the circuit on an upstream it
    // knows nothing about, and a learned limit would take a 1 ms "answer" as its latency.
    let sink = Step::Fail {
        kind: FailureKind::Sink,
        after: std::time::Duration::from_millis(1),
    };
    let mut rig = Rig::new(vec![status(503), sink], status(200));
    let guard = Arc::new(Recorder::default());
    rig.env = rig.env.clone().guard(guard.clone());
    let c = rig.client(json!({"max_attempts": 3, "backoff": {"base": 0.001, "cap": 0.002}}));
    let e = get(&rig, &c).await.unwrap_err();
    assert!(e.is_upstream_failed(), "{e}");
    assert_eq!(e.last_failure(), Some(FailureKind::Sink));
    assert_eq!(e.attempts(), 2, "not retried");
    assert_eq!(
        *guard.permits.lock().unwrap(),
        [Some(Outcome::Status(503)), None],
        "the second permit is dropped without an outcome"
    );
    assert_eq!(*guard.outcomes.lock().unwrap(), [Outcome::Status(503)]);
}

/// Records what the call lets it spend asking a backend (`call_time_left`) when asked.
#[derive(Default)]
struct TimeLeftSeen(Mutex<Vec<Option<std::time::Duration>>>);

impl Guard for TimeLeftSeen {
    fn admit(&self, _attempt: u32, _now_ms: u64) -> Result<Permit, Refusal> {
        self.0
            .lock()
            .unwrap()
            .push(resilient_http::call_time_left());
        Ok(Permit::free())
    }
}

/// A guard asked before an attempt may spend what is left once the attempt has its least
/// useful time (here 50 ms of a 100 ms deadline), not all of it: a Redis backend takes half of
/// what it is given, and half of 100 ms left the attempt under its 50 ms, so under
/// `on_backend_error` 'open' a stalled Redis failed every call instead of letting it through.
#[tokio::test(start_paused = true)]
async fn a_guard_may_spend_only_what_the_attempt_does_not_need() {
    let mut rig = Rig::new(vec![], status(200));
    let guard = Arc::new(TimeLeftSeen::default());
    rig.env = rig.env.clone().guard(guard.clone());
    let c = rig.client(json!({"deadline": 0.1, "timeout": 5.0}));
    assert_eq!(get(&rig, &c).await.unwrap().status(), 200);
    let seen = guard.0.lock().unwrap().clone();
    let left = seen[0].expect("the call has a deadline");
    assert!(
        left <= std::time::Duration::from_millis(50) && left > std::time::Duration::from_millis(40),
        "{seen:?}"
    );
    // No deadline: nothing to keep back.
    let c = rig.client(json!({"timeout": 5.0}));
    assert_eq!(get(&rig, &c).await.unwrap().status(), 200);
    assert_eq!(guard.0.lock().unwrap()[1], None);
}
