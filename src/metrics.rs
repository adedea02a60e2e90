//! `Resilient\Metrics`: the host-wide metrics of every upstream name, as a PHP array or as
//! Prometheus's text exposition; `reset()` on purpose only (no worker restart resets them).
//!
//! The counters live in the shared segment (`resilient_core::metrics`); every Client records
//! into its name's entry through `resilient_http::MetricsEvents`. Nothing here but the
//! conversion to PHP values.

use std::time::Duration;

use ext_php_rs::boxed::ZBox;
use ext_php_rs::prelude::*;
use ext_php_rs::types::{ZendHashTable, Zval};
use resilient_core::metrics::{self, Histogram, LATENCY_BOUNDS_MS, LATENCY_BUCKETS};
use resilient_core::{
    CircuitState, FailureClass, Metrics as CoreMetrics, MetricsSnapshot, RefusalReason,
};
use resilient_http::{CallEnd, CallEvents, MetricsEvents, Outcome};

use crate::array_keys::{self, key_set, ArrayBuilder, Key, Keys, Shape, Shaped};
use crate::{coerce, errors, segment};

/// Host-wide metrics per upstream name (static; not instantiable).
#[php_class]
#[php(name = "Resilient\\Metrics")]
#[php(flags = ext_php_rs::flags::ClassFlags::Final)]
pub struct Metrics;

key_set!(KEYS: K {
    Originals = "originals",
    Attempts = "attempts",
    Retries = "retries",
    RetriesSucceeded = "retries_succeeded",
    RetriesDenied = "retries_denied",
    Successes = "successes",
    InFlight = "in_flight",
    Fallbacks = "fallbacks",
    BackendFallbacks = "backend_fallbacks",
    Shed = "shed",
    Failures = "failures",
    Latency = "latency",
    Breaker = "breaker",
    Learned = "learned",
    FunnelInFlight = "funnel_in_flight",
    FunnelLimit = "funnel_limit",
    Funnel = "funnel",
    Budget = "budget",
    Deadline = "deadline",
    Circuit = "circuit",
    Status4xx = "4xx",
    Status5xx = "5xx",
    Timeout = "timeout",
    Connection = "connection",
    Other = "other",
    Success = "success",
    Failure = "failure",
    Buckets = "buckets",
    Sum = "sum",
    Count = "count",
    Inf = "+Inf",
    State = "state",
    Transitions = "transitions",
    Closed = "closed",
    Open = "open",
    HalfOpen = "half_open",
});

/// Makes the snapshot's keys permanent (MINIT, before PHP's startup is over).
pub fn make_permanent_keys() {
    KEYS.make_permanent();
}

fn reason_key(r: RefusalReason) -> K {
    match r {
        RefusalReason::Funnel => K::Funnel,
        RefusalReason::Budget => K::Budget,
        RefusalReason::Deadline => K::Deadline,
        RefusalReason::Circuit => K::Circuit,
    }
}

fn class_key(c: FailureClass) -> K {
    match c {
        FailureClass::Status4xx => K::Status4xx,
        FailureClass::Status5xx => K::Status5xx,
        FailureClass::Timeout => K::Timeout,
        FailureClass::Connection => K::Connection,
        FailureClass::Other => K::Other,
    }
}

fn state_key(b: CircuitState) -> K {
    match b {
        CircuitState::Closed => K::Closed,
        CircuitState::Open => K::Open,
        CircuitState::HalfOpen => K::HalfOpen,
    }
}

/// One snapshot's arrays, built with the fixed keys: each kind of array is a copy of its
/// [`Shape`], filled by position.
struct Builder<'k> {
    keys: Keys<'k>,
    shapes: Shapes,
    calm: Calm,
}

/// The shapes of a snapshot's arrays (their keys in the order `Builder` fills them).
struct Shapes {
    entry: Shape,
    latency: Shape,
    histogram: Shape,
    buckets: Shape,
}

/// The keys of a name's array, in order; after them come `shed`, `failures`, `latency`,
/// `breaker`, `learned`, `funnel_in_flight` and `funnel_limit`.
const COUNTERS: [K; 9] = [
    K::Originals,
    K::Attempts,
    K::Retries,
    K::RetriesSucceeded,
    K::RetriesDenied,
    K::Successes,
    K::InFlight,
    K::Fallbacks,
    K::BackendFallbacks,
];
const AFTER_COUNTERS: [K; 7] = [
    K::Shed,
    K::Failures,
    K::Latency,
    K::Breaker,
    K::Learned,
    K::FunnelInFlight,
    K::FunnelLimit,
];

