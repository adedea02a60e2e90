//! `ClientConfig`: the client's options, set through typed setters that own the value rules
//! (the PHP binding's `src/options.rs` reads PHP arrays and calls them).
//!
//! Seconds and counts follow `resilient_core::validate` (finite, not negative, at most a year),
//! the funnel and the budget `FunnelConfig` / `BudgetConfig`: one owner per rule. Parsing is
//! strict: an unknown key is an error naming the key (a typo must not pass silently). Never
//! panics, whatever the input (proptest below).

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use reqwest::Url;

use crate::config_error::ConfigError;
use crate::transport_options::TransportOptions;

impl FunnelOptions {
    /// The core's config: a fixed or a learned limit, and `lease`, by default twice the
    /// attempt's `timeout` (an attempt outliving its slot has it counted free), within the
    /// longest duration accepted (a `timeout` of a year is one).
    pub fn config(
        &self,
        timeout: Duration,
    ) -> Result<resilient_core::FunnelConfig, resilient_core::Error> {
        let lease = self.lease.unwrap_or_else(|| {
            timeout
                .saturating_mul(2)
                .min(resilient_core::validate::MAX_DURATION)
        });
        match self.auto {
            Some(bounds) => resilient_core::FunnelConfig::adaptive(bounds, self.reserve, lease),
            None => resilient_core::FunnelConfig::new(self.limit, self.reserve, lease),
        }?
        .with_share(self.share)
    }
}

/// Full-jitter backoff bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffOptions {
    pub base: Duration,
    pub cap: Duration,
}

/// The funnel (bulkhead): `limit` slots per host, `reserve` of them only for web callers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FunnelOptions {
    /// The fixed limit; with `auto`, the learned limit's `max`.
    pub limit: u32,
    /// `'limit' => 'auto'`: the limit is learned within these bounds (`None`: fixed).
    pub auto: Option<resilient_core::AdaptiveConfig>,
    pub reserve: u32,
    /// Lease lifetime; `None` means the default, 2 × the attempt timeout (seed 000).
    pub lease: Option<Duration>,
    /// How long an attempt may wait for a free slot (counted in the deadline); zero, the
    /// default, fails fast.
    pub wait: Duration,
    /// Under contention web callers keep the `reserve` slots and background callers the
    /// others (`FunnelConfig::with_share`); off by default (web callers first). On shared
    /// memory and on Redis.
    pub share: bool,
}

/// The shared retry budget: each original adds `ratio`, each retry spends 1, `floor` retries
/// per `window` always allowed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetOptions {
    pub ratio: f64,
    pub floor: u32,
    pub window: Duration,
}

/// Circuit breaker settings (`None`: no breaker, the default). Enforced by the breaker guard
/// (crates/http/src/breaker.rs) on the state `resilient_core::CircuitBreaker` keeps per name.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CircuitOptions {
    pub failure_ratio: f64,
    pub min_calls: u32,
    pub window: Duration,
    pub open_for: Duration,
    /// Failures in a row that open it whatever the window says (`None`: `min_calls`).
    pub consecutive_failures: Option<u32>,
}

impl Default for CircuitOptions {
    fn default() -> Self {
        Self {
            failure_ratio: 0.5,
            min_calls: 20,
            window: Duration::from_secs(10),
            open_for: Duration::from_secs(5),
            consecutive_failures: None,
        }
    }
}

impl CircuitOptions {
    /// The core breaker's settings; `probe_timeout` comes from the attempt timeout.
    pub fn breaker_config(
        &self,
        probe_timeout: Duration,
    ) -> Result<resilient_core::BreakerConfig, resilient_core::Error> {
        let config = resilient_core::BreakerConfig::new(
            self.failure_ratio,
            self.min_calls,
            self.window,
            self.open_for,
            probe_timeout,
        )?;
        match self.consecutive_failures {
            Some(n) => config.with_consecutive_failures(n),
            None => Ok(config),
        }
    }
}

/// Where shared counters live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendKind {
    /// Host-wide shared memory (`resilient.shm_path`).
    Shm,
    /// A Redis server shared by every host (docs/redis.md).
    Redis(RedisUrl),
}

