//! A request, prepared once and sent identically on every attempt.
//!
//! `join_url` joins the path with `base_url` (Laravel style: `rtrim(base, '/') . '/' .
//! ltrim(path, '/')`; an absolute `http(s)://` path is used as is); `prepare_at` appends the
//! query pairs, encodes the body (JSON, raw or form, at most one), merges default and
//! per-request headers, and turns the idempotency key into an `Idempotency-Key` header. The prepared request is immutable,
//! so every attempt sends the same bytes and the same key.
//!
//! Options arrive as [`RequestOptions`] (Rust values: query pairs, one [`Body`] — JSON, raw
//! bytes or form —, headers, the key); turning a language's arrays into them (PHP's
//! `http_build_query` shape, `json_encode`) is the binding's job.

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use reqwest::header::{
    HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, USER_AGENT,
};
use reqwest::{Method, Url};

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::config_error::ConfigError;
use crate::multipart::{Multipart, Part};
use crate::options::{parse_http_url, replace_header, ClientConfig};
use crate::transport_options::{BodyTarget, TransportOptions};

/// The header that carries the idempotency key.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// A request ready to send, identical on every attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedRequest {
    pub method: Method,
    pub url: Url,
    /// Built once: every attempt sends these exact headers.
    pub headers: HeaderMap,
    pub body: Option<Vec<u8>>,
    /// A multipart body streamed from its files on every attempt (then `body` is `None`).
    pub multipart: Option<Arc<Multipart>>,
    /// An `Idempotency-Key` header is present (from `idempotency_key` or given directly).
    pub has_idempotency_key: bool,
    /// TLS, proxy, redirects, decoding: the client's, or this request's own.
    pub transport: Arc<TransportOptions>,
    /// Where the response body goes (decoded or not, memory or a `sink` file).
    pub body_target: BodyTarget,
    /// This request's own attempt timeouts, instead of the client's.
    pub timeout: Option<Duration>,
    pub connect_timeout: Option<Duration>,
    /// A FIFO sink's write end, open from the option's check to the call's end (see
    /// [`HeldOpen`]).
    pub sink_held: Option<HeldOpen>,
}

/// A FIFO sink's write end, opened by the option's check and kept open until the request is
/// dropped with its call: the reader sees the end of its input only then, after every attempt
/// (closing it at once gave the reader an empty input, it left, and the sink's own open then
/// failed with ENXIO after the request was sent).
#[derive(Debug, Clone)]
pub struct HeldOpen(Arc<std::fs::File>);

impl PartialEq for HeldOpen {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl PreparedRequest {
    /// `scheme://host[:port]/path`: no user-info, no query, no fragment. For records and messages.
    pub fn display_url(&self) -> String {
        display_url(&self.url)
    }
}

/// The URL as records and messages show it: no user-info, query or fragment (secrets live there).
pub fn display_url(url: &Url) -> String {
    let mut shown = format!("{}://{}", url.scheme(), url.host_str().unwrap_or(""));
    if let Some(port) = url.port() {
        shown.push_str(&format!(":{port}"));
    }
    shown.push_str(url.path());
    shown
}

/// A label a caller gave (a pool request's key) as an error may show it. Keys made from URLs
/// are common (`array_combine($urls, ...)`): one that is a URL shows as URLs do in messages,
/// without user-info, query or fragment; any other up to its first character that is not a
/// letter, digit, space or one of `-_./` (a `user:password@`, a `?token=`), then "…", and 64
/// characters at most.
pub fn shown_label(label: &str) -> String {
    if let Ok(url) = Url::parse(label) {
        if url.has_host() {
            return display_url(&url);
        }
    }
    let plain = |c: char| c.is_alphanumeric() || " -_./".contains(c);
    let end = label.find(|c: char| !plain(c)).unwrap_or(label.len());
    let mut shown = crate::options::truncate(&label[..end], 64);
    if shown.len() < label.len() {
        shown.push('…');
    }
    shown
}

/// A request body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// Already-encoded JSON (`Content-Type: application/json`).
    Json(Vec<u8>),
    /// Sent byte for byte, no content type added.
    Raw(Vec<u8>),
    /// `application/x-www-form-urlencoded` pairs.
    Form(Vec<(String, String)>),
    /// `multipart/form-data`, files streamed from disk.
    Multipart(Vec<Part>),
}

/// Per-request options as Rust values: query pairs, at most one body, extra headers (replacing
/// defaults of the same name) and an idempotency key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestOptions {
    query: Vec<(String, String)>,
    body: Option<Body>,
    headers: Vec<(HeaderName, HeaderValue)>,
    idempotency_key: Option<HeaderValue>,
    transport: Option<TransportOptions>,
    sink: Option<PathBuf>,
    sink_held: Option<HeldOpen>,
    timeout: Option<Duration>,
    connect_timeout: Option<Duration>,
}

