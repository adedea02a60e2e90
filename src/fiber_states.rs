//! Which Fibers are suspended (by `Fiber::suspend()`), as the fiber-switch observer sees the
//! switches.
//!
//! A fatal error ends the running code and every context that resumed it, up to the main
//! one; a suspended Fiber survives it, and a shutdown function may resume it. So what a
//! suspended Fiber took is left to it (`held::release_ended_by_bailout`), and the rest is given
//! back at once: the main context's, the chain of Fibers resuming one another, and Fibers that
//! ended (their leases handed out, or left by an exception).
//!
//! The engine's own context status cannot tell these apart (a Fiber that resumed another is
//! "suspended" there too). The active chain can: a switch to the context just below the
//! running one is a return to its resumer (by `Fiber::suspend()`, or the Fiber's end), any
//! other switch resumes (or starts) a Fiber on top of it.

use std::cell::RefCell;
use std::collections::HashSet;

#[derive(Default)]
struct States {
    /// The contexts resuming one another, the running one last (empty before the first switch
    /// of the request: only the main context runs).
    active: Vec<usize>,
    /// Fiber contexts left by `Fiber::suspend()`, not resumed since.
    suspended: HashSet<usize>,
}

thread_local! {
    static STATES: RefCell<States> = RefCell::default();
}

/// The engine switches from context `from` to `to`; `from_ended`: its Fiber has ended.
pub fn switched(from: usize, to: usize, from_ended: bool) {
    STATES.with_borrow_mut(|s| {
        if s.active.is_empty() {
            s.active.push(from);
        }
        let n = s.active.len();
        if n >= 2 && s.active[n - 2] == to {
            s.active.pop();
            if !from_ended {
                s.suspended.insert(from);
            }
        } else {
            s.active.push(to);
            s.suspended.remove(&to);
        }
    });
}

/// The running Fiber's context, `None` in the main context. What the observer saw, so one
/// thread-local read (the engine's globals cost a lock): `held` tags every lease with it.
pub fn running() -> Option<usize> {
    STATES
        .try_with(|s| {
            s.try_borrow()
                .ok()
                .and_then(|s| (s.active.len() >= 2).then(|| s.active[s.active.len() - 1]))
        })
        .ok()
        .flatten()
}

/// The Fiber of `context` is suspended: neither running, nor resuming another, nor ended.
pub fn is_suspended(context: usize) -> bool {
    STATES
        .try_with(|s| s.try_borrow().is_ok_and(|s| s.suspended.contains(&context)))
        .unwrap_or(false)
}

/// The engine freed `context` (its address may be reused by another Fiber).
pub fn forget(context: usize) {
    let _ = STATES.try_with(|s| s.borrow_mut().suspended.remove(&context));
}

/// A request starts or ends: its Fibers are gone.
pub fn clear() {
    let _ = STATES.try_with(|s| *s.borrow_mut() = States::default());
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAIN: usize = 1;
    const A: usize = 2;
    const B: usize = 3;

    fn suspended() -> Vec<usize> {
        let mut v: Vec<_> = [MAIN, A, B]
            .into_iter()
            .filter(|&c| is_suspended(c))
            .collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn a_fiber_resuming_another_is_not_suspended() {
        clear();
        assert_eq!(running(), None);
        switched(MAIN, A, false); // A starts
        switched(A, B, false); // A starts B
        assert_eq!(running(), Some(B));
        assert_eq!(suspended(), Vec::<usize>::new());
        switched(B, A, false); // B suspends
        assert_eq!(running(), Some(A));
        assert_eq!(suspended(), vec![B]);
        switched(A, MAIN, false); // A suspends
        assert_eq!(running(), None);
        assert_eq!(suspended(), vec![A, B]);
        switched(MAIN, B, false); // main resumes B directly
        assert_eq!(suspended(), vec![A]);
        switched(B, MAIN, true); // B ends
        assert_eq!(suspended(), vec![A]);
        switched(MAIN, A, false); // A resumed
        switched(A, MAIN, true); // and ends
        assert_eq!(suspended(), Vec::<usize>::new());
    }

    #[test]
    fn a_freed_context_is_forgotten() {
        clear();
        switched(MAIN, A, false);
        switched(A, MAIN, false);
        assert!(is_suspended(A));
        forget(A);
        assert!(!is_suspended(A));
    }
}
