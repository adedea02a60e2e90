//! A release Redis refuses for good (an ACL that allows the scripts but not ZREM): with
//! `'local'`, the calls after it are admitted by the host's own funnel, as the log line says.
//! Before, they went on being admitted on Redis until the slots no release could free filled the
//! funnel, which then refused every call as full for as long as the leases lasted. Its own test
//! binary: the process reports each kind of error once (`release_refused_reported.rs` counts).

use std::time::Duration;

use resilient_http::OnBackendError;

mod common;
use common::*;

/// With `'local'`, the calls after a refused release are admitted by the host's own funnel
/// (its limit): the slots no release frees on Redis do not refuse them. The calls come 80 ms
/// apart, as a worker's requests do: longer than the first back-off, so Redis is asked again
/// between them (and refuses the releases again each time).
#[test]
fn after_a_refused_release_the_calls_follow_the_local_funnel() {
    let redis = RedisServer::start();
    let url = redis.url_of_a_user_without_zrem("norel2");
    let b = backend(&url, OnBackendError::Local, 1, "norel2");
    let funnel = web_funnel(&b, "sap", 2, Duration::from_secs(10));
    for i in 0..12 {
        drop(
            funnel
                .admit(1, now_ms())
                .unwrap_or_else(|e| panic!("call {i}: {e:?}")),
        );
        std::thread::sleep(Duration::from_millis(80));
    }
    let held: u32 = redis
        .cli(&["ZCARD", "norel2:{sap}:funnel"])
        .parse()
        .unwrap();
    assert!(held <= 2, "{held} held: Redis never admits past its limit");
    // Redis was asked again while the back-off let it (the releases refused each time).
    let calls = redis.cli(&["INFO", "commandstats"]);
    let zrem = calls
        .lines()
        .find(|l| l.starts_with("cmdstat_zrem:"))
        .expect("ZREMs sent");
    assert!(zrem.contains("rejected_calls="), "{zrem}");
}