impl Shapes {
    fn new(keys: &Keys<'_>) -> Self {
        let shape = |ks: &[K]| {
            let mut a = ArrayBuilder::with_capacity(ks.len() as u32);
            for &k in ks {
                a.add(key(keys, k), Zval::new());
            }
            Shape::new(a)
        };
        let mut buckets = ArrayBuilder::with_capacity_keyed(LATENCY_BUCKETS as u32);
        for ms in LATENCY_BOUNDS_MS {
            buckets.add_index_long(ms, 0);
        }
        buckets.add_long(key(keys, K::Inf), 0);
        Shapes {
            entry: shape(&[COUNTERS.as_slice(), AFTER_COUNTERS.as_slice()].concat()),
            latency: shape(&[K::Success, K::Failure]),
            histogram: shape(&[K::Buckets, K::Sum, K::Count]),
            buckets: Shape::new(buckets),
        }
    }
}

/// The arrays every calm upstream has alike (no refusal, no failure, no latency observed, a
/// closed breaker that never moved: the usual state, and the breaker is off by default), built
/// once per snapshot and shared by the names that have them. PHP copies an array when it is
/// written to, so the sharing is invisible to the caller.
#[derive(Default)]
struct Calm {
    shed: Option<Zval>,
    failures: Option<Zval>,
    histogram: Option<Zval>,
    breaker: Option<Zval>,
}

/// At `position` of `out`: when `is_calm`, one more reference to the calm array in `slot`
/// (made by `build` the first time); else a new array from `build`.
fn set_maybe_calm(
    out: &mut Shaped,
    position: usize,
    slot: &mut Option<Zval>,
    is_calm: bool,
    build: impl Fn() -> Zval,
) {
    if is_calm {
        out.set_shared(position, slot.get_or_insert_with(&build));
    } else {
        out.set(position, build());
    }
}

fn key<'a>(keys: &'a Keys<'_>, k: K) -> Key<'a> {
    keys.get(k as usize)
}

fn shed(keys: &Keys<'_>, s: &MetricsSnapshot) -> Zval {
    let mut shed = ArrayBuilder::with_capacity(RefusalReason::ALL.len() as u32);
    for r in RefusalReason::ALL {
        shed.add_long(key(keys, reason_key(r)), s.refused(r));
    }
    shed.into_zval()
}

fn failures(keys: &Keys<'_>, s: &MetricsSnapshot) -> Zval {
    let mut failures = ArrayBuilder::with_capacity(FailureClass::ALL.len() as u32);
    for c in FailureClass::ALL {
        failures.add_long(key(keys, class_key(c)), s.failed(c));
    }
    failures.into_zval()
}

fn histogram(shapes: &Shapes, h: &Histogram) -> Zval {
    let cumulative = h.cumulative();
    let count = cumulative[LATENCY_BUCKETS - 1];
    // The finite bounds' counts, then '+Inf' (the last bucket's, i.e. every observation).
    let mut buckets = shapes.buckets.copy();
    for (i, n) in cumulative.into_iter().enumerate() {
        buckets.set_long(i, n);
    }
    let mut out = shapes.histogram.copy();
    out.set(0, buckets.into_zval());
    out.set_double(1, h.sum_us as f64 / 1e6);
    out.set_long(2, count);
    out.into_zval()
}

fn breaker(keys: &Keys<'_>, s: &MetricsSnapshot) -> Zval {
    let mut breaker = ArrayBuilder::with_capacity(2);
    breaker.add(
        key(keys, K::State),
        key(keys, state_key(s.breaker())).to_zval(),
    );
    let mut transitions = ArrayBuilder::with_capacity(CircuitState::ALL.len() as u32);
    for b in CircuitState::ALL {
        transitions.add_long(key(keys, state_key(b)), s.breaker_transitions[b as usize]);
    }
    breaker.add_array(key(keys, K::Transitions), transitions);
    breaker.into_zval()
}

