//! From raw records to the report's figures: per phase (by send time for requests, by arrival
//! time for upstream attempts) and as timelines in fixed bins.
//!
//! Definitions (also printed in the report):
//! - goodput: /checkout answered `live` within `good_within_s` (1 s: the seed's 900 ms page budget
//!   plus slack), per second of the phase;
//! - amplification: upstream attempts arriving in the phase / /checkout requests sent in it (a
//!   backlog that reaches the upstream after a switch counts in the later phase);
//! - recovery: from the upstream's switch back to normal until the first instant t from which the
//!   requests sent in [t, t+2 s) got ≥ 95 % goodput;
//! - FPM out of idle workers: a sample saw 0 idle workers, or FPM's own "max active processes"
//!   reached pm.max_children.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::experiment::{is_good, VariantRun};
use crate::loadgen::{Outcome, Record};
use crate::params::Params;

/// Bin width of the timelines, seconds.
pub const BIN_S: f64 = 0.5;

#[derive(Debug, Clone, Default, Serialize)]
pub struct PhaseStats {
    pub phase: String,
    pub from_s: f64,
    pub to_s: f64,
    /// The upstream's slots in the phase, and what they serve: slots / service time.
    pub slots: u32,
    pub capacity_rps: f64,
    /// 99th percentile of the upstream's queue over its events in the phase.
    pub upstream_queue_p99: Option<u32>,
    /// The upstream's events in the phase with a queue longer than its slots, and all of them:
    /// how far the p99 is from the 1 % it allows.
    pub upstream_queue_over_slots: (usize, usize),
    /// Mean of the funnel's learned limit sampled in the phase (`'limit' => 'auto'` only).
    pub learned_limit_mean: Option<f64>,
    pub offered_rps: f64,
    pub achieved_rps: f64,
    /// 99th percentile of (sent − scheduled): how late the generator sent.
    pub send_lag_p99_ms: f64,
    pub sent: u64,
    pub goodput_rps: f64,
    pub good: u64,
    /// Live, but slower than good_within_s.
    pub live_late: u64,
    pub fallback: u64,
    pub fallback_rps: f64,
    pub fallback_by_reason: BTreeMap<String, u64>,
    pub errors: u64,
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Attempts of the web page (background workers' apart), by arrival at the upstream.
    pub upstream_attempts: u64,
    /// Web attempts / web requests sent in the phase.
    pub amplification: f64,
    /// Web calls that reached the upstream at least once (distinct X-Request-Id).
    pub web_calls_seen: u64,
    /// Web attempts answered at once by the upstream's outage.
    pub outage_answers: u64,
    /// Background workers' attempts seen at the upstream.
    pub bg_attempts: u64,
    /// Background calls started in the phase, and those answered live.
    pub bg_calls: u64,
    pub bg_live: u64,
    pub bg_live_rps: f64,
    pub bg_fallback_by_reason: BTreeMap<String, u64>,
    pub bg_errors: u64,
    pub upstream_max_in_service: u32,
    pub upstream_max_queue: u32,
    /// Share of the upstream's slot-time spent serving (busy slot-seconds / capacity × phase).
    pub upstream_utilization: f64,
    /// When every slot was busy and one freed: median time until the next request took it.
    pub free_slot_idle_p50_ms: Option<f64>,
    pub live_p50_ms: Option<f64>,
    pub live_p99_ms: Option<f64>,
    pub fallback_p50_ms: Option<f64>,
    pub fallback_p99_ms: Option<f64>,
    pub health_sent: u64,
    pub health_ok: u64,
    pub health_p99_ms: Option<f64>,
    pub fpm_busy_max: Option<u32>,
    pub fpm_idle_min: Option<u32>,
    pub fpm_listen_queue_max: Option<u32>,
    pub fpm_out_of_idle: bool,
    /// Only for the last phase; None there means it never recovered.
    pub recovery_s: Option<f64>,
}

impl PhaseStats {
    /// What the phase can serve: the upstream's slots / service time, or the offered load when
    /// that is lower (a variant cannot serve more than it is asked for).
    pub fn servable_rps(&self) -> f64 {
        self.capacity_rps.min(self.offered_rps)
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Bin {
    pub t_s: f64,
    pub offered_rps: f64,
    pub goodput_rps: f64,
    pub fallback_rps: f64,
    pub error_rps: f64,
    /// Web attempts arriving at the upstream per second.
    pub upstream_attempts_rps: f64,
    /// Background attempts arriving at the upstream per second.
    pub bg_attempts_rps: f64,
    pub upstream_in_service_max: u32,
    pub upstream_queue_max: u32,
    /// In service + queued: everything inside the upstream.
    pub upstream_in_flight_max: u32,
    pub health_p99_ms: Option<f64>,
    pub fpm_busy_max: Option<u32>,
    pub fpm_listen_queue_max: Option<u32>,
    /// The breaker's worst state sampled in the bin (open, then half_open, then closed), for
    /// the resilient variants.
    pub breaker: Option<&'static str>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct VariantSummary {
    pub name: String,
    pub skipped: Option<String>,
    pub warmup: String,
    pub phases: Vec<PhaseStats>,
    pub recovery_s: Option<f64>,
    pub fpm_max_active_whole_run: Option<u32>,
    pub fpm_max_listen_queue_whole_run: Option<u32>,
    pub fpm_out_of_idle_whole_run: bool,
    /// Over the whole run (every phase): web attempts / web requests sent.
    pub amplification_whole_run: f64,
    /// After the upstream healed: the send time (seconds after healing) of the first request sent
    /// then that got a live answer, however long it took (not when that answer came).
    pub first_live_after_heal_s: Option<f64>,
    /// The extension's own metrics at the end of the run, when it has them.
    pub metrics: Option<serde_json::Value>,
    /// Every attempt the upstream saw since the reset after the warm-up (drain included), web
    /// and background: what the extension's counters should equal.
    pub upstream_attempts_total: u64,
    #[serde(skip)]
    pub bins: Vec<Bin>,
    /// The funnel's learned limit over time: (seconds since t0, limit), when it has one.
    pub learned_limit: Vec<(f64, f64)>,
}

pub fn percentile(v: &mut [f64], q: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(v[rank - 1])
}

/// Upstream levels over time from the attempt rows: (time, in_service, queued) after each event.
fn upstream_levels(run: &VariantRun) -> Vec<(f64, u32, u32)> {
    // kind order at equal times: end, start, arrival (no peak that never existed).
    let mut ev: Vec<(f64, u8)> = Vec::with_capacity(run.attempts.len() * 3);
    // Outage answers never queue nor take a slot.
    for a in run.attempts.iter().filter(|a| !a.unserved) {
        ev.push((a.arrival_s, 2));
        if let Some(s) = a.start_s {
            ev.push((s, 1));
        }
        if let Some(e) = a.end_s {
            ev.push((e, 0));
        }
    }
    ev.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut q, mut s) = (0i64, 0i64);
    ev.iter()
        .map(|&(t, k)| {
            match k {
                2 => q += 1,
                1 => {
                    q -= 1;
                    s += 1
                }
                _ => s -= 1,
            }
            (t, s.max(0) as u32, q.max(0) as u32)
        })
        .collect()
}

/// The levels set by the events in `[from, to)`.
fn events_in(
    levels: &[(f64, u32, u32)],
    from: f64,
    to: f64,
) -> impl Iterator<Item = &(f64, u32, u32)> {
    let start = levels.partition_point(|l| l.0 < from);
    levels[start..].iter().take_while(move |l| l.0 < to)
}

/// The 99th percentile of the queue over the events in `[from, to)`.
fn queue_p99_in(levels: &[(f64, u32, u32)], from: f64, to: f64) -> Option<u32> {
    let mut q: Vec<f64> = events_in(levels, from, to).map(|l| l.2 as f64).collect();
    percentile(&mut q, 0.99).map(|x| x as u32)
}

/// The events in `[from, to)` with a queue over `slots`, and all of them.
fn queue_over_in(levels: &[(f64, u32, u32)], from: f64, to: f64, slots: u32) -> (usize, usize) {
    events_in(levels, from, to).fold((0, 0), |(over, all), l| {
        (over + usize::from(l.2 > slots), all + 1)
    })
}

fn max_level_in(levels: &[(f64, u32, u32)], from: f64, to: f64) -> (u32, u32) {
    // The level at `from` is the one set by the last event before it.
    let start = levels.partition_point(|l| l.0 < from);
    let mut m = if start > 0 {
        (levels[start - 1].1, levels[start - 1].2)
    } else {
        (0, 0)
    };
    for l in levels[start..].iter().take_while(|l| l.0 < to) {
        m = (m.0.max(l.1), m.1.max(l.2));
    }
    m
}

fn in_window<'a>(rs: impl Iterator<Item = &'a Record>, from: f64, to: f64) -> Vec<&'a Record> {
    rs.filter(|r| r.sent_s >= from && r.sent_s < to).collect()
}

