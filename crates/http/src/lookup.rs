//! Host-name lookups for both transports, each on a thread of its own.
//!
//! Nothing can cut a `getaddrinfo` short (glibc: 5 s per name server and attempt), so it runs
//! on a thread and a connect waits for its answer only as long as the connect may wait. Past
//! that the lookup goes on, and the connects that need the same name meanwhile wait for that
//! one: a resolver that does not answer costs a thread per name, not one per connect (tokio's
//! blocking pool, used before, started one per connect, up to 512 a process). The threads
//! block every signal (`resilient_core::signals`), and one that cannot be started fails the
//! connect rather than panicking.
//!
//! Only the lookup under way is shared; an answer is not kept (the system's resolver decides
//! what is cached). The lookups live on the PHP thread, where the runtime runs, and belong to
//! the process that started them: a forked child starts its own.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::fork_local::ForkLocal;

/// Looks a host name up (blocking): the system's resolver, or a test's.
pub(crate) type Resolver = fn(&str, u16) -> io::Result<Vec<SocketAddr>>;

/// The system's resolver (`getaddrinfo`).
fn system(host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    (host, port).to_socket_addrs().map(Iterator::collect)
}

/// A lookup under way longer than this is left to end unheard, and the name looked up again:
/// a resolver stuck for good costs a thread per name per this.
const GIVE_UP_AFTER: Duration = Duration::from_secs(30);

/// Lookups of different names under way at once in one process, at most: past it a connect
/// fails at once (a resolver that answers nothing, asked for many names).
const MAX_UNDER_WAY: usize = 32;

/// A lookup's answer, as every waiter gets it (`io::Error` is not `Clone`).
type Answer = Result<Vec<SocketAddr>, (io::ErrorKind, String)>;

struct UnderWay {
    began: Instant,
    answer: watch::Receiver<Option<Answer>>,
}

impl UnderWay {
    fn joinable(&self) -> bool {
        self.answer.borrow().is_none() && self.began.elapsed() < GIVE_UP_AFTER
    }
}

thread_local! {
    static UNDER_WAY: RefCell<ForkLocal<HashMap<(String, u16), UnderWay>>> =
        RefCell::new(ForkLocal::new(HashMap::new()));
}

/// The addresses of `host:port`; an IP address is its own answer, without a thread.
pub(crate) async fn lookup(host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    lookup_with(system, host, port).await
}

async fn lookup_with(resolver: Resolver, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    let literal = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
    if let Ok(ip) = literal.unwrap_or(host).parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let mut answer = under_way(resolver, host, port)?;
    let answer = answer
        .wait_for(Option::is_some)
        .await
        .map_err(|_| io::Error::other("the host-name lookup ended without an answer"))?
        .clone();
    match answer {
        Some(Ok(addrs)) => Ok(addrs),
        Some(Err((kind, message))) => Err(io::Error::new(kind, message)),
        None => unreachable!("waited for an answer"),
    }
}

/// The lookup of `host:port` under way in this process, or a new one.
fn under_way(
    resolver: Resolver,
    host: &str,
    port: u16,
) -> io::Result<watch::Receiver<Option<Answer>>> {
    UNDER_WAY.with(|lookups| {
        let mut lookups = lookups.borrow_mut();
        let lookups = lookups.here();
        let key = (host.to_owned(), port);
        if let Some(lookup) = lookups.get(&key).filter(|l| l.joinable()) {
            return Ok(lookup.answer.clone());
        }
        lookups.retain(|_, lookup| lookup.joinable());
        if lookups.len() >= MAX_UNDER_WAY {
            return Err(io::Error::other(format!(
                "{MAX_UNDER_WAY} host-name lookups are under way in this process, none answered"
            )));
        }
        let (tell, answer) = watch::channel(None);
        let name = host.to_owned();
        resilient_core::signals::spawn(
            std::thread::Builder::new().name("resilient-lookup".into()),
            move || {
                let answer = resolver(&name, port).map_err(|e| (e.kind(), e.to_string()));
                let _ = tell.send(Some(answer));
            },
        )
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot start a thread for the host-name lookup: {e}"),
            )
        })?;
        lookups.insert(
            key,
            UnderWay {
                began: Instant::now(),
                answer: answer.clone(),
            },
        );
        Ok(answer)
    })
}

