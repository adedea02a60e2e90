//! A value dropped when its frame ends, even when a bailout skips the frame, where that is
//! safe.
//!
//! ext-php-rs's `BailoutGuard` registers its value with the innermost `try_catch`, which drops
//! it when it catches a bailout (fatal error, `max_execution_time`). Its cleanup list is one per
//! thread, but Fibers interleave on the thread: a bailout in the main context dropped the
//! values a suspended Fiber had registered (its deadline scope, its funnel lease) while the
//! Fiber still used them, and freed them again when a shutdown function resumed it. So inside a
//! Fiber the value is held plainly: dropped when its frame ends, and, if a bailout kills the
//! Fiber, left to request end (RSHUTDOWN releases every lease the request holds and empties the
//! deadline scopes).

use ext_php_rs::zend::{BailoutGuard, ExecutorGlobals};

/// See the module docs.
pub enum Guarded<T: 'static> {
    /// In the main context: also dropped by the `try_catch` that catches a bailout.
    Main(BailoutGuard<T>),
    /// In a Fiber: dropped with the frame only.
    Fiber(T),
}

impl<T: 'static> Guarded<T> {
    pub fn new(value: T) -> Self {
        if ExecutorGlobals::get().active_fiber.is_null() {
            Self::Main(BailoutGuard::new(value))
        } else {
            Self::Fiber(value)
        }
    }
}