/// A `redis://`, `rediss://` or `unix://` URL, checked for its shape only. It may hold a
/// password: `Debug` shows the scheme only, and no error message contains it.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisUrl(String);

impl RedisUrl {
    /// The whole URL, password included: for the connection only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = self.0.split("://").next().unwrap_or("");
        write!(f, "RedisUrl({scheme}://…)")
    }
}

/// What a client's guards do while the Redis backend cannot answer in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnBackendError {
    /// The host's shared-memory funnel, budget and breaker, with the funnel's limit (and the
    /// budget's floor) divided by `hosts`.
    #[default]
    Local,
    /// Allow: no funnel slot, every retry, a closed breaker.
    Open,
    /// Refuse: the funnel is full, no retry, the breaker open.
    Closed,
}

/// A validated client configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    pub base_url: Option<Url>,
    pub connect_timeout: Duration,
    pub timeout: Duration,
    /// Whole-call deadline; `None`: only the attempt limits and an enclosing deadline bound it.
    pub deadline: Option<Duration>,
    pub max_attempts: u32,
    pub backoff: BackoffOptions,
    pub retry_on: Vec<u16>,
    pub max_retry_after: Duration,
    pub funnel: Option<FunnelOptions>,
    /// `None` when disabled with `'budget' => false`.
    pub budget: Option<BudgetOptions>,
    pub circuit: Option<CircuitOptions>,
    pub backend: BackendKind,
    /// What the guards do while the Redis backend is down or slow.
    pub on_backend_error: OnBackendError,
    /// How many hosts share the Redis backend: the `local` fallback divides the funnel's limit
    /// (and the budget's floor) by it. At least 1.
    pub hosts: u32,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub user_agent: HeaderValue,
    /// The largest response body accepted, in bytes (enforced while reading; over it the call
    /// fails as upstream failed, never retried). The PHP binding lowers it further to what
    /// `memory_limit` leaves.
    pub max_body: u64,
    /// TLS, proxy, redirects and decoding (shared by the client's requests).
    pub transport: Arc<TransportOptions>,
}

/// Default `max_body`: 32 MiB.
pub const DEFAULT_MAX_BODY: u64 = 32 * 1024 * 1024;
/// Largest `max_body` accepted: 4 GiB.
const MAX_MAX_BODY: u64 = 4 * 1024 * 1024 * 1024;

/// Upper bound for `hosts`.
const MAX_HOSTS: i64 = 1000;

/// Upper bound for `max_attempts`.
pub const MAX_ATTEMPTS: u32 = 100;

/// Most header values one request may carry, the client's `headers` and the request's
/// together: servers refuse far fewer (hyper's server takes 100 fields, nginx's default
/// buffers 32 KB of header lines), and the HTTP crate's header map panics past 24,576, so more
/// is a mistake named up front.
pub(crate) const MAX_HEADER_VALUES: usize = 1000;

/// The refusal of header values past [`MAX_HEADER_VALUES`]; `detail` says whose they were.
pub(crate) fn too_many_header_values(detail: &str) -> ConfigError {
    ConfigError::new(
        "headers",
        format!("more than {MAX_HEADER_VALUES} header values{detail}"),
    )
}

impl Default for ClientConfig {
    /// Laravel's client defaults for timeouts (connect 10 s, timeout 30 s), the seed's retry
    /// policy (3 attempts, 25 ms / 200 ms full jitter, 429 and 503) and the seed's budget.
    fn default() -> Self {
        Self {
            base_url: None,
            connect_timeout: Duration::from_secs(10),
            timeout: Duration::from_secs(30),
            deadline: None,
            max_attempts: 3,
            backoff: BackoffOptions {
                base: Duration::from_millis(25),
                cap: Duration::from_millis(200),
            },
            retry_on: vec![429, 503],
            max_retry_after: Duration::from_secs(30),
            funnel: None,
            budget: Some(BudgetOptions {
                ratio: 0.1,
                floor: 5,
                window: Duration::from_secs(60),
            }),
            circuit: None,
            backend: BackendKind::Shm,
            on_backend_error: OnBackendError::Local,
            hosts: 1,
            headers: Vec::new(),
            user_agent: HeaderValue::from_static(concat!("resilient/", env!("CARGO_PKG_VERSION"))),
            max_body: DEFAULT_MAX_BODY,
            transport: Arc::default(),
        }
    }
}

