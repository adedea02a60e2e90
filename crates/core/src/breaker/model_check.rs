//! Exhaustive interleaving checks of the breaker protocol, in the manner of the funnel's.
//!
//! Each actor runs a script of protocol operations (the real `protocol` functions) as a future
//! that pauses before every shared access; the driver explores every schedule depth-first (and,
//! for a mortal actor, its death before any of its accesses) by replaying choice prefixes. After
//! every access it checks the invariants:
//!
//! - one probe: a ticket is granted at `t` only if every earlier ticket was resolved or its
//!   bound is `<= t` (given up);
//! - a resolution that changed the state came from the latest ticket (a given-up probe's late
//!   report decides nothing);
//! - the breaker opens at most once per closed period, and never on an attempt sent before the
//!   close (a scenario's `opens`).
//!
//! At the end of every schedule, a caller long after every bound and open period is never
//! refused: the breaker cannot stay half-open (or open) for ever, whoever was killed where.

use super::protocol::{self, At, Pause};
use super::state_word::{Phase, StateWord};
use super::{Admission, BreakerConfig, Ticket, Transition};
use crate::layout::BreakerBlock;
use crate::pause::PendingOnce;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::SeqCst;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// Pauses before every access to the state word and to bucket 0, the only bucket the scenarios
/// count into (every other bucket stays zero, so no schedule can tell when it was read).
struct ModelActor;

impl Pause for ModelActor {
    fn step(&self, at: At) -> impl Future<Output = ()> {
        PendingOnce(matches!(at, At::Bucket(i) if i != 0))
    }
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Admit {
        now: u64,
    },
    /// Resolves the ticket this actor holds, if any.
    Resolve {
        success: bool,
        now: u64,
    },
    /// An attempt sent at `started` ended at `now`.
    Record {
        failure: bool,
        started: u64,
        now: u64,
    },
    /// Gives the ticket this actor holds back (its attempt was refused by another guard).
    GiveBack {
        now: u64,
    },
}

struct Script {
    ops: &'static [Op],
    mortal: bool,
}

const fn actor(ops: &'static [Op]) -> Script {
    Script { ops, mortal: false }
}
const fn mortal(ops: &'static [Op]) -> Script {
    Script { ops, mortal: true }
}

struct Scenario {
    /// The state word at the start; a half-open start has a ticket held by a ghost (a probe
    /// of a process that will only report at `ghost_report`, if ever).
    start: StateWord,
    ghost_report: Option<(bool, u64)>,
    config: BreakerConfig,
    actors: Vec<Script>,
    /// After everything: a caller at this time must not be refused.
    late: u64,
    /// How often the breaker must have opened, in every schedule (when checked).
    opens: Option<u32>,
    /// Failures counted before the start, `(epoch, n)`: `n` in the bucket of `epoch` and a
    /// streak of `n` (the outage that opened the breaker).
    failures_before: Option<(u64, u64)>,
}

/// One ticket granted, in grant order.
#[derive(Clone, Copy, Debug)]
struct Grant {
    ticket: Ticket,
    resolved: bool,
}

#[derive(Default)]
struct Log {
    grants: RefCell<Vec<Grant>>,
    opened: Cell<u32>,
    closed: Cell<u32>,
    violation: RefCell<Option<String>>,
}

impl Log {
    fn fail(&self, why: String) {
        self.violation.borrow_mut().get_or_insert(why);
    }

    fn granted(&self, ticket: Ticket, at: u64) {
        let mut grants = self.grants.borrow_mut();
        for g in grants.iter() {
            if !g.resolved && g.ticket.bound_ms() > at {
                self.fail(format!(
                    "a second probe at {at} while {g:?} was out and within its bound"
                ));
            }
        }
        grants.push(Grant {
            ticket,
            resolved: false,
        });
    }

