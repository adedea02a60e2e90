//! The funnel (bulkhead): at most `limit` attempts in flight per name across every process
//! of the host, failing fast when full (no queueing).
//!
//! State is one 64-bit mask per name (bit i = slot i counted; in flight = popcount) plus one
//! word per slot saying who owns it, in which phase and until when ([`slot_word`]). The
//! lock-free protocol that keeps the count exact under every interleaving, and under a
//! process killed or stopped at any step, is in [`protocol`]; `model_check` (tests) explores
//! every schedule of small scenarios against it.
//!
//! Reserved slots: interactive (web) callers may fill all `limit` slots; background (CLI)
//! callers only `limit - reserve`, so a queue worker can never take the last slots a user
//! is waiting for. One counter, two caps: no separate token kinds. This is the default
//! ("interactive first"): when web demand exceeds the limit, web callers hold every slot and
//! background callers get none.
//!
//! `share` (opt-in, needs a reserve): under contention each side keeps its part, web callers
//! the `reserve` slots and background callers the other `limit − reserve`; without it either
//! side may use what the other leaves. Background callers claim only slots `reserve..`, at
//! most `limit − reserve` of them. A background caller refused stores "until now + 100 ms"
//! ([`BACKGROUND_DEMAND_MS`]) in the entry; while that lies ahead, web callers claim only
//! slots `0..reserve`, at most `reserve` of them, and otherwise any slot (lowest first, so
//! they fill the reserve first). Web slots taken above the reserve before the demand came are
//! not revoked: they come back to the background as they are released. The demand is a time,
//! not a count of waiters, so a killed worker's lapses by itself. Each acquire checks its
//! [`protocol::Allowance`] (the total cap, and at most `within` among its slots) on the very
//! mask value its counting CAS replaces, so both bounds are as exact as the total.
//!
//! A learned limit (`'limit' => 'auto'`, [`crate::adaptive_limit`]): the slots are those of
//! `max`, and the cap is read once per acquire from the name's learned limit (one load).
//! The protocol counts against whatever cap it is given, so the count stays exact; what a
//! falling limit cannot do is revoke leases already held. The bound: **every lease was counted
//! while fewer than the cap its acquirer read were in flight**, so in flight never exceeds the
//! highest cap read by a current holder: the limit in force when the oldest lease still held
//! was taken, or one read an instant before a drop by an acquire still in progress. After the
//! limit falls from `L_old` to `L_new`, no acquire that starts later succeeds until fewer than
//! `L_new` are in flight; in flight only drains, from at most `L_old`, as leases end.
//! The reserve is kept in full while the limit is at least twice it; below, web callers keep
//! half the slots: background callers may fill `L − min(reserve, ⌊L/2⌋)`, and with `share`
//! the split is at `R' = min(reserve, ⌊L/2⌋)`, at least 1 (background: slots `R'..max`, at most
//! `L − R'`; at `L = 1` that is nothing, so either side takes the one slot when it is free:
//! a refused caller teaches the limit nothing, and background callers alone would never raise
//! it again).

#[cfg(test)]
mod model_check;
mod protocol;
mod slot_word;

use crate::adaptive_limit::{AdaptiveConfig, AdaptiveLimit, AdaptiveStats, Sample};
use crate::layout::{Entry, MAX_FUNNEL_LIMIT};
use crate::pause::run;
use crate::{validate, Error, Segment};
use protocol::{Actor, ThisProcess};
use slot_word::SlotWord;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// How long a background caller's refusal keeps web callers of a `share` funnel to the
/// reserved slots.
pub const BACKGROUND_DEMAND_MS: u64 = 100;

/// A funnel's settings. The fields are private and [`FunnelConfig::new`] is the only way to
/// make one, so a limit of 0 or above [`MAX_FUNNEL_LIMIT`], a reserve that leaves background
/// callers no slot, or a zero lease cannot exist.
///
/// ```compile_fail
/// // No struct literal outside the crate: a reserve >= limit cannot be written down.
/// let c = resilient_core::FunnelConfig { limit: 2, reserve: 2, lease: std::time::Duration::ZERO, adaptive: None, share: false };
/// ```
/// ```
/// # use std::time::Duration;
/// use resilient_core::FunnelConfig;
/// assert!(FunnelConfig::new(2, 2, Duration::from_secs(1)).is_err());
/// assert!(FunnelConfig::new(2, 1, Duration::ZERO).is_err());
/// assert_eq!(FunnelConfig::new(2, 1, Duration::from_secs(1)).unwrap().reserve(), 1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FunnelConfig {
    limit: u32,
    reserve: u32,
    lease: Duration,
    /// A learned limit within these bounds (`limit` is then its `max`).
    adaptive: Option<AdaptiveConfig>,
    /// Under contention each side keeps its part (see the module doc); needs a reserve.
    share: bool,
}

impl FunnelConfig {
    /// `limit` in `1..=64`; `reserve < limit` (slots only web callers may use); `lease`: how
    /// long a slot outlives a holder that never gives it back, positive and at most a year.
    pub fn new(limit: u32, reserve: u32, lease: Duration) -> Result<Self, Error> {
        if !(1..=MAX_FUNNEL_LIMIT).contains(&limit) {
            return Err(Error::invalid_argument(
                "limit",
                format!("must be between 1 and {MAX_FUNNEL_LIMIT}, got {limit}"),
            ));
        }
        if reserve >= limit {
            return Err(Error::invalid_argument(
                "reserve",
                format!(
                    "must be between 0 and limit - 1 ({}), got {reserve}",
                    limit - 1
                ),
            ));
        }
        let lease = validate::positive_duration("lease", lease)?;
        Ok(FunnelConfig {
            limit,
            reserve,
            lease,
            adaptive: None,
            share: false,
        })
    }

    /// `share`: while background callers are refused, web callers keep to the `reserve`
    /// slots and background callers get the others (see the module doc). Needs `reserve ≥ 1`.
    pub fn with_share(mut self, share: bool) -> Result<Self, Error> {
        if share && self.reserve == 0 {
            return Err(Error::invalid_argument(
                "share",
                "needs a reserve ≥ 1: the slots web callers keep",
            ));
        }
        self.share = share;
        Ok(self)
    }

    pub fn share(&self) -> bool {
        self.share
    }

    /// A limit learned within `bounds` (`'limit' => 'auto'`); `reserve < bounds.max()`.
    pub fn adaptive(bounds: AdaptiveConfig, reserve: u32, lease: Duration) -> Result<Self, Error> {
        let mut config = FunnelConfig::new(bounds.max(), reserve, lease)?;
        config.adaptive = Some(bounds);
        Ok(config)
    }

    /// The learned limit's bounds, when the limit is learned.
    pub fn adaptive_bounds(&self) -> Option<AdaptiveConfig> {
        self.adaptive
    }

    /// The fixed limit, or the learned limit's `max`.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    pub fn reserve(&self) -> u32 {
        self.reserve
    }

    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// The lease in whole milliseconds, at least 1.
    #[inline]
    pub fn lease_ms(&self) -> u64 {
        (self.lease.as_millis() as u64).max(1)
    }
}

