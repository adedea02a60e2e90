//! The funnel's lock-free protocol over one entry's mask and slot words.
//!
//! State: a 64-bit mask (bit `i` set = slot `i` counts as in flight; the in-flight count is its
//! popcount) and one [`SlotWord`] per slot. Every step is one atomic operation, so a process
//! killed anywhere leaves a state the others can repair.
//!
//! The invariant that makes the count exact: **a slot's bit is changed only by the owner of the
//! slot's word, and is set only while the word is owned** (not `Free`). Ownership moves only by
//! a compare-and-swap from the exact current word, and words are never reused (generations grow), so
//! an owner that was paused, or whose lease was reclaimed, can never touch a newer holder's bit.
//! A lease's expiry sits beside its word; the owner writes it before marking the word `Held`,
//! so whoever reads a `Held` word (acquire) and then the expiry sees that lease's expiry or,
//! if the slot has moved on, fails its compare-and-swap on the old word.
//!
//! - acquire: `Free → Claiming(me)` on a slot of the caller's [`Allowance`]; set the bit with
//!   a CAS that also checks, on the same mask value, the caller's `cap` against the popcount
//!   and its `within` against the popcount of its slots; `Claiming → Held(me)`. At either
//!   bound: `Claiming → Free`, report full.
//! - release: `Held(me) → Clearing(me)` (fails if the lease was reclaimed); clear the bit;
//!   `Clearing → Free`.
//! - reclaim: a `Held` word whose lease expired or whose process is dead, or a `Claiming` /
//!   `Clearing` word whose process is dead, is taken by CAS (`→ Clearing(me)`); clear the bit;
//!   `→ Free`. Dead means `kill(pid, 0)` finds no such process: a `Held` word of a holder
//!   killed after another process took its pid waits for its lease to expire. A `Claiming` or
//!   `Clearing` word of a live process is never taken: its owner is between two steps that
//!   touch the bit. A process stopped there keeps that one slot out of use until it resumes or
//!   dies (so does a process killed there whose pid another process reuses, until that one
//!   ends): capacity may err low for a while, the count never does.
//!   Holders are told apart by pid, so every process of a segment shares one pid namespace
//!   (the segment header records it).
//!
//! Only the owner of a `Claiming` or `Clearing` word moves it on, so it does so with a plain
//! store: those steps cost no locked instruction.
//!
//! The functions are `async` only so that the model checker (`model_check`) can pause an actor
//! before every shared access and explore every interleaving; in production
//! [`ThisProcess::step`] never pauses and [`run`](crate::pause::run) completes them in a single poll.

use super::slot_word::{Phase, SlotWord};
use crate::layout::{Entry, MAX_FUNNEL_LIMIT};
use std::future::Future;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Release};

/// Bounded work per acquire under contention: then we report full rather than spin.
const MAX_ROUNDS: usize = 64;

/// Which shared word an access is about to touch (read by the model checker only).
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) enum At {
    Mask,
    Slot(u32),
    Expiry(u32),
}

/// Who runs a protocol step: its pid, how it tells whether another process is alive, and a
/// point before every shared access where a model checker may pause it.
pub(crate) trait Actor {
    fn pid(&self) -> u32;
    fn alive(&self, pid: u32) -> bool;
    fn step(&self, at: At) -> impl Future<Output = ()>;
}

/// The real caller: this process.
pub(crate) struct ThisProcess;

impl Actor for ThisProcess {
    fn pid(&self) -> u32 {
        crate::liveness::current_pid()
    }
    fn alive(&self, pid: u32) -> bool {
        crate::liveness::pid_alive(pid)
    }
    fn step(&self, _: At) -> impl Future<Output = ()> {
        std::future::ready(())
    }
}

/// Bits of slots `0..limit`.
pub(crate) fn slots_below(limit: u32) -> u64 {
    if limit >= 64 {
        u64::MAX
    } else {
        (1u64 << limit) - 1
    }
}

/// What one acquire may take: a slot among `slots`, only while fewer than `cap` are counted
/// in all and fewer than `within` among `slots`. Both bounds are checked on the mask value the
/// counting CAS replaces, so both are exact. Any slot, one bound: `Allowance::any(cap)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Allowance {
    pub cap: u32,
    pub slots: u64,
    pub within: u32,
}

