//! Host-wide metrics per upstream name, kept in the name's entry of the shared segment.
//!
//! Every process of the host adds to the same counters with relaxed atomic adds (no lock, no
//! ordering needed: each counter is read on its own), so the numbers survive the processes
//! that wrote them and a worker restart resets nothing; only [`Metrics::reset`] does, on
//! purpose. Our refusals (funnel, budget, deadline, circuit) are counted apart from upstream
//! failures, and never enter the latency histograms: a fast "no" is not an upstream latency.
//!
//! Histograms store one counter per bucket (not cumulative: one add per observation) and the
//! sum in microseconds; the cumulative `le` counts and the `_count` are computed when read.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::sync::Arc;
use std::time::Duration;

use crate::{table, validate, Error, Segment};

/// Upper bounds of the latency buckets, in ms; a last bucket (+Inf) takes the rest.
pub const LATENCY_BOUNDS_MS: [u64; 13] =
    [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000];
/// Buckets per histogram, +Inf included.
pub const LATENCY_BUCKETS: usize = LATENCY_BOUNDS_MS.len() + 1;

/// Why we refused to send (or to send again): nothing reached the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalReason {
    /// The funnel had no free slot.
    Funnel,
    /// The retry budget denied a retry.
    Budget,
    /// The deadline left no room for an attempt or a retry's wait.
    Deadline,
    /// The circuit breaker is open.
    Circuit,
}

impl RefusalReason {
    pub const ALL: [RefusalReason; 4] = [Self::Funnel, Self::Budget, Self::Deadline, Self::Circuit];
    /// The label value (`reason="funnel"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Funnel => "funnel",
            Self::Budget => "budget",
            Self::Deadline => "deadline",
            Self::Circuit => "circuit",
        }
    }
}

/// How an attempt that reached (or tried to reach) the upstream failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureClass {
    Status4xx,
    Status5xx,
    Timeout,
    Connection,
    /// A closed connection, a broken body, a body over `max_body`...
    Other,
}

impl FailureClass {
    pub const ALL: [FailureClass; 5] = [
        Self::Status4xx,
        Self::Status5xx,
        Self::Timeout,
        Self::Connection,
        Self::Other,
    ];
    /// The label value (`outcome="5xx"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Status4xx => "4xx",
            Self::Status5xx => "5xx",
            Self::Timeout => "timeout",
            Self::Connection => "connection",
            Self::Other => "other",
        }
    }
}

/// How one attempt ended, as metrics see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptClass {
    /// An answer below 400.
    Success,
    Failure(FailureClass),
}

/// A circuit breaker's state, as the breaker reports it through [`Metrics::breaker_transition`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CircuitState {
    Closed = 0,
    Open = 1,
    HalfOpen = 2,
}

impl CircuitState {
    pub const ALL: [CircuitState; 3] = [Self::Closed, Self::Open, Self::HalfOpen];
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open => "open",
            Self::HalfOpen => "half_open",
        }
    }
    fn from_word(w: u64) -> Self {
        match w {
            1 => Self::Open,
            2 => Self::HalfOpen,
            _ => Self::Closed,
        }
    }
}

/// One latency histogram in the segment.
#[repr(C)]
pub struct HistogramBlock {
    /// Observations per bucket (bucket `i`: ≤ `LATENCY_BOUNDS_MS[i]`, the last one +Inf).
    pub buckets: [AtomicU64; LATENCY_BUCKETS],
    /// Sum of the observations, µs.
    pub sum_us: AtomicU64,
}

