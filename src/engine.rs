//! PHP engine symbols that ext-php-rs does not bind, resolved with `dlsym`.
//!
//! Why not `extern "C"` declarations: the `.so` is linked with BIND_NOW, and
//! `cargo php stubs` dlopens it outside PHP, providing only the symbols
//! ext-php-rs binds. Any other direct reference (function or data) makes that
//! dlopen fail, so these few are looked up at first use instead. Inside PHP
//! they always exist (they are part of the engine's exported API); if one
//! were missing, callers get `None` and fall back.

use std::ffi::{c_char, c_int, CStr};
use std::sync::OnceLock;

use ext_php_rs::ffi::{zend_class_entry, zend_object, zval};

/// Resolves `name` (NUL-terminated bytes) once; 0 when absent.
fn lookup(cache: &OnceLock<usize>, name: &'static [u8]) -> usize {
    *cache.get_or_init(|| match CStr::from_bytes_with_nul(name) {
        // SAFETY: dlsym with RTLD_DEFAULT only searches already-loaded objects.
        Ok(name) => (unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) }) as usize,
        Err(_) => 0,
    })
}

macro_rules! engine_fn {
    ($(#[$doc:meta])* $name:ident: fn($($arg:ident: $ty:ty),*) $(-> $ret:ty)?) => {
        $(#[$doc])*
        #[allow(non_snake_case)]
        pub fn $name() -> Option<unsafe extern "C" fn($($ty),*) $(-> $ret)?> {
            static CACHE: OnceLock<usize> = OnceLock::new();
            let addr = lookup(&CACHE, concat!(stringify!($name), "\0").as_bytes());
            // SAFETY: the symbol has this C signature in PHP 8.x's headers.
            (addr != 0).then(|| unsafe { std::mem::transmute::<usize, unsafe extern "C" fn($($ty),*) $(-> $ret)?>(addr) })
        }
    };
}

engine_fn!(
    /// `char *zend_ini_string_ex(const char *name, size_t len, int orig, bool *exists)`
    zend_ini_string_ex: fn(name: *const c_char, len: usize, orig: c_int, exists: *mut bool) -> *mut c_char
);
engine_fn!(
    /// `void display_ini_entries(zend_module_entry *module)`: phpinfo()'s table of a module's
    /// settings.
    display_ini_entries: fn(module: *mut ext_php_rs::zend::ModuleEntry)
);
engine_fn!(
    /// `zend_attribute *zend_add_attribute(HashTable **attributes, zend_string *name, uint32_t argc, uint32_t flags, uint32_t offset, uint32_t lineno)`
    zend_add_attribute: fn(attributes: *mut *mut ext_php_rs::ffi::HashTable, name: *mut ext_php_rs::ffi::zend_string, argc: u32, flags: u32, offset: u32, lineno: u32) -> *mut std::ffi::c_void
);
engine_fn!(
    /// `zend_attribute *zend_get_parameter_attribute_str(HashTable *attributes, const char *str, size_t len, uint32_t offset)`
    zend_get_parameter_attribute_str: fn(attributes: *mut ext_php_rs::ffi::HashTable, name: *const c_char, len: usize, offset: u32) -> *mut std::ffi::c_void
);
engine_fn!(
    /// `void zend_unregister_ini_entries(int module_number)`
    zend_unregister_ini_entries: fn(module_number: c_int)
);
engine_fn!(
    /// `void zend_update_property(zend_class_entry *scope, zend_object *obj, const char *name, size_t len, zval *value)`
    zend_update_property: fn(scope: *mut zend_class_entry, object: *mut zend_object, name: *const c_char, len: usize, value: *mut zval)
);
engine_fn!(
    /// `void php_log_err_with_severity(const char *message, int syslog_type)`: PHP's error log
    /// (`error_log` ini, else the SAPI's log: stderr in CLI, the FPM worker log).
    php_log_err_with_severity: fn(message: *const c_char, syslog_type: c_int)
);
engine_fn!(
    /// `bool php_get_module_initialized(void)`: true once PHP's startup is over (so an
    /// extension starting then was loaded late, e.g. by an FPM pool's `php_admin_value[extension]`).
    php_get_module_initialized: fn() -> bool
);

engine_fn!(
    /// `void zend_observer_fiber_switch_register(zend_observer_fiber_switch_handler)`: calls
    /// the handler on every switch between fiber contexts (the main one included).
    zend_observer_fiber_switch_register: fn(handler: crate::deadline::FiberSwitch)
);
engine_fn!(
    /// `void zend_observer_fiber_destroy_register(zend_observer_fiber_destroy_handler)`: calls
    /// the handler when a fiber context is destroyed.
    zend_observer_fiber_destroy_register: fn(handler: crate::deadline::FiberDestroy)
);
engine_fn!(
    /// `void zend_observer_error_register(zend_observer_error_cb)`: calls the observer on
    /// every error, before the engine hands it to a handler or bails out.
    zend_observer_error_register: fn(observer: crate::fatal::ErrorObserver)
);
engine_fn!(
    /// `bool zend_is_unwind_exit(const zend_object *ex)`: the object `exit()` unwinds with.
    zend_is_unwind_exit: fn(ex: *mut zend_object) -> bool
);
engine_fn!(
    /// `ZEND_NORETURN void zend_timeout(void)`: raises "Maximum execution time exceeded".
    zend_timeout: fn()
);

engine_fn!(
    /// `void zend_hash_real_init_mixed(HashTable *ht)`: a new array laid out for keys (not as a
    /// list), so integer keys that are not 0, 1, 2... do not convert it half-way.
    zend_hash_real_init_mixed: fn(ht: *mut ext_php_rs::ffi::HashTable)
);
engine_fn!(
    /// `zval *zend_hash_index_add_new(HashTable *ht, zend_ulong h, zval *pData)`: inserts an
    /// integer key the array does not hold yet, without looking it up first.
    zend_hash_index_add_new: fn(ht: *mut ext_php_rs::ffi::HashTable, h: u64, data: *mut zval) -> *mut zval
);

engine_fn!(
    /// `zend_get_gc_buffer *zend_get_gc_buffer_create(void)`: the engine's scratch list for a
    /// `get_gc` handler's zvals, emptied.
    zend_get_gc_buffer_create: fn() -> *mut crate::collector::GcBuffer
);
engine_fn!(
    /// `void zend_get_gc_buffer_grow(zend_get_gc_buffer *gc_buffer)`: room for more zvals.
    zend_get_gc_buffer_grow: fn(buffer: *mut crate::collector::GcBuffer)
);

/// The engine's `zend_interrupt_function` (set by pcntl for async signals), if any.
pub fn interrupt_function() -> Option<crate::interrupt::InterruptFunction> {
    static CACHE: OnceLock<usize> = OnceLock::new();
    let slot = lookup(&CACHE, b"zend_interrupt_function\0");
    if slot == 0 {
        return None;
    }
    // SAFETY: `zend_interrupt_function` is a `void (*)(zend_execute_data *)` variable.
    unsafe { *(slot as *const Option<crate::interrupt::InterruptFunction>) }
}

/// A post-startup callback: `zend_result (*)(void)`.
pub type PostStartup = unsafe extern "C" fn() -> std::ffi::c_int;

/// The engine's `zend_post_startup_cb` variable, which `zend_post_startup()` calls (and clears)
/// once every module has started, in the process that then forks (FPM's master); each
/// extension that sets it calls the one it replaced.
pub fn post_startup_slot() -> Option<*mut Option<PostStartup>> {
    static CACHE: OnceLock<usize> = OnceLock::new();
    let slot = lookup(&CACHE, b"zend_post_startup_cb\0");
    (slot != 0).then_some(slot as *mut Option<PostStartup>)
}

/// The value of one of SPL's `zend_class_entry *` globals
/// (`spl_ce_RuntimeException`...), set by SPL's MINIT, which runs before any
/// extension loaded with `extension=` starts.
pub fn spl_class_entry(symbol: &CStr) -> Option<*mut zend_class_entry> {
    // SAFETY: RTLD_DEFAULT lookup; the symbol is a `zend_class_entry *` variable.
    unsafe {
        let slot = libc::dlsym(libc::RTLD_DEFAULT, symbol.as_ptr()).cast::<*mut zend_class_entry>();
        if slot.is_null() || (*slot).is_null() {
            return None;
        }
        Some(*slot)
    }
}

/// The SAPI name (`cli`, `fpm-fcgi`, `apache2handler`, `cli-server`, ...).
pub fn sapi_name() -> String {
    // SAFETY: `sapi_module` is set by the SAPI before any module starts and
    // never freed; `name` is a static C string (or NULL in odd embeddings).
    let name = unsafe { ext_php_rs::ffi::sapi_module.name };
    if name.is_null() {
        return String::new();
    }
    // SAFETY: non-null, NUL-terminated.
    unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned()
}