impl RequestOptions {
    pub fn new() -> Self {
        Self::default()
    }
    /// Appends one query pair.
    pub fn query(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.query.push((name.into(), value.into()));
        self
    }
    /// Sets the body; a second body is an error (`only one of 'json', 'body' and 'form'`).
    pub fn body(mut self, body: Body) -> Result<Self, ConfigError> {
        if self.body.is_some() {
            return Err(ConfigError::new(
                "json",
                "only one of 'json', 'body', 'form' and 'multipart' may be given",
            ));
        }
        self.body = Some(body);
        Ok(self)
    }
    /// Adds a header; its value is never echoed in errors.
    pub fn header(mut self, name: &str, value: &[u8]) -> Result<Self, ConfigError> {
        let header_name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            ConfigError::new(
                "headers",
                format!(
                    "{:?} is not a valid header name",
                    crate::options::shown_name(name)
                ),
            )
        })?;
        crate::options::refuse_framing(&header_name, &format!("headers.{name}"))?;
        let value = HeaderValue::from_bytes(value).map_err(|_| {
            ConfigError::new(
                format!("headers.{name}"),
                "contains characters not allowed in a header value (control characters or line breaks)",
            )
        })?;
        if self.headers.len() >= crate::options::MAX_HEADER_VALUES {
            return Err(crate::options::too_many_header_values(""));
        }
        self.headers.push((header_name, value));
        Ok(self)
    }
    /// As [`header`](Self::header), replacing the values `headers` gave the name.
    pub fn set_header(mut self, name: &str, value: &[u8]) -> Result<Self, ConfigError> {
        // The values it replaces go first, so they do not count against the cap.
        if let Ok(replaced) = HeaderName::from_bytes(name.as_bytes()) {
            self.headers.retain(|(n, _)| *n != replaced);
        }
        self.header(name, value)
    }
    /// The `Idempotency-Key` (not blank).
    pub fn idempotency_key(mut self, key: &str) -> Result<Self, ConfigError> {
        if key.trim().is_empty() {
            let got = match key.is_empty() {
                true => "an empty string",
                false => "only white space",
            };
            return Err(ConfigError::new(
                "idempotency_key",
                format!("must be a non-empty string, got {got}"),
            ));
        }
        self.idempotency_key = Some(HeaderValue::from_str(key).map_err(|_| {
            ConfigError::new(
                "idempotency_key",
                "contains characters not allowed in a header value (control characters or line breaks)",
            )
        })?);
        Ok(self)
    }
    /// TLS, proxy, redirect and decoding options for this request (replacing the client's).
    pub fn transport(mut self, options: TransportOptions) -> Self {
        self.transport = Some(options);
        self
    }
    /// Writes the response body to this file (created or truncated when an attempt's answer
    /// arrives) instead of memory; its directory must exist and the file must be writable
    /// (checked now, so a file that cannot be written refuses the call before anything is sent;
    /// the check leaves an existing file as it is and creates none).
    pub fn sink(mut self, path: PathBuf) -> Result<Self, ConfigError> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()).contains(&0) {
            return Err(ConfigError::new("sink", "contains a NUL byte"));
        }
        if path.as_os_str().is_empty() || path.is_dir() || !dir.is_dir() {
            return Err(ConfigError::new(
                "sink",
                format!(
                    "must be a file path in an existing directory, got {}",
                    path.display()
                ),
            ));
        }
        self.sink_held = writable(&path)
            .map_err(|e| ConfigError::new("sink", format!("cannot write {}: {e}", path.display())))?
            .map(|fifo| HeldOpen(Arc::new(fifo)));
        self.sink = Some(path);
        Ok(self)
    }
    /// This request's attempt timeout (at least 1 ms).
    pub fn timeout(mut self, timeout: Duration) -> Result<Self, ConfigError> {
        self.timeout = Some(crate::options::at_least_1ms("timeout", timeout)?);
        Ok(self)
    }
    /// This request's connect timeout (at least 1 ms).
    pub fn connect_timeout(mut self, timeout: Duration) -> Result<Self, ConfigError> {
        self.connect_timeout = Some(crate::options::at_least_1ms("connect_timeout", timeout)?);
        Ok(self)
    }
}

/// The longest URL a request may have: what the `http` crate's `Uri` takes (and about what
/// servers accept in a request line).
pub const MAX_URL_LEN: usize = 65_534;

