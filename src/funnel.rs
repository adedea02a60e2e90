//! `Resilient\Funnel` and `Resilient\Lease`: a concurrency limit per name,
//! shared by every PHP process of the user on the host.
//!
//! A lease is one held slot. It is released by `Lease::release()`, when the
//! `Lease` object is destroyed, and at request end (RSHUTDOWN, see `held.rs`),
//! including after a fatal error or `max_execution_time`. It also expires on
//! its own after `lease` seconds (default 20 s = 2 × the 10 s web timeout cap),
//! and the slot of a process that no longer exists is reclaimed at once.
//!
//! A lease belongs to the process that acquired it: in a child of
//! `pcntl_fork` the inherited `Lease` object neither releases it on
//! destruction nor via `release()` (which returns false there).

use std::sync::Arc;

use ext_php_rs::boxed::ZBox;
use ext_php_rs::prelude::*;
use ext_php_rs::types::ZendHashTable;
use ext_php_rs::types::Zval;
use resilient_core::{
    clock, AdaptiveStats, Funnel as CoreFunnel, FunnelConfig, Lease as CoreLease, Segment,
};

use crate::bailout::Guarded;
use crate::coerce::{BoolArg, CallableArg, StringArg};
use crate::exceptions::{self, Kind};
use crate::segment::Rebinding;
use crate::{coerce, context, errors, held, segment};

/// A funnel's settings from PHP's numbers: the conversions name the argument, the core
/// owns the rules. The client's `funnel` option goes through the same function.
pub fn config(
    limit: i64,
    reserve: i64,
    lease_seconds: f64,
    share: bool,
) -> Result<FunnelConfig, resilient_core::Error> {
    use resilient_core::validate;
    let limit = slots("limit", limit)?;
    FunnelConfig::new(
        limit,
        reserve_below("reserve", reserve, limit)?,
        validate::duration("lease", lease_seconds)?,
    )?
    .with_share(share)
}

const MAX_SLOTS: i64 = resilient_core::layout::MAX_FUNNEL_LIMIT as i64;

/// A funnel's limit as PHP gives it: 1..=64, the range named in the message whatever the
/// number (PHP_INT_MAX too).
pub fn slots(argument: &str, value: i64) -> Result<u32, resilient_core::Error> {
    resilient_core::validate::count(argument, value, 1, MAX_SLOTS)
}

/// A reserve as PHP gives it: 0 to `limit - 1`, the range named in the message with the limit's
/// number (as the core names it), whatever the number given.
pub fn reserve_below(argument: &str, value: i64, limit: u32) -> Result<u32, resilient_core::Error> {
    match u32::try_from(value) {
        Ok(reserve) if reserve < limit => Ok(reserve),
        _ => Err(resilient_core::Error::invalid_argument(
            argument,
            format!(
                "must be between 0 and limit - 1 ({}), got {value}",
                limit.saturating_sub(1)
            ),
        )),
    }
}

/// Default lease length: 2 × the default web timeout cap (`resilient.web_timeout` = 10 s).
pub const DEFAULT_LEASE_SECONDS: f64 = 20.0;

/// A named concurrency limit shared by every PHP process of the user on the
/// host (FPM workers and CLI): at most `limit` leases held at once; web
/// callers may use all slots, background (CLI) callers only `limit - reserve`.
/// With `$share`, under contention each side keeps its part: while a background
/// caller was refused within the last 100 ms, web callers keep to the `reserve`
/// slots and background callers get the other `limit - reserve`. Fails fast
/// when full (no queueing). Throws `\ValueError` on a bad argument (the
/// message names it). When the segment cannot be used the funnel counts this
/// process only (degraded mode, see `degradedReason()`),
/// or throws `Resilient\SharedMemoryError` with `resilient.shm_required=1`.
#[php_class]
#[php(name = "Resilient\\Funnel")]
pub struct Funnel {
    /// Shared with the leases it hands out (one more reference, not a copy, per lease).
    name: Arc<str>,
    config: FunnelConfig,
    bound: Rebinding<CoreFunnel>,
}

impl Funnel {
    /// The funnel on this process's current segment (see [`Rebinding`]).
    fn current(&self) -> PhpResult<(Arc<Segment>, CoreFunnel)> {
        self.bound.get(|seg| self.build(seg))
    }

