//! The lean transport for plain `http://`: hyper's HTTP/1.1 connection API, driven inline.
//!
//! Why: for loopback and in-cluster upstreams the per-request cost of a general client (tower
//! layers, proxy matching, a pool keyed by hashing, a connection task woken across tasks) is a
//! large share of the total. Here a connection is a `(SendRequest, Connection)` pair polled *in
//! the caller's own future*: no spawned task, no cross-task wake-ups. Between calls the pair sits
//! in a small per-process pool (keep-alive reuse); nobody polls it then, which is fine for an
//! idle HTTP/1.1 connection.
//!
//! Reuse is safe against servers that closed an idle connection: before reusing, a
//! non-blocking `recv(MSG_PEEK)` on the socket tells EOF or stray bytes (discard) from "still
//! open, nothing to read" (reuse). The pool's bounds (age, per host, in all) are
//! [`IdlePool`]'s.
//! Like the reqwest transport it never retries and never follows redirects; the attempt timeout
//! covers connect + send + the whole body. `https://`, proxies (an explicit `proxy` or an
//! `HTTP_PROXY`-style variable), TLS options and multipart bodies go to the reqwest transport.

use std::future::Future;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Body as _;
use hyper::client::conn::http1::{self, Connection, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::body_memory::BodyLimit;
use crate::clock::BoxFuture;
use crate::idle_pool::IdlePool;
use crate::request::PreparedRequest;
use crate::reqwest_transport::ReqwestTransport;
use crate::response_body::{header_list, ResponseBody};
use crate::transport::{AttemptLimits, FailureKind, RawResponse, Transport, TransportError};
use crate::transport_options::BodyTarget;

/// Response headers accepted (hyper's default, 100, refuses ordinary responses of some APIs
/// and CDNs). Their total size stays bounded by hyper's read buffer (about 400 KB).
pub const MAX_RESPONSE_HEADERS: usize = 1000;

type Conn = Connection<TokioIo<TcpStream>, Full<Bytes>>;

/// One open connection.
struct Http1Conn {
    sender: SendRequest<Full<Bytes>>,
    conn: Conn,
    fd: RawFd,
}

/// Plain-HTTP/1.1 transport with inline-driven keep-alive connections; https via reqwest.
pub struct Http1Transport {
    idle: Arc<Mutex<IdlePool<Http1Conn>>>,
    fallback: Arc<ReqwestTransport>,
    /// A proxy is configured in the environment: everything goes through reqwest, which honours it.
    proxied: bool,
}

impl Http1Transport {
    pub fn new(fallback: Arc<ReqwestTransport>) -> Self {
        Self {
            idle: Arc::default(),
            fallback,
            proxied: crate::reqwest_transport::proxy_configured(),
        }
    }

    /// Idle connections kept now (all hosts).
    pub fn idle_connections(&self) -> usize {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl Transport for Http1Transport {
    fn is_warm(&self, request: &PreparedRequest) -> bool {
        self.fallback.is_warm(request)
    }

    fn send(
        &self,
        request: &PreparedRequest,
        limits: AttemptLimits,
    ) -> BoxFuture<'static, Result<RawResponse, TransportError>> {
        let url = &request.url;
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            return self.fallback.send(request, limits);
        };
        // reqwest handles what this lean path does not: TLS, proxies, credentials in the URL
        // (sent as Basic auth) and bracketed IPv6 literals.
        let has_credentials = !url.username().is_empty() || url.password().is_some();
        let plain = request.transport.needs_only_defaults() && request.multipart.is_none();
        if url.scheme() != "http"
            || self.proxied
            || !plain
            || has_credentials
            || host.starts_with('[')
        {
            return self.fallback.send(request, limits);
        }
        let authority = match url.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.to_string(),
        };
        let key = format!("{host}:{port}");
        let target = match url.query() {
            Some(q) => format!("{}?{}", url.path(), q),
            None => url.path().to_string(),
        };
        let mut builder = hyper::Request::builder()
            .method(request.method.clone())
            .uri(target);
        // None when the builder already failed: a target the `http` crate refuses (longer than
        // 65,534 bytes, from a redirect's `Location`); reqwest says so as a transport error.
        let Some(headers) = builder.headers_mut() else {
            return self.fallback.send(request, limits);
        };
        *headers = request.headers.clone();
        if !headers.contains_key(hyper::header::HOST) {
            match hyper::header::HeaderValue::from_str(&authority) {
                Ok(v) => {
                    headers.insert(hyper::header::HOST, v);
                }
                Err(_) => return self.fallback.send(request, limits),
            }
        }
        let body = Full::new(request.body.clone().map(Bytes::from).unwrap_or_default());
        let http_request = match builder.body(body) {
            Ok(r) => r,
            Err(_) => return self.fallback.send(request, limits),
        };
        let reused =
            self.idle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take(&key, Instant::now(), |c| {
                    !c.sender.is_closed() && socket_is_quiet(c.fd)
                });
        let pool = self.idle.clone();
        let dial = (host.to_string(), port);
        let target = request.body_target.for_attempt(limits.timeout);
        // The connect phase ends at `connect_timeout`, never after the attempt's timeout: when
        // the two are one, the attempt's timeout is what ran out.
        let out_of_time = if limits.connect_timeout < limits.timeout {
            FailureKind::Connect
        } else {
            FailureKind::Timeout
        };
        Box::pin(async move {
            let exchange = exchange(
                pool,
                key,
                dial,
                reused,
                http_request,
                (limits.connect_timeout, out_of_time),
                (target, limits.body, limits.follows_redirects),
            );
            match tokio::time::timeout(limits.timeout, exchange).await {
                Ok(result) => result,
                Err(_) => Err(TransportError::new(
                    FailureKind::Timeout,
                    "the attempt timed out",
                )),
            }
        })
    }
}

