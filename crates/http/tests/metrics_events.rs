//! Host-wide metrics recorded through the `CallEvents` seam, over the real shared segment:
//! every count equals what the scripted transport saw, our refusals are counted apart from
//! upstream failures and never enter the latency histograms, and an attempt abandoned
//! mid-flight is not left in flight.

mod support;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::time::Duration;

use resilient_core::{FailureClass, Metrics, RefusalReason, Segment};
use resilient_http::{
    FailureKind, HttpClient, MetricsEvents, RequestOptions, Response, Unavailable,
};
use serde_json::json;
use support::*;

fn segment(tag: &str) -> Arc<Segment> {
    let path = std::env::temp_dir().join(format!(
        "resilient-http-metrics-{tag}-{}.shm",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&path);
    let seg = Arc::new(Segment::open(&path, 16).unwrap());
    let _ = std::fs::remove_file(&path);
    seg
}

async fn get(rig: &Rig, c: &HttpClient) -> Result<Response, Unavailable> {
    let req = c.prepare("GET", "/", RequestOptions::new()).unwrap();
    c.call(rig.env.clone(), req, None).await
}

fn after(status: u16, ms: u64) -> Step {
    Step::Status {
        status,
        headers: vec![],
        body: "",
        after: Duration::from_millis(ms),
    }
}

#[tokio::test(start_paused = true)]
async fn counts_equal_what_the_upstream_saw_and_refusals_stay_apart() {
    let seg = segment("loop");
    let mut rig = Rig::new(
        vec![
            // call 1: 503, 503, 200 (a retry that led to a success)
            after(503, 3),
            after(503, 3),
            after(200, 7),
            // call 2: 404 (final, a 4xx failure returned as the answer)
            after(404, 1),
            // call 3: a connection failure, then the budget (floor 2, both spent) denies
            Step::Fail {
                kind: FailureKind::Connect,
                after: Duration::from_millis(30),
            },
        ],
        after(200, 1),
    );
    let budget = Arc::new(FakeBudget {
        ratio: 0.0,
        floor: 2,
        originals: AtomicU32::new(0),
        retries: AtomicU32::new(0),
    });
    rig.env = rig
        .env
        .clone()
        .allowance(budget)
        .events(Arc::new(MetricsEvents::new(
            Metrics::new(seg.clone(), "shipping").unwrap(),
        )));
    let c = rig.client(json!({"max_attempts": 3, "backoff": {"base": 0.001, "cap": 0.001}}));

    assert_eq!(get(&rig, &c).await.unwrap().attempts(), 3);
    assert_eq!(get(&rig, &c).await.unwrap().status(), 404);
    assert!(get(&rig, &c).await.unwrap_err().is_budget_exhausted());

    // Call 4: the funnel (limit 0 here) refuses: nothing sent, our refusal.
    let gate = Arc::new(FakeGate {
        limit: 0,
        held: AtomicU32::new(0),
        events: rig.events.clone(),
    });
    let full_env = rig.env.clone().guard(Arc::new(SharedGate(gate)));
    let req = c.prepare("GET", "/", RequestOptions::new()).unwrap();
    assert!(c
        .call(full_env, req, None)
        .await
        .unwrap_err()
        .is_funnel_full());

    let s = Metrics::new(seg, "shipping").unwrap().snapshot();
    assert_eq!(
        s.attempts,
        u64::from(rig.sends()),
        "attempts counted == attempts seen"
    );
    assert_eq!((s.originals, s.attempts, s.retries), (4, 5, 2));
    assert_eq!(
        (s.successes, s.retries_succeeded, s.retries_denied()),
        (1, 1, 1)
    );
    assert_eq!(s.refused(RefusalReason::Funnel), 1);
    assert_eq!(
        s.refused(RefusalReason::Deadline) + s.refused(RefusalReason::Circuit),
        0
    );
    assert_eq!(s.failed(FailureClass::Status5xx), 2);
    assert_eq!(s.failed(FailureClass::Status4xx), 1);
    assert_eq!(s.failed(FailureClass::Connection), 1);
    assert_eq!(s.in_flight, 0);
    // Latencies on the paused clock are exact: the 200 took 7 ms (≤ 10 ms bucket).
    assert_eq!(s.success_latency.count(), 1);
    assert_eq!(s.success_latency.sum_us, 7_000);
    assert_eq!(s.success_latency.buckets[3], 1);
    // Failures: 3 + 3 + 1 + 30 ms; the funnel's refusal is in neither histogram.
    assert_eq!(s.failure_latency.count(), 4);
    assert_eq!(s.failure_latency.sum_us, 37_000);
}

/// A call to a hanging upstream, recording into the metrics of name `tag`, polled until its
/// attempt is in flight.
async fn hanging_call(
    tag: &str,
) -> (
    Metrics,
    Pin<Box<dyn Future<Output = Result<Response, Unavailable>> + Send>>,
) {
    let metrics = Metrics::new(segment(tag), tag).unwrap();
    let mut rig = Rig::new(vec![Step::Hang], Step::Hang);
    rig.env = rig
        .env
        .clone()
        .events(Arc::new(MetricsEvents::new(metrics.clone())));
    let c = rig.client(json!({"timeout": 10.0}));
    let req = c.prepare("GET", "/", RequestOptions::new()).unwrap();
    let mut call = Box::pin(c.call(rig.env.clone(), req, None));
    let poll = tokio::time::timeout(Duration::from_millis(50), &mut call).await;
    assert!(poll.is_err(), "still hanging");
    assert_eq!(metrics.snapshot().in_flight, 1);
    (metrics, call)
}

#[tokio::test(start_paused = true)]
async fn an_attempt_abandoned_mid_flight_is_not_left_in_flight() {
    let (metrics, call) = hanging_call("abandon").await;
    drop(call);
    let s = metrics.snapshot();
    assert_eq!((s.originals, s.attempts, s.in_flight), (1, 1, 0));
    assert_eq!(s.failure_latency.count() + s.success_latency.count(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_attempt_whose_call_is_never_dropped_is_ended_at_request_end_once() {
    let (metrics, call) = hanging_call("leaked").await;
    // What PHP's bailout does: the call is neither finished nor dropped; the request ends.
    assert_eq!(resilient_http::end_open_attempts(), 1);
    assert_eq!(metrics.snapshot().in_flight, 0);
    // A call that runs on after all (a pool task left on the runtime) ends it no second time.
    drop(call);
    assert_eq!(metrics.snapshot().in_flight, 0);
    assert_eq!(resilient_http::end_open_attempts(), 0);
}

/// Permits name their handle by address and end their attempt through the thread's ledger:
/// interleaved attempts of two handles each end their own, and the request's end ends only
/// those still out.
#[test]
fn interleaved_attempts_of_two_handles_end_their_own() {
    std::thread::spawn(|| {
        use resilient_http::CallEvents;
        let seg = segment("interleaved");
        let (m1, m2) = (
            Metrics::new(seg.clone(), "one").unwrap(),
            Metrics::new(seg.clone(), "two").unwrap(),
        );
        let (e1, e2) = (
            MetricsEvents::new(m1.clone()),
            MetricsEvents::new(m2.clone()),
        );
        let a = e1.attempt_sent(1);
        let b = e2.attempt_sent(1);
        let c = e1.attempt_sent(2);
        assert_eq!((m1.snapshot().in_flight, m2.snapshot().in_flight), (2, 1));
        drop(b);
        drop(a);
        assert_eq!((m1.snapshot().in_flight, m2.snapshot().in_flight), (1, 0));
        assert_eq!(resilient_http::end_open_attempts(), 1);
        assert_eq!(m1.snapshot().in_flight, 0);
        drop(c); // after the request's end: ended no second time
        assert_eq!((m1.snapshot().in_flight, m2.snapshot().in_flight), (0, 0));
    })
    .join()
    .unwrap();
}

/// The ledger keeps a handle it no longer counts only while someone else holds it: a worker
/// that makes a client per job does not pile up handles (nor keep their segment mapped).
#[test]
fn the_ledger_lets_go_of_handles_nobody_uses() {
    std::thread::spawn(|| {
        use resilient_http::CallEvents;
        let seg = segment("handles");
        for _ in 0..50 {
            let events = MetricsEvents::new(Metrics::new(seg.clone(), "per-job").unwrap());
            drop(events.attempt_sent(1));
        }
        // Ours, and at most the last handle, kept until the next one arrives.
        assert!(Arc::strong_count(&seg) <= 2, "{}", Arc::strong_count(&seg));
        assert_eq!(resilient_http::end_open_attempts(), 0);
        assert_eq!(Arc::strong_count(&seg), 1);
    })
    .join()
    .unwrap();
}

/// A permit moved to a thread that outlives the one that sent its attempt: the sending thread's
/// end ends the attempt (its ledger goes with it), and the permit's own end later ends nothing.
#[test]
fn a_thread_that_ends_ends_its_attempts_once() {
    use resilient_http::CallEvents;
    let seg = segment("thread-end");
    let metrics = Metrics::new(seg, "thread-end").unwrap();
    let events = Arc::new(MetricsEvents::new(metrics.clone()));
    let sender = events.clone();
    let permit = std::thread::spawn(move || sender.attempt_sent(1))
        .join()
        .unwrap();
    assert_eq!(metrics.snapshot().in_flight, 0, "ended with its thread");
    drop(permit);
    assert_eq!(metrics.snapshot().in_flight, 0, "and not twice");
}

/// A failure of ours (the sink file could not be written when the answer came) is neither an
/// answer nor an upstream failure: metrics leave it out of both, as the breaker and the learned
/// limit do. Before, it counted as an upstream failure (`other`) with a latency sample.
#[test]
fn a_sink_failure_is_no_upstream_failure() {
    use resilient_core::AttemptClass;
    use resilient_http::{attempt_class, Outcome};
    assert_eq!(attempt_class(Outcome::Failed(FailureKind::Sink)), None);
    assert_eq!(attempt_class(Outcome::Failed(FailureKind::Request)), None);
    assert_eq!(
        attempt_class(Outcome::Failed(FailureKind::Closed)),
        Some(AttemptClass::Failure(FailureClass::Other))
    );
    assert_eq!(
        attempt_class(Outcome::Status(200)),
        Some(AttemptClass::Success)
    );
}
