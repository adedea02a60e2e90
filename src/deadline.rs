//! `Resilient\Deadline`: one deadline shared by every call inside a scope.
//!
//! The stack lives in this process (one request at a time under FPM) and is
//! cleared at RINIT and RSHUTDOWN, so nothing survives into the next request.
//! `within()` pushes `min(outer, now + seconds)` (the earliest wins), calls the
//! callable with no lock held, and pops back to its own depth on return, when
//! the callable throws (the PHP exception propagates unchanged) and when it bails out (fatal
//! error, timeout; see [`crate::bailout`]).
//!
//! Nesting is bounded twice: at most `MAX_DEPTH` scopes (the core), and never
//! with less than `stack::CALLABLE_RESERVE` of C stack left, since each scope is a PHP
//! call through the extension and a small stack (`ulimit -s`, a thread) runs
//! out before 1,000 of them. Both are a clear `\Error` instead of SIGSEGV.
//!
//! Each Fiber has its own scopes: a scope entered in a Fiber that suspends does
//! not bound the code that goes on outside it. A Fiber starts with the scopes in
//! force where it was started, each bounding it while the `within()` that entered
//! it runs, and keeps its own while it is suspended (parked by fiber context,
//! swapped in and out by the engine's fiber-switch observer).

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{LazyLock, Mutex, PoisonError};

use ext_php_rs::prelude::*;
use ext_php_rs::types::Zval;
use ext_php_rs::zend::ExecutorGlobals;
use resilient_core::{clock, validate, DeadlineStack, Deadlines};

use crate::bailout::Guarded;
use crate::{coerce, errors};

static STACK: Mutex<Deadlines> = Mutex::new(Deadlines::new());

fn with_stack<R>(f: impl FnOnce(&mut Deadlines) -> R) -> R {
    f(&mut STACK.lock().unwrap_or_else(PoisonError::into_inner))
}

/// The scopes of the fiber contexts that are not running, by context address.
static PARKED: LazyLock<Mutex<HashMap<usize, DeadlineStack>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// `zend_observer_fiber_switch_handler`.
pub type FiberSwitch = unsafe extern "C" fn(from: *mut c_void, to: *mut c_void);
/// `zend_observer_fiber_destroy_handler`.
pub type FiberDestroy = unsafe extern "C" fn(destroying: *mut c_void);

/// Parks the running context's scopes and brings back those of `to`; a context never seen
/// (a Fiber starting) begins with a copy of the scopes in force where it starts (each ending
/// with its `within()`). First, what a
/// Fiber that a bailout ended still held is dropped ([`crate::bailout::drop_held`]), while its
/// scopes are still the ones in place.
unsafe extern "C" fn on_fiber_switch(from: *mut c_void, to: *mut c_void) {
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: the engine passes the context it is switching away from.
        let ended = unsafe { crate::bailout::has_ended(from) };
        if ended {
            // Values still listed were left by a bailout, which skipped the frames that held
            // them; its leases are nobody's Fiber's now.
            crate::bailout::drop_held(from);
            crate::held::fiber_gone(from as usize);
        }
        crate::fiber_states::switched(from as usize, to as usize, ended);
        let mut parked = PARKED.lock().unwrap_or_else(PoisonError::into_inner);
        let incoming = parked.remove(&(to as usize));
        let outgoing = with_stack(|s| s.switch_to(incoming));
        parked.insert(from as usize, outgoing);
    });
}

/// Drops what a freed fiber context still holds (a Fiber a bailout left suspended) and forgets
/// its scopes.
unsafe extern "C" fn on_fiber_destroy(destroying: *mut c_void) {
    let _ = std::panic::catch_unwind(|| {
        crate::bailout::drop_held(destroying);
        crate::fiber_states::forget(destroying as usize);
        crate::held::fiber_gone(destroying as usize);
        PARKED
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&(destroying as usize));
    });
}

/// Gives each Fiber its own scopes (MINIT). Without the engine's fiber observers (not
/// exported), scopes stay per process, as before PHP 8.1.
pub fn observe_fibers() {
    if let (Some(switch), Some(destroy)) = (
        crate::engine::zend_observer_fiber_switch_register(),
        crate::engine::zend_observer_fiber_destroy_register(),
    ) {
        // SAFETY: the engine keeps the handlers in its observer lists for the process's life.
        unsafe {
            switch(on_fiber_switch);
            destroy(on_fiber_destroy);
        }
    }
}

/// Empties the stack and forgets parked Fibers' scopes (RINIT, RSHUTDOWN).
pub fn clear() {
    with_stack(Deadlines::clear);
    PARKED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
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
    if let Err(short) = crate::stack::check(crate::stack::CALLABLE_RESERVE, 0) {
        let (left, depth) = (short.left, with_stack(|s| s.depth()));
        return Err(resilient_core::Error::too_deep(
            "Deadline::within",
            format!(
                "only {} KB of C stack left at {depth} nested scopes; infinite recursion?",
                left / 1024
            ),
        ));
    }
    let now = clock::monotonic_ns();
    with_stack(|s| s.push(seconds, now))
}

/// Leaves every scope entered at or after `depth`.
pub fn pop_to(depth: usize) {
    with_stack(|s| s.pop_to(depth));
}

/// The running fiber context (the main one included), as the fiber observers name it.
fn current_context() -> usize {
    ExecutorGlobals::get().current_fiber_context as usize
}

/// A scope entered in one fiber context: popped when dropped, on return, on exception, and
/// (as a [`Guarded`] value) on bailout.
struct Scope {
    depth: usize,
    context: usize,
}

impl Drop for Scope {
    /// From the stack of the context that entered the scope: a bailout in a Fiber drops the
    /// main context's scopes while the Fiber's stack is the one in place.
    fn drop(&mut self) {
        if self.context != current_context() {
            let mut parked = PARKED.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(stack) = parked.get_mut(&self.context) {
                with_stack(|s| s.pop_in(stack, self.depth));
                return;
            }
        }
        pop_to(self.depth);
    }
}

/// One deadline shared by every call inside a scope (static; not
/// instantiable). Per process, each Fiber with its own scopes (starting with
/// those in force where it starts, each while its `within()` runs); cleared at
/// request start and end: nothing survives into the next FPM request.
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
    /// Nesting deeper than 1,000 scopes, or with less than 256 KB of C stack
    /// left, throws `\Error` (runaway recursion would otherwise overflow the C
    /// stack).
    pub fn within(seconds: &Zval, r#fn: coerce::CallableArg) -> PhpResult<Zval> {
        const WITHIN: &str = "Resilient\\Deadline::within";
        let seconds = coerce::float_arg(seconds, WITHIN, 1, "seconds")?;
        let r#fn = r#fn.callable(WITHIN, 2, "fn")?;
        let seconds = validate::seconds("seconds", seconds).map_err(errors::php)?;
        let scope = Guarded::new(Scope {
            depth: push(seconds).map_err(errors::php)?,
            context: current_context(),
        });
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

    /// `min($seconds, remaining())`, or `$seconds` when no deadline is set; never below
    /// 0.001.
    pub fn cap(seconds: &Zval) -> PhpResult<f64> {
        let seconds = coerce::float_arg(seconds, "Resilient\\Deadline::cap", 1, "seconds")?;
        let seconds = validate::seconds("seconds", seconds).map_err(errors::php)?;
        Ok(cap(seconds))
    }
}
