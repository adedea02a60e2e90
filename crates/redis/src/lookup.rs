//! A Redis host name's lookup, bounded by the wait of the connect that needs it.
//!
//! The system resolver takes its own time (glibc: 5 s per name server and attempt), and nothing
//! can cut a `getaddrinfo` short. So the lookup runs on a thread of its own and the connect waits
//! for its answer at most what it has left; past that it fails as a connect that timed out (the
//! guards fall back), and the lookup goes on: a later connect takes its answer instead of
//! starting another one, so a resolver that hangs costs one thread per server, not one per
//! connect.
//!
//! An answer is kept for [`KEEP_FOR`]. The connect moves an address that did not answer to the
//! end of it, and forgets it when an address refused (the host may have moved).

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long an answer is used before the name is looked up again.
pub const KEEP_FOR: Duration = Duration::from_secs(30);

/// Looks a host name up (blocking): the system's resolver, or a test's.
pub type Resolver = fn(&str, u16) -> io::Result<Vec<SocketAddr>>;

/// The system's resolver (`getaddrinfo`).
pub fn system(host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    (host, port).to_socket_addrs().map(Iterator::collect)
}

type Answer = io::Result<Vec<SocketAddr>>;

/// One server's lookups: the one under way (and when it began), and the last answer (and when
/// the lookup that gave it began).
pub struct Lookup {
    resolver: Resolver,
    pending: Option<(mpsc::Receiver<Answer>, Instant)>,
    answer: Option<(Vec<SocketAddr>, Instant)>,
}

/// `addr`'s IP as a host for the redis crate, which looks it up numerically: an IPv6 address
/// keeps its zone (`fe80::1%2`), without which a link-local address cannot be reached.
pub fn numeric_host(addr: &SocketAddr) -> String {
    match addr {
        SocketAddr::V6(a) if a.scope_id() != 0 => format!("{}%{}", a.ip(), a.scope_id()),
        a => a.ip().to_string(),
    }
}

impl Lookup {
    pub fn new(resolver: Resolver) -> Self {
        Lookup {
            resolver,
            pending: None,
            answer: None,
        }
    }

