//! The extension's exception classes and the helpers Rust code uses to throw them.
//!
//! ```text
//! \RuntimeException
//!  ├── Resilient\Unavailable            (+ response(): ?Resilient\Response, failure(): ?string)
//!  │    ├── Resilient\DeadlineExceeded
//!  │    ├── Resilient\FunnelFull
//!  │    ├── Resilient\BudgetExhausted
//!  │    ├── Resilient\CircuitOpen
//!  │    └── Resilient\UpstreamFailed
//!  └── Resilient\SharedMemoryError      (segment unusable with resilient.shm_required=1, or a bad resilient.shm_* setting)
//! ```
//!
//! Why not `#[php_class]`: a class with a Rust object behind it cannot be
//! constructed or subclassed from PHP as an exception. These are plain
//! internal classes registered in MINIT with `ClassBuilder`, inheriting
//! `\RuntimeException`'s constructor, so `new Resilient\FunnelFull('x')` and
//! `class Mine extends Resilient\Unavailable {}` work.
//!
//! `Unavailable` declares `protected $response = null` and `protected $failure = null`, and the
//! `response()` and `failure()` methods reading them. [`throw_with_response`] sets them on the
//! thrown object (for `Resilient\Client`, which attaches the last Response it received, or why
//! its last attempt got none).

use std::ffi::CStr;
use std::panic::AssertUnwindSafe;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

use ext_php_rs::args::ArgInfoTables;
use ext_php_rs::builders::{ClassBuilder, ClassProperty, FunctionBuilder};
use ext_php_rs::exception::PhpException;
use ext_php_rs::ffi::zend_throw_exception;

use crate::engine;
use ext_php_rs::flags::{DataType, MethodFlags, PropertyFlags};
use ext_php_rs::types::Zval;
use ext_php_rs::zend::{ce, ClassEntry, ExecuteData, ExecutorGlobals};

/// Every exception class the extension defines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Unavailable = 0,
    DeadlineExceeded = 1,
    FunnelFull = 2,
    BudgetExhausted = 3,
    CircuitOpen = 4,
    UpstreamFailed = 5,
    SharedMemoryError = 6,
}

const COUNT: usize = 7;

impl Kind {
    pub const ALL: [Kind; COUNT] = [
        Kind::Unavailable,
        Kind::DeadlineExceeded,
        Kind::FunnelFull,
        Kind::BudgetExhausted,
        Kind::CircuitOpen,
        Kind::UpstreamFailed,
        Kind::SharedMemoryError,
    ];

    /// Fully qualified PHP class name.
    pub const fn class_name(self) -> &'static str {
        match self {
            Kind::Unavailable => "Resilient\\Unavailable",
            Kind::DeadlineExceeded => "Resilient\\DeadlineExceeded",
            Kind::FunnelFull => "Resilient\\FunnelFull",
            Kind::BudgetExhausted => "Resilient\\BudgetExhausted",
            Kind::CircuitOpen => "Resilient\\CircuitOpen",
            Kind::UpstreamFailed => "Resilient\\UpstreamFailed",
            Kind::SharedMemoryError => "Resilient\\SharedMemoryError",
        }
    }

    /// True for `Unavailable` and its subclasses (they carry a response).
    pub const fn is_unavailable(self) -> bool {
        !matches!(self, Kind::SharedMemoryError)
    }
}

/// Class entries, filled at MINIT (and again if a SAPI restarts the module).
static CLASS_ENTRIES: [AtomicPtr<ClassEntry>; COUNT] =
    [const { AtomicPtr::new(ptr::null_mut()) }; COUNT];

/// The registered class entry, `None` before MINIT.
pub fn class_entry(kind: Kind) -> Option<&'static ClassEntry> {
    // SAFETY: only ever set to class entries the engine keeps for the life of the process.
    unsafe {
        CLASS_ENTRIES[kind as usize]
            .load(Ordering::Acquire)
            .as_ref()
    }
}

/// `\RuntimeException` (SPL is always compiled into PHP 8).
pub fn runtime_exception() -> &'static ClassEntry {
    spl_class(c"spl_ce_RuntimeException").unwrap_or_else(ce::exception)
}

/// `\LogicException`.
pub fn logic_exception() -> &'static ClassEntry {
    spl_class(c"spl_ce_LogicException").unwrap_or_else(ce::exception)
}

/// `\InvalidArgumentException`.
pub fn invalid_argument_exception() -> &'static ClassEntry {
    spl_class(c"spl_ce_InvalidArgumentException").unwrap_or_else(ce::exception)
}

fn spl_class(symbol: &CStr) -> Option<&'static ClassEntry> {
    // SAFETY: SPL's class entries live as long as PHP.
    engine::spl_class_entry(symbol).and_then(|ce| unsafe { ce.cast::<ClassEntry>().as_ref() })
}

fn unavailable_ce() -> &'static ClassEntry {
    class_entry(Kind::Unavailable).unwrap_or_else(runtime_exception)
}

fn store<const K: usize>(ce: &'static mut ClassEntry, arg_info: ArgInfoTables) {
    CLASS_ENTRIES[K].store(ce, Ordering::Release);
    // The engine points at these for the life of the process.
    std::mem::forget(arg_info);
}