/// Prepares `method url` with per-request `options` against the client's configuration (the
/// URL already joined: callers may cache joined URLs per path).
pub fn prepare_at(
    config: &ClientConfig,
    method: &str,
    url: Url,
    options: RequestOptions,
) -> Result<PreparedRequest, ConfigError> {
    let method = parse_method(method)?;
    let mut url = url;
    // One value per name, as Guzzle sends them: the client's `headers` replace the User-Agent
    // of `user_agent`; a body's Content-Type replaces the client's (a JSON, form or multipart
    // body is that type whatever the client-wide default says); the request's own `headers`
    // replace both (below).
    let mut headers: Vec<(HeaderName, HeaderValue)> = config.headers.clone();
    if !headers.iter().any(|(n, _)| *n == USER_AGENT) {
        headers.insert(0, (USER_AGENT, config.user_agent.clone()));
    }

    if !options.query.is_empty() {
        drop_replaced_pairs(&mut url, &options.query);
        let added = encoded_pairs(&options.query, QUERY_COMPONENT);
        let query = match url.query() {
            Some(own) if !own.is_empty() => format!("{own}&{added}"),
            _ => added,
        };
        url.set_query(Some(&query));
    }
    if url.as_str().len() > MAX_URL_LEN {
        return Err(ConfigError::new(
            "url",
            format!(
                "is {} bytes long with its query; HTTP clients and servers take at most {MAX_URL_LEN}",
                url.as_str().len()
            ),
        ));
    }
    let mut multipart = None;
    let payload = match options.body {
        None => None,
        Some(Body::Multipart(parts)) => {
            let body = Multipart::new(parts);
            let content_type =
                HeaderValue::from_str(&body.content_type()).expect("the boundary is ASCII");
            replace_header(&mut headers, CONTENT_TYPE, content_type);
            multipart = Some(Arc::new(body));
            None
        }
        Some(Body::Raw(bytes)) => Some(bytes),
        Some(Body::Json(bytes)) => {
            replace_header(
                &mut headers,
                CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            Some(bytes)
        }
        Some(Body::Form(pairs)) => {
            replace_header(
                &mut headers,
                CONTENT_TYPE,
                HeaderValue::from_static("application/x-www-form-urlencoded"),
            );
            Some(form_encoded(&pairs).into_bytes())
        }
    };
    if let Some(key) = &options.idempotency_key {
        // Both given for this request, and not alike: which one a server deduplicates by
        // would be a guess (a client's default header is replaced, as any default).
        // Compared as sent (spaces around a value are no part of it); a blank header is no
        // key (below), so no conflict either.
        let differs = |v: &HeaderValue| {
            let v = v.as_bytes().trim_ascii();
            !v.is_empty() && v != key.as_bytes().trim_ascii()
        };
        if options
            .headers
            .iter()
            .any(|(n, v)| n.as_str() == IDEMPOTENCY_KEY && differs(v))
        {
            return Err(ConfigError::new(
                "idempotency_key",
                "differs from the request's Idempotency-Key header (give the key once)",
            ));
        }
    }
    if !options.headers.is_empty() {
        // Per-request headers replace defaults of the same name.
        let extra = options.headers;
        headers.retain(|(name, _)| !extra.iter().any(|(n, _)| n == name));
        let client = config
            .headers
            .iter()
            .filter(|(name, _)| !extra.iter().any(|(n, _)| n == name))
            .count();
        if client + extra.len() > crate::options::MAX_HEADER_VALUES {
            return Err(crate::options::too_many_header_values(&format!(
                " (the client's {client} and the request's {})",
                extra.len()
            )));
        }
        headers.extend(extra);
    }
    if let Some(key) = options.idempotency_key {
        replace_header(&mut headers, HeaderName::from_static(IDEMPOTENCY_KEY), key);
    }
    // As curl (so Guzzle) sends, and reqwest would add on its own: the same request over
    // either transport carries the same headers.
    if !headers.iter().any(|(n, _)| *n == ACCEPT) {
        headers.push((ACCEPT, HeaderValue::from_static("*/*")));
    }
    // A blank header is no key (the option refuses one): a server cannot deduplicate by it.
    let has_idempotency_key = headers
        .iter()
        .any(|(n, v)| n.as_str() == IDEMPOTENCY_KEY && !v.as_bytes().trim_ascii().is_empty());
    // A POST, PUT or PATCH without a body says so (RFC 9110 §8.6: a client SHOULD send
    // Content-Length when it sends no body and the method gives a body a meaning): some servers
    // answer 411 otherwise, as Guzzle and curl know. A body's length is set by the transport.
    if multipart.is_none()
        && payload.as_ref().is_none_or(Vec::is_empty)
        && [Method::POST, Method::PUT, Method::PATCH].contains(&method)
    {
        headers.push((CONTENT_LENGTH, HeaderValue::from_static("0")));
    }
    let mut map = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        map.append(name, value);
    }
    let transport = match options.transport {
        Some(own) => Arc::new(own),
        None => config.transport.clone(),
    };
    let body_target = BodyTarget {
        decode: transport.decode_content,
        sink: options.sink,
        write_until: None,
    };
    Ok(PreparedRequest {
        method,
        url,
        headers: map,
        body: payload,
        multipart,
        has_idempotency_key,
        transport,
        body_target,
        timeout: options.timeout,
        connect_timeout: options.connect_timeout,
        sink_held: options.sink_held,
    })
}

