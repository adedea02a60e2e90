//! The accept loop, the router, and [`Upstream`]: a server on its own thread for tests.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::http::{Request, StatusCode};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::body::{self, HandlerResult};
use crate::sim::SimConfig;
use crate::{control, mock, sim, App};

/// Key used for requests outside `/k/{key}`, `/sim`, `/bench` and `/__control`.
pub const DEFAULT_KEY: &str = "default";

/// The serial number of the TCP connection a request came on (in its extensions), so the
/// records tell a kept-alive connection from a new one.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionId(pub u64);

static NEXT_CONNECTION: AtomicU64 = AtomicU64::new(1);

/// How long a connection may take to send a request's headers, counted from its opening or
/// from the end of the previous answer on it (so it is also the longest idle keep-alive): a
/// client that stalls or never sends is disconnected instead of holding its connection
/// forever. A minute is longer than any pause the lab's and the tests' clients make between
/// two requests on one connection.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(60);

/// Accepts connections until `shutdown` completes, with the [`HEADER_READ_TIMEOUT`].
pub async fn serve(listener: TcpListener, app: Arc<App>, shutdown: impl Future<Output = ()>) {
    serve_with(listener, app, HEADER_READ_TIMEOUT, shutdown).await
}

/// Accepts connections until `shutdown` completes. Each connection is served (keep-alive) on
/// its own task and closed when it does not send a request's headers within
/// `header_read_timeout`; connections still open when this returns end when the runtime does.
pub async fn serve_with(
    listener: TcpListener,
    app: Arc<App>,
    header_read_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let app = app.clone();
                    let connection = ConnectionId(NEXT_CONNECTION.fetch_add(1, Ordering::Relaxed));
                    tokio::spawn(async move {
                        let service = service_fn(move |mut req: Request<Incoming>| {
                            req.extensions_mut().insert(connection);
                            route(app.clone(), req)
                        });
                        // Errors here are client disconnects or our own scripted closes.
                        let _ = http1::Builder::new()
                            .keep_alive(true)
                            .timer(TokioTimer::new())
                            .header_read_timeout(header_read_timeout)
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
                // Out of file descriptors and the like: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    }
}

/// Sends a request to the part of the server its path names.
pub async fn route(app: Arc<App>, req: Request<Incoming>) -> HandlerResult {
    let path = req.uri().path().to_string();
    if let Some(sub) = path.strip_prefix("/__control") {
        if sub.is_empty() || sub.starts_with('/') {
            return control::handle(app, sub, req).await;
        }
    }
    if path == "/sim" || path.starts_with("/sim/") {
        return sim::handle(app, req).await;
    }
    if path == "/bench" || path.starts_with("/bench/") {
        // Not recorded: for throughput benchmarks that would otherwise fill the attempts log.
        return Ok(body::with_type(
            StatusCode::OK,
            "application/json",
            &b"{\"ok\":true}"[..],
        ));
    }
    if let Some(rest) = path.strip_prefix("/k/") {
        let (key, tail) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if key.is_empty() {
            return Ok(body::error(
                StatusCode::BAD_REQUEST,
                "empty key in /k/{key}/...",
            ));
        }
        let (key, tail) = (key.to_string(), tail.to_string());
        return mock::handle(app, key, tail, req).await;
    }
    mock::handle(app, DEFAULT_KEY.to_string(), path, req).await
}

/// A server on 127.0.0.1 (a free port) running on its own thread and runtime, for tests in
/// any crate: `let up = Upstream::start()?; client.get(up.key_url("mytest") + "/quote")`.
/// Dropping it stops the server and closes every connection.
pub struct Upstream {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Upstream {
    /// Starts with the default simulator settings.
    pub fn start() -> io::Result<Upstream> {
        Upstream::start_with(SimConfig::default())
    }

    pub fn start_with(sim: SimConfig) -> io::Result<Upstream> {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("upstream-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(async move {
                    match TcpListener::from_std(std_listener) {
                        Ok(listener) => {
                            serve(listener, Arc::new(App::new(sim)), async move {
                                let _ = stopped.await;
                            })
                            .await
                        }
                        Err(e) => eprintln!("resilient-upstream: {e}"),
                    }
                });
                runtime.shutdown_timeout(Duration::from_secs(1));
            })?;
        Ok(Upstream {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// The base URL of a mock key: `http://127.0.0.1:PORT/k/{key}`.
    pub fn key_url(&self, key: &str) -> String {
        self.url(&format!("/k/{key}"))
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
