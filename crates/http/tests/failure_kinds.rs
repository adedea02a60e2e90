//! The same upstream behaviour gets the same failure kind over either transport: plain
//! `http://` goes through the lean HTTP/1.1 transport, a URL with user-info (and https) through
//! reqwest. The kinds are those docs/errors.md gives: `connect` when `connect_timeout` ran out,
//! `timeout` when the attempt's own timeout did (also during the connect), `body` when an
//! answer's body stopped short.

#[path = "support/accept_loop.rs"]
mod accept_loop;
#[path = "support/blackhole.rs"]
mod blackhole;
#[path = "support/json.rs"]
mod json;

use std::sync::Arc;

use blackhole::Blackhole;
use resilient_http::{
    process_io, CallEnv, Caps, FailureKind, HttpClient, RequestOptions, SystemClock, TokioSleeper,
};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The failure kind of a one-attempt GET of `url` with `options`.
fn failure(url: &str, options: Value) -> FailureKind {
    let mut options = options;
    options["base_url"] = json!(url);
    options["max_attempts"] = json!(1);
    let io = process_io().unwrap();
    let env = CallEnv::new(
        Arc::new(SystemClock),
        Arc::new(TokioSleeper),
        io.transport(),
    );
    let client = HttpClient::new(json::config(&options), Caps::default(), env);
    let request = client.prepare("GET", "/x", RequestOptions::new()).unwrap();
    let e = io
        .block_on(client.call(client.env().clone(), request, None))
        .expect_err("no answer");
    e.last_failure()
        .unwrap_or_else(|| panic!("{}", e.message()))
}

/// Both transports' URLs for `host:port`: plain, and with user-info (reqwest).
fn both(host: &str) -> [(&'static str, String); 2] {
    [
        ("plain", format!("http://{host}")),
        ("reqwest", format!("http://u:p@{host}")),
    ]
}

/// A server that answers every request with a `Content-Length` of 100 and 5 bytes of body,
/// then closes the connection.
fn short_body_server() -> String {
    accept_loop::spawn(|mut socket| async move {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let _ = socket
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nshort")
            .await;
    })
    .to_string()
}

#[test]
fn a_body_cut_short_is_body_on_either_transport() {
    let server = short_body_server();
    for (transport, url) in both(&server) {
        assert_eq!(failure(&url, json!({})), FailureKind::Body, "{transport}");
    }
}

#[test]
fn a_connect_the_attempts_timeout_cut_is_timeout_on_either_transport() {
    let hole = Blackhole::new();
    // Far apart, and within the tenth by which reqwest's connect timeout is rounded down.
    for options in [
        json!({"timeout": 0.3, "connect_timeout": 10.0}),
        json!({"timeout": 0.5, "connect_timeout": 0.52}),
    ] {
        for (transport, url) in both(&hole.addr.to_string()) {
            let kind = failure(&url, options.clone());
            assert_eq!(kind, FailureKind::Timeout, "{transport} {options}");
        }
    }
}

#[test]
fn a_connect_its_connect_timeout_cut_is_connect_on_either_transport() {
    let hole = Blackhole::new();
    for (transport, url) in both(&hole.addr.to_string()) {
        let kind = failure(&url, json!({"timeout": 3.0, "connect_timeout": 0.2}));
        assert_eq!(kind, FailureKind::Connect, "{transport}");
    }
}