/// The share of a phase's answers that can be live: with `--slow-fail-ratio`, the slow phase
/// answers that share 503 after the same service time ([`Params::phases`]), so its slots serve
/// that many fewer live answers, and the goodput goals ask for a share of those. (The `errors`
/// scenario's failures are the load the upstream sheds, judged by its own goals.)
fn live_share(p: &Params, phase: &crate::scenario::PhasePlan) -> f64 {
    if p.bad_is_slow() {
        1.0 - phase.upstream.fail_ratio
    } else {
        1.0
    }
}

pub fn summarize(p: &Params, run: &VariantRun) -> VariantSummary {
    let mut s = VariantSummary {
        name: run.name.clone(),
        skipped: run.skipped.clone(),
        warmup: run.warmup.clone(),
        metrics: run.metrics.clone(),
        upstream_attempts_total: run.attempts.len() as u64,
        ..Default::default()
    };
    if run.skipped.is_some() {
        return s;
    }
    let levels = upstream_levels(run);
    let heal_s = run.switches_s.get(1).copied().unwrap_or(2.0 * p.phase_secs);
    let plan = p.phases();
    s.learned_limit = run
        .samples
        .iter()
        .filter_map(|x| Some((x.t_s, x.learned_limit?)))
        .collect();
    for (i, name) in p.phase_names().iter().enumerate() {
        let slots = plan[i].slots;
        let (from, to) = (i as f64 * p.phase_secs, (i + 1) as f64 * p.phase_secs);
        let dur = to - from;
        let c = in_window(run.checkout(), from, to);
        let h = in_window(run.health(), from, to);
        let scheduled = run
            .checkout()
            .filter(|r| r.scheduled_s >= from && r.scheduled_s < to)
            .count();
        let mut ps = PhaseStats {
            phase: name.to_string(),
            from_s: from,
            to_s: to,
            slots,
            capacity_rps: slots as f64 * 1000.0 / plan[i].upstream.service_ms.max(1) as f64
                * live_share(p, &plan[i]),
            ..Default::default()
        };
        ps.upstream_queue_p99 = queue_p99_in(&levels, from, to);
        ps.upstream_queue_over_slots = queue_over_in(&levels, from, to, slots);
        let learned: Vec<f64> = s
            .learned_limit
            .iter()
            .filter(|x| x.0 >= from && x.0 < to)
            .map(|x| x.1)
            .collect();
        ps.learned_limit_mean =
            (!learned.is_empty()).then(|| learned.iter().sum::<f64>() / learned.len() as f64);
        ps.offered_rps = scheduled as f64 / dur;
        ps.sent = c.len() as u64;
        ps.achieved_rps = c.len() as f64 / dur;
        ps.send_lag_p99_ms = percentile(
            &mut c
                .iter()
                .map(|r| (r.sent_s - r.scheduled_s) * 1000.0)
                .collect::<Vec<_>>(),
            0.99,
        )
        .unwrap_or(0.0);
        let (mut live_ms, mut fb_ms) = (Vec::new(), Vec::new());
        for r in &c {
            match &r.outcome {
                Outcome::Live => {
                    live_ms.push(r.latency_s.unwrap_or(0.0) * 1000.0);
                    if is_good(r, p.good_within_s) {
                        ps.good += 1;
                    } else {
                        ps.live_late += 1;
                    }
                }
                Outcome::Fallback(reason) => {
                    ps.fallback += 1;
                    *ps.fallback_by_reason.entry(reason.clone()).or_default() += 1;
                    fb_ms.push(r.latency_s.unwrap_or(0.0) * 1000.0);
                }
                Outcome::Error(kind) => {
                    ps.errors += 1;
                    *ps.errors_by_kind.entry(kind.clone()).or_default() += 1;
                }
            }
        }
        ps.goodput_rps = ps.good as f64 / dur;
        ps.fallback_rps = ps.fallback as f64 / dur;
        ps.live_p50_ms = percentile(&mut live_ms, 0.5);
        ps.live_p99_ms = percentile(&mut live_ms, 0.99);
        ps.fallback_p50_ms = percentile(&mut fb_ms, 0.5);
        ps.fallback_p99_ms = percentile(&mut fb_ms, 0.99);
        let arrived: Vec<_> = run
            .attempts
            .iter()
            .filter(|a| a.arrival_s >= from && a.arrival_s < to)
            .collect();
        let web: Vec<_> = arrived.iter().filter(|a| !a.background).collect();
        ps.upstream_attempts = web.len() as u64;
        ps.bg_attempts = (arrived.len() - web.len()) as u64;
        // (Only shown for the outage scenario, where every unserved answer is the outage's.)
        ps.outage_answers = web.iter().filter(|a| a.unserved).count() as u64;
        ps.web_calls_seen = web
            .iter()
            .filter_map(|a| a.call.as_deref())
            .collect::<std::collections::BTreeSet<_>>()
            .len() as u64;
        for b in run
            .bg_calls
            .iter()
            .filter(|b| b.start_s >= from && b.start_s < to)
        {
            ps.bg_calls += 1;
            match b.outcome.as_str() {
                "live" => ps.bg_live += 1,
                "fallback" => {
                    *ps.bg_fallback_by_reason
                        .entry(b.reason.clone())
                        .or_default() += 1
                }
                _ => ps.bg_errors += 1,
            }
        }
        ps.bg_live_rps = ps.bg_live as f64 / dur;
        ps.amplification = if ps.sent > 0 {
            ps.upstream_attempts as f64 / ps.sent as f64
        } else {
            0.0
        };
        (ps.upstream_max_in_service, ps.upstream_max_queue) = max_level_in(&levels, from, to);
        let busy: f64 = run
            .attempts
            .iter()
            .filter_map(|a| Some((a.start_s?, a.end_s?)))
            .map(|(s0, e0)| (e0.min(to) - s0.max(from)).max(0.0))
            .sum();
        ps.upstream_utilization = busy / (slots as f64 * dur);
        ps.free_slot_idle_p50_ms = percentile(&mut free_slot_gaps(run, slots, from, to), 0.5);
        ps.health_sent = h.len() as u64;
        ps.health_ok = h.iter().filter(|r| r.outcome == Outcome::Live).count() as u64;
        // A /health without an answer counts as infinitely slow, not as missing.
        let mut hl: Vec<f64> = h
            .iter()
            .map(|r| {
                if r.outcome == Outcome::Live {
                    r.latency_s.unwrap_or(0.0) * 1000.0
                } else {
                    f64::INFINITY
                }
            })
            .collect();
        ps.health_p99_ms = percentile(&mut hl, 0.99);
        let samples: Vec<_> = run
            .samples
            .iter()
            .filter(|x| x.t_s >= from && x.t_s < to)
            .collect();
        ps.fpm_busy_max = samples.iter().filter_map(|x| x.fpm_active).max();
        ps.fpm_idle_min = samples.iter().filter_map(|x| x.fpm_idle).min();
        ps.fpm_listen_queue_max = samples.iter().filter_map(|x| x.fpm_listen_queue).max();
        // A listen queue of 1 with idle workers is only the instant between connect and accept;
        // out of idle workers means no idle worker at all.
        ps.fpm_out_of_idle = ps.fpm_idle_min == Some(0);
        if i == 2 && plan.len() == 3 {
            ps.recovery_s = recovery(run, p, heal_s);
            s.recovery_s = ps.recovery_s;
        }
        s.phases.push(ps);
    }
    let (att, sent) = s
        .phases
        .iter()
        .fold((0, 0), |a, x| (a.0 + x.upstream_attempts, a.1 + x.sent));
    s.amplification_whole_run = if sent > 0 {
        att as f64 / sent as f64
    } else {
        0.0
    };
    s.first_live_after_heal_s = run
        .checkout()
        .filter(|r| r.sent_s >= heal_s && r.outcome == Outcome::Live)
        .map(|r| r.sent_s - heal_s)
        .min_by(f64::total_cmp);
    s.fpm_max_active_whole_run = run.fpm_final.as_ref().map(|f| f.max_active);
    s.fpm_max_listen_queue_whole_run = run.fpm_final.as_ref().map(|f| f.max_listen_queue);
    s.fpm_out_of_idle_whole_run = s.phases.iter().any(|x| x.fpm_out_of_idle)
        || s.fpm_max_active_whole_run.is_some_and(|m| m >= p.workers);
    s.bins = bins(p, run, &levels);
    s
}

