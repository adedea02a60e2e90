//! `Resilient\Context`: where this PHP process runs (web request or console),
//! and the web caps from php.ini.
//!
//! A web request must answer within seconds, so under a web SAPI timeouts and
//! attempts are capped by `resilient.web_timeout` (10 s),
//! `resilient.web_connect_timeout` (3 s) and `resilient.web_max_attempts` (1);
//! queue workers, the scheduler and artisan (CLI) get the configured values.
//!
//! The SAPI decides unless told otherwise: Octane (Swoole, RoadRunner, FrankenPHP's worker
//! mode) serves web requests from a `cli` process, so it declares itself with
//! `resilient.context = web` (php.ini, `-d`, or `ini_set` at worker boot), or a client with
//! the option `'context' => 'web'`.

use std::ffi::CStr;

use ext_php_rs::prelude::*;
use resilient_core::validate;

use crate::ini;
use crate::{coerce, errors};
use ext_php_rs::types::Zval;

/// SAPIs that are not serving an HTTP request: console, debugger, embedded,
/// static-php-cli's self-contained binary.
const NON_WEB_SAPIS: [&str; 4] = ["cli", "phpdbg", "embed", "micro"];

pub use crate::engine::sapi_name;

/// True when serving web requests: `resilient.context` when it says `web` or `console`,
/// else the SAPI (any but cli/phpdbg/embed/micro).
pub fn is_web() -> bool {
    ini::context().unwrap_or_else(is_web_by_sapi)
}

/// The SAPI's answer, cached: the SAPI of a process never changes.
fn is_web_by_sapi() -> bool {
    static IS_WEB: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *IS_WEB.get_or_init(|| is_web_sapi(&sapi_name()))
}

pub fn is_web_sapi(sapi: &str) -> bool {
    !sapi.is_empty() && !NON_WEB_SAPIS.contains(&sapi)
}

/// Whether the web cap `key` binds a call in context `web`: always in a web context; in a
/// console context under a web SAPI (a client's `'context' => 'console'`, or
/// `ini_set('resilient.context', 'console')` in a request) when the pool locked the cap
/// (`php_admin_value`): a rule of the pool is not the application's to lift.
fn binds(key: &CStr, web: bool) -> bool {
    web || (is_web_by_sapi() && ini::locked(key))
}

/// `seconds`, capped to `cap` where the web cap `key` binds this process's context.
fn cap_where_bound(seconds: f64, key: &CStr, cap: f64) -> f64 {
    if binds(key, is_web()) {
        seconds.min(cap)
    } else {
        seconds
    }
}

/// Under a web SAPI, a `\ValueError` naming the first web cap whose configured value was
/// refused (php.ini, `-d`, the FPM pool, the request's `.user.ini`): a web request never runs
/// on a silent default. Outside the web the caps do not apply: a refused one is said once per
/// process in PHP's error log.
pub fn check_web_caps() -> PhpResult<()> {
    check_caps_for(is_web())
}

/// [`check_web_caps`] for a caller that knows its context (a client's `context` option).
pub fn check_caps_for(web: bool) -> PhpResult<()> {
    let keys = [
        ini::WEB_TIMEOUT,
        ini::WEB_CONNECT_TIMEOUT,
        ini::WEB_MAX_ATTEMPTS,
    ];
    for key in keys {
        if binds(key, web) {
            ini::check(key).map_err(crate::exceptions::value_error)?;
        } else {
            // Where it does not apply, a refused one is said once per process in the error
            // log: the web workers it is meant for will refuse it.
            ini::log_rejected_once(key);
        }
    }
    Ok(())
}

