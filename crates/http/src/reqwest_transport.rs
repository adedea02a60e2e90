//! The production transport: reqwest (rustls) on the process's tokio runtime.
//!
//! - One set of clients per process, kept alive between calls, so connections are reused
//!   (keep-alive) within a process. Never created before it is needed (FPM forks after MINIT).
//! - reqwest's connect timeout, TLS settings and proxy are client settings, so clients are cached
//!   by connect timeout in milliseconds and [`TransportOptions::fingerprint`] (a handful per
//!   process in practice; the cache is bounded: [`ClientCache`], and so are the origins its
//!   shared clients keep connections to). HTTP/2 is offered by ALPN
//!   over TLS, so a pool against an HTTP/2 server multiplexes on one connection.
//!   The per-attempt connect limit is `min(connect_timeout, attempt timeout)`: the client
//!   bounds the connect phase by the configured value ([`AttemptLimits::connect_timeout_setting`])
//!   and one tokio timer around the whole exchange (connect + send + full body) bounds
//!   everything by the attempt timeout. The limit a deadline cut (different on nearly every
//!   call) is never a cache key: keyed by it, every call under a deadline built a client of its
//!   own, and so a new connection and TLS handshake.
//! - A silently dead HTTP/2 connection (no FIN, no RST) is left behind: every connection is
//!   pinged when it received nothing for a while and closed when the ping goes unanswered, and
//!   an attempt that timed out on an origin that speaks HTTP/2 moves the origin to a new client
//!   (a new connection) at once: otherwise every later request to it would go down the same
//!   connection.
//! - reqwest follows no redirect itself (`crate::redirect` does, when asked, over any
//!   transport) and sends nothing again on its own, except what the server provably never
//!   processed: a request whose pooled connection turned out closed before it was written
//!   (hyper's pool), and an HTTP/2 stream the server refused (`REFUSED_STREAM`) or that was
//!   above the last stream of its graceful `GOAWAY` (reqwest's default, protocol-level retry;
//!   RFC 9113 §8.7). Such a resend is part of the attempt, for any method: the attempt loop
//!   stays the single owner of retries of what the upstream may have seen.
//! - Errors are reported without the URL (`without_url`), so query secrets cannot leak; a TLS
//!   failure is told apart by its rustls error type ([`FailureKind::Tls`], not retried).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::client_cache::ClientCache;
use crate::clock::BoxFuture;
use crate::request::PreparedRequest;
use crate::response_body::{header_list, ResponseBody};
use crate::transport::{AttemptLimits, FailureKind, RawResponse, Transport, TransportError};
use crate::transport_options::{TransportOptions, Verify};

/// An HTTP/2 connection that received nothing for this long is sent a ping...
const H2_PING_INTERVAL: Duration = Duration::from_secs(10);
/// ...and closed when the ping is not answered within this: its path died without a word.
const H2_PING_TIMEOUT: Duration = Duration::from_secs(5);

/// What identifies an origin's connections: `scheme://host:port` and the connection options.
type Origin = (String, u64);

/// reqwest clients by connect timeout, [`TransportOptions::fingerprint`] and origin; each knows
/// the origins that answered on it, and whether over HTTP/2.
#[derive(Default)]
pub struct ReqwestTransport {
    clients: Arc<Mutex<ClientCache<reqwest::Client>>>,
}

/// The origin a request goes to.
fn origin(request: &PreparedRequest) -> Origin {
    let url = &request.url;
    (
        format!(
            "{}://{}:{}",
            url.scheme(),
            url.host_str().unwrap_or(""),
            url.port_or_known_default().unwrap_or(0)
        ),
        request.transport.fingerprint(),
    )
}

impl ReqwestTransport {
    pub fn new() -> Self {
        Self::default()
    }

    /// The client for a connect timeout, connection options and origin (created on first
    /// use), with its id in the cache.
    fn client(
        &self,
        connect_timeout: Duration,
        options: &TransportOptions,
        origin: &str,
    ) -> Result<(u64, reqwest::Client), TransportError> {
        let millis = on_the_ladder(connect_timeout);
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        clients.get(millis, options, origin, || {
            build(Duration::from_millis(millis), options).map_err(|e| {
                TransportError::new(
                    FailureKind::Request,
                    format!("cannot build the HTTP client: {}", e.without_url()),
                )
            })
        })
    }
}