/// For each time all `capacity` slots were busy and one freed (within [from, to)): ms until the
/// next service started. Shows how long a freed slot idles when nobody waits for it.
fn free_slot_gaps(run: &VariantRun, capacity: u32, from: f64, to: f64) -> Vec<f64> {
    let mut ev: Vec<(f64, i32)> = Vec::new();
    for a in &run.attempts {
        if let (Some(s), Some(e)) = (a.start_s, a.end_s) {
            ev.push((s, 1));
            ev.push((e, -1));
        }
    }
    ev.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut level, mut freed, mut gaps) = (0i64, None::<f64>, Vec::new());
    for (t, k) in ev {
        if k < 0 {
            if level == capacity as i64 && t >= from && t < to {
                freed = Some(t);
            }
            level -= 1;
        } else {
            if let Some(f) = freed.take() {
                gaps.push((t - f) * 1000.0);
            }
            level += 1;
        }
    }
    gaps
}

/// Seconds from `heal_s` until the first good request sent from which the requests sent in
/// [t, t+2 s) are ≥ 95 % good; None if never. Each window starts at a good request, so the
/// system never counts as recovered before it served anything.
fn recovery(run: &VariantRun, p: &Params, heal_s: f64) -> Option<f64> {
    let mut c: Vec<(f64, bool)> = run
        .checkout()
        .filter(|r| r.scheduled_s >= heal_s)
        .map(|r| (r.scheduled_s, is_good(r, p.good_within_s)))
        .collect();
    c.sort_by(|a, b| a.0.total_cmp(&b.0));
    let end = p.total_secs();
    c.iter()
        .enumerate()
        .filter(|(_, (t, good))| *good && t + 2.0 <= end + 1e-9)
        .find(|(i, (t, _))| {
            let w = c[*i..].iter().take_while(|(u, _)| *u < t + 2.0);
            let (n, good) = w.fold((0, 0), |(n, g), (_, ok)| (n + 1, g + usize::from(*ok)));
            good as f64 >= 0.95 * n as f64
        })
        .map(|(_, (t, _))| t - heal_s)
}