impl ClientConfig {
    /// The option keys of the configuration itself; [`TransportOptions::KEYS`] lists the
    /// transport's (a binding adds its own, such as `on_attempt`).
    pub const KEYS: &'static [&'static str] = CLIENT_KEYS;
}

/// Typed setters: the value rules of the client's own options live here, once. Each error
/// names the option; funnel and budget values are checked by `resilient_core`'s configs.
impl ClientConfig {
    /// An absolute `http://` or `https://` URL.
    pub fn set_base_url(&mut self, url: &str) -> Result<(), ConfigError> {
        self.base_url =
            Some(parse_http_url(url).map_err(|problem| ConfigError::new("base_url", problem))?);
        Ok(())
    }
    /// At least 1 ms.
    pub fn set_timeout(&mut self, timeout: Duration) -> Result<(), ConfigError> {
        self.timeout = at_least_1ms("timeout", timeout)?;
        Ok(())
    }
    /// At least 1 ms.
    pub fn set_connect_timeout(&mut self, timeout: Duration) -> Result<(), ConfigError> {
        self.connect_timeout = at_least_1ms("connect_timeout", timeout)?;
        Ok(())
    }
    /// At least 1 ms; `None`: no deadline of its own.
    pub fn set_deadline(&mut self, deadline: Option<Duration>) -> Result<(), ConfigError> {
        self.deadline = deadline.map(|d| at_least_1ms("deadline", d)).transpose()?;
        Ok(())
    }
    /// 1 to 100.
    pub fn set_max_attempts(&mut self, attempts: u32) -> Result<(), ConfigError> {
        if !(1..=MAX_ATTEMPTS).contains(&attempts) {
            return Err(ConfigError::new(
                "max_attempts",
                format!("must be an integer between 1 and {MAX_ATTEMPTS}, got {attempts}"),
            ));
        }
        self.max_attempts = attempts;
        Ok(())
    }
    /// Full-jitter bounds; `cap` not below `base`.
    pub fn set_backoff(&mut self, base: Duration, cap: Duration) -> Result<(), ConfigError> {
        if cap < base {
            return Err(ConfigError::new(
                "backoff.cap",
                "must not be smaller than backoff.base",
            ));
        }
        self.backoff = BackoffOptions { base, cap };
        Ok(())
    }
    /// HTTP error statuses 400..599: a success or a redirect retried would be sent again for
    /// nothing, then thrown as a failure.
    pub fn set_retry_on(&mut self, statuses: &[i64]) -> Result<(), ConfigError> {
        let mut out = Vec::with_capacity(statuses.len());
        for &status in statuses {
            if !(400..=599).contains(&status) {
                return Err(ConfigError::new(
                    "retry_on",
                    format!("must contain HTTP error statuses 400..599, got {status}"),
                ));
            }
            out.push(status as u16);
        }
        self.retry_on = out;
        Ok(())
    }
    pub fn set_max_retry_after(&mut self, wait: Duration) {
        self.max_retry_after = wait;
    }
    /// The funnel; its values are `FunnelConfig`'s (a lease is needed to check them: the
    /// default, from `timeout`, when `lease` is `None`). `None` disables it.
    pub fn set_funnel(
        &mut self,
        funnel: Option<FunnelOptions>,
    ) -> Result<(), resilient_core::Error> {
        if let Some(f) = funnel {
            f.config(self.timeout)?;
        }
        self.funnel = funnel;
        Ok(())
    }
    /// Circuit breaker settings; their values are `BreakerConfig`'s (`None` disables it).
    pub fn set_circuit(
        &mut self,
        circuit: Option<CircuitOptions>,
    ) -> Result<(), resilient_core::Error> {
        if let Some(c) = circuit {
            c.breaker_config(Duration::from_secs(1))?;
        }
        self.circuit = circuit;
        Ok(())
    }
    /// The retry budget (`None`: disabled).
    pub fn set_budget(&mut self, budget: Option<resilient_core::BudgetConfig>) {
        self.budget = budget.map(|b| BudgetOptions {
            ratio: b.ratio(),
            floor: b.floor(),
            window: b.window(),
        });
    }
    /// Options that the chosen backend cannot honour: a learned funnel limit
    /// (`'limit' => 'auto'`) lives in each host's shared memory, so it needs the shared-memory
    /// backend (on Redis the funnel would silently be its `max`). Call it once the backend is
    /// known (an option or `resilient.backend`).
    pub fn check_backend(&self) -> Result<(), ConfigError> {
        let auto = self.funnel.is_some_and(|f| f.auto.is_some());
        if auto && matches!(self.backend, BackendKind::Redis(_)) {
            return Err(ConfigError::new(
                "funnel.limit",
                "'auto' is not available with the redis backend (a learned limit lives in each \
                 host's shared memory); give a number",
            ));
        }
        Ok(())
    }
    /// `shm`, or a `redis://`, `rediss://` or `unix://` URL (never echoed: it may hold a
    /// password).
    pub fn set_backend(&mut self, backend: &str) -> Result<(), ConfigError> {
        self.backend = backend_kind(backend)?;
        Ok(())
    }
    /// `local`, `open` or `closed`.
    pub fn set_on_backend_error(&mut self, mode: &str) -> Result<(), ConfigError> {
        self.on_backend_error = match mode {
            "local" => OnBackendError::Local,
            "open" => OnBackendError::Open,
            "closed" => OnBackendError::Closed,
            other => {
                return Err(ConfigError::new(
                    "on_backend_error",
                    format!(
                        "must be 'local', 'open' or 'closed', got {:?}",
                        shown_name(other)
                    ),
                ))
            }
        };
        Ok(())
    }
    /// 1 to 1000.
    pub fn set_hosts(&mut self, hosts: i64) -> Result<(), ConfigError> {
        if !(1..=MAX_HOSTS).contains(&hosts) {
            return Err(ConfigError::new(
                "hosts",
                format!("must be an integer between 1 and {MAX_HOSTS}, got {hosts}"),
            ));
        }
        self.hosts = hosts as u32;
        Ok(())
    }
    /// Adds a default header (`option`: the path errors name). Values are never echoed.
    pub fn add_header(
        &mut self,
        option: &str,
        name: &[u8],
        value: &[u8],
    ) -> Result<(), ConfigError> {
        let shown = shown_name(&String::from_utf8_lossy(name));
        let path = format!("{option}.{shown}");
        let name = HeaderName::from_bytes(name).map_err(|_| {
            ConfigError::new(option, format!("{shown:?} is not a valid header name"))
        })?;
        refuse_framing(&name, &path)?;
        if name == "idempotency-key" {
            // A server that honours the key would answer every call after the first with the
            // first one's stored result.
            return Err(ConfigError::new(
                &path,
                "is one per call, never one for every call of a client: give it per request \
                 ('idempotency_key', or the request's headers)",
            ));
        }
        let value = header_bytes(value, &path)?;
        if self.headers.len() >= MAX_HEADER_VALUES {
            return Err(too_many_header_values(""));
        }
        self.headers.push((name, value));
        Ok(())
    }
    /// As [`add_header`](Self::add_header), replacing the values `headers` gave the name
    /// (`decode_content` as a string sets Accept-Encoding, as in Guzzle).
    pub fn set_header(
        &mut self,
        option: &str,
        name: &[u8],
        value: &[u8],
    ) -> Result<(), ConfigError> {
        // The values it replaces go first, so they do not count against the cap.
        if let Ok(replaced) = HeaderName::from_bytes(name) {
            self.headers.retain(|(n, _)| *n != replaced);
        }
        self.add_header(option, name, value)
    }
    pub fn set_user_agent(&mut self, value: &[u8]) -> Result<(), ConfigError> {
        self.user_agent = header_bytes(value, "user_agent")?;
        Ok(())
    }
    /// 1 byte to 4 GiB.
    pub fn set_max_body(&mut self, bytes: u64) -> Result<(), ConfigError> {
        if !(1..=MAX_MAX_BODY).contains(&bytes) {
            return Err(ConfigError::new(
                "max_body",
                format!("must be a number of bytes between 1 and {MAX_MAX_BODY}, got {bytes}"),
            ));
        }
        self.max_body = bytes;
        Ok(())
    }
}

