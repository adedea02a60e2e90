//! php.ini settings of the extension.
//!
//! Registered at MINIT from a `static` table (the engine borrows it for the
//! life of the process). Every setting has an `on_modify` validator, and a bad
//! value is never replaced silently:
//! - `ini_set()` of a bad value returns `false` (the old value stays);
//! - a bad value from php.ini, `-d`, an FPM pool (`php_value` /
//!   `php_admin_value`) or `.user.ini` cannot be refused at that point (the
//!   engine would quietly use the default), so it is remembered here and the
//!   first use of the setting throws, naming the key and the rejected value
//!   ([`check`]). A refused value a request sent as a FastCGI parameter
//!   (`PHP_VALUE`, `PHP_ADMIN_VALUE`) throws in that request only. A valid
//!   value set later by an FPM pool or `.user.ini`
//!   replaces the remembered one (a pool may fix a global mistake); a valid
//!   `ini_set()` of another value sets it aside for the rest of its request
//!   only (the engine restores the configured value at request end, and that
//!   value is the bad one).
//!
//! FPM pools that load the extension themselves (`php_admin_value[extension]`):
//! php-fpm applies a pool's `php_value`/`php_admin_value` lines in reverse
//! order of the file, and a line for a setting that is not registered yet is
//! dropped without a word. So `resilient.*` lines written after the extension
//! line are lost and the pool would silently share the default segment. When
//! the extension starts inside an FPM worker, `resilient.shm_path` must have
//! been set by the pool (placed before the extension line) or its first use
//! throws, saying how to fix it.
//!
//! Values are read at the time of use with `zend_ini_string_ex` (one hash
//! lookup), never cached in MINIT: FPM pools may override them per pool.
//! Nothing here computes the default shared-memory path: that needs the uid
//! of the worker, not of the FPM master (see `segment.rs`).

use std::ffi::{c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

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
pub const SHM_REQUIRED: &CStr = c"resilient.shm_required";
pub const CONTEXT: &CStr = c"resilient.context";

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
    def.displayer = Some(display_checked);
    def
}

/// Every setting of the extension, in the order phpinfo() lists them.
const KEYS: [&CStr; 8] = [
    SHM_PATH,
    SHM_SLOTS,
    SHM_REQUIRED,
    WEB_TIMEOUT,
    WEB_CONNECT_TIMEOUT,
    WEB_MAX_ATTEMPTS,
    BACKEND,
    CONTEXT,
];

/// The value the displayer is asked for: php.ini's (`kind` [`ZEND_INI_DISPLAY_ORIG`]) or the
/// current one.
///
/// # Safety
/// `entry` is the engine's live entry.
unsafe fn displayed_value(entry: *mut zend_ini_entry, kind: c_int) -> String {
    // SAFETY: the engine passes its live entry; its value strings outlive this call.
    unsafe {
        let e = &*entry;
        let v = if kind == ZEND_INI_DISPLAY_ORIG && e.modified != 0 {
            e.orig_value
        } else {
            e.value
        };
        v.as_ref()
            .map(|s| String::from_utf8_lossy(ZendStr::as_bytes(s)).into_owned())
            .unwrap_or_default()
    }
}

/// Writes `text` into phpinfo()'s output, escaped for its HTML form.
fn display(text: &str) {
    // SAFETY: `sapi_module` is set by the SAPI before any module starts.
    let html = unsafe { ext_php_rs::ffi::sapi_module.phpinfo_as_text } == 0;
    let shown = if html {
        text.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    } else {
        text.to_owned()
    };
    // SAFETY: a valid buffer of that length.
    unsafe { ext_php_rs::ffi::php_output_write(shown.as_ptr().cast(), shown.len()) };
}

