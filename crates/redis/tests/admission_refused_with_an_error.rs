//! An admission Redis answers with an error it gives before running anything (READONLY from a
//! replica after a failover, NOPERM for an ACL user without the key) holds no slot: nothing is
//! queued to give back, so no ZREM (refused in turn) rides on the process's later commands. A
//! release Redis keeps refusing is sent again only until its slot's lease ends. Its own test
//! binary: the registry of slots to give back is process-wide, and its two tests take turns
//! (`one_at_a_time`): `release_leftovers()` in one gave back the other's slots (it failed once
//! under CI, counting one given back where none of its own was).

mod common;
use common::*;

use std::time::{Duration, Instant};

use resilient_http::OnBackendError;

/// `name`'s count in `INFO commandstats` (`calls` or `rejected_calls`), 0 when never called.
fn stat(redis: &RedisServer, command: &str, field: &str) -> u64 {
    let info = redis.cli(&["INFO", "commandstats"]);
    info.lines()
        .find(|l| l.starts_with(&format!("cmdstat_{command}:")))
        .and_then(|l| {
            l.split([':', ','])
                .find_map(|kv| kv.strip_prefix(&format!("{field}=")))
        })
        .map_or(0, |n| n.parse().unwrap())
}

#[test]
fn an_admission_refused_with_an_error_leaves_nothing_to_give_back() {
    let _turn = one_at_a_time();
    let primary = RedisServer::start();
    let replica = RedisServer::start();
    replica.cli(&["REPLICAOF", "127.0.0.1", &primary.port().to_string()]);
    let b = backend(&replica.url("ro:"), OnBackendError::Closed, 1, "ro");
    let f = web_funnel(&b, "up", 4, Duration::from_secs(60));
    for refused in 1..=3 {
        // Asked until Redis refuses once more (the refusal before started a back-off).
        let until = Instant::now() + Duration::from_secs(5);
        while stat(&replica, "evalsha", "rejected_calls")
            + stat(&replica, "evalsha", "failed_calls")
            < refused
        {
            assert!(f.admit(1, now_ms()).is_err(), "a replica admits nobody");
            assert!(
                Instant::now() < until,
                "Redis never refused admission {refused}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    assert_eq!(
        stat(&replica, "zrem", "calls") + stat(&replica, "zrem", "rejected_calls"),
        0,
        "no ZREM for admissions Redis refused"
    );
    assert_eq!(
        resilient_redis::release_leftovers(),
        0,
        "nothing to give back"
    );
}

/// A slot granted, then its server became a replica (a failover): the release is refused
/// (READONLY) and sent again with later commands only until the slot's lease ends, after
/// which Redis no longer counts it.
#[test]
fn a_release_refused_for_good_is_dropped_when_its_lease_ends() {
    let _turn = one_at_a_time();
    let primary = RedisServer::start();
    let other = RedisServer::start();
    let b = backend(&primary.url("rl:"), OnBackendError::Closed, 1, "rl");
    let lease = Duration::from_millis(300);
    let f = web_funnel(&b, "up", 4, lease);
    let held = f.admit(1, now_ms()).unwrap();
    let granted = Instant::now();
    primary.cli(&["REPLICAOF", "127.0.0.1", &other.port().to_string()]);
    // Written now; Redis answers READONLY. Commands go on (each admission is refused too)
    // past the lease's end.
    drop(held);
    while granted.elapsed() < lease + Duration::from_millis(400) {
        let _ = f.admit(1, now_ms());
        let _ = resilient_redis::release_leftovers();
        std::thread::sleep(Duration::from_millis(20));
    }
    let refused = stat(&primary, "zrem", "rejected_calls") + stat(&primary, "zrem", "failed_calls");
    assert!(refused >= 1, "the release was refused at least once");
    for _ in 0..10 {
        let _ = f.admit(1, now_ms());
        let _ = resilient_redis::release_leftovers();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        stat(&primary, "zrem", "rejected_calls") + stat(&primary, "zrem", "failed_calls"),
        refused,
        "no ZREM sent after the lease ended"
    );
}
