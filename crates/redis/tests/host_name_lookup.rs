//! A Redis given by host name: its lookup is bounded by the same wait as the connect. The system
//! resolver cannot be made to hang here, so a resolver that takes 600 ms stands for one whose
//! name server does not answer; the real one is used for `localhost`.

mod common;
use common::*;

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use resilient_http::OnBackendError;
use resilient_redis::{Redis, Server, Target};

static LOOKUPS: AtomicUsize = AtomicUsize::new(0);

/// Every name is 127.0.0.1, after 600 ms.
fn slow_resolver(_: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    LOOKUPS.fetch_add(1, SeqCst);
    std::thread::sleep(Duration::from_millis(600));
    Ok(vec![SocketAddr::from(([127, 0, 0, 1], port))])
}

#[test]
fn a_slow_lookup_ends_the_admission_within_its_wait_and_is_used_once_it_answers() {
    let redis = RedisServer::start();
    let url = format!(
        "redis://redis.test.invalid:{}/0?prefix=l1:&timeout=0.1",
        redis.port()
    );
    let server = Server::with_resolver(Target::parse(&url).unwrap(), slow_resolver).unwrap();
    let b = Redis::new(Arc::new(server), OnBackendError::Closed, 1, None);
    let f = web_funnel(&b, "up", 2, Duration::from_secs(10));

    let started = Instant::now();
    assert!(f.admit(1, now_ms()).is_err(), "no address yet: closed");
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_millis(400),
        "waited {waited:?} for a lookup of 600 ms with a timeout of 100 ms"
    );

    // Once the lookup answered (and the back-off ended), its address is used: the same lookup,
    // not a new one per connect.
    let permit = until_ok("the lookup's answer", || f.admit(1, now_ms()));
    assert_eq!(redis.cli(&["ZCARD", "l1:{up}:funnel"]), "1");
    drop(permit);
    assert_eq!(LOOKUPS.load(SeqCst), 1);
}

#[test]
fn localhost_is_looked_up_by_the_system_resolver() {
    let redis = RedisServer::start();
    let url = format!("redis://localhost:{}/0?prefix=l2:", redis.port());
    let b = backend(&url, OnBackendError::Closed, 1, "l2");
    let f = web_funnel(&b, "up", 1, Duration::from_secs(10));
    let permit = f.admit(1, now_ms()).unwrap();
    assert_eq!(redis.cli(&["ZCARD", "l2:{up}:funnel"]), "1");
    drop(permit);
}
