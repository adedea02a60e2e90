//! How much C stack is left below the caller: the guard against a runaway recursion through
//! the extension (`on_attempt` or a `fallback` calling the client, `Deadline::within` inside
//! itself, `Funnel::run` from its own callable), which would otherwise end in a SIGSEGV instead
//! of an exception.
//!
//! Measured on the stack itself, not counted: nothing to reset when a fatal error long-jumps
//! past a level, and deep PHP frames between levels count too. The stack is the thread's, or
//! inside a PHP Fiber the fiber's own (2 MiB by default, `fiber.stack_size`). PHP 8.2 has no
//! API for a fiber's bounds; `EG(current_fiber_context)->stack` holds them, and is read only
//! when the current frame lies inside what it says.

use std::cell::Cell;

/// Too little stack left to go one level deeper.
#[derive(Debug, Clone, Copy)]
pub struct Exhausted {
    /// Bytes left below the caller.
    pub left: usize,
    /// Bytes a level needs.
    pub needed: usize,
    /// The stack's whole size.
    pub size: usize,
    /// Whether the stack is a Fiber's (`fiber.stack_size`), not the thread's (`ulimit -s`).
    pub fiber: bool,
}

/// C stack kept free when entering a level that calls a PHP callable (a `Deadline::within`
/// scope, `Funnel::run`): room for the callable's own frames and for unwinding the exception.
pub const CALLABLE_RESERVE: usize = 256 * 1024;

/// `Err` when the caller's stack has less than `reserve` bytes left (at most a quarter of the
/// stack: a fiber's may be small), or less than `floor` (what one level needs whatever the
/// stack's size); `Ok` when there is room, or when the stack is not one this knows (another
/// library's coroutine).
pub fn check(reserve: usize, floor: usize) -> Result<(), Exhausted> {
    let marker = 0u8;
    let here = &raw const marker as usize;
    let Some((low, size, fiber)) = bounds_around(here) else {
        return Ok(());
    };
    let (left, needed) = (here - low, reserve.min(size / 4).max(floor));
    if left < needed {
        return Err(Exhausted {
            left,
            needed,
            size,
            fiber,
        });
    }
    Ok(())
}

/// The stack `here` is on: the thread's or the running fiber's, as (lowest address, size,
/// whether it is a fiber's).
fn bounds_around(here: usize) -> Option<(usize, usize, bool)> {
    let inside = |(low, size): &(usize, usize)| here > *low && here - *low < *size;
    thread_bounds()
        .filter(inside)
        .map(|(low, size)| (low, size, false))
        .or_else(|| {
            fiber_bounds()
                .filter(inside)
                .map(|(low, size)| (low, size, true))
        })
}

thread_local! {
    /// This thread's stack, read once: `None` inside until read, then the answer.
    static THREAD_BOUNDS: Cell<Option<Option<(usize, usize)>>> = const { Cell::new(None) };
}

fn thread_bounds() -> Option<(usize, usize)> {
    THREAD_BOUNDS.with(|cell| {
        if cell.get().is_none() {
            cell.set(Some(read_thread_bounds()));
        }
        cell.get().flatten()
    })
}

fn read_thread_bounds() -> Option<(usize, usize)> {
    // SAFETY: plain pthread queries on the calling thread with a zeroed, then initialised attr
    // (for the main thread glibc derives the bounds from the rlimit and /proc/self/maps).
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr = std::ptr::null_mut();
        let mut size = 0usize;
        let rc = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
        libc::pthread_attr_destroy(&mut attr);
        (rc == 0 && !addr.is_null() && size > 0).then_some((addr as usize, size))
    }
}

/// The head of PHP 8.2's `struct _zend_fiber_context` (Zend/zend_fibers.h) up to its stack.
#[repr(C)]
struct FiberContextHead {
    handle: *mut libc::c_void,
    kind: *mut libc::c_void,
    function: *mut libc::c_void,
    cleanup: *mut libc::c_void,
    stack: *const FiberStackHead,
}

/// The head of `struct _zend_fiber_stack` (Zend/zend_fibers.c): the usable stack, above its
/// guard page.
#[repr(C)]
struct FiberStackHead {
    pointer: *mut libc::c_void,
    size: libc::size_t,
}

/// The running fiber's stack, when a fiber runs (PHP 8.2's layout; none for another PHP).
fn fiber_bounds() -> Option<(usize, usize)> {
    if ext_php_rs::ffi::ZEND_MODULE_API_NO != 20220829 {
        return None;
    }
    // SAFETY: `executor_globals` is PHP's (NTS) global. `current_fiber_context` is NULL or the
    // running context, live while it runs; the main context has no stack (NULL), a fiber's
    // points to the stack PHP allocated for it, live as long as the fiber.
    unsafe {
        let context = ext_php_rs::ffi::executor_globals.current_fiber_context;
        if context.is_null() || context == ext_php_rs::ffi::executor_globals.main_fiber_context {
            // The main context runs on the thread's stack (its own `stack` is a placeholder).
            return None;
        }
        let stack = (*(context as *const FiberContextHead)).stack;
        if stack.is_null() {
            return None;
        }
        let (low, size) = ((*stack).pointer as usize, (*stack).size);
        (low != 0 && size > 0).then_some((low, size))
    }
}
