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
//! closed there. One such thread per server and process at most: while it still waits,
//! connecting again fails at once (no other connect would do better meanwhile).

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
                let connected = connect();
                let _ = waiting.compare_exchange(pid, 0, Ordering::AcqRel, Ordering::Relaxed);
                // Given up: the connection is dropped (closed) with the message.
                let _ = tx.send(connected);
            },
        );
        if let Err(e) = spawned {
            self.waiting.store(0, Ordering::Release);
            return Err(e.into());
        }
        rx.recv_timeout(wait)
            .unwrap_or_else(|_| Err(timed_out("Redis did not complete the connect in time")))
    }
}

fn timed_out(what: &'static str) -> redis::RedisError {
    std::io::Error::new(std::io::ErrorKind::TimedOut, what).into()
}
