//! A Redis that stalls (a slow script, a fork for a snapshot, a saturated host) runs the
//! commands it has been sent once it comes back, whether their sender still waits or not. No
//! slot may stay taken by an admission whose answer came too late, nor by a release that could
//! not be sent in time.

mod common;
use common::*;

use std::time::Duration;

use resilient_http::OnBackendError;

/// An admission that timed out during a stall still ran once Redis came back, adding its token
/// with a full lease. Its token is given back with the next command: the funnel of 1 is free
/// for the next caller at once, not after the 10 s lease.
#[test]
fn an_admission_that_ran_after_its_timeout_does_not_keep_a_slot() {
    let redis = RedisServer::start();
    let url = format!("{}&timeout=0.05", redis.url("g1:"));
    // `closed`: an admission is granted only when Redis granted it.
    let b = backend(&url, OnBackendError::Closed, 1, "g1");
    let f = web_funnel(&b, "up", 1, Duration::from_secs(10));
    // Connected, script loaded (asked again if a pause of the machine outlasted the 50 ms).
    drop(until_ok("never admitted", || f.admit(1, now_ms())));

    let stalled = stall(redis.port(), 300);
    assert!(
        f.admit(1, now_ms()).is_err(),
        "Redis stalled: no answer in 50 ms"
    );
    stalled.join().unwrap();

    let permit = until_ok("the funnel of 1 was full", || f.admit(1, now_ms()));
    assert_eq!(
        redis.cli(&["ZCARD", "g1:{up}:funnel"]),
        "1",
        "only the slot just granted"
    );
    drop(permit);
    drop(until_ok("the funnel of 1 was full", || {
        f.admit(1, now_ms())
    }));
}

/// A release while the connection backs off (after another command's timeout) is kept, and
/// sent with the first command once Redis answers again.
#[test]
fn a_release_during_the_back_off_is_sent_when_redis_answers_again() {
    let redis = RedisServer::start();
    let url = format!("{}&timeout=0.05", redis.url("g2:"));
    let b = backend(&url, OnBackendError::Closed, 1, "g2");
    let f = web_funnel(&b, "up", 1, Duration::from_secs(10));
    // Room for the admission that times out (it runs once Redis is back).
    let other = web_funnel(&b, "other", 5, Duration::from_secs(10));
    let held = until_ok("never admitted", || f.admit(1, now_ms()));

    let stalled = stall(redis.port(), 300);
    assert!(other.admit(1, now_ms()).is_err(), "timed out: back-off");
    drop(held); // in the back-off: not sent now
    stalled.join().unwrap();

    let answered = until_ok("no answer", || other.admit(1, now_ms()));
    drop(answered);
    drop(until_ok("no answer", || other.admit(1, now_ms()))); // read the releases' replies
    assert_eq!(
        redis.cli(&["ZCARD", "g2:{up}:funnel"]),
        "0",
        "the release was sent once Redis answered"
    );
}