const RESPONSE_PROPERTY: &CStr = c"response";
const FAILURE_PROPERTY: &CStr = c"failure";

/// Registers every class. Called from MINIT, before the `#[php_class]` classes.
pub fn register() -> ext_php_rs::error::Result<()> {
    ClassBuilder::new(Kind::Unavailable.class_name())
        .extends((runtime_exception, "\\RuntimeException"))
        .property(protected_null("response"))
        .property(protected_null("failure"))
        .method(
            FunctionBuilder::new("response", unavailable_response).returns(
                DataType::object("Resilient\\Response"),
                false,
                true,
            ),
            MethodFlags::Public,
        )
        .method(
            FunctionBuilder::new("failure", unavailable_failure).returns(
                DataType::String,
                false,
                true,
            ),
            MethodFlags::Public,
        )
        .registration(store::<{ Kind::Unavailable as usize }>)
        .register()?;

    macro_rules! sub {
        ($kind:expr, $parent:expr, $parent_name:expr) => {
            ClassBuilder::new($kind.class_name())
                .extends(($parent, $parent_name))
                .registration(store::<{ $kind as usize }>)
                .register()?;
        };
    }
    sub!(
        Kind::DeadlineExceeded,
        unavailable_ce,
        "\\Resilient\\Unavailable"
    );
    sub!(Kind::FunnelFull, unavailable_ce, "\\Resilient\\Unavailable");
    sub!(
        Kind::BudgetExhausted,
        unavailable_ce,
        "\\Resilient\\Unavailable"
    );
    sub!(
        Kind::CircuitOpen,
        unavailable_ce,
        "\\Resilient\\Unavailable"
    );
    sub!(
        Kind::UpstreamFailed,
        unavailable_ce,
        "\\Resilient\\Unavailable"
    );
    sub!(
        Kind::SharedMemoryError,
        runtime_exception,
        "\\RuntimeException"
    );
    Ok(())
}

/// `protected $name = null;`
fn protected_null(name: &str) -> ClassProperty {
    ClassProperty {
        name: name.into(),
        flags: PropertyFlags::Protected,
        default: Some(Box::new(|| Ok(Zval::null()))),
        docs: &[],
        ty: None,
        nullable: true,
        readonly: false,
        default_stub: Some("null".into()),
    }
}

/// `Unavailable::response()`: the protected `$response` property when it holds an object.
extern "C" fn unavailable_response(ex: &mut ExecuteData, retval: &mut Zval) {
    read_property(ex, retval, RESPONSE_PROPERTY, is_response);
}

/// A `Resilient\Response` (the declared return type; a subclass may have stored anything).
fn is_response(z: &Zval) -> bool {
    z.object()
        .is_some_and(|o| o.is_instance::<crate::response::Response>())
}

/// `Unavailable::failure()`: the protected `$failure` property when it holds a string.
extern "C" fn unavailable_failure(ex: &mut ExecuteData, retval: &mut Zval) {
    read_property(ex, retval, FAILURE_PROPERTY, Zval::is_string);
}

/// Returns `$this->{name}` (declared by `Unavailable`) when `wanted` accepts it, else null (a
/// subclass may have written anything there).
fn read_property(ex: &mut ExecuteData, retval: &mut Zval, name: &CStr, wanted: fn(&Zval) -> bool) {
    ext_php_rs::zend::run_handler(AssertUnwindSafe(|| {
        if ex.parser().parse().is_err() {
            return; // ArgumentCountError already thrown
        }
        let scope = ptr::from_ref(unavailable_ce()).cast_mut();
        let Some(this) = ex.get_self() else {
            retval.set_null();
            return;
        };
        let mut rv = Zval::new();
        // SAFETY: live object, NUL-terminated name, `rv` outlives the read.
        let value = unsafe {
            ext_php_rs::ffi::zend_read_property(
                scope,
                ptr::from_mut(this),
                name.as_ptr(),
                name.count_bytes(),
                true,
                &raw mut rv,
            )
            .as_ref()
        };
        *retval = match value {
            Some(v) if wanted(v) => v.shallow_clone(),
            _ => Zval::null(),
        };
    }));
}

/// An exception of one of our classes, ready to be returned as `Err` from a
/// `#[php_method]` (the macro throws it). `code` is the exception code
/// (`UpstreamFailed`: last HTTP status, 0 for a connection error).
pub fn error(kind: Kind, message: impl Into<String>, code: i32) -> PhpException {
    match class_entry(kind) {
        Some(ce) => PhpException::new(printable(message.into()), code, ce),
        None => PhpException::new(printable(message.into()), code, runtime_exception()),
    }
}

/// Throws at once (for hand-written handlers). No-op if an exception is
/// already pending: that one keeps propagating.
pub fn throw(kind: Kind, message: impl Into<String>, code: i32) {
    error(kind, message, code).throw();
}

/// What a `Resilient\Client` attaches to the `Unavailable` it throws or returns: the last
/// Response received (a `Resilient\Response` object; anything else is ignored), or why the last
/// attempt got none (`timeout`, `connect`...).
#[derive(Default)]
pub struct LastAttempt {
    pub response: Option<Zval>,
    pub failure: Option<&'static str>,
}

