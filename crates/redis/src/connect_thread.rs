//! A connect to Redis, bounded by its wait whatever the server or the system does.
//!
//! Nothing else bounds a connect as a whole. The redis crate gives each read of the handshake
//! (TLS's, AUTH's or HELLO's, SELECT's) the whole wait again, so a server whose answer comes in
//! pieces, each in time (a TLS certificate chain of several segments on a lossy link), holds a
//! connect for a multiple of its wait. With `rediss://` it looks the host name up again, with no
//! bound (the certificate is checked against the name), and gives each address the whole wait.
//! A unix socket's connect waits, with no timeout of its own, while the listener's queue is
//! full: a Redis that stops accepting (stopped, frozen, swapping) keeps in that queue every
//! connect that gave up meanwhile, and once it is full (`tcp-backlog`, 511 by default: about
//! fifty workers backing off for ten seconds), every connect would wait for as long as Redis
//! does, whatever the call's deadline.
//!
//! So every connect runs on a thread of its own and is waited for `wait` at most. One given up
//! ends on that thread (when the server answers, gives up or goes), and its connection is
//! closed there. One such thread per server (URL) and process at most: while it still waits,
//! connecting again to that server fails at once, to any of its addresses (only a server that
//! answers byte by byte keeps a thread longer than its wait, and no other connect would do
//! better meanwhile).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

#[derive(Default)]
pub(crate) struct ConnectThread {
    /// The pid of the process whose connect thread still waits; 0: none. (A child forked while
    /// its parent's waits has no such thread: another pid than its own means none.)
    waiting: Arc<AtomicU32>,
}

impl ConnectThread {
    /// Runs `connect` on a thread of its own and waits for its connection `wait` at most.
    pub(crate) fn run(
        &self,
        wait: Duration,
        connect: impl FnOnce() -> redis::RedisResult<redis::Connection> + Send + 'static,
    ) -> redis::RedisResult<redis::Connection> {
        let pid = resilient_core::current_pid();
        if self.waiting.load(Ordering::Acquire) == pid {
            return Err(timed_out(
                "the last connect to Redis still waits for the server's answer",
            ));
        }
        self.waiting.store(pid, Ordering::Release);
        let (tx, rx) = mpsc::sync_channel(1);
        let waiting = self.waiting.clone();
        let spawned = resilient_core::signals::spawn(
            std::thread::Builder::new().name("resilient-redis-connect".into()),
            move || {
                // Cleared however `connect` ends, a panic included (else every later connect of
                // this process would fail at once, for its whole life), and before the caller
                // hears of it (its next connect, to another address, must not find it waiting).
                let done = Done { waiting, pid };
                let connected = connect();
                drop(done);
                // Given up: the connection is dropped (closed) with the message.
                let _ = tx.send(connected);
            },
        );
        if let Err(e) = spawned {
            self.waiting.store(0, Ordering::Release);
            // Not the spawn's own kind: `EAGAIN` (a process at its thread limit) would read as
            // a timeout, which is reported as Redis's slowness.
            return Err(std::io::Error::other(format!(
                "could not start a thread to connect to Redis: {e}"
            ))
            .into());
        }
        rx.recv_timeout(wait)
            .unwrap_or_else(|_| Err(timed_out("Redis did not complete the connect in time")))
    }
}

/// Marks the process's connect thread as done when dropped.
struct Done {
    waiting: Arc<AtomicU32>,
    pid: u32,
}

impl Drop for Done {
    fn drop(&mut self) {
        let _ = self
            .waiting
            .compare_exchange(self.pid, 0, Ordering::AcqRel, Ordering::Relaxed);
    }
}

fn timed_out(what: &'static str) -> redis::RedisError {
    std::io::Error::new(std::io::ErrorKind::TimedOut, what).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused() -> redis::RedisResult<redis::Connection> {
        Err(std::io::Error::from(std::io::ErrorKind::ConnectionRefused).into())
    }

    /// A connect that panicked on its thread leaves the next one free to run (before, every
    /// later connect of the process failed at once as "still waits").
    #[test]
    fn a_connect_that_panicked_does_not_hold_back_the_next() {
        let connects = ConnectThread::default();
        let wait = Duration::from_secs(5);
        assert!(connects.run(wait, || panic!("in the connect")).is_err());
        let next = connects.run(wait, refused).err().unwrap();
        assert!(
            next.to_string().contains("refused"),
            "the next connect ran: {next}"
        );
    }

    /// A connect that ended is over when its caller hears of it: the caller's next connect (to
    /// the next address of a host name) runs at once, however the threads are scheduled.
    #[test]
    fn the_next_connect_runs_as_soon_as_one_ended() {
        let connects = ConnectThread::default();
        for _ in 0..2000 {
            let next = connects.run(Duration::from_secs(5), refused).err().unwrap();
            assert!(next.to_string().contains("refused"), "{next}");
        }
    }

    /// While a connect given up still waits, the next one to that server fails at once.
    #[test]
    fn a_connect_given_up_holds_back_the_next_until_it_ends() {
        let connects = ConnectThread::default();
        let (release, released) = mpsc::channel::<()>();
        let stuck = connects.run(Duration::from_millis(20), move || {
            let _ = released.recv();
            refused()
        });
        assert!(stuck.err().unwrap().is_timeout());
        let held = connects.run(Duration::from_secs(5), refused).err().unwrap();
        assert!(held.to_string().contains("still waits"), "{held}");
        release.send(()).unwrap();
        let until = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let next = connects.run(Duration::from_secs(5), refused).err().unwrap();
            if next.to_string().contains("refused") {
                break;
            }
            assert!(std::time::Instant::now() < until, "{next}");
            std::thread::yield_now();
        }
    }
}
