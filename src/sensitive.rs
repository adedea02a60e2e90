//! `#[\SensitiveParameter]` on the parameters of the extension's methods that carry secrets:
//! options (headers, a proxy's or a key's password), a path with a token in its query, a query,
//! a body, headers, a pool's requests. With `zend.exception_ignore_args=0` (PHP's built-in
//! default, php.ini-development's, what Ignition turns on) a trace's frames keep their
//! arguments, which error trackers collect and send off the host; a sensitive parameter's
//! frame holds a `SensitiveParameterValue` instead.
//!
//! ext-php-rs cannot declare a parameter's attribute, and registers the classes after the
//! module's startup hook: the attribute is added to the registered methods at the first
//! request of each process (the engine's `zend_add_parameter_attribute`, spelled out: it is
//! inline in PHP's headers; its functions looked up as engine.rs says why). The methods are the engine's, persistent: so is the attribute,
//! which the engine frees with its class at shutdown.

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering};

use ext_php_rs::ffi::zend_function;
use ext_php_rs::types::ZendStr;
use ext_php_rs::zend::ClassEntry;

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

/// The classes are registered again with the module (a SAPI may start it again in the same
/// process): marked again then.
static MARKED: AtomicBool = AtomicBool::new(false);

/// At module startup: the classes about to be registered have no attribute yet.
pub fn forget() {
    MARKED.store(false, Ordering::Relaxed);
}

/// Marks the sensitive parameters, once per process and module start (a request's startup).
pub fn mark_once() {
    if MARKED.swap(true, Ordering::Relaxed) {
        return;
    }
    for class in CLASSES {
        if let Some(ce) = ClassEntry::try_find(class) {
            for method in ce.function_table.values() {
                // SAFETY: a class's function table holds pointers to its methods, and a
                // registered class's methods are internal functions.
                unsafe {
                    let func = method.value.ptr.cast::<zend_function>();
                    if !func.is_null()
                        && (*func).type_ == ext_php_rs::ffi::ZEND_INTERNAL_FUNCTION as u8
                    {
                        mark(func);
                    }
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
    // Looked up, not linked: see engine.rs.
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
