//! The attempt loop against a scripted transport on virtual time: exact attempt counts, exact
//! waits, jitter bounds, release-before-sleep, budget and deadline cuts.

mod support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use resilient_http::Clock;
use resilient_http::FullJitter;
use resilient_http::RequestOptions;
use resilient_http::{Caps, FailureKind, HttpClient, Response, Unavailable};
use serde_json::{json, Value};
use support::*;

const MS: Duration = Duration::from_millis(1);

async fn call(
    rig: &Rig,
    c: &HttpClient,
    method: &str,
    path: &str,
    opts: Value,
) -> Result<Response, Unavailable> {
    let req = c.prepare(method, path, json::request(&opts)).unwrap();
    c.call(rig.env.clone(), req, None).await
}

fn gaps(seen: &[Seen]) -> Vec<Duration> {
    seen.windows(2).map(|w| w[1].at - w[0].at).collect()
}

#[tokio::test(start_paused = true)]
async fn seed_004_exercise_retry_after_seconds_is_obeyed_exactly() {
    let rig = Rig::new(
        vec![
            status_with(429, &[("Retry-After", "2")], ""),
            status_with(429, &[("Retry-After", "2")], ""),
            status_with(200, &[], "{\"ok\":true}"),
        ],
        status(500),
    );
    let c = rig.client(json!({}));
    let r = call(&rig, &c, "GET", "/v1/chat", json!({})).await.unwrap();
    assert_eq!(
        (r.status(), r.attempts(), r.body()),
        (200, 3, b"{\"ok\":true}".as_slice())
    );
    assert_eq!(rig.sleeps(), [2000 * MS, 2000 * MS]);
    // Attempts start 2 s + 10 ms (the attempt itself) apart, as the transport saw them.
    assert_eq!(gaps(&rig.transport.seen()), [2010 * MS, 2010 * MS]);
    assert_eq!(r.elapsed(), 4030 * MS);
}

#[tokio::test(start_paused = true)]
async fn retry_after_as_an_http_date_is_obeyed() {
    // Virtual wall clock starts at WALL_EPOCH_SECS; the attempt ends at +10 ms, so a date 3 s
    // after the epoch asks for a wait of 2.99 s.
    let at =
        httpdate::fmt_http_date(std::time::UNIX_EPOCH + Duration::from_secs(WALL_EPOCH_SECS + 3));
    let at: &'static str = Box::leak(at.into_boxed_str());
    let rig = Rig::new(
        vec![status_with(503, &[("Retry-After", at)], ""), status(200)],
        status(500),
    );
    let c = rig.client(json!({}));
    let r = call(&rig, &c, "GET", "/", json!({})).await.unwrap();
    assert_eq!(r.attempts(), 2);
    assert_eq!(rig.sleeps(), [2990 * MS]);
}

#[tokio::test(start_paused = true)]
async fn retry_after_beyond_the_deadline_fails_at_once() {
    let rig = Rig::new(
        vec![status_with(429, &[("Retry-After", "5")], "busy")],
        status(200),
    );
    let c = rig.client(json!({"deadline": 2.0}));
    let e = call(&rig, &c, "GET", "/q", json!({})).await.unwrap_err();
    assert!(e.is_deadline_exceeded(), "{e}");
    assert_eq!((e.attempts(), e.last_status()), (1, 429));
    assert_eq!(e.last_response().unwrap().body(), b"busy");
    assert!(rig.sleeps().is_empty(), "must not sleep");
    assert_eq!(rig.sends(), 1);
    assert!(e.message().contains("Retry-After 5s"), "{e}");
}

#[tokio::test(start_paused = true)]
async fn retry_after_beyond_max_retry_after_fails_at_once_as_upstream_failed() {
    for absurd in ["1000000000000", "99999999999999999999999"] {
        let rig = Rig::new(
            vec![status_with(503, &[("Retry-After", absurd)], "")],
            status(200),
        );
        let c = rig.client(json!({"max_retry_after": 30}));
        let e = call(&rig, &c, "GET", "/q", json!({})).await.unwrap_err();
        assert!(
            e.is_upstream_failed() && e.message().contains("max_retry_after"),
            "{e}"
        );
        assert!(rig.sleeps().is_empty());
    }
}

