//! Nested deadlines for one process (one PHP request at a time).
//!
//! `Deadline::within(60, fn)` enters a scope ending 60 s from now; the earliest open scope
//! wins, so an inner scope can only shorten the time left, never extend it. The binding pops
//! on every exit path and clears everything at request start and end, so nothing leaks into
//! the next request.

use std::collections::BTreeSet;

/// The smallest value [`DeadlineStack::cap`] returns: a timeout of zero would mean "no
/// timeout" to many transports.
pub const CAP_FLOOR_SECONDS: f64 = 0.001;

/// The deepest nesting of scopes. Each scope is a PHP call through the extension (a few KB
/// of C stack): without a limit, runaway recursion through `Deadline::within` overflows the
/// stack (SIGSEGV at about 5,100 levels with an 8 MB stack). No real program nests deadlines
/// this deep; PHP itself survives about 13,000 plain frames.
pub const MAX_DEPTH: usize = 1_000;

/// One scope: its own deadline (absolute `CLOCK_MONOTONIC` ns) and which `within()` entered it.
#[derive(Debug, Clone, Copy)]
struct Scope {
    at: u64,
    id: u64,
}

/// One fiber context's scopes, innermost last. A Fiber starts with a copy of those in force
/// where it starts; each bounds it only while the `within()` that entered it runs (its id is
/// open in [`Deadlines`]), so a long-lived Fiber (an event loop's) is not held for ever to a
/// deadline that ended.
#[derive(Debug, Default, Clone)]
pub struct DeadlineStack {
    stack: Vec<Scope>,
}

impl DeadlineStack {
    pub const fn new() -> Self {
        DeadlineStack { stack: Vec::new() }
    }

    pub fn depth(&self) -> usize {
        self.stack.len()
    }
}

/// The process's deadline scopes: the running fiber context's stack, and which scopes are
/// still open (entered by a `within()` that has not returned). The earliest open deadline
/// in the stack wins: an inner scope can only shorten the time left.
#[derive(Debug, Default)]
pub struct Deadlines {
    running: DeadlineStack,
    open: BTreeSet<u64>,
    next_id: u64,
}

impl Deadlines {
    pub const fn new() -> Self {
        Deadlines {
            running: DeadlineStack::new(),
            open: BTreeSet::new(),
            next_id: 0,
        }
    }

    /// Enters a scope of `seconds` (validated by the caller) and returns the depth to pop
    /// back to. Refused beyond [`MAX_DEPTH`] scopes.
    pub fn push(&mut self, seconds: f64, now_ns: u64) -> Result<usize, crate::Error> {
        if self.running.stack.len() >= MAX_DEPTH {
            return Err(crate::Error::too_deep(
                "Deadline::within",
                format!("nested more than {MAX_DEPTH} deep; infinite recursion?"),
            ));
        }
        let id = self.next_id;
        self.next_id += 1;
        self.open.insert(id);
        let at = now_ns.saturating_add(crate::clock::secs_to_ns(seconds));
        self.running.stack.push(Scope { at, id });
        Ok(self.running.stack.len() - 1)
    }

    /// Leaves every scope entered at or after `depth` in the running context.
    pub fn pop_to(&mut self, depth: usize) {
        leave(&mut self.running, &mut self.open, depth);
    }

    /// Leaves every scope entered at or after `depth` in `stack` (a context not running: a
    /// bailout in a Fiber ends the main context's scopes).
    pub fn pop_in(&mut self, stack: &mut DeadlineStack, depth: usize) {
        leave(stack, &mut self.open, depth);
    }

    /// Makes `incoming` the running context's scopes (a context never seen, a Fiber starting:
    /// `None`, a copy of the open scopes in force) and returns the outgoing context's.
    pub fn switch_to(&mut self, incoming: Option<DeadlineStack>) -> DeadlineStack {
        let next = incoming.unwrap_or_else(|| DeadlineStack {
            stack: (self.running.stack.iter())
                .filter(|s| self.open.contains(&s.id))
                .copied()
                .collect(),
        });
        std::mem::replace(&mut self.running, next)
    }

    /// Forgets every scope of every context (request start and end).
    pub fn clear(&mut self) {
        self.running.stack.clear();
        self.open.clear();
    }

    pub fn depth(&self) -> usize {
        self.running.depth()
    }

    /// The effective deadline: the earliest open scope's.
    pub fn current(&self) -> Option<u64> {
        (self.running.stack.iter())
            .filter(|s| self.open.contains(&s.id))
            .map(|s| s.at)
            .min()
    }

