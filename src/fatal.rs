//! A fatal error gives the request's leases back as it is raised, before the shutdown
//! functions run.
//!
//! A bailout skips the frames that held the leases, and RSHUTDOWN (which releases what is
//! still listed in `held`) runs after the shutdown functions. A shutdown function that reports
//! the error to the same upstream (Laravel's `HandleExceptions::handleShutdown` reports fatal
//! errors there) found the funnel full of the dead code's slots. An error observer sees every
//! error before the engine decides what it does: for one that ends the code (a fatal type that
//! no error handler takes) it releases at once the listed leases, but those a suspended Fiber
//! took (a shutdown function may resume it: `fiber_states`). A lease taken in the main context
//! and handed to a suspended Fiber is released too: nothing says who holds a `Lease` object
//! now. Releasing is idempotent, so the frames' own guards, or a `Lease` object a shutdown
//! function still reaches, give back nothing twice; `release()` on such an object returns false.
//!
//! What is not given back early: a lease on Redis of a call cut short (released at RSHUTDOWN,
//! `resilient_redis::release_leftovers`), and one held when an error handler takes an
//! `E_USER_ERROR` and returns false (the engine bails out after the observer was told).

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use ext_php_rs::ffi::{zend_string, E_FATAL_ERRORS, E_RECOVERABLE_ERROR, E_USER_ERROR};
use ext_php_rs::flags::DataType;
use ext_php_rs::zend::ExecutorGlobals;

use crate::held;

/// `zend_observer_error_cb` (PHP 8.1+: the file name is a `zend_string`; not read here).
pub type ErrorObserver =
    unsafe extern "C" fn(ty: c_int, file: *mut zend_string, line: u32, message: *mut zend_string);

/// `zend_error_handling_t`'s `EH_NORMAL`: errors go to the handlers, not thrown.
const EH_NORMAL: u32 = 0;

/// Called from MINIT.
pub fn observe() {
    if let Some(register) = crate::engine::zend_observer_error_register() {
        // SAFETY: the engine keeps the observer in its list for the process's life.
        unsafe { register(on_error) };
    }
}

unsafe extern "C" fn on_error(ty: c_int, _: *mut zend_string, _: u32, _: *mut zend_string) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if ends_the_code(ty as u32) {
            held::release_ended_by_bailout();
        }
    }));
}

/// An error of fatal type that no user error handler takes: the engine bails out after it (or,
/// for an uncaught exception, the code has already ended). `E_USER_ERROR` and
/// `E_RECOVERABLE_ERROR` are the fatal types a handler may take, as the engine decides it.
fn ends_the_code(ty: u32) -> bool {
    if ty & E_FATAL_ERRORS == 0 {
        return false;
    }
    if ty & (E_USER_ERROR | E_RECOVERABLE_ERROR) == 0 {
        return true;
    }
    let eg = ExecutorGlobals::get();
    let handler_takes = eg.user_error_handler.get_type() != DataType::Undef
        && (eg.user_error_handler_error_reporting as u32) & ty != 0
        && eg.error_handling == EH_NORMAL;
    !handler_takes
}