/// Prints a setting for phpinfo() and `php --ri`. A configured value that was refused is
/// shown as refused, with the value given and what its use does ([`consequence`]): the engine
/// holds the default in its place, which alone would read as the setting in effect.
unsafe extern "C" fn display_checked(entry: *mut zend_ini_entry, kind: c_int) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the engine passes its live entry.
        let value = unsafe { displayed_value(entry, kind) };
        // SAFETY: as above; the name lives as long as the entry.
        let name = unsafe { (*entry).name.as_ref() }.map(|n| ZendStr::as_bytes(n).to_vec());
        let key = KEYS
            .into_iter()
            .find(|k| name.as_deref() == Some(k.to_bytes()));
        let shown = match key.and_then(|k| Some((k, refusal(k)?))) {
            Some((key, Refusal::Value(given))) => {
                format!(
                    "(refused '{}': {})",
                    shown_value(key, &given),
                    consequence(key)
                )
            }
            Some((_, Refusal::DroppedByPool)) => {
                "(dropped by the FPM pool, which loads the extension after it: its first use \
                 throws)"
                    .to_owned()
            }
            None if value.is_empty() => "no value".to_owned(),
            None => value,
        };
        display(&shown);
    }));
}

/// `resilient.backend`, shown by phpinfo() and `php -i` with its password masked.
const fn backend_entry() -> IniEntryDef {
    let mut def = entry(BACKEND, c"shm", Some(on_modify_backend));
    def.displayer = Some(display_backend);
    def
}

/// `ZEND_INI_DISPLAY_ORIG`: the displayer is asked for the value php.ini gave.
const ZEND_INI_DISPLAY_ORIG: c_int = 1;

/// Prints `resilient.backend` for phpinfo() with the password (and a unix socket's `pass`)
/// replaced by `***`.
unsafe extern "C" fn display_backend(entry: *mut zend_ini_entry, kind: c_int) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the engine passes its live entry.
        let value = unsafe { displayed_value(entry, kind) };
        // A value php.ini gave that was refused (the default stands in for it): not the
        // default's name, which would say the file asks for shared memory.
        let shown = if check(BACKEND).is_err() {
            HIDDEN.to_owned()
        } else {
            masked(&value)
        };
        display(&shown);
    }));
}

/// What `phpinfo()` shows for a backend value that may hold a password no mask can find.
const HIDDEN: &str = "(not shown: it may hold a password)";

/// A backend URL with its secrets replaced by `***`; text that is not a URL but has an `@` or
/// `pass` is not shown at all.
fn masked(value: &str) -> String {
    let Ok(mut url) = resilient_http::Url::parse(value.trim()) else {
        return if value.contains('@') || value.contains("pass") {
            HIDDEN.to_owned()
        } else {
            value.to_owned()
        };
    };
    // A '?' or '#' in the password ends it early: the rest, host included, reads as the
    // query or the fragment, where no mask reaches.
    if [url.query(), url.fragment()]
        .iter()
        .any(|part| part.is_some_and(|p| p.contains('@')))
    {
        return HIDDEN.to_owned();
    }
    // Only the query parameters the backend knows are shown: any other (refused when a client
    // is made) may be a password typed where the query goes, as may a value that names one
    // (`db=0;pass=…`).
    if url.query_pairs().any(|(k, v)| {
        !resilient_redis::QUERY_PARAMETERS.contains(&k.as_ref())
            || (k != "pass" && (v.contains(';') || v.to_ascii_lowercase().contains("pass")))
    }) {
        return HIDDEN.to_owned();
    }
    if url.password().is_some() {
        let _ = url.set_password(Some("***"));
    }
    if url.query_pairs().any(|(k, _)| k == "pass") {
        let pairs: Vec<(String, String)> = url
            .query_pairs()
            .map(|(k, v)| {
                let v = if k == "pass" {
                    "***".to_owned()
                } else {
                    v.into_owned()
                };
                (k.into_owned(), v)
            })
            .collect();
        url.query_pairs_mut().clear().extend_pairs(pairs);
    }
    url.to_string()
}

/// The table handed to the engine. Settings are `PHP_INI_ALL` so a test (or
/// an app) can point `resilient.shm_path` somewhere else with `ini_set()`
/// before its first use; the segment cache is keyed by path.
static ENTRIES: IniEntryDefs<9> = IniEntryDefs::new([
    entry(SHM_PATH, c"", Some(on_modify_path)),
    entry(SHM_SLOTS, c"256", Some(on_modify_slots)),
    entry(SHM_REQUIRED, c"0", Some(on_modify_required)),
    entry(WEB_TIMEOUT, c"10", Some(on_modify_seconds_timeout)),
    entry(WEB_CONNECT_TIMEOUT, c"3", Some(on_modify_seconds_connect)),
    entry(WEB_MAX_ATTEMPTS, c"1", Some(on_modify_attempts)),
    backend_entry(),
    entry(CONTEXT, c"auto", Some(on_modify_context)),
    IniEntryDef::end(),
]);

