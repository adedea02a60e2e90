//! Exhaustive interleaving checks of the funnel protocol.
//!
//! Each actor runs a script of protocol operations (the real `protocol` functions) as a
//! future that pauses before every shared access. The driver chooses, at every point, which
//! actor performs its next access (or, for a mortal actor, that it is killed there), and
//! explores every such schedule depth-first by replaying choice prefixes. After every access
//! it checks the invariants; at the end of each schedule a janitor reclaims what dead actors
//! left and the funnel must be empty.

use super::protocol::{self, Acquired, Actor, Allowance, At};
use super::slot_word::{Phase, SlotWord};
use crate::layout::{Entry, MAX_FUNNEL_LIMIT};
use crate::pause::PendingOnce;
use std::cell::{Cell, RefCell};
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::pin::Pin;
use std::sync::atomic::Ordering::SeqCst;
use std::task::{Context, Poll, Waker};

/// The pids of killed actors, shared by every actor's liveness check.
#[derive(Default)]
struct Graveyard(RefCell<Vec<u32>>);

struct ModelActor<'a> {
    pid: u32,
    graveyard: &'a Graveyard,
    /// The word its next access touches, once it has paused before one.
    next: Cell<Option<At>>,
}

impl<'a> ModelActor<'a> {
    fn new(pid: u32, graveyard: &'a Graveyard) -> Self {
        ModelActor {
            pid,
            graveyard,
            next: Cell::new(None),
        }
    }
}

impl Actor for ModelActor<'_> {
    fn pid(&self) -> u32 {
        self.pid
    }
    fn alive(&self, pid: u32) -> bool {
        pid != 0 && !self.graveyard.0.borrow().contains(&pid)
    }
    fn step(&self, at: At) -> impl Future<Output = ()> {
        self.next.set(Some(at));
        PendingOnce(false)
    }
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Acquire {
        allow: Allowance,
        now: u64,
        lease: u64,
    },
    Release,
    Reclaim {
        now: u64,
    },
}

struct Script {
    ops: &'static [Op],
    mortal: bool,
    /// Runs as a thread of that actor's process (same pid) instead of its own process.
    thread_of: Option<usize>,
    /// Actors of one class (same number) acquire with one allowance: the slots they hold
    /// (claimed or held, the bits counted) always lie among its `slots` and never number more
    /// than its `within`.
    class: Option<u8>,
}

fn actor(ops: &'static [Op]) -> Script {
    Script {
        ops,
        mortal: false,
        thread_of: None,
        class: None,
    }
}

fn of_class(class: u8, script: Script) -> Script {
    Script {
        class: Some(class),
        ..script
    }
}

fn mortal(ops: &'static [Op]) -> Script {
    Script {
        mortal: true,
        ..actor(ops)
    }
}

struct Scenario {
    limit: u32,
    /// Bits counted at the start with no word owning them (a corrupt segment): the
    /// invariants hold for the others, and the janitor must clear these too.
    stray: u64,
    actors: Vec<Script>,
}

impl Scenario {
    /// The latest time any actor acts at: a lease that expires no later may have been
    /// reclaimed as expired, so its holder no longer counts as one.
    fn horizon(&self) -> u64 {
        let now = |op: &Op| match *op {
            Op::Acquire { now, .. } | Op::Reclaim { now } => now,
            Op::Release => 0,
        };
        self.actors
            .iter()
            .flat_map(|a| a.ops.iter().map(now))
            .max()
            .unwrap_or(0)
    }
}

/// What an actor is doing, as the invariants need it.
#[derive(Default)]
struct ActorState {
    /// The lease it holds, from the end of its acquire to the end of its release.
    holding: Cell<Option<Acquired>>,
    /// Shared accesses performed so far.
    accesses: Cell<u64>,
    /// `accesses` when its release began: from its next access on, the lease is being given
    /// back and its bit may legitimately be clear.
    release_from: Cell<Option<u64>>,
    busy: Cell<bool>,
    done: Cell<bool>,
    dead: Cell<bool>,
    /// A release of a lease that had not expired and that did not succeed.
    lost_release: Cell<bool>,
}