impl Allowance {
    /// Any slot while fewer than `cap` are counted (the seed's one counter).
    pub const fn any(cap: u32) -> Self {
        Allowance {
            cap,
            slots: u64::MAX,
            within: cap,
        }
    }

    /// Whether a slot may still be counted over `mask`.
    fn room(&self, mask: u64) -> bool {
        mask.count_ones() < self.cap && (mask & self.slots).count_ones() < self.within
    }
}

/// A lease just taken: its slot, its `Held` word (the lease's identity) and its expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Acquired {
    pub slot: u32,
    pub held: SlotWord,
    pub expires_ms: u64,
}

/// Takes a slot of `0..limit` within `allow`; never waits.
pub(crate) async fn acquire(
    e: &Entry,
    me: &impl Actor,
    allow: Allowance,
    limit: u32,
    now_ms: u64,
    lease_ms: u64,
) -> Option<Acquired> {
    let expires_ms = now_ms.saturating_add(lease_ms);
    let mut reclaimed = false;
    for _ in 0..MAX_ROUNDS {
        me.step(At::Mask).await;
        let mask = e.funnel_mask.load(Acquire);
        if allow.room(mask) {
            let free = !mask & allow.slots & slots_below(limit);
            match claim(e, me, free, expires_ms).await {
                Claim::Got(slot, claiming) => match count(e, me, slot, claiming, allow, mask).await
                {
                    Counted::Held(held) => {
                        return Some(Acquired {
                            slot,
                            held,
                            expires_ms,
                        })
                    }
                    Counted::AtCap => {}
                },
                Claim::Contended => continue,
                Claim::NoneFree => {}
            }
        }
        if reclaimed || reclaim(e, me, limit, now_ms).await == 0 {
            return None;
        }
        reclaimed = true;
    }
    None
}

enum Claim {
    Got(u32, SlotWord),
    /// Another process changed a candidate word first: look again.
    Contended,
    /// No candidate word is free (owned by acquirers or releasers mid-way, or left behind).
    NoneFree,
}

/// Takes the word of the first free slot among `candidates` (`Free → Claiming(me)`) and
/// writes the lease's expiry beside it.
async fn claim(e: &Entry, me: &impl Actor, mut candidates: u64, expires_ms: u64) -> Claim {
    let mut contended = false;
    while candidates != 0 {
        let slot = candidates.trailing_zeros();
        candidates &= candidates - 1;
        let cell = &e.funnel_slots[slot as usize].word;
        me.step(At::Slot(slot)).await;
        let seen = SlotWord(cell.load(Acquire));
        if seen.phase() != Phase::Free {
            continue;
        }
        let claiming = seen.next_claim(me.pid());
        me.step(At::Slot(slot)).await;
        match cell.compare_exchange(seen.0, claiming.0, AcqRel, Acquire) {
            Ok(_) => {
                me.step(At::Expiry(slot)).await;
                e.funnel_slots[slot as usize]
                    .expires_ms
                    .store(expires_ms, Release);
                return Claim::Got(slot, claiming);
            }
            Err(_) => contended = true,
        }
    }
    if contended {
        Claim::Contended
    } else {
        Claim::NoneFree
    }
}

enum Counted {
    Held(SlotWord),
    AtCap,
}

/// With the slot's word claimed (so its bit is clear and nobody else will set it), sets the
/// bit unless `allow` has no room left in the mask it replaces, then marks the word `Held`.
/// Without room the word is given back. `mask` is the caller's latest view of the mask.
async fn count(
    e: &Entry,
    me: &impl Actor,
    slot: u32,
    claiming: SlotWord,
    allow: Allowance,
    mut mask: u64,
) -> Counted {
    let cell = &e.funnel_slots[slot as usize].word;
    let bit = 1u64 << slot;
    for _ in 0..MAX_ROUNDS {
        if !allow.room(mask) {
            break;
        }
        me.step(At::Mask).await;
        match e
            .funnel_mask
            .compare_exchange(mask, mask | bit, AcqRel, Acquire)
        {
            Ok(_) => {
                let held = claiming.with_phase(Phase::Held);
                me.step(At::Slot(slot)).await;
                cell.store(held.0, Release);
                return Counted::Held(held);
            }
            Err(now) => mask = now,
        }
    }
    me.step(At::Slot(slot)).await;
    cell.store(SlotWord::free(claiming.generation()).0, Release);
    Counted::AtCap
}