/// The metrics block of one entry (the last field of [`crate::layout::Entry`]).
#[repr(C, align(64))]
pub struct MetricsBlock {
    /// 1 once a client of this name was made (snapshots list these names only, at zero until
    /// their first call, as Prometheus prefers a series to exist before it moves).
    pub active: AtomicU64,
    /// Calls started (one per task a user asked for, whatever its attempts).
    pub originals: AtomicU64,
    /// Attempts sent.
    pub attempts: AtomicU64,
    /// Attempts after the first (retries sent).
    pub retries: AtomicU64,
    /// Calls answered with success on a retry.
    pub retries_succeeded: AtomicU64,
    /// Calls answered with success (status < 400), hence within their deadline.
    pub successes: AtomicU64,
    /// Attempts sent and not yet ended (a gauge, never reset: it counts what is out now). An
    /// attempt abandoned mid-way is given back by its permit; only a process killed mid-attempt
    /// leaves it one too high.
    pub in_flight: AtomicU64,
    /// Fallback values used instead of an answer (reported by the fallback helper).
    pub fallbacks: AtomicU64,
    /// Our refusals, by [`RefusalReason`] (the budget's = retries denied).
    pub refusals: [AtomicU64; 4],
    /// Upstream failures per attempt, by [`FailureClass`].
    pub failures: [AtomicU64; 5],
    /// The breaker's current [`CircuitState`] (never reset).
    pub breaker_state: AtomicU64,
    /// Breaker transitions, by the [`CircuitState`] entered.
    pub breaker_transitions: [AtomicU64; 3],
    /// Latency of attempts answered with success.
    pub success_latency: HistogramBlock,
    /// Latency of attempts that failed at the upstream (never our refusals).
    pub failure_latency: HistogramBlock,
    /// Guard decisions made without the shared backend (Redis down or slow): the
    /// `on_backend_error` behaviour was used instead.
    pub backend_fallbacks: AtomicU64,
    /// The fixed funnel limit of the latest client made with one under this name on this host
    /// (0: none yet; a learned limit is the adaptive block's). A gauge, never reset. (Zero in
    /// files of earlier builds, where it was reserved.)
    pub funnel_limit: AtomicU64,
    pub _reserved: [AtomicU64; 3],
}

pub const METRICS_BLOCK_SIZE: usize = std::mem::size_of::<MetricsBlock>();
const _: () = assert!(METRICS_BLOCK_SIZE == 448);

/// A histogram as read: per-bucket counts (not cumulative), the sum in µs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Histogram {
    pub buckets: [u64; LATENCY_BUCKETS],
    pub sum_us: u64,
}

impl Histogram {
    /// Nothing observed (as `== Histogram::default()`, without a byte comparison).
    pub fn is_empty(&self) -> bool {
        self.buckets.iter().fold(self.sum_us, |acc, &b| acc | b) == 0
    }
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }
    /// Cumulative counts (`le` semantics), the last one equal to [`Histogram::count`].
    pub fn cumulative(&self) -> [u64; LATENCY_BUCKETS] {
        let mut out = self.buckets;
        for i in 1..LATENCY_BUCKETS {
            out[i] += out[i - 1];
        }
        out
    }
}

/// The metrics of one name, as read (each counter read on its own: a snapshot taken while
/// others record is consistent per counter, not across counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MetricsSnapshot {
    pub originals: u64,
    pub attempts: u64,
    pub retries: u64,
    pub retries_succeeded: u64,
    pub successes: u64,
    pub in_flight: u64,
    pub fallbacks: u64,
    pub backend_fallbacks: u64,
    /// By [`RefusalReason::ALL`]'s order.
    pub refusals: [u64; 4],
    /// By [`FailureClass::ALL`]'s order.
    pub failures: [u64; 5],
    pub breaker_state: u64,
    /// By [`CircuitState::ALL`]'s order (transitions *into* that state).
    pub breaker_transitions: [u64; 3],
    pub success_latency: Histogram,
    pub failure_latency: Histogram,
    /// The name's learned funnel limit (`'limit' => 'auto'`); `None` if nothing learned.
    pub learned: Option<crate::AdaptiveStats>,
    /// The fixed funnel limit of the latest client made with one under this name on this
    /// host ([`Metrics::funnel_limit`]): what `funnel_in_flight` (or `in_flight`, for a funnel
    /// on Redis) is measured against. `None`: no such client yet.
    pub funnel_limit: Option<u32>,
    /// The slots of the name's shared-memory funnel held on this host now, dead holders and
    /// lapsed leases not counted (`funnel::held_now`): unlike `in_flight`, never left high by
    /// a process killed mid-attempt (and a slot kept past an attempt abandoned while the
    /// upstream may still work on it counts here, not there). `None`: no funnel of the name
    /// used on this host (a funnel on Redis: unless its local fallback ran).
    pub funnel_in_flight: Option<u32>,
}

