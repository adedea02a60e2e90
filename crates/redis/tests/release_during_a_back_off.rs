//! A back-off started by an error Redis answered to another command (a key of the wrong type,
//! OOM) holds back admissions, not the release of a slot on the connection that is open: Redis
//! runs a ZREM whatever the other command's trouble. Its own test binary: the registry of
//! slots to give back is process-wide.

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
    assert_eq!(
        redis.cli(&["SET", "o1:{broken}:funnel", "not a sorted set"]),
        "OK"
    );
    assert!(
        broken.admit(1, now_ms()).is_err(),
        "WRONGTYPE: a back-off starts"
    );
    drop(held);
    resilient_redis::release_leftovers(); // request end
    assert_eq!(
        redis.cli(&["ZCARD", "o1:{up}:funnel"]),
        "0",
        "released in the back-off"
    );
}
