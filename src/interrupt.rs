//! PHP's interrupts while a call blocks: a signal under `pcntl_async_signals(true)` (Laravel's
//! queue worker enforces a job's `$timeout` with `pcntl_alarm`; supervisors send SIGTERM) and
//! `max_execution_time`. The engine only notices them between opcodes, and a long call is one
//! opcode: without this, a worker's timeout would wait for the call to end, and a signal whose
//! handler falls due while the call's exception is pending is dropped by PHP altogether. So
//! `resilient_http::ProcessIo::drive` asks [`pending`] every few milliseconds and, when it is
//! set, [`handle`] does what the VM would: clear the flag, then time out or run the interrupt
//! handler (pcntl's signal dispatch) right there, between polls.

use ext_php_rs::exception::{PhpException, PhpResult};
use ext_php_rs::ffi::zend_execute_data;
use ext_php_rs::zend::ExecutorGlobals;

/// `EG(vm_interrupt)`: the engine has an interrupt to handle.
pub fn pending() -> bool {
    // SAFETY: `executor_globals` is PHP's (NTS) global, alive as long as PHP; the flag is a
    // plain bool the signal handler sets, read with a volatile load.
    unsafe {
        std::ptr::read_volatile(&raw const ext_php_rs::ffi::executor_globals.vm_interrupt.value)
    }
}

/// Handles a pending interrupt as the VM does between opcodes: `max_execution_time` raises
/// its fatal error (a bailout: it never returns); otherwise the interrupt handler runs
/// (pcntl's signal dispatch: the user's handler, which may bail out too). An exception it
/// throws (or `exit()` in it, an unwind exception) comes back as `Err`, to end the call and
/// propagate. The client runs it inside `try_catch`, so that a bailout first ends the call.
pub fn handle() -> PhpResult<()> {
    // SAFETY: as above; clearing the flag is what the VM does before handling it.
    let timed_out = unsafe {
        std::ptr::write_volatile(
            &raw mut ext_php_rs::ffi::executor_globals.vm_interrupt.value,
            false,
        );
        std::ptr::read_volatile(&raw const ext_php_rs::ffi::executor_globals.timed_out.value)
    };
    if timed_out {
        if let Some(timeout) = crate::engine::zend_timeout() {
            // SAFETY: the engine's own handler for an expired max_execution_time.
            unsafe { timeout() };
        }
        return Ok(());
    }
    if let Some(handler) = crate::engine::interrupt_function() {
        // SAFETY: the handler the engine would call, with the executing frame.
        unsafe { handler(ext_php_rs::ffi::executor_globals.current_execute_data) };
    }
    // SAFETY: as above; `exception` is NULL or a live object.
    let exception = unsafe { ext_php_rs::ffi::executor_globals.exception };
    let unwinding = !exception.is_null()
        && crate::engine::zend_is_unwind_exit()
            // SAFETY: a live exception object.
            .is_some_and(|is_exit| unsafe { is_exit(exception) });
    if unwinding {
        // `exit()` in the handler: the engine unwinds with its own object, which must stay
        // pending (it is not Throwable). The exception the caller throws for this `Err` is
        // discarded by the engine, which never replaces an unwinding exit.
        return Err(PhpException::from("exit() in a signal handler"));
    }
    ExecutorGlobals::throw_if_exception()
}

/// `void (*)(zend_execute_data *)`, the type of `zend_interrupt_function`.
pub type InterruptFunction = unsafe extern "C" fn(*mut zend_execute_data);

/// Runs `work`, a loop in Rust with nothing of PHP's in it that may run long (the @internal
/// bench helpers: millions of updates in one call), which calls [`Poll::check`] every round;
/// the flag is looked at every `every` rounds (1 for rounds that wait on a server, more for
/// rounds of nanoseconds). A signal's handler that throws ends the loop with that exception;
/// `max_execution_time` (a bailout, caught) ends it too, and goes on as the engine would once
/// `work` returned, its state dropped. Without this such a loop ran to its end whatever
/// `set_time_limit` said.
pub fn interruptible<T>(every: u32, work: impl FnOnce(&mut Poll) -> PhpResult<T>) -> PhpResult<T> {
    let mut poll = Poll {
        rounds: 0,
        every: every.max(1),
        bailed_out: false,
    };
    let result = work(&mut poll);
    if poll.bailed_out {
        drop(result);
        // SAFETY: the engine bailed out inside `try_catch` in `Poll::check`; going on with it
        // is what the engine would have done, and nothing of PHP's ran since.
        unsafe { ext_php_rs::zend::bailout() }
    }
    result
}

/// What [`interruptible`]'s loop asks once per round.
pub struct Poll {
    rounds: u32,
    /// Rounds between two looks at the interrupt flag.
    every: u32,
    bailed_out: bool,
}

impl Poll {
    /// `every` for rounds of nanoseconds: the flag is a volatile load, cheap but not free in a
    /// loop of 50 ns rounds.
    pub const FAST_ROUNDS: u32 = 1024;

    /// `Err` when a pending interrupt ends the loop (see [`interruptible`]).
    pub fn check(&mut self) -> PhpResult<()> {
        self.rounds = self.rounds.wrapping_add(1);
        if !self.rounds.is_multiple_of(self.every) || !pending() {
            return Ok(());
        }
        match ext_php_rs::zend::try_catch(std::panic::AssertUnwindSafe(handle)) {
            Ok(handled) => handled,
            Err(ext_php_rs::zend::CatchError::Bailout) => {
                self.bailed_out = true;
                Err(PhpException::from("interrupted"))
            }
            Err(other) => Err(PhpException::from(format!("interrupted: {other}"))),
        }
    }
}