/// The caps of a client: the web caps when `web`; otherwise those a web SAPI's pool locked
/// (see [`binds`]).
pub fn caps(web: bool) -> resilient_http::Caps {
    use std::time::Duration;
    let seconds = |key, value: fn() -> f64| {
        binds(key, web)
            .then(|| Duration::try_from_secs_f64(value()).ok())
            .flatten()
    };
    resilient_http::Caps {
        timeout: seconds(ini::WEB_TIMEOUT, ini::web_timeout),
        connect_timeout: seconds(ini::WEB_CONNECT_TIMEOUT, ini::web_connect_timeout),
        max_attempts: binds(ini::WEB_MAX_ATTEMPTS, web).then(ini::web_max_attempts),
        timeout_name: "resilient.web_timeout",
        max_attempts_name: "resilient.web_max_attempts",
    }
}

/// Per-attempt timeout for this context (seconds), for Rust callers (Client).
pub fn timeout(seconds: f64) -> f64 {
    cap_where_bound(seconds, ini::WEB_TIMEOUT, ini::web_timeout())
}

/// Connect timeout for this context (seconds), for Rust callers (Client).
pub fn connect_timeout(seconds: f64) -> f64 {
    cap_where_bound(
        seconds,
        ini::WEB_CONNECT_TIMEOUT,
        ini::web_connect_timeout(),
    )
}

/// Attempts (the first one included) for this context, for Rust callers (Client).
pub fn max_attempts(attempts: u32) -> u32 {
    if binds(ini::WEB_MAX_ATTEMPTS, is_web()) {
        attempts.min(ini::web_max_attempts())
    } else {
        attempts
    }
}

/// What PHP's `memory_limit` leaves now for one more response body, in bytes; `None` when
/// unlimited (`-1`) or unknown. A response body is held in Rust memory, outside
/// `memory_limit`, and becomes a PHP string when read: the client never accepts a body larger
/// than this (it lowers `max_body` per call), so `body()` fits.
///
/// PHP checks its limit against the memory it took from the system (`memory_get_usage(true)`:
/// whole 2 MiB chunks, and a big string's pages), not against what its allocator handed out,
/// so that is what is subtracted; then what the live `Resilient\Response` objects hold, each
/// as the PHP string it would become ([`php_string_size`]); and one chunk, what the new body's
/// string may need beyond its own bytes (a fresh chunk, or its last page).
pub fn memory_headroom() -> Option<u64> {
    use ext_php_rs::ffi::_php_core_globals;
    use std::sync::OnceLock;
    static SYMBOLS: OnceLock<(usize, usize)> = OnceLock::new();
    // dlsym, not extern declarations: see engine.rs (the .so must load outside PHP too).
    let (usage, globals) = *SYMBOLS.get_or_init(|| {
        // SAFETY: RTLD_DEFAULT lookups of NUL-terminated names in already-loaded objects.
        unsafe {
            (
                libc::dlsym(libc::RTLD_DEFAULT, c"zend_memory_usage".as_ptr()) as usize,
                libc::dlsym(libc::RTLD_DEFAULT, c"core_globals".as_ptr()) as usize,
            )
        }
    });
    if usage == 0 || globals == 0 {
        return None;
    }
    // SAFETY: `core_globals` is PHP's (NTS) `php_core_globals` and `zend_memory_usage` has the
    // signature `size_t zend_memory_usage(bool real_usage)` in PHP 8.x; both live as long as PHP.
    let (limit, used) = unsafe {
        let limit = (*(globals as *const _php_core_globals)).memory_limit;
        let usage: unsafe extern "C" fn(bool) -> usize = std::mem::transmute(usage);
        (limit, usage(true))
    };
    (limit > 0).then(|| {
        (limit as u64)
            .saturating_sub(used as u64)
            .saturating_sub(crate::response::held_body_bytes())
            .saturating_sub(CHUNK)
    })
}

/// PHP's allocator (zend_alloc): 2 MiB chunks of 4 KiB pages, the first page the chunk's own.
const CHUNK: u64 = 2 << 20;
const ZEND_PAGE: u64 = 4096;
const PAGES_PER_CHUNK: u64 = CHUNK / ZEND_PAGE - 1;
/// Above this a block is "huge": mapped on its own, rounded to the system's pages.
const MAX_LARGE: u64 = CHUNK - ZEND_PAGE;
/// Up to this a block comes from a bin of small slots.
const MAX_SMALL: u64 = 3072;