/// After an attempt to `origin` on client `used` timed out: an origin that speaks HTTP/2 (or
/// has not answered yet) moves to a new client, so that its next attempt does not go down the
/// same, possibly dead, connection. It is cold again then (nothing answered on the new
/// client), so a pool opens its connection first.
fn leave_connection(clients: &Mutex<ClientCache<reqwest::Client>>, origin: &str, used: u64) {
    let mut clients = clients.lock().unwrap_or_else(|e| e.into_inner());
    if !origin.starts_with("https:") || clients.speaks_http1(used, origin) {
        return;
    }
    clients.replace(origin, used, |millis, options| {
        build(Duration::from_millis(millis), options)
    });
}

/// A connect timeout as the clients are keyed by: rounded down to a step of a ladder whose steps
/// are 10 % apart above 10 ms (exact below). A client keeps its connections, so each new
/// client opens (and for https, handshakes) anew; a per-request value that varies by the
/// millisecond (`'connect_timeout' => Deadline::cap(1.0)`) would otherwise make a client, and a
/// connection, for nearly every call. At most 10 % shorter than asked, never longer.
fn on_the_ladder(connect_timeout: Duration) -> u64 {
    const EXACT_UP_TO_MS: u64 = 10;
    let ms = connect_timeout.as_millis().clamp(1, u128::from(u64::MAX)) as u64;
    if ms <= EXACT_UP_TO_MS {
        return ms;
    }
    let step = ((ms as f64 / EXACT_UP_TO_MS as f64).ln() / 1.1f64.ln()).floor() as i32;
    let rung = (EXACT_UP_TO_MS as f64 * 1.1f64.powi(step)).ceil() as u64;
    // Floating point may land a hair above `ms`: never longer than asked.
    if rung > ms {
        (EXACT_UP_TO_MS as f64 * 1.1f64.powi(step - 1)).ceil() as u64
    } else {
        rung
    }
    .clamp(EXACT_UP_TO_MS, ms)
}

/// A reqwest client for these options: never redirecting on its own (`redirect` does), resending
/// only what the server refused unprocessed (reqwest's default retry), HTTP/2 offered by ALPN
/// over TLS and its connections pinged.
fn build(
    connect_timeout: Duration,
    options: &TransportOptions,
) -> reqwest::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .http1_title_case_headers()
        .dns_resolver(std::sync::Arc::new(crate::lookup::ThreadResolver));
    match &options.proxy {
        Some(proxy) if exempts_every_host(proxy.no.iter().map(String::as_str)) => {
            builder = builder.no_proxy();
        }
        Some(proxy) => {
            builder = builder.no_proxy();
            let no = reqwest::NoProxy::from_string(&proxy.no.join(","));
            if let Some(url) = &proxy.http {
                builder = builder.proxy(reqwest::Proxy::http(url.as_str())?.no_proxy(no.clone()));
            }
            if let Some(url) = &proxy.https {
                builder = builder.proxy(reqwest::Proxy::https(url.as_str())?.no_proxy(no));
            }
        }
        // Nothing to honour: skip the per-request proxy matching.
        None if !proxy_configured() => builder = builder.no_proxy(),
        None => {}
    }
    match &options.verify {
        Verify::System => {}
        Verify::Off => builder = builder.danger_accept_invalid_certs(true),
        Verify::Bundle(pem) => {
            builder = builder.tls_built_in_root_certs(false);
            for cert in reqwest::Certificate::from_pem_bundle(pem)? {
                builder = builder.add_root_certificate(cert);
            }
        }
    }
    if let Some(identity) = &options.identity {
        builder = builder.identity(reqwest::Identity::from_pem(identity.pem())?);
    }
    builder
        .redirect(reqwest::redirect::Policy::none())
        .http2_keep_alive_interval(H2_PING_INTERVAL)
        .http2_keep_alive_timeout(H2_PING_TIMEOUT)
        .http2_keep_alive_while_idle(true)
        .pool_idle_timeout(Duration::from_secs(60))
        // As the plain transport: after a burst of HTTP/1.1 calls to one host, the connections
        // past this close instead of each holding a descriptor here and at the upstream.
        .pool_max_idle_per_host(crate::idle_pool::MAX_IDLE_PER_HOST)
        .tcp_nodelay(true)
        .build()
}

