//! A server closes a kept connection after a short idle time without saying so in advance (no
//! `Connection: close`: Node's 5 s keep-alive timeout, a load balancer's idle timeout). The
//! process's runtime runs only while a call runs, so the close is not read when it comes: the
//! next call must not send its request on that connection (a POST, which is not retried, failed
//! with "connection closed before message completed", the server never having seen it).

#[path = "support/drive.rs"]
mod drive;
#[path = "support/h1_tls.rs"]
mod h1_tls;
#[path = "support/json.rs"]
mod json;

use std::sync::atomic::Ordering;
use std::time::Duration;

use resilient_http::process_io;
use serde_json::json;

#[test]
fn a_post_after_the_server_closed_the_idle_connection_goes_on_a_new_one() {
    let (port, connections) = h1_tls::serve_closing_idle(Duration::from_millis(50));
    let io = process_io().unwrap();
    let client = h1_tls::client(io, port);
    for i in 0..3 {
        let path = format!("/orders/{i}");
        let response = drive::call(io, &client, "POST", &path, &json!({"json": {"n": i}}))
            .unwrap_or_else(|e| panic!("call {i}: {e}"));
        assert_eq!(response.status(), 200);
        // Past the server's idle time: the connection is closed before the next call.
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(connections.answered.load(Ordering::SeqCst), 3);
}