fn zeroed_entry() -> Box<Entry> {
    // SAFETY: an Entry is atomics only; all-zero is its initial state in a fresh segment.
    unsafe { Box::new(std::mem::zeroed()) }
}

fn reset(e: &Entry, stray: u64) {
    e.funnel_mask.store(stray, SeqCst);
    for s in &e.funnel_slots {
        s.word.store(0, SeqCst);
        s.expires_ms.store(0, SeqCst);
    }
}

async fn perform(
    e: &Entry,
    me: &ModelActor<'_>,
    limit: u32,
    horizon: u64,
    ops: &[Op],
    st: &ActorState,
) {
    for op in ops {
        st.busy.set(true);
        match *op {
            Op::Acquire { allow, now, lease } => {
                let got = protocol::acquire(e, me, allow, limit, now, lease).await;
                st.holding.set(got);
            }
            Op::Release => {
                if let Some(lease) = st.holding.get() {
                    st.release_from.set(Some(st.accesses.get()));
                    let ok = protocol::release(e, me, lease.slot, lease.held).await;
                    st.holding.set(None);
                    st.release_from.set(None);
                    if !ok && lease.expires_ms > horizon {
                        st.lost_release.set(true);
                    }
                }
            }
            Op::Reclaim { now } => {
                protocol::reclaim(e, me, limit, now).await;
            }
        }
        st.busy.set(false);
    }
    st.done.set(true);
}

/// Polls a model future until it completes (its pauses are only pauses).
fn complete<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

type Task<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;

/// Explores every schedule of `sc`; returns how many complete schedules there are.
fn explore(name: &str, sc: &Scenario) -> u64 {
    let started = std::time::Instant::now();
    let (schedules, states) = explore_all(sc);
    eprintln!(
        "model check '{name}': {schedules} schedules ({states} distinct states), all checked, in {:.1?}",
        started.elapsed()
    );
    schedules
}

/// One decision point of the schedule being explored.
struct Frame {
    state: u128,
    taken: usize,
    available: usize,
    /// Complete schedules found so far below this point.
    schedules: u64,
}