/// The extension was started by an FPM worker (a pool's `php_admin_value[extension]`).
static LOADED_BY_FPM_POOL: AtomicBool = AtomicBool::new(false);

/// `resilient.shm_path` was set by the FPM pool (after the extension started).
static PATH_SET_BY_POOL: AtomicBool = AtomicBool::new(false);

/// Called from MINIT.
pub fn register(module_number: i32) {
    // SAFETY: plain engine call.
    let late = crate::engine::php_get_module_initialized().is_some_and(|f| unsafe { f() });
    if late && crate::engine::sapi_name() == "fpm-fcgi" {
        LOADED_BY_FPM_POOL.store(true, Ordering::Relaxed);
    }
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
pub fn shm_path() -> Result<Option<String>, String> {
    check(SHM_PATH)?;
    Ok(raw(SHM_PATH).filter(|p| !p.is_empty()))
}

pub fn shm_slots() -> Result<u32, String> {
    check(SHM_SLOTS)?;
    Ok(raw(SHM_SLOTS)
        .and_then(|v| parse_slots(&v))
        .unwrap_or(DEFAULT_SHM_SLOTS))
}

/// `resilient.shm_required`: when true, an unusable segment is an error
/// instead of the degraded (process-local) mode.
pub fn shm_required() -> Result<bool, String> {
    check(SHM_REQUIRED)?;
    Ok(raw(SHM_REQUIRED)
        .and_then(|v| parse_bool(&v))
        .unwrap_or(false))
}

/// The web caps below return the default when the configured value was
/// refused, and say so once per process in PHP's error log; a caller that
/// must not run on a default calls [`check`] (or [`check_all`]) first and
/// throws its message.
pub fn web_timeout() -> f64 {
    log_rejected_once(WEB_TIMEOUT);
    raw(WEB_TIMEOUT)
        .and_then(|v| parse_seconds(&v))
        .unwrap_or(DEFAULT_WEB_TIMEOUT)
}

pub fn web_connect_timeout() -> f64 {
    log_rejected_once(WEB_CONNECT_TIMEOUT);
    raw(WEB_CONNECT_TIMEOUT)
        .and_then(|v| parse_seconds(&v))
        .unwrap_or(DEFAULT_WEB_CONNECT_TIMEOUT)
}

/// `resilient.context`: `Some(true)` web, `Some(false)` console, `None` auto (by SAPI). A
/// refused value counts as auto (logged once).
pub fn context() -> Option<bool> {
    // Asked on every `Funnel::tryAcquire()`: one atomic load, kept current by the setting's
    // validator (php.ini, the FPM pool, `ini_set`, and the restore at request end all pass it),
    // and `check` costs two more while nothing was refused. A refused value leaves the value
    // before it in force (an FPM request's `PHP_VALUE` after another's `console`): auto, then.
    if let Err(message) = check(CONTEXT) {
        log_once(CONTEXT, &message);
        return None;
    }
    match CONTEXT_NOW.load(Ordering::Relaxed) {
        CONTEXT_WEB => Some(true),
        CONTEXT_CONSOLE => Some(false),
        _ => None,
    }
}

const CONTEXT_AUTO: u8 = 0;
const CONTEXT_WEB: u8 = 1;
const CONTEXT_CONSOLE: u8 = 2;
/// The accepted value of `resilient.context` now.
static CONTEXT_NOW: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(CONTEXT_AUTO);

/// Validator of `resilient.context`: accepts as [`validate`] does, and keeps [`CONTEXT_NOW`].
fn accept_context(v: &str) -> bool {
    let Some(context) = parse_context(v) else {
        return false;
    };
    let value = match context {
        None => CONTEXT_AUTO,
        Some(true) => CONTEXT_WEB,
        Some(false) => CONTEXT_CONSOLE,
    };
    CONTEXT_NOW.store(value, Ordering::Relaxed);
    true
}

pub fn web_max_attempts() -> u32 {
    log_rejected_once(WEB_MAX_ATTEMPTS);
    raw(WEB_MAX_ATTEMPTS)
        .and_then(|v| parse_attempts(&v))
        .unwrap_or(DEFAULT_WEB_MAX_ATTEMPTS)
}

/// Values refused for the whole process (php.ini, `-d`, the FPM pool): key and raw value,
/// newest last.
static REJECTED: Mutex<Vec<(&'static CStr, String)>> = Mutex::new(Vec::new());
/// Some value was ever refused (the common case, none, skips the lock in [`check`]).
static ANY_REJECTED: AtomicBool = AtomicBool::new(false);
/// What a `.user.ini` gave in this request, per key: `Some(raw value)` refused, `None`
/// accepted. It counts over the process's values for this request only (the engine puts
/// them back at its end, and the next request of the worker may come from another folder):
/// forgotten by [`forget_request_values`].
static THIS_REQUEST: Mutex<Vec<(&'static CStr, Option<String>)>> = Mutex::new(Vec::new());
/// [`THIS_REQUEST`] is not empty.
static ANY_THIS_REQUEST: AtomicBool = AtomicBool::new(false);
/// The value `ini_set()` last accepted per key (see [`set_at_runtime`]).
static ACCEPTED_AT_RUNTIME: Mutex<Vec<(&'static CStr, Vec<u8>)>> = Mutex::new(Vec::new());

/// `Err(message)` when the configured value of `key` was refused: the message
/// names the key, what it must be and the value given.
pub fn check(key: &'static CStr) -> Result<(), String> {
    match refusal(key) {
        None => Ok(()),
        Some(Refusal::Value(value)) => Err(refused(key, &value)),
        Some(Refusal::DroppedByPool) => Err(
            "resilient.shm_path: this FPM pool loads the extension with \
             php_admin_value[extension], and php-fpm drops a pool's resilient.* lines written \
             after that line; put php_admin_value[resilient.shm_path] (and every resilient.* \
             line) before php_admin_value[extension] in the pool, or load the extension in \
             php.ini (see docs/shared-memory.md)"
                .to_owned(),
        ),
    }
}

/// Why a setting's configured value does not apply.
enum Refusal {
    /// This raw value was given and refused.
    Value(String),
    /// `resilient.shm_path` in an FPM pool that loads the extension itself and set no path
    /// before it (see [`check`]).
    DroppedByPool,
}

fn refusal(key: &'static CStr) -> Option<Refusal> {
    let this_request = ANY_THIS_REQUEST.load(Ordering::Acquire);
    let any_rejected = ANY_REJECTED.load(Ordering::Acquire);
    // Asked once, and only when something was refused or given for this request.
    let set_now = (this_request || any_rejected) && set_at_runtime(key);
    // What this request was given (a `.user.ini`, a refused FastCGI `PHP_VALUE`) comes first:
    // it is what the request's code is judged by, whatever the pool did.
    if this_request && !set_now {
        let given = THIS_REQUEST.lock().unwrap_or_else(PoisonError::into_inner);
        match given.iter().find(|(k, _)| *k == key) {
            Some((_, None)) => return None,
            Some((_, Some(value))) => return Some(Refusal::Value(value.clone())),
            None => {}
        }
    }
    if key == SHM_PATH
        && LOADED_BY_FPM_POOL.load(Ordering::Relaxed)
        && !PATH_SET_BY_POOL.load(Ordering::Relaxed)
    {
        return Some(Refusal::DroppedByPool);
    }
    if !any_rejected || set_now {
        return None;
    }
    let rejected = REJECTED.lock().unwrap_or_else(PoisonError::into_inner);
    rejected
        .iter()
        .rev()
        .find(|(k, _)| *k == key)
        .map(|(_, value)| Refusal::Value(value.clone()))
}

/// The error for `key`'s configured `value`, refused.
fn refused(key: &'static CStr, value: &str) -> String {
    if key == BACKEND {
        // A backend URL may hold a password: never shown. Its problem is said in the words of
        // the check that refused it, which never quote it.
        let problem = backend_problem(value).unwrap_or_else(|| requirement(key));
        return format!(
            "{}: {problem} (the value from php.ini, -d, the FPM pool, .user.ini or a FastCGI PHP_VALUE is not shown: it may hold a password)",
            key.to_string_lossy(),
        );
    }
    format!(
        "{}: {}, got '{}' (from php.ini, -d, the FPM pool, .user.ini or a FastCGI PHP_VALUE)",
        key.to_string_lossy(),
        requirement(key),
        shown_value(key, value)
    )
}

/// A refused value as messages and phpinfo() show it: a path whole, any other value (a word or
/// a number) up to its first character no word or number has, so that a secret put in the
/// wrong setting (a Redis URL with its password in `resilient.context`) is never shown.
fn shown_value(key: &CStr, value: &str) -> String {
    if key == SHM_PATH {
        value.escape_debug().to_string()
    } else {
        resilient_http::shown_name(value).escape_debug().to_string()
    }
}

/// What a refused value of `key` does where it is used (phpinfo()'s words).
fn consequence(key: &CStr) -> &'static str {
    if key == CONTEXT {
        "auto applies, said in the error log"
    } else if key == WEB_TIMEOUT || key == WEB_CONNECT_TIMEOUT || key == WEB_MAX_ATTEMPTS {
        "a web caller's use throws, a console caller's is said in the error log"
    } else {
        "its first use throws"
    }
}

/// `ini_set()` gave `key` a good value in this request: a refused configured value does not
/// apply until the request ends or `ini_restore()` (both clear the entry's `modified`). The
/// entry's value must be the one `ini_set()` accepted in this request (a `[PATH=]` section or
/// `.user.ini` also marks it modified; so does a failed `ini_set()`, keeping the value). It may
/// equal the original: after a refused configured value the engine put the default there,
/// and setting the default is how a script asks for it.
fn set_at_runtime(key: &'static CStr) -> bool {
    let value = with_entry(key, |entry| {
        if entry.modified == 0 {
            return None;
        }
        // SAFETY: the entry's value lives while it is the entry's (read at once, copied).
        unsafe { entry.value.cast::<ZendStr>().as_ref() }.map(|s| s.as_bytes().to_vec())
    });
    let Some(value) = value.flatten() else {
        return false;
    };
    ACCEPTED_AT_RUNTIME
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .any(|(k, v)| *k == key && *v == value)
}

/// `f` of the engine's entry for `key`; `None` when there is none (outside a request's engine).
fn with_entry<T>(key: &CStr, f: impl FnOnce(&zend_ini_entry) -> T) -> Option<T> {
    let globals = ext_php_rs::zend::ExecutorGlobals::get();
    // SAFETY: the engine's table of ini entries, live for the request; entries are found by
    // name and only read here.
    unsafe {
        let table = globals.ini_directives.as_mut()?;
        let found = ext_php_rs::ffi::zend_hash_str_find(table, key.as_ptr(), key.count_bytes());
        let entry = found
            .as_ref()
            .and_then(|z| z.value.ptr.cast::<zend_ini_entry>().as_ref())?;
        Some(f(entry))
    }
}

/// `ZEND_INI_USER`: the bit of an entry's `modifiable` that lets `ini_set()` change it.
const ZEND_INI_USER: u8 = 1;

/// `key` cannot be changed by application code: php-fpm's `php_admin_value` (or
/// `php_admin_flag`) made it system-only, so `ini_set()` fails. Such a web cap is a rule of
/// the pool, which no context declared by the application lifts.
pub fn locked(key: &CStr) -> bool {
    with_entry(key, |entry| entry.modifiable & ZEND_INI_USER == 0).unwrap_or(false)
}

/// At a request's end: what `ini_set()` accepted is forgotten, so that in a later request of
/// the worker a refused value (a `.user.ini`'s, or a failed `ini_set()`, both of which mark the
/// entry modified and keep its value) is not taken for one set at runtime. (`ini_restore()`
/// also records the original it puts back as accepted: a failed `ini_set()` after it in the
/// same request counts as that value set at runtime, so a refused configured value stays set
/// aside until the request ends, as after any good `ini_set()`.) What a `.user.ini` gave,
/// refused or accepted, is forgotten too: the worker's next request may come from a folder
/// without it.
pub fn forget_request_values() {
    ACCEPTED_AT_RUNTIME
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
    if ANY_THIS_REQUEST.swap(false, Ordering::AcqRel) {
        THIS_REQUEST
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

/// Keys whose rejection this process already logged (with its pid: a forked
/// child logs again).
static LOGGED: Mutex<Vec<(u32, &'static CStr)>> = Mutex::new(Vec::new());

/// For settings whose callers fall back to the default: log a refused value
/// once per process, so the fallback is never silent.
pub fn log_rejected_once(key: &'static CStr) {
    if let Err(message) = check(key) {
        log_once(key, &message);
    }
}

/// Logs `message`, the refusal of `key`'s value, unless this process already did.
fn log_once(key: &'static CStr, message: &str) {
    let pid = resilient_core::current_pid();
    {
        let mut logged = LOGGED.lock().unwrap_or_else(PoisonError::into_inner);
        if logged.contains(&(pid, key)) {
            return;
        }
        logged.push((pid, key));
    }
    crate::errors::log_warning(&format!(
        "resilient: {message}; the built-in default applies until it is fixed"
    ));
}

/// [`check`] for every setting at once (all problems, one per line).
pub fn check_all() -> Result<(), String> {
    let errors: Vec<String> = KEYS.into_iter().filter_map(|k| check(k).err()).collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n"))
    }
}

fn requirement(key: &CStr) -> String {
    match key.to_bytes() {
        b"resilient.shm_path" => format!(
            "must be an absolute path without control characters, or empty for the default \
             /dev/shm/resilient-<uid>.v{}.shm",
            resilient_core::layout::LAYOUT_VERSION
        ),
        b"resilient.shm_slots" => format!("must be an integer between 1 and {MAX_SHM_SLOTS}"),
        b"resilient.shm_required" => {
            "must be a boolean (0, 1, on, off, true, false, yes, no)".to_owned()
        }
        b"resilient.web_timeout" | b"resilient.web_connect_timeout" => format!(
            "must be a number of seconds, at least {} and at most {}",
            resilient_core::validate::MIN_TIMEOUT_SECONDS,
            resilient_core::validate::MAX_SECONDS
        ),
        b"resilient.web_max_attempts" => "must be an integer between 1 and 100".to_owned(),
        b"resilient.backend" => "must be 'shm' or a redis://, rediss:// or unix:// URL".to_owned(),
        b"resilient.context" => "must be auto, web or console".to_owned(),
        _ => "is invalid".to_owned(),
    }
}

fn parse_slots(v: &str) -> Option<u32> {
    v.trim()
        .parse::<u32>()
        .ok()
        .filter(|n| (1..=MAX_SHM_SLOTS).contains(n))
}

/// A timeout as the client's options take it: at least 1 ms and at most a year (larger values
/// are typos, and would overflow a `Duration`). Anything else is refused by `ini_set` and
/// ignored from php.ini.
fn parse_seconds(v: &str) -> Option<f64> {
    v.trim()
        .parse::<f64>()
        .ok()
        .and_then(|s| resilient_core::validate::timeout_seconds("", s).ok())
}

fn parse_attempts(v: &str) -> Option<u32> {
    v.trim()
        .parse::<u32>()
        .ok()
        .filter(|n| (1..=100).contains(n))
}

fn parse_backend(v: &str) -> bool {
    backend_problem(v).is_none()
}

/// Why every client would refuse `v` as its backend, in words that never quote it (it may
/// hold a password): its shape, then for a Redis URL all of it (query parameters, port,
/// prefix), so that `ini_set()` refuses what every client would. Not a `ca` file's contents:
/// one missing when PHP starts may come later, and a refusal lasts the process's life (each
/// client reads the file when made).
pub(crate) fn backend_problem(v: &str) -> Option<String> {
    let mut config = resilient_http::ClientConfig::default();
    if let Err(e) = config.set_backend(v) {
        return Some(e.problem().to_owned());
    }
    match config.backend {
        resilient_http::BackendKind::Redis(_) => resilient_redis::Target::check_url(v)
            .err()
            .map(|e| e.problem().to_owned()),
        resilient_http::BackendKind::Shm => None,
    }
}

/// `auto` → `Some(None)`, `web` → `Some(Some(true))`, `console` → `Some(Some(false))`.
pub(crate) fn parse_context(v: &str) -> Option<Option<bool>> {
    let v = v.trim();
    if v.is_empty() || v.eq_ignore_ascii_case("auto") {
        Some(None)
    } else if v.eq_ignore_ascii_case("web") {
        Some(Some(true))
    } else if v.eq_ignore_ascii_case("console") {
        Some(Some(false))
    } else {
        None
    }
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "" | "0" | "off" | "false" | "no" => Some(false),
        "1" | "on" | "true" | "yes" => Some(true),
        _ => None,
    }
}

fn parse_path(v: &str) -> bool {
    // Empty = default; otherwise an absolute path without control characters (a NUL would cut
    // it short; a newline, named in the error log, would forge lines there).
    v.is_empty() || (v.starts_with('/') && !v.chars().any(char::is_control))
}

/// `zend_ini.h`: the stages an `on_modify` handler is called in.
const STAGE_ACTIVATE: c_int = 1 << 2;
const STAGE_DEACTIVATE: c_int = 1 << 3;
const STAGE_RUNTIME: c_int = 1 << 4;
const STAGE_HTACCESS: c_int = 1 << 5;

/// Shared body of the validators: read the new value, never unwind into C.
/// A bad value is refused; unless it comes from `ini_set()` it is also
/// remembered for [`check`]. A good value from an FPM pool forgets an earlier
/// bad one (not at startup: the engine validates the default right after
/// refusing the configured value); one from `ini_set()` is remembered and sets
/// it aside for the request (see [`set_at_runtime`]). A `.user.ini`'s, good or
/// bad, counts for its request only ([`THIS_REQUEST`]).
fn validate(
    key: &'static CStr,
    new_value: *mut zend_string,
    stage: c_int,
    ok: fn(&str) -> bool,
) -> c_int {
    let result = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the engine passes a live zend_string (or NULL).
        let Some(s) = (unsafe { new_value.cast::<ZendStr>().as_ref() }) else {
            return false;
        };
        let bytes = s.as_bytes();
        let good = std::str::from_utf8(bytes).is_ok_and(ok);
        if good && [SHM_PATH, SHM_SLOTS, SHM_REQUIRED].contains(&key) {
            // The guards PHP objects keep ask for the segment again at their next use.
            crate::segment::settings_changed();
        }
        // What ini_set() accepted in this request (forgotten at its end: see
        // `forget_request_values`).
        if good && stage & STAGE_RUNTIME != 0 {
            let mut accepted = ACCEPTED_AT_RUNTIME
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            accepted.retain(|(k, _)| *k != key);
            accepted.push((key, bytes.to_vec()));
        }
        if stage & STAGE_HTACCESS != 0 || (!good && sent_with_the_request(stage)) {
            // A `.user.ini`, or a refused FastCGI `PHP_VALUE`: this request's only. (An
            // accepted `PHP_VALUE` stays in force for the worker's later requests: php-fpm
            // writes it over the configured value, so it counts as a pool's does.)
            let mut given = THIS_REQUEST.lock().unwrap_or_else(PoisonError::into_inner);
            given.retain(|(k, _)| *k != key);
            given.push((
                key,
                (!good).then(|| String::from_utf8_lossy(bytes).into_owned()),
            ));
            ANY_THIS_REQUEST.store(true, Ordering::Release);
            return good;
        }
        let mut rejected = REJECTED.lock().unwrap_or_else(PoisonError::into_inner);
        if good {
            if key == SHM_PATH && stage & STAGE_ACTIVATE != 0 {
                PATH_SET_BY_POOL.store(true, Ordering::Relaxed);
            }
            if stage & STAGE_ACTIVATE != 0 {
                rejected.retain(|(k, _)| *k != key);
            }
        } else if stage & (STAGE_RUNTIME | STAGE_DEACTIVATE) == 0 {
            rejected.push((key, String::from_utf8_lossy(bytes).into_owned()));
            ANY_REJECTED.store(true, Ordering::Release);
        }
        good
    }));
    if result.unwrap_or(false) {
        SUCCESS
    } else {
        FAILURE
    }
}

/// A value php-fpm applies from the request's FastCGI parameters (`PHP_VALUE`,
/// `PHP_ADMIN_VALUE`). php-fpm applies them at the activate stage, as it does the pool's
/// `php_value` lines, but only once it holds a request (`SG(server_context)`); the pool's are
/// applied when the worker starts, before any. A refused one counts for its request only: the
/// engine kept the value in force, and the next request may not send it.
fn sent_with_the_request(stage: c_int) -> bool {
    stage & STAGE_ACTIVATE != 0
        && !ext_php_rs::zend::SapiGlobals::get()
            .server_context
            .is_null()
        && crate::engine::sapi_name() == "fpm-fcgi"
}

/// Declares an `OnModify` handler (the engine's C signature) for `$key` that
/// accepts a value when `$check` says so.
macro_rules! on_modify {
    ($name:ident, $key:expr, $check:expr) => {
        unsafe extern "C" fn $name(
            _: *mut zend_ini_entry,
            v: *mut zend_string,
            _: *mut c_void,
            _: *mut c_void,
            _: *mut c_void,
            stage: c_int,
        ) -> c_int {
            validate($key, v, stage, $check)
        }
    };
}

on_modify!(on_modify_path, SHM_PATH, parse_path);
on_modify!(on_modify_slots, SHM_SLOTS, |s| parse_slots(s).is_some());
on_modify!(on_modify_required, SHM_REQUIRED, |s| parse_bool(s)
    .is_some());
on_modify!(on_modify_seconds_timeout, WEB_TIMEOUT, |s| parse_seconds(s)
    .is_some());
on_modify!(on_modify_seconds_connect, WEB_CONNECT_TIMEOUT, |s| {
    parse_seconds(s).is_some()
});
on_modify!(on_modify_attempts, WEB_MAX_ATTEMPTS, |s| parse_attempts(s)
    .is_some());
on_modify!(on_modify_backend, BACKEND, parse_backend);
on_modify!(on_modify_context, CONTEXT, accept_context);

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
        assert_eq!(
            parse_seconds("5e-324"),
            None,
            "under the 1 ms a client option takes"
        );
        assert_eq!(parse_seconds("0.001"), Some(0.001));
        assert_eq!(parse_context(" WEB "), Some(Some(true)));
        assert_eq!(parse_attempts("0"), None);
        assert!(parse_backend("redis://127.0.0.1:6379/0"));
        assert!(!parse_backend("mysql://x"));
        assert!(parse_path(""));
        assert!(!parse_path("relative.shm"));
        assert_eq!(parse_slots("65537"), None);
        assert_eq!(parse_bool("On"), Some(true));
        assert_eq!(parse_bool(""), Some(false));
        assert_eq!(parse_bool("maybe"), None);
        assert_eq!(parse_context("Web"), Some(Some(true)));
        assert_eq!(parse_context("auto"), Some(None));
        assert_eq!(parse_context("octane"), None);
    }

    #[test]
    fn a_password_cut_short_by_a_question_mark_or_a_hash_is_not_shown() {
        assert_eq!(
            masked("redis://u:s3cret@127.0.0.1:6379/0"),
            "redis://u:***@127.0.0.1:6379/0"
        );
        assert_eq!(
            masked("unix:///run/redis.sock?db=2&pass=s3cret&prefix=app:"),
            "unix:///run/redis.sock?db=2&pass=***&prefix=app%3A"
        );
        for url in [
            "redis://default:8734?QwE#rT@10.0.0.5:6379/0",
            "redis://default:8734?QwE@10.0.0.5:6379/0",
            // A password typed where the query goes; one hidden in a known parameter's value.
            "redis://:s3cret@127.0.0.1:6379/0?s3cret",
            "redis://127.0.0.1:6379/0?prefix=a:&Xk29sLq7=1",
            "unix:///run/redis.sock?db=0;pass=s3cret",
        ] {
            assert_eq!(masked(url), "(not shown: it may hold a password)");
        }
    }
}
