//! A long-running process that calls many https origins once each (a queue worker delivering
//! webhooks to `https://{tenant}.api…`) must not keep a connection, and its file descriptor, to
//! every one of them: reqwest keeps each origin's idle connection for 60 s, and only while a
//! call drives the runtime, so such a process ran out of descriptors ("Too many open files",
//! for its own `fopen` too). Its own binary: the process's clients hold only this test's
//! connections, and `/proc/self/fd` counts only this test's descriptors.

#[path = "support/json.rs"]
mod json;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use resilient_http::{
    process_io, CallEnv, Caps, HttpClient, SystemClock, TokioSleeper, TransportOptions, Verify,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::json;

const CA_PEM: &[u8] = include_bytes!("support/tls/ca.pem");
const SERVER_PEM: &[u8] = include_bytes!("support/tls/server.pem");
const SERVER_KEY: &[u8] = include_bytes!("support/tls/server.key");

/// Origins called: well past the distinct origins the process's shared clients serve together
/// before one is replaced (128).
const ORIGINS: usize = 300;
/// What the process may hold after calling them: the origins of the clients kept, and a few
/// more (the runtime's own descriptors).
const HELD_AT_MOST: usize = 128 + 16;

/// `n` HTTP/1.1-over-TLS servers on loopback ports of their own (a blocking thread per
/// connection); returns their ports and how many of their connections are open (a connection
/// the client closed ends here).
fn serve(n: usize) -> (Vec<u16>, Arc<AtomicUsize>) {
    let certs = CertificateDer::pem_slice_iter(SERVER_PEM)
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(SERVER_KEY).unwrap();
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap(),
    );
    let open = Arc::new(AtomicUsize::new(0));
    let mut ports = Vec::new();
    for _ in 0..n {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        ports.push(listener.local_addr().unwrap().port());
        let (config, open) = (config.clone(), open.clone());
        std::thread::spawn(move || {
            for socket in listener.incoming().flatten() {
                let (config, open) = (config.clone(), open.clone());
                open.fetch_add(1, Ordering::SeqCst);
                // Else each answer waits for the client's delayed ACK (40 ms).
                socket.set_nodelay(true).unwrap();
                std::thread::spawn(move || {
                    let tls = rustls::ServerConnection::new(config).unwrap();
                    let mut stream = rustls::StreamOwned::new(tls, socket);
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    while let Ok(read) = stream.read(&mut chunk) {
                        if read == 0 {
                            break;
                        }
                        buf.extend_from_slice(&chunk[..read]);
                        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            buf.drain(..end + 4);
                            let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                            if stream
                                .write_all(answer)
                                .and_then(|_| stream.flush())
                                .is_err()
                            {
                                break;
                            }
                        }
                    }
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
    }
    (ports, open)
}

/// This process's open file descriptors.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn connections_to_many_https_origins_stay_bounded() {
    let (ports, open) = serve(ORIGINS);
    let io = process_io().unwrap();
    let before = open_fds();
    for port in &ports {
        // A client per call, as a PHP script makes one: they share the process's clients.
        let mut config = json::config(&json!({"base_url": format!("https://127.0.0.1:{port}")}));
        config.transport = Arc::new(TransportOptions {
            verify: Verify::Bundle(CA_PEM.into()),
            ..TransportOptions::default()
        });
        let env = CallEnv::new(
            Arc::new(SystemClock),
            Arc::new(TokioSleeper),
            io.transport(),
        );
        let client = HttpClient::new(config, Caps::default(), env);
        let req = client
            .prepare("GET", "/hook", json::request(&json!({})))
            .unwrap();
        let out = io.drive(
            client.call(client.env().clone(), req, None),
            None,
            None,
            |_| true,
        );
        let response = out.done().unwrap().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(response.status(), 200);
    }
    // The servers' threads read the closes as they get to them: wait for up to 10 s.
    let until = Instant::now() + Duration::from_secs(10);
    while open.load(Ordering::SeqCst) > HELD_AT_MOST && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    let still_open = open.load(Ordering::SeqCst);
    let held = open_fds().saturating_sub(before);
    eprintln!("after {ORIGINS} origins: {still_open} connections open, {held} more descriptors");
    assert!(
        still_open <= HELD_AT_MOST,
        "{still_open} connections still open at the servers after calling {ORIGINS} origins"
    );
    // Both ends of each connection are this process's: the client's end and the server's.
    assert!(
        held <= 2 * HELD_AT_MOST,
        "{held} more descriptors open after calling {ORIGINS} origins"
    );
}