    fn build(&self, seg: Arc<Segment>) -> PhpResult<CoreFunnel> {
        CoreFunnel::new(seg, &self.name, self.config).map_err(errors::php)
    }

    fn inner(&self) -> PhpResult<CoreFunnel> {
        Ok(self.current()?.1)
    }

    /// Takes a slot for the caller's context (or the explicit `background`), listed in `held`
    /// for request end (whoever gives it back unlists it).
    fn acquire(&self, background: Option<bool>) -> PhpResult<Option<CoreLease>> {
        let background = background.unwrap_or_else(|| !context::is_web());
        self.bound.with(
            clock::monotonic_ms(),
            |seg| self.build(seg),
            |segment, inner, now_ms| {
                let lease = inner.admit(background, now_ms, inner.config().lease_ms())?;
                held::add(segment, lease.id());
                Some(lease)
            },
        )
    }

    /// Why the caller of this context was refused, in numbers.
    fn full_message(&self, inner: &CoreFunnel) -> String {
        let why = inner.why_full(!context::is_web(), clock::monotonic_ms());
        format!("funnel '{}' is full ({why})", self.name)
    }

    /// Wraps a core lease in a PHP-visible Lease.
    fn lease_object(&self, lease: CoreLease) -> Lease {
        Lease {
            funnel: self.name.clone(),
            inner: Some(lease),
        }
    }
}

#[php_impl]
impl Funnel {
    /// `new Funnel(string $name, int $limit, int $reserve = 0, ?float $lease = null,
    /// bool $share = false)`. `$limit` 1..=64; `0 <= $reserve < $limit`; `$lease`
    /// seconds, at least 1e-9 (a lease counts in whole ms, rounded up to 1) and at most a
    /// year, default 20.0 (2 × the web timeout cap); `$share`
    /// needs `$reserve >= 1`. Numbers may be given as numeric strings or integral
    /// floats, as PHP's coercive mode allows.
    pub fn __construct(
        name: StringArg,
        limit: &Zval,
        reserve: Option<&Zval>,
        lease: Option<&Zval>,
        share: Option<BoolArg>,
    ) -> PhpResult<Self> {
        const CTOR: &str = "Resilient\\Funnel::__construct";
        crate::construct_once::refuse_second_call::<Self>(CTOR)?;
        let name = name.utf8(CTOR, 1, "name")?;
        let share = BoolArg::optional(share.as_ref(), CTOR, 5, "share")?;
        resilient_core::validate::name("name", &name).map_err(errors::php)?;
        let limit = coerce::int_arg(limit, CTOR, 2, "limit")?;
        let reserve = match coerce::given(reserve) {
            Some(z) => coerce::int_arg(z, CTOR, 3, "reserve")?,
            None => 0,
        };
        let lease = match coerce::given(lease) {
            Some(z) => coerce::float_arg(z, CTOR, 4, "lease")?,
            None => DEFAULT_LEASE_SECONDS,
        };
        let config = config(limit, reserve, lease, share.unwrap_or(false)).map_err(errors::php)?;
        let bound = Rebinding::new(|seg| CoreFunnel::new(seg, &name, config).map_err(errors::php))?;
        Ok(Funnel {
            name: name.into(),
            config,
            bound,
        })
    }

    /// A lease, or null when full. `$background` null = from the context
    /// (CLI is background and may only use `limit - reserve` slots).
    pub fn try_acquire(&self, background: Option<BoolArg>) -> PhpResult<Option<Lease>> {
        let background = BoolArg::optional(
            background.as_ref(),
            "Resilient\\Funnel::tryAcquire",
            1,
            "background",
        )?;
        Ok(self.acquire(background)?.map(|l| self.lease_object(l)))
    }

