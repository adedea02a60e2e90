//! A value dropped when its frame ends, and also when a bailout (fatal error,
//! `max_execution_time`) skips the frame.
//!
//! ext-php-rs's `BailoutGuard` registers its value with the innermost `try_catch`, which drops
//! it when it catches a bailout. Its cleanup list is one per thread, but Fibers interleave on
//! the thread: a bailout in the main context dropped the values a suspended Fiber had
//! registered (its deadline scope, its funnel lease) while the Fiber still used them, and freed
//! them again when a shutdown function resumed it. So a value taken inside a Fiber goes in that
//! Fiber's own list instead, which is run when the fiber observer sees the Fiber end with values
//! still listed: only a bailout ends a Fiber without dropping them (an exception, a return or
//! the Fiber's destruction unwind its frames). Values of the main context keep `BailoutGuard`.
//! A Fiber that a bailout left suspended is never resumed: its values are dropped at request
//! end ([`end_request`]) or when the engine frees the Fiber, whichever comes first.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::{c_int, c_void};

use ext_php_rs::zend::{BailoutGuard, ExecutorGlobals};

type Cleanup = Box<dyn FnOnce()>;

/// The values Fibers hold, by fiber context address, each under its own id.
#[derive(Default)]
struct Lists(HashMap<usize, Vec<(u64, Cleanup)>>);

impl Drop for Lists {
    /// Never drops a value while the thread's storage is torn down (after RSHUTDOWN, which
    /// emptied the lists): a value's drop may use storage already gone, and a panic there
    /// aborts the process.
    fn drop(&mut self) {
        std::mem::take(&mut self.0)
            .into_values()
            .for_each(std::mem::forget);
    }
}

thread_local! {
    static FIBER_HELD: RefCell<Lists> = RefCell::default();
    static NEXT_ID: Cell<u64> = const { Cell::new(0) };
}

/// See the module docs.
pub enum Guarded<T: 'static> {
    /// In the main context: also dropped by the `try_catch` that catches a bailout.
    Main(BailoutGuard<T>),
    /// In a Fiber: also dropped when the Fiber ends by a bailout.
    Fiber(FiberGuard),
}

impl<T: 'static> Guarded<T> {
    pub fn new(value: T) -> Self {
        let globals = ExecutorGlobals::get();
        if globals.active_fiber.is_null() {
            Self::Main(BailoutGuard::new(value))
        } else {
            Self::Fiber(FiberGuard::new(
                globals.current_fiber_context as usize,
                value,
            ))
        }
    }
}

/// A value listed under the Fiber that took it until its frame drops it.
pub struct FiberGuard {
    context: usize,
    id: u64,
}

impl FiberGuard {
    fn new<T: 'static>(context: usize, value: T) -> Self {
        let id = NEXT_ID.get();
        NEXT_ID.set(id.wrapping_add(1));
        FIBER_HELD.with_borrow_mut(|held| {
            held.0
                .entry(context)
                .or_default()
                .push((id, Box::new(move || drop(value))))
        });
        Self { context, id }
    }
}

impl Drop for FiberGuard {
    /// Drops the value, unless the Fiber's end by a bailout already did.
    fn drop(&mut self) {
        // `try_with`: nothing to do once the thread's lists are torn down (they forget theirs).
        let cleanup = FIBER_HELD.try_with(|held| {
            let held = &mut held.borrow_mut().0;
            let list = held.get_mut(&self.context)?;
            let i = list.iter().position(|(id, _)| *id == self.id)?;
            let (_, cleanup) = list.swap_remove(i);
            if list.is_empty() {
                held.remove(&self.context);
            }
            Some(cleanup)
        });
        if let Ok(Some(cleanup)) = cleanup {
            cleanup();
        }
    }
}

/// The start of `zend_fiber_context` (Zend/zend_fibers.h, the same since PHP 8.1), up to its
/// status; ext-php-rs leaves the struct opaque.
#[repr(C)]
struct FiberContextHead {
    handle: *mut c_void,
    kind: *mut c_void,
    function: *mut c_void,
    cleanup: *mut c_void,
    stack: *mut c_void,
    status: c_int,
}

/// `ZEND_FIBER_STATUS_DEAD`: the Fiber's function has returned (or was left by a bailout).
const STATUS_DEAD: c_int = 3;

/// The Fiber of `context` has ended (returned, thrown, or left by a bailout).
///
/// # Safety
/// `context` is a live fiber context (as the fiber observers are given).
pub unsafe fn has_ended(context: *mut c_void) -> bool {
    // SAFETY: the caller passes a live context.
    unsafe { (*context.cast::<FiberContextHead>()).status == STATUS_DEAD }
}

/// Drops what the Fiber of context `context` still lists (called also when the engine frees
/// a context: a Fiber a bailout left suspended, and its address may be reused).
pub fn drop_held(context: *mut c_void) {
    let list = FIBER_HELD.with_borrow_mut(|held| held.0.remove(&(context as usize)));
    run(list.unwrap_or_default());
}

/// Drops what every Fiber still lists (RSHUTDOWN): Fibers a bailout left suspended.
pub fn end_request() {
    let lists = FIBER_HELD.with_borrow_mut(|held| std::mem::take(&mut held.0));
    lists.into_values().for_each(run);
}

/// Newest first, as the frames would have dropped them; outside the borrow, since a value's
/// drop may list or unlist others.
fn run(list: Vec<(u64, Cleanup)>) {
    for (_, cleanup) in list.into_iter().rev() {
        cleanup();
    }
}