fn parse_method(method: &str) -> Result<Method, ConfigError> {
    let upper = method.trim().to_ascii_uppercase();
    if upper.is_empty() || upper == "CONNECT" {
        return Err(ConfigError::new(
            "method",
            "must be an HTTP method such as GET or POST",
        ));
    }
    // The longest registered method has 17 characters (UPDATEREDIRECTREF); a method is
    // repeated in every error, so a runaway one is refused here.
    if upper.len() > MAX_METHOD_LEN {
        return Err(ConfigError::new(
            "method",
            format!("is longer than {MAX_METHOD_LEN} characters"),
        ));
    }
    Method::from_bytes(upper.as_bytes())
        .map_err(|_| ConfigError::new("method", "is not a valid HTTP method"))
}

const MAX_METHOD_LEN: usize = 32;

/// Joins a path with the base URL, or parses an absolute URL.
pub fn join_url(base: Option<&Url>, path: &str) -> Result<Url, ConfigError> {
    let path = path.trim();
    let lower = path.get(..8).unwrap_or(path).to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        return parse_http_url(path).map_err(|p| ConfigError::new("url", p));
    }
    // Another scheme (`ftp://`, `file://`): a '://' after a leading scheme name. One further
    // in (a query's `redirect_uri=https://...`, `/proxy/http://x`) is part of the path.
    let scheme = path.split_once("://").map_or("", |(before, _)| before);
    if !scheme.is_empty()
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        return Err(ConfigError::new(
            "url",
            "must be a path or an http:// or https:// URL",
        ));
    }
    let base = base.ok_or_else(|| {
        ConfigError::new("url", "is a relative path but the client has no 'base_url'")
    })?;
    let mut joined = base
        .as_str()
        .split(['?', '#'])
        .next()
        .unwrap_or("")
        .trim_end_matches('/')
        .to_string();
    if !path.is_empty() {
        joined.push('/');
        joined.push_str(path.trim_start_matches('/'));
    }
    let url = parse_http_url(&joined).map_err(|p| ConfigError::new("url", p))?;
    // Keep the base URL's own query (e.g. an API version) in front of the path's.
    match (base.query(), url.query()) {
        (Some(bq), Some(pq)) => {
            let mut merged = url.clone();
            merged.set_query(Some(&format!("{bq}&{pq}")));
            Ok(merged)
        }
        (Some(bq), None) => {
            let mut merged = url.clone();
            merged.set_query(Some(bq));
            Ok(merged)
        }
        _ => Ok(url),
    }
}

/// What a query's keys and values keep unescaped: RFC 3986's unreserved characters, as PHP's
/// `rawurlencode` and so Guzzle's `query` option (a space as `%20`, not `+`): the bytes a
/// signature computed over the query the PHP way expects.
const QUERY_COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// What a form's keys and values keep unescaped: as PHP's `urlencode`, so `http_build_query`
/// and Guzzle's `form_params` (`*` escaped too, where the URL standard's form encoding keeps it).
const FORM_COMPONENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_');

