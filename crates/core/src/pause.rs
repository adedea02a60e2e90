//! Protocol functions that share memory with other processes (the funnel's, the breaker's) are
//! `async` only so a model checker can pause an actor before every shared access and explore
//! every interleaving. The real caller never pauses: [`run`] completes such a function in one
//! poll, with no runtime and no allocation.

use std::future::Future;
use std::task::{Context, Poll, Waker};

/// Runs a protocol function whose actor never pauses: one poll completes it.
#[inline(always)]
pub(crate) fn run<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => unreachable!("the real caller's step never pauses"),
    }
}

/// A future that is pending once (or not at all when made with `true`): where a model
/// checker's driver takes control back from an actor.
#[cfg(test)]
pub(crate) struct PendingOnce(pub(crate) bool);

#[cfg(test)]
impl Future for PendingOnce {
    type Output = ();
    fn poll(mut self: std::pin::Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            Poll::Pending
        }
    }
}