impl MetricsSnapshot {
    pub fn refused(&self, reason: RefusalReason) -> u64 {
        self.refusals[reason as usize]
    }
    pub fn failed(&self, class: FailureClass) -> u64 {
        self.failures[class as usize]
    }
    /// Retries the budget denied (= refusals by the budget).
    pub fn retries_denied(&self) -> u64 {
        self.refused(RefusalReason::Budget)
    }
    pub fn breaker(&self) -> CircuitState {
        CircuitState::from_word(self.breaker_state)
    }
}

/// The bucket of a latency, in µs.
fn bucket_of(us: u64) -> usize {
    LATENCY_BOUNDS_MS
        .iter()
        .position(|&ms| us <= ms * 1000)
        .unwrap_or(LATENCY_BOUNDS_MS.len())
}

impl HistogramBlock {
    fn observe(&self, us: u64) {
        self.buckets[bucket_of(us)].fetch_add(1, Relaxed);
        self.sum_us.fetch_add(us, Relaxed);
    }
    fn read(&self) -> Histogram {
        Histogram {
            buckets: std::array::from_fn(|i| self.buckets[i].load(Relaxed)),
            sum_us: self.sum_us.load(Relaxed),
        }
    }
    fn reset(&self) {
        for b in &self.buckets {
            b.store(0, Relaxed);
        }
        self.sum_us.store(0, Relaxed);
    }
}

fn read_all<const N: usize>(words: &[AtomicU64; N]) -> [u64; N] {
    std::array::from_fn(|i| words[i].load(Relaxed))
}

impl MetricsBlock {
    fn read(&self) -> MetricsSnapshot {
        MetricsSnapshot {
            originals: self.originals.load(Relaxed),
            attempts: self.attempts.load(Relaxed),
            retries: self.retries.load(Relaxed),
            retries_succeeded: self.retries_succeeded.load(Relaxed),
            successes: self.successes.load(Relaxed),
            in_flight: self.in_flight.load(Relaxed),
            fallbacks: self.fallbacks.load(Relaxed),
            backend_fallbacks: self.backend_fallbacks.load(Relaxed),
            refusals: read_all(&self.refusals),
            failures: read_all(&self.failures),
            breaker_state: self.breaker_state.load(Relaxed),
            breaker_transitions: read_all(&self.breaker_transitions),
            success_latency: self.success_latency.read(),
            failure_latency: self.failure_latency.read(),
            learned: None,
            funnel_limit: u32::try_from(self.funnel_limit.load(Relaxed))
                .ok()
                .filter(|&l| l > 0),
            funnel_in_flight: None,
        }
    }
    /// Zeroes the counters; the gauges (in flight, breaker state) describe the present and stay.
    fn reset(&self) {
        for w in [
            &self.originals,
            &self.attempts,
            &self.retries,
            &self.retries_succeeded,
            &self.successes,
            &self.fallbacks,
            &self.backend_fallbacks,
        ] {
            w.store(0, Relaxed);
        }
        for w in self
            .refusals
            .iter()
            .chain(&self.failures)
            .chain(&self.breaker_transitions)
        {
            w.store(0, Relaxed);
        }
        self.success_latency.reset();
        self.failure_latency.reset();
    }
}

/// The metrics of one name, bound to a segment: what the attempt loop records through.
#[derive(Clone)]
pub struct Metrics {
    seg: Arc<Segment>,
    entry: usize,
}

impl Metrics {
    /// The metrics of `name` (the upstream's name: the funnel's entry), listed in snapshots.
    pub fn new(seg: Arc<Segment>, name: &str) -> Result<Self, Error> {
        let m = Self::unlisted(seg, name)?;
        m.list();
        Ok(m)
    }

    /// As [`Metrics::new`], but the name stays out of snapshots until [`Metrics::list`]: for a
    /// client that may still fail to be built (its budget's entry may not fit).
    pub fn unlisted(seg: Arc<Segment>, name: &str) -> Result<Self, Error> {
        let entry = seg.entry_index(name)?;
        Ok(Metrics { seg, entry })
    }