impl Transport for ReqwestTransport {
    fn is_warm(&self, request: &PreparedRequest) -> bool {
        if request.url.scheme() != "https" {
            return true;
        }
        let (origin, fingerprint) = origin(request);
        self.clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_warm(fingerprint, &origin)
    }

    fn send(
        &self,
        request: &PreparedRequest,
        limits: AttemptLimits,
    ) -> BoxFuture<'static, Result<RawResponse, TransportError>> {
        let origin = origin(request);
        let (used, client) = match self.client(
            limits.connect_timeout_setting,
            &request.transport,
            &origin.0,
        ) {
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
        if let Some(multipart) = &request.multipart {
            match multipart.open() {
                Ok((length, stream)) => {
                    builder = builder
                        .header(reqwest::header::CONTENT_LENGTH, length)
                        .body(reqwest::Body::wrap_stream(stream));
                }
                Err(e) => {
                    let e = TransportError::new(FailureKind::Request, e.to_string());
                    return Box::pin(async move { Err(e) });
                }
            }
        }
        let timeout = limits.timeout;
        let body_limit = limits.body;
        let target = request.body_target.for_attempt(limits.timeout);
        let follows_redirects = limits.follows_redirects;
        // The client's connect timeout is the configured one, rounded down (`on_the_ladder`):
        // when the attempt's own timeout is no longer, it is that limit a connect runs out of,
        // as the plain-http transport says it.
        let connect_is_cut = limits.connect_timeout_setting >= timeout;
        let https = request.url.scheme() == "https";
        let proxy_option = proxy_option_for(request, https);
        let clients = self.clients.clone();
        Box::pin(async move {
            // The process's runtime runs only while a call runs, so a kept connection the server
            // closed since (its keep-alive timeout: no `Connection: close` said it) is still in
            // reqwest's pool, its close unread. One turn of the runtime first reads it: the
            // connection's task sees the close and leaves the pool, and the request goes on
            // a live connection (sent on the dead one, a POST failed, never retried).
            tokio::task::yield_now().await;
            let answered = (clients.clone(), origin.0.clone());
            let exchange = async move {
                let mut response = builder.send().await.map_err(|e| {
                    let mut e = if connect_is_cut && e.is_connect() && e.is_timeout() {
                        attempt_timed_out()
                    } else {
                        map_error(e)
                    };
                    // The environment is read only once a connect failed.
                    if e.kind == FailureKind::Connect
                        && proxy_option.unwrap_or_else(|| env_proxy_for(https))
                    {
                        let scheme = if https { "https" } else { "http" };
                        e.detail = format!(
                            "{}; a proxy is set for {scheme}:// URLs (option 'proxy' or the environment's *_PROXY): the failure may be the proxy's",
                            e.detail
                        );
                    }
                    e
                })?;
                {
                    let (clients, origin) = answered;
                    let http2 = response.version() == reqwest::Version::HTTP_2;
                    clients
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .answered(used, &origin, http2);
                }
                let status = response.status().as_u16();
                let mut headers = header_list(response.headers());
                // Chunk by chunk within max_body (or into the sink); on error `response` is
                // dropped, which closes the connection instead of returning it to the pool.
                let mut received = ResponseBody::start(
                    &crate::redirect::body_target_for(&target, status, &headers, follows_redirects),
                    &mut headers,
                    response.content_length(),
                    body_limit,
                )
                .map_err(|e| e.answered(status, &headers))?;
                while let Some(chunk) = response.chunk().await.map_err(map_error)? {
                    received
                        .push(&chunk)
                        .map_err(|e| e.answered(status, &headers))?;
                }
                let body = received
                    .finish()
                    .map_err(|e| e.answered(status, &headers))?;
                Ok(RawResponse {
                    status,
                    headers,
                    body,
                })
            };
            match tokio::time::timeout(timeout, exchange).await {
                Ok(result) => result,
                Err(_) => {
                    leave_connection(&clients, &origin.0, used);
                    Err(attempt_timed_out())
                }
            }
        })
    }
}

