//! HTTP/1.1 upstreams over TLS on loopback (no ALPN: HTTP/1.1 only, as many https APIs
//! behind older proxies are), counting their open connections. Their certificate
//! (tls/server.pem, for 127.0.0.1 and localhost) is signed by tls/ca.pem.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use resilient_http::{
    CallEnv, Caps, HttpClient, ProcessIo, SystemClock, TokioSleeper, TransportOptions, Verify,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::json;

/// The servers' connections.
#[derive(Default)]
pub struct Connections {
    /// Open now (one the client closed ends here, once its thread reads the close).
    pub open: AtomicUsize,
    /// Accepted in all.
    pub accepted: AtomicUsize,
    /// Requests answered in all.
    pub answered: AtomicUsize,
}

pub const CA_PEM: &[u8] = include_bytes!("tls/ca.pem");
const SERVER_PEM: &[u8] = include_bytes!("tls/server.pem");
const SERVER_KEY: &[u8] = include_bytes!("tls/server.key");

/// The servers' TLS: their certificate, no ALPN (HTTP/1.1 only).
fn server_config() -> Arc<rustls::ServerConfig> {
    let certs = CertificateDer::pem_slice_iter(SERVER_PEM)
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(SERVER_KEY).unwrap();
    Arc::new(
        rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap(),
    )
}

/// `n` HTTP/1.1-over-TLS servers on loopback ports of their own (a blocking thread per
/// connection), each answer `delay` after its request; returns their ports and their
/// connections' count.
pub fn serve(n: usize, delay: Duration) -> (Vec<u16>, Arc<Connections>) {
    serve_with(n, delay, None)
}

/// A server as [`serve`]'s that closes each connection `idle` after its first answer, without
/// `Connection: close` (a server whose keep-alive timeout is short: Node's 5 s, a load
/// balancer's idle timeout), the socket alone, no TLS close_notify first (as most servers
/// close an idle connection).
pub fn serve_closing_idle(idle: Duration) -> (u16, Arc<Connections>) {
    let (ports, connections) = serve_with(1, Duration::ZERO, Some(idle));
    (ports[0], connections)
}

fn serve_with(
    n: usize,
    delay: Duration,
    close_idle: Option<Duration>,
) -> (Vec<u16>, Arc<Connections>) {
    let config = server_config();
    let open = Arc::new(Connections::default());
    let mut ports = Vec::new();
    for _ in 0..n {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        ports.push(listener.local_addr().unwrap().port());
        let (config, open) = (config.clone(), open.clone());
        std::thread::spawn(move || {
            for socket in listener.incoming().flatten() {
                let (config, open) = (config.clone(), open.clone());
                open.accepted.fetch_add(1, Ordering::SeqCst);
                open.open.fetch_add(1, Ordering::SeqCst);
                // Else each answer waits for the client's delayed ACK (40 ms).
                socket.set_nodelay(true).unwrap();
                std::thread::spawn(move || {
                    let tls = rustls::ServerConnection::new(config).unwrap();
                    let mut stream = rustls::StreamOwned::new(tls, socket);
                    answer_requests(&mut stream, delay, close_idle, &open.answered);
                    open.open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
    }
    (ports, open)
}

/// Answers `ok` to each request read from `stream` (its body, as its Content-Length says,
/// read first), `delay` after it; with `close_idle`, returns that long after the first
/// answer.
fn answer_requests(
    stream: &mut (impl Read + Write),
    delay: Duration,
    close_idle: Option<Duration>,
    answered: &AtomicUsize,
) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while let Ok(read) = stream.read(&mut chunk) {
        if read == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..read]);
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if buf.len() < end + 4 + length {
                break;
            }
            buf.drain(..end + 4 + length);
            std::thread::sleep(delay);
            answered.fetch_add(1, Ordering::SeqCst);
            let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
            if stream
                .write_all(answer)
                .and_then(|_| stream.flush())
                .is_err()
            {
                return;
            }
            if let Some(idle) = close_idle {
                std::thread::sleep(idle);
                return;
            }
        }
    }
}

/// A client of `https://127.0.0.1:{port}` that trusts these servers' certificate, calling
/// through `io` (a PHP script's `new Client`: every such client shares the process's
/// connections).
pub fn client(io: &ProcessIo, port: u16) -> HttpClient {
    let mut config = crate::json::config(&json!({"base_url": format!("https://127.0.0.1:{port}")}));
    config.transport = Arc::new(TransportOptions {
        verify: Verify::Bundle(CA_PEM.into()),
        ..TransportOptions::default()
    });
    let env = CallEnv::new(
        Arc::new(SystemClock),
        Arc::new(TokioSleeper),
        io.transport(),
    );
    HttpClient::new(config, Caps::default(), env)
}