#[tokio::test(start_paused = true)]
async fn invalid_retry_after_values_fall_back_to_jitter_and_zero_or_a_past_date_waits_the_backoff()
{
    // A `Retry-After` never shortens the backoff: `Retry-After: 0` or a date in the past used
    // to retry with no wait at all. The jittered backoff is the least wait: here every sleep is
    // exactly the seeded jitter.
    let rig = Rig::new(
        vec![
            status_with(503, &[("Retry-After", "-1")], ""),
            status_with(503, &[("Retry-After", "abc")], ""),
            status_with(503, &[("Retry-After", "Thu, 01 Jan 1970 00:00:00 GMT")], ""),
            status_with(429, &[("Retry-After", "0")], ""),
            status(200),
        ],
        status(500),
    );
    let c = rig.client(json!({"max_attempts": 5, "backoff": {"base": 0.1, "cap": 1.0}}));
    let r = call(&rig, &c, "GET", "/q", json!({})).await.unwrap();
    assert_eq!(r.attempts(), 5);
    let expected: Vec<Duration> = FullJitter::seeded(100 * MS, 1000 * MS, 7).take(4).collect();
    assert_eq!(rig.sleeps(), expected);
    assert!(expected.iter().all(|d| !d.is_zero()), "{expected:?}");
}

#[tokio::test(start_paused = true)]
async fn waits_without_retry_after_are_full_jitter_within_bounds() {
    let rig = Rig::new(vec![], status(503));
    let c = rig.client(
        json!({"max_attempts": 6, "backoff": {"base": 0.1, "cap": 1.0}, "retry_on": [500, 503]}),
    );
    let e = call(&rig, &c, "GET", "/q", json!({})).await.unwrap_err();
    assert!(
        e.is_upstream_failed() && e.attempts() == 6 && e.last_status() == 503,
        "{e}"
    );
    let sleeps = rig.sleeps();
    assert_eq!(sleeps.len(), 5);
    // Exactly the seeded sequence, each within min(cap, base·2^(n-1)).
    let expected: Vec<Duration> = FullJitter::seeded(100 * MS, 1000 * MS, 7).take(5).collect();
    assert_eq!(sleeps, expected);
    for (i, s) in sleeps.iter().enumerate() {
        assert!(*s <= FullJitter::ceiling(100 * MS, 1000 * MS, i as u32 + 1));
    }
    let distinct: std::collections::HashSet<_> = sleeps.iter().collect();
    assert_eq!(distinct.len(), 5, "waits must differ: {sleeps:?}");
}

#[tokio::test(start_paused = true)]
async fn final_statuses_are_returned_after_one_attempt() {
    for s in [200, 400, 401, 403, 404, 409, 500, 502] {
        let rig = Rig::new(vec![status(s)], status(200));
        let c = rig.client(json!({}));
        let r = call(&rig, &c, "GET", "/q", json!({})).await.unwrap();
        assert_eq!((r.status(), r.attempts(), rig.sends()), (s, 1, 1));
    }
}