fn attempt_timed_out() -> TransportError {
    TransportError::new(FailureKind::Timeout, "the attempt timed out")
}

/// Whether the request's or client's `proxy` option sets a proxy for the request's scheme
/// (`None`: no option, the environment decides): a connect error may then be the proxy's,
/// which refuses as an upstream would. (A host its `no` list exempts goes direct all the same:
/// the message says "may".)
fn proxy_option_for(request: &PreparedRequest, https: bool) -> Option<bool> {
    let proxy = request.transport.proxy.as_ref()?;
    let set = if https { &proxy.https } else { &proxy.http };
    Some(set.is_some() && !exempts_every_host(proxy.no.iter().map(String::as_str)))
}

/// Whether the environment sets a proxy for `https` or plain `http` requests as reqwest reads
/// it (hyper-util's matcher: the first of each variable's two spellings that is set): none
/// under CGI (`REQUEST_METHOD` set, where `HTTP_PROXY` may come from a request's `Proxy`
/// header), else the scheme's variable or `ALL_PROXY`; and none when `NO_PROXY` exempts every
/// host (`*` in either spelling: the client is then built without proxies, see
/// [`proxy_configured`]).
fn env_proxy_for(https: bool) -> bool {
    let first = |names: [&str; 2]| {
        names
            .iter()
            .find_map(|name| std::env::var(name).ok())
            .unwrap_or_default()
    };
    let no_proxy = ["NO_PROXY", "no_proxy"].map(|v| std::env::var(v).unwrap_or_default());
    if std::env::var_os("REQUEST_METHOD").is_some()
        || exempts_every_host(no_proxy.iter().map(String::as_str))
    {
        return false;
    }
    let scheme = match https {
        true => first(["HTTPS_PROXY", "https_proxy"]),
        false => first(["HTTP_PROXY", "http_proxy"]),
    };
    !scheme.is_empty() || !first(["ALL_PROXY", "all_proxy"]).is_empty()
}

/// Whether the environment sets a proxy for either scheme: without one, matching every request
/// against the proxy rules is wasted work (the client is built without them, and plain `http://`
/// requests go through the HTTP/1 transport).
pub(crate) fn proxy_configured() -> bool {
    env_proxy_for(false) || env_proxy_for(true)
}

/// Whether a list of hosts reached directly (`no`, `NO_PROXY`: entries, each possibly
/// comma-separated) holds `*`, which exempts every host, IP addresses too: reqwest's matcher
/// applies it to host names only, so the proxy is then left out altogether.
fn exempts_every_host<'a>(lists: impl Iterator<Item = &'a str>) -> bool {
    lists.flat_map(|l| l.split(',')).any(|h| h.trim() == "*")
}

/// The I/O error at the root of `error`, if one is in its causes.
fn io_cause(error: &reqwest::Error) -> Option<&std::io::Error> {
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return Some(io);
        }
        source = cause.source();
    }
    None
}

/// Maps a reqwest error to a failure kind and a URL-free detail.
fn map_error(error: reqwest::Error) -> TransportError {
    if let Some(tls) = tls_cause(&error) {
        return TransportError::new(FailureKind::Tls, tls);
    }
    // A connect that timed out is a connect failure (`is_timeout` is true for it too), as the
    // plain-http transport says it; a timeout after the connect is a timeout.
    let kind = if error.is_builder() {
        // The request could not be made (a URL the `http` crate refuses): ours.
        FailureKind::Request
    } else if error.is_connect() {
        io_cause(&error).map_or(FailureKind::Connect, FailureKind::of_connect)
    } else if error.is_timeout() {
        FailureKind::Timeout
    } else if error.is_body() || error.is_decode() {
        FailureKind::Body
    } else if unparsable_answer(&error) {
        // An answer that came but could not be read (more header fields than hyper's 100, a
        // bad status line): as the plain-http transport says it, not a closed connection.
        FailureKind::Other
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

/// Whether hyper could not parse the response head (reqwest reports it as a request error).
fn unparsable_answer(error: &reqwest::Error) -> bool {
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if cause
            .downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_parse)
        {
            return true;
        }
        source = cause.source();
    }
    false
}