/// reqwest's resolver (https, proxies): these lookups instead of tokio's blocking pool.
#[derive(Debug, Default)]
pub(crate) struct ThreadResolver;

impl reqwest::dns::Resolve for ThreadResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            // Port 0: reqwest puts the URL's in.
            let addrs = lookup(&host, 0).await?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    static CALLS: AtomicUsize = AtomicUsize::new(0);
    static OPEN: AtomicBool = AtomicBool::new(false);

    /// Answers 127.0.0.1 once `OPEN` is set.
    fn gated(_: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        CALLS.fetch_add(1, SeqCst);
        while !OPEN.load(SeqCst) {
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(vec![SocketAddr::from(([127, 0, 0, 1], port))])
    }

    #[test]
    fn connects_that_need_a_name_share_its_lookup_and_one_given_up_leaves_it_to_the_next() {
        block_on(async {
            // Ten at once: one lookup.
            let waiters = (0..10).map(|_| {
                tokio::time::timeout(
                    Duration::from_millis(50),
                    lookup_with(gated, "api.test", 80),
                )
            });
            let all = futures_util::future::join_all(waiters).await;
            assert!(all.iter().all(Result::is_err), "none answered in 50 ms");
            assert_eq!(CALLS.load(SeqCst), 1);
            // The next connect waits for the same lookup, which answers it.
            OPEN.store(true, SeqCst);
            let addrs = lookup_with(gated, "api.test", 80).await.unwrap();
            assert_eq!(addrs, vec![SocketAddr::from(([127, 0, 0, 1], 80))]);
            assert_eq!(CALLS.load(SeqCst), 1);
            // Answered: not kept, the next connect looks the name up again.
            lookup_with(gated, "api.test", 80).await.unwrap();
            assert_eq!(CALLS.load(SeqCst), 2);
        });
    }

    #[test]
    fn an_address_is_its_own_answer_and_a_failure_is_every_waiters() {
        fn never(_: &str, _: u16) -> io::Result<Vec<SocketAddr>> {
            panic!("an address is not looked up")
        }
        fn unknown(_: &str, _: u16) -> io::Result<Vec<SocketAddr>> {
            std::thread::sleep(Duration::from_millis(20));
            Err(io::Error::new(io::ErrorKind::NotFound, "no such host"))
        }
        block_on(async {
            let v4 = lookup_with(never, "10.0.0.1", 81).await.unwrap();
            assert_eq!(v4, vec![SocketAddr::from(([10, 0, 0, 1], 81))]);
            let v6 = lookup_with(never, "[::1]", 82).await.unwrap();
            assert_eq!(v6, vec!["[::1]:82".parse().unwrap()]);
            let (a, b) = tokio::join!(
                lookup_with(unknown, "gone.test", 80),
                lookup_with(unknown, "gone.test", 80)
            );
            for e in [a.unwrap_err(), b.unwrap_err()] {
                assert_eq!(e.kind(), io::ErrorKind::NotFound);
                assert_eq!(e.to_string(), "no such host");
            }
        });
    }

    #[test]
    fn lookups_of_many_names_none_answered_stop_at_the_bound() {
        fn hangs(_: &str, _: u16) -> io::Result<Vec<SocketAddr>> {
            std::thread::sleep(Duration::from_secs(3));
            Err(io::Error::other("timed out"))
        }
        block_on(async {
            for i in 0..MAX_UNDER_WAY {
                let host = format!("h{i}.test");
                let waited =
                    tokio::time::timeout(Duration::from_millis(1), lookup_with(hangs, &host, 80));
                assert!(waited.await.is_err());
            }
            let e = lookup_with(hangs, "one-more.test", 80).await.unwrap_err();
            assert!(e.to_string().contains("lookups are under way"), "{e}");
            // A name under way is still joined.
            let joined =
                tokio::time::timeout(Duration::from_millis(1), lookup_with(hangs, "h0.test", 80));
            assert!(joined.await.is_err(), "waiting, not refused");
        });
    }
}