#[tokio::test(start_paused = true)]
async fn post_is_retried_only_with_an_idempotency_key_and_the_key_never_changes() {
    let rig = Rig::new(vec![], status(503));
    let c = rig.client(json!({}));
    let e = call(&rig, &c, "POST", "/quotes", json!({"json": {"sku": 1}}))
        .await
        .unwrap_err();
    assert!(
        e.is_upstream_failed() && e.attempts() == 1 && e.message().contains("idempotency_key"),
        "{e}"
    );
    let e = call(&rig, &c, "PATCH", "/quotes", json!({}))
        .await
        .unwrap_err();
    assert_eq!(e.attempts(), 1);

    let rig = Rig::new(vec![], status(503));
    let c = rig.client(json!({}));
    let e = call(
        &rig,
        &c,
        "POST",
        "/quotes",
        json!({"json": {"sku": 1}, "idempotency_key": "order-42"}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.attempts(), 3);
    let keys: Vec<String> = rig
        .transport
        .seen()
        .iter()
        .map(|s| {
            s.request
                .headers
                .get("idempotency-key")
                .unwrap()
                .to_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(keys, ["order-42", "order-42", "order-42"]);
    let bodies: Vec<_> = rig
        .transport
        .seen()
        .iter()
        .map(|s| s.request.body.clone())
        .collect();
    assert!(bodies
        .iter()
        .all(|b| b.as_deref() == Some(br#"{"sku":1}"#.as_slice())));
}

#[tokio::test(start_paused = true)]
async fn a_hanging_upstream_is_cut_at_the_deadline_whatever_the_timeout() {
    let rig = Rig::new(vec![], Step::Hang);
    let c = rig.client(json!({"deadline": 0.5, "timeout": 10, "connect_timeout": 3}));
    let started = tokio::time::Instant::now();
    let e = call(&rig, &c, "GET", "/slow", json!({})).await.unwrap_err();
    assert!(e.is_deadline_exceeded(), "{e}");
    assert_eq!(started.elapsed(), 500 * MS);
    let seen = rig.transport.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        (seen[0].limits.timeout, seen[0].limits.connect_timeout),
        (500 * MS, 500 * MS)
    );
}

#[tokio::test(start_paused = true)]
async fn the_error_says_why_the_last_attempt_got_no_answer() {
    let fail = |kind| Step::Fail {
        kind,
        after: 5 * MS,
    };
    let fast = json!({"max_attempts": 2, "backoff": {"base": 0.001, "cap": 0.002}});
    // A timeout after a refused connection: the last attempt's kind, not the first's.
    let rig = Rig::new(vec![fail(FailureKind::Connect)], Step::Hang);
    let c = rig.client(
        json!({"max_attempts": 2, "timeout": 0.2, "backoff": {"base": 0.001, "cap": 0.002}}),
    );
    let e = call(&rig, &c, "GET", "/", json!({})).await.unwrap_err();
    assert!(e.is_upstream_failed(), "{e}");
    assert_eq!(
        (e.last_failure(), e.last_status()),
        (Some(FailureKind::Timeout), 0)
    );
    let rig = Rig::new(vec![], fail(FailureKind::Connect));
    let e = call(&rig, &rig.client(fast.clone()), "GET", "/", json!({}))
        .await
        .unwrap_err();
    assert_eq!(e.last_failure(), Some(FailureKind::Connect));
    // An answer last: its status, no failure kind.
    let rig = Rig::new(vec![fail(FailureKind::Closed)], status(503));
    let e = call(&rig, &rig.client(fast), "GET", "/", json!({}))
        .await
        .unwrap_err();
    assert_eq!((e.last_failure(), e.last_status()), (None, 503));
    // Cut by the deadline: a timeout too, on a DeadlineExceeded.
    let rig = Rig::new(vec![], Step::Hang);
    let c = rig.client(json!({"deadline": 0.5, "timeout": 10}));
    let e = call(&rig, &c, "GET", "/", json!({})).await.unwrap_err();
    assert!(e.is_deadline_exceeded(), "{e}");
    assert_eq!(e.last_failure(), Some(FailureKind::Timeout));
}

#[tokio::test(start_paused = true)]
async fn each_attempt_gets_only_the_remainder() {
    // deadline 850 ms, timeout 300 ms (seed 000): 300, then what is left after a sleep.
    let rig = Rig::new(vec![], Step::Hang);
    let c = rig.client(json!({"deadline": 0.85, "timeout": 0.3, "max_attempts": 5}));
    let e = call(&rig, &c, "GET", "/slow", json!({})).await.unwrap_err();
    assert!(e.is_deadline_exceeded(), "{e}");
    let seen = rig.transport.seen();
    let sleeps = rig.sleeps();
    assert_eq!(seen[0].limits.timeout, 300 * MS);
    assert_eq!(seen[1].limits.timeout, 300 * MS);
    // tokio's timer rounds sleeps up to whole milliseconds: allow 1 ms per sleep.
    let left = 850 * MS - 600 * MS - sleeps[0] - sleeps[1];
    let got = seen[2].limits.timeout;
    assert!(got <= left && left - got <= 2 * MS, "{got:?} vs {left:?}");
    let total: Duration =
        seen.iter().map(|s| s.limits.timeout).sum::<Duration>() + sleeps.iter().sum::<Duration>();
    assert!(total <= 850 * MS, "{total:?}");
}

#[tokio::test(start_paused = true)]
async fn an_enclosing_deadline_that_ends_earlier_wins() {
    let rig = Rig::new(vec![], Step::Hang);
    let c = rig.client(json!({"deadline": 5, "timeout": 10}));
    let req = c.prepare("GET", "/", RequestOptions::new()).unwrap();
    let e = c
        .call(rig.env.clone(), req.clone(), Some(200 * MS))
        .await
        .unwrap_err();
    assert!(e.is_deadline_exceeded());
    assert_eq!(rig.transport.seen()[0].limits.timeout, 200 * MS);
    // Too little left for a useful attempt: nothing is sent.
    let e = c
        .call(rig.env.clone(), req, Some(20 * MS))
        .await
        .unwrap_err();
    assert!(e.is_deadline_exceeded() && e.attempts() == 0, "{e}");
    assert_eq!(rig.sends(), 1);
}

/// A client whose own deadline is under 50 ms (a cache next door) makes its attempt with that
/// whole deadline: a useful attempt is at most half the deadline it was given. Before, every
/// call failed at once, "less than a useful attempt (50ms)". An enclosing deadline that leaves
/// 20 ms of a client's 5 s still sends nothing (the previous test).
#[tokio::test(start_paused = true)]
async fn a_client_deadline_under_the_useful_attempt_still_sends() {
    let rig = Rig::new(vec![status(503)], status(200));
    let c = rig.client(json!({"deadline": 0.03, "timeout": 10}));
    let req = c.prepare("GET", "/", RequestOptions::new()).unwrap();
    let r = c.call(rig.env.clone(), req, None).await.unwrap();
    // The first attempt has the whole 30 ms; after its 503 a retry fits while half of them is
    // left beyond the jittered wait, and gets what is left.
    let seen = rig.transport.seen();
    assert_eq!(seen[0].limits.timeout, 30 * MS);
    assert_eq!((r.status(), r.attempts()), (200, 2));
    assert!(seen[1].limits.timeout >= 15 * MS && seen[1].limits.timeout < 30 * MS);
}

#[tokio::test(start_paused = true)]
async fn the_funnel_slot_is_released_before_every_sleep() {
    let mut rig = Rig::new(
        vec![
            status(503),
            Step::Fail {
                kind: FailureKind::Connect,
                after: 5 * MS,
            },
            status(200),
        ],
        status(500),
    );
    let gate = Arc::new(FakeGate {
        limit: 1,
        held: AtomicU32::new(0),
        events: rig.events.clone(),
    });
    rig.env = rig.env.clone().guard(Arc::new(SharedGate(gate.clone())));
    let c = rig.client(json!({}));
    let r = call(&rig, &c, "GET", "/", json!({})).await.unwrap();
    assert_eq!(r.attempts(), 3);
    let events: Vec<String> = rig
        .events
        .all()
        .into_iter()
        .map(|e| {
            if e.starts_with("sleep") {
                "sleep".into()
            } else {
                e
            }
        })
        .collect();
    assert_eq!(
        events,
        [
            "acquire", "send 1", "release", "sleep", "acquire", "send 2", "release", "sleep",
            "acquire", "send 3", "release"
        ]
    );
    assert_eq!(gate.held.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn a_full_funnel_fails_fast_without_sending() {
    let mut rig = Rig::new(vec![], status(200));
    let gate = Arc::new(FakeGate {
        limit: 0,
        held: AtomicU32::new(0),
        events: rig.events.clone(),
    });
    rig.env = rig.env.clone().guard(Arc::new(SharedGate(gate)));
    let c = rig.client(json!({}));
    let started = tokio::time::Instant::now();
    let e = call(&rig, &c, "GET", "/", json!({})).await.unwrap_err();
    assert!(
        e.is_funnel_full()
            && e.is_refusal()
            && e.attempts() == 0
            && e.last_status() == 0
            && e.last_failure().is_none(),
        "{e}"
    );
    assert_eq!((rig.sends(), started.elapsed()), (0, Duration::ZERO));
    assert!(
        rig.records.records().is_empty(),
        "a refusal is not an attempt"
    );
}

/// Full for the first `full_polls` looks, then free (a slot another process gives back).
struct FreesAfter {
    full_polls: AtomicU32,
    polls: AtomicU32,
}

impl resilient_http::Guard for FreesAfter {
    fn admit(
        &self,
        _attempt: u32,
        _now_ms: u64,
    ) -> Result<resilient_http::Permit, resilient_http::Refusal> {
        self.polls.fetch_add(1, Ordering::SeqCst);
        let left = self.full_polls.load(Ordering::SeqCst);
        if left > 0 {
            self.full_polls.store(left - 1, Ordering::SeqCst);
            return Err(resilient_http::Refusal::Full);
        }
        Ok(resilient_http::Permit::free())
    }
}

#[tokio::test(start_paused = true)]
async fn a_funnel_wait_takes_a_slot_freed_within_it_and_counts_in_the_deadline() {
    let mut rig = Rig::new(vec![], status(200));
    let gate = Arc::new(FreesAfter {
        full_polls: AtomicU32::new(10),
        polls: AtomicU32::new(0),
    });
    rig.env = rig.env.clone().guard(gate.clone());
    let c = rig.client(json!({"funnel": {"limit": 4, "wait": 0.05}}));
    let started = tokio::time::Instant::now();
    let r = call(&rig, &c, "GET", "/", json!({})).await.unwrap();
    assert_eq!((r.attempts(), rig.sends()), (1, 1));
    assert_eq!(gate.polls.load(Ordering::SeqCst), 11);
    // Ten polls about 1 ms apart (tokio's timer rounds each up to its next millisecond tick).
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(10) && waited <= Duration::from_millis(20),
        "{waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_funnel_wait_gives_up_at_its_bound_or_before_the_deadline_needs_it() {
    // Never frees: refused after the 30 ms wait, nothing sent.
    let mut rig = Rig::new(vec![], status(200));
    rig.env = rig.env.clone().guard(Arc::new(FreesAfter {
        full_polls: AtomicU32::new(u32::MAX),
        polls: AtomicU32::new(0),
    }));
    let c = rig.client(json!({"funnel": {"limit": 4, "wait": 0.03}}));
    let started = tokio::time::Instant::now();
    let e = call(&rig, &c, "GET", "/", json!({})).await.unwrap_err();
    assert!(
        e.is_funnel_full() && e.attempts() == 0 && e.to_string().contains("after waiting 30"),
        "{e}"
    );
    assert_eq!(
        (started.elapsed(), rig.sends()),
        (Duration::from_millis(30), 0)
    );

    // A deadline of 0.1 s leaves 50 ms of waiting room (a useful attempt needs 50 ms).
    let c = rig.client(json!({"funnel": {"limit": 4, "wait": 5.0}, "deadline": 0.1}));
    let started = tokio::time::Instant::now();
    let e = call(&rig, &c, "GET", "/", json!({})).await.unwrap_err();
    assert!(e.is_funnel_full(), "{e}");
    assert_eq!(started.elapsed(), Duration::from_millis(50));
}

/// Sleeps `extra` longer than asked: the thread was held (PHP code ran in the call, a signal
/// handler or `on_attempt`, and the runtime did not run meanwhile).
struct Oversleeps {
    extra: Duration,
}

impl resilient_http::Sleeper for Oversleeps {
    fn sleep(&self, d: Duration) -> resilient_http::BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(d + self.extra))
    }
}

#[tokio::test(start_paused = true)]
async fn a_slot_found_after_the_deadline_passed_sends_nothing() {
    let rig = Rig::new(vec![], status(200));
    let gate = Arc::new(SharedGate(Arc::new(FakeGate {
        limit: 1,
        held: AtomicU32::new(1),
        events: rig.events.clone(),
    })));
    let freed = gate.0.clone();
    let env = resilient_http::CallEnv::new(
        rig.clock.clone(),
        Arc::new(Oversleeps {
            extra: Duration::from_millis(1500),
        }),
        rig.transport.clone(),
    )
    .guard(gate);
    let c = HttpClient::new(
        json::config(
            &json!({"base_url": "http://127.0.0.1:9", "deadline": 1.0, "timeout": 0.9,
            "funnel": {"limit": 1, "wait": 1.0}}),
        ),
        Caps::default(),
        env.clone(),
    );
    // Full at the first ask; the slot is free when the (late) poll comes back.
    let holder = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(10)).await;
        freed.held.fetch_sub(1, Ordering::SeqCst);
    });
    let req = c.prepare("GET", "/", RequestOptions::new()).unwrap();
    let e = c.call(env, req, None).await.unwrap_err();
    holder.await.unwrap();
    assert!(e.is_deadline_exceeded() && e.attempts() == 0, "{e}");
    assert_eq!(rig.sends(), 0, "nothing sent after the deadline");
    assert_eq!(
        rig.events.all(),
        ["full", "acquire", "release"],
        "the slot given back at once"
    );
}

#[tokio::test(start_paused = true)]
async fn the_budget_bounds_total_attempts_under_a_failing_upstream() {
    let mut rig = Rig::new(vec![], status(503));
    let budget = Arc::new(FakeBudget {
        ratio: 0.1,
        floor: 5,
        originals: AtomicU32::new(0),
        retries: AtomicU32::new(0),
    });
    rig.env = rig.env.clone().allowance(budget.clone());
    let c = rig.client(json!({}));
    let mut exhausted = 0;
    for _ in 0..100 {
        let e = call(&rig, &c, "GET", "/", json!({})).await.unwrap_err();
        exhausted += usize::from(e.is_budget_exhausted());
    }
    let attempts = rig.sends();
    assert!(attempts <= 100 + 5 + 10, "{attempts} attempts");
    assert!(
        attempts >= 100 + 5,
        "the floor is always allowed: {attempts}"
    );
    assert!(exhausted >= 85, "{exhausted}");
    // A denied retry never sleeps: sleeps == retries sent.
    assert_eq!(rig.sleeps().len() as u32, attempts - 100);
}

/// The budget is a share of the load the upstream got: a call our guards refused before it sent
/// anything (funnel full, circuit open, no time left) deposits nothing. Before, each deposited
/// its ratio: with the funnel refusing 90 % of a demand of 1000 calls, the 100 sent earned 100
/// retries, a retry per original sent where the ratio allows one per ten.
#[tokio::test(start_paused = true)]
async fn only_a_call_that_sends_deposits_in_the_budget() {
    let mut rig = Rig::new(vec![], status(200));
    let budget = Arc::new(FakeBudget {
        ratio: 0.1,
        floor: 5,
        originals: AtomicU32::new(0),
        retries: AtomicU32::new(0),
    });
    let gate = Arc::new(FreesAfter {
        full_polls: AtomicU32::new(9),
        polls: AtomicU32::new(0),
    });
    rig.env = rig.env.clone().allowance(budget.clone()).guard(gate);
    let c = rig.client(json!({"funnel": {"limit": 4}}));
    for _ in 0..9 {
        let e = call(&rig, &c, "GET", "/", json!({})).await.unwrap_err();
        assert!(e.is_funnel_full() && e.attempts() == 0, "{e}");
    }
    assert_eq!(
        budget.originals.load(Ordering::SeqCst),
        0,
        "refused: no deposit"
    );
    call(&rig, &c, "GET", "/", json!({})).await.unwrap();
    assert_eq!(
        budget.originals.load(Ordering::SeqCst),
        1,
        "sent: one deposit"
    );
    assert_eq!(rig.sends(), 1);
}

/// A client of `options` (a web caller when `web`) on a real shared-memory segment of its own.
fn shared_rig(
    tag: &str,
    options: Value,
    web: bool,
    fallback: Step,
) -> (Rig, HttpClient, Arc<resilient_core::Segment>) {
    let path =
        std::env::temp_dir().join(format!("resilient-http-{tag}-{}.shm", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let segment = Arc::new(resilient_core::Segment::open(&path, 8).unwrap());
    let _ = std::fs::remove_file(&path);
    let mut rig = Rig::new(vec![], fallback);
    let mut options = options;
    options["base_url"] = json!("http://h");
    let backend = resilient_http::SharedMemory::new(segment.clone());
    let c = HttpClient::builder(json::config(&options))
        .transport(rig.transport.clone())
        .clock(rig.clock.clone(), rig.sleeper.clone())
        .backend(&backend, "test", web)
        .unwrap()
        .build();
    rig.env = c.env().clone();
    (rig, c, segment)
}

#[tokio::test(start_paused = true)]
async fn the_real_shared_budget_bounds_attempts_too() {
    let budget = json!({"budget": {"ratio": 0.1, "floor": 5, "window": 60}});
    let (rig, c, _) = shared_rig("budget", budget, true, status(503));
    let mut last = None;
    for _ in 0..100 {
        last = call(&rig, &c, "GET", "/", json!({})).await.err();
        assert!(last.is_some());
    }
    let attempts = rig.sends();
    assert!((105..=115).contains(&attempts), "{attempts} attempts");
    // The refusal says what the budget held, and that it is the host's, not the process's (a
    // fresh CLI run may find it spent).
    let e = last.unwrap();
    assert!(e.is_budget_exhausted(), "{e}");
    let spent = attempts - 100;
    assert!(
        e.to_string().contains(&format!(
            "retry budget exhausted: a retry would make {} in the last 60s, over the {} allowed \
             (floor 5 + ratio 0.1 × 100 originals), counted by every process of this host",
            spent + 1,
            5 + 10
        )),
        "{e}"
    );
}

/// A retry the budget allowed and a guard then refused (the breaker the first answer opened)
/// was never sent: it is given back, so the budget counts what the upstream got. Before, each
/// call in flight when an outage began spent a retry it never sent, and after the breaker
/// closed, real retries were denied for the rest of the window.
#[tokio::test(start_paused = true)]
async fn a_retry_a_guard_refused_is_given_back_to_the_budget() {
    use resilient_http::Clock;
    let options = json!({
        "max_attempts": 3,
        "budget": {"ratio": 0.0, "floor": 5, "window": 60},
        "circuit": {"min_calls": 1, "failure_ratio": 0.5, "window": 10, "open_for": 30},
    });
    let (rig, c, segment) = shared_rig("give-back", options, false, status(503));
    let e = call(&rig, &c, "GET", "/", json!({})).await.unwrap_err();
    assert!(e.is_circuit_open(), "{e}");
    assert_eq!(rig.sends(), 1, "the retry was refused, not sent");
    let config = resilient_core::BudgetConfig::new(0.0, 5, Duration::from_secs(60)).unwrap();
    let budget = resilient_core::RetryBudget::new(segment, "test", config).unwrap();
    assert_eq!(
        budget.stats(rig.clock.monotonic_ms()).retries,
        0,
        "given back"
    );
}

/// A call dropped during its backoff (PHP stopped it: a signal handler's exception, a pool
/// abandoned) never sends the retry the budget counted for it: given back too.
#[tokio::test(start_paused = true)]
async fn a_call_dropped_in_its_backoff_gives_its_retry_back() {
    use resilient_http::Clock;
    let options = json!({"max_attempts": 3, "budget": {"ratio": 0.0, "floor": 5, "window": 60}});
    let answer = status_with(503, &[("Retry-After", "2")], "");
    let (rig, c, segment) = shared_rig("dropped-in-backoff", options, false, answer);
    let during_backoff = Duration::from_secs(1);
    let cut = tokio::time::timeout(during_backoff, call(&rig, &c, "GET", "/", json!({}))).await;
    assert!(cut.is_err(), "dropped in its 2 s backoff");
    assert_eq!(rig.sends(), 1);
    let config = resilient_core::BudgetConfig::new(0.0, 5, Duration::from_secs(60)).unwrap();
    let budget = resilient_core::RetryBudget::new(segment, "test", config).unwrap();
    assert_eq!(
        budget.stats(rig.clock.monotonic_ms()).retries,
        0,
        "given back"
    );
}

/// A client of `funnel` options, one attempt of 200 ms at most, and a handle on its funnel
/// that reads what is held.
fn shared_funnel_rig(
    tag: &str,
    funnel: Value,
    fallback: Step,
) -> (Rig, HttpClient, resilient_core::Funnel) {
    let options = json!({"funnel": funnel, "timeout": 0.2, "max_attempts": 1});
    let (rig, c, segment) = shared_rig(tag, options, false, fallback);
    let handle = resilient_core::Funnel::new(
        segment,
        "test",
        resilient_core::FunnelConfig::new(64, 0, Duration::from_secs(60)).unwrap(),
    )
    .unwrap();
    (rig, c, handle)
}

#[tokio::test(start_paused = true)]
async fn a_learned_limit_keeps_a_timed_out_attempts_slot_for_as_long_again() {
    let (rig, c, funnel) = shared_funnel_rig("abandoned", json!({"limit": "auto"}), Step::Hang);
    let e = call(&rig, &c, "GET", "/", json!({})).await.unwrap_err();
    assert!(e.is_upstream_failed(), "{e}");
    let now = rig.clock.monotonic_ms();
    // The upstream still works on the request we left: its slot stays counted 200 ms more.
    assert_eq!(funnel.in_flight(now), 1);
    assert_eq!(funnel.in_flight(now + 199), 1);
    assert_eq!(funnel.in_flight(now + 200), 0, "then it lapses");
}

#[tokio::test(start_paused = true)]
async fn a_slot_is_given_back_at_once_after_an_answer_or_with_a_fixed_limit() {
    let (rig, c, funnel) = shared_funnel_rig("answered", json!({"limit": "auto"}), status(503));
    assert!(call(&rig, &c, "GET", "/", json!({})).await.is_err());
    assert_eq!(
        funnel.in_flight(rig.clock.monotonic_ms()),
        0,
        "a 503 was an answer"
    );

    let (rig, c, funnel) = shared_funnel_rig("fixed", json!({"limit": 4}), Step::Hang);
    assert!(call(&rig, &c, "GET", "/", json!({})).await.is_err());
    assert_eq!(
        funnel.in_flight(rig.clock.monotonic_ms()),
        0,
        "a fixed limit keeps nothing"
    );
}

#[tokio::test(start_paused = true)]
async fn one_record_per_attempt_with_the_url_without_query() {
    let rig = Rig::new(
        vec![
            status(503),
            Step::Fail {
                kind: FailureKind::Timeout,
                after: 5 * MS,
            },
        ],
        status(200),
    );
    let c = rig.client(json!({}));
    let r = call(
        &rig,
        &c,
        "GET",
        "/quote",
        json!({"query": {"token": "s3cret"}}),
    )
    .await
    .unwrap();
    assert_eq!(r.attempts(), 3);
    let records = rig.records.records();
    assert_eq!(records.len(), 3);
    assert_eq!(
        records.iter().map(|r| r.attempt).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert_eq!(
        records
            .iter()
            .map(|r| r.retry_follows())
            .collect::<Vec<_>>(),
        [true, true, false]
    );
    assert_eq!(
        (
            records[0].status(),
            records[1].status(),
            records[1].error(),
            records[2].status()
        ),
        (Some(503), None, Some("timeout"), Some(200))
    );
    assert!(records
        .iter()
        .all(|r| r.url == "http://127.0.0.1:9/quote" && r.method == "GET"));
    assert_eq!(records[0].duration, 10 * MS);
    // The query string reached the upstream, but no record or message shows it.
    assert!(rig.transport.seen()[0]
        .request
        .url
        .as_str()
        .contains("token=s3cret"));
    assert!(records.iter().all(|r| !format!("{r:?}").contains("s3cret")));
}

#[tokio::test(start_paused = true)]
async fn messages_never_show_secrets() {
    let rig = Rig::new(
        vec![],
        Step::Fail {
            kind: FailureKind::Connect,
            after: MS,
        },
    );
    let c = rig.client(json!({"headers": {"Authorization": "Bearer s3cret"}}));
    let e = call(
        &rig,
        &c,
        "GET",
        "http://user:pw@127.0.0.1:9/p?api_key=s3cret",
        json!({"headers": {"Cookie": "s=s3cret"}}),
    )
    .await
    .unwrap_err();
    assert!(
        e.is_upstream_failed() && e.last_status() == 0 && e.attempts() == 3,
        "{e}"
    );
    let text = format!("{e} {e:?}");
    assert!(!text.contains("s3cret") && !text.contains("pw@"), "{text}");
    assert!(
        e.message().starts_with(
            "GET http://127.0.0.1:9/p: connect error; max_attempts (3) reached (3 attempts"
        ),
        "{e}"
    );
}

#[tokio::test(start_paused = true)]
async fn web_caps_lower_timeouts_and_attempts() {
    let rig = Rig::new(vec![], status(503));
    let config = json::config(
        &json!({"base_url": "http://h", "timeout": 30, "connect_timeout": 10, "max_attempts": 3}),
    );
    let caps = Caps {
        timeout: Some(Duration::from_secs(10)),
        connect_timeout: Some(Duration::from_secs(3)),
        max_attempts: Some(1),
        ..Caps::default()
    };
    let c = HttpClient::new(config.clone(), caps, rig.env.clone());
    let e = call(&rig, &c, "GET", "/", json!({})).await.unwrap_err();
    assert_eq!(e.attempts(), 1);
    let limits = rig.transport.seen()[0].limits.clone();
    assert_eq!(
        (limits.timeout, limits.connect_timeout),
        (Duration::from_secs(10), Duration::from_secs(3))
    );
    // The message names the settings that made the call shorter than its options say: the
    // client asked for 3 attempts of 30 s.
    let named = Caps {
        timeout_name: "resilient.web_timeout",
        max_attempts_name: "resilient.web_max_attempts",
        ..caps
    };
    let c = HttpClient::new(config.clone(), named, rig.env.clone());
    let e = call(&rig, &c, "GET", "/", json!({})).await.unwrap_err();
    assert!(
        e.to_string()
            .contains("max_attempts (1, capped by resilient.web_max_attempts) reached"),
        "{e}"
    );
    let hang = Rig::new(vec![], Step::Hang);
    let c = HttpClient::new(config, named, hang.env.clone());
    let e = call(&hang, &c, "GET", "/", json!({})).await.unwrap_err();
    assert!(
        e.to_string()
            .contains("the attempt timed out after 10s, cut to resilient.web_timeout"),
        "{e}"
    );
    // A cap above the option changes nothing, and is not named.
    let above = Caps {
        max_attempts: Some(5),
        timeout: Some(Duration::from_secs(60)),
        ..named
    };
    let config = json::config(&json!({"base_url": "http://h", "timeout": 0.5, "max_attempts": 1}));
    let c = HttpClient::new(config, above, hang.env.clone());
    let e = call(&hang, &c, "GET", "/", json!({})).await.unwrap_err();
    assert!(!e.to_string().contains("resilient.web"), "{e}");
    assert!(e.to_string().contains("max_attempts (1) reached"), "{e}");
}

/// A funnel slot lapses at its lease's end, when another process may take it: a request's own
/// `timeout` longer than the lease is cut to what is left of the lease, so no attempt outlives
/// its slot. (A lease runs in real time from when the slot was given: under paused time, the
/// microseconds this test takes come off it.)
#[tokio::test(start_paused = true)]
async fn an_attempt_never_outlives_its_funnel_slot() {
    let funnel = json!({"funnel": {"limit": 1, "lease": 0.4}, "timeout": 0.2, "max_attempts": 1});
    let (rig, c, _) = shared_rig("lease-cut", funnel, true, Step::Hang);
    assert!(call(&rig, &c, "GET", "/", json!({"timeout": 2.0}))
        .await
        .is_err());
    assert!(call(&rig, &c, "GET", "/", json!({"timeout": 0.3}))
        .await
        .is_err());
    let timeouts: Vec<_> = rig
        .transport
        .seen()
        .iter()
        .map(|s| s.limits.timeout)
        .collect();
    assert!(
        timeouts[0] <= Duration::from_millis(400) && timeouts[0] > Duration::from_millis(350),
        "{timeouts:?}"
    );
    assert_eq!(timeouts[1], Duration::from_millis(300));
}

/// A probe's ticket is given up after the client's timeout (plus a margin), and then another
/// caller probes: a request asking for a longer timeout would have two probes out at once.
#[tokio::test(start_paused = true)]
async fn a_probe_never_outlives_its_ticket() {
    let circuit = json!({
        "circuit": {"failure_ratio": 0.5, "min_calls": 2, "window": 10, "open_for": 1},
        "timeout": 0.5,
        "max_attempts": 1,
        "budget": false
    });
    let (rig, c, _) = shared_rig("probe-cut", circuit, true, Step::Hang);
    for _ in 0..2 {
        assert!(call(&rig, &c, "GET", "/", json!({}))
            .await
            .unwrap_err()
            .is_upstream_failed());
    }
    let e = call(&rig, &c, "GET", "/", json!({"timeout": 3.0}))
        .await
        .unwrap_err();
    assert!(e.is_circuit_open(), "{e}");
    tokio::time::advance(Duration::from_secs(2)).await; // past open_for + 20 %
    let e = call(&rig, &c, "GET", "/", json!({"timeout": 3.0}))
        .await
        .unwrap_err();
    assert!(e.is_upstream_failed(), "the probe ran: {e}");
    let seen = rig.transport.seen();
    assert_eq!(seen.len(), 3);
    let timeout = seen[2].limits.timeout;
    assert!(
        timeout <= Duration::from_millis(500) && timeout > Duration::from_millis(450),
        "the client's (less the real time since the probe's admission), not 3 s: {timeout:?}"
    );
}