    fn resolved(&self, ticket: Ticket, transition: Option<Transition>) {
        let mut grants = self.grants.borrow_mut();
        let Some(i) = grants.iter().position(|g| g.ticket == ticket) else {
            return self.fail(format!("resolved an unknown ticket {ticket:?}"));
        };
        match transition {
            Some(t) => {
                if i + 1 != grants.len() {
                    self.fail(format!("a given-up ticket {ticket:?} decided {t:?}"));
                }
                grants[i].resolved = true;
                if t == Transition::Closed {
                    self.closed.set(self.closed.get() + 1);
                }
            }
            None => {
                if i + 1 == grants.len() && !grants[i].resolved {
                    // The latest ticket's report may only fail if nothing else moved the
                    // state since; nothing else can (only tickets move a half-open word).
                    self.fail(format!("the latest ticket {ticket:?} could not resolve"));
                }
            }
        }
    }

    fn opened(&self) {
        self.opened.set(self.opened.get() + 1);
        if self.opened.get() > self.closed.get() + 1 {
            self.fail("opened twice in one closed period".into());
        }
    }
}

#[derive(Default)]
struct ActorState {
    ticket: Cell<Option<Ticket>>,
    done: Cell<bool>,
    dead: Cell<bool>,
}

const MID: u64 = 1 << 63;

async fn perform(b: &BreakerBlock, sc: &Scenario, ops: &[Op], st: &ActorState, log: &Log) {
    let me = ModelActor;
    for op in ops {
        match *op {
            Op::Admit { now } => {
                if let Admission::Probe { ticket, .. } =
                    protocol::admit(b, &me, &sc.config, now).await
                {
                    log.granted(ticket, now);
                    st.ticket.set(Some(ticket));
                }
            }
            Op::Resolve { success, now } => {
                if let Some(ticket) = st.ticket.take() {
                    let t = protocol::resolve(b, &me, &sc.config, ticket, success, now, MID).await;
                    log.resolved(ticket, t);
                }
            }
            Op::GiveBack { now } => {
                if let Some(ticket) = st.ticket.take() {
                    let back = protocol::give_back(b, &me, ticket, now).await;
                    log.resolved(ticket, back.then_some(Transition::Reopened));
                }
            }
            Op::Record {
                failure,
                started,
                now,
            } => {
                if protocol::record(b, &me, &sc.config, failure, (started, now), MID).await
                    == Some(Transition::Opened)
                {
                    log.opened();
                }
            }
        }
    }
    st.done.set(true);
}

fn zeroed_block() -> Box<BreakerBlock> {
    // SAFETY: a BreakerBlock is atomics only; all zero is its initial state in a fresh segment.
    unsafe { Box::new(std::mem::zeroed()) }
}

fn complete<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Choice {
    Step(usize),
    Kill(usize),
}

type Task<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;

/// Explores every schedule of `sc`; returns how many there are.
fn explore(name: &str, sc: &Scenario) -> u64 {
    let started = std::time::Instant::now();
    let b = zeroed_block();
    // (taken, available) per decision point of the schedule being explored.
    let mut path: Vec<(usize, usize)> = Vec::new();
    let mut schedules = 0u64;
    loop {
        run_one(&b, sc, &mut path);
        schedules += 1;
        while let Some(top) = path.last_mut() {
            if top.0 + 1 < top.1 {
                top.0 += 1;
                break;
            }
            path.pop();
        }
        if path.is_empty() {
            break;
        }
    }
    eprintln!(
        "model check '{name}': {schedules} schedules, all checked, in {:.1?}",
        started.elapsed()
    );
    schedules
}

