//! `Resilient\Metrics`: the host-wide metrics of every upstream name, as a PHP array or as
//! Prometheus's text exposition; `reset()` on purpose only (no worker restart resets them).
//!
//! The counters live in the shared segment (`resilient_core::metrics`); every Client records
//! into its name's entry through `resilient_http::MetricsEvents`. Nothing here but the
//! conversion to PHP values.

use std::time::Duration;

use ext_php_rs::boxed::ZBox;
use ext_php_rs::prelude::*;
use ext_php_rs::types::ZendHashTable;
use resilient_core::metrics::{self, Histogram, LATENCY_BOUNDS_MS};
use resilient_core::{
    CircuitState, FailureClass, Metrics as CoreMetrics, MetricsSnapshot, RefusalReason,
};
use resilient_http::{CallEnd, CallEvents, MetricsEvents, Outcome};

use crate::{errors, segment};

/// Host-wide metrics per upstream name (static; not instantiable).
#[php_class]
#[php(name = "Resilient\\Metrics")]
#[php(flags = ext_php_rs::flags::ClassFlags::Final)]
pub struct Metrics;

fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn histogram(h: &Histogram) -> PhpResult<ZBox<ZendHashTable>> {
    let mut buckets = ZendHashTable::with_capacity(LATENCY_BOUNDS_MS.len() as u32 + 1);
    let cumulative = h.cumulative();
    for (ms, count) in LATENCY_BOUNDS_MS.iter().zip(cumulative) {
        buckets.insert_at_index(*ms as i64, int(count))?;
    }
    buckets.insert("+Inf", int(h.count()))?;
    let mut out = ZendHashTable::with_capacity(3);
    out.insert("buckets", buckets)?;
    out.insert("sum", h.sum_us as f64 / 1e6)?;
    out.insert("count", int(h.count()))?;
    Ok(out)
}

fn entry(s: &MetricsSnapshot) -> PhpResult<ZBox<ZendHashTable>> {
    let mut out = ZendHashTable::with_capacity(13);
    out.insert("originals", int(s.originals))?;
    out.insert("attempts", int(s.attempts))?;
    out.insert("retries", int(s.retries))?;
    out.insert("retries_succeeded", int(s.retries_succeeded))?;
    out.insert("retries_denied", int(s.retries_denied()))?;
    out.insert("successes", int(s.successes))?;
    out.insert("in_flight", int(s.in_flight))?;
    out.insert("fallbacks", int(s.fallbacks))?;
    out.insert("backend_fallbacks", int(s.backend_fallbacks))?;
    let mut shed = ZendHashTable::with_capacity(4);
    for r in RefusalReason::ALL {
        shed.insert(r.as_str(), int(s.refused(r)))?;
    }
    out.insert("shed", shed)?;
    let mut failures = ZendHashTable::with_capacity(5);
    for c in FailureClass::ALL {
        failures.insert(c.as_str(), int(s.failed(c)))?;
    }
    out.insert("failures", failures)?;
    let mut latency = ZendHashTable::with_capacity(2);
    latency.insert("success", histogram(&s.success_latency)?)?;
    latency.insert("failure", histogram(&s.failure_latency)?)?;
    out.insert("latency", latency)?;
    let mut breaker = ZendHashTable::with_capacity(2);
    breaker.insert("state", s.breaker().as_str())?;
    let mut transitions = ZendHashTable::with_capacity(3);
    for b in CircuitState::ALL {
        transitions.insert(b.as_str(), int(s.breaker_transitions[b as usize]))?;
    }
    breaker.insert("transitions", transitions)?;
    out.insert("breaker", breaker)?;
    match &s.learned {
        Some(l) => out.insert("learned", crate::funnel::learned_array(l)?)?,
        None => out.insert("learned", ())?,
    }
    Ok(out)
}

#[php_impl]
impl Metrics {
    /// Every upstream name with metrics on this host: `['shipping' => ['originals' => int,
    /// 'attempts' => int, 'retries' => int (sent), 'retries_succeeded' => int,
    /// 'retries_denied' => int, 'successes' => int, 'in_flight' => int, 'fallbacks' => int, 'backend_fallbacks' => int,
    /// 'shed' => ['funnel' => int, 'budget' => int, 'deadline' => int, 'circuit' => int] (our
    /// refusals), 'failures' => ['4xx' => int, '5xx' => int, 'timeout' => int, 'connection' =>
    /// int, 'other' => int] (upstream failures per attempt), 'latency' => ['success' => h,
    /// 'failure' => h], 'breaker' => ['state' => 'closed'|'open'|'half_open', 'transitions' =>
    /// ['closed' => int, 'open' => int, 'half_open' => int]], 'learned' => null|['limit' =>
    /// float, 'no_load_rtt_ms' => float, 'rtt_ms' => float, 'intervals' => int] (a funnel
    /// `'limit' => 'auto'`, as `Funnel::stats()`)]]`, where `h` = `['buckets' =>
    /// [1 => int, 2 => int, ..., 10000 => int, '+Inf' => int] (cumulative; keys: upper bounds
    /// in ms), 'sum' => float (s), 'count' => int]`.
    pub fn snapshot() -> PhpResult<ZBox<ZendHashTable>> {
        let seg = segment::shared()?;
        let all = metrics::snapshot_all(&seg);
        let mut out = ZendHashTable::with_capacity(all.len() as u32);
        for (name, s) in &all {
            out.insert(name.as_str(), entry(s)?)?;
        }
        Ok(out)
    }

    /// The same metrics in Prometheus's text exposition format 0.0.4 (serve it with
    /// `Content-Type: text/plain; version=0.0.4`). Labels: `upstream`, and `reason` or
    /// `outcome`.
    pub fn prometheus() -> PhpResult<String> {
        let seg = segment::shared()?;
        Ok(resilient_core::exposition::prometheus(
            &metrics::snapshot_all(&seg),
        ))
    }

    /// Zeroes the counters and histograms of `$name` (not the attempts in flight now, nor the
    /// breaker's state). Returns false when the name has no entry on this host. Throws
    /// `\ValueError` for an invalid name.
    pub fn reset(name: String) -> PhpResult<bool> {
        let seg = segment::shared()?;
        metrics::reset(&seg, &name).map_err(errors::php)
    }

    /// @internal For benchmarks and dashboard smoke tests: records `$calls` calls of one
    /// successful attempt of `$seconds` under `$name`, through the same recorder the attempt
    /// loop uses.
    pub fn record_synthetic(name: String, calls: i64, seconds: Option<f64>) -> PhpResult<()> {
        use resilient_core::validate;
        let calls = validate::count("calls", calls, 0, 1_000_000_000).map_err(errors::php)?;
        let latency: Duration =
            validate::duration("seconds", seconds.unwrap_or(0.001)).map_err(errors::php)?;
        let events =
            MetricsEvents::new(CoreMetrics::new(segment::shared()?, &name).map_err(errors::php)?);
        for _ in 0..calls {
            events.call_started();
            drop(events.attempt_sent(1));
            events.attempt_ended(1, Outcome::Status(200), latency);
            events.call_ended(CallEnd {
                attempts: 1,
                result: Ok(200),
            });
        }
        Ok(())
    }
}

pub fn register(module: ModuleBuilder) -> ModuleBuilder {
    module.class::<Metrics>()
}