/// A timeout the client counts in: at least `validate::MIN_TIMEOUT_SECONDS` (1 ms), the rule
/// the binding's options, `Context` and the ini caps share.
pub(crate) fn at_least_1ms(option: &str, d: Duration) -> Result<Duration, ConfigError> {
    use resilient_core::validate::MIN_TIMEOUT_SECONDS;
    if d.as_secs_f64() < MIN_TIMEOUT_SECONDS {
        return Err(ConfigError::new(
            option,
            format!(
                "must be at least {MIN_TIMEOUT_SECONDS} seconds, got {}",
                d.as_secs_f64()
            ),
        ));
    }
    Ok(d)
}

/// `Content-Length` and `Transfer-Encoding` say how the body is framed: the client sets them
/// from the body it sends. Given by hand they lie about it (a GET announcing 100 bytes it never
/// sends waits for its timeout, each attempt counted against the upstream; a body cut to the
/// announced length), so they are refused.
pub(crate) fn refuse_framing(name: &HeaderName, option: &str) -> Result<(), ConfigError> {
    if name == reqwest::header::CONTENT_LENGTH || name == reqwest::header::TRANSFER_ENCODING {
        return Err(ConfigError::new(
            option,
            "is set by the client from the body it sends; remove it",
        ));
    }
    Ok(())
}