fn run_one(b: &BreakerBlock, sc: &Scenario, path: &mut Vec<(usize, usize)>) {
    b.state.store(sc.start.0, SeqCst);
    for bucket in &b.buckets {
        bucket.store(0, SeqCst);
    }
    b.streak.store(0, SeqCst);
    if let Some((epoch, n)) = sc.failures_before {
        protocol::count_failures(b, epoch, n);
    }
    let log = Log::default();
    let ghost = (sc.start.phase() == Phase::HalfOpen).then_some(Ticket(sc.start));
    if let Some(t) = ghost {
        log.grants.borrow_mut().push(Grant {
            ticket: t,
            resolved: false,
        });
    }
    let states: Vec<ActorState> = sc.actors.iter().map(|_| ActorState::default()).collect();
    let ghost_state = ActorState::default();
    ghost_state.ticket.set(ghost);
    let ghost_ops: Vec<Op> = sc
        .ghost_report
        .map(|(success, now)| Op::Resolve { success, now })
        .into_iter()
        .collect();
    let mut tasks: Vec<Task> = sc
        .actors
        .iter()
        .zip(&states)
        .map(|(script, st)| Box::pin(perform(b, sc, script.ops, st, &log)) as Task)
        .collect();
    let mut all: Vec<&ActorState> = states.iter().collect();
    let mut mortal: Vec<bool> = sc.actors.iter().map(|a| a.mortal).collect();
    if !ghost_ops.is_empty() {
        tasks.push(Box::pin(perform(b, sc, &ghost_ops, &ghost_state, &log)));
        all.push(&ghost_state);
        mortal.push(false);
    }
    let mut cx = Context::from_waker(Waker::noop());
    let mut depth = 0;
    let mut trace = Vec::new();
    loop {
        let mut choices = Vec::new();
        for (i, st) in all.iter().enumerate() {
            if st.done.get() || st.dead.get() {
                continue;
            }
            choices.push(Choice::Step(i));
            if mortal[i] {
                choices.push(Choice::Kill(i));
            }
        }
        if choices.is_empty() {
            break;
        }
        let pick = if depth < path.len() {
            path[depth].0
        } else {
            path.push((0, choices.len()));
            0
        };
        depth += 1;
        let choice = choices[pick];
        trace.push(choice);
        match choice {
            Choice::Step(i) => {
                let _ = tasks[i].as_mut().poll(&mut cx);
            }
            Choice::Kill(i) => all[i].dead.set(true),
        }
        if let Some(why) = log.violation.borrow().as_ref() {
            panic!("{why} after {trace:?}");
        }
    }
    if let Some(n) = sc.opens {
        assert_eq!(
            log.opened.get(),
            n,
            "opened {} times after {trace:?}",
            log.opened.get()
        );
    }
    let admission = complete(protocol::admit(b, &ModelActor, &sc.config, sc.late));
    assert!(
        !matches!(admission, Admission::Refused { .. }),
        "refused at {} (state {:?}) after {trace:?}",
        sc.late,
        StateWord(b.state.load(SeqCst))
    );
}

fn config(min_calls: u32) -> BreakerConfig {
    let ms = Duration::from_millis;
    // window 10 s, open 5 s (± 20 %), probe bound 1 s.
    BreakerConfig::new(0.5, min_calls, ms(10_000), ms(5_000), ms(1_000)).unwrap()
}

/// Three callers reach the end of the open period at once: exactly one probes.
#[test]
fn three_callers_at_the_half_open_moment() {
    const A: &[Op] = &[
        Op::Admit { now: 100 },
        Op::Resolve {
            success: true,
            now: 150,
        },
    ];
    const B: &[Op] = &[
        Op::Admit { now: 100 },
        Op::Resolve {
            success: false,
            now: 150,
        },
    ];
    let sc = Scenario {
        start: StateWord::new(Phase::Open, 1, 100),
        ghost_report: None,
        config: config(1),
        actors: vec![actor(A), actor(B), actor(A)],
        late: 20_000,
        opens: None,
        failures_before: None,
    };
    let n = explore("three callers at the half-open moment", &sc);
    assert!(n > 100);
}

