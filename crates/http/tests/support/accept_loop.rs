//! A test server's accept loop on a loopback port of its own, run on a current-thread runtime
//! of its own thread (the test's runtime may be paused or gone).

use std::future::Future;
use std::net::SocketAddr;

/// Binds a free loopback port and calls `serve` with each accepted connection, each on a task
/// of its own; returns the address.
pub fn spawn<F, Fut>(serve: F) -> SocketAddr
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((stream, _)) = listener.accept().await {
                tokio::task::spawn_local(serve(stream));
            }
        });
    });
    addr
}