    /// Acquires a slot, calls `$fn`, releases the slot (also when `$fn` throws,
    /// exits or hits a fatal error) and returns `$fn`'s result. When full:
    /// returns `$fallback()` if given, else throws `Resilient\FunnelFull`.
    pub fn run(&self, r#fn: CallableArg, fallback: Option<CallableArg>) -> PhpResult<Zval> {
        const RUN: &str = "Resilient\\Funnel::run";
        // A callable that calls run() again (a fallback retrying through the funnel) would
        // otherwise recurse until the C stack overflows: a SIGSEGV, not an exception.
        if let Err(short) = crate::stack::check(crate::stack::CALLABLE_RESERVE, 0) {
            return Err(errors::php(resilient_core::Error::too_deep(
                "Funnel::run",
                format!(
                    "only {} KB of C stack left; a callable calling run() again without end?",
                    short.left / 1024
                ),
            )));
        }
        let r#fn = r#fn.callable(RUN, 1, "fn")?;
        let fallback = CallableArg::optional(fallback.as_ref(), RUN, 2, "fallback")?;
        let Some(lease) = self.acquire(None)? else {
            return match fallback {
                Some(fallback) => fallback.try_call(vec![]).map_err(PhpException::from),
                None => Err(exceptions::error(
                    Kind::FunnelFull,
                    self.full_message(&self.inner()?),
                    0,
                )),
            };
        };
        // Released (and unlisted) by the guard on return, on exception and on bailout (in a
        // Fiber, when the Fiber ends by it).
        let guard = Guarded::new(RunLease(Some(lease)));
        let result = r#fn.try_call(vec![]);
        drop(guard);
        result.map_err(PhpException::from)
    }

    /// Leases held now across all processes (reclaims expired/dead ones first).
    pub fn in_flight(&self) -> PhpResult<i64> {
        Ok(i64::from(self.inner()?.in_flight(clock::monotonic_ms())))
    }

    /// `in_flight`, `limit`, `reserve`, `share`, `degraded`, and `learned`: what the name's
    /// learned limit (`'limit' => 'auto'` on a client of this name) has learned, shared by
    /// every process: `limit` (fractional, as stored for every process, within 1..64: each
    /// client's cap is its whole slots clamped to its own `min`..`max`), `no_load_rtt_ms` (the
    /// slowly tracked latency without queueing; 0 while not known yet), `rtt_ms` (the mean
    /// latency of answers in the latest interval that had any: an outage of drops only keeps
    /// it) and `intervals` (closed so far); null before a client of the
    /// name made an attempt.
    pub fn stats(&self) -> PhpResult<ZBox<ZendHashTable>> {
        let (segment, inner) = self.current()?;
        let cfg = self.config;
        let mut ht = ZendHashTable::new();
        ht.insert(
            "in_flight",
            i64::from(inner.in_flight(clock::monotonic_ms())),
        )?;
        ht.insert("limit", i64::from(cfg.limit()))?;
        ht.insert("reserve", i64::from(cfg.reserve()))?;
        ht.insert("share", cfg.share())?;
        ht.insert("degraded", segment.is_local())?;
        match inner.learned() {
            Some(l) => ht.insert("learned", learned_array(&l)?)?,
            None => ht.insert("learned", ())?,
        }
        Ok(ht)
    }

    /// @internal For benchmarks: teaches the learned limit of `$name` (bounds 1..64) `$attempts`
    /// answers of `$seconds` each, as the client's funnel guard does after every attempt (the
    /// clock read, the in-flight load and the update). Returns the learned limit.
    pub fn learn_synthetic(
        name: StringArg,
        attempts: &Zval,
        seconds: Option<&Zval>,
    ) -> PhpResult<f64> {
        use resilient_core::adaptive_limit::Sample;
        use resilient_core::{validate, AdaptiveConfig};
        const FUNCTION: &str = "Resilient\\Funnel::learnSynthetic";
        let name = name.utf8(FUNCTION, 1, "name")?;
        let attempts = coerce::int_arg(attempts, FUNCTION, 2, "attempts")?;
        let seconds = coerce::optional_float_arg(seconds, FUNCTION, 3, "seconds")?;
        let attempts =
            validate::count("attempts", attempts, 0, 1_000_000_000).map_err(errors::php)?;
        let latency =
            validate::duration("seconds", seconds.unwrap_or(0.02)).map_err(errors::php)?;
        let bounds = AdaptiveConfig::new(1, 64, 4).map_err(errors::php)?;
        let config = FunnelConfig::adaptive(bounds, 0, std::time::Duration::from_secs(20))
            .map_err(errors::php)?;
        let latency_us = latency.as_micros() as u64;
        crate::interrupt::interruptible(crate::interrupt::Poll::FAST_ROUNDS, move |poll| {
            let funnel = CoreFunnel::new(segment::shared()?, &name, config).map_err(errors::php)?;
            for _ in 0..attempts {
                poll.check()?;
                let now_ms = clock::monotonic_ms();
                let sample = Sample {
                    latency_us,
                    drop: false,
                    deadline_cut: false,
                    inflight: funnel.counted(now_ms) + 1,
                };
                funnel.record(sample, now_ms);
            }
            Ok(funnel.adaptive_stats().map_or(0.0, |s| s.limit()))
        })
    }

