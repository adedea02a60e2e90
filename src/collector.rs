//! What PHP's cycle collector sees of a `Resilient\Client`.
//!
//! A client keeps its `on_attempt` and `fallback` callables as counted references inside the
//! Rust struct, and ext-php-rs reports only an object's property slots to the collector. A
//! callable that refers back to the client's owner (`fn ($a) => $this->log($a)` in a service
//! that keeps its client) then made a cycle the collector could not see, and every such service
//! leaked for the life of the process: a queue worker that builds one per job grows without
//! bound. [`install`] gives the class a `get_gc` handler that reports the callables too.

use std::ffi::c_int;
use std::ptr;
use std::sync::OnceLock;

use ext_php_rs::class::RegisteredClass;
use ext_php_rs::ffi::{zend_array, zend_object, zval};
use ext_php_rs::types::ZendClassObject;

use crate::client::Client;
use crate::engine;

/// `zend_get_gc_buffer` (Zend/zend_gc.h): the engine's scratch list of zvals that a `get_gc`
/// handler returns.
#[repr(C)]
pub struct GcBuffer {
    cur: *mut zval,
    end: *mut zval,
    start: *mut zval,
}

/// `Z_TYPE_FLAGS` bit of a zval that points to a counted value (`IS_TYPE_REFCOUNTED << 8`).
const REFCOUNTED: u32 = 1 << 8;

/// The handler ext-php-rs gave the class, which reports the object's own slots.
static STANDARD: OnceLock<GetGc> = OnceLock::new();

type GetGc = unsafe extern "C" fn(*mut zend_object, *mut *mut zval, *mut c_int) -> *mut zend_array;

/// Sets the client class's `get_gc` handler, keeping the one it replaces. Called at MINIT,
/// before any object exists.
///
/// ext-php-rs builds the class's handler table once, shares it read-only and offers no hook for
/// this entry, so the one entry is written in place; the engine and every object read the table
/// only afterwards.
pub fn install() {
    if engine::zend_get_gc_buffer_create().is_none() || engine::zend_get_gc_buffer_grow().is_none()
    {
        return; // not inside PHP (stub generation): ext-php-rs's handler stays
    }
    let handlers = ptr::from_ref(Client::get_metadata().handlers()).cast_mut();
    // SAFETY: see above; aligned pointer-sized loads and a store into a table nothing reads yet.
    unsafe {
        let Some(standard) = (*handlers).get_gc else {
            return;
        };
        if STANDARD.set(standard).is_ok() {
            (*handlers).get_gc = Some(get_gc);
        }
    }
}

/// What the replaced handler reports (the object's property slots, or its property table once
/// one exists), plus the client's callables.
unsafe extern "C" fn get_gc(
    object: *mut zend_object,
    table: *mut *mut zval,
    n: *mut c_int,
) -> *mut zend_array {
    // Set before this handler is (never unset); no panic may leave an `extern "C"` function.
    let Some(&standard) = STANDARD.get() else {
        // SAFETY: the engine's out-pointers.
        unsafe { (*table, *n) = (ptr::null_mut(), 0) };
        return ptr::null_mut();
    };
    // SAFETY: the engine passes a live object of this class and two out-pointers; the callables
    // live as long as the object, and nothing runs PHP code while the collector asks. The
    // replaced handler points `table` at the object's own slots, not at the engine's buffer.
    unsafe {
        let properties = standard(object, table, n);
        let callables: [*const zval; 2] = ZendClassObject::<Client>::from_zend_obj(&*object)
            .and_then(|c| c.obj.as_ref())
            .map_or([ptr::null(); 2], Client::callables);
        let engine_buffer =
            engine::zend_get_gc_buffer_create().zip(engine::zend_get_gc_buffer_grow());
        let (Some((create, grow)), false) = (engine_buffer, callables.iter().all(|p| p.is_null()))
        else {
            return properties;
        };
        let buffer = &mut *create();
        let mut add = |zv: *const zval| {
            if (*zv).u1.type_info & REFCOUNTED != 0 {
                if buffer.cur == buffer.end {
                    grow(buffer);
                }
                ptr::copy_nonoverlapping(zv, buffer.cur, 1);
                buffer.cur = buffer.cur.add(1);
            }
        };
        let slots = *table;
        for i in 0..usize::try_from(*n).unwrap_or(0) {
            add(slots.add(i));
        }
        for zv in callables.into_iter().filter(|p| !p.is_null()) {
            add(zv);
        }
        *table = buffer.start;
        *n = c_int::try_from(buffer.cur.offset_from(buffer.start)).unwrap_or(c_int::MAX);
        properties
    }
}