/// True when the socket has nothing to read and is not at EOF: an idle keep-alive connection
/// the server has not closed.
fn socket_is_quiet(fd: RawFd) -> bool {
    let mut byte = 0u8;
    // SAFETY: `fd` belongs to a live TcpStream owned by the connection we are checking; a 1-byte
    // peek never consumes data.
    let n = unsafe {
        libc::recv(
            fd,
            (&raw mut byte).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n < 0
        && matches!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::EAGAIN)
        )
}

/// Opens a connection to `host:port` within `limit`, the name resolved first (within it too).
/// Running out of time is an `out_of_time` failure: [`FailureKind::Connect`] when `limit` is
/// `connect_timeout`, [`FailureKind::Timeout`] when it is the attempt's own timeout (or the
/// deadline's remainder), as reqwest's transport says it.
async fn connect(
    host: &str,
    port: u16,
    limit: Duration,
    out_of_time: FailureKind,
) -> Result<Http1Conn, TransportError> {
    let deadline = tokio::time::Instant::now() + limit;
    let addrs: Vec<SocketAddr> =
        match tokio::time::timeout_at(deadline, crate::lookup::lookup(host, port)).await {
            Ok(Ok(addrs)) => addrs,
            Ok(Err(e)) => {
                return Err(TransportError::new(
                    FailureKind::of_connect(&e),
                    format!("tcp connect error: {e}"),
                ))
            }
            Err(_) => return Err(timed_out(out_of_time)),
        };
    let stream = open(&addrs, deadline, out_of_time).await?;
    let _ = stream.set_nodelay(true);
    let fd = stream.as_raw_fd();
    let (sender, conn) = http1::Builder::new()
        .max_headers(MAX_RESPONSE_HEADERS)
        // `Content-Type`, not `content-type`, as curl and Guzzle send: some servers match
        // names case-sensitively (hyper keeps no case given; reqwest's transport does the same).
        .title_case_headers(true)
        .handshake(TokioIo::new(stream))
        .await
        .map_err(|e| TransportError::new(FailureKind::Connect, format!("handshake error: {e}")))?;
    Ok(Http1Conn { sender, conn, fd })
}

/// A TCP connection to the first of `addrs` that accepts by `deadline`. They are tried in
/// turn, each given an equal share of the time left (as hyper-util's `HttpConnector` does),
/// so an address that drops SYNs does not take the whole connect timeout from the next
/// one, which may be up. The last address's failure is the one reported.
async fn open(
    addrs: &[SocketAddr],
    deadline: tokio::time::Instant,
    out_of_time: FailureKind,
) -> Result<TcpStream, TransportError> {
    let mut failure = TransportError::new(
        FailureKind::Connect,
        "tcp connect error: the name has no address",
    );
    for (tried, addr) in addrs.iter().enumerate() {
        let left = u32::try_from(addrs.len() - tried).unwrap_or(u32::MAX);
        let share = deadline.saturating_duration_since(tokio::time::Instant::now()) / left;
        failure = match tokio::time::timeout(share, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(e)) => TransportError::new(
                FailureKind::of_connect(&e),
                format!("tcp connect error: {e}"),
            ),
            Err(_) => timed_out(out_of_time),
        };
    }
    Err(failure)
}

/// A connect that ran out of time, in the words of the limit that ran out.
fn timed_out(kind: FailureKind) -> TransportError {
    match kind {
        FailureKind::Timeout => TransportError::new(kind, "the attempt timed out"),
        _ => TransportError::new(FailureKind::Connect, "connect timed out"),
    }
}

