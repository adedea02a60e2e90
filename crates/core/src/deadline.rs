//! Nested deadlines for one process (one PHP request at a time).
//!
//! `Deadline::within(60, fn)` pushes `min(outer, now + 60 s)`: an inner scope can only
//! shorten the time left, never extend it. The binding pops on every exit path and
//! clears the stack at request start and end, so nothing leaks into the next request.

/// The smallest value [`DeadlineStack::cap`] returns: a timeout of zero would mean "no
/// timeout" to many transports.
pub const CAP_FLOOR_SECONDS: f64 = 0.001;

/// The deepest nesting of scopes. Each scope is a PHP call through the extension (a few KB
/// of C stack): without a limit, runaway recursion through `Deadline::within` overflows the
/// stack (SIGSEGV at about 5,100 levels with an 8 MB stack). No real program nests deadlines
/// this deep; PHP itself survives about 13,000 plain frames.
pub const MAX_DEPTH: usize = 1_000;

/// Deadlines as absolute `CLOCK_MONOTONIC` nanoseconds, innermost last.
#[derive(Debug, Default, Clone)]
pub struct DeadlineStack {
    stack: Vec<u64>,
}

impl DeadlineStack {
    pub const fn new() -> Self {
        DeadlineStack { stack: Vec::new() }
    }

    /// Enters a scope of `seconds` (validated by the caller) and returns the depth to pop
    /// back to. Refused beyond [`MAX_DEPTH`] scopes.
    pub fn push(&mut self, seconds: f64, now_ns: u64) -> Result<usize, crate::Error> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(crate::Error::too_deep(
                "Deadline::within",
                format!("nested more than {MAX_DEPTH} deep; infinite recursion?"),
            ));
        }
        let at = now_ns.saturating_add(crate::clock::secs_to_ns(seconds));
        let at = self.current().map_or(at, |outer| outer.min(at));
        self.stack.push(at);
        Ok(self.stack.len() - 1)
    }

    /// Leaves every scope entered at or after `depth`.
    pub fn pop_to(&mut self, depth: usize) {
        self.stack.truncate(depth);
    }

    pub fn clear(&mut self) {
        self.stack.clear();
    }

    pub fn depth(&self) -> usize {
        self.stack.len()
    }

    /// The effective deadline (the innermost is always the earliest).
    pub fn current(&self) -> Option<u64> {
        self.stack.last().copied()
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

#[cfg(test)]
mod tests {
    use super::*;
    const S: u64 = 1_000_000_000;

    #[test]
    fn earliest_wins_and_outer_is_restored() {
        let mut d = DeadlineStack::new();
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

    #[test]
    fn nesting_is_limited_and_the_stack_stays_usable() {
        let mut d = DeadlineStack::new();
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
        let mut d = DeadlineStack::new();
        assert_eq!(d.cap(30.0, 0), 30.0);
        d.push(5.0, 0).unwrap();
        assert_eq!(d.cap(30.0, 0), 5.0);
        assert_eq!(d.cap(1.0, 0), 1.0);
        assert_eq!(d.cap(30.0, 10 * S), CAP_FLOOR_SECONDS);
        assert_eq!(d.remaining(10 * S), Some(0.0));
    }
}
