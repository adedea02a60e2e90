//! Per-thread state that belongs to the process that made it.

/// A thread's value made by this process: in a child of `pcntl_fork` it starts over from
/// `T::default()`. The parent's value is forgotten, not dropped: dropping it could touch the
/// parent's runtime (whose epoll instance the child shares), and acting on it would end the
/// parent's work from the child.
pub(crate) struct ForkLocal<T> {
    pid: u32,
    value: T,
}

impl<T: Default> ForkLocal<T> {
    pub(crate) const fn new(value: T) -> Self {
        Self { pid: 0, value }
    }

    /// The value, this process's own.
    pub(crate) fn here(&mut self) -> &mut T {
        let pid = resilient_core::current_pid();
        if self.pid != pid {
            self.pid = pid;
            std::mem::forget(std::mem::take(&mut self.value));
        }
        &mut self.value
    }
}