    /// The addresses of `host`: the kept answer while it is fresh (unless `fresh`), else the
    /// lookup's, waiting at most `wait` for it.
    pub fn addresses(
        &mut self,
        host: &str,
        port: u16,
        wait: Duration,
        fresh: bool,
    ) -> io::Result<Vec<SocketAddr>> {
        if let Some((addrs, at)) = &self.answer {
            if !fresh && at.elapsed() < KEEP_FOR {
                return Ok(addrs.clone());
            }
        }
        // A lookup under way longer than an answer is kept is given up (its thread ends when
        // the resolver answers, unheard): a resolver stuck for good costs a thread per
        // KEEP_FOR, and the name is asked again.
        let (pending, began) = match self.pending.take() {
            Some((pending, began)) if began.elapsed() < KEEP_FOR => (pending, began),
            _ => {
                let (tx, rx) = mpsc::channel();
                let (resolver, host) = (self.resolver, host.to_owned());
                resilient_core::signals::spawn(
                    std::thread::Builder::new().name("resilient-redis-lookup".into()),
                    move || {
                        let _ = tx.send(resolver(&host, port));
                    },
                )?;
                (rx, Instant::now())
            }
        };
        match pending.recv_timeout(wait) {
            Ok(answer) => {
                let addrs = answer?;
                if addrs.is_empty() {
                    return Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        "the Redis host name has no address",
                    ));
                }
                self.answer = Some((addrs.clone(), began));
                Ok(addrs)
            }
            Err(RecvTimeoutError::Timeout) => {
                self.pending = Some((pending, began));
                Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the lookup of the Redis host name did not answer in time",
                ))
            }
            Err(RecvTimeoutError::Disconnected) => Err(io::Error::other(
                "the lookup of the Redis host name ended without an answer",
            )),
        }
    }

    /// In a forked child: a lookup under way is the parent's thread's, and its channel is left
    /// as it is (not dropped: that thread may have held the channel's lock at the fork).
    pub fn leave_inherited(&mut self) {
        if let Some(pending) = self.pending.take() {
            std::mem::forget(pending);
        }
    }

    /// Moves `addr` to the end of the kept answer: it did not answer a connect.
    pub fn demote(&mut self, addr: SocketAddr) {
        if let Some((addrs, _)) = &mut self.answer {
            if let Some(i) = addrs.iter().position(|a| *a == addr) {
                let a = addrs.remove(i);
                addrs.push(a);
            }
        }
    }

    /// Drops the kept answer: a connect to one of its addresses was refused.
    pub fn forget(&mut self) {
        self.answer = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    static SLOW_CALLS: AtomicUsize = AtomicUsize::new(0);

    /// A resolver that answers 127.0.0.1 after 300 ms.
    fn slow(_: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        SLOW_CALLS.fetch_add(1, SeqCst);
        std::thread::sleep(Duration::from_millis(300));
        Ok(vec![SocketAddr::from(([127, 0, 0, 1], port))])
    }

    #[test]
    fn a_slow_lookup_is_waited_for_only_as_long_as_the_connect_may_wait() {
        let mut lookup = Lookup::new(slow);
        let started = Instant::now();
        let e = lookup
            .addresses("redis.internal", 6379, Duration::from_millis(50), false)
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(!e.to_string().contains("redis.internal"), "{e}");
        let waited = started.elapsed();
        assert!(waited < Duration::from_millis(250), "{waited:?}");
        // The next connect takes the same lookup's answer: no second lookup.
        let addrs = lookup
            .addresses("redis.internal", 6379, Duration::from_secs(5), false)
            .unwrap();
        assert_eq!(addrs, vec![SocketAddr::from(([127, 0, 0, 1], 6379))]);
        assert_eq!(SLOW_CALLS.load(SeqCst), 1);
        // Kept: answered at once, without a lookup.
        let started = Instant::now();
        lookup
            .addresses("redis.internal", 6379, Duration::from_millis(1), false)
            .unwrap();
        assert!(started.elapsed() < Duration::from_millis(100));
        assert_eq!(SLOW_CALLS.load(SeqCst), 1);
        // Forgotten (or asked fresh): looked up again.
        lookup.forget();
        lookup
            .addresses("redis.internal", 6379, Duration::from_secs(5), false)
            .unwrap();
        lookup
            .addresses("redis.internal", 6379, Duration::from_secs(5), true)
            .unwrap();
        assert_eq!(SLOW_CALLS.load(SeqCst), 3);
    }

    #[test]
    fn a_failed_or_empty_lookup_is_an_error_and_nothing_is_kept() {
        fn none(_: &str, _: u16) -> io::Result<Vec<SocketAddr>> {
            Ok(Vec::new())
        }
        fn failing(_: &str, _: u16) -> io::Result<Vec<SocketAddr>> {
            Err(io::Error::other("no such host"))
        }
        let mut lookup = Lookup::new(none);
        let e = lookup
            .addresses("x", 1, Duration::from_secs(5), false)
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(lookup.answer.is_none());
        let mut lookup = Lookup::new(failing);
        assert!(lookup
            .addresses("x", 1, Duration::from_secs(5), false)
            .is_err());
        assert!(lookup.answer.is_none() && lookup.pending.is_none());
    }

    #[test]
    fn an_address_that_did_not_answer_goes_last_and_ipv6_keeps_its_zone() {
        fn two(_: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
            Ok(vec![
                "[fe80::1%2]:0".parse::<SocketAddr>().unwrap(),
                SocketAddr::from(([10, 0, 0, 5], port)),
            ])
        }
        let mut lookup = Lookup::new(two);
        let addrs = lookup
            .addresses("x", 6379, Duration::from_secs(5), false)
            .unwrap();
        assert_eq!(numeric_host(&addrs[0]), "fe80::1%2");
        assert_eq!(numeric_host(&addrs[1]), "10.0.0.5");
        lookup.demote(addrs[0]);
        let again = lookup
            .addresses("x", 6379, Duration::from_secs(5), false)
            .unwrap();
        assert_eq!(again, vec![addrs[1], addrs[0]]);
    }

    #[test]
    fn the_system_resolver_knows_localhost() {
        let addrs = Lookup::new(system)
            .addresses("localhost", 6379, Duration::from_secs(5), false)
            .unwrap();
        assert!(addrs.iter().all(|a| a.ip().is_loopback()), "{addrs:?}");
    }
}
