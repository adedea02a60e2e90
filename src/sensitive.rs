//! `#[\SensitiveParameter]` on the parameters of the extension's methods that carry secrets:
//! options (headers, a proxy's or a key's password), a path with a token in its query, a query,
//! a body, headers, a pool's requests. With `zend.exception_ignore_args=0` (PHP's built-in
//! default, php.ini-development's, what Ignition turns on) a trace's frames keep their
//! arguments, which error trackers collect and send off the host; a sensitive parameter's
//! frame holds a `SensitiveParameterValue` instead.
//!
//! ext-php-rs cannot declare a parameter's attribute, and registers the classes after the
//! module's startup hook: the attribute is added to the registered methods once every module
//! has started (the engine's post-startup callback, chained), with the engine's
//! `zend_add_parameter_attribute` spelled out (it is inline in PHP's headers; its functions
//! looked up as engine.rs says why). That is before FPM's master forks: a user class extending
//! `Resilient\Client` copies the methods, attribute table included, and opcache shares that
//! copy between the workers, so the table must be one every worker has at the same address
//! (made in one worker, the others followed a pointer into its heap: SIGSEGV). The table is
//! persistent, as the methods are, and the engine frees it with its class at shutdown. An
//! extension loaded after startup (an FPM pool's `php_admin_value[extension]`) marks nothing.

use std::ffi::{c_int, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};

use ext_php_rs::ffi::zend_function;
use ext_php_rs::types::ZendStr;
use ext_php_rs::zend::ClassEntry;

use crate::engine::PostStartup;

/// The classes whose methods take such parameters.
const CLASSES: [&str; 2] = ["Resilient\\Client", "Resilient\\Response"];

/// The parameters, by name, that may carry a secret.
const SENSITIVE: [&CStr; 7] = [
    c"options",
    c"path",
    c"query",
    c"json",
    c"body",
    c"headers",
    c"requests",
];

/// The attribute's name, lowercased as the engine looks it up.
const ATTRIBUTE_LC: &CStr = c"sensitiveparameter";

/// `ZEND_ATTRIBUTE_PERSISTENT`: an internal function's attributes live as long as it.
const PERSISTENT: u32 = 1;

/// The post-startup callback this module's replaced (0: none), called after marking.
static PREVIOUS: AtomicUsize = AtomicUsize::new(0);

/// At module startup (PHP's own, not a late load): has the methods marked once every module
/// has started.
pub fn mark_after_startup() {
    let Some(slot) = crate::engine::post_startup_slot() else {
        return;
    };
    // SAFETY: the engine's variable, set during startup on the thread that starts PHP.
    unsafe {
        PREVIOUS.store((*slot).map_or(0, |f| f as usize), Ordering::Relaxed);
        *slot = Some(post_startup);
    }
}

/// The chained post-startup callback: marks, then calls the one it replaced (opcache's, which
/// preloads: a preloaded subclass copies the marked methods).
unsafe extern "C" fn post_startup() -> c_int {
    let _ = catch_unwind(AssertUnwindSafe(mark_all));
    match PREVIOUS.swap(0, Ordering::Relaxed) {
        0 => 0,
        // SAFETY: the value the engine's variable held, a callback of this type.
        previous => unsafe { std::mem::transmute::<usize, PostStartup>(previous)() },
    }
}

/// Marks the sensitive parameters of [`CLASSES`]' methods.
fn mark_all() {
    // The compiler's class table: the executor's exists only while a request runs.
    // SAFETY: read on the thread that starts PHP, after every module registered its classes.
    let Some(table) = (unsafe { ext_php_rs::ffi::compiler_globals.class_table.as_ref() }) else {
        return;
    };
    for class in CLASSES {
        let Some(ce) = table
            .get(class.to_ascii_lowercase().as_str())
            // SAFETY: the class table holds class entries.
            .and_then(|zv| unsafe { zv.value.ptr.cast::<ClassEntry>().as_ref() })
        else {
            continue;
        };
        for method in ce.function_table.values() {
            // SAFETY: a class's function table holds pointers to its methods, and a
            // registered class's methods are internal functions.
            unsafe {
                let func = method.value.ptr.cast::<zend_function>();
                if !func.is_null() && (*func).type_ == ext_php_rs::ffi::ZEND_INTERNAL_FUNCTION as u8
                {
                    mark(func);
                }
            }
        }
    }
}

/// Adds the attribute to `func`'s parameters named in [`SENSITIVE`] that have none.
///
/// # Safety
/// `func` is a live internal function of a registered class, on the thread that runs PHP.
unsafe fn mark(func: *mut zend_function) {
    // Looked up, not linked (see engine.rs); each lookup is cached there after the first.
    let (Some(add), Some(get)) = (
        crate::engine::zend_add_attribute(),
        crate::engine::zend_get_parameter_attribute_str(),
    ) else {
        return;
    };
    let internal = unsafe { &mut (*func).internal_function };
    if internal.arg_info.is_null() {
        return;
    }
    for i in 0..internal.num_args {
        // SAFETY: an internal function has `num_args` entries of arg_info.
        let name = unsafe { (*internal.arg_info.add(i as usize)).name };
        if name.is_null() || !SENSITIVE.contains(&unsafe { CStr::from_ptr(name) }) {
            continue;
        }
        // SAFETY: the engine's own lookup and insertion, as zend_add_parameter_attribute().
        unsafe {
            let attributes = &raw mut internal.attributes;
            let has = !(*attributes).is_null()
                && !get(
                    *attributes,
                    ATTRIBUTE_LC.as_ptr(),
                    ATTRIBUTE_LC.to_bytes().len(),
                    i,
                )
                .is_null();
            if !has {
                let mut name = ZendStr::new("SensitiveParameter", true);
                add(attributes, &raw mut *name, 0, PERSISTENT, i + 1, 0);
            }
        }
    }
}