/// The probe's process is killed at any step; two callers arrive after its bound: one takes
/// the ticket over; the dead probe never blocks the breaker.
#[test]
fn a_probe_killed_anywhere() {
    const FIRST: &[Op] = &[
        Op::Admit { now: 100 },
        Op::Resolve {
            success: true,
            now: 150,
        },
    ];
    const LATE_OK: &[Op] = &[
        Op::Admit { now: 1_100 },
        Op::Resolve {
            success: true,
            now: 1_150,
        },
    ];
    const LATE_FAIL: &[Op] = &[
        Op::Admit { now: 1_100 },
        Op::Resolve {
            success: false,
            now: 1_150,
        },
    ];
    let sc = Scenario {
        start: StateWord::new(Phase::Open, 1, 100),
        ghost_report: None,
        config: config(1),
        actors: vec![mortal(FIRST), actor(LATE_OK), actor(LATE_FAIL)],
        late: 20_000,
        opens: None,
        failures_before: None,
    };
    let n = explore("a probe killed anywhere", &sc);
    assert!(n > 100);
}

/// A probe that hangs past its bound (the ghost) reports late, while two callers take the ticket
/// over at the bound: its report decides nothing once the ticket was taken over.
#[test]
fn a_late_report_of_a_given_up_probe() {
    const AT_BOUND: &[Op] = &[
        Op::Admit { now: 1_000 },
        Op::Resolve {
            success: false,
            now: 1_050,
        },
    ];
    const AT_BOUND_OK: &[Op] = &[
        Op::Admit { now: 1_000 },
        Op::Resolve {
            success: true,
            now: 1_050,
        },
    ];
    let sc = Scenario {
        start: StateWord::new(Phase::HalfOpen, 2, 1_000),
        ghost_report: Some((true, 1_200)),
        config: config(1),
        actors: vec![actor(AT_BOUND), mortal(AT_BOUND_OK)],
        late: 20_000,
        opens: None,
        failures_before: None,
    };
    let n = explore("a late report of a given-up probe", &sc);
    assert!(n > 20);
}

/// Two failures and a success counted by three processes at once, and a caller: whatever the
/// order, the breaker opens exactly once (2 of 3 failed, `min_calls` 2).
#[test]
fn failures_counted_at_once_open_once() {
    const FAIL: &[Op] = &[Op::Record {
        failure: true,
        started: 10,
        now: 10,
    }];
    const OK: &[Op] = &[
        Op::Record {
            failure: false,
            started: 10,
            now: 10,
        },
        Op::Admit { now: 10 },
    ];
    let sc = Scenario {
        start: StateWord(0),
        ghost_report: None,
        config: config(2),
        actors: vec![actor(FAIL), actor(FAIL), actor(OK)],
        late: 20_000,
        opens: Some(1),
        failures_before: None,
    };
    let n = explore("failures counted at once open once", &sc);
    assert!(n > 100);
}

/// A probe refused by the funnel gives its ticket back while two callers arrive: one of them
/// probes next, never two at once, and the breaker ends closed or open, never stuck.
#[test]
fn a_ticket_given_back() {
    const BACK: &[Op] = &[Op::Admit { now: 100 }, Op::GiveBack { now: 101 }];
    const NEXT: &[Op] = &[
        Op::Admit { now: 102 },
        Op::Resolve {
            success: true,
            now: 150,
        },
    ];
    let sc = Scenario {
        start: StateWord::new(Phase::Open, 1, 100),
        ghost_report: None,
        config: config(1),
        actors: vec![mortal(BACK), actor(NEXT), actor(NEXT)],
        late: 20_000,
        opens: None,
        failures_before: None,
    };
    let n = explore("a ticket given back", &sc);
    assert!(n > 100);
}

/// An attempt sent long before (during the outage) fails while the probe closes the breaker:
/// whatever the order, it is never what reopens it, though one failure would (`min_calls` 1).
#[test]
fn a_stale_failure_racing_the_close() {
    const PROBE: &[Op] = &[
        Op::Admit { now: 10_000 },
        Op::Resolve {
            success: true,
            now: 10_010,
        },
    ];
    const STALE: &[Op] = &[Op::Record {
        failure: true,
        started: 0,
        now: 10_020,
    }];
    let sc = Scenario {
        start: StateWord::new(Phase::Open, 1, 10_000),
        ghost_report: None,
        config: config(1),
        actors: vec![actor(PROBE), actor(STALE)],
        late: 20_000,
        opens: Some(0),
        failures_before: None,
    };
    let n = explore("a stale failure racing the close", &sc);
    assert!(n > 10, "{n}");
}

