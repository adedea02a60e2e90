//! Module and request hooks.
//!
//! - MINIT: ini entries, exception classes, the metrics' array keys and the client's
//!   cycle-collector handler. Nothing process-bound: the FPM master runs MINIT and then
//!   forks, so the shared-memory segment (and, in the client, runtimes and connections) are
//!   created lazily per process.
//! - RINIT: an empty deadline stack.
//! - RSHUTDOWN: release every lease this request still holds, empty the
//!   deadline stack. This is the backstop for fatal errors and
//!   `max_execution_time`: a bailout long-jumps past Rust frames, so their
//!   destructors never run, but RSHUTDOWN always does. (A fatal error already
//!   gave the listed leases back as it was raised, before the shutdown
//!   functions: `fatal.rs`.)
//! - MSHUTDOWN: send the Redis releases the process still owes (past a back-off), unregister
//!   the ini entries.
//!
//! A panic unwinding out of an `extern "C"` hook aborts PHP, so every body
//! runs under `catch_unwind`.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::{deadline, exceptions, held, ini};

const SUCCESS: i32 = 0;
const FAILURE: i32 = -1;

/// Runs `body`, turning a panic into `FAILURE` (and a warning on stderr from
/// the panic hook) instead of an abort.
fn guarded(body: impl FnOnce() -> i32) -> i32 {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(FAILURE)
}

/// # Safety
/// Called by the Zend engine only, once per module or request, as its hook table says.
pub unsafe extern "C" fn module_startup(_ty: i32, module_number: i32) -> i32 {
    guarded(|| {
        ini::register(module_number);
        deadline::observe_fibers();
        crate::fatal::observe();
        crate::collector::install();
        resilient_redis::report_to(crate::errors::log_warning);
        // Interned now, a string is permanent only while PHP is starting up; loaded later (an
        // FPM pool's `php_admin_value[extension]`), it would be freed at the request's end.
        let late = crate::engine::php_get_module_initialized().is_none_or(|f| unsafe { f() });
        if !late {
            crate::metrics::make_permanent_keys();
            crate::sensitive::mark_after_startup();
        }
        match exceptions::register() {
            Ok(()) => SUCCESS,
            Err(e) => {
                ext_php_rs::error::php_error(
                    &ext_php_rs::flags::ErrorType::CoreWarning,
                    &format!("resilient: cannot register exception classes: {e}"),
                );
                FAILURE
            }
        }
    })
}

/// # Safety
/// Called by the Zend engine only, once per module or request, as its hook table says.
pub unsafe extern "C" fn module_shutdown(_ty: i32, module_number: i32) -> i32 {
    guarded(|| {
        // What the last request end could not send (Redis in back-off): no later command
        // of this process would carry it.
        resilient_redis::release_leftovers_at_exit();
        ini::unregister(module_number);
        SUCCESS
    })
}

/// # Safety
/// Called by the Zend engine only, once per module or request, as its hook table says.
pub unsafe extern "C" fn request_startup(_ty: i32, _module_number: i32) -> i32 {
    guarded(|| {
        deadline::clear();
        crate::fiber_states::clear();
        crate::exceptions::forget_item();
        crate::segment::recheck_at_next_use();
        SUCCESS
    })
}

/// # Safety
/// Called by the Zend engine only, once per module or request, as its hook table says.
pub unsafe extern "C" fn request_shutdown(_ty: i32, _module_number: i32) -> i32 {
    // Both steps run even if the first one panics.
    let a = guarded(|| {
        // A pool a fatal error cut short: its tasks must not run on in a later request.
        resilient_http::end_abandoned_tasks();
        // What Fibers a fatal error left suspended still hold (their leases, their scopes).
        crate::bailout::end_request();
        held::release_all();
        resilient_redis::release_leftovers();
        // Attempts a fatal error cut mid-way: no longer in flight (the metrics' gauge).
        resilient_http::end_open_attempts();
        SUCCESS
    });
    let b = guarded(|| {
        deadline::clear();
        crate::fiber_states::clear();
        crate::ini::forget_request_values();
        SUCCESS
    });
    if a == SUCCESS && b == SUCCESS {
        SUCCESS
    } else {
        FAILURE
    }
}