/// Gives a lease back. False when it was no longer ours (reclaimed after it expired, or
/// already released).
pub(crate) async fn release(e: &Entry, me: &impl Actor, slot: u32, held: SlotWord) -> bool {
    let cell = &e.funnel_slots[slot as usize].word;
    let clearing = held.with_phase(Phase::Clearing);
    me.step(At::Slot(slot)).await;
    if cell
        .compare_exchange(held.0, clearing.0, AcqRel, Acquire)
        .is_err()
    {
        return false;
    }
    me.step(At::Mask).await;
    e.funnel_mask.fetch_and(!(1u64 << slot), AcqRel);
    me.step(At::Slot(slot)).await;
    cell.store(SlotWord::free(held.generation()).0, Release);
    true
}

/// Whether a reclaim takes a slot whose word is `seen` (`counted`: its bit is set): a `Held`
/// word whose lease ran out at `now_ms` (`expires_ms`, read only then) or whose process is
/// dead, a `Claiming` or `Clearing` word of a dead process, a `Free` word counted with no
/// owner. What a scrape leaves out of the slots held ([`super::held_now`]).
pub(crate) fn lapsed(
    seen: SlotWord,
    counted: bool,
    expires_ms: impl FnOnce() -> u64,
    now_ms: u64,
    alive: impl Fn(u32) -> bool,
) -> bool {
    match seen.phase() {
        Phase::Free => counted,
        Phase::Held => now_ms >= expires_ms() || !alive(seen.pid()),
        Phase::Claiming | Phase::Clearing => !alive(seen.pid()),
    }
}

/// Frees the slots of expired leases and of dead processes among `0..limit` and among the
/// slots the mask counts, and clears the bits counted with no owner. Returns how many slots
/// it freed.
///
/// A bit set while its word is `Free` never happens in the protocol (an owner sets it after
/// claiming the word and clears it before freeing it), so it comes from outside: a segment
/// written by something else, a flipped bit. Nobody owns such a bit to clear it, and the
/// funnel would stay full for good. Seen (the mask read first, the word after it), it may also
/// be a release that completed in between, so the word is taken like any other
/// (`Free → Clearing(me)`, exact word, generations never reused): then no other process can
/// own it, and a bit still set is stray. It is cleared as a reclaimed one is.
pub(crate) async fn reclaim(e: &Entry, me: &impl Actor, limit: u32, now_ms: u64) -> u32 {
    let mut freed = 0;
    me.step(At::Mask).await;
    let counted = e.funnel_mask.load(Acquire);
    let mut scan = slots_below(limit.min(MAX_FUNNEL_LIMIT)) | counted;
    while scan != 0 {
        let slot = scan.trailing_zeros();
        scan &= scan - 1;
        let cell = &e.funnel_slots[slot as usize].word;
        me.step(At::Slot(slot)).await;
        let seen = SlotWord(cell.load(Acquire));
        if seen.phase() == Phase::Held {
            me.step(At::Expiry(slot)).await;
        }
        let expires_ms = || e.funnel_slots[slot as usize].expires_ms.load(Acquire);
        let counted = counted & (1u64 << slot) != 0;
        if !lapsed(seen, counted, expires_ms, now_ms, |pid| me.alive(pid)) {
            continue;
        }
        let clearing = SlotWord::new(me.pid(), Phase::Clearing, seen.generation());
        me.step(At::Slot(slot)).await;
        if cell
            .compare_exchange(seen.0, clearing.0, AcqRel, Acquire)
            .is_err()
        {
            continue;
        }
        me.step(At::Mask).await;
        let before = e.funnel_mask.fetch_and(!(1u64 << slot), AcqRel);
        me.step(At::Slot(slot)).await;
        cell.store(SlotWord::free(seen.generation()).0, Release);
        // A free word whose bit had already been cleared (a release seen half-way) freed
        // nothing.
        if seen.phase() != Phase::Free || before & (1u64 << slot) != 0 {
            freed += 1;
        }
    }
    freed
}
