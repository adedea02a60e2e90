//! A `#[php_class]` is constructed once. PHP lets code call `$object->__construct()` again on
//! a live object, and ext-php-rs then replaces the Rust value in place, dropping the old one,
//! even while a method of that same object is running (a client's `on_attempt` re-constructing
//! the client in mid-call): the running method would go on with references into a dropped
//! value. Our constructors refuse instead, before reading their arguments.

use ext_php_rs::class::RegisteredClass;
use ext_php_rs::exception::{PhpException, PhpResult};
use ext_php_rs::zend::ExecutorGlobals;

/// `Err(\Error)` when the object `method` (`"Resilient\\Client::__construct"`) is called on
/// is constructed already.
pub fn refuse_second_call<T: RegisteredClass>(method: &str) -> PhpResult<()> {
    let frame = ExecutorGlobals::get().current_execute_data;
    // SAFETY: a constructor runs as an internal function, so the executor's current frame is
    // its own call frame (live while it runs); `get_object` only reads `This` and reports
    // whether its Rust value is there (initialized), without reading the value.
    let constructed = unsafe { frame.as_mut() }.is_some_and(|ex| ex.get_object::<T>().is_some());
    if constructed {
        return Err(PhpException::new(
            format!("{method}(): the object is constructed already: make a new one"),
            0,
            ext_php_rs::zend::ce::error(),
        ));
    }
    Ok(())
}