    /// Lists the name in snapshots from now on (at zero until it records).
    pub fn list(&self) {
        self.block().active.store(1, Relaxed);
    }

    /// A client of the name with a fixed funnel `limit` was made (the latest one's is shown,
    /// for dashboards to set the slots held against).
    pub fn funnel_limit(&self, limit: u32) {
        self.block().funnel_limit.store(u64::from(limit), Relaxed);
    }

    fn block(&self) -> &MetricsBlock {
        &self.seg.entry(self.entry).metrics
    }

    /// A call started (an original).
    pub fn call_started(&self) {
        self.block().originals.fetch_add(1, Relaxed);
    }

    /// Attempt `attempt` (1-based) is being sent: it is in flight until
    /// [`Metrics::attempt_released`].
    pub fn attempt_sent(&self, attempt: u32) {
        let b = self.block();
        b.attempts.fetch_add(1, Relaxed);
        if attempt > 1 {
            b.retries.fetch_add(1, Relaxed);
        }
        b.in_flight.fetch_add(1, Relaxed);
    }

    /// The attempt counted by [`Metrics::attempt_sent`] is no longer in flight (ended or
    /// abandoned).
    pub fn attempt_released(&self) {
        // Never below zero, even against a bug: a wrapped gauge would read as 2^64.
        let _ = self
            .block()
            .in_flight
            .fetch_update(Relaxed, Relaxed, |v| v.checked_sub(1));
    }

    /// An attempt ended with an answer or an upstream failure, after `latency`.
    pub fn attempt_ended(&self, class: AttemptClass, latency: Duration) {
        let b = self.block();
        // Rounded up to whole µs: a latency over a bound (`le`) by less than one is over it.
        let us = latency.as_nanos().div_ceil(1000).min(u64::MAX as u128) as u64;
        match class {
            AttemptClass::Success => b.success_latency.observe(us),
            AttemptClass::Failure(f) => {
                b.failures[f as usize].fetch_add(1, Relaxed);
                b.failure_latency.observe(us);
            }
        }
    }

    /// A call was answered with success after `attempts` attempts.
    pub fn call_succeeded(&self, attempts: u32) {
        let b = self.block();
        b.successes.fetch_add(1, Relaxed);
        if attempts > 1 {
            b.retries_succeeded.fetch_add(1, Relaxed);
        }
    }

    /// We refused to send (or to send again).
    pub fn refused(&self, reason: RefusalReason) {
        self.block().refusals[reason as usize].fetch_add(1, Relaxed);
    }

    /// A fallback value was used instead of an answer.
    pub fn fallback_used(&self) {
        self.block().fallbacks.fetch_add(1, Relaxed);
    }

    /// A guard decided without the shared backend (its `on_backend_error` behaviour).
    pub fn backend_fallback(&self) {
        self.block().backend_fallbacks.fetch_add(1, Relaxed);
    }

    /// An admission found the breaker closed, or refusing (`Open`), whoever made the
    /// transition (another host, on Redis): stored as the current state, nothing counted. A
    /// refusal replaces only "closed": a half-open breaker refuses every call but its probe's.
    /// A load first, so the usual case (unchanged) writes nothing to the shared line.
    pub fn breaker_found(&self, state: CircuitState) {
        let b = self.block();
        let stored = b.breaker_state.load(Relaxed);
        let replaces = match state {
            CircuitState::Open => stored == CircuitState::Closed as u64,
            _ => stored != state as u64,
        };
        if replaces {
            b.breaker_state.store(state as u64, Relaxed);
        }
    }

    /// The breaker entered `to` (counted as a transition and stored as the current state).
    pub fn breaker_transition(&self, to: CircuitState) {
        let b = self.block();
        b.breaker_state.store(to as u64, Relaxed);
        b.breaker_transitions[to as usize].fetch_add(1, Relaxed);
    }

    pub fn snapshot(&self) -> MetricsSnapshot {
        self.block().read()
    }
}

/// Every name with metrics, in table order: `(name, snapshot)`. Reads each counter once;
/// names the core composes itself (budgets' keys) are left out.
pub fn snapshot_all(seg: &Segment) -> Vec<(String, MetricsSnapshot)> {
    let mut all = Vec::new();
    for_each_snapshot(seg, |name, s| all.push((name.to_owned(), *s)));
    all
}

