//! An HTTP/2 connection whose network path died silently (no FIN, no RST) must not take every
//! later https call to that origin with it: over HTTP/2 all of them share the one connection,
//! so an attempt that timed out on it is retried on a new one, and a connection that stopped
//! answering is found by keep-alive pings. The relay counts the connections the client opened;
//! the server counts what it answered.

#[path = "support/accept_loop.rs"]
mod accept_loop;
#[path = "support/freezing_relay.rs"]
mod freezing_relay;
#[path = "support/h2_tls.rs"]
mod h2_tls;
#[path = "support/json.rs"]
mod json;

use std::sync::Arc;
use std::time::{Duration, Instant};

use freezing_relay::FreezingRelay;
use h2_tls::{H2Server, CA_PEM};
use resilient_http::{
    process_io, CallEnv, Caps, HttpClient, RequestOptions, Response, SystemClock, TokioSleeper,
    TransportOptions, Unavailable, Verify,
};
use serde_json::json;

/// A client of the process's transport (the one every client of a PHP process shares) for
/// `https://127.0.0.1:port`, trusting the test CA.
fn client(port: u16, timeout: f64) -> HttpClient {
    let mut config = json::config(&json!({
        "base_url": format!("https://127.0.0.1:{port}"),
        "timeout": timeout,
        "max_attempts": 2,
        "backoff": {"base": 0.001, "cap": 0.002},
    }));
    config.transport = Arc::new(TransportOptions {
        verify: Verify::Bundle(CA_PEM.into()),
        ..TransportOptions::default()
    });
    let io = process_io().unwrap();
    let env = CallEnv::new(
        Arc::new(SystemClock),
        Arc::new(TokioSleeper),
        io.transport(),
    );
    HttpClient::new(config, Caps::default(), env)
}

fn get(client: &HttpClient) -> Result<Response, Unavailable> {
    let request = client.prepare("GET", "/x", RequestOptions::new()).unwrap();
    process_io()
        .unwrap()
        .block_on(client.call(client.env().clone(), request, None))
}

#[test]
fn an_attempt_that_timed_out_on_a_dead_http2_connection_is_retried_on_a_new_one() {
    let server = H2Server::start();
    let relay = FreezingRelay::start(server.port);
    let first = client(relay.port, 0.5);
    let r = get(&first).unwrap();
    assert_eq!((r.status(), r.attempts()), (200, 1));
    assert_eq!((relay.accepted(), server.answered()), (1, 1));

    relay.freeze();
    let r = get(&first).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (r.status(), r.attempts()),
        (200, 2),
        "the first attempt timed out"
    );
    assert_eq!(
        (relay.accepted(), server.answered()),
        (2, 2),
        "the retry went on a new connection"
    );

    // Every later call to the origin, from any client of the process, uses the new connection.
    for c in [&first, &client(relay.port, 0.5)] {
        let r = get(c).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((r.status(), r.attempts()), (200, 1));
    }
    assert_eq!((relay.accepted(), server.answered()), (2, 4));
}

/// With an attempt timeout longer than the keep-alive ping's interval and timeout, the ping
/// that goes unanswered closes the dead connection: the attempt fails then, not at its own
/// timeout, and the retry opens a new connection.
#[test]
fn an_unanswered_keep_alive_ping_ends_a_dead_http2_connection() {
    let server = H2Server::start();
    let relay = FreezingRelay::start(server.port);
    let c = client(relay.port, 60.0);
    assert_eq!(get(&c).unwrap().status(), 200);

    relay.freeze();
    let started = Instant::now();
    let r = get(&c).unwrap_or_else(|e| panic!("{e}"));
    let took = started.elapsed();
    assert_eq!((r.status(), r.attempts()), (200, 2));
    assert_eq!((relay.accepted(), server.answered()), (2, 2));
    assert!(took < Duration::from_secs(30), "{took:?}");
}
