//! A release that cannot reach Redis (the server is gone) is owed until the slot's lease ends,
//! then forgotten: Redis no longer counts the slot, and a release kept for ever would have every
//! request end of the process try to connect to a server that is gone. Its own test binary:
//! the registry of slots to give back is process-wide.

mod common;
use common::*;

use std::time::{Duration, Instant};

use resilient_http::OnBackendError;

#[test]
fn a_release_owed_to_a_dead_server_is_forgotten_when_its_lease_ends() {
    let mut redis = RedisServer::start();
    let b = backend(&redis.url("g:"), OnBackendError::Open, 1, "gone");
    let lease = Duration::from_millis(300);
    let f = web_funnel(&b, "up", 1, lease);
    let admitted = Instant::now();
    let held = f.admit(1, now_ms()).unwrap();
    redis.kill();
    drop(held);
    resilient_redis::release_leftovers(); // request end: Redis unreachable
    assert_eq!(
        resilient_redis::releases_owed(),
        1,
        "owed while the lease runs"
    );

    // The lease ends (by this host's clock, from when the admission was sent).
    std::thread::sleep((admitted + lease).saturating_duration_since(Instant::now()));
    resilient_redis::release_leftovers();
    assert_eq!(
        resilient_redis::releases_owed(),
        0,
        "a release owed past its slot's lease was kept"
    );
}