/// The probe's process is killed at any step of its report (right after its close, above all),
/// while an attempt sent after the close fails: one failure is not the `consecutive_failures`
/// (2) in a row of the outage, so it never reopens the breaker. Before, a resolver killed right
/// after its close left the outage's streak and bucket behind, and the next single failure
/// reopened the breaker.
#[test]
fn a_resolver_killed_after_its_close() {
    const PROBE: &[Op] = &[
        Op::Admit { now: 10_100 },
        Op::Resolve {
            success: true,
            now: 10_110,
        },
    ];
    const AFTER: &[Op] = &[Op::Record {
        failure: true,
        started: 10_120,
        now: 10_130,
    }];
    let ms = Duration::from_millis;
    let sc = Scenario {
        // Opened at 10 000 for 100 ms by two failures: they, the close and the failure after
        // it all fall in one bucket (500 ms: 10 000 to 10 499).
        start: StateWord::new(Phase::Open, 1, 10_100),
        ghost_report: None,
        config: BreakerConfig::new(0.5, 2, ms(10_000), ms(100), ms(1_000)).unwrap(),
        actors: vec![mortal(PROBE), actor(AFTER)],
        late: 20_000,
        opens: Some(0),
        failures_before: Some((20, 2)),
    };
    let n = explore("a resolver killed after its close", &sc);
    assert!(n > 10, "{n}");
}

/// Pauses before every access (what the replay below steps through one by one).
struct EveryAccess;

impl Pause for EveryAccess {
    fn step(&self, _: At) -> impl Future<Output = ()> {
        PendingOnce(false)
    }
}

/// A given-up probe's late success, paused after its "still my ticket" check and before it
/// empties its bucket and the streak, while another caller takes the ticket over, closes the
/// breaker and counts 5 failures in a row: resumed, it emptied the new period's streak, so
/// the 6th failure in a row (`consecutive_failures` 6) did not open the breaker.
#[test]
fn a_late_report_paused_after_its_check_leaves_the_next_period_counting() {
    let ms = Duration::from_millis;
    let cfg = BreakerConfig::new(0.5, 1000, ms(10_000), ms(5_000), ms(1_000))
        .unwrap()
        .with_consecutive_failures(6)
        .unwrap();
    let b = zeroed_block();
    let ghost = StateWord::new(Phase::HalfOpen, 5, 10_000); // its bound: 10 s
    b.state.store(ghost.0, SeqCst);
    let me = protocol::ThisProcess;
    let late = protocol::resolve(&b, &EveryAccess, &cfg, Ticket(ghost), true, 9_990, 0);
    let mut late = std::pin::pin!(late);
    let mut cx = Context::from_waker(Waker::noop());
    // Three accesses in: past its check of the state (still its ticket), before it empties the
    // streak (whatever it reads of them first).
    for _ in 0..3 {
        assert!(late.as_mut().poll(&mut cx).is_pending());
    }

    let Admission::Probe { ticket, took_over } = complete(protocol::admit(&b, &me, &cfg, 10_500))
    else {
        panic!("the bound passed: a probe")
    };
    assert!(took_over);
    let closed = complete(protocol::resolve(&b, &me, &cfg, ticket, true, 10_600, 0));
    assert_eq!(closed, Some(Transition::Closed));
    for i in 0..5u64 {
        let t = 10_700 + i * 100;
        let failed = protocol::record(&b, &me, &cfg, true, (t - 50, t), 1 << 63);
        assert_eq!(complete(failed), None);
    }
    assert_eq!(complete(late), None, "given up: it decides nothing");
    let sixth = protocol::record(&b, &me, &cfg, true, (11_150, 11_200), 1 << 63);
    assert_eq!(
        complete(sixth),
        Some(Transition::Opened),
        "6 failures in a row"
    );
}