/// The memory a PHP string of `len` bytes takes against `memory_limit`: its header (24 bytes)
/// and NUL, then as zend_alloc places it. A huge one is its size in the system's pages; a
/// large one is a run of pages inside a chunk, and runs that do not fit beside each other
/// each take a chunk of their own (two of 1.1 MiB never share one), so it is charged its share
/// of a chunk; a small one its size.
pub fn php_string_size(len: u64) -> u64 {
    let size = (len + 25).next_multiple_of(8);
    if size > MAX_LARGE {
        size.next_multiple_of(system_page())
    } else if size > MAX_SMALL {
        let pages = size.div_ceil(ZEND_PAGE);
        CHUNK / (PAGES_PER_CHUNK / pages)
    } else {
        size
    }
}

/// The system's page size (zend_alloc's REAL_PAGE_SIZE), 4 KiB when unknown.
fn system_page() -> u64 {
    use std::sync::OnceLock;
    static PAGE: OnceLock<u64> = OnceLock::new();
    // SAFETY: sysconf has no preconditions.
    *PAGE.get_or_init(|| match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as u64,
        _ => ZEND_PAGE,
    })
}

/// Where this process runs, and the web caps from php.ini (static; not
/// instantiable). Web = any SAPI but cli, phpdbg, embed, micro.
#[php_class]
#[php(name = "Resilient\\Context")]
#[php(flags = ext_php_rs::flags::ClassFlags::Final)]
pub struct Context;

#[php_impl]
impl Context {
    /// True under a web SAPI (fpm-fcgi, cgi-fcgi, apache2handler, cli-server,
    /// litespeed, frankenphp, ...); false under cli, phpdbg, embed, micro; unless
    /// `resilient.context` says `web` or `console` (Octane workers declare themselves web).
    pub fn is_web() -> bool {
        is_web()
    }

    /// The SAPI name, as `PHP_SAPI`.
    pub fn sapi() -> String {
        sapi_name()
    }

    /// `$seconds` (at least 0.001: a smaller timeout means none to a client counting in ms),
    /// capped to `resilient.web_timeout` when web.
    pub fn timeout(seconds: &Zval) -> PhpResult<f64> {
        let seconds = coerce::float_arg(seconds, "Resilient\\Context::timeout", 1, "seconds")?;
        let seconds = validate::timeout_seconds("seconds", seconds).map_err(errors::php)?;
        check_web_caps()?;
        Ok(timeout(seconds))
    }

    /// `$seconds` (at least 0.001), capped to `resilient.web_connect_timeout` when web.
    pub fn connect_timeout(seconds: &Zval) -> PhpResult<f64> {
        let seconds =
            coerce::float_arg(seconds, "Resilient\\Context::connectTimeout", 1, "seconds")?;
        let seconds = validate::timeout_seconds("seconds", seconds).map_err(errors::php)?;
        check_web_caps()?;
        Ok(connect_timeout(seconds))
    }

    /// `$attempts` (1 to 100), capped to `resilient.web_max_attempts` when web.
    pub fn max_attempts(attempts: &Zval) -> PhpResult<i64> {
        let attempts = coerce::int_arg(attempts, "Resilient\\Context::maxAttempts", 1, "attempts")?;
        let attempts = validate::count("attempts", attempts, 1, 100).map_err(errors::php)?;
        check_web_caps()?;
        Ok(i64::from(max_attempts(attempts)))
    }
}

#[cfg(test)]
mod tests {
    use super::is_web_sapi;

    #[test]
    fn sapi_classification() {
        for web in [
            "fpm-fcgi",
            "cgi-fcgi",
            "apache2handler",
            "cli-server",
            "litespeed",
            "frankenphp",
        ] {
            assert!(is_web_sapi(web), "{web}");
        }
        for console in ["cli", "phpdbg", "embed", "micro", ""] {
            assert!(!is_web_sapi(console), "{console}");
        }
    }
}