/// Identifies one held slot; `Copy` so a binding can keep a registry for request end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseId {
    pub(crate) entry: usize,
    pub(crate) slot: u32,
    pub(crate) word: u64,
    pub(crate) expires_ms: u64,
}

impl LeaseId {
    /// When this lease expires, in monotonic ms.
    pub fn expires_at_ms(&self) -> u64 {
        self.expires_ms
    }
    pub fn slot(&self) -> u32 {
        self.slot
    }
    /// The process that acquired it.
    pub fn holder_pid(&self) -> u32 {
        SlotWord(self.word).pid()
    }
}

/// A named funnel bound to a segment.
#[derive(Clone)]
pub struct Funnel {
    seg: Arc<Segment>,
    entry: usize,
    config: FunnelConfig,
    adaptive: Option<AdaptiveLimit>,
}

impl Funnel {
    pub fn new(seg: Arc<Segment>, name: &str, config: FunnelConfig) -> Result<Self, Error> {
        let entry = seg.entry_index(name)?;
        let adaptive = match config.adaptive {
            Some(bounds) => Some(AdaptiveLimit::new(seg.clone(), name, bounds)?),
            None => None,
        };
        Ok(Funnel {
            seg,
            entry,
            config,
            adaptive,
        })
    }

    pub fn config(&self) -> FunnelConfig {
        self.config
    }

    /// The limit now: the fixed one, or the learned one's whole slots (one load).
    #[inline]
    pub fn current_limit(&self) -> u32 {
        match &self.adaptive {
            Some(a) => a.cap(),
            None => self.config.limit,
        }
    }

    /// How many slots a caller may fill in all: all of them when interactive, `limit - reserve`
    /// when in the background (for a learned limit `L`: `L − min(reserve, ⌊L/2⌋)`). Read it
    /// once per acquire. (With `share` the background's bound is on its own slots, which only
    /// [`Funnel::admit`] applies.)
    pub fn cap(&self, background: bool) -> u32 {
        let limit = self.current_limit();
        if !background {
            return limit;
        }
        limit - self.reserve_for(limit)
    }

    /// The reserve in force under `limit`: the configured one, or for a learned limit at most
    /// half of it.
    fn reserve_for(&self, limit: u32) -> u32 {
        match self.adaptive {
            Some(_) => self.config.reserve.min(limit / 2),
            None => self.config.reserve,
        }
    }

    /// What a caller may take now. Without `share`: web callers any slot up to the limit `L`,
    /// background callers up to `L − R'` (one counter, two caps). With `share`: background
    /// callers the slots `R'..` (at most `L − R'` of them, at least 1), web callers every slot,
    /// or only `0..R'` while a background caller was refused within the last
    /// [`BACKGROUND_DEMAND_MS`] (one load).
    ///
    /// Background callers take slots `R'..` without `share` too. It admits exactly the same
    /// callers (fewer than `L − R'` held leaves a free slot at `R'` or above), and when one
    /// name is used both with and without `share` (a queue middleware and a client configured
    /// apart), they never sit in the slots the web keeps under demand.
    #[inline]
    fn allowance(&self, background: bool, now_ms: u64) -> protocol::Allowance {
        let limit = self.current_limit();
        let mut reserve = self.reserve_for(limit);
        if self.config.share {
            // A learned limit of 1 leaves `R' = 0`: web callers still keep that one slot under
            // background demand, or it would shut them out entirely.
            reserve = reserve.max(1).min(limit);
        }
        let all = protocol::slots_below(self.config.limit);
        let within = |slots: u64, within: u32| protocol::Allowance {
            cap: limit,
            slots,
            within,
        };
        match (self.config.share, background) {
            (false, false) => protocol::Allowance::any(limit),
            (false, true) => protocol::Allowance {
                cap: limit - reserve,
                slots: all & !protocol::slots_below(reserve),
                within: limit - reserve,
            },
            // At a learned limit of 1 the background's part would be nothing: it takes the one
            // slot when it is free, as the web does. A refused caller sends nothing, so only
            // the samples of those let in can raise the limit again (a queue worker's host has
            // no others).
            (true, true) => within(
                all & !protocol::slots_below(reserve),
                (limit - reserve).max(1),
            ),
            (true, false) if self.background_wanted(now_ms) => {
                within(protocol::slots_below(reserve), reserve)
            }
            (true, false) => within(all, limit),
        }
    }

    /// What [`Funnel::admit`] lets such a caller hold now, and whether a web caller is kept to
    /// the reserve by background demand (`share`): for messages that say why a caller was
    /// refused.
    pub fn allowed(&self, background: bool, now_ms: u64) -> (u32, bool) {
        let a = self.allowance(background, now_ms);
        let kept = self.config.share && !background && self.background_wanted(now_ms);
        (a.cap.min(a.within), kept)
    }

    /// Why such a caller is refused now, in numbers, for its message: `7 of 10 slots in
    /// flight; background callers may hold 7, the rest is kept for web callers`.
    pub fn why_full(&self, background: bool, now_ms: u64) -> String {
        let (may_hold, kept_to_reserve) = self.allowed(background, now_ms);
        let held = self.in_flight(now_ms);
        let limit = self.current_limit();
        let why = if background && may_hold < limit {
            format!("background callers may hold {may_hold}, the rest is kept for web callers")
        } else if background {
            // No reserve (none set, or one scaled to nothing at a small limit): none kept.
            format!("background callers may hold {may_hold}")
        } else if kept_to_reserve {
            format!(
                "background callers were refused just now, so web callers keep to their {may_hold} reserved"
            )
        } else {
            format!("web callers may hold {may_hold}")
        };
        if held > limit {
            // The name's slots are one set, and another user of it has a higher limit.
            return format!(
                "{held} slots in flight, over this caller's limit of {limit} (a user of the name with a higher limit holds them); {why}"
            );
        }
        format!("{held} of {limit} slots in flight; {why}")
    }

    /// Whether a background caller of this `share` funnel was refused recently.
    fn background_wanted(&self, now_ms: u64) -> bool {
        let e = self.seg.entry(self.entry);
        now_ms < e.funnel_background_wanted_until_ms.load(Ordering::Acquire)
    }

    /// Takes a slot for a web (`background` false) or background caller, as the config says
    /// (reserve, `share`, a learned limit); never waits. `None` means full for that caller; a
    /// background caller refused with `share` makes web callers keep to the reserved slots
    /// for the next [`BACKGROUND_DEMAND_MS`].
    #[inline]
    pub fn admit(&self, background: bool, now_ms: u64, lease_ms: u64) -> Option<Lease> {
        let got = self.acquire_within(self.allowance(background, now_ms), now_ms, lease_ms);
        if got.is_none() && background && self.config.share {
            self.seg
                .entry(self.entry)
                .funnel_background_wanted_until_ms
                .fetch_max(
                    now_ms.saturating_add(BACKGROUND_DEMAND_MS),
                    Ordering::AcqRel,
                );
        }
        got
    }