fn header_bytes(value: &[u8], option: &str) -> Result<HeaderValue, ConfigError> {
    HeaderValue::from_bytes(value).map_err(|_| {
        ConfigError::new(
            option,
            "contains characters not allowed in a header value (control characters or line breaks)",
        )
    })
}

fn backend_kind(s: &str) -> Result<BackendKind, ConfigError> {
    let s = s.trim();
    if s == "shm" {
        return Ok(BackendKind::Shm);
    }
    let scheme = s
        .split_once("://")
        .map(|(scheme, _)| scheme.to_ascii_lowercase());
    if !matches!(scheme.as_deref(), Some("redis" | "rediss" | "unix")) {
        return Err(ConfigError::new(
            "backend",
            "must be 'shm' or a redis://, rediss:// or unix:// URL",
        ));
    }
    let url = parse_redis_url(s).map_err(|problem| ConfigError::new("backend", problem))?;
    if url.scheme() != "unix" && url.host_str().is_none_or(str::is_empty) {
        return Err(ConfigError::new("backend", "must have a host"));
    }
    if url.scheme() == "unix" && url.path().is_empty() {
        return Err(ConfigError::new("backend", "must have a socket path"));
    }
    Ok(BackendKind::Redis(RedisUrl(s.to_owned())))
}

/// A Redis URL parsed for its shape, or why not, in words that never quote it (it may hold a
/// password). A '?' or '#' left unencoded in the user or password ends the authority early:
/// `redis://u:s3cr?et@host` reads `u:s3cr` as host and port (the parser then speaks of a bad
/// port), `redis://:pa?ss@host` a query holding the host, `redis://u:pa?ss#wo@host` a fragment
/// holding it; each is said as such, without a part of the text. Any fragment is refused (the
/// server's certificate is always verified: there is no `#insecure`).
pub fn parse_redis_url(text: &str) -> Result<Url, String> {
    const NOT_SHOWN: &str = "(the rest is not shown: it may hold a password)";
    let url = Url::parse(text.trim()).map_err(|e| {
        let after_scheme = text.split_once("://").map_or("", |(_, rest)| rest);
        match after_scheme.rfind('@') {
            Some(at) if after_scheme[..at].contains(['?', '#']) => format!(
                "has a '?' or '#' in its user or password: percent-encode them as %3F and %23 \
                 {NOT_SHOWN}"
            ),
            // url's own words, which never quote the input.
            _ => format!("is not a valid Redis URL ({e})"),
        }
    })?;
    if url.query().is_some_and(|q| q.contains('@')) {
        return Err(format!(
            "has a '?' in its user or password, or an '@' in a query value: percent-encode \
             them as %3F and %40 {NOT_SHOWN}"
        ));
    }
    if let Some(fragment) = url.fragment() {
        return Err(if fragment.contains('@') {
            format!("has a '#' in its user or password: percent-encode it as %23 {NOT_SHOWN}")
        } else {
            "must not have a fragment ('#…'): the server's certificate is always verified".into()
        });
    }
    Ok(url)
}

