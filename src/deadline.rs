//! `Resilient\Deadline`: one deadline shared by every call inside a scope.
//!
//! The stack lives in this process (one request at a time under FPM) and is
//! cleared at RINIT and RSHUTDOWN, so nothing survives into the next request.
//! `within()` pushes `min(outer, now + seconds)` (the earliest wins), calls the
//! callable with no lock held, and pops back to its own depth on return, when
//! the callable throws (the PHP exception propagates unchanged) and, through a
//! `BailoutGuard`, when it bails out (fatal error, timeout).

use std::sync::{Mutex, PoisonError};

use ext_php_rs::prelude::*;
use ext_php_rs::types::Zval;
use resilient_core::{clock, validate, DeadlineStack};

use crate::errors;

static STACK: Mutex<DeadlineStack> = Mutex::new(DeadlineStack::new());

fn with_stack<R>(f: impl FnOnce(&mut DeadlineStack) -> R) -> R {
    f(&mut STACK.lock().unwrap_or_else(PoisonError::into_inner))
}

/// Empties the stack (RINIT, RSHUTDOWN).
pub fn clear() {
    with_stack(DeadlineStack::clear);
}

/// Seconds left in the innermost scope (0 when passed), `None` outside any.
pub fn remaining() -> Option<f64> {
    let now = clock::monotonic_ns();
    with_stack(|s| s.remaining(now))
}

/// `min(seconds, remaining)`, never below 0.001 s (for per-attempt timeouts).
pub fn cap(seconds: f64) -> f64 {
    let now = clock::monotonic_ns();
    with_stack(|s| s.cap(seconds, now))
}

/// Enters a scope of `seconds` (validated); returns the depth to pop back to.
/// Refused (an `\Error`) beyond `resilient_core::deadline::MAX_DEPTH` nested scopes.
pub fn push(seconds: f64) -> Result<usize, resilient_core::Error> {
    let now = clock::monotonic_ns();
    with_stack(|s| s.push(seconds, now))
}

/// Leaves every scope entered at or after `depth`.
pub fn pop_to(depth: usize) {
    with_stack(|s| s.pop_to(depth));
}

/// Pops its scope when dropped: on return, on exception, and (inside a
/// `BailoutGuard`) on bailout.
struct Scope(usize);

impl Drop for Scope {
    fn drop(&mut self) {
        pop_to(self.0);
    }
}

/// One deadline shared by every call inside a scope (static; not
/// instantiable). Per process, cleared at request start and end: nothing
/// survives into the next FPM request.
#[php_class]
#[php(name = "Resilient\\Deadline")]
#[php(flags = ext_php_rs::flags::ClassFlags::Final)]
pub struct Deadline;

#[php_impl]
impl Deadline {
    /// Runs `$fn` with a deadline of `$seconds` from now (or the enclosing
    /// deadline if that is earlier) and returns its result. The enclosing
    /// deadline is restored on return and when `$fn` throws (the exception
    /// propagates unchanged). `$seconds` >= 0 and finite, else `\ValueError`.
    /// Nesting deeper than 1,000 scopes throws `\Error` (runaway recursion would
    /// otherwise overflow the C stack).
    pub fn within(seconds: f64, r#fn: ZendCallable) -> PhpResult<Zval> {
        let seconds = validate::seconds("seconds", seconds).map_err(errors::php)?;
        let scope = BailoutGuard::new(Scope(push(seconds).map_err(errors::php)?));
        let result = r#fn.try_call(vec![]);
        drop(scope);
        // An exception thrown by `$fn` is still pending: returning Err leaves
        // it as is (PhpException::throw is a no-op while one is pending).
        result.map_err(PhpException::from)
    }

    /// Seconds left in the current deadline scope, or null outside any.
    pub fn remaining() -> Option<f64> {
        remaining()
    }

    /// `min($seconds, remaining())`, never below 0.001; `$seconds` when no
    /// deadline is set.
    pub fn cap(seconds: f64) -> PhpResult<f64> {
        let seconds = validate::seconds("seconds", seconds).map_err(errors::php)?;
        Ok(cap(seconds))
    }
}