/// As [`snapshot_all`], handing each `(name, snapshot)` to `visit` instead of collecting
/// them: nothing is allocated (a name torn by a claimer still writing it is the rare
/// exception), so `Metrics::snapshot()` pays only for the PHP array it builds.
pub fn for_each_snapshot(seg: &Segment, mut visit: impl FnMut(&str, &MetricsSnapshot)) {
    let mut buf = [0u8; crate::layout::NAME_WORDS * 8];
    let now_ms = crate::clock::monotonic_ms();
    for e in seg.entries() {
        if e.hash.load(Acquire) == 0 || e.metrics.active.load(Relaxed) == 0 {
            continue;
        }
        let bytes = table::name_bytes(e, &mut buf);
        // A printable ASCII name (the usual one) passes the checks below as it is: skip them.
        // Checked without stopping at the first miss, which lets the loop go a word at a time.
        let printable = bytes
            .iter()
            .fold(!bytes.is_empty(), |ok, b| ok & (b' '..=b'~').contains(b));
        let name = if printable {
            // SAFETY: printable ASCII is UTF-8 as it is.
            std::borrow::Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(bytes) })
        } else {
            let name = String::from_utf8_lossy(bytes);
            if validate::name("name", &name).is_err() {
                continue;
            }
            name
        };
        let mut s = e.metrics.read();
        s.learned = crate::adaptive_limit::learned(&e.adaptive);
        s.funnel_in_flight = crate::funnel::held_now(e, now_ms);
        visit(&name, &s);
    }
}

