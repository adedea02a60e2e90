//! A release Redis answers with an error (BUSY past `busy-reply-threshold`, and likewise
//! LOADING, READONLY after a failover, MISCONF) was not carried out: it is sent again with a
//! later command, not forgotten as if Redis had run it. Its own test binary: the registry of
//! slots to give back is process-wide.

mod common;
use common::*;

use std::time::Duration;

use resilient_http::OnBackendError;

#[test]
fn a_release_refused_with_busy_is_sent_again_once_redis_answers() {
    let redis = RedisServer::start_with(&["--busy-reply-threshold", "100"]);
    let b = backend(&redis.url("b1:"), OnBackendError::Closed, 1, "b1");
    let f = web_funnel(&b, "up", 1, Duration::from_secs(60));
    let other = web_funnel(&b, "other", 5, Duration::from_secs(60));
    drop(other.admit(1, now_ms()).unwrap()); // connected, script loaded
    let held = f.admit(1, now_ms()).unwrap();

    let stalled = stall(redis.port(), 1500);
    until_ok("Redis never answered BUSY", || {
        let ping = redis.cli(&["PING"]);
        if ping.starts_with("BUSY") {
            Ok(())
        } else {
            Err(ping)
        }
    });
    drop(held); // written now; Redis answers BUSY
    assert!(other.admit(1, now_ms()).is_err(), "BUSY: no admission");
    stalled.join().unwrap();

    drop(until_ok("no answer after the stall", || {
        other.admit(1, now_ms())
    }));
    drop(until_ok("no answer after the stall", || {
        other.admit(1, now_ms())
    }));
    assert_eq!(
        redis.cli(&["ZCARD", "b1:{up}:funnel"]),
        "0",
        "the refused release was sent again"
    );
}
