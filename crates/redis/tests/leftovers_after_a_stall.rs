//! What a stall leaves (an admission Redis may run late, a release that could not be sent) is
//! given back at request end by release_leftovers when no command came after it. Its own test
//! binary: the registry is process-wide.

mod common;
use common::*;

use std::time::Duration;

use resilient_http::OnBackendError;

#[test]
fn an_unanswered_admission_and_an_unsent_release_are_given_back_at_request_end() {
    let redis = RedisServer::start();
    let url = format!("{}&timeout=0.05", redis.url("g3:"));
    let b = backend(&url, OnBackendError::Closed, 1, "g3");
    let f = web_funnel(&b, "up", 2, Duration::from_secs(10));
    // (Asked again if a pause of the machine outlasted the 50 ms.)
    let held = until_ok("never admitted", || f.admit(1, now_ms()));

    let stalled = stall(redis.port(), 300);
    assert!(f.admit(1, now_ms()).is_err(), "timed out: back-off");
    drop(held); // in the back-off: not sent now
    stalled.join().unwrap();
    // The late admission has run by the time Redis answers anything sent after it.
    until_ok("the late admission never ran", || {
        match redis.cli(&["ZCARD", "g3:{up}:funnel"]).as_str() {
            "2" => Ok(()),
            n => Err(n.to_owned()),
        }
    });

    let sent = until_ok(
        "nothing given back",
        || match resilient_redis::release_leftovers() {
            0 => Err(()),
            n => Ok(n),
        },
    );
    assert_eq!(sent, 2, "the unanswered admission and the unsent release");
    until_ok("slots kept", || {
        match redis.cli(&["ZCARD", "g3:{up}:funnel"]).as_str() {
            "0" => Ok(()),
            n => Err(n.to_owned()),
        }
    });
}
