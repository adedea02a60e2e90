//! A long-running process that calls many hosts once each (a queue worker delivering its
//! customers' webhooks) must not keep a connection, and its file descriptor, to every one of
//! them: the plain-HTTP pool kept each host's idle connection for the life of the process, so
//! after about a thousand hosts every `connect` and every `fopen` failed with "Too many open
//! files". Its own binary: the process's pool holds only this test's connections.

#[path = "support/drive.rs"]
mod drive;
#[path = "support/json.rs"]
mod json;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use resilient_http::{process_io, CallEnv, Caps, HttpClient, SystemClock, TokioSleeper};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Hosts called: more than the pool keeps in all (256), and few enough that this process's
/// descriptors (listeners, both ends of each connection) stay under a soft limit of 1024.
const HOSTS: usize = 300;

/// `n` keep-alive HTTP/1.1 servers on loopback, on a thread of their own; returns their ports
/// and how many of their connections are open (a connection the client closed ends here).
fn serve(n: usize) -> (Vec<u16>, Arc<AtomicUsize>) {
    let open = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = std::sync::mpsc::channel();
    let counter = open.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let mut ports = Vec::new();
            for _ in 0..n {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                ports.push(listener.local_addr().unwrap().port());
                let open = counter.clone();
                tokio::spawn(async move {
                    while let Ok((mut socket, _)) = listener.accept().await {
                        let open = open.clone();
                        open.fetch_add(1, Ordering::SeqCst);
                        tokio::spawn(async move {
                            let mut buf = Vec::new();
                            let mut chunk = [0u8; 4096];
                            while let Ok(read) = socket.read(&mut chunk).await {
                                if read == 0 {
                                    break;
                                }
                                buf.extend_from_slice(&chunk[..read]);
                                while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n")
                                {
                                    buf.drain(..end + 4);
                                    let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                                    if socket.write_all(answer).await.is_err() {
                                        break;
                                    }
                                }
                            }
                            open.fetch_sub(1, Ordering::SeqCst);
                        });
                    }
                });
            }
            tx.send(ports).unwrap();
            std::future::pending::<()>().await;
        });
    });
    (rx.recv().unwrap(), open)
}

#[test]
fn idle_connections_to_many_hosts_stay_bounded() {
    let (ports, open) = serve(HOSTS);
    let io = process_io().unwrap();
    let env = CallEnv::new(
        Arc::new(SystemClock),
        Arc::new(TokioSleeper),
        io.transport(),
    );
    let client = HttpClient::new(json::config(&json!({})), Caps::default(), env);
    for port in &ports {
        let url = format!("http://127.0.0.1:{port}/hook");
        let response = drive::call(io, &client, "GET", &url, &json!({})).unwrap();
        assert_eq!(response.status(), 200);
    }
    let kept = io.idle_connections();
    assert!(
        kept <= 256,
        "{kept} idle connections kept for {HOSTS} hosts"
    );
    // The others were closed, not merely forgotten: the servers saw them end (waited for up to
    // 10 s: the servers' thread reads the closes as it gets to them).
    let until = Instant::now() + Duration::from_secs(10);
    while open.load(Ordering::SeqCst) > kept && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    let still_open = open.load(Ordering::SeqCst);
    assert!(
        still_open <= kept,
        "{still_open} connections still open at the servers, {kept} kept idle"
    );
}
