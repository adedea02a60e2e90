//! The production transport: reqwest (rustls) on the process's tokio runtime.
//!
//! - One set of clients per process, kept alive between calls, so connections are reused
//!   (keep-alive) within a process. Never created before it is needed (FPM forks after MINIT).
//! - reqwest's connect timeout is a client setting, so clients are cached by connect timeout in
//!   milliseconds (a handful of distinct values per process in practice; the cache is bounded).
//!   The per-attempt connect limit is `min(connect_timeout, attempt timeout)`: the cached
//!   client bounds the connect phase by the configured value, and one tokio timer around the
//!   whole exchange (connect + send + full body) bounds everything by the attempt timeout.
//! - No redirects are followed (a 3xx is the caller's answer) and reqwest's own retry policy
//!   is off (`retry::never()`), so the attempt loop stays the single retry owner. (hyper's pool
//!   may resend a request whose pooled connection turned out closed *before the request was
//!   written*; such a request never reached the upstream.)
//! - Errors are reported without the URL (`without_url`), so query secrets cannot leak.

use std::sync::Mutex;
use std::time::Duration;

use crate::body_limit::BodyBuffer;
use crate::clock::BoxFuture;
use crate::request::PreparedRequest;
use crate::transport::{AttemptLimits, FailureKind, RawResponse, Transport, TransportError};

/// Distinct connect timeouts kept; beyond this the least recently added client is dropped.
const MAX_CLIENTS: usize = 16;

/// reqwest clients keyed by connect timeout.
#[derive(Default)]
pub struct ReqwestTransport {
    clients: Mutex<Vec<(u64, reqwest::Client)>>,
}

impl ReqwestTransport {
    pub fn new() -> Self {
        Self::default()
    }

    /// The client for a connect timeout (created on first use).
    pub fn client(&self, connect_timeout: Duration) -> Result<reqwest::Client, TransportError> {
        let key = connect_timeout.as_millis().clamp(1, u64::MAX as u128) as u64;
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, client)) = clients.iter().find(|(k, _)| *k == key) {
            return Ok(client.clone());
        }
        let mut builder = reqwest::Client::builder();
        if !proxy_configured() {
            // Nothing to honour: skip the per-request proxy matching.
            builder = builder.no_proxy();
        }
        let client = builder
            .connect_timeout(Duration::from_millis(key))
            .redirect(reqwest::redirect::Policy::none())
            .retry(reqwest::retry::never())
            .pool_idle_timeout(Duration::from_secs(60))
            .tcp_nodelay(true)
            .build()
            .map_err(|e| {
                TransportError::new(
                    FailureKind::Other,
                    format!("cannot build the HTTP client: {}", e.without_url()),
                )
            })?;
        if clients.len() >= MAX_CLIENTS {
            clients.remove(0);
        }
        clients.push((key, client.clone()));
        Ok(client)
    }
}

impl Transport for ReqwestTransport {
    fn send(
        &self,
        request: &PreparedRequest,
        limits: AttemptLimits,
    ) -> BoxFuture<'static, Result<RawResponse, TransportError>> {
        let client = match self.client(limits.connect_timeout) {
            Ok(client) => client,
            Err(e) => return Box::pin(async move { Err(e) }),
        };
        // The attempt timeout is enforced below, around the whole exchange (connect, send, body):
        // one timer per attempt.
        let mut builder = client
            .request(request.method.clone(), request.url.clone())
            .headers(request.headers.clone());
        if let Some(body) = &request.body {
            builder = builder.body(body.clone());
        }
        let timeout = limits.timeout;
        let max_body = limits.max_body;
        Box::pin(async move {
            let exchange = async move {
                let mut response = builder.send().await.map_err(map_error)?;
                let status = response.status().as_u16();
                let headers = response
                    .headers()
                    .iter()
                    .map(|(n, v)| (n.as_str().to_owned(), v.as_bytes().to_vec()))
                    .collect();
                // Chunk by chunk within max_body; on error `response` is dropped, which closes
                // the connection instead of returning it to the pool.
                let mut buffer = BodyBuffer::new(response.content_length(), max_body)?;
                while let Some(chunk) = response.chunk().await.map_err(map_error)? {
                    buffer.push(&chunk)?;
                }
                let body = buffer.into_vec();
                Ok(RawResponse {
                    status,
                    headers,
                    body,
                })
            };
            match tokio::time::timeout(timeout, exchange).await {
                Ok(result) => result,
                Err(_) => Err(TransportError::new(
                    FailureKind::Timeout,
                    "the attempt timed out",
                )),
            }
        })
    }
}

/// Whether the environment names a proxy (reqwest honours `HTTP(S)_PROXY` / `ALL_PROXY`, as curl
/// does; without one, matching every request against the proxy rules is wasted work).
pub(crate) fn proxy_configured() -> bool {
    [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()))
}

/// Maps a reqwest error to a failure kind and a URL-free detail.
fn map_error(error: reqwest::Error) -> TransportError {
    let kind = if error.is_timeout() {
        FailureKind::Timeout
    } else if error.is_connect() {
        FailureKind::Connect
    } else if error.is_body() || error.is_decode() {
        FailureKind::Body
    } else if error.is_request() {
        FailureKind::Closed
    } else {
        FailureKind::Other
    };
    // The innermost cause says most ("connection refused", "connection closed before message
    // completed"); none of the causes carry the URL.
    let error = error.without_url();
    let mut detail = error.to_string();
    let mut source = std::error::Error::source(&error);
    let mut innermost = None;
    while let Some(cause) = source {
        innermost = Some(cause.to_string());
        source = cause.source();
    }
    if let Some(cause) = innermost {
        if !detail.contains(&cause) {
            detail = format!("{detail}: {cause}");
        }
    }
    TransportError::new(kind, detail)
}
