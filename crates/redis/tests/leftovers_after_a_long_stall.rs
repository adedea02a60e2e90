//! An admission that timed out during a stall longer than its lease: Redis runs its script when
//! the stall ends and holds the token for a whole lease from then, so the ZREM kept for it must
//! still go out with the first command Redis answers after the stall. Before, the entry was
//! dropped at `sent + lease` by this host's clock, which had passed by then: the slot stayed
//! held for a lease after the stall whenever no command could be written during it (a connect
//! whose handshake, here the URL's SELECT, timed out). Its own test binary: the registry is
//! process-wide.

mod common;
use common::*;

use std::time::{Duration, Instant};

use resilient_http::OnBackendError;

#[test]
fn a_late_admission_is_given_back_with_the_first_command_after_a_stall_longer_than_its_lease() {
    let redis = RedisServer::start();
    let url = format!(
        "redis://127.0.0.1:{}/2?prefix=g5:&timeout=0.05",
        redis.port()
    );
    let b = backend(&url, OnBackendError::Closed, 1, "g5");
    // A lease of 2 s, a stall of 2.5 s: far apart enough that a pause of the machine cannot
    // make a slot given back early look like one that lapsed.
    let lease = Duration::from_millis(2000);
    let f = web_funnel(&b, "up", 2, lease);
    let other = web_funnel(&b, "other", 2, lease);
    // Connected, scripts loaded (asked again if a pause of the machine outlasted the 50 ms).
    drop(until_ok("never admitted", || other.admit(1, now_ms())));

    let stall_began = Instant::now();
    let stalled = stall(redis.port(), 2500);
    assert!(
        f.admit(1, now_ms()).is_err(),
        "timed out: the script may run late"
    );
    // Calls go on during the stall: each connect's SELECT times out, nothing is written. (One
    // asked near the stall's end may be answered: only those well inside it are checked.)
    while !stalled.is_finished() {
        let inside = stall_began.elapsed() < Duration::from_millis(2000);
        let admitted = other.admit(1, now_ms()).is_ok();
        assert!(!(inside && admitted), "Redis is stalled");
        std::thread::sleep(Duration::from_millis(20));
    }
    stalled.join().unwrap();
    // The late admission ran once the stall ended, with a full lease from then.
    let ran = until_ok("the late admission never ran", || {
        match redis.cli(&["-n", "2", "ZCARD", "g5:{up}:funnel"]).as_str() {
            "1" => Ok(Instant::now()),
            n => Err(n.to_owned()),
        }
    });
    drop(until_ok("no answer after the stall", || {
        other.admit(1, now_ms())
    }));
    assert!(ran.elapsed() < lease, "checked within the lease");
    assert_eq!(
        redis.cli(&["-n", "2", "ZCARD", "g5:{up}:funnel"]),
        "0",
        "given back with the first command after the stall, not held for its lease"
    );
}