    /// Seconds left, 0 when passed; `None` outside any scope.
    pub fn remaining(&self, now_ns: u64) -> Option<f64> {
        self.current()
            .map(|at| at.saturating_sub(now_ns) as f64 / 1e9)
    }

    /// `min(seconds, remaining)`, never below [`CAP_FLOOR_SECONDS`].
    pub fn cap(&self, seconds: f64, now_ns: u64) -> f64 {
        let capped = match self.remaining(now_ns) {
            Some(left) => seconds.min(left),
            None => seconds,
        };
        capped.max(CAP_FLOOR_SECONDS)
    }
}

/// Drops `stack`'s scopes from `depth` on and closes them: copies of them in Fibers started
/// inside stop bounding those Fibers.
fn leave(stack: &mut DeadlineStack, open: &mut BTreeSet<u64>, depth: usize) {
    for scope in stack.stack.drain(depth.min(stack.stack.len())..) {
        open.remove(&scope.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const S: u64 = 1_000_000_000;

    #[test]
    fn earliest_wins_and_outer_is_restored() {
        let mut d = Deadlines::new();
        assert_eq!(d.remaining(0), None);
        let outer = d.push(10.0, 0).unwrap();
        assert_eq!(d.remaining(0), Some(10.0));
        let inner = d.push(60.0, S).unwrap();
        assert_eq!(
            d.remaining(S),
            Some(9.0),
            "a longer inner scope cannot extend"
        );
        d.pop_to(inner);
        let inner = d.push(2.0, S).unwrap();
        assert_eq!(d.remaining(S), Some(2.0));
        d.pop_to(inner);
        assert_eq!(d.remaining(S), Some(9.0));
        d.pop_to(outer);
        assert_eq!(d.remaining(S), None);
    }

    /// A Fiber started inside a scope is bounded by it while its `within()` runs, and no
    /// longer once it returned: a long-lived Fiber (an event loop's) is not held for ever to
    /// an old deadline, nor a scope of its own cut by it.
    #[test]
    fn a_fibers_copy_of_a_scope_ends_with_it() {
        let mut d = Deadlines::new();
        let outer = d.push(3.0, 0).unwrap();
        // The Fiber starts (a copy of the scopes in force), then suspends.
        let main = d.switch_to(None);
        assert_eq!(d.remaining(S), Some(2.0));
        let fiber = d.switch_to(Some(main));
        assert_eq!(d.remaining(S), Some(2.0), "main's own scope");
        // Resumed while the scope is still open: still bounded.
        let main = d.switch_to(Some(fiber));
        assert_eq!(d.remaining(S), Some(2.0));
        let fiber = d.switch_to(Some(main));
        // The scope's within() returns in main.
        d.pop_to(outer);
        assert_eq!(d.remaining(5 * S), None);
        // Resumed later, outside any scope: unbounded, and a scope of its own is its own.
        let main = d.switch_to(Some(fiber));
        assert_eq!(d.remaining(5 * S), None);
        let own = d.push(30.0, 5 * S).unwrap();
        assert_eq!(own, 1, "the ended copy still takes its place in the stack");
        assert_eq!(d.remaining(5 * S), Some(30.0));
        d.pop_to(own);
        let _fiber = d.switch_to(Some(main));
        // A Fiber started now, outside any scope, copies nothing.
        let _main = d.switch_to(None);
        assert_eq!(d.depth(), 0);
    }

    #[test]
    fn nesting_is_limited_and_the_stack_stays_usable() {
        let mut d = Deadlines::new();
        for _ in 0..MAX_DEPTH {
            d.push(1.0, 0).unwrap();
        }
        let e = d.push(1.0, 0).unwrap_err();
        assert!(e.is_too_deep(), "{e}");
        assert!(e.to_string().contains("more than 1000 deep"), "{e}");
        assert_eq!(d.depth(), MAX_DEPTH);
        d.pop_to(0);
        assert_eq!(d.push(1.0, 0).unwrap(), 0);
    }

    #[test]
    fn cap_and_floor() {
        let mut d = Deadlines::new();
        assert_eq!(d.cap(30.0, 0), 30.0);
        d.push(5.0, 0).unwrap();
        assert_eq!(d.cap(30.0, 0), 5.0);
        assert_eq!(d.cap(1.0, 0), 1.0);
        assert_eq!(d.cap(30.0, 10 * S), CAP_FLOOR_SECONDS);
        assert_eq!(d.remaining(10 * S), Some(0.0));
    }
}
