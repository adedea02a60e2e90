//! Mapping of `resilient_core::Error` to PHP exceptions.
//!
//! - invalid argument (the message starts with the argument's name) → `\ValueError`
//! - segment problems (corrupt, foreign owner, group/world-writable, wrong layout,
//!   table full) → `Resilient\SharedMemoryError` with the core's message, which
//!   names the file and the problem.
//! - nesting too deep (runaway recursion through `Deadline::within`) → `\Error`,
//!   as PHP 8.3's own stack limit does: a bug to fix, not an outage to fall back from.

use ext_php_rs::exception::PhpException;
use resilient_core::Error;

use crate::exceptions::{self, Kind};

/// The PHP exception for a core error.
pub fn to_php(err: &Error) -> PhpException {
    if err.is_invalid_argument() {
        exceptions::value_error(err.to_string())
    } else if err.is_too_deep() {
        PhpException::new(
            exceptions::printable(err.to_string()),
            0,
            ext_php_rs::zend::ce::error(),
        )
    } else {
        // is_segment() / is_table_full(), and anything a later core adds.
        exceptions::error(Kind::SharedMemoryError, err.to_string(), 0)
    }
}

/// Writes one line to PHP's error log (the `error_log` setting, else the
/// SAPI's log: stderr in CLI, the worker log under FPM). Not an `E_WARNING`:
/// frameworks turn those into exceptions.
pub fn log_warning(message: &str) {
    /// `LOG_WARNING` of syslog.h.
    const LOG_WARNING: i32 = 4;
    let (Some(log), Ok(message)) = (
        crate::engine::php_log_err_with_severity(),
        std::ffi::CString::new(exceptions::printable(message.to_owned())),
    ) else {
        return;
    };
    // SAFETY: a valid C string; the engine copies it.
    unsafe { log(message.as_ptr(), LOG_WARNING) };
}

/// `?`-friendly conversion: `core_call().map_err(errors::php)?`.
pub fn php(err: Error) -> PhpException {
    to_php(&err)
}