    /// Teaches a learned limit how an attempt ended (nothing for a fixed limit).
    pub fn record(&self, sample: Sample, now_ms: u64) {
        if let Some(a) = &self.adaptive {
            a.record(sample, now_ms);
        }
    }

    /// What a learned limit has learned; `None` for a fixed limit.
    pub fn adaptive_stats(&self) -> Option<AdaptiveStats> {
        self.adaptive.as_ref().map(AdaptiveLimit::stats)
    }

    /// What the name's learned limit has learned, whatever this handle's config (a fixed
    /// funnel of the same name can watch it); `None` before any attempt taught it.
    pub fn learned(&self) -> Option<AdaptiveStats> {
        crate::adaptive_limit::learned(&self.seg.entry(self.entry).adaptive)
    }

    /// Slots counted now whose lease has not run out at `now_ms`, without reclaiming anything
    /// (read-only: a load of the mask, and of each counted slot's word and expiry). A slot
    /// left to lapse ([`Lease::hold_until`]) stops counting at its time, although its bit stays
    /// set until an acquire at the cap reclaims it: a learned limit's samples must not see it.
    pub fn counted(&self, now_ms: u64) -> u32 {
        let e = self.seg.entry(self.entry);
        let mut mask = e.funnel_mask.load(Ordering::Acquire);
        let mut n = 0;
        while mask != 0 {
            let slot = &e.funnel_slots[mask.trailing_zeros() as usize];
            mask &= mask - 1;
            let held =
                SlotWord(slot.word.load(Ordering::Acquire)).phase() == slot_word::Phase::Held;
            if !held || slot.expires_ms.load(Ordering::Acquire) > now_ms {
                n += 1;
            }
        }
        n
    }

    /// Slots of this name held on this host now, as a scrape shows them ([`held_now`]).
    pub fn held_now(&self, now_ms: u64) -> Option<u32> {
        held_now(self.seg.entry(self.entry), now_ms)
    }

    /// Takes a slot if fewer than `cap` are held; never waits. `None` means full. The bare
    /// counter, for a caller that chose its own cap: [`Funnel::admit`] applies the config
    /// (reserve, `share`, a learned limit).
    pub fn try_acquire(&self, cap: u32, now_ms: u64) -> Option<Lease> {
        self.try_acquire_for(cap, now_ms, self.config.lease_ms())
    }

    /// As [`Funnel::try_acquire`] with a lease length chosen by the caller (e.g. 2 × the
    /// attempt's timeout).
    pub fn try_acquire_for(&self, cap: u32, now_ms: u64, lease_ms: u64) -> Option<Lease> {
        let allow = protocol::Allowance::any(cap.min(self.config.limit));
        self.acquire_within(allow, now_ms, lease_ms)
    }

    fn acquire_within(
        &self,
        allow: protocol::Allowance,
        now_ms: u64,
        lease_ms: u64,
    ) -> Option<Lease> {
        // Clamped to the longest lease a config allows: expiries stay far from overflow.
        let lease_ms = lease_ms.clamp(1, (validate::MAX_SECONDS * 1000.0) as u64);
        let got = run(protocol::acquire(
            self.seg.entry(self.entry),
            &ThisProcess,
            allow,
            self.config.limit,
            now_ms,
            lease_ms,
        ))?;
        Some(Lease {
            seg: self.seg.clone(),
            id: Some(LeaseId {
                entry: self.entry,
                slot: got.slot,
                word: got.held.0,
                expires_ms: got.expires_ms,
            }),
        })
    }

    /// Slots held now, after reclaiming those of dead processes and expired leases.
    pub fn in_flight(&self, now_ms: u64) -> u32 {
        let e = self.seg.entry(self.entry);
        run(protocol::reclaim(
            e,
            &ThisProcess,
            self.config.limit,
            now_ms,
        ));
        e.funnel_mask.load(Ordering::Acquire).count_ones()
    }
}

/// Frees every slot of `e`'s funnel, for a file no process maps ([`Segment`]'s
/// `forget_processes`): their holders are gone, and no lease of theirs is given back later.
pub(crate) fn forget_holders(e: &Entry) {
    e.funnel_mask.store(0, Ordering::Release);
    for slot in &e.funnel_slots {
        slot.word.store(0, Ordering::Relaxed);
        slot.expires_ms.store(0, Ordering::Relaxed);
    }
}

/// The slots of `e`'s funnel held now: counted, by a live process, with a lease that has not run
/// out at `now_ms`; those of dead holders and lapsed leases are what the next reclaim frees, so
/// not counted although their bits may still be set. Read-only (the mask, then each counted
/// slot's word and expiry, and `kill(pid, 0)` for each held one): for a scrape (the metrics'
/// `funnel_in_flight`), which a process killed mid-attempt must not leave wrong, as it leaves
/// the attempts' own gauge. `None` when no funnel of that name was ever used on this host (its
/// words are all zero until a first acquire).
pub(crate) fn held_now(e: &Entry, now_ms: u64) -> Option<u32> {
    let mut mask = e.funnel_mask.load(Ordering::Acquire);
    if mask == 0
        && e.funnel_slots
            .iter()
            .all(|s| s.word.load(Ordering::Relaxed) == 0)
    {
        return None;
    }
    let mut n = 0;
    while mask != 0 {
        let slot = &e.funnel_slots[mask.trailing_zeros() as usize];
        mask &= mask - 1;
        let word = SlotWord(slot.word.load(Ordering::Acquire));
        let expires_ms = || slot.expires_ms.load(Ordering::Acquire);
        let lapsed = protocol::lapsed(word, true, expires_ms, now_ms, |pid| ThisProcess.alive(pid));
        n += u32::from(!lapsed);
    }
    Some(n)
}

/// A held slot. Released by [`Lease::release`] or on drop (RAII).
pub struct Lease {
    seg: Arc<Segment>,
    id: Option<LeaseId>,
}

impl Lease {
    #[inline]
    pub fn id(&self) -> LeaseId {
        self.id.expect("a live Lease always has an id")
    }

    /// Gives the slot back. False when it had already been reclaimed (it expired, or was
    /// released by request-end cleanup).
    pub fn release(mut self) -> bool {
        self.take_and_release()
    }

    /// Keeps the slot counted until `until_ms` (monotonic ms; never later than the lease's
    /// own expiry), then lets it lapse: the next acquire that finds the funnel full reclaims
    /// it. For an attempt abandoned while the upstream may still be working on it. Returns the
    /// lease's id: [`Segment::release`] of it still frees the slot at once.
    pub fn hold_until(mut self, until_ms: u64) -> LeaseId {
        let id = self.id.take().expect("a live Lease always has an id");
        if !self.seg.expire_at(id, until_ms) {
            self.seg.release(id);
        }
        id
    }

    /// Forgets the slot without releasing it (the binding's registry releases it later).
    pub fn into_id(mut self) -> LeaseId {
        self.id.take().expect("a live Lease always has an id")
    }

