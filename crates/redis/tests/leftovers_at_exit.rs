//! What a process still owes Redis when it ends is sent then, past a back-off: an exiting
//! process has no later command to carry it. Here a call during a stall timed out after its
//! admission was written (Redis runs it once the stall ends and holds the token a whole lease),
//! and the request end that followed came during the back-off the timeout started, so it sent
//! nothing. Before, the process's end sent nothing either: a one-shot CLI process (cron,
//! artisan) left a slot of a funnel of 1 held for 60 s. Its own test binary: the registry is
//! process-wide.

mod common;
use common::*;

use std::time::Duration;

use resilient_http::OnBackendError;

#[test]
fn what_a_stall_left_is_given_back_at_the_process_end_despite_the_back_off() {
    let redis = RedisServer::start();
    let url = format!("{}&timeout=0.05", redis.url("x1:"));
    let b = backend(&url, OnBackendError::Open, 1, "x1");
    let f = web_funnel(&b, "up", 1, Duration::from_secs(60));
    // The script loaded, the slot given back (asked again if a pause of the machine outlasted
    // the 50 ms).
    drop(until_ok("never admitted", || f.admit(1, now_ms())));
    resilient_redis::release_leftovers();
    assert_eq!(redis.cli(&["ZCARD", "x1:{up}:funnel"]), "0");

    let stalled = stall(redis.port(), 300);
    let _ = f.admit(1, now_ms()); // no answer in 50 ms: falls back (open), back-off
    assert_eq!(
        resilient_redis::release_leftovers(),
        0,
        "the request end came during the back-off: nothing sent"
    );
    resilient_redis::release_leftovers_at_exit();
    stalled.join().unwrap();

    // The late admission runs once the stall ends, then the ZREM sent at the process's end.
    until_ok("the slot was never given back", || {
        match redis.cli(&["ZCARD", "x1:{up}:funnel"]).as_str() {
            "0" => Ok(()),
            n => Err(n.to_owned()),
        }
    });
}
