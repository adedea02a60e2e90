//! Slots left by a bailout, given back at request end (its own test binary: the registry is
//! process-wide, so it must not see the other tests' slots).

mod common;
use common::*;

use std::time::Duration;

use resilient_http::OnBackendError;

#[test]
fn slots_left_by_a_bailout_are_given_back_by_release_leftovers() {
    let redis = RedisServer::start();
    let b = backend(&redis.url("t7:"), OnBackendError::Closed, 1, "l");
    let f = web_funnel(&b, "sap", 3, Duration::from_secs(60));
    let kept = f.admit(1, now_ms()).unwrap();
    std::mem::forget(f.admit(1, now_ms()).unwrap()); // never dropped: a long-jump
    std::mem::forget(f.admit(1, now_ms()).unwrap());
    assert_eq!(redis.cli(&["ZCARD", "t7:{sap}:funnel"]), "3");
    drop(kept);
    assert_eq!(
        resilient_redis::release_leftovers(),
        2,
        "only the two left behind"
    );
    assert_eq!(redis.cli(&["ZCARD", "t7:{sap}:funnel"]), "0");
}