    fn take_and_release(&mut self) -> bool {
        match self.id.take() {
            Some(id) => self.seg.release(id),
            None => false,
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.take_and_release();
    }
}

/// Moves the expiry of lease `id` to `until_ms` if that is sooner and the lease is still
/// the slot's. Only a holder writes its slot's expiry, and a later lease of the same slot
/// expires strictly later than this one did (it was taken at or after that expiry, for a
/// lease of at least 1 ms), so the compare-and-swap from this lease's own expiry cannot
/// touch another lease's. False when the lease is no longer the slot's.
pub(crate) fn expire_slot_at(e: &Entry, id: LeaseId, until_ms: u64) -> bool {
    let slot = &e.funnel_slots[id.slot as usize];
    // A lease released early (request-end cleanup) and the slot taken again with the same
    // expiry is the one case the expiry alone cannot tell apart: the word can.
    if slot.word.load(Ordering::Acquire) != id.word {
        return false;
    }
    let until = until_ms.min(id.expires_ms);
    slot.expires_ms
        .compare_exchange(id.expires_ms, until, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
}

/// Releases `id` if this process still owns it (see [`Segment::release`]).
pub(crate) fn release_slot(e: &Entry, id: LeaseId) -> bool {
    run(protocol::release(
        e,
        &ThisProcess,
        id.slot,
        SlotWord(id.word),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(tag: &str) -> (Arc<Segment>, std::path::PathBuf) {
        let p =
            std::env::temp_dir().join(format!("resilient-funnel-{tag}-{}.shm", std::process::id()));
        let _ = std::fs::remove_file(&p);
        (Arc::new(Segment::open(&p, 16).unwrap()), p)
    }

    fn funnel(seg: &Arc<Segment>, limit: u32, reserve: u32) -> Funnel {
        Funnel::new(
            seg.clone(),
            "x",
            FunnelConfig::new(limit, reserve, Duration::from_secs(10)).unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn limit_is_exact_and_release_frees() {
        let (s, p) = seg("limit");
        let f = funnel(&s, 3, 0);
        let a = f.try_acquire(3, 1000).unwrap();
        let b = f.try_acquire(3, 1000).unwrap();
        let c = f.try_acquire(3, 1000).unwrap();
        assert!(f.try_acquire(3, 1000).is_none());
        assert_eq!(f.in_flight(1000), 3);
        assert!(b.release());
        assert_eq!(f.in_flight(1000), 2);
        let d = f.try_acquire(3, 1000).unwrap();
        assert_eq!(d.id().slot(), 1, "the freed slot is reused");
        drop((a, c, d));
        assert_eq!(f.in_flight(1000), 0);
        std::fs::remove_file(p).unwrap();
    }

    /// The name's slots are one set and the limit is the caller's: a caller with a lower
    /// limit than another user of the name is told why it finds more held than its limit
    /// (before: "3 of 2 slots in flight").
    #[test]
    fn a_caller_under_a_higher_limits_holders_is_told_so() {
        let (s, p) = seg("two-limits");
        let (high, low) = (funnel(&s, 4, 0), funnel(&s, 2, 0));
        let _held: Vec<_> = (0..3).map(|_| high.try_acquire(4, 0).unwrap()).collect();
        assert!(low.try_acquire(2, 0).is_none());
        assert_eq!(
            low.why_full(false, 0),
            "3 slots in flight, over this caller's limit of 2 (a user of the name with a higher limit holds them); web callers may hold 2"
        );
        assert_eq!(
            high.why_full(false, 0),
            "3 of 4 slots in flight; web callers may hold 4"
        );
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn background_callers_leave_the_reserve() {
        let (s, p) = seg("reserve");
        let f = funnel(&s, 3, 1);
        assert_eq!(f.cap(true), 2);
        let _a = f.try_acquire(f.cap(true), 0).unwrap();
        let _b = f.try_acquire(f.cap(true), 0).unwrap();
        assert!(
            f.try_acquire(f.cap(true), 0).is_none(),
            "background may not take the reserved slot"
        );
        let _c = f.try_acquire(f.cap(false), 0).unwrap();
        assert!(f.try_acquire(f.cap(false), 0).is_none());
        std::fs::remove_file(p).unwrap();
    }

    fn shared(seg: &Arc<Segment>, name: &str, limit: u32, reserve: u32) -> Funnel {
        let config = FunnelConfig::new(limit, reserve, Duration::from_secs(10))
            .unwrap()
            .with_share(true)
            .unwrap();
        Funnel::new(seg.clone(), name, config).unwrap()
    }

    const LEASE: u64 = 10_000;

    #[test]
    fn without_share_the_web_may_take_every_slot_and_the_background_gets_none() {
        let (s, p) = seg("noshare");
        let f = funnel(&s, 4, 2);
        let t = 1000;
        let mut web: Vec<Lease> = (0..4).map(|_| f.admit(false, t, LEASE).unwrap()).collect();
        assert!(f.admit(false, t, LEASE).is_none());
        assert!(f.admit(true, t, LEASE).is_none());
        web.truncate(2);
        let e = s.entry(f.entry);
        assert_eq!(
            e.funnel_background_wanted_until_ms.load(Ordering::SeqCst),
            0
        );
        let again: Vec<Lease> = (0..2).map(|_| f.admit(false, t, LEASE).unwrap()).collect();
        assert_eq!(
            f.in_flight(t),
            4,
            "web refills the slots at once: interactive first"
        );
        drop((web, again));
        let bg: Vec<Lease> = (0..2).map(|_| f.admit(true, t, LEASE).unwrap()).collect();
        assert!(
            f.admit(true, t, LEASE).is_none(),
            "background: limit − reserve"
        );
        let w: Vec<Lease> = (0..2).map(|_| f.admit(false, t, LEASE).unwrap()).collect();
        assert!(f.admit(false, t, LEASE).is_none());
        drop((bg, w));
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn with_share_each_side_keeps_its_part_under_contention() {
        let (s, p) = seg("share");
        let f = shared(&s, "share", 4, 2);
        let e = s.entry(f.entry);
        let t = 1000;
        let mut web: Vec<Lease> = (0..4).map(|_| f.admit(false, t, LEASE).unwrap()).collect();
        assert!(f.admit(false, t, LEASE).is_none(), "4 of 4");
        assert!(f.admit(true, t, LEASE).is_none(), "background refused…");
        assert_eq!(
            e.funnel_background_wanted_until_ms.load(Ordering::SeqCst),
            t + BACKGROUND_DEMAND_MS,
            "…and its demand recorded"
        );
        // The web gives back its two unreserved slots (2 and 3).
        let high = web.split_off(2);
        assert_eq!(
            high.iter().map(|l| l.id().slot()).collect::<Vec<_>>(),
            [2, 3]
        );
        drop(high);
        assert!(
            f.admit(false, t + 10, LEASE).is_none(),
            "web keeps to slots 0..2 while the background wants the others"
        );
        let bg: Vec<Lease> = (0..2)
            .map(|_| f.admit(true, t + 10, LEASE).unwrap())
            .collect();
        assert_eq!(bg.iter().map(|l| l.id().slot()).collect::<Vec<_>>(), [2, 3]);
        drop(web.pop());
        assert!(
            f.admit(true, t + 20, LEASE).is_none(),
            "a third background caller: at most limit − reserve, even with a reserved slot free"
        );
        let until = t + 20 + BACKGROUND_DEMAND_MS;
        assert_eq!(
            e.funnel_background_wanted_until_ms.load(Ordering::SeqCst),
            until
        );
        let w = f
            .admit(false, t + 20, LEASE)
            .expect("web takes its reserved slot back");
        assert_eq!(w.id().slot(), 1);
        drop((w, bg));
        assert!(
            f.admit(false, until - 1, LEASE)
                .is_some_and(|a| f.admit(false, until - 1, LEASE).is_none() && a.release()),
            "one reserved slot free, the unreserved ones idle but kept for the background"
        );
        // No background refusal for 100 ms: the web may use any free slot again.
        let all: Vec<Lease> = (0..3)
            .map(|_| f.admit(false, until, LEASE).unwrap())
            .collect();
        assert_eq!(f.in_flight(until), 4);
        drop((web, all));
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn with_share_and_no_contention_either_side_uses_what_the_other_leaves() {
        let (s, p) = seg("idle");
        let f = shared(&s, "idle", 4, 2);
        let bg: Vec<Lease> = (0..2).map(|_| f.admit(true, 5, LEASE).unwrap()).collect();
        assert!(
            f.admit(true, 5, LEASE).is_none(),
            "background: at most limit − reserve"
        );
        drop(bg);
        let web: Vec<Lease> = (0..4)
            .map(|_| f.admit(false, 500, LEASE).unwrap())
            .collect();
        assert_eq!(
            f.in_flight(500),
            4,
            "the demand lapsed: web may fill every slot"
        );
        drop(web);
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn with_share_a_learned_limit_splits_at_the_reserve_it_keeps() {
        let (s, p) = seg("ashare");
        let bounds = AdaptiveConfig::new(1, 16, 8).unwrap();
        let config = FunnelConfig::adaptive(bounds, 3, Duration::from_secs(10))
            .unwrap()
            .with_share(true)
            .unwrap();
        let f = Funnel::new(s.clone(), "ashare", config).unwrap();
        learn(&f, 4.0);
        let t = 1000;
        // L = 4, R' = min(3, 2) = 2: the web fills 4, the background is refused.
        let mut web: Vec<Lease> = (0..4).map(|_| f.admit(false, t, LEASE).unwrap()).collect();
        assert!(
            f.admit(false, t, LEASE).is_none(),
            "the learned limit, not max"
        );
        assert!(f.admit(true, t, LEASE).is_none());
        web.truncate(2);
        assert!(f.admit(false, t, LEASE).is_none(), "web keeps to 0..2");
        let bg: Vec<Lease> = (0..2).map(|_| f.admit(true, t, LEASE).unwrap()).collect();
        assert!(f.admit(true, t, LEASE).is_none(), "B = L − R' = 2");
        assert_eq!(f.in_flight(t), 4);
        drop((web, bg));
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn with_share_a_learned_limit_of_one_is_shared() {
        let (s, p) = seg("ashare1");
        let bounds = AdaptiveConfig::new(1, 16, 8).unwrap();
        let config = FunnelConfig::adaptive(bounds, 2, Duration::from_secs(10))
            .unwrap()
            .with_share(true)
            .unwrap();
        let f = Funnel::new(s.clone(), "ashare1", config).unwrap();
        learn(&f, 1.0);
        let t = 1000;
        // L = 1: R' = min(2, 0) = 0, kept at 1 with share; the background's part would be
        // nothing, so it may take the one slot when free.
        let bg = f.admit(true, t, LEASE).expect("the one slot is free");
        assert!(f.admit(false, t, LEASE).is_none(), "L = 1");
        assert!(f.admit(true, t, LEASE).is_none(), "L = 1: marks demand");
        drop(bg);
        let web = f
            .admit(false, t, LEASE)
            .expect("background demand never shuts the web out of the one slot");
        assert_eq!(web.id().slot(), 0, "the reserve");
        assert!(f.admit(true, t, LEASE).is_none(), "L = 1");
        drop(web);
        std::fs::remove_file(p).unwrap();
    }

    /// A queue worker's host (background callers only) after an outage left the learned limit
    /// at 1. A refused caller sends nothing and teaches nothing: were the one slot the web's,
    /// every job would fail from then on, the upstream healthy or not.
    #[test]
    fn with_share_background_callers_alone_at_a_learned_limit_of_one_raise_it() {
        let (s, p) = seg("ashare1bg");
        let bounds = AdaptiveConfig::new(1, 16, 8).unwrap();
        let config = FunnelConfig::adaptive(bounds, 2, Duration::from_secs(10))
            .unwrap()
            .with_share(true)
            .unwrap();
        let f = Funnel::new(s.clone(), "ashare1bg", config).unwrap();
        learn(&f, 1.0);
        let healthy = Sample {
            latency_us: 20_000,
            drop: false,
            deadline_cut: false,
            inflight: 1,
        };
        let (mut t, mut refused) = (1_000, 0);
        for _ in 0..100 {
            match f.admit(true, t, LEASE) {
                Some(lease) => {
                    t += 20;
                    f.record(healthy, t);
                    drop(lease);
                }
                None => {
                    refused += 1;
                    t += 20;
                }
            }
        }
        assert_eq!(refused, 0, "the one slot is free and nobody else wants it");
        assert!(f.current_limit() >= 2, "{:?}", f.adaptive_stats());
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn a_user_of_the_name_without_share_keeps_its_background_callers_out_of_the_reserve() {
        // One name, two configurations (a queue middleware without `share`, a client with it):
        // the plain one's background callers must not sit in the slots the web keeps under
        // demand, or the web ends up with none.
        let (s, p) = seg("mixshare");
        let plain = Funnel::new(
            s.clone(),
            "mixshare",
            FunnelConfig::new(4, 2, Duration::from_secs(10)).unwrap(),
        )
        .unwrap();
        let f = shared(&s, "mixshare", 4, 2);
        let t = 1000;
        let plain_bg: Vec<Lease> = (0..2)
            .map(|_| plain.admit(true, t, LEASE).unwrap())
            .collect();
        assert!(plain.admit(true, t, LEASE).is_none(), "limit − reserve");
        let web: Vec<Lease> = (0..2).map(|_| f.admit(false, t, LEASE).unwrap()).collect();
        assert!(f.admit(true, t, LEASE).is_none(), "full: marks demand");
        drop(web);
        assert!(
            f.admit(true, t, LEASE).is_none(),
            "the background's part is held by the plain user's background callers"
        );
        let w = f
            .admit(false, t, LEASE)
            .expect("the web keeps its reserved slots");
        assert!(
            plain_bg.iter().all(|l| l.id().slot() >= 2),
            "background callers without share take slots above the reserve too"
        );
        drop((w, plain_bg));
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn share_needs_a_reserve() {
        let config = FunnelConfig::new(4, 0, Duration::from_secs(1)).unwrap();
        let err = config.with_share(true).unwrap_err();
        assert_eq!(err.argument(), Some("share"));
        assert_eq!(
            err.to_string(),
            "share: needs a reserve ≥ 1: the slots web callers keep"
        );
        assert!(!config.with_share(false).unwrap().share());
        let ok = FunnelConfig::new(4, 1, Duration::from_secs(1)).unwrap();
        assert!(ok.with_share(true).unwrap().share());
        assert!(!ok.share(), "off by default");
    }

    #[test]
    fn expired_lease_is_reclaimed_and_its_late_release_is_harmless() {
        let (s, p) = seg("expire");
        let f = funnel(&s, 1, 0);
        let a = f.try_acquire_for(1, 1000, 500).unwrap();
        assert!(f.try_acquire(1, 1499).is_none());
        let b = f
            .try_acquire(1, 1500)
            .expect("expired lease reclaimed at 1500");
        assert!(!a.release(), "the old holder learns its lease was lost");
        assert_eq!(
            f.in_flight(1500),
            1,
            "and does not free the new holder's slot"
        );
        drop(b);
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn a_held_lease_stays_counted_until_its_time_then_lapses() {
        let (s, p) = seg("hold");
        let f = funnel(&s, 1, 0);
        let id = f.try_acquire_for(1, 1000, 10_000).unwrap().hold_until(1300);
        assert_eq!(f.in_flight(1299), 1);
        assert!(f.try_acquire(1, 1299).is_none(), "still counted at 1299");
        let b = f
            .try_acquire(1, 1300)
            .expect("lapsed at 1300: the next acquire reclaims it");
        assert!(!s.release(id), "the held lease is gone");
        assert_eq!(f.in_flight(1300), 1, "and its id does not free the new one");
        drop(b);
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn a_lapsed_lease_is_no_longer_counted_before_it_is_reclaimed() {
        let (s, p) = seg("hold-counted");
        let f = funnel(&s, 4, 0);
        let _live = f.try_acquire_for(4, 1000, 10_000).unwrap();
        f.try_acquire_for(4, 1000, 10_000).unwrap().hold_until(1300);
        assert_eq!(f.counted(1299), 2);
        assert_eq!(f.counted(1300), 1, "lapsed at 1300");
        assert_eq!(
            s.entry(f.entry)
                .funnel_mask
                .load(Ordering::Acquire)
                .count_ones(),
            2,
            "its bit stays until an acquire at the cap reclaims it"
        );
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn holding_never_lengthens_a_lease_and_a_release_ends_it_at_once() {
        let (s, p) = seg("hold-bounds");
        let f = funnel(&s, 1, 0);
        f.try_acquire_for(1, 1000, 500).unwrap().hold_until(9000);
        assert!(f.try_acquire(1, 1500).is_some(), "lapsed at its own expiry");
        let (s2, p2) = seg("hold-release");
        let f2 = funnel(&s2, 1, 0);
        let id = f2
            .try_acquire_for(1, 1000, 10_000)
            .unwrap()
            .hold_until(5000);
        assert!(s2.release(id), "request-end cleanup may still release it");
        assert_eq!(f2.in_flight(1001), 0);
        std::fs::remove_file(p).unwrap();
        std::fs::remove_file(p2).unwrap();
    }

    #[test]
    fn a_stale_lease_cannot_move_the_next_leases_expiry() {
        let (s, p) = seg("hold-stale");
        let f = funnel(&s, 1, 0);
        let stale = f.try_acquire_for(1, 1000, 500).unwrap().into_id();
        let next = f.try_acquire_for(1, 1500, 500).expect("reclaimed at 1500");
        assert!(
            !s.expire_at(stale, 1600),
            "not the stale lease's slot any more"
        );
        assert!(
            f.try_acquire(1, 1999).is_none(),
            "the new lease still ends at 2000"
        );
        assert!(f.try_acquire(1, 2000).is_some());
        drop(next);
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn a_lease_released_early_cannot_move_a_next_lease_of_the_same_expiry() {
        let (s, p) = seg("hold-same-expiry");
        let f = funnel(&s, 1, 0);
        let early = f.try_acquire_for(1, 1000, 500).unwrap().into_id();
        assert!(s.release(early), "request-end cleanup, say");
        let next = f.try_acquire_for(1, 1000, 500).unwrap();
        assert_eq!(next.id().expires_at_ms(), early.expires_at_ms());
        assert!(
            !s.expire_at(early, 1100),
            "the slot's word is the next lease's"
        );
        assert!(
            f.try_acquire(1, 1499).is_none(),
            "the next lease still ends at 1500"
        );
        drop(next);
        std::fs::remove_file(p).unwrap();
    }

    /// Everything in one millisecond: a lease is
    /// taken, left to lapse at that same ms, reclaimed and the slot leased again; then a
    /// second round with a lease released and retaken with the same expiry. The stale ids
    /// neither move the new lease's expiry nor free it, and the limit holds.
    #[test]
    fn a_lease_lapsed_reclaimed_and_retaken_in_one_ms_keeps_the_new_holder() {
        let (s, p) = seg("samems");
        let f = funnel(&s, 1, 0);
        let t = 5_000;
        let a = f.try_acquire_for(1, t, 500).unwrap();
        let a_id = a.hold_until(t); // lapses at once, same ms
        let b = f
            .try_acquire_for(1, t, 500)
            .expect("a's lapsed slot reclaimed at t");
        assert_eq!(b.id().expires_at_ms(), a_id.expires_at_ms(), "same expiry");
        assert!(
            !s.expire_at(a_id, t),
            "a's id no longer moves the slot's expiry"
        );
        assert!(!s.release(a_id), "nor frees b");
        assert!(
            f.try_acquire_for(1, t, 500).is_none(),
            "b holds until t + 500"
        );
        assert!(f.try_acquire_for(1, t + 499, 500).is_none());
        let b_id = b.into_id();
        assert!(s.release(b_id));
        let c = f.try_acquire_for(1, t, 500).unwrap();
        assert!(
            !s.expire_at(b_id, t),
            "released b, same expiry as c: the word tells"
        );
        assert!(!s.release(b_id));
        assert!(
            f.try_acquire_for(1, t + 499, 500).is_none(),
            "c still holds"
        );
        drop(c);
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn dead_pid_is_reclaimed_at_once() {
        let (s, p) = seg("dead");
        let f = funnel(&s, 1, 0);
        // Plant a lease of a pid that does not exist, with a far expiry.
        let e = s.entry(f.entry);
        let dead_pid = 4_194_000;
        assert!(!crate::liveness::pid_alive(dead_pid));
        let word = SlotWord::new(dead_pid, slot_word::Phase::Held, 1);
        e.funnel_slots[0].word.store(word.0, Ordering::SeqCst);
        e.funnel_slots[0]
            .expires_ms
            .store(1_000_000, Ordering::SeqCst);
        e.funnel_mask.store(1, Ordering::SeqCst);
        assert!(f.try_acquire(1, 10).is_some());
        std::fs::remove_file(p).unwrap();
    }

    /// What a scrape reads (`held_now`): nothing before the name's funnel is first used; then
    /// the slots held by live processes with a lease still running, without reclaiming the
    /// others (a dead holder's, a lapsed lease's, a stray bit), which stay counted in the mask
    /// until an acquire at the cap reclaims them.
    #[test]
    fn held_now_counts_live_holders_only_and_changes_nothing() {
        let (s, p) = seg("held-now");
        let f = funnel(&s, 4, 0);
        let e = s.entry(f.entry);
        assert_eq!(f.held_now(10), None, "never used");
        let live = f.try_acquire(4, 10).unwrap();
        let lapsing = f.try_acquire(4, 10).unwrap().hold_until(500);
        assert_eq!(f.held_now(10), Some(2));
        // A holder killed mid-attempt (a pid that does not exist), with a far expiry.
        let dead_pid = 4_194_000;
        assert!(!crate::liveness::pid_alive(dead_pid));
        e.funnel_slots[2].word.store(
            SlotWord::new(dead_pid, slot_word::Phase::Held, 1).0,
            Ordering::SeqCst,
        );
        e.funnel_slots[2]
            .expires_ms
            .store(1_000_000, Ordering::SeqCst);
        e.funnel_mask.fetch_or(1 << 2 | 1 << 3, Ordering::SeqCst);
        let mask = e.funnel_mask.load(Ordering::SeqCst);
        assert_eq!(mask.count_ones(), 4, "two held, one dead, one stray");
        assert_eq!(
            f.held_now(10),
            Some(2),
            "the dead holder's and the stray bit left out"
        );
        assert_eq!(
            f.held_now(500),
            Some(1),
            "the lapsed lease left out at its time"
        );
        assert_eq!(
            e.funnel_mask.load(Ordering::SeqCst),
            mask,
            "nothing reclaimed"
        );
        let _ = lapsing;
        drop(live);
        assert_eq!(f.held_now(500), Some(0));
        assert_eq!(f.in_flight(500), 0, "a reclaim frees them all");
        assert_eq!(f.held_now(500), Some(0), "used once: 0, not None");
        std::fs::remove_file(p).unwrap();
    }

    /// Bits counted with no word owning them (a segment written by something else, a bit
    /// flipped): nobody would ever clear them, and the funnel stayed full for good. The first
    /// acquire that finds it full clears them.
    #[test]
    fn bits_counted_without_an_owner_are_cleared_when_the_funnel_is_full() {
        let (s, p) = seg("stray");
        let f = funnel(&s, 2, 0);
        let e = s.entry(f.entry);
        e.funnel_mask.store(0b11 | 1 << 40, Ordering::SeqCst);
        let a = f.try_acquire(2, 10).expect("the stray bits are cleared");
        let b = f.try_acquire(2, 10).unwrap();
        assert!(f.try_acquire(2, 10).is_none(), "the limit still holds");
        assert_eq!(e.funnel_mask.load(Ordering::SeqCst), 0b11);
        drop((a, b));
        assert_eq!(f.in_flight(10), 0);
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn a_dead_acquirers_claimed_word_is_reclaimed() {
        let (s, p) = seg("claimed");
        let f = funnel(&s, 2, 0);
        let e = s.entry(f.entry);
        // Died after claiming slot 0's word, before counting it; slot 1 is held.
        let word = SlotWord::new(4_194_001, slot_word::Phase::Claiming, 1);
        e.funnel_slots[0].word.store(word.0, Ordering::SeqCst);
        let b = f.try_acquire(2, 10).unwrap();
        assert_eq!(b.id().slot(), 1, "slot 0's word is not free yet");
        let c = f
            .try_acquire(2, 10)
            .expect("the dead claim is reclaimed when needed");
        assert_eq!(c.id().slot(), 0);
        assert_eq!(f.in_flight(10), 2);
        drop((b, c));
        assert_eq!(f.in_flight(10), 0);
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn a_short_lease_does_not_inherit_a_long_ones_expiry() {
        let (s, p) = seg("inherit");
        let f = funnel(&s, 1, 0);
        let long = f.try_acquire_for(1, 0, 3_600_000).unwrap();
        assert!(long.release());
        let short = f.try_acquire_for(1, 1000, 2000).unwrap();
        assert_eq!(short.id().expires_at_ms(), 3000);
        assert!(f.try_acquire(1, 2999).is_none());
        assert!(
            f.try_acquire(1, 3000).is_some(),
            "expired at 3000, not after an hour"
        );
        assert!(!short.release());
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn an_endless_lease_is_clamped_and_ids_stay_unique() {
        let (s, p) = seg("clamp");
        let f = funnel(&s, 1, 0);
        let a = f.try_acquire_for(1, 0, u64::MAX).unwrap();
        assert_eq!(
            a.id().expires_at_ms(),
            (validate::MAX_SECONDS * 1000.0) as u64
        );
        let stale = a.id();
        assert!(a.release());
        let b = f.try_acquire_for(1, 0, u64::MAX).unwrap();
        assert_ne!(
            b.id(),
            stale,
            "the same slot, lease and time: still another identity"
        );
        assert!(!s.release(stale), "a stale id never frees the next lease");
        assert_eq!(f.in_flight(0), 1);
        drop(b);
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn release_by_id_is_idempotent() {
        let (s, p) = seg("idem");
        let f = funnel(&s, 2, 0);
        let id = f.try_acquire(2, 0).unwrap().into_id();
        assert_eq!(f.in_flight(0), 1);
        assert!(s.release(id));
        assert!(!s.release(id));
        assert_eq!(f.in_flight(0), 0);
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn a_forked_child_cannot_release_its_parents_lease() {
        let (s, p) = seg("fork");
        let f = funnel(&s, 1, 0);
        let lease = f.try_acquire(1, 0).unwrap();
        // SAFETY: the child only touches the mapping and _exits.
        let child = unsafe { libc::fork() };
        if child == 0 {
            drop(lease); // the inherited guard must leave the parent's slot alone
            let still_held = f.in_flight(0) == 1;
            unsafe { libc::_exit(if still_held { 0 } else { 1 }) };
        }
        let mut status = 0;
        unsafe { libc::waitpid(child, &mut status, 0) };
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the child freed the parent's slot"
        );
        assert_eq!(f.in_flight(0), 1);
        assert!(lease.release());
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn config_validation_names_the_argument() {
        let secs = Duration::from_secs;
        let arg = |r: Result<FunnelConfig, Error>| r.unwrap_err().argument().map(str::to_owned);
        assert_eq!(
            arg(FunnelConfig::new(0, 0, secs(1))).as_deref(),
            Some("limit")
        );
        assert_eq!(
            arg(FunnelConfig::new(65, 0, secs(1))).as_deref(),
            Some("limit")
        );
        assert_eq!(
            arg(FunnelConfig::new(3, 3, secs(1))).as_deref(),
            Some("reserve")
        );
        assert_eq!(
            arg(FunnelConfig::new(3, 0, Duration::ZERO)).as_deref(),
            Some("lease")
        );
        assert_eq!(
            arg(FunnelConfig::new(3, 0, secs(40_000_000))).as_deref(),
            Some("lease")
        );
        assert_eq!(
            FunnelConfig::new(3, 3, secs(1)).unwrap_err().to_string(),
            "reserve: must be between 0 and limit - 1 (2), got 3"
        );
        let ok = FunnelConfig::new(64, 63, Duration::from_micros(10)).unwrap();
        assert_eq!((ok.limit(), ok.reserve(), ok.lease_ms()), (64, 63, 1));
    }

    #[test]
    fn threads_never_exceed_the_limit() {
        use std::sync::atomic::AtomicU32;
        let (s, p) = seg("threads");
        let f = funnel(&s, 3, 0);
        let holders = Arc::new(AtomicU32::new(0));
        let max_seen = Arc::new(AtomicU32::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (f, holders, max_seen) = (f.clone(), holders.clone(), max_seen.clone());
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        if let Some(l) = f.try_acquire(3, 0) {
                            let n = holders.fetch_add(1, Ordering::SeqCst) + 1;
                            max_seen.fetch_max(n, Ordering::SeqCst);
                            holders.fetch_sub(1, Ordering::SeqCst);
                            assert!(l.release());
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(max_seen.load(Ordering::SeqCst) <= 3);
        assert!(max_seen.load(Ordering::SeqCst) >= 1);
        assert_eq!(f.in_flight(0), 0);
        std::fs::remove_file(p).unwrap();
    }

    fn adaptive(seg: &Arc<Segment>, name: &str, reserve: u32) -> Funnel {
        let bounds = AdaptiveConfig::new(1, 16, 8).unwrap();
        Funnel::new(
            seg.clone(),
            name,
            FunnelConfig::adaptive(bounds, reserve, Duration::from_secs(10)).unwrap(),
        )
        .unwrap()
    }

    /// Sets the learned limit as an interval's close would.
    fn learn(f: &Funnel, limit: f64) {
        let e = f.seg.entry(f.entry);
        e.adaptive.state.store(
            crate::adaptive_limit::pack_state(1, limit),
            Ordering::SeqCst,
        );
    }

    #[test]
    fn a_limit_that_falls_revokes_nothing_and_admits_nobody_until_below_it() {
        let (s, p) = seg("fall");
        let f = adaptive(&s, "fall", 0);
        assert_eq!(f.cap(false), 8, "initial");
        let mut held: Vec<Lease> = (0..8)
            .map(|_| f.try_acquire(f.cap(false), 0).unwrap())
            .collect();
        assert!(f.try_acquire(f.cap(false), 0).is_none());
        learn(&f, 2.7);
        assert_eq!(f.cap(false), 2, "whole slots of 2.7");
        assert_eq!(f.in_flight(0), 8, "leases already held stay");
        while held.len() > 2 {
            assert!(
                f.try_acquire(f.cap(false), 0).is_none(),
                "{} in flight",
                held.len()
            );
            held.pop();
        }
        assert!(
            f.try_acquire(f.cap(false), 0).is_none(),
            "2 in flight, limit 2"
        );
        held.pop();
        let again = f
            .try_acquire(f.cap(false), 0)
            .expect("1 in flight, limit 2");
        learn(&f, 16.0);
        assert_eq!(f.cap(false), 16);
        drop((held, again));
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn the_reserve_is_halved_when_the_learned_limit_is_small() {
        let (s, p) = seg("areserve");
        let f = adaptive(&s, "areserve", 3);
        assert_eq!(
            (f.cap(false), f.cap(true)),
            (8, 5),
            "8 ≥ 2 × 3: the full reserve"
        );
        learn(&f, 4.0);
        assert_eq!((f.cap(false), f.cap(true)), (4, 2), "web keeps ⌊4/2⌋");
        learn(&f, 1.0);
        assert_eq!((f.cap(false), f.cap(true)), (1, 1), "one slot is shared");
        assert!(FunnelConfig::adaptive(
            AdaptiveConfig::new(1, 4, 2).unwrap(),
            4,
            Duration::from_secs(1)
        )
        .is_err());
        std::fs::remove_file(p).unwrap();
    }

    /// Threads acquire with the cap they read while another thread moves the learned limit
    /// between 2 and 12. An observer count of holders (raised after acquiring, lowered before
    /// releasing) never exceeds the highest cap read by a thread that holds or is acquiring.
    #[test]
    fn in_flight_never_exceeds_the_highest_cap_read_by_a_holder() {
        use std::sync::atomic::{AtomicBool, AtomicU32};
        let (s, p) = seg("athreads");
        let f = adaptive(&s, "athreads", 0);
        let holders = Arc::new(AtomicU32::new(0));
        let caps: Arc<Vec<AtomicU32>> = Arc::new((0..8).map(|_| AtomicU32::new(0)).collect());
        let stop = Arc::new(AtomicBool::new(false));
        let over_low = Arc::new(AtomicU32::new(0));
        let mover = {
            let (f, stop) = (f.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    learn(&f, if i.is_multiple_of(2) { 2.0 } else { 12.0 });
                    i += 1;
                    std::thread::yield_now();
                }
            })
        };
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let (f, holders, caps, over_low) =
                    (f.clone(), holders.clone(), caps.clone(), over_low.clone());
                std::thread::spawn(move || {
                    for i in 0..2_000 {
                        // The holders move the limit too, so it changes between reads
                        // however the scheduler orders the threads (on one core the
                        // mover may not run while a thread goes through its loop).
                        if (t + i) % 3 == 0 {
                            learn(&f, if i % 2 == 0 { 12.0 } else { 2.0 });
                        }
                        let cap = f.cap(false);
                        caps[t].store(cap, Ordering::SeqCst);
                        if let Some(l) = f.try_acquire(cap, 0) {
                            let n = holders.fetch_add(1, Ordering::SeqCst) + 1;
                            let bound =
                                caps.iter().map(|c| c.load(Ordering::SeqCst)).max().unwrap();
                            assert!(n <= bound, "{n} held, highest cap read {bound}");
                            // A holder under a high cap stays (bounded) until a third
                            // joins it, so the stress reaches past the low limit even
                            // when the scheduler runs the threads one after another.
                            let mut spins = 0;
                            while cap > 2 && holders.load(Ordering::SeqCst) < 3 && spins < 500 {
                                std::thread::yield_now();
                                spins += 1;
                            }
                            if holders.load(Ordering::SeqCst) > 2 {
                                over_low.fetch_add(1, Ordering::Relaxed);
                            }
                            holders.fetch_sub(1, Ordering::SeqCst);
                            assert!(l.release());
                        }
                        caps[t].store(0, Ordering::SeqCst);
                        std::thread::yield_now();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        stop.store(true, Ordering::SeqCst);
        mover.join().unwrap();
        assert!(
            over_low.load(Ordering::Relaxed) > 0,
            "the high limit was used"
        );
        assert_eq!(f.in_flight(0), 0);
        std::fs::remove_file(p).unwrap();
    }
}
