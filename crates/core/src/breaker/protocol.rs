//! The breaker's lock-free protocol over one [`BreakerBlock`]: a state word and a ring of
//! counting buckets.
//!
//! - admit: closed → go; open before its end or half-open before its ticket's bound →
//!   refuse; open at or after its end → CAS `Open → HalfOpen(now + probe bound)`: the winner of
//!   that CAS, and only it, holds the one probe ticket of the host; half-open at or after the
//!   bound (the probe's process died or hangs) → the same CAS from the old ticket: the caller
//!   takes the ticket over and probes, so the breaker is never half-open for ever.
//! - record (an attempt admitted while closed ended, while it is still closed and since the
//!   attempt was sent): count it in the bucket of `now`; a success sets the streak to 0, a
//!   failure adds 1 to it; on a failure, CAS `Closed → Open(now + jittered open_for)` when the
//!   streak reached `consecutive_failures`, or else when the window holds `min_calls` calls and
//!   the failure ratio reached `failure_ratio`. A record a window or more late (its caller was
//!   paused since it read its clock) finds a newer bucket in the place of its own: it counts
//!   nothing, and resets neither that bucket nor a newer streak.
//! - resolve (the probe ended): on success, empty the bucket of `now` and the streak, then CAS
//!   `ticket → Closed(now)`; on a failure, CAS `ticket → Open(..)`. A ticket that was given up
//!   is no longer the word: its CAS fails, its report is ignored.
//!
//! - give back (the probe ended without an outcome): CAS `ticket → Open(now)`, so the next
//!   caller probes at once.
//!
//! The functions are `async` only so that `model_check` can pause an actor before every shared
//! access; in production [`ThisProcess`]'s pause is ready at once and [`run`](crate::pause::run) completes them in
//! one poll (as the funnel's protocol).

use super::state_word::{Phase, StateWord};
use super::{Admission, BreakerConfig, Ticket, Transition};
use crate::layout::{BreakerBlock, BREAKER_BUCKETS};
use std::future::Future;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Release};

/// Bounded work per admission under contention: then refuse rather than spin.
const MAX_ROUNDS: usize = 64;

const TAG_BITS: u32 = 24;
const COUNT_BITS: u32 = 20;
const COUNT_MAX: u64 = (1 << COUNT_BITS) - 1;
const TAG_MASK: u64 = (1 << TAG_BITS) - 1;
/// The streak word's tag is the epoch's low 40 bits (34 years of 1 ms buckets): no wrap.
const STREAK_TAG_BITS: u32 = 40;
const STREAK_TAG_MASK: u64 = (1 << STREAK_TAG_BITS) - 1;
const STREAK_BITS: u32 = 64 - STREAK_TAG_BITS;
const STREAK_MAX: u64 = (1 << STREAK_BITS) - 1;
/// How many buckets late a record may be and still be told late (its caller paused since it
/// read its clock, or another process's clock read later): it then counts nothing rather than
/// reset the newer bucket or streak in its place. Tags wrap at 2^24 epochs, so a bucket left
/// that old reads as newer too: the bound keeps that to a narrow band (a breaker idle for 2^24
/// buckets, 4.7 hours at the shortest window, whose records within 1024 buckets of that moment
/// count nothing), as the budget's look ahead does. A record later than this is counted as
/// before, in its bucket's place.
const LATE_LIMIT: u64 = 1024;

/// Which shared word an access is about to touch (read by the model checker only).
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) enum At {
    State,
    Bucket(usize),
    Streak,
}

/// A point before every shared access where a model checker may pause the caller.
pub(crate) trait Pause {
    fn step(&self, at: At) -> impl Future<Output = ()>;
}

/// The real caller: never pauses.
pub(crate) struct ThisProcess;

impl Pause for ThisProcess {
    fn step(&self, _: At) -> impl Future<Output = ()> {
        std::future::ready(())
    }
}