/// Sends one request on a (reused or new) connection, polling the connection inline, and puts
/// the connection back for reuse when it is still good. The body is read within `max_body`;
/// on any error (over the limit included) the connection is dropped, i.e. closed.
async fn exchange(
    pool: Arc<Mutex<IdlePool<Http1Conn>>>,
    key: String,
    dial: (String, u16),
    reused: Option<Http1Conn>,
    request: hyper::Request<Full<Bytes>>,
    (connect_limit, out_of_time): (Duration, FailureKind),
    (target, body_limit, follows_redirects): (BodyTarget, BodyLimit, bool),
) -> Result<RawResponse, TransportError> {
    let mut c = match reused {
        Some(c) => c,
        None => connect(&dial.0, dial.1, connect_limit, out_of_time).await?,
    };
    let response = c.sender.send_request(request);
    let work = async move {
        let response = response.await.map_err(map_hyper_error)?;
        let (parts, mut body) = response.into_parts();
        let mut headers = header_list(&parts.headers);
        let target = crate::redirect::body_target_for(
            &target,
            parts.status.as_u16(),
            &headers,
            follows_redirects,
        );
        let status = parts.status.as_u16();
        let mut received =
            ResponseBody::start(&target, &mut headers, body.size_hint().exact(), body_limit)
                .map_err(|e| e.answered(status, &headers))?;
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame.map_err(map_body_error)?.into_data() {
                received
                    .push(&data)
                    .map_err(|e| e.answered(status, &headers))?;
            }
        }
        let body = received
            .finish()
            .map_err(|e| e.answered(status, &headers))?;
        Ok::<_, TransportError>((parts.status, headers, body))
    };
    let mut work = std::pin::pin!(work);
    let mut conn_done = false;
    let result = std::future::poll_fn(|cx| {
        if !conn_done && Pin::new(&mut c.conn).poll(cx).is_ready() {
            conn_done = true;
        }
        work.as_mut().poll(cx)
    })
    .await;
    let (status, headers, body) = result?;
    // Let the connection settle into idle; keep it if it is ready for another request.
    if !conn_done {
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        conn_done = Pin::new(&mut c.conn).poll(&mut cx).is_ready();
    }
    if !conn_done && c.sender.is_ready() {
        let mut pool = pool.lock().unwrap_or_else(|e| e.into_inner());
        pool.put(key, c, Instant::now());
    }
    Ok(RawResponse {
        status: status.as_u16(),
        headers,
        body,
    })
}

/// A body that could not be read to its end after the answer's head came (cut short, reset,
/// malformed chunking) is a `body` failure, as reqwest's transport says it.
fn map_body_error(e: hyper::Error) -> TransportError {
    let mut error = map_hyper_error(e);
    if error.kind != FailureKind::Timeout {
        error.kind = FailureKind::Body;
    }
    error
}

fn map_hyper_error(e: hyper::Error) -> TransportError {
    let kind = if e.is_timeout() {
        FailureKind::Timeout
    } else if e.is_body_write_aborted() || e.is_parse() || e.is_parse_status() || e.is_user() {
        FailureKind::Other
    } else {
        // Closed, reset, incomplete message, canceled: the connection went away.
        FailureKind::Closed
    };
    let mut detail = e.to_string();
    if let Some(cause) = std::error::Error::source(&e) {
        detail = format!("{detail}: {cause}");
    }
    TransportError::new(kind, detail)
}

#[allow(dead_code)]
fn _assert_send() {
    fn is_send<T: Send>() {}
    is_send::<Http1Conn>();
    let _ = Poll::<()>::Pending;
}

/// The integration tests' address that drops SYNs, for the unit tests of `open`.
#[cfg(test)]
#[path = "../tests/support/blackhole.rs"]
mod blackhole;

#[cfg(test)]
mod tests {
    use super::blackhole::Blackhole;
    use super::*;
    use std::net::TcpListener;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// A name whose first address is down (SYNs dropped) and whose second is up: the second
    /// is reached within the connect timeout, after the first had its share of it.
    #[test]
    fn a_dead_first_address_leaves_time_for_the_next() {
        let hole = Blackhole::new();
        let live = TcpListener::bind("127.0.0.1:0").unwrap();
        let limit = Duration::from_millis(1000);
        let started = std::time::Instant::now();
        let stream = runtime()
            .block_on(open(
                &[hole.addr, live.local_addr().unwrap()],
                tokio::time::Instant::now() + limit,
                FailureKind::Connect,
            ))
            .unwrap_or_else(|e| panic!("{e}"));
        let took = started.elapsed();
        assert_eq!(stream.peer_addr().unwrap(), live.local_addr().unwrap());
        assert!(took >= limit / 2 && took < limit, "{took:?}");
    }

    /// A refused address costs nothing of the next one's time.
    #[test]
    fn a_refused_first_address_is_passed_at_once() {
        let refused = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let live = TcpListener::bind("127.0.0.1:0").unwrap();
        let started = std::time::Instant::now();
        let stream = runtime()
            .block_on(open(
                &[refused, live.local_addr().unwrap()],
                tokio::time::Instant::now() + Duration::from_secs(2),
                FailureKind::Connect,
            ))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(stream.peer_addr().unwrap(), live.local_addr().unwrap());
        assert!(started.elapsed() < Duration::from_millis(500));
    }
}
