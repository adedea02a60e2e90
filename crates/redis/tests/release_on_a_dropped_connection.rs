//! A release written on a connection Redis had already dropped (an idle timeout, a restart, a
//! failover, `CLIENT KILL`) while no command follows it in the request: request end reads the
//! replies still unread, finds the connection gone, and sends the ZREM again on a new one.
//! Its own test binary: the registry of slots to give back is process-wide.

mod common;
use common::*;

use std::time::Duration;

use resilient_http::OnBackendError;

#[test]
fn a_release_written_on_a_dropped_connection_is_sent_again_at_request_end() {
    let redis = RedisServer::start();
    let b = backend(&redis.url("d1:"), OnBackendError::Closed, 1, "d1");
    let f = web_funnel(&b, "up", 1, Duration::from_secs(20));
    let held = f.admit(1, now_ms()).unwrap();
    assert_eq!(redis.cli(&["CLIENT", "KILL", "TYPE", "normal"]), "1");
    drop(held); // written into the dropped connection, within IDLE_CHECK: no PING first
    resilient_redis::release_leftovers();
    assert_eq!(
        redis.cli(&["ZCARD", "d1:{up}:funnel"]),
        "0",
        "the slot was given back before request end returned"
    );
}