/// Asks for admission at `now_ms`.
pub(crate) async fn admit(
    b: &BreakerBlock,
    me: &impl Pause,
    config: &BreakerConfig,
    now_ms: u64,
) -> Admission {
    for _ in 0..MAX_ROUNDS {
        me.step(At::State).await;
        let seen = StateWord(b.state.load(Acquire));
        let took_over = match seen.phase() {
            Phase::Closed => return Admission::Closed,
            _ if now_ms < seen.at_ms() => {
                return Admission::Refused {
                    until_ms: seen.at_ms(),
                }
            }
            Phase::Open => false,
            Phase::HalfOpen => true,
        };
        let ticket = seen.next(
            Phase::HalfOpen,
            now_ms.saturating_add(config.probe_ms).max(now_ms + 1),
        );
        me.step(At::State).await;
        if b.state
            .compare_exchange(seen.0, ticket.0, AcqRel, Acquire)
            .is_ok()
        {
            return Admission::Probe {
                ticket: Ticket(ticket),
                took_over,
            };
        }
    }
    Admission::Refused {
        until_ms: now_ms.saturating_add(1),
    }
}

/// Counts an attempt admitted while closed, sent at `started_ms` and ended at `now_ms`; on a
/// failure, opens the breaker when the window says so. An attempt that ends while the breaker
/// is open or half-open, or that was sent before it last closed, is not counted: the window
/// and the streak start afresh at the close (so nothing counted before the close has to be
/// emptied after it, which a closer killed in between would leave undone). `jitter`: a uniform
/// random u64 (the open period's jitter).
pub(crate) async fn record(
    b: &BreakerBlock,
    me: &impl Pause,
    config: &BreakerConfig,
    failure: bool,
    (started_ms, now_ms): (u64, u64),
    jitter: u64,
) -> Option<Transition> {
    me.step(At::State).await;
    let seen = StateWord(b.state.load(Acquire));
    if seen.phase() != Phase::Closed || started_ms < seen.at_ms() {
        return None;
    }
    let epoch = config.epoch(now_ms);
    let tag = epoch & TAG_MASK;
    let streak_tag = epoch & STREAK_TAG_MASK;
    let idx = index(epoch);
    let bucket = &b.buckets[idx];
    // One pause per round (see `lengthen_streak` for why that is enough).
    loop {
        me.step(At::Bucket(idx)).await;
        let w = bucket.load(Acquire);
        if w != 0 && newer(tag_of(w), tag) {
            // A window or more late: its bucket left the window, a newer one took its place.
            return None;
        }
        let (c, f) = if tag_of(w) == tag {
            (calls_of(w), failures_of(w))
        } else {
            (0, 0)
        };
        // A full bucket counts nothing more: its ratio stays that of the calls it counted
        // (failures never outnumber calls, so neither count passes the cap).
        if c == COUNT_MAX {
            break;
        }
        let next = pack(tag, c + 1, f + failure as u64);
        if bucket.compare_exchange(w, next, AcqRel, Acquire).is_ok() {
            break;
        }
    }
    if !failure {
        me.step(At::Streak).await;
        b.streak.store(0, Release);
        return None;
    }
    let streak = lengthen_streak(b, me, streak_tag).await;
    me.step(At::State).await;
    let seen = StateWord(b.state.load(Acquire));
    // An open and a close between the first check and the counts: the attempt may have been
    // counted in the new period's bucket and streak (one count too many, never an opening).
    if seen.phase() != Phase::Closed || started_ms < seen.at_ms() {
        return None;
    }
    if streak < config.consecutive_failures as u64
        && !window_says_open(b, me, config, seen, epoch).await
    {
        return None;
    }
    let open = seen.next(Phase::Open, config.open_until(now_ms, jitter));
    me.step(At::State).await;
    b.state
        .compare_exchange(seen.0, open.0, AcqRel, Acquire)
        .ok()
        .map(|_| Transition::Opened)
}

