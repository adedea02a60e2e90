//! php.ini settings of the extension.
//!
//! Registered at MINIT from a `static` table (the engine borrows it for the
//! life of the process). Every numeric setting has an `on_modify` validator:
//! a value that does not parse or is out of range is refused, so `ini_set()`
//! returns `false` and a bad php.ini / `-d` value falls back to the default
//! (the engine retries with the default when the configured value is refused).
//!
//! Values are read at the time of use with `zend_ini_string_ex` (one hash
//! lookup), never cached in MINIT: FPM pools may override them per pool.
//! Nothing here computes the default shared-memory path: that needs the uid
//! of the worker, not of the FPM master (see `segment.rs`).

use std::ffi::{c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use ext_php_rs::ffi::{zend_ini_entry, zend_string};
use ext_php_rs::flags::IniEntryPermission;
use ext_php_rs::types::ZendStr;
use ext_php_rs::zend::{IniEntryDef, IniEntryDefs};

pub const SHM_PATH: &CStr = c"resilient.shm_path";
pub const SHM_SLOTS: &CStr = c"resilient.shm_slots";
pub const WEB_TIMEOUT: &CStr = c"resilient.web_timeout";
pub const WEB_CONNECT_TIMEOUT: &CStr = c"resilient.web_connect_timeout";
pub const WEB_MAX_ATTEMPTS: &CStr = c"resilient.web_max_attempts";
pub const BACKEND: &CStr = c"resilient.backend";

/// Defaults, also used when a value cannot be read.
pub const DEFAULT_SHM_SLOTS: u32 = 256;
pub const DEFAULT_WEB_TIMEOUT: f64 = 10.0;
pub const DEFAULT_WEB_CONNECT_TIMEOUT: f64 = 3.0;
pub const DEFAULT_WEB_MAX_ATTEMPTS: u32 = 1;

/// Upper bound accepted for `resilient.shm_slots` (the segment grows by one
/// entry per slot; this keeps a typo from mapping gigabytes).
pub const MAX_SHM_SLOTS: u32 = 65_536;

const SUCCESS: c_int = 0;
const FAILURE: c_int = -1;

type OnModify = unsafe extern "C" fn(
    *mut zend_ini_entry,
    *mut zend_string,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    c_int,
) -> c_int;

const fn entry(
    name: &'static CStr,
    default: &'static CStr,
    on_modify: Option<OnModify>,
) -> IniEntryDef {
    let mut def = IniEntryDef::new(name, default, IniEntryPermission::All);
    def.on_modify = on_modify;
    def
}

/// The table handed to the engine. Settings are `PHP_INI_ALL` so a test (or
/// an app) can point `resilient.shm_path` somewhere else with `ini_set()`
/// before its first use; the segment cache is keyed by path.
static ENTRIES: IniEntryDefs<7> = IniEntryDefs::new([
    entry(SHM_PATH, c"", Some(on_modify_path)),
    entry(SHM_SLOTS, c"256", Some(on_modify_slots)),
    entry(WEB_TIMEOUT, c"10", Some(on_modify_seconds)),
    entry(WEB_CONNECT_TIMEOUT, c"3", Some(on_modify_seconds)),
    entry(WEB_MAX_ATTEMPTS, c"1", Some(on_modify_attempts)),
    entry(BACKEND, c"shm", Some(on_modify_backend)),
    IniEntryDef::end(),
]);

/// Called from MINIT.
pub fn register(module_number: i32) {
    IniEntryDef::register(ENTRIES.as_slice(), module_number);
}

/// Called from MSHUTDOWN.
pub fn unregister(module_number: i32) {
    if let Some(unregister) = crate::engine::zend_unregister_ini_entries() {
        // SAFETY: plain engine call with our own module number.
        unsafe { unregister(module_number) };
    }
}

/// The current (possibly `ini_set`) value of a setting, `None` when the
/// entry is not registered (the extension is not started).
pub fn raw(name: &CStr) -> Option<String> {
    let zend_ini_string_ex = crate::engine::zend_ini_string_ex()?;
    let mut exists = false;
    // SAFETY: `name` is NUL-terminated; the engine returns a pointer into its
    // own interned value (or NULL), valid until the next ini change, and we copy it at once.
    let ptr = unsafe { zend_ini_string_ex(name.as_ptr(), name.count_bytes(), 0, &raw mut exists) };
    if !exists || ptr.is_null() {
        return None;
    }
    // SAFETY: non-null, NUL-terminated C string owned by the engine.
    Some(
        unsafe { CStr::from_ptr(ptr) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// `resilient.shm_path`, `None` when empty (= the per-uid default).
pub fn shm_path() -> Option<String> {
    raw(SHM_PATH).filter(|p| !p.is_empty())
}

pub fn shm_slots() -> u32 {
    raw(SHM_SLOTS)
        .and_then(|v| parse_slots(&v))
        .unwrap_or(DEFAULT_SHM_SLOTS)
}

pub fn web_timeout() -> f64 {
    raw(WEB_TIMEOUT)
        .and_then(|v| parse_seconds(&v))
        .unwrap_or(DEFAULT_WEB_TIMEOUT)
}

pub fn web_connect_timeout() -> f64 {
    raw(WEB_CONNECT_TIMEOUT)
        .and_then(|v| parse_seconds(&v))
        .unwrap_or(DEFAULT_WEB_CONNECT_TIMEOUT)
}

pub fn web_max_attempts() -> u32 {
    raw(WEB_MAX_ATTEMPTS)
        .and_then(|v| parse_attempts(&v))
        .unwrap_or(DEFAULT_WEB_MAX_ATTEMPTS)
}

/// `resilient.backend`: `shm` or a `redis://` URL (the Redis backend arrives
/// with a later issue).
pub fn backend() -> String {
    raw(BACKEND)
        .filter(|v| parse_backend(v))
        .unwrap_or_else(|| "shm".to_owned())
}

fn parse_slots(v: &str) -> Option<u32> {
    v.trim()
        .parse::<u32>()
        .ok()
        .filter(|n| (1..=MAX_SHM_SLOTS).contains(n))
}

/// Positive, finite and at most a year (larger values are typos, and would overflow a
/// `Duration`): anything else is refused by `ini_set` and ignored from php.ini.
fn parse_seconds(v: &str) -> Option<f64> {
    v.trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0 && *s <= resilient_core::validate::MAX_SECONDS)
}

fn parse_attempts(v: &str) -> Option<u32> {
    v.trim()
        .parse::<u32>()
        .ok()
        .filter(|n| (1..=100).contains(n))
}

fn parse_backend(v: &str) -> bool {
    let v = v.trim();
    v == "shm" || v.starts_with("redis://")
}

fn parse_path(v: &str) -> bool {
    // Empty = default; otherwise an absolute path without NUL bytes.
    v.is_empty() || (v.starts_with('/') && !v.contains('\0'))
}

/// Shared body of the validators: read the new value, never unwind into C.
fn validate(new_value: *mut zend_string, ok: fn(&str) -> bool) -> c_int {
    let result = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the engine passes a live zend_string (or NULL).
        let Some(s) = (unsafe { new_value.cast::<ZendStr>().as_ref() }) else {
            return false;
        };
        std::str::from_utf8(s.as_bytes()).is_ok_and(ok)
    }));
    if result.unwrap_or(false) {
        SUCCESS
    } else {
        FAILURE
    }
}

