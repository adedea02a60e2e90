//! A back-off started by an error Redis answered to another command (OOM; a key of the wrong
//! type backs off that key alone) holds back admissions, not the release of a slot on the
//! connection that is open: Redis runs a ZREM whatever the other command's trouble. Its own
//! test binary: the registry of slots to give back is process-wide.

mod common;
use common::*;

use std::time::Duration;

use resilient_http::OnBackendError;

#[test]
fn a_release_goes_through_a_back_off_on_an_open_connection() {
    let redis = RedisServer::start();
    let b = backend(&redis.url("o1:"), OnBackendError::Closed, 1, "o1");
    let f = web_funnel(&b, "up", 1, Duration::from_secs(20));
    let broken = web_funnel(&b, "broken", 4, Duration::from_secs(20));
    let held = f.admit(1, now_ms()).unwrap();
    drop(broken.admit(1, now_ms()).unwrap()); // its script loaded
    resilient_redis::release_leftovers();
    assert_eq!(redis.cli(&["CONFIG", "SET", "maxmemory", "1"]), "OK");
    assert!(broken.admit(1, now_ms()).is_err(), "OOM: a back-off starts");
    assert!(
        broken.admit(1, now_ms()).is_err(),
        "in the back-off: refused (closed)"
    );
    drop(held);
    resilient_redis::release_leftovers(); // request end
    assert_eq!(
        redis.cli(&["ZCARD", "o1:{up}:funnel"]),
        "0",
        "released in the back-off"
    );
}

/// The release goes through; the back-off stays: a slot given back is no sign that the command
/// that failed would now succeed. (Before, every release that went through ended the back-off,
/// and a permit held across a failing command, such as an admission followed by a budget record
/// Redis refuses, sent the failing command again each call.) The failing command: an admission
/// under a key the ACL user may not touch (NOPERM), which backs off the whole server.
#[test]
fn a_release_in_a_back_off_does_not_end_it() {
    let redis = RedisServer::start();
    redis.cli(&[
        "ACL",
        "SETUSER",
        "o2user",
        "on",
        ">o2-pass",
        "~o2:{up}*",
        "+@all",
    ]);
    let url = format!(
        "redis://o2user:o2-pass@127.0.0.1:{}/0?prefix=o2:",
        redis.port()
    );
    let b = backend(&url, OnBackendError::Closed, 1, "o2");
    let f = web_funnel(&b, "up", 1, Duration::from_secs(20));
    let broken = web_funnel(&b, "broken", 4, Duration::from_secs(20));
    drop(f.admit(1, now_ms()).unwrap()); // connected, script loaded
    resilient_redis::release_leftovers();
    redis.cli(&["CONFIG", "RESETSTAT"]);
    let until = std::time::Instant::now() + Duration::from_millis(300);
    let (mut calls, mut admitted) = (0, 0);
    while std::time::Instant::now() < until {
        let held = f.admit(1, now_ms());
        admitted += usize::from(held.is_ok());
        assert!(
            broken.admit(1, now_ms()).is_err(),
            "NOPERM: refused (closed)"
        );
        drop(held);
        resilient_redis::release_leftovers(); // request end
        calls += 1;
    }
    let info = redis.cli(&["INFO", "errorstats"]);
    let refused: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("errorstat_NOPERM:count="))
        .map_or(0, |n| n.trim().parse().unwrap());
    // One per back-off of 50 ms (the healthy admission after one ends it, and the doubling
    // starts afresh): about 6 in 300 ms, not one per call (3825 before).
    assert!(
        (1..=12).contains(&refused),
        "{refused} failing admissions reached Redis out of {calls} calls in 300 ms"
    );
    assert!(
        calls > 100 && admitted >= 1,
        "{calls} calls, {admitted} admitted"
    );
    assert_eq!(
        redis.cli(&["ZCARD", "o2:{up}:funnel"]),
        "0",
        "every slot given back"
    );
}