/// Depth-first over choice sequences, replaying each prefix from the start. A state seen
/// before (same shared words, same dead set, and each actor with the same history of what it
/// observed, hence the same local state) has its subtree explored already: the run stops
/// there and counts that subtree's schedules. Returns (schedules, distinct states).
fn explore_all(sc: &Scenario) -> (u64, usize) {
    let entry = zeroed_entry();
    let horizon = sc.horizon();
    let mut path: Vec<Frame> = Vec::new();
    let mut done: HashMap<u128, u64> = HashMap::new();
    loop {
        let mut found = run_one(&entry, sc, horizon, &mut path, &done);
        loop {
            let Some(top) = path.last_mut() else {
                return (found, done.len());
            };
            top.schedules += found;
            if top.taken + 1 < top.available {
                top.taken += 1;
                break;
            }
            found = top.schedules;
            done.insert(top.state, found);
            path.pop();
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Choice {
    Step(usize),
    Kill(usize),
}

/// A 128-bit digest (two keyed SipHashes) of some words.
fn digest(words: impl Iterator<Item = u64> + Clone) -> u128 {
    let half = |key: u64| {
        let mut h = DefaultHasher::new();
        key.hash(&mut h);
        for w in words.clone() {
            w.hash(&mut h);
        }
        h.finish() as u128
    };
    half(1) << 64 | half(2)
}

/// Who is dead, as a bit set.
fn dead_set(states: &[ActorState]) -> u64 {
    states
        .iter()
        .enumerate()
        .fold(0u64, |m, (i, st)| m | (st.dead.get() as u64) << i)
}

/// The value of the word an access is about to touch: what that access observes.
fn word_at(e: &Entry, at: At) -> u64 {
    match at {
        At::Mask => e.funnel_mask.load(SeqCst),
        At::Slot(i) => e.funnel_slots[i as usize].word.load(SeqCst),
        At::Expiry(i) => e.funnel_slots[i as usize].expires_ms.load(SeqCst),
    }
}

/// Runs one schedule: the choices in `path`, then the first choice at every new point,
/// until every actor is done or dead (returns 1) or a fully explored state is reached
/// (returns its count of schedules).
fn run_one(
    e: &Entry,
    sc: &Scenario,
    horizon: u64,
    path: &mut Vec<Frame>,
    done: &HashMap<u128, u64>,
) -> u64 {
    reset(e, sc.stray);
    // The stray bits not seen clear yet (once clear, a bit is an ordinary one).
    let mut stray = sc.stray;
    let graveyard = Graveyard::default();
    let actors: Vec<ModelActor> = (0..sc.actors.len())
        .map(|i| ModelActor::new(100 + sc.actors[i].thread_of.unwrap_or(i) as u32, &graveyard))
        .collect();
    let states: Vec<ActorState> = sc.actors.iter().map(|_| ActorState::default()).collect();
    let mut tasks: Vec<Task> = sc
        .actors
        .iter()
        .zip(&actors)
        .zip(&states)
        .map(|((script, me), st)| {
            Box::pin(perform(e, me, sc.limit, horizon, script.ops, st)) as Task
        })
        .collect();
    // Per actor: a digest of what each of its accesses observed (the word's value, and who
    // was dead for its liveness checks), which with its script fixes its local state.
    let mut history = vec![0u128; sc.actors.len()];
    let mut cx = Context::from_waker(Waker::noop());
    let mut depth = 0;
    let mut trace: Vec<Choice> = Vec::new();
    loop {
        let mut choices = Vec::new();
        for (i, st) in states.iter().enumerate() {
            if st.done.get() || st.dead.get() {
                continue;
            }
            choices.push(Choice::Step(i));
            if sc.actors[i].mortal {
                choices.push(Choice::Kill(i));
            }
        }
        if choices.is_empty() {
            break;
        }
        let dead = dead_set(&states);
        let state = digest(
            std::iter::once(e.funnel_mask.load(SeqCst) as u128)
                .chain(e.funnel_slots.iter().map(|s| {
                    (s.word.load(SeqCst) as u128) << 64 | s.expires_ms.load(SeqCst) as u128
                }))
                .chain(std::iter::once(dead as u128))
                .chain(history.iter().copied())
                .chain(states.iter().map(|st| st.done.get() as u128))
                .flat_map(|w| [w as u64, (w >> 64) as u64]),
        );
        let pick = if depth < path.len() {
            path[depth].taken
        } else {
            if let Some(&schedules) = done.get(&state) {
                return schedules;
            }
            path.push(Frame {
                state,
                taken: 0,
                available: choices.len(),
                schedules: 0,
            });
            0
        };
        depth += 1;
        match choices[pick] {
            Choice::Step(i) => {
                trace.push(Choice::Step(i));
                // The first poll only runs up to the first pause: it observes nothing.
                let seen = actors[i].next.get().map_or(u64::MAX, |at| {
                    states[i].accesses.set(states[i].accesses.get() + 1);
                    word_at(e, at)
                });
                let seen = [history[i] as u64, (history[i] >> 64) as u64, seen, dead];
                history[i] = digest(seen.into_iter());
                let _ = tasks[i].as_mut().poll(&mut cx);
            }
            Choice::Kill(i) => {
                trace.push(Choice::Kill(i));
                states[i].dead.set(true);
                states[i].holding.set(None);
                graveyard.0.borrow_mut().push(actors[i].pid);
            }
        }
        stray &= e.funnel_mask.load(SeqCst);
        check(e, sc, horizon, &states, stray, &trace);
    }
    // Every live actor finished its script (releasing what it held); a janitor that acts
    // before any lease expires must clear everything the dead left behind.
    let janitor = ModelActor::new(999, &graveyard);
    complete(protocol::reclaim(e, &janitor, sc.limit, 0));
    let mask = e.funnel_mask.load(SeqCst);
    assert_eq!(mask, 0, "bits left counted after {trace:?}");
    for (i, s) in e.funnel_slots.iter().enumerate() {
        let w = SlotWord(s.word.load(SeqCst));
        assert_eq!(
            w.phase(),
            Phase::Free,
            "slot {i} left {w:?} after {trace:?}"
        );
    }
    for (i, st) in states.iter().enumerate() {
        assert!(
            !st.lost_release.get(),
            "actor {i} lost a live lease in {trace:?}"
        );
    }
    1
}

fn check(
    e: &Entry,
    sc: &Scenario,
    horizon: u64,
    states: &[ActorState],
    stray: u64,
    trace: &[Choice],
) {
    // The stray bits are nobody's: the invariants are about the others.
    let mask = e.funnel_mask.load(SeqCst) & !stray;
    for slot in 0..MAX_FUNNEL_LIMIT {
        if mask & (1 << slot) != 0 {
            let w = SlotWord(e.funnel_slots[slot as usize].word.load(SeqCst));
            assert_ne!(
                w.phase(),
                Phase::Free,
                "bit {slot} counted with a free word after {trace:?}"
            );
        }
    }
    check_classes(e, sc, mask, trace);
    let counted = mask.count_ones();
    assert!(
        counted <= sc.limit,
        "{counted} counted over limit {} after {trace:?}",
        sc.limit
    );
    let releasing = |st: &ActorState| st.release_from.get().is_some_and(|k| st.accesses.get() > k);
    let live: Vec<Acquired> = states
        .iter()
        .filter(|st| !st.dead.get() && !releasing(st))
        .filter_map(|st| st.holding.get())
        .filter(|lease| lease.expires_ms > horizon)
        .collect();
    for lease in &live {
        let word = e.funnel_slots[lease.slot as usize].word.load(SeqCst);
        assert!(
            mask & (1 << lease.slot) != 0 && word == lease.held.0,
            "a live lease of slot {} lost its bit or word after {trace:?}",
            lease.slot
        );
    }
    let holders = live.len() as u32;
    assert!(
        holders <= counted,
        "{holders} hold a lease but {counted} are counted after {trace:?}"
    );
    let accountable = states
        .iter()
        .filter(|st| st.dead.get() || st.busy.get() || st.holding.get().is_some())
        .count() as u32;
    assert!(
        counted <= accountable,
        "{counted} counted but only {accountable} actors could hold after {trace:?}"
    );
}

/// Per class of actors: every counted bit whose word one of them owns as `Claiming` or `Held`
/// is among the class's slots, and there are at most its `within` of them.
fn check_classes(e: &Entry, sc: &Scenario, mask: u64, trace: &[Choice]) {
    let classes = sc.actors.iter().filter_map(|a| a.class);
    for class in classes.collect::<std::collections::BTreeSet<_>>() {
        let members: Vec<usize> = (0..sc.actors.len())
            .filter(|&i| sc.actors[i].class == Some(class))
            .collect();
        let allow = sc.actors[members[0]]
            .ops
            .iter()
            .find_map(|op| match *op {
                Op::Acquire { allow, .. } => Some(allow),
                _ => None,
            })
            .expect("a class acquires");
        let pids: Vec<u32> = members.iter().map(|&i| 100 + i as u32).collect();
        let mut owned = 0u64;
        for slot in 0..MAX_FUNNEL_LIMIT {
            if mask & (1 << slot) == 0 {
                continue;
            }
            let w = SlotWord(e.funnel_slots[slot as usize].word.load(SeqCst));
            if matches!(w.phase(), Phase::Claiming | Phase::Held) && pids.contains(&w.pid()) {
                owned |= 1 << slot;
            }
        }
        assert_eq!(
            owned & !allow.slots,
            0,
            "class {class} counted outside its slots after {trace:?}"
        );
        assert!(
            owned.count_ones() <= allow.within,
            "class {class} holds {} of at most {} after {trace:?}",
            owned.count_ones(),
            allow.within
        );
    }
}

const HOLD: &[Op] = &[
    Op::Acquire {
        allow: Allowance::any(1),
        now: 0,
        lease: 1000,
    },
    Op::Release,
];
const HOLD2: &[Op] = &[
    Op::Acquire {
        allow: Allowance::any(2),
        now: 0,
        lease: 1000,
    },
    Op::Release,
];
const RECLAIM: &[Op] = &[Op::Reclaim { now: 0 }];

#[test]
fn two_holders_and_a_reclaimer_on_one_slot() {
    let n = explore(
        "two holders and a reclaimer on one slot",
        &Scenario {
            limit: 1,
            stray: 0,
            actors: vec![actor(HOLD), actor(HOLD), actor(RECLAIM)],
        },
    );
    assert!(n > 1000);
}

/// The reported bug's shape: a lease that expired while its holder was paused (releasing),
/// a reclaimer, and a new holder of the same slot.
#[test]
fn an_expired_holder_a_reclaimer_and_a_new_holder() {
    let name = "an expired holder, a reclaimer and a new holder";
    const SHORT: &[Op] = &[
        Op::Acquire {
            allow: Allowance::any(1),
            now: 0,
            lease: 10,
        },
        Op::Release,
    ];
    const LATE_RECLAIM: &[Op] = &[Op::Reclaim { now: 20 }];
    const LATE_HOLD: &[Op] = &[
        Op::Acquire {
            allow: Allowance::any(1),
            now: 20,
            lease: 1000,
        },
        Op::Release,
    ];
    let n = explore(
        name,
        &Scenario {
            limit: 1,
            stray: 0,
            actors: vec![actor(SHORT), actor(LATE_RECLAIM), actor(LATE_HOLD)],
        },
    );
    assert!(n > 1000);
}

/// A holder killed at any step, another holder and a reclaimer, on two slots.
#[test]
fn a_holder_killed_anywhere() {
    let n = explore(
        "a holder killed anywhere",
        &Scenario {
            limit: 2,
            stray: 0,
            actors: vec![mortal(HOLD2), actor(HOLD2), actor(RECLAIM)],
        },
    );
    assert!(n > 1000);
}

/// A reclaimer killed at any step while a holder's lease has expired.
#[test]
fn a_reclaimer_killed_anywhere() {
    let name = "a reclaimer killed anywhere";
    const SHORT: &[Op] = &[
        Op::Acquire {
            allow: Allowance::any(1),
            now: 0,
            lease: 10,
        },
        Op::Release,
    ];
    const LATE_RECLAIM: &[Op] = &[Op::Reclaim { now: 20 }];
    let n = explore(
        name,
        &Scenario {
            limit: 1,
            stray: 0,
            actors: vec![actor(SHORT), mortal(LATE_RECLAIM), actor(LATE_RECLAIM)],
        },
    );
    assert!(n > 100);
}

/// A web caller (cap 2) and a background caller (cap 1, one slot reserved) on two slots.
#[test]
fn web_and_background_callers() {
    let name = "web and background callers";
    const BACKGROUND: &[Op] = &[
        Op::Acquire {
            allow: Allowance::any(1),
            now: 0,
            lease: 1000,
        },
        Op::Release,
    ];
    let n = explore(
        name,
        &Scenario {
            limit: 2,
            stray: 0,
            actors: vec![actor(HOLD2), actor(BACKGROUND), actor(RECLAIM)],
        },
    );
    assert!(n > 1000);
}

/// `share`'s split on three slots: a web caller kept to slot 0 (the reserve, while background
/// demand is recent) and two background callers that may use slots 1 and 2 but at most one of
/// them (`within` 1). Both background callers can find a free word, so only the `within` check
/// in the counting CAS keeps the second out. (Nobody is killed here: with a mortal background
/// caller the schedules take minutes; the next test kills on two slots.)
#[test]
fn a_split_between_web_and_background_slots() {
    const WEB: &[Op] = &[
        Op::Acquire {
            allow: Allowance {
                cap: 3,
                slots: 0b001,
                within: 1,
            },
            now: 0,
            lease: 1000,
        },
        Op::Release,
    ];
    const BACKGROUND: &[Op] = &[
        Op::Acquire {
            allow: Allowance {
                cap: 3,
                slots: 0b110,
                within: 1,
            },
            now: 0,
            lease: 1000,
        },
        Op::Release,
    ];
    let n = explore(
        "a split between web and background slots",
        &Scenario {
            limit: 3,
            stray: 0,
            actors: vec![
                of_class(1, actor(WEB)),
                of_class(2, actor(BACKGROUND)),
                of_class(2, actor(BACKGROUND)),
            ],
        },
    );
    assert!(n > 1000);
}

/// The same split on two slots as the design draws it (web kept to slot 0, background to slot
/// 1, each at most one), with the web caller killed at any step and a background caller that
/// reclaims what it left.
#[test]
fn a_split_with_a_web_caller_killed_anywhere() {
    const WEB: &[Op] = &[
        Op::Acquire {
            allow: Allowance {
                cap: 2,
                slots: 0b01,
                within: 1,
            },
            now: 0,
            lease: 1000,
        },
        Op::Release,
    ];
    const BACKGROUND: &[Op] = &[
        Op::Acquire {
            allow: Allowance {
                cap: 2,
                slots: 0b10,
                within: 1,
            },
            now: 0,
            lease: 1000,
        },
        Op::Release,
    ];
    const BACKGROUND_RECLAIM: &[Op] = &[BACKGROUND[0], BACKGROUND[1], Op::Reclaim { now: 0 }];
    let n = explore(
        "a split with a web caller killed anywhere",
        &Scenario {
            limit: 2,
            stray: 0,
            actors: vec![
                of_class(1, mortal(WEB)),
                of_class(2, actor(BACKGROUND_RECLAIM)),
            ],
        },
    );
    assert!(n > 1000);
}

/// A holder killed at any step on a full single slot: the next holder's own acquire must
/// reclaim it.
#[test]
fn a_dead_holder_reclaimed_by_the_next_acquire() {
    let name = "a dead holder reclaimed by the next acquire";
    let n = explore(
        name,
        &Scenario {
            limit: 1,
            stray: 0,
            actors: vec![mortal(HOLD), actor(HOLD)],
        },
    );
    assert!(n > 100);
}

/// Two mortal actors: a short lease and a late reclaimer, each killed at any step, with a
/// late holder.
#[test]
fn two_mortal_actors() {
    const SHORT: &[Op] = &[
        Op::Acquire {
            allow: Allowance::any(1),
            now: 0,
            lease: 10,
        },
        Op::Release,
    ];
    const LATE_RECLAIM: &[Op] = &[Op::Reclaim { now: 20 }];
    const LATE_HOLD: &[Op] = &[
        Op::Acquire {
            allow: Allowance::any(1),
            now: 20,
            lease: 1000,
        },
        Op::Release,
    ];
    let name = "two mortal actors and a late holder";
    let n = explore(
        name,
        &Scenario {
            limit: 1,
            stray: 0,
            actors: vec![mortal(SHORT), mortal(LATE_RECLAIM), actor(LATE_HOLD)],
        },
    );
    assert!(n > 1000);
}

/// Two threads of one process (one pid, as the HTTP client's tokio threads) and a reclaimer.
#[test]
fn two_threads_of_one_process() {
    let name = "two threads of one process and a reclaimer";
    let n = explore(
        name,
        &Scenario {
            limit: 2,
            stray: 0,
            actors: vec![
                actor(HOLD2),
                Script {
                    thread_of: Some(0),
                    ..actor(HOLD2)
                },
                actor(RECLAIM),
            ],
        },
    );
    assert!(n > 1000);
}

/// Drives one future one shared access at a time.
struct Stepped<'a> {
    task: Task<'a>,
    started: bool,
    done: bool,
}

impl<'a> Stepped<'a> {
    fn new(f: impl Future<Output = ()> + 'a) -> Self {
        Stepped {
            task: Box::pin(f),
            started: false,
            done: false,
        }
    }
    /// Performs `n` shared accesses (or fewer if the task ends).
    fn accesses(&mut self, n: usize) {
        let mut cx = Context::from_waker(Waker::noop());
        if !self.started {
            self.started = true;
            self.done = self.task.as_mut().poll(&mut cx).is_ready();
        }
        for _ in 0..n {
            if self.done {
                return;
            }
            self.done = self.task.as_mut().poll(&mut cx).is_ready();
        }
    }
    fn finish(&mut self) {
        self.accesses(usize::MAX >> 1);
    }
}

/// The release/reclaim race, replayed step by step: A's release paused after its first step, two
/// reclaims (B, C) and an acquire (D) run to completion, then A finishes. The old protocol
/// let B mark the slot orphaned, C free it, D take it, and A's late bit-clear erase D's bit.
#[test]
fn the_reported_interleaving_keeps_the_count_exact() {
    let e = zeroed_entry();
    let graveyard = Graveyard::default();
    let actor = |pid| ModelActor::new(pid, &graveyard);
    let (a, b, c, d) = (actor(1), actor(2), actor(3), actor(4));
    let Acquired { slot, held, .. } =
        complete(protocol::acquire(&e, &a, Allowance::any(1), 1, 100, 1000)).expect("A acquires");

    let mut a_release = Stepped::new(async {
        assert!(protocol::release(&e, &a, slot, held).await);
    });
    a_release.accesses(1); // Held → Clearing: A is now between its two steps.
    assert_eq!(
        complete(protocol::reclaim(&e, &b, 1, 100)),
        0,
        "B frees nothing"
    );
    assert_eq!(
        complete(protocol::reclaim(&e, &c, 1, 100)),
        0,
        "C frees nothing"
    );
    assert!(
        complete(protocol::acquire(&e, &d, Allowance::any(1), 1, 100, 1000)).is_none(),
        "D finds the slot still counted while A releases it"
    );
    a_release.finish();
    assert_eq!(e.funnel_mask.load(SeqCst).count_ones(), 0);
    let got = complete(protocol::acquire(&e, &d, Allowance::any(1), 1, 100, 1000));
    assert!(got.is_some(), "D acquires once A is done");
    assert_eq!(
        e.funnel_mask.load(SeqCst).count_ones(),
        1,
        "one holder, one counted"
    );
}

/// The same with A's lease expired while it was paused: B takes the slot over, and A's late
/// steps must not touch the bit of D, who holds the slot next.
#[test]
fn a_release_paused_past_its_lease_cannot_erase_the_next_holder() {
    let e = zeroed_entry();
    let graveyard = Graveyard::default();
    let actor = |pid| ModelActor::new(pid, &graveyard);
    let (a, b, d) = (actor(1), actor(2), actor(4));
    let Acquired { slot, held, .. } =
        complete(protocol::acquire(&e, &a, Allowance::any(1), 1, 0, 10)).unwrap();
    let mut a_release = Stepped::new(async {
        protocol::release(&e, &a, slot, held).await;
    });
    a_release.accesses(0); // A is about to swap Held → Clearing.
    assert_eq!(
        complete(protocol::reclaim(&e, &b, 1, 20)),
        1,
        "B reclaims the expired lease"
    );
    let next = complete(protocol::acquire(&e, &d, Allowance::any(1), 1, 20, 1000));
    assert!(next.is_some());
    a_release.finish();
    assert_eq!(
        e.funnel_mask.load(SeqCst).count_ones(),
        1,
        "D's bit survives A's late release"
    );
}

/// A bit counted with no owner (a corrupt segment) on the one slot, two holders that find the
/// funnel full because of it and a reclaimer: the stray is cleared, and no lease ever loses
/// its bit.
#[test]
fn a_stray_bit_beside_two_holders_and_a_reclaimer() {
    let n = explore(
        "a stray bit beside two holders and a reclaimer",
        &Scenario {
            limit: 1,
            stray: 0b1,
            actors: vec![actor(HOLD), actor(HOLD), actor(RECLAIM)],
        },
    );
    assert!(n > 1000);
}

/// A stray bit, a holder, and a reclaimer killed at any step while clearing it.
#[test]
fn a_reclaimer_killed_while_clearing_a_stray_bit() {
    let n = explore(
        "a reclaimer killed while clearing a stray bit",
        &Scenario {
            limit: 2,
            stray: 0b01,
            actors: vec![mortal(RECLAIM), actor(HOLD2)],
        },
    );
    assert!(n > 100);
}