/// Sets `name` to `value` alone: the values `headers` held for the name are dropped.
pub(crate) fn replace_header(
    headers: &mut Vec<(HeaderName, HeaderValue)>,
    name: HeaderName,
    value: HeaderValue,
) {
    headers.retain(|(n, _)| *n != name);
    headers.push((name, value));
}

/// The URL parser drops tabs and line breaks inside a URL without a word (WHATWG): the request
/// (or a proxy's password, its port) would be another than the one written. Refused, unquoted.
pub fn no_control_characters(url: &str) -> Result<(), String> {
    if url.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err(
            "contains a control character (a line break, tab or NUL); percent-encode it".into(),
        );
    }
    Ok(())
}

/// Parses an absolute http(s) URL with a host, or says why not (without echoing it: it may hold
/// credentials).
pub fn parse_http_url(text: &str) -> Result<Url, String> {
    let text = text.trim();
    no_control_characters(text)?;
    let url = Url::parse(text).map_err(|e| format!("is not a valid URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "must be an http:// or https:// URL, got scheme '{}'",
            truncate(url.scheme(), 16)
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("must have a host".into());
    }
    Ok(url)
}

const CLIENT_KEYS: &[&str] = &[
    "base_url",
    "connect_timeout",
    "timeout",
    "deadline",
    "max_attempts",
    "backoff",
    "retry_on",
    "max_retry_after",
    "funnel",
    "budget",
    "circuit",
    "backend",
    "on_backend_error",
    "hosts",
    "headers",
    "user_agent",
    "max_body",
];

pub(crate) fn truncate(s: &str, max_chars: usize) -> String {
    s.chars().take(max_chars).collect()
}

/// A name a caller gave (a header's, an option's key) as an error may show it: up to its first
/// character that no such name has, then "…", and 64 characters at most. A whole
/// `Authorization: Bearer …` line put where a name belongs never shows its token. A control
/// character there (a NUL, a line break: often why the name is refused) is kept, for the
/// message's escaping to show.
pub fn shown_name(name: &str) -> String {
    // RFC 9110 token characters; '.' also separates an option's path.
    let tchar = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    let end = name.find(|c: char| !tchar(c)).unwrap_or(name.len());
    let mut shown = truncate(&name[..end], 64);
    if shown.len() < end {
        shown.push('…');
        return shown;
    }
    let mut rest = name[end..].chars();
    match rest.next() {
        Some(c) if c.is_control() => {
            shown.push(c);
            if rest.next().is_some() {
                shown.push('…');
            }
        }
        Some(_) => shown.push('…'),
        None => {}
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn err(e: ConfigError) -> String {
        e.to_string()
    }

    #[test]
    fn a_shown_name_stops_where_no_name_goes_on() {
        assert_eq!(shown_name("X-Request-Id"), "X-Request-Id");
        assert_eq!(shown_name("funnel.limit"), "funnel.limit");
        assert_eq!(shown_name("Authorization: Bearer t0k"), "Authorization…");
        assert_eq!(shown_name("Bearer t0k"), "Bearer…");
        assert_eq!(shown_name(" t0k"), "…");
        assert_eq!(shown_name(&"a".repeat(70)), format!("{}…", "a".repeat(64)));
        assert_eq!(shown_name("é"), "…");
        assert_eq!(shown_name("time\0out"), "time\0…");
        assert_eq!(shown_name("X\r\nY"), "X\r…");
        assert_eq!(shown_name("a\0"), "a\0");
    }

    #[test]
    fn setters_keep_what_they_are_given() {
        let mut c = ClientConfig::default();
        c.set_base_url("https://api.shipping.example").unwrap();
        c.set_timeout(Duration::from_millis(300)).unwrap();
        c.set_deadline(Some(Duration::from_millis(850))).unwrap();
        let funnel = FunnelOptions {
            limit: 10,
            auto: None,
            reserve: 3,
            lease: Some(Duration::from_secs(5)),
            wait: Duration::ZERO,
            share: false,
        };
        c.set_funnel(Some(funnel)).unwrap();
        c.add_header("headers", b"Accept", b"a").unwrap();
        c.add_header("headers", b"Accept", b"b").unwrap();
        c.set_max_body(1024).unwrap();
        assert_eq!(c.timeout, Duration::from_millis(300));
        assert_eq!(c.deadline, Some(Duration::from_millis(850)));
        assert_eq!(c.funnel, Some(funnel));
        assert_eq!((c.headers.len(), c.max_body), (2, 1024));
        assert_eq!(
            c.base_url.unwrap().as_str(),
            "https://api.shipping.example/"
        );
        let mut c = ClientConfig::default();
        c.set_budget(None);
        assert_eq!(c.budget, None);
    }

    #[test]
    fn errors_name_the_option() {
        let mut c = ClientConfig::default();
        assert!(err(c.set_max_body(0).unwrap_err())
            .starts_with("option 'max_body': must be a number of bytes between 1 and"));
        assert_eq!(
            err(c.set_timeout(Duration::ZERO).unwrap_err()),
            "option 'timeout': must be at least 0.001 seconds, got 0"
        );
        assert_eq!(
            err(c.set_max_attempts(0).unwrap_err()),
            "option 'max_attempts': must be an integer between 1 and 100, got 0"
        );
        assert!(err(c
            .set_backoff(Duration::from_secs(1), Duration::ZERO)
            .unwrap_err())
        .starts_with("option 'backoff.cap'"));
        assert!(err(c.set_retry_on(&[429, 700]).unwrap_err()).starts_with("option 'retry_on'"));
        assert!(err(c.set_retry_on(&[200]).unwrap_err()).contains("error statuses 400..599"));
        assert!(err(c.set_retry_on(&[399]).unwrap_err()).contains("got 399"));
        assert!(c.set_retry_on(&[400, 599]).is_ok());
        let full = FunnelOptions {
            limit: 3,
            auto: None,
            reserve: 3,
            lease: None,
            wait: Duration::ZERO,
            share: false,
        };
        assert_eq!(
            c.set_funnel(Some(full)).unwrap_err().argument(),
            Some("reserve")
        );
        let circuit = CircuitOptions {
            failure_ratio: 0.0,
            ..CircuitOptions::default()
        };
        assert_eq!(
            c.set_circuit(Some(circuit)).unwrap_err().argument(),
            Some("failure_ratio")
        );
        assert!(err(c.set_base_url("not a url").unwrap_err()).starts_with("option 'base_url'"));
        assert!(err(c.set_base_url("ftp://x").unwrap_err()).starts_with("option 'base_url'"));
        assert!(err(c.add_header("headers", b"bad name", b"x").unwrap_err())
            .starts_with("option 'headers'"));
    }

    #[test]
    fn share_needs_a_reserve_and_a_learned_limit_the_shared_memory_backend() {
        let mut c = ClientConfig::default();
        let shared = FunnelOptions {
            limit: 4,
            auto: None,
            reserve: 0,
            lease: None,
            wait: Duration::ZERO,
            share: true,
        };
        assert_eq!(
            c.set_funnel(Some(shared)).unwrap_err().argument(),
            Some("share")
        );
        c.set_funnel(Some(FunnelOptions {
            reserve: 2,
            ..shared
        }))
        .unwrap();
        assert!(c
            .funnel
            .unwrap()
            .config(Duration::from_secs(1))
            .unwrap()
            .share());
        c.set_backend("redis://127.0.0.1:6379").unwrap();
        assert_eq!(c.check_backend(), Ok(()), "share works on Redis too");
        c.set_funnel(Some(FunnelOptions {
            auto: Some(resilient_core::AdaptiveConfig::new(1, 16, 4).unwrap()),
            limit: 16,
            reserve: 2,
            ..shared
        }))
        .unwrap();
        assert_eq!(
            err(c.check_backend().unwrap_err()),
            "option 'funnel.limit': 'auto' is not available with the redis backend (a learned \
             limit lives in each host's shared memory); give a number"
        );
        c.set_backend("shm").unwrap();
        assert_eq!(
            c.check_backend(),
            Ok(()),
            "a learned limit in shared memory"
        );
    }

    #[test]
    fn a_redis_url_is_never_echoed() {
        let mut c = ClientConfig::default();
        c.set_backend("redis://:s3cret@127.0.0.1:6379/0").unwrap();
        assert!(matches!(c.backend, BackendKind::Redis(_)));
        assert!(!format!("{c:?}").contains("s3cret"));
        // Each refused naming the option, nothing of the password quoted; a '?' or '#' left in
        // the password is said as such (the URL parser alone speaks of a bad port or an empty
        // host).
        for (bad, said) in [
            ("redis://:s3cret@[::1:6379/0", "option 'backend'"),
            ("redis://:s3cret@", "option 'backend'"),
            ("mysql://:s3cret@x", "option 'backend'"),
            (
                "redis://default:s3cr?et@10.0.0.5:6379/0",
                "option 'backend': has a '?'",
            ),
            (
                "redis://:s3cr?et@10.0.0.5:6379/0",
                "option 'backend': has a '?'",
            ),
            (
                "redis://default:s3cr#et@10.0.0.5:6379/0",
                "option 'backend': has a '?'",
            ),
        ] {
            let e = err(c.set_backend(bad).unwrap_err());
            assert!(e.starts_with(said) && !e.contains("s3cr"), "{bad}: {e}");
        }
        // The scheme in any case, as RFC 3986 has it.
        c.set_backend("REDIS://127.0.0.1:6379/0").unwrap();
        assert!(matches!(c.backend, BackendKind::Redis(_)));
        let e = err(c.set_on_backend_error("retry").unwrap_err());
        assert!(e.contains("'local', 'open' or 'closed'"), "{e}");
        assert!(err(c.set_hosts(0).unwrap_err()).starts_with("option 'hosts'"));
    }

    #[test]
    fn header_values_are_not_echoed() {
        let mut c = ClientConfig::default();
        let e = err(c
            .add_header("headers", b"Authorization", b"Bearer s3cret\r\nX: y")
            .unwrap_err());
        assert!(
            e.starts_with("option 'headers.Authorization'") && !e.contains("s3cret"),
            "{e}"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Whatever a caller sets, a setter answers Ok or an error: it never panics.
        #[test]
        fn setters_never_panic(
            nanos in any::<u64>(),
            n in any::<u32>(),
            statuses in prop::collection::vec(any::<i64>(), 0..4),
            text in "\\PC{0,24}",
            bytes in prop::collection::vec(any::<u8>(), 0..16),
        ) {
            let mut c = ClientConfig::default();
            let d = Duration::from_nanos(nanos);
            let _ = c.set_timeout(d);
            let _ = c.set_connect_timeout(d);
            let _ = c.set_deadline(Some(d));
            let _ = c.set_max_attempts(n);
            let _ = c.set_backoff(d, Duration::from_nanos(nanos / 2));
            let _ = c.set_retry_on(&statuses);
            let _ = c.set_funnel(Some(FunnelOptions { limit: n % 100, auto: None, reserve: n % 7, lease: Some(d), wait: d, share: n % 2 == 0 }));
            let _ = c.set_base_url(&text);
            let _ = c.set_backend(&text);
            let _ = c.add_header("headers", text.as_bytes(), &bytes);
            let _ = c.set_user_agent(&bytes);
            let _ = c.set_max_body(u64::from(n));
        }
    }
}