/// `k=v&...`, every byte of a key or value outside `keep` escaped.
fn encoded_pairs(pairs: &[(String, String)], keep: &'static AsciiSet) -> String {
    pairs
        .iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                utf8_percent_encode(k, keep),
                utf8_percent_encode(v, keep)
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// A form body as `http_build_query` writes it: a space as `+` (a `%20` can only be a space:
/// a `%` given is escaped too), every other byte but [`FORM_COMPONENT`]'s escaped.
fn form_encoded(pairs: &[(String, String)]) -> String {
    encoded_pairs(pairs, FORM_COMPONENT).replace("%20", "+")
}

/// Removes from the URL's own query (the base URL's and the path's) every pair whose key the
/// request's `query` gives: its keys win, as they do over `$query`. Keys compare by name
/// before any `[`, so `filter` replaces every `filter[...]` pair (PHP's `array_merge` of the
/// two queries). The pairs kept stay as written.
fn drop_replaced_pairs(url: &mut Url, query: &[(String, String)]) {
    fn name(key: &str) -> &str {
        key.split('[').next().unwrap_or(key)
    }
    let Some(own) = url.query() else { return };
    let replaced = |pair: &str| {
        let raw_key = pair.split('=').next().unwrap_or(pair);
        url::form_urlencoded::parse(raw_key.as_bytes())
            .next()
            .is_some_and(|(key, _)| query.iter().any(|(k, _)| name(k) == name(&key)))
    };
    let kept: Vec<&str> = own.split('&').filter(|pair| !replaced(pair)).collect();
    if kept.len() == own.split('&').count() {
        return;
    }
    let kept = kept.join("&");
    url.set_query((!kept.is_empty()).then_some(kept.as_str()));
}

/// Whether `path` can be written: an existing file opened for writing without truncating it,
/// else a new one created and removed again. A FIFO's write end is handed back, to be kept open
/// for the call ([`HeldOpen`]).
///
/// Opened without waiting: a FIFO without a reader fails at once (ENXIO) instead of waiting for
/// one past any deadline; one with a reader (`/dev/stdout` piped to `jq`) is a sink like a file.
fn writable(path: &std::path::Path) -> std::io::Result<Option<std::fs::File>> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let mut open = std::fs::OpenOptions::new();
    open.write(true).custom_flags(libc::O_NONBLOCK);
    match open.open(path) {
        Ok(file) => Ok(file
            .metadata()
            .is_ok_and(|m| m.file_type().is_fifo())
            .then_some(file)),
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => Err(std::io::Error::other(
            "it is a FIFO (or socket) with no reader",
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            open.create_new(true).open(path)?;
            std::fs::remove_file(path).map(|()| None)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_options_send_raw_bytes_as_given_and_refuse_a_second_body() {
        let mut c = ClientConfig::default();
        c.set_base_url("http://h").unwrap();
        let bytes = vec![0xff, 0x00, b'x'];
        let opts = RequestOptions::new()
            .query("a", "1")
            .idempotency_key("k")
            .unwrap()
            .body(Body::Raw(bytes.clone()))
            .unwrap();
        let r = prepare_at(
            &c,
            "POST",
            join_url(c.base_url.as_ref(), "/p").unwrap(),
            opts,
        )
        .unwrap();
        assert_eq!(r.body.as_deref(), Some(bytes.as_slice()));
        assert_eq!(r.url.as_str(), "http://h/p?a=1");
        assert!(r.has_idempotency_key && r.headers.get(CONTENT_TYPE).is_none());
        let twice = RequestOptions::new()
            .body(Body::Json(b"{}".to_vec()))
            .unwrap()
            .body(Body::Raw(vec![]));
        assert_eq!(
            twice.unwrap_err().to_string(),
            "option 'json': only one of 'json', 'body', 'form' and 'multipart' may be given"
        );
    }

    fn config(base: &str) -> ClientConfig {
        let mut c = ClientConfig::default();
        c.set_base_url(base).unwrap();
        c.add_header("headers", b"X-Default", b"d").unwrap();
        c.add_header("headers", b"Accept", b"text/plain").unwrap();
        c
    }

    fn prepare(
        c: &ClientConfig,
        method: &str,
        path: &str,
        options: RequestOptions,
    ) -> Result<PreparedRequest, ConfigError> {
        prepare_at(c, method, join_url(c.base_url.as_ref(), path)?, options)
    }

    fn header<'a>(r: &'a PreparedRequest, name: &str) -> Vec<&'a str> {
        r.headers
            .iter()
            .filter(|(n, _)| n.as_str() == name)
            .map(|(_, v)| v.to_str().unwrap())
            .collect()
    }

    #[test]
    fn joins_base_and_path_and_appends_the_query() {
        let c = config("http://127.0.0.1:8080/api/");
        let q = RequestOptions::new()
            .query("postcode", "10110")
            .query("a b", "x&y")
            .query("l[0]", "1")
            .query("t", "~a*b+c/é");
        let r = prepare(&c, "get", "/quote", q).unwrap();
        assert_eq!(r.method, Method::GET);
        // As Guzzle's `query` option encodes (PHP's rawurlencode, RFC 3986): a space as %20,
        // `~` kept, `*` and `+` escaped; what a signature over the query expects.
        assert_eq!(
            r.url.as_str(),
            "http://127.0.0.1:8080/api/quote?postcode=10110&a%20b=x%26y&l%5B0%5D=1&t=~a%2Ab%2Bc%2F%C3%A9"
        );
        assert_eq!(r.display_url(), "http://127.0.0.1:8080/api/quote");
        let r = prepare(
            &c,
            "GET",
            "quote?x=1",
            RequestOptions::new().query("y", "2"),
        )
        .unwrap();
        assert_eq!(r.url.query(), Some("x=1&y=2"));
        let r = prepare(&c, "GET", "https://other.example/p", RequestOptions::new()).unwrap();
        assert_eq!(r.url.as_str(), "https://other.example/p");
        let c2 = config("http://h/v1?key=abc");
        let r = prepare(&c2, "GET", "/x", RequestOptions::new()).unwrap();
        assert_eq!(r.url.as_str(), "http://h/v1/x?key=abc");
        // A '://' inside a path or its query is no scheme (Laravel checks only the start).
        let c3 = config("http://h");
        let r = prepare(
            &c3,
            "GET",
            "/oauth?redirect_uri=https://app.example/cb",
            RequestOptions::new(),
        )
        .unwrap();
        assert_eq!(
            r.url.as_str(),
            "http://h/oauth?redirect_uri=https://app.example/cb"
        );
        let r = prepare(&c3, "GET", "/proxy/http://x", RequestOptions::new()).unwrap();
        assert_eq!(r.url.as_str(), "http://h/proxy/http://x");
        for other in ["gopher://x/", "ftp://h/f", " FILE:///etc/passwd"] {
            assert_eq!(
                prepare(&c3, "GET", other, RequestOptions::new())
                    .unwrap_err()
                    .to_string(),
                "option 'url': must be a path or an http:// or https:// URL",
                "{other}"
            );
        }
    }

    #[test]
    fn a_query_key_replaces_that_key_in_the_urls_own_query() {
        let c = config("http://h/v1?key=abc&page=9");
        let r = prepare(
            &c,
            "GET",
            "/search?page=1&sort=a%20b&filter[x]=1&filter[y]=2&pages=3",
            RequestOptions::new()
                .query("page", "2")
                .query("filter[z]", "3")
                .query("key", "def"),
        )
        .unwrap();
        // `page` and every `filter[...]` are replaced, the other pairs kept as written (a key
        // given as an array replaces the whole array, as PHP's array_merge of the two would).
        assert_eq!(
            r.url.query(),
            Some("sort=a%20b&pages=3&page=2&filter%5Bz%5D=3&key=def")
        );
        // Encoded keys are compared decoded.
        let r = prepare(
            &c,
            "GET",
            "/s?p%61ge=1&a+b=1",
            RequestOptions::new().query("page", "2").query("a b", "2"),
        )
        .unwrap();
        assert_eq!(r.url.query(), Some("key=abc&page=2&a%20b=2"));
    }

    #[test]
    fn a_label_shows_no_credentials_query_or_control_characters() {
        for (label, shown) in [
            ("sku-1", "sku-1"),
            ("user/42 page.2", "user/42 page.2"),
            ("http://u:SECRET@h:8080/x?token=Q#f", "http://h:8080/x"),
            (
                "https://api.example/quote?key=Q",
                "https://api.example/quote",
            ),
            ("/quote?token=Q", "/quote…"),
            ("u:SECRET@host", "u…"),
            ("a\nb", "a…"),
            ("", ""),
        ] {
            assert_eq!(shown_label(label), shown, "{label:?}");
        }
        let long = "x".repeat(100);
        assert_eq!(shown_label(&long), format!("{}…", "x".repeat(64)));
    }

    #[test]
    fn display_url_drops_credentials_and_query() {
        let c = config("http://user:pw@127.0.0.1:9/");
        let r = prepare(
            &c,
            "GET",
            "/p",
            RequestOptions::new().query("token", "s3cret"),
        )
        .unwrap();
        assert_eq!(r.display_url(), "http://127.0.0.1:9/p");
    }

    #[test]
    fn malformed_urls_are_rejected_clearly() {
        let c = ClientConfig::default();
        for (path, expect) in [
            ("/relative", "no 'base_url'"),
            ("http://", "not a valid URL"),
            ("http://exa mple.com/", "not a valid URL"),
            ("ftp://x/y", "http:// or https://"),
            ("http://[::1", "not a valid URL"),
            // The URL parser drops tabs and line breaks inside a URL: another resource.
            ("http://h/gzip_\nok", "control character"),
            ("http://h/x\r\nX-Injected: 1", "control character"),
            ("http://h/a\tb", "control character"),
            ("http://h/a\0b", "control character"),
        ] {
            let e = prepare(&c, "GET", path, RequestOptions::new())
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("option 'url'") && e.contains(expect),
                "{path}: {e}"
            );
        }
        let based = config("http://h/api");
        for path in ["/gzip_\nok", "x\ty", "/x\r\nX-Injected: 1"] {
            let e = prepare(&based, "GET", path, RequestOptions::new())
                .unwrap_err()
                .to_string();
            assert!(e.contains("control character"), "{path:?}: {e}");
        }
        let e = ClientConfig::default()
            .set_base_url("http://h/r\naw")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("option 'base_url'") && e.contains("control character"),
            "{e}"
        );
        // Around the URL, whitespace (a line read from a file) is no part of it.
        assert!(ClientConfig::default()
            .set_base_url("http://h/api\n")
            .is_ok());
        assert!(prepare(&c, "GE T", "http://h/", RequestOptions::new())
            .unwrap_err()
            .to_string()
            .starts_with("option 'method'"));
    }

    #[test]
    fn a_header_the_user_names_is_sent_once_with_the_users_value() {
        // As Guzzle: the client's `headers` replace the User-Agent of `user_agent`; a body's
        // Content-Type replaces a client-wide one; the request's own headers replace both.
        let mut c = config("http://h");
        c.add_header("headers", b"User-Agent", b"MyApp/1.0")
            .unwrap();
        c.add_header("headers", b"Content-Type", b"application/vnd.api+json")
            .unwrap();
        let json = RequestOptions::new()
            .body(Body::Json(b"{}".to_vec()))
            .unwrap();
        let r = prepare(&c, "POST", "/q", json).unwrap();
        assert_eq!(header(&r, "user-agent"), ["MyApp/1.0"]);
        assert_eq!(header(&r, "content-type"), ["application/json"]);
        let form = Body::Form(vec![("a".into(), "1".into())]);
        let r = prepare(&c, "POST", "/q", RequestOptions::new().body(form).unwrap()).unwrap();
        assert_eq!(
            header(&r, "content-type"),
            ["application/x-www-form-urlencoded"]
        );
        // Without a body, the client's.
        let r = prepare(&c, "GET", "/q", RequestOptions::new()).unwrap();
        assert_eq!(header(&r, "content-type"), ["application/vnd.api+json"]);
        // The request's own wins over the body's.
        let own = RequestOptions::new()
            .body(Body::Json(b"{}".to_vec()))
            .unwrap()
            .header("Content-Type", b"application/merge-patch+json")
            .unwrap();
        let r = prepare(&c, "PATCH", "/q", own).unwrap();
        assert_eq!(header(&r, "content-type"), ["application/merge-patch+json"]);
        let parts = vec![crate::multipart::Part {
            name: "a".into(),
            filename: None,
            headers: Vec::new(),
            contents: crate::multipart::PartContents::Bytes("1".into()),
        }];
        let r = prepare(
            &c,
            "POST",
            "/q",
            RequestOptions::new().body(Body::Multipart(parts)).unwrap(),
        )
        .unwrap();
        let types = header(&r, "content-type");
        assert!(
            types.len() == 1 && types[0].starts_with("multipart/form-data; boundary="),
            "{types:?}"
        );
        // Without them, the client's own.
        let plain = config("http://h");
        let json = RequestOptions::new()
            .body(Body::Json(b"{}".to_vec()))
            .unwrap();
        let r = prepare(&plain, "POST", "/q", json).unwrap();
        assert_eq!(header(&r, "content-type"), ["application/json"]);
        assert_eq!(header(&r, "user-agent").len(), 1);
    }

    #[test]
    fn a_post_put_or_patch_without_a_body_says_content_length_0() {
        let c = config("http://h");
        for method in ["POST", "PUT", "PATCH"] {
            let r = prepare(&c, method, "/x", RequestOptions::new()).unwrap();
            assert_eq!(header(&r, "content-length"), ["0"], "{method}");
            let empty = RequestOptions::new().body(Body::Raw(Vec::new())).unwrap();
            let r = prepare(&c, method, "/x", empty).unwrap();
            assert_eq!(header(&r, "content-length"), ["0"], "{method} ''");
        }
        for method in ["GET", "DELETE", "HEAD", "OPTIONS"] {
            let r = prepare(&c, method, "/x", RequestOptions::new()).unwrap();
            assert!(header(&r, "content-length").is_empty(), "{method}");
        }
        // A body's length is the transport's to set.
        let json = RequestOptions::new()
            .body(Body::Json(b"{}".to_vec()))
            .unwrap();
        let r = prepare(&c, "POST", "/x", json).unwrap();
        assert!(header(&r, "content-length").is_empty());
    }

    /// Past 24,576 values the HTTP crate's header map panics; a thousand in all (the client's
    /// and the request's) is the most a request carries, named before anything is built.
    #[test]
    fn more_than_a_thousand_header_values_are_refused() {
        let mut c = config("http://h");
        for i in 0..598 {
            c.add_header("headers", format!("x-{i}").as_bytes(), b"v")
                .unwrap();
        }
        let request = |n: usize| {
            (0..n).fold(RequestOptions::new(), |o, i| {
                o.header(&format!("y-{i}"), b"v").unwrap()
            })
        };
        // The client's 2 + 598 and the request's 401, one of them replacing a default: 1000
        // values, and the User-Agent.
        let at_the_limit = request(400).header("accept", b"a/b").unwrap();
        assert_eq!(
            prepare(&c, "GET", "/", at_the_limit).unwrap().headers.len(),
            1001
        );
        let err = prepare(&c, "GET", "/", request(401)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "option 'headers': more than 1000 header values (the client's 600 and the request's 401)"
        );
        let err = (0..=1000)
            .try_fold(RequestOptions::new(), |o, i| {
                o.header("x", format!("{i}").as_bytes())
            })
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "option 'headers': more than 1000 header values"
        );
        let err = (0..=400)
            .try_for_each(|i| c.add_header("headers", b"x", format!("{i}").as_bytes()))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "option 'headers': more than 1000 header values"
        );
        // A value that replaces the name's (decode_content's Accept-Encoding) adds none.
        let mut c = config("http://h");
        for i in 0..997 {
            c.add_header("headers", format!("z-{i}").as_bytes(), b"v")
                .unwrap();
        }
        c.add_header("headers", b"Accept-Encoding", b"br").unwrap();
        assert_eq!(c.headers.len(), 1000);
        c.set_header("decode_content", b"Accept-Encoding", b"gzip")
            .unwrap();
        assert_eq!(c.headers.len(), 1000);
        let full = request(999).header("accept-encoding", b"br").unwrap();
        let full = full.set_header("Accept-Encoding", b"gzip").unwrap();
        assert_eq!(full.headers.len(), 1000);
    }

    #[test]
    fn bodies_headers_and_the_idempotency_key() {
        let c = config("http://h");
        let opts = RequestOptions::new()
            .body(Body::Json(br#"{"sku":1}"#.to_vec()))
            .unwrap()
            .header("accept", b"application/json")
            .unwrap()
            .idempotency_key("k-1")
            .unwrap();
        let r = prepare(&c, "POST", "/q", opts).unwrap();
        assert_eq!(r.body.as_deref(), Some(br#"{"sku":1}"#.as_slice()));
        assert_eq!(header(&r, "content-type"), ["application/json"]);
        assert_eq!(header(&r, "accept"), ["application/json"]);
        assert_eq!(header(&r, "x-default"), ["d"]);
        assert_eq!(header(&r, "idempotency-key"), ["k-1"]);
        assert!(r.has_idempotency_key);
        let form = Body::Form(vec![
            ("a".into(), "1 2".into()),
            ("b[0]".into(), "3".into()),
        ]);
        let f = prepare(&c, "PUT", "/q", RequestOptions::new().body(form).unwrap()).unwrap();
        assert_eq!(f.body.as_deref(), Some(b"a=1+2&b%5B0%5D=3".as_slice()));
        assert!(!f.has_idempotency_key);
        let given = RequestOptions::new()
            .body(Body::Raw(b"raw".to_vec()))
            .unwrap()
            .header("Idempotency-Key", b"given")
            .unwrap();
        assert!(
            prepare(&c, "POST", "/q", given)
                .unwrap()
                .has_idempotency_key
        );
        for blank in [b"".as_slice(), b"  "] {
            let blank = RequestOptions::new()
                .header("Idempotency-Key", blank)
                .unwrap();
            assert!(
                !prepare(&c, "POST", "/q", blank)
                    .unwrap()
                    .has_idempotency_key,
                "a blank header is no key: a POST with it is not retried"
            );
        }
        // The option and a header of the request itself that say different keys: which one
        // a server deduplicates by would be a guess, so neither is sent. The same key twice,
        // or the option over a client's default header, is no conflict.
        let both = |header: &[u8]| {
            let opts = RequestOptions::new()
                .header("Idempotency-Key", header)
                .unwrap()
                .idempotency_key("k-1")
                .unwrap();
            prepare(&c, "POST", "/q", opts)
        };
        assert_eq!(
            both(b"k-2").unwrap_err().to_string(),
            "option 'idempotency_key': differs from the request's Idempotency-Key header (give the key once)"
        );
        assert_eq!(header(&both(b"k-1").unwrap(), "idempotency-key"), ["k-1"]);
        for alike in [&b" k-1 "[..], b"", b"  "] {
            assert_eq!(header(&both(alike).unwrap(), "idempotency-key"), ["k-1"]);
        }
        // A key for every call of a client is refused: a key is one call's.
        let e = config("http://h")
            .add_header("headers", b"Idempotency-Key", b"d")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("option 'headers.Idempotency-Key': is one per call"),
            "{e}"
        );
        assert!(RequestOptions::new()
            .idempotency_key(" ")
            .unwrap_err()
            .to_string()
            .starts_with("option 'idempotency_key'"));
        for framing in ["Content-Length", "transfer-encoding"] {
            let e = RequestOptions::new()
                .header(framing, b"100")
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with(&format!("option 'headers.{framing}'"))
                    && e.contains("set by the client"),
                "{e}"
            );
        }
        assert!(RequestOptions::new()
            .header("bad name", b"x")
            .unwrap_err()
            .to_string()
            .starts_with("option 'headers'"));
        let e = RequestOptions::new()
            .header("Authorization", b"Bearer s3cret\r\nX: y")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("option 'headers.Authorization'") && !e.contains("s3cret"),
            "{e}"
        );
    }
}