impl LastAttempt {
    /// Sets `$response` and `$failure` on `object`, an `Unavailable` (or subclass) instance.
    pub fn attach(self, object: &mut ext_php_rs::types::ZendObject) {
        let Some(update) = engine::zend_update_property() else {
            return;
        };
        let object = ptr::from_mut(object);
        let scope = ptr::from_ref(unavailable_ce()).cast_mut();
        let set = |name: &CStr, mut value: Zval| {
            // SAFETY: `object` is a live Unavailable; the engine copies (and addrefs) `value`.
            unsafe {
                update(
                    scope,
                    object,
                    name.as_ptr(),
                    name.count_bytes(),
                    ptr::from_mut(&mut value),
                );
            }
        };
        if let Some(response) = self.response.filter(Zval::is_object) {
            set(RESPONSE_PROPERTY, response);
        }
        if let Some(failure) = self.failure {
            let mut value = Zval::new();
            if value.set_string(failure, false).is_ok() {
                set(FAILURE_PROPERTY, value);
            }
        }
    }
}

/// Throws `kind` (an `Unavailable` subclass) with `last` attached, so `$e->response()` and
/// `$e->failure()` return it. After this returns the exception is pending: return from the
/// handler without throwing anything else (returning `Err(..)` from a `#[php_method]` is fine:
/// `throw()` is a no-op while an exception is pending).
pub fn throw_with_response(kind: Kind, message: &str, code: i32, last: LastAttempt) {
    if ExecutorGlobals::has_exception() {
        return;
    }
    let Some(ce) = class_entry(kind) else {
        throw(kind, message, code);
        return;
    };
    let Ok(c_message) = std::ffi::CString::new(printable(message.to_owned())) else {
        return;
    };
    // SAFETY: valid class entry and C string; the engine returns the thrown object.
    let object = unsafe {
        zend_throw_exception(
            ptr::from_ref(ce).cast_mut(),
            c_message.as_ptr(),
            code.into(),
        )
    };
    // SAFETY: the engine returns the live thrown object, or null.
    if let (true, Some(object)) = (kind.is_unavailable(), unsafe { object.as_mut() }) {
        last.attach(object);
    }
}

/// `\ValueError` naming the argument, for out-of-range / NaN / INF / empty values.
pub fn value_error(message: impl Into<String>) -> PhpException {
    PhpException::new(printable(about(message.into())), 0, ce::value_error())
}

/// `\RuntimeException` naming the option: something outside the caller's values failed (a
/// part's stream that stalled).
pub fn runtime_error(message: impl Into<String>) -> PhpException {
    PhpException::new(printable(about(message.into())), 0, runtime_exception())
}

/// `\InvalidArgumentException` naming the option (e.g. an unknown option key).
pub fn invalid_argument(message: impl Into<String>) -> PhpException {
    PhpException::new(
        printable(about(message.into())),
        0,
        invalid_argument_exception(),
    )
}

thread_local! {
    /// What the argument errors made now are about, said first (see [`about_item`]).
    static ITEM: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// Runs `f` with every argument error it makes (`\ValueError`, `\TypeError`,
/// `\InvalidArgumentException`) starting with `item` (`pool request 'a': `): one item's
/// options among a pool's many are checked by the code that checks a single request's, and the
/// message must say which item. PHP code `f` runs goes through [`outside_item`]. A fatal error
/// inside `f` (a long jump, which no drop sees) leaves the item set: the request's start
/// clears it ([`forget_item`]).
pub fn about_item<T>(item: &str, f: impl FnOnce() -> T) -> T {
    let _restore = Restore(ITEM.replace(item.to_owned()));
    f()
}

/// Runs `f`, a call into PHP code (a `jsonSerialize()`, a stream wrapper, `strval()`), with no
/// item set: what that code throws, another client it builds, or the code a Fiber it suspends
/// lets run meanwhile, is not about the item.
pub fn outside_item<T>(f: impl FnOnce() -> T) -> T {
    let _restore = Restore(ITEM.take());
    f()
}

/// Puts back the item a scope replaced, also when the scope unwinds.
struct Restore(String);

impl Drop for Restore {
    fn drop(&mut self) {
        ITEM.set(std::mem::take(&mut self.0));
    }
}

/// Clears what [`about_item`] set (request start: a bailout may have skipped its reset).
pub fn forget_item() {
    ITEM.take();
}

/// `message` after what [`about_item`] says it is about, if anything.
pub fn about(message: String) -> String {
    ITEM.with_borrow(|item| {
        if item.is_empty() {
            message
        } else {
            format!("{item}{message}")
        }
    })
}

/// `message` with each NUL byte written `\0`: an exception message is a C string, and one with
/// a NUL (a path or key given with one, an anonymous class's name) would otherwise turn the
/// intended exception into a generic `\Error` about the NUL.
pub fn printable(message: String) -> String {
    if message.contains('\0') {
        message.replace('\0', "\\0")
    } else {
        message
    }
}