/// Declares an `OnModify` handler (the engine's C signature) that accepts a value when
/// `$check` says so.
macro_rules! on_modify {
    ($name:ident, $check:expr) => {
        unsafe extern "C" fn $name(
            _: *mut zend_ini_entry,
            v: *mut zend_string,
            _: *mut c_void,
            _: *mut c_void,
            _: *mut c_void,
            _: c_int,
        ) -> c_int {
            validate(v, $check)
        }
    };
}

on_modify!(on_modify_path, parse_path);
on_modify!(on_modify_slots, |s| parse_slots(s).is_some());
on_modify!(on_modify_seconds, |s| parse_seconds(s).is_some());
on_modify!(on_modify_attempts, |s| parse_attempts(s).is_some());
on_modify!(on_modify_backend, parse_backend);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsers_reject_garbage() {
        assert_eq!(parse_slots("256"), Some(256));
        assert_eq!(parse_slots("0"), None);
        assert_eq!(parse_slots("abc"), None);
        assert_eq!(parse_seconds("2.5"), Some(2.5));
        assert_eq!(parse_seconds("NaN"), None);
        assert_eq!(parse_seconds("inf"), None);
        assert_eq!(parse_seconds("-1"), None);
        assert_eq!(parse_attempts("0"), None);
        assert!(parse_backend("redis://127.0.0.1:6379/0"));
        assert!(!parse_backend("mysql://x"));
        assert!(parse_path(""));
        assert!(!parse_path("relative.shm"));
    }
}