fn bins(p: &Params, run: &VariantRun, levels: &[(f64, u32, u32)]) -> Vec<Bin> {
    let end = p.total_secs();
    let n = (end / BIN_S).ceil() as usize;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let (from, to) = (i as f64 * BIN_S, (i + 1) as f64 * BIN_S);
        let c = in_window(run.checkout(), from, to);
        let mut b = Bin {
            t_s: from,
            ..Default::default()
        };
        b.offered_rps = run
            .checkout()
            .filter(|r| r.scheduled_s >= from && r.scheduled_s < to)
            .count() as f64
            / BIN_S;
        b.goodput_rps = c.iter().filter(|r| is_good(r, p.good_within_s)).count() as f64 / BIN_S;
        b.fallback_rps = c
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Fallback(_)))
            .count() as f64
            / BIN_S;
        b.error_rps = c
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Error(_)))
            .count() as f64
            / BIN_S;
        let (bg, web) = run
            .attempts
            .iter()
            .filter(|a| a.arrival_s >= from && a.arrival_s < to)
            .fold((0u32, 0u32), |c, a| {
                if a.background {
                    (c.0 + 1, c.1)
                } else {
                    (c.0, c.1 + 1)
                }
            });
        b.upstream_attempts_rps = web as f64 / BIN_S;
        b.bg_attempts_rps = bg as f64 / BIN_S;
        (b.upstream_in_service_max, b.upstream_queue_max) = max_level_in(levels, from, to);
        // in flight = max of (service + queue) at any event in the bin.
        let start = levels.partition_point(|l| l.0 < from);
        let before = if start > 0 {
            levels[start - 1].1 + levels[start - 1].2
        } else {
            0
        };
        b.upstream_in_flight_max = levels[start..]
            .iter()
            .take_while(|l| l.0 < to)
            .map(|l| l.1 + l.2)
            .fold(before, u32::max);
        // /health over a 2 s window centred on the bin (a few samples per bin at 5/s).
        let mid = from + BIN_S / 2.0;
        let mut hl: Vec<f64> = in_window(run.health(), mid - 1.0, mid + 1.0)
            .iter()
            .map(|r| {
                if r.outcome == Outcome::Live {
                    r.latency_s.unwrap_or(0.0) * 1000.0
                } else {
                    f64::INFINITY
                }
            })
            .collect();
        b.health_p99_ms = percentile(&mut hl, 0.99);
        let samples: Vec<_> = run
            .samples
            .iter()
            .filter(|x| x.t_s >= from && x.t_s < to)
            .collect();
        b.fpm_busy_max = samples.iter().filter_map(|x| x.fpm_active).max();
        b.fpm_listen_queue_max = samples.iter().filter_map(|x| x.fpm_listen_queue).max();
        b.breaker = samples
            .iter()
            .filter_map(|x| x.breaker)
            .max_by_key(|s| match *s {
                "open" => 2,
                "half_open" => 1,
                _ => 0,
            });
        out.push(b);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loadgen::Page;
    use crate::upstream::UpstreamAttempt;

    fn params() -> Params {
        let mut p = Params::from_args(Vec::<String>::new()).unwrap();
        p.phase_secs = 10.0;
        p
    }

    fn checkout(t: f64, outcome: Outcome, latency: f64) -> Record {
        Record {
            page: Page::Checkout,
            scheduled_s: t,
            sent_s: t,
            latency_s: Some(latency),
            http_status: 200,
            outcome,
        }
    }

    #[test]
    fn percentile_is_nearest_rank() {
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&mut v, 0.99), Some(99.0));
        assert_eq!(percentile(&mut v, 0.5), Some(50.0));
        assert_eq!(percentile(&mut [7.0], 0.99), Some(7.0));
        assert_eq!(percentile(&mut [], 0.5), None);
    }

    #[test]
    fn upstream_levels_count_service_and_queue_and_carry_into_a_window() {
        let a = |arr: f64, start: Option<f64>, end: Option<f64>| UpstreamAttempt {
            arrival_s: arr,
            start_s: start,
            end_s: end,
            gone: false,
            status: Some(200),
            unserved: false,
            background: false,
            call: None,
        };
        let run = VariantRun {
            attempts: vec![
                a(1.0, Some(1.0), Some(5.0)),
                a(2.0, Some(2.0), Some(3.0)),
                // queued from 2.5 until the second frees its slot at 3.0 (capacity 2 here)
                a(2.5, Some(3.0), Some(4.0)),
            ],
            ..Default::default()
        };
        let levels = upstream_levels(&run);
        assert_eq!(max_level_in(&levels, 0.0, 10.0), (2, 1));
        // At 3.5 two are in service (the first and the third), set by events before the window.
        assert_eq!(max_level_in(&levels, 3.5, 3.9), (2, 0));
        // An end and a start at the same instant never show three in service.
        assert_eq!(max_level_in(&levels, 2.9, 3.1), (2, 1));
        // One slot: the third's arrival (queue 1) and the second's end (still 1) are over it,
        // of the 9 events.
        assert_eq!(queue_over_in(&levels, 0.0, 10.0, 0), (2, 9));
        assert_eq!(queue_over_in(&levels, 0.0, 10.0, 1), (0, 9));
    }

    /// With `--slow-fail-ratio 0.2`, a fifth of the slow upstream's slot time goes to 503s:
    /// the capacity the goodput goals take a share of is 80 % of slots / service time. Before,
    /// the whole 33.3/s: a goal no variant could meet, its miss blamed on the funnel's wait.
    #[test]
    fn a_slow_phase_failing_a_share_serves_that_share_fewer_live_answers() {
        let mut p = params();
        p.slow_fail_ratio = 0.2;
        let run = VariantRun {
            name: "resilient".into(),
            records: vec![checkout(11.0, Outcome::Live, 0.1)],
            switches_s: vec![10.0, 20.0],
            ..Default::default()
        };
        let s = summarize(&p, &run);
        let slow = 4.0 * 1000.0 / 120.0;
        assert!(
            (s.phases[1].capacity_rps - 0.8 * slow).abs() < 1e-9,
            "{}",
            s.phases[1].capacity_rps
        );
        assert!((s.phases[0].capacity_rps - 4.0 * 1000.0 / 20.0).abs() < 1e-9);
    }

    /// Background attempts count apart from the web's amplification; outage answers never
    /// show as queued or in service; calls are told apart by their request id.
    #[test]
    fn web_and_background_attempts_and_outage_answers_are_counted_apart() {
        let mut p = params();
        p.set_scenario(crate::scenario::Scenario::Mixed);
        let att = |t: f64, bg: bool, outage: bool, call: &str| UpstreamAttempt {
            arrival_s: t,
            start_s: (!outage).then_some(t),
            end_s: (!outage).then_some(t + 0.1),
            gone: false,
            status: Some(if outage { 503 } else { 200 }),
            unserved: outage,
            background: bg,
            call: Some(call.into()),
        };
        let run = VariantRun {
            name: "resilient".into(),
            records: vec![
                checkout(11.0, Outcome::Live, 0.1),
                checkout(12.0, Outcome::Live, 0.1),
            ],
            attempts: vec![
                att(11.0, false, false, "w-1"),
                att(11.2, false, true, "w-1"),
                att(12.0, false, true, "w-2"),
                att(12.5, true, false, "b-0-1"),
                att(12.55, true, false, "b-0-2"),
                att(12.9, true, false, "b-0-3"),
            ],
            switches_s: vec![10.0, 20.0],
            ..Default::default()
        };
        let s = summarize(&p, &run);
        let bad = &s.phases[1];
        assert_eq!(bad.phase, "slow+flood");
        assert_eq!(
            (bad.upstream_attempts, bad.bg_attempts, bad.outage_answers),
            (3, 3, 2)
        );
        assert_eq!(bad.web_calls_seen, 2);
        assert!(
            (bad.amplification - 1.5).abs() < 1e-9,
            "3 web attempts / 2 requests"
        );
        // Only the four served attempts ever held a slot; none queued.
        assert_eq!(
            (bad.upstream_max_in_service, bad.upstream_max_queue),
            (2, 0)
        );
    }

    #[test]
    fn recovery_is_the_first_good_request_that_starts_2s_with_95_percent_goodput() {
        let p = params();
        let heal: f64 = 20.0;
        let mut records = Vec::new();
        for i in 0..500 {
            let t = heal + i as f64 * 0.02;
            // One lone live answer early on: a window starting there is mostly bad.
            let good = t >= heal + 1.5 - 1e-9 || i == 10;
            records.push(checkout(
                t,
                if good {
                    Outcome::Live
                } else {
                    Outcome::Fallback("funnel_full".into())
                },
                0.02,
            ));
        }
        let run = VariantRun {
            records,
            ..Default::default()
        };
        let r = recovery(&run, &p, heal).unwrap();
        // Not before the first request of the good run: a window starting on a bad request
        // (≥ 95 % would let its first 0.1 s be bad) would call it recovered before it served.
        assert!((r - 1.5).abs() < 1e-9, "recovery {r}");
        // Live but slower than good_within does not count as recovered.
        let slow: Vec<Record> = (0..500)
            .map(|i| checkout(heal + i as f64 * 0.02, Outcome::Live, 2.0))
            .collect();
        let run = VariantRun {
            records: slow,
            ..Default::default()
        };
        assert_eq!(recovery(&run, &p, heal), None);
    }
}