impl Builder<'_> {
    fn entry(&mut self, s: &MetricsSnapshot) -> PhpResult<Zval> {
        let (keys, shapes, calm) = (&self.keys, &self.shapes, &mut self.calm);
        let mut out = shapes.entry.copy();
        let counters = [
            s.originals,
            s.attempts,
            s.retries,
            s.retries_succeeded,
            s.retries_denied(),
            s.successes,
            s.in_flight,
            s.fallbacks,
            s.backend_fallbacks,
        ];
        for (i, n) in counters.into_iter().enumerate() {
            out.set_long(i, n);
        }
        let n = COUNTERS.len();
        set_maybe_calm(
            &mut out,
            n,
            &mut calm.shed,
            s.refusals.iter().all(|&n| n == 0),
            || shed(keys, s),
        );
        set_maybe_calm(
            &mut out,
            n + 1,
            &mut calm.failures,
            s.failures.iter().all(|&n| n == 0),
            || failures(keys, s),
        );
        // A histogram's array; the calm one (nothing observed) shared.
        let mut latency_by = shapes.latency.copy();
        for (i, h) in [&s.success_latency, &s.failure_latency]
            .into_iter()
            .enumerate()
        {
            set_maybe_calm(
                &mut latency_by,
                i,
                &mut calm.histogram,
                h.is_empty(),
                || histogram(shapes, h),
            );
        }
        out.set(n + 2, latency_by.into_zval());
        set_maybe_calm(
            &mut out,
            n + 3,
            &mut calm.breaker,
            s.breaker() == CircuitState::Closed && s.breaker_transitions.iter().all(|&n| n == 0),
            || breaker(keys, s),
        );
        // As `Funnel::stats()`'s (only names with a learned limit have one: rare enough for
        // the plain array).
        let mut learned = Zval::new();
        if let Some(l) = &s.learned {
            learned.set_hashtable(crate::funnel::learned_array(l)?);
        }
        out.set(n + 4, learned);
        if let Some(held) = s.funnel_in_flight {
            out.set_long(n + 5, u64::from(held));
        }
        if let Some(limit) = s.funnel_limit {
            out.set_long(n + 6, u64::from(limit));
        }
        Ok(out.into_zval())
    }
}

thread_local! {
    /// How many names this thread's last `Metrics::snapshot()` listed.
    static LAST_LEN: std::cell::Cell<u32> = const { std::cell::Cell::new(8) };
}

#[php_impl]
impl Metrics {
    /// Every upstream name with metrics on this host: `['shipping' => ['originals' => int,
    /// 'attempts' => int, 'retries' => int (sent), 'retries_succeeded' => int,
    /// 'retries_denied' => int, 'successes' => int, 'in_flight' => int, 'fallbacks' => int, 'backend_fallbacks' => int,
    /// 'shed' => ['funnel' => int, 'budget' => int, 'deadline' => int, 'circuit' => int] (our
    /// refusals), 'failures' => ['4xx' => int, '5xx' => int, 'timeout' => int, 'connection' =>
    /// int, 'other' => int] (upstream failures per attempt), 'latency' => ['success' => h,
    /// 'failure' => h], 'breaker' => ['state' => 'closed'|'open'|'half_open' (as this
    /// host's last call found or left it: an open breaker past its `open_for` reads 'open' until
    /// the next call, its probe), 'transitions' => ['closed' => int, 'open' => int, 'half_open' => int]],
    /// 'learned' => null|['limit' =>
    /// float, 'no_load_rtt_ms' => float, 'rtt_ms' => float, 'intervals' => int] (a funnel
    /// `'limit' => 'auto'`, as `Funnel::stats()`), 'funnel_in_flight' => null|int (the slots of
    /// the name's funnel held on this host now, holders killed mid-attempt not counted, which
    /// `in_flight` keeps for good; null: no shared-memory funnel of the name used on this host,
    /// as for a funnel on Redis, whose slots are kept there), 'funnel_limit' => null|int (the
    /// fixed funnel limit of the latest client made with one under the name on this host)]]`, where `h` = `['buckets' =>
    /// [1 => int, 2 => int, ..., 10000 => int, '+Inf' => int] (cumulative; keys: upper bounds
    /// in ms), 'sum' => float (s), 'count' => int]`. A name that looks like an int is an int
    /// key, as PHP makes it. Throws `Resilient\SharedMemoryError` when this process cannot use
    /// the host's segment (the degraded mode, see `Funnel::degradedReason()`): its own counters
    /// are never given as the host's. Before any process created the segment: `[]`, and the
    /// file is not created (made by an operator's user, it would lock PHP-FPM's workers out).
    pub fn snapshot() -> PhpResult<ZBox<ZendHashTable>> {
        if segment::not_created_yet()? {
            return Ok(ZendHashTable::new());
        }
        let seg = segment::host_wide("Resilient\\Metrics::snapshot()")?;
        let keys = KEYS.keys();
        let mut builder = Builder {
            shapes: Shapes::new(&keys),
            keys,
            calm: Calm::default(),
        };
        // Sized as this thread's last snapshot was (a scrape repeats): growing the table
        // from 8 to 128 names cost 3 % of the call.
        let mut out = ZendHashTable::with_capacity(LAST_LEN.get());
        let mut result = Ok(());
        metrics::for_each_snapshot(&seg, |name, s| {
            if result.is_ok() {
                result = builder
                    .entry(s)
                    .map(|e| array_keys::insert(&mut out, name, e));
            }
        });
        result?;
        LAST_LEN.set(out.len().try_into().unwrap_or(u32::MAX));
        Ok(out)
    }

