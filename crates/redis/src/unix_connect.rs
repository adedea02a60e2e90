//! A connect to a `unix://` Redis, bounded by its wait.
//!
//! A unix socket's connect waits, with no timeout of its own, while the listener's queue is
//! full, and redis-rs gives it none (std's `UnixStream::connect`). A Redis that stops accepting
//! (stopped, frozen, swapping) keeps in that queue every connect that gave up meanwhile: each
//! timed out in its handshake, but its place stays until Redis accepts it. Once the queue is
//! full (`tcp-backlog`, 511 by default: about fifty workers backing off for ten seconds), every
//! connect would wait for as long as Redis does, whatever the call's deadline.
//!
//! So the connect runs on a thread of its own and is waited for `wait` at most. One given up
//! ends on that thread when Redis accepts or goes, and its connection is closed there. One such
//! thread per server and process at most: while it still waits, connecting again fails at once
//! (the queue is full, or Redis too slow to accept: no other connect would do better).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

#[derive(Default)]
pub(crate) struct UnixConnect {
    /// The pid of the process whose connect thread still waits; 0: none. (A child forked while
    /// its parent's waits has no such thread: another pid than its own means none.)
    waiting: Arc<AtomicU32>,
}

impl UnixConnect {
    pub(crate) fn connect(
        &self,
        client: &redis::Client,
        wait: Duration,
    ) -> redis::RedisResult<redis::Connection> {
        let pid = resilient_core::current_pid();
        if self.waiting.load(Ordering::Acquire) == pid {
            return Err(timed_out(
                "the last connect to Redis's unix socket still waits for Redis to accept it",
            ));
        }
        self.waiting.store(pid, Ordering::Release);
        let (tx, rx) = mpsc::sync_channel(1);
        let (client, waiting) = (client.clone(), self.waiting.clone());
        let spawned = resilient_core::signals::spawn(
            std::thread::Builder::new().name("resilient-redis-connect".into()),
            move || {
                let connected = client.get_connection_with_timeout(wait);
                let _ = waiting.compare_exchange(pid, 0, Ordering::AcqRel, Ordering::Relaxed);
                // Given up: the connection is dropped (closed) with the message.
                let _ = tx.send(connected);
            },
        );
        if let Err(e) = spawned {
            self.waiting.store(0, Ordering::Release);
            return Err(e.into());
        }
        rx.recv_timeout(wait).unwrap_or_else(|_| {
            Err(timed_out(
                "Redis's unix socket did not accept the connection in time",
            ))
        })
    }
}

fn timed_out(what: &'static str) -> redis::RedisError {
    std::io::Error::new(std::io::ErrorKind::TimedOut, what).into()
}