/// The rustls error under a reqwest error, if TLS is what failed (a refused certificate names
/// its problem: `invalid peer certificate: UnknownIssuer`, `NotValidForName`, `Expired`).
fn tls_cause(error: &reqwest::Error) -> Option<String> {
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        // An io::Error's `source()` skips the error it wraps (and connectors wrap io::Errors in
        // io::Errors): look inside each.
        let mut inner: &(dyn std::error::Error + 'static) = cause;
        loop {
            if let Some(tls) = inner.downcast_ref::<rustls::Error>() {
                return Some(describe_tls(tls));
            }
            match inner
                .downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
            {
                Some(wrapped) => inner = wrapped,
                None => break,
            }
        }
        source = cause.source();
    }
    None
}

/// rustls's words, with the certificate problems spelled out for a reader of logs.
fn describe_tls(error: &rustls::Error) -> String {
    use rustls::CertificateError as C;
    match error {
        rustls::Error::InvalidCertificate(problem) => {
            let what = match problem {
                C::UnknownIssuer => "the server's certificate is signed by an unknown CA (set 'verify' to your CA bundle)",
                C::NotValidForName | C::NotValidForNameContext { .. } => "the server's certificate is not valid for this host name",
                C::Expired | C::ExpiredContext { .. } => "the server's certificate has expired",
                C::NotValidYet | C::NotValidYetContext { .. } => "the server's certificate is not valid yet",
                C::Revoked => "the server's certificate is revoked",
                C::BadSignature => "the server's certificate has a bad signature",
                C::Other(other)
                    if matches!(
                        other.0.downcast_ref::<webpki::Error>(),
                        Some(webpki::Error::CaUsedAsEndEntity)
                    ) =>
                {
                    "the server's certificate is a CA certificate (CA:TRUE) used as its own, \
                     which rustls never accepts (OpenSSL does when its CA file holds it): \
                     give 'verify' the CA that signed it, or make the certificate again with \
                     basicConstraints=CA:FALSE"
                }
                _ => "the server's certificate was refused",
            };
            format!("{what} ({error})")
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod describe_tls_tests {
    use super::*;

    /// A self-signed certificate made with `openssl req -x509` (CA:TRUE) given to `verify` as
    /// its own bundle: OpenSSL (Guzzle) accepts it, rustls refuses it. The message says why and
    /// what to do, not only rustls's name for it.
    #[test]
    fn a_ca_certificate_used_as_the_servers_own_is_explained() {
        let error = rustls::Error::InvalidCertificate(rustls::CertificateError::Other(
            rustls::OtherError(std::sync::Arc::new(webpki::Error::CaUsedAsEndEntity)),
        ));
        let said = describe_tls(&error);
        assert!(
            said.starts_with("the server's certificate is a CA certificate (CA:TRUE)"),
            "{said}"
        );
        assert!(said.contains("basicConstraints=CA:FALSE"), "{said}");
    }
}

#[cfg(test)]
mod ladder_tests {
    use super::*;

    #[test]
    fn a_connect_timeout_is_rounded_down_by_at_most_a_tenth() {
        for ms in 1..=120_000u64 {
            let rung = on_the_ladder(Duration::from_millis(ms));
            assert!(
                rung <= ms && rung as f64 >= ms as f64 / 1.1 - 1.0,
                "{ms} → {rung}"
            );
        }
        // Deadline::cap(1.0) after 0 to 300 ms of work: a handful of clients, not one per call.
        let rungs: std::collections::HashSet<u64> = (700..=1000)
            .map(|ms| on_the_ladder(Duration::from_millis(ms)))
            .collect();
        assert!(rungs.len() <= 5, "{rungs:?}");
    }

    #[test]
    fn near_connect_timeouts_share_one_client() {
        let t = ReqwestTransport::new();
        let options = TransportOptions::default();
        for ms in [999, 995, 990, 980] {
            t.client(Duration::from_millis(ms), &options, "https://a:443")
                .unwrap();
        }
        assert_eq!(t.clients.lock().unwrap().len(), 1);
    }
}