/// Zeroes the counters of `name` (not its in-flight gauge nor its breaker state). False when
/// the name has no metrics: no entry, or an entry only a funnel or a budget uses (not listed in
/// snapshots either).
pub fn reset(seg: &Segment, name: &str) -> Result<bool, Error> {
    validate::name("name", name)?;
    match table::find(seg.entries(), name) {
        Some(i) if seg.entries()[i].metrics.active.load(Relaxed) != 0 => {
            seg.entries()[i].metrics.reset();
            Ok(true)
        }
        _ => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(tag: &str) -> Arc<Segment> {
        let path = std::env::temp_dir().join(format!(
            "resilient-metrics-{tag}-{}.shm",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&path);
        let seg = Arc::new(Segment::open(&path, 16).unwrap());
        let _ = std::fs::remove_file(&path);
        seg
    }

    #[test]
    fn a_histogram_is_empty_until_something_is_observed() {
        assert!(Histogram::default().is_empty());
        let mut h = Histogram::default();
        h.buckets[LATENCY_BUCKETS - 1] = 1;
        assert!(!h.is_empty());
        let h = Histogram {
            sum_us: 1,
            ..Histogram::default()
        };
        assert!(!h.is_empty());
    }

    #[test]
    fn buckets_follow_the_bounds() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1000), 0);
        assert_eq!(bucket_of(1001), 1);
        assert_eq!(bucket_of(10_000_000), 12);
        assert_eq!(bucket_of(10_000_001), 13);
    }

    /// `le` is "less than or equal": a latency over a bound by less than a microsecond is over
    /// it (before, truncated to whole µs, 1.0009 ms counted in `le="0.001"`).
    #[test]
    fn a_latency_just_over_a_bound_is_counted_over_it() {
        let m = Metrics::new(segment("edge"), "edge").unwrap();
        m.attempt_ended(AttemptClass::Success, Duration::from_nanos(1_000_900));
        m.attempt_ended(AttemptClass::Success, Duration::from_millis(1));
        let h = m.snapshot().success_latency;
        assert_eq!((h.buckets[0], h.buckets[1]), (1, 1), "{h:?}");
    }

    #[test]
    fn records_reach_every_handle_of_the_name_and_reset_zeroes_counters_only() {
        let seg = segment("rec");
        let a = Metrics::new(seg.clone(), "shipping").unwrap();
        let b = Metrics::new(seg.clone(), "shipping").unwrap();
        a.call_started();
        a.attempt_sent(1);
        a.attempt_ended(
            AttemptClass::Failure(FailureClass::Status5xx),
            Duration::from_millis(3),
        );
        a.attempt_released();
        b.attempt_sent(2);
        b.attempt_ended(AttemptClass::Success, Duration::from_micros(700));
        b.attempt_released();
        b.call_succeeded(2);
        b.attempt_sent(1); // still out
        a.refused(RefusalReason::Budget);
        a.breaker_transition(CircuitState::Open);
        let s = b.snapshot();
        assert_eq!(
            (s.originals, s.attempts, s.retries, s.retries_succeeded),
            (1, 3, 1, 1)
        );
        assert_eq!((s.successes, s.in_flight, s.retries_denied()), (1, 1, 1));
        assert_eq!(s.failed(FailureClass::Status5xx), 1);
        assert_eq!(s.success_latency.buckets[0], 1);
        assert_eq!(s.failure_latency.cumulative()[2], 1);
        assert_eq!(
            (s.failure_latency.count(), s.failure_latency.sum_us),
            (1, 3000)
        );
        assert_eq!(s.breaker(), CircuitState::Open);

        let all = snapshot_all(&seg);
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].0, "shipping");

        assert!(reset(&seg, "shipping").unwrap());
        assert!(!reset(&seg, "unknown").unwrap());
        // An entry without metrics (a funnel's, a budget's): none to reset, as snapshots say.
        Metrics::unlisted(seg.clone(), "funnel-only").unwrap();
        assert!(!reset(&seg, "funnel-only").unwrap());
        let s = a.snapshot();
        assert_eq!(
            (s.originals, s.attempts, s.success_latency.count()),
            (0, 0, 0)
        );
        assert_eq!((s.in_flight, s.breaker()), (1, CircuitState::Open));
        a.attempt_released();
        a.attempt_released();
        assert_eq!(a.snapshot().in_flight, 0, "never below zero");
    }

    #[test]
    fn concurrent_adds_are_all_counted() {
        let seg = segment("conc");
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let m = Metrics::new(seg.clone(), "x").unwrap();
                std::thread::spawn(move || {
                    for i in 0..10_000 {
                        m.attempt_sent(1 + i % 2);
                        m.attempt_ended(AttemptClass::Success, Duration::from_millis(1));
                        m.attempt_released();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = Metrics::new(seg, "x").unwrap().snapshot();
        assert_eq!((s.attempts, s.retries, s.in_flight), (40_000, 20_000, 0));
        assert_eq!(
            (s.success_latency.count(), s.success_latency.sum_us),
            (40_000, 40_000_000)
        );
    }
}

/// `cargo test --release -p resilient-core metrics_read_timing -- --ignored --nocapture`: the
/// core's part of `Metrics::snapshot()`/`prometheus()` (the PHP side adds the array building).
#[cfg(test)]
mod timing {
    use super::*;

    #[test]
    #[ignore]
    fn metrics_read_timing() {
        for slots in [256, 4096] {
            let path = std::env::temp_dir().join(format!(
                "resilient-metrics-t-{slots}-{}.shm",
                std::process::id()
            ));
            let _ = std::fs::remove_file(&path);
            let seg = Arc::new(Segment::open(&path, slots).unwrap());
            let _ = std::fs::remove_file(&path);
            for i in 0..100 {
                Metrics::new(seg.clone(), &format!("up-{i}"))
                    .unwrap()
                    .call_started();
            }
            let n = 2000;
            let t = std::time::Instant::now();
            for _ in 0..n {
                std::hint::black_box(snapshot_all(&seg));
            }
            eprintln!(
                "snapshot_all, 100 names in {slots} slots: {:?}",
                t.elapsed() / n
            );
            let t = std::time::Instant::now();
            for _ in 0..n {
                for_each_snapshot(&seg, |name, s| {
                    std::hint::black_box((name, s));
                });
            }
            eprintln!(
                "for_each_snapshot, 100 names in {slots} slots: {:?}",
                t.elapsed() / n
            );
            let all = snapshot_all(&seg);
            let t = std::time::Instant::now();
            for _ in 0..n {
                std::hint::black_box(crate::exposition::prometheus(&all));
            }
            eprintln!("exposition::prometheus, 100 names: {:?}", t.elapsed() / n);
        }
    }
}
