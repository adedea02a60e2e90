//! Fakes for exact, sleep-free tests of the attempt loop.
//!
//! Time is tokio's paused clock: `tokio::time::pause()` makes every sleep complete instantly
//! while the virtual clock advances by exactly the slept amount, so a test can assert that a
//! wait was exactly 2 s. The clock below reads that virtual time; the wall clock is a fixed
//! epoch plus the same offset. The transport is scripted per attempt and logs what it saw;
//! the funnel and budget fakes log into the same event log, so ordering (release before sleep)
//! can be asserted.
#![allow(dead_code)]

pub mod json;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use resilient_http::BoxFuture;
use resilient_http::RecordLog;
use resilient_http::{
    AttemptLimits, CallEnv, Caps, Clock, FailureKind, Guard, HttpClient, Permit, PreparedRequest,
    RawResponse, Refusal, RetryAllowance, Sleeper, Transport, TransportError,
};

/// Wall time at virtual zero: 2023-11-14T22:13:20Z.
pub const WALL_EPOCH_SECS: u64 = 1_700_000_000;

/// Shared, ordered log of what happened: "send 1", "acquire", "release", "sleep 2000ms".
#[derive(Default, Clone)]
pub struct Events(pub Arc<Mutex<Vec<String>>>);

impl Events {
    pub fn push(&self, e: impl Into<String>) {
        self.0.lock().unwrap().push(e.into());
    }
    pub fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// Virtual time from tokio's (paused) clock.
pub struct PausedClock {
    origin: tokio::time::Instant,
}

impl PausedClock {
    pub fn new() -> Self {
        Self {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Clock for PausedClock {
    fn monotonic_ns(&self) -> u64 {
        // A large base so subtractions in the loop never underflow.
        1_000_000_000_000 + self.origin.elapsed().as_nanos() as u64
    }
    fn wall(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(WALL_EPOCH_SECS) + self.origin.elapsed()
    }
}

/// Sleeps on tokio's clock and logs each sleep.
pub struct LoggingSleeper {
    pub events: Events,
    pub sleeps: Mutex<Vec<Duration>>,
}

impl Sleeper for LoggingSleeper {
    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()> {
        self.events.push(format!("sleep {}ms", d.as_millis()));
        self.sleeps.lock().unwrap().push(d);
        Box::pin(tokio::time::sleep(d))
    }
}

/// What one scripted attempt does.
#[derive(Clone, Debug)]
pub enum Step {
    /// Answer after `after`.
    Status {
        status: u16,
        headers: Vec<(String, Vec<u8>)>,
        body: &'static str,
        after: Duration,
    },
    /// Fail with a kind after `after`.
    Fail { kind: FailureKind, after: Duration },
    /// Never answer (the attempt ends by its timeout).
    Hang,
}

pub fn status(status: u16) -> Step {
    Step::Status {
        status,
        headers: vec![],
        body: "",
        after: Duration::from_millis(10),
    }
}

pub fn status_with(status: u16, headers: &[(&str, &str)], body: &'static str) -> Step {
    Step::Status {
        status,
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_ascii_lowercase(), v.as_bytes().to_vec()))
            .collect(),
        body,
        after: Duration::from_millis(10),
    }
}

/// One request as the transport saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub at: Duration,
    pub limits: AttemptLimits,
    pub request: PreparedRequest,
    pub concurrent: usize,
}

/// A transport scripted per attempt (by URL path, or one shared script), on tokio's clock.
pub struct ScriptedTransport {
    origin: tokio::time::Instant,
    script: Mutex<VecDeque<Step>>,
    /// Used when the script is empty.
    pub fallback: Step,
    /// Per-path scripts take precedence (pool tests).
    pub by_path: Mutex<Vec<(String, Step)>>,
    pub seen: Mutex<Vec<Seen>>,
    pub events: Events,
    in_flight: Arc<AtomicUsize>,
    pub max_in_flight: AtomicUsize,
    pub sends: AtomicU32,
}

impl ScriptedTransport {
    pub fn new(steps: Vec<Step>, fallback: Step, events: Events) -> Self {
        Self {
            origin: tokio::time::Instant::now(),
            script: Mutex::new(steps.into()),
            fallback,
            by_path: Mutex::new(Vec::new()),
            seen: Mutex::new(Vec::new()),
            events,
            in_flight: Arc::new(AtomicUsize::new(0)),
            max_in_flight: AtomicUsize::new(0),
            sends: AtomicU32::new(0),
        }
    }
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Transport for ScriptedTransport {
    fn send(
        &self,
        request: &PreparedRequest,
        limits: AttemptLimits,
    ) -> BoxFuture<'static, Result<RawResponse, TransportError>> {
        let n = self.sends.fetch_add(1, Ordering::SeqCst) + 1;
        self.events.push(format!("send {n}"));
        let path = request.url.path().to_string();
        let step = self
            .by_path
            .lock()
            .unwrap()
            .iter()
            .find(|(p, _)| *p == path)
            .map(|(_, s)| s.clone())
            .or_else(|| self.script.lock().unwrap().pop_front())
            .unwrap_or_else(|| self.fallback.clone());
        let now_in_flight = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight
            .fetch_max(now_in_flight, Ordering::SeqCst);
        self.seen.lock().unwrap().push(Seen {
            at: self.origin.elapsed(),
            limits: limits.clone(),
            request: request.clone(),
            concurrent: now_in_flight,
        });
        let in_flight = self.in_flight.clone();
        Box::pin(async move {
            let (after, result) = match step {
                Step::Status {
                    status,
                    headers,
                    body,
                    after,
                } => (
                    after,
                    Ok(RawResponse {
                        status,
                        headers,
                        body: body.as_bytes().to_vec(),
                    }),
                ),
                Step::Fail { kind, after } => (after, Err(TransportError::new(kind, "scripted"))),
                Step::Hang => (
                    Duration::MAX,
                    Err(TransportError::new(FailureKind::Timeout, "hang")),
                ),
            };
            let result = if after > limits.timeout {
                tokio::time::sleep(limits.timeout).await;
                Err(TransportError::new(
                    FailureKind::Timeout,
                    "the attempt timed out",
                ))
            } else {
                tokio::time::sleep(after).await;
                result
            };
            in_flight.fetch_sub(1, Ordering::SeqCst);
            result
        })
    }
}

/// An in-memory funnel that logs acquire/release.
pub struct FakeGate {
    pub limit: u32,
    pub held: AtomicU32,
    pub events: Events,
}

/// `Arc<FakeGate>` as a gate (slots need a handle back to the counter).
pub struct SharedGate(pub Arc<FakeGate>);

impl Guard for SharedGate {
    fn admit(&self, _attempt: u32, _now_ms: u64) -> Result<Permit, Refusal> {
        let me = self.0.clone();
        let this = &self.0;
        let held = this.held.fetch_add(1, Ordering::SeqCst);
        if held >= this.limit {
            this.held.fetch_sub(1, Ordering::SeqCst);
            this.events.push("full");
            return Err(Refusal::Full);
        }
        this.events.push("acquire");
        Ok(Permit::holding(move || {
            me.held.fetch_sub(1, Ordering::SeqCst);
            me.events.push("release");
        }))
    }
}

/// An in-memory budget: `floor + ratio × originals` retries.
pub struct FakeBudget {
    pub ratio: f64,
    pub floor: u32,
    pub originals: AtomicU32,
    pub retries: AtomicU32,
}

impl RetryAllowance for FakeBudget {
    fn record_original(&self, _now_ms: u64) {
        self.originals.fetch_add(1, Ordering::SeqCst);
    }
    fn try_consume(&self, _now_ms: u64) -> bool {
        let allowed = self.floor as f64 + self.ratio * self.originals.load(Ordering::SeqCst) as f64;
        if (self.retries.load(Ordering::SeqCst) + 1) as f64 > allowed {
            return false;
        }
        self.retries.fetch_add(1, Ordering::SeqCst);
        true
    }
}

/// Everything a test needs, wired together.
pub struct Rig {
    pub events: Events,
    pub transport: Arc<ScriptedTransport>,
    pub sleeper: Arc<LoggingSleeper>,
    pub records: Arc<RecordLog>,
    pub clock: Arc<PausedClock>,
    pub env: CallEnv,
}

impl Rig {
    pub fn new(steps: Vec<Step>, fallback: Step) -> Self {
        let events = Events::default();
        let transport = Arc::new(ScriptedTransport::new(steps, fallback, events.clone()));
        let sleeper = Arc::new(LoggingSleeper {
            events: events.clone(),
            sleeps: Mutex::new(vec![]),
        });
        let records = Arc::new(RecordLog::default());
        let clock = Arc::new(PausedClock::new());
        let env = CallEnv::new(clock.clone(), sleeper.clone(), transport.clone())
            .observer(records.clone())
            .jitter_seed(7);
        Self {
            events,
            transport,
            sleeper,
            records,
            clock,
            env,
        }
    }
    /// A client on this rig's environment (base URL filled in) with `options`.
    pub fn client(&self, options: serde_json::Value) -> HttpClient {
        let mut options = options;
        options["base_url"] = serde_json::json!("http://127.0.0.1:9");
        HttpClient::new(json::config(&options), Caps::default(), self.env.clone())
    }
    pub fn sleeps(&self) -> Vec<Duration> {
        self.sleeper.sleeps.lock().unwrap().clone()
    }
    pub fn sends(&self) -> u32 {
        self.transport.sends.load(Ordering::SeqCst)
    }
}