    /// The same metrics in Prometheus's text exposition format 0.0.4 (serve it with
    /// `Content-Type: text/plain; version=0.0.4`). Labels: `upstream`, and `reason` or
    /// `outcome`. Throws `Resilient\SharedMemoryError` as `snapshot()` does, and creates no
    /// segment file either (before one exists: each family's headers only).
    pub fn prometheus() -> PhpResult<String> {
        if segment::not_created_yet()? {
            return Ok(resilient_core::exposition::prometheus(&[]));
        }
        let seg = segment::host_wide("Resilient\\Metrics::prometheus()")?;
        Ok(resilient_core::exposition::prometheus(
            &metrics::snapshot_all(&seg),
        ))
    }

    /// The shared-memory segment file this process uses: `resilient.shm_path`, or the default
    /// `/dev/shm/resilient-<uid>.v<layout>.shm` (the layout version in the name). Does not open
    /// it. Throws `Resilient\SharedMemoryError` for a bad `resilient.shm_path`.
    pub fn segment_path() -> PhpResult<String> {
        Ok(segment::path()?.to_string_lossy().into_owned())
    }

    /// Zeroes the counters and histograms of `$name` (not the attempts in flight now, nor the
    /// breaker's state). Returns false when the name has no metrics on this host, or no
    /// segment file exists yet in its folder (it is not created: a segment made by an
    /// operator's user would lock PHP-FPM's workers out). Throws `\ValueError` for an invalid name,
    /// `Resilient\SharedMemoryError` as `snapshot()` does. An int is taken as its text (a
    /// `snapshot()` key).
    pub fn reset(name: crate::coerce::StringArg) -> PhpResult<bool> {
        let name = name.utf8_or_key("Resilient\\Metrics::reset", 1, "name")?;
        resilient_core::validate::name("name", &name).map_err(errors::php)?;
        if segment::not_created_yet()? {
            return Ok(false);
        }
        let seg = segment::host_wide("Resilient\\Metrics::reset()")?;
        metrics::reset(&seg, &name).map_err(errors::php)
    }

    /// @internal For benchmarks and dashboard smoke tests: records `$calls` calls of one
    /// successful attempt of `$seconds` under `$name`, through the same recorder the attempt
    /// loop uses.
    pub fn record_synthetic(
        name: coerce::StringArg,
        calls: &Zval,
        seconds: Option<&Zval>,
    ) -> PhpResult<()> {
        use resilient_core::validate;
        const FUNCTION: &str = "Resilient\\Metrics::recordSynthetic";
        let name = name.utf8(FUNCTION, 1, "name")?;
        let calls = coerce::int_arg(calls, FUNCTION, 2, "calls")?;
        let seconds = coerce::optional_float_arg(seconds, FUNCTION, 3, "seconds")?;
        let calls = validate::count("calls", calls, 0, 1_000_000_000).map_err(errors::php)?;
        let latency: Duration =
            validate::duration("seconds", seconds.unwrap_or(0.001)).map_err(errors::php)?;
        crate::interrupt::interruptible(crate::interrupt::Poll::FAST_ROUNDS, move |poll| {
            let events = MetricsEvents::new(
                CoreMetrics::new(segment::shared()?, &name).map_err(errors::php)?,
            );
            for _ in 0..calls {
                poll.check()?;
                events.call_started();
                drop(events.attempt_sent(1));
                events.attempt_ended(1, Outcome::Status(200), latency);
                events.call_ended(CallEnd {
                    attempts: 1,
                    result: Ok(200),
                });
            }
            Ok(())
        })
    }
}

pub fn register(module: ModuleBuilder) -> ModuleBuilder {
    module.class::<Metrics>()
}