    pub fn name(&self) -> String {
        self.name.to_string()
    }

    pub fn limit(&self) -> i64 {
        i64::from(self.config.limit())
    }

    pub fn reserve(&self) -> i64 {
        i64::from(self.config.reserve())
    }

    /// Whether the reserve is shared (`$share`): under contention web callers keep the
    /// reserved slots and background callers the others.
    pub fn share(&self) -> bool {
        self.config.share()
    }

    /// Lease length in seconds.
    pub fn lease(&self) -> f64 {
        self.config.lease().as_secs_f64()
    }

    /// True when this funnel counts only this process's leases: the shared
    /// segment could not be used (degraded mode, see `degradedReason()`).
    pub fn is_degraded(&self) -> PhpResult<bool> {
        Ok(self.current()?.0.is_local())
    }

    /// Why this process's funnels, budgets and clients use process-local
    /// guards (the degraded mode: the shared-memory segment is unusable, e.g.
    /// owned by another user, readable by others, corrupt, or the file system
    /// is full), or null when they share the segment. Opens the segment if this
    /// process has not yet; throws `Resilient\SharedMemoryError` on a bad
    /// `resilient.shm_*` setting, or when `resilient.shm_required` is on and
    /// the segment is unusable.
    pub fn degraded_reason() -> PhpResult<Option<String>> {
        segment::degraded_reason()
    }
}

/// A learned limit's state as PHP sees it (also in `Metrics::snapshot()`).
pub fn learned_array(l: &AdaptiveStats) -> PhpResult<ZBox<ZendHashTable>> {
    let mut ht = ZendHashTable::new();
    ht.insert("limit", (l.limit() * 1000.0).round() / 1000.0)?;
    ht.insert("no_load_rtt_ms", l.no_load_rtt_ms())?;
    ht.insert("rtt_ms", l.rtt_ms())?;
    ht.insert("intervals", i64::try_from(l.intervals).unwrap_or(i64::MAX))?;
    Ok(ht)
}

/// The lease of `Funnel::run`, released (and unlisted) when dropped.
struct RunLease(Option<CoreLease>);

impl Drop for RunLease {
    fn drop(&mut self) {
        if let Some(lease) = self.0.take() {
            held::remove(lease.id());
            lease.release();
        }
    }
}

/// One held funnel slot (get one from `Funnel::tryAcquire()`; not
/// constructible from PHP). Released by `release()`, when the object is
/// destroyed, and at request end; a fatal error or `max_execution_time`
/// releases it as the error is raised, before the shutdown functions run (an
/// error an error handler takes does not). In a `pcntl_fork()` child an
/// inherited lease is neither released nor releasable: it belongs to the parent.
#[php_class]
#[php(name = "Resilient\\Lease")]
#[php(flags = ext_php_rs::flags::ClassFlags::Final)]
pub struct Lease {
    funnel: Arc<str>,
    inner: Option<CoreLease>,
}

#[php_impl]
impl Lease {
    /// Gives the slot back. True if this call released it; false if it was
    /// already released, expired and reclaimed, or belongs to a parent process
    /// (the core never releases another process's lease).
    pub fn release(&mut self) -> bool {
        match self.inner.take() {
            Some(lease) => {
                held::remove(lease.id());
                lease.release()
            }
            None => false,
        }
    }

    /// True until released (locally, or by a fatal error that ended the code
    /// holding it). A lease that expired is still reported held here;
    /// `release()` then returns false.
    pub fn is_held(&self) -> bool {
        self.inner.as_ref().is_some_and(|l| {
            l.id().holder_pid() == resilient_core::current_pid() && held::contains(l.id())
        })
    }

    /// The funnel's name.
    pub fn funnel(&self) -> String {
        self.funnel.to_string()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(lease) = self.inner.take() {
            held::remove(lease.id());
            // Dropping releases, except a parent's lease inherited by a forked child.
            drop(lease);
        }
    }
}