/// Adds a failure to the streak and returns its length. The streak word is
/// `tag:40 | count:24`, the tag the epoch of its last failure (40 bits: it does not wrap, where
/// 24 bits made a streak left 2^24 epochs ago, 9.7 days at a 1 s window, look recent): a failure within the window of
/// the one before lengthens the streak, one after a longer quiet starts it again at 1. So a
/// run of failures may last longer than the window (one caller of a hung upstream, each
/// failure taking its timeout), while failures hours apart never make a run.
///
/// A failure a window or more before the run's last (a caller paused since it read its
/// clock) belongs to no run: it leaves the streak as it is and counts as 0.
///
/// One pause per round, before the load: the next word depends on the loaded one only, so a
/// write landing between the load and the CAS just fails the CAS and the round starts again,
/// as if the round had begun after that write; the model checker need not split the round.
async fn lengthen_streak(b: &BreakerBlock, me: &impl Pause, tag: u64) -> u64 {
    loop {
        me.step(At::Streak).await;
        let w = b.streak.load(Acquire);
        let last = w >> STREAK_BITS;
        let age = tag.wrapping_sub(last) & STREAK_TAG_MASK;
        // A failure another process counted at a later epoch (a caller paused since it read
        // its clock) is still the run's last.
        let ahead = last.wrapping_sub(tag) & STREAK_TAG_MASK;
        let window = BREAKER_BUCKETS as u64;
        if w != 0 && ahead >= window && ahead <= LATE_LIMIT {
            return 0;
        }
        let next = if w != 0 && (age < window || ahead < window) {
            let newest = if age < window { tag } else { last };
            newest << STREAK_BITS | ((w & STREAK_MAX) + 1).min(STREAK_MAX)
        } else {
            tag << STREAK_BITS | 1
        };
        if b.streak.compare_exchange(w, next, AcqRel, Acquire).is_ok() {
            return next & STREAK_MAX;
        }
    }
}

/// The window (since the breaker last closed) holds `min_calls` calls and the failures reach
/// `failure_ratio` of them.
async fn window_says_open(
    b: &BreakerBlock,
    me: &impl Pause,
    config: &BreakerConfig,
    seen: StateWord,
    epoch: u64,
) -> bool {
    let since = config.epoch(seen.at_ms());
    let (mut calls, mut failures) = (0u64, 0u64);
    for (i, bucket) in b.buckets.iter().enumerate() {
        me.step(At::Bucket(i)).await;
        if let Some((c, f)) = counted(i, bucket.load(Acquire), epoch, since) {
            calls += c;
            failures += f;
        }
    }
    calls >= config.min_calls as u64
        && (failures as f64) >= config.failure_ratio * calls as f64 - 1e-9
}

/// The probe holding `ticket` ended: close on success, open again on failure. `None` when the
/// ticket had been given up (another caller took it over after its bound): nothing changes.
pub(crate) async fn resolve(
    b: &BreakerBlock,
    me: &impl Pause,
    config: &BreakerConfig,
    ticket: Ticket,
    success: bool,
    now_ms: u64,
    jitter: u64,
) -> Option<Transition> {
    let (next, transition) = match success {
        true => (ticket.0.next(Phase::Closed, now_ms), Transition::Closed),
        false => (
            ticket
                .0
                .next(Phase::Open, config.open_until(now_ms, jitter)),
            Transition::Reopened,
        ),
    };
    if success {
        // The window starts afresh at the close: buckets before it are not counted (`since`),
        // and the one it falls in is emptied of what came before (the failures that opened
        // the breaker, when it closes within a bucket of opening); the streak restarts too.
        // Emptied before the close, while nothing counts (half-open), so that a process killed
        // after its close leaves nothing of the outage behind. Only while this ticket is still
        // the word: a ticket given up (another probe may have closed the breaker since) must
        // not empty a period that is counting. So each is read before that check and emptied
        // only if it still holds what was read: a resolver paused between its check and its
        // stores, given up meanwhile, emptied the streak of the period another probe closed.
        // (One pause before both reads and one before both writes: each write is a CAS that
        // fails if anything was counted since its read, so no schedule between the two of a
        // pair is needed, and the model checks stay within reach.)
        let idx = index(config.epoch(now_ms));
        me.step(At::Bucket(idx)).await;
        let (bucket, streak) = (b.buckets[idx].load(Acquire), b.streak.load(Acquire));
        me.step(At::State).await;
        if b.state.load(Acquire) != ticket.0 .0 {
            return None;
        }
        me.step(At::Bucket(idx)).await;
        let _ = b.buckets[idx].compare_exchange(bucket, 0, AcqRel, Acquire);
        let _ = b.streak.compare_exchange(streak, 0, AcqRel, Acquire);
    }
    me.step(At::State).await;
    let changed = b
        .state
        .compare_exchange(ticket.0 .0, next.0, AcqRel, Acquire)
        .is_ok();
    changed.then_some(transition)
}

