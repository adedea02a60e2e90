//! An HTTP/2 upstream over TLS on loopback, as an https API is: hyper serves HTTP/2 in
//! cleartext, behind a TLS front (rustls, ALPN `h2`) on threads of its own. Counts the
//! requests it answered. Its certificate (tls/server.pem, for 127.0.0.1 and localhost, valid
//! 2000 to 2100) is signed by tls/ca.pem.
#![allow(dead_code)]

use std::convert::Infallible;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::accept_loop;

/// The CA that signed the server's certificate (`verify`).
pub const CA_PEM: &[u8] = include_bytes!("tls/ca.pem");
const SERVER_PEM: &[u8] = include_bytes!("tls/server.pem");
const SERVER_KEY: &[u8] = include_bytes!("tls/server.key");

pub struct H2Server {
    pub port: u16,
    answered: Arc<AtomicUsize>,
}

impl H2Server {
    /// Answers every request `200 ok`.
    pub fn start() -> Self {
        let answered = Arc::new(AtomicUsize::new(0));
        let backend = serve_h2c(answered.clone());
        let port = tls_front(backend);
        Self { port, answered }
    }

    /// Requests answered so far.
    pub fn answered(&self) -> usize {
        self.answered.load(Ordering::SeqCst)
    }
}

/// HTTP/2 in cleartext on a port of its own, on a runtime of its own.
fn serve_h2c(answered: Arc<AtomicUsize>) -> u16 {
    accept_loop::spawn(move |stream| {
        let answered = answered.clone();
        async move {
            let service = hyper::service::service_fn(move |_request| {
                answered.fetch_add(1, Ordering::SeqCst);
                async { Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from("ok")))) }
            });
            let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        }
    })
    .port()
}

/// Terminates TLS on a port of its own and passes the cleartext to `backend`, one thread per
/// connection.
fn tls_front(backend: u16) -> u16 {
    let certs = CertificateDer::pem_slice_iter(SERVER_PEM)
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(SERVER_KEY).unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let config = config.clone();
            std::thread::spawn(move || {
                let _ = bridge(client, config, backend);
            });
        }
    });
    port
}

/// Moves bytes between the TLS client and the cleartext backend until either side ends.
fn bridge(
    mut client: TcpStream,
    config: Arc<rustls::ServerConfig>,
    backend: u16,
) -> std::io::Result<()> {
    let mut tls = rustls::ServerConnection::new(config).map_err(std::io::Error::other)?;
    let mut plain = TcpStream::connect(("127.0.0.1", backend))?;
    client.set_nonblocking(true)?;
    plain.set_nonblocking(true)?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut to_backend = Vec::new();
    loop {
        let mut moved = false;
        match tls.read_tls(&mut client) {
            Ok(0) => return Ok(()),
            Ok(_) => {
                moved = true;
                tls.process_new_packets().map_err(std::io::Error::other)?;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        loop {
            match tls.reader().read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => to_backend.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        if !to_backend.is_empty() {
            match plain.write(&to_backend) {
                Ok(n) => {
                    moved = true;
                    to_backend.drain(..n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        match plain.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                moved = true;
                tls.writer().write_all(&buf[..n])?;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        while tls.wants_write() {
            match tls.write_tls(&mut client) {
                Ok(_) => moved = true,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        if !moved {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