/// Calls and failures in the window at `now_ms`, counted since `closed` (a closed word) began.
pub(crate) fn window(
    b: &BreakerBlock,
    config: &BreakerConfig,
    closed: StateWord,
    now_ms: u64,
) -> (u64, u64) {
    let (epoch, since) = (config.epoch(now_ms), config.epoch(closed.at_ms()));
    b.buckets
        .iter()
        .enumerate()
        .filter_map(|(i, bucket)| counted(i, bucket.load(Acquire), epoch, since))
        .fold((0, 0), |(c, f), (bc, bf)| (c + bc, f + bf))
}

/// A bucket's (calls, failures) if it lies in the window ending at `epoch` and not before the
/// bucket in which the breaker last closed (`since`).
fn counted(idx: usize, w: u64, epoch: u64, since: u64) -> Option<(u64, u64)> {
    let age = (epoch & TAG_MASK).wrapping_sub(tag_of(w)) & TAG_MASK;
    // A bucket sits at the index of its epoch: one whose tag wrapped (2^24 epochs old, which
    // is 16 mod 20) sits elsewhere. Tag and index then alias only every 5 × 2^24 epochs.
    (w != 0
        && age < BREAKER_BUCKETS as u64
        && age <= epoch.saturating_sub(since)
        && index(epoch.wrapping_sub(age)) == idx)
        .then(|| (calls_of(w), failures_of(w)))
}

/// The probe holding `ticket` ended without an outcome (refused by a later guard, or its call
/// cancelled): give the ticket back at once (`ticket → Open(now)`, over already), so the next
/// caller probes instead of everyone waiting for the bound. False when it had been given up.
pub(crate) async fn give_back(
    b: &BreakerBlock,
    me: &impl Pause,
    ticket: Ticket,
    now_ms: u64,
) -> bool {
    let open = ticket.0.next(Phase::Open, now_ms);
    me.step(At::State).await;
    b.state
        .compare_exchange(ticket.0 .0, open.0, AcqRel, Acquire)
        .is_ok()
}

/// Whether epoch tag `tag` is later than `than`, by at most [`LATE_LIMIT`].
fn newer(tag: u64, than: u64) -> bool {
    let ahead = tag.wrapping_sub(than) & TAG_MASK;
    ahead != 0 && ahead <= LATE_LIMIT
}

/// Counts `n` failures at `epoch` in its bucket and the streak, as an outage leaves them.
#[cfg(test)]
pub(crate) fn count_failures(b: &BreakerBlock, epoch: u64, n: u64) {
    let tag = epoch & TAG_MASK;
    b.buckets[index(epoch)].store(pack(tag, n, n), Release);
    b.streak
        .store((epoch & STREAK_TAG_MASK) << STREAK_BITS | n, Release);
}

/// The bucket of `epoch` in the ring.
fn index(epoch: u64) -> usize {
    (epoch % BREAKER_BUCKETS as u64) as usize
}

fn pack(tag: u64, calls: u64, failures: u64) -> u64 {
    tag << (2 * COUNT_BITS) | calls << COUNT_BITS | failures
}
fn tag_of(w: u64) -> u64 {
    w >> (2 * COUNT_BITS)
}
fn calls_of(w: u64) -> u64 {
    (w >> COUNT_BITS) & COUNT_MAX
}
fn failures_of(w: u64) -> u64 {
    w & COUNT_MAX
}
