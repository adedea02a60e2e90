//! `ClientConfig`: the client's options, set through typed setters that own the value rules
//! (the PHP binding's `src/options.rs` calls them), or read from a JSON tree
//! ([`ClientConfig::from_json`], for Rust callers and tests) through the same setters.
//!
//! Seconds and counts follow `resilient_core::validate` (finite, not negative, at most a year),
//! the funnel and the budget `FunnelConfig` / `BudgetConfig`: one owner per rule. Parsing is
//! strict: an unknown key is an error naming the key (a typo must not pass silently). Never
//! panics, whatever the input (proptest below).

use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use reqwest::Url;
use serde_json::{Map, Value};

use crate::config_error::ConfigError;

/// Full-jitter backoff bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffOptions {
    pub base: Duration,
    pub cap: Duration,
}

/// The funnel (bulkhead): `limit` slots per host, `reserve` of them only for web callers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FunnelOptions {
    pub limit: u32,
    pub reserve: u32,
    /// Lease lifetime; `None` means the default, 2 × the attempt timeout (seed 000).
    pub lease: Option<Duration>,
    /// How long an attempt may wait for a free slot (counted in the deadline); zero, the
    /// default, fails fast.
    pub wait: Duration,
}

/// The shared retry budget: each original adds `ratio`, each retry spends 1, `floor` retries
/// per `window` always allowed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetOptions {
    pub ratio: f64,
    pub floor: u32,
    pub window: Duration,
}

/// Circuit breaker settings: accepted and validated now, enforced by a later issue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CircuitOptions {
    pub failure_ratio: f64,
    pub min_calls: u32,
    pub window: Duration,
    pub open_for: Duration,
}

impl Default for CircuitOptions {
    fn default() -> Self {
        Self {
            failure_ratio: 0.5,
            min_calls: 20,
            window: Duration::from_secs(10),
            open_for: Duration::from_secs(5),
        }
    }
}

/// Where shared counters live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// Host-wide shared memory (`resilient.shm_path`).
    Shm,
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
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub user_agent: HeaderValue,
    /// The largest response body accepted, in bytes (enforced while reading; over it the call
    /// fails as upstream failed, never retried). The PHP binding lowers it further to what
    /// `memory_limit` leaves.
    pub max_body: u64,
}

/// Default `max_body`: 32 MiB.
pub const DEFAULT_MAX_BODY: u64 = 32 * 1024 * 1024;
/// Largest `max_body` accepted: 4 GiB.
const MAX_MAX_BODY: u64 = 4 * 1024 * 1024 * 1024;

/// Upper bound for `max_attempts`.
const MAX_ATTEMPTS: u32 = 100;

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
            headers: Vec::new(),
            user_agent: HeaderValue::from_static(concat!("resilient/", env!("CARGO_PKG_VERSION"))),
            max_body: DEFAULT_MAX_BODY,
        }
    }
}

impl ClientConfig {
    /// The option keys a configuration knows (a binding adds its own, such as `on_attempt`).
    pub const KEYS: &'static [&'static str] = CLIENT_KEYS;

    /// Parses and validates an options tree (a JSON object; `null` means all defaults).
    pub fn from_json(options: &Value) -> Result<Self, ConfigError> {
        let mut config = ClientConfig::default();
        let map = match options {
            Value::Null => return Ok(config),
            Value::Object(map) => map,
            other => {
                return Err(ConfigError::new(
                    "options",
                    format!("must be an array of options, got {}", describe(other)),
                ))
            }
        };
        for (key, value) in map {
            let key = key.as_str();
            match key {
                "base_url" => config.set_base_url(&string_of(value, key)?)?,
                "connect_timeout" => config.set_connect_timeout(secs(value, key)?)?,
                "timeout" => config.set_timeout(secs(value, key)?)?,
                "deadline" => config.set_deadline(optional(value, |v| secs(v, key))?)?,
                "max_attempts" => config.set_max_attempts(unsigned_of(value, key)?)?,
                "backoff" => {
                    let (mut base, mut cap) = (config.backoff.base, config.backoff.cap);
                    for (k, v) in object(value, key)? {
                        match k.as_str() {
                            "base" => base = secs(v, "backoff.base")?,
                            "cap" => cap = secs(v, "backoff.cap")?,
                            _ => return Err(unknown(k, &["base", "cap"]).within(key)),
                        }
                    }
                    config.set_backoff(base, cap)?
                }
                "retry_on" => {
                    let items = value.as_array().ok_or_else(|| {
                        ConfigError::new(
                            key,
                            format!("must be a list of HTTP statuses, got {}", describe(value)),
                        )
                    })?;
                    let statuses = items
                        .iter()
                        .map(|v| int_of(v, key))
                        .collect::<Result<Vec<_>, _>>()?;
                    config.set_retry_on(&statuses)?
                }
                "max_retry_after" => config.set_max_retry_after(secs(value, key)?),
                "funnel" => {
                    let funnel = optional(value, |v| parse_funnel(v).map_err(|e| e.within(key)))?;
                    config
                        .set_funnel(funnel)
                        .map_err(|e| core_error("funnel.", e))?
                }
                "budget" => {
                    let budget = optional(value, |v| parse_budget(v))?;
                    config.set_budget(budget)
                }
                "circuit" => {
                    let circuit = optional(value, |v| parse_circuit(v).map_err(|e| e.within(key)))?;
                    config.set_circuit(circuit)?
                }
                "backend" => config.set_backend(&string_of(value, key)?)?,
                "headers" => config.headers = parse_headers(value, key)?,
                "user_agent" => config.user_agent = header_value(value, key)?,
                "max_body" => {
                    let n = int_of(value, key)?;
                    let bytes = u64::try_from(n).map_err(|_| {
                        core_error("", resilient_core::validate::unsigned(key, n).unwrap_err())
                    })?;
                    config.set_max_body(bytes)?
                }
                _ => return Err(unknown(key, CLIENT_KEYS)),
            }
        }
        Ok(config)
    }
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
    /// HTTP statuses 100..599.
    pub fn set_retry_on(&mut self, statuses: &[i64]) -> Result<(), ConfigError> {
        let mut out = Vec::with_capacity(statuses.len());
        for &status in statuses {
            if !(100..=599).contains(&status) {
                return Err(ConfigError::new(
                    "retry_on",
                    format!("must contain HTTP statuses 100..599, got {status}"),
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
    /// default, 2 × `timeout`, when `lease` is `None`). `None` disables it.
    pub fn set_funnel(
        &mut self,
        funnel: Option<FunnelOptions>,
    ) -> Result<(), resilient_core::Error> {
        if let Some(f) = funnel {
            resilient_core::FunnelConfig::new(
                f.limit,
                f.reserve,
                f.lease.unwrap_or(self.timeout.saturating_mul(2)),
            )?;
        }
        self.funnel = funnel;
        Ok(())
    }
    /// Circuit breaker settings (validated now, enforced by a later issue): `failure_ratio` in
    /// (0, 1], `min_calls` 1 to 1,000,000, `window` and `open_for` at least 1 ms.
    pub fn set_circuit(&mut self, circuit: Option<CircuitOptions>) -> Result<(), ConfigError> {
        if let Some(c) = circuit {
            if !(c.failure_ratio > 0.0 && c.failure_ratio <= 1.0) {
                return Err(ConfigError::new(
                    "circuit.failure_ratio",
                    format!(
                        "must be greater than 0 and at most 1, got {}",
                        c.failure_ratio
                    ),
                ));
            }
            if !(1..=1_000_000).contains(&c.min_calls) {
                return Err(ConfigError::new(
                    "circuit.min_calls",
                    format!(
                        "must be an integer between 1 and 1000000, got {}",
                        c.min_calls
                    ),
                ));
            }
            at_least_1ms("circuit.window", c.window)?;
            at_least_1ms("circuit.open_for", c.open_for)?;
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
    /// Only `shm` today; a Redis URL is refused without being echoed (it may hold a password).
    pub fn set_backend(&mut self, backend: &str) -> Result<(), ConfigError> {
        self.backend = backend_kind(backend)?;
        Ok(())
    }
    /// Adds a default header (`option`: the path errors name). Values are never echoed.
    pub fn add_header(
        &mut self,
        option: &str,
        name: &[u8],
        value: &[u8],
    ) -> Result<(), ConfigError> {
        let path = format!("{option}.{}", String::from_utf8_lossy(name));
        let name = HeaderName::from_bytes(name).map_err(|_| {
            ConfigError::new(
                option,
                format!(
                    "{:?} is not a valid header name",
                    truncate(&String::from_utf8_lossy(name), 64)
                ),
            )
        })?;
        let value = header_bytes(value, &path)?;
        self.headers.push((name, value));
        Ok(())
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

fn at_least_1ms(option: &str, d: Duration) -> Result<Duration, ConfigError> {
    if d < Duration::from_millis(1) {
        return Err(ConfigError::new(option, "must be at least 0.001 seconds"));
    }
    Ok(d)
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
    match s {
        "shm" => Ok(BackendKind::Shm),
        s if s.starts_with("redis://")
            || s.starts_with("rediss://")
            || s.starts_with("unix://") =>
        {
            Err(ConfigError::new(
                "backend",
                "the Redis backend is not supported yet (it arrives with a later issue); use 'shm'",
            ))
        }
        _ => Err(ConfigError::new(
            "backend",
            "must be 'shm' (or, later, a redis:// URL)",
        )),
    }
}

/// Parses an absolute http(s) URL with a host, or says why not (without echoing it: it may hold
/// credentials).
pub fn parse_http_url(text: &str) -> Result<Url, String> {
    let url = Url::parse(text.trim()).map_err(|e| format!("is not a valid URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "must be an http:// or https:// URL, got scheme '{}'",
            truncate(url.scheme(), 16)
        ));
    }
    if url.host_str().map_or(true, str::is_empty) {
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
    "headers",
    "user_agent",
    "max_body",
];

/// `null` or `false` disables an optional section.
fn optional<T>(
    value: &Value,
    parse: impl FnOnce(&Value) -> Result<T, ConfigError>,
) -> Result<Option<T>, ConfigError> {
    match value {
        Value::Null | Value::Bool(false) => Ok(None),
        other => parse(other).map(Some),
    }
}

fn parse_funnel(value: &Value) -> Result<FunnelOptions, ConfigError> {
    let (mut limit, mut reserve, mut lease, mut wait) = (None, 0, None, Duration::ZERO);
    for (key, v) in object(value, "")? {
        match key.as_str() {
            "limit" => limit = Some(unsigned_of(v, key)?),
            "reserve" => reserve = unsigned_of(v, key)?,
            "lease" => lease = optional(v, |v| secs(v, key))?,
            "wait" => wait = secs(v, key)?,
            _ => return Err(unknown(key, &["limit", "reserve", "lease", "wait"])),
        }
    }
    let limit = limit.ok_or_else(|| ConfigError::new("limit", "is required"))?;
    Ok(FunnelOptions {
        limit,
        reserve,
        lease,
        wait,
    })
}

/// The budget's values are `BudgetConfig`'s (resilient_core).
fn parse_budget(value: &Value) -> Result<resilient_core::BudgetConfig, ConfigError> {
    let (mut ratio, mut floor, mut window) = (0.1, 5, Duration::from_secs(60));
    for (key, v) in object(value, "budget")? {
        let path = format!("budget.{key}");
        match key.as_str() {
            "ratio" => ratio = float_of(v, &path)?,
            "floor" => floor = unsigned_of(v, &path)?,
            "window" => window = secs(v, &path)?,
            _ => return Err(unknown(key, &["ratio", "floor", "window"]).within("budget")),
        }
    }
    resilient_core::BudgetConfig::new(ratio, floor, window).map_err(|e| core_error("budget.", e))
}

fn parse_circuit(value: &Value) -> Result<CircuitOptions, ConfigError> {
    let mut circuit = CircuitOptions::default();
    for (key, v) in object(value, "")? {
        match key.as_str() {
            "failure_ratio" => circuit.failure_ratio = float_of(v, key)?,
            "min_calls" => circuit.min_calls = unsigned_of(v, key)?,
            "window" => circuit.window = secs(v, key)?,
            "open_for" => circuit.open_for = secs(v, key)?,
            _ => {
                return Err(unknown(
                    key,
                    &["failure_ratio", "min_calls", "window", "open_for"],
                ))
            }
        }
    }
    Ok(circuit)
}

/// Default headers: name => string (or number). Values are never echoed in errors.
pub(crate) fn parse_headers(
    value: &Value,
    option: &str,
) -> Result<Vec<(HeaderName, HeaderValue)>, ConfigError> {
    let map = match value {
        Value::Object(map) => map,
        Value::Array(items) if items.is_empty() => return Ok(Vec::new()), // PHP's [] is a list
        other => {
            return Err(ConfigError::new(
                option,
                format!("must be an array of name => value, got {}", describe(other)),
            ))
        }
    };
    let mut headers = Vec::with_capacity(map.len());
    for (name, v) in map {
        let header_name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            ConfigError::new(
                option,
                format!("{:?} is not a valid header name", truncate(name, 64)),
            )
        })?;
        let values: Vec<&Value> = match v {
            Value::Array(list) => list.iter().collect(),
            single => vec![single],
        };
        for value in values {
            headers.push((
                header_name.clone(),
                header_value(value, &format!("{option}.{name}"))?,
            ));
        }
    }
    Ok(headers)
}

pub(crate) fn header_value(value: &Value, option: &str) -> Result<HeaderValue, ConfigError> {
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => {
            return Err(ConfigError::new(
                option,
                format!("must be a string, got {}", describe(other)),
            ))
        }
    };
    HeaderValue::from_str(&text).map_err(|_| {
        ConfigError::new(
            option,
            "contains characters not allowed in a header value (control characters or line breaks)",
        )
    })
}

pub(crate) fn object<'a>(
    value: &'a Value,
    option: &str,
) -> Result<&'a Map<String, Value>, ConfigError> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    match value {
        Value::Object(map) => Ok(map),
        Value::Array(items) if items.is_empty() => Ok(EMPTY.get_or_init(Map::new)),
        other => Err(ConfigError::new(
            option,
            format!("must be an array of options, got {}", describe(other)),
        )),
    }
}

pub(crate) fn unknown(key: &str, known: &[&str]) -> ConfigError {
    ConfigError::new(
        truncate(key, 64),
        format!("unknown option (known: {})", known.join(", ")),
    )
}

/// A number (type only; the owner checks the value).
fn float_of(value: &Value, option: &str) -> Result<f64, ConfigError> {
    value.as_f64().ok_or_else(|| {
        ConfigError::new(option, format!("must be a number, got {}", describe(value)))
    })
}

/// An integer; an integral float (3.0) is accepted (type only).
fn int_of(value: &Value, option: &str) -> Result<i64, ConfigError> {
    integer(value).ok_or_else(|| {
        ConfigError::new(
            option,
            format!("must be an integer, got {}", describe(value)),
        )
    })
}

/// A count: `resilient_core`'s rule (not negative, fits a u32).
fn unsigned_of(value: &Value, option: &str) -> Result<u32, ConfigError> {
    resilient_core::validate::unsigned(option, int_of(value, option)?)
        .map_err(|e| core_error("", e))
}

/// Seconds: `resilient_core`'s rule (finite, not negative, at most a year).
fn secs(value: &Value, option: &str) -> Result<Duration, ConfigError> {
    resilient_core::validate::duration(option, float_of(value, option)?)
        .map_err(|e| core_error("", e))
}

fn string_of(value: &Value, option: &str) -> Result<String, ConfigError> {
    value.as_str().map(str::to_owned).ok_or_else(|| {
        ConfigError::new(option, format!("must be a string, got {}", describe(value)))
    })
}

/// A `resilient_core` value error as this crate's, the option path (`prefix` + the core's
/// argument) in front of the core's words.
fn core_error(prefix: &str, e: resilient_core::Error) -> ConfigError {
    let message = e.to_string();
    match e.argument() {
        Some(argument) => {
            let problem = message
                .strip_prefix(argument)
                .and_then(|m| m.strip_prefix(": "))
                .unwrap_or(&message);
            ConfigError::new(format!("{prefix}{argument}"), problem)
        }
        None => ConfigError::new(prefix.trim_end_matches('.'), message),
    }
}

fn integer(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64().or_else(|| {
            let f = n.as_f64()?;
            (f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e15).then_some(f as i64)
        }),
        _ => None,
    }
}

/// A short description of a value's type for messages (strings are not echoed: secrets).
pub(crate) fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("{b}"),
        Value::Number(n) => format!("{n}"),
        Value::String(s) if matches!(s.as_str(), "NAN" | "INF" | "-INF") => s.clone(),
        Value::String(_) => "a string".into(),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "an array".into(),
    }
}

pub(crate) fn truncate(s: &str, max_chars: usize) -> String {
    s.chars().take(max_chars).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn err(v: Value) -> String {
        ClientConfig::from_json(&v).unwrap_err().to_string()
    }

    #[test]
    fn the_design_example_parses() {
        let c = ClientConfig::from_json(&json!({
            "base_url": "https://api.shipping.example", "connect_timeout": 0.3, "timeout": 0.3,
            "deadline": 0.85, "max_attempts": 3, "backoff": {"base": 0.025, "cap": 0.2},
            "retry_on": [429, 503], "max_retry_after": 30.0,
            "funnel": {"limit": 10, "reserve": 3, "lease": 5.0},
            "budget": {"ratio": 0.1, "floor": 5, "window": 60.0},
            "circuit": {"failure_ratio": 0.5, "min_calls": 20, "window": 10.0, "open_for": 5.0},
            "backend": "shm", "headers": {"X-Api-Key": "k", "Accept": ["a", "b"]}, "user_agent": "me/1"
        }))
        .unwrap();
        assert_eq!(c.timeout, Duration::from_millis(300));
        assert_eq!(c.deadline, Some(Duration::from_millis(850)));
        assert_eq!(
            c.funnel,
            Some(FunnelOptions {
                limit: 10,
                reserve: 3,
                lease: Some(Duration::from_secs(5)),
                wait: Duration::ZERO
            })
        );
        assert_eq!(c.headers.len(), 3);
        assert_eq!(
            c.base_url.unwrap().as_str(),
            "https://api.shipping.example/"
        );
        assert_eq!(
            ClientConfig::from_json(&json!({})).unwrap(),
            ClientConfig::default()
        );
        assert_eq!(
            ClientConfig::from_json(&json!({"budget": false}))
                .unwrap()
                .budget,
            None
        );
    }

    #[test]
    fn errors_name_the_option() {
        assert_eq!(err(json!({"timout": 1})), "option 'timout': unknown option (known: base_url, connect_timeout, timeout, deadline, max_attempts, backoff, retry_on, max_retry_after, funnel, budget, circuit, backend, headers, user_agent, max_body)");
        assert!(err(json!({"max_body": 0}))
            .starts_with("option 'max_body': must be a number of bytes between 1 and"));
        assert!(err(json!({"max_body": 1.5})).starts_with("option 'max_body'"));
        assert_eq!(
            ClientConfig::from_json(&json!({"max_body": 1024}))
                .unwrap()
                .max_body,
            1024
        );
        assert_eq!(
            err(json!({"timeout": -1})),
            "option 'timeout': must not be negative, got -1"
        );
        assert!(err(json!({"timeout": "1"})).contains("'timeout': must be a number, got a string"));
        // No PHP sentinels here: "NAN" is a string like any other.
        assert!(err(json!({"timeout": "NAN"})).contains("'timeout': must be a number, got"));
        assert!(err(json!({"on_attempt": null})).contains("'on_attempt': unknown option"));
        assert!(err(json!({"timeout": 0})).contains("'timeout': must be at least"));
        assert!(err(json!({"max_attempts": 0})).contains("'max_attempts'"));
        assert!(err(json!({"max_attempts": 2.5})).contains("'max_attempts': must be an integer"));
        assert!(err(json!({"backoff": {"bsae": 1}})).starts_with("option 'backoff.bsae': unknown"));
        assert!(err(json!({"backoff": {"base": -0.1}})).starts_with("option 'backoff.base'"));
        assert!(
            err(json!({"backoff": {"base": 1, "cap": 0.5}})).starts_with("option 'backoff.cap'")
        );
        assert!(err(json!({"retry_on": [429, 700]})).starts_with("option 'retry_on'"));
        assert!(err(json!({"funnel": {"limit": 3, "reserve": 3}}))
            .starts_with("option 'funnel.reserve'"));
        assert!(err(json!({"funnel": {"reserve": 1}}))
            .starts_with("option 'funnel.limit': is required"));
        assert!(err(json!({"budget": {"ratio": -1}})).starts_with("option 'budget.ratio'"));
        assert!(err(json!({"circuit": {"failure_ratio": 0}}))
            .starts_with("option 'circuit.failure_ratio'"));
        assert!(err(json!({"base_url": "not a url"})).starts_with("option 'base_url'"));
        assert!(err(json!({"base_url": "ftp://x"})).starts_with("option 'base_url'"));
        assert!(err(json!({"headers": {"bad name": "x"}})).starts_with("option 'headers'"));
        assert!(err(json!("x")).starts_with("option 'options'"));
        assert_eq!(
            err(json!({"backoff": 5})),
            "option 'backoff': must be an array of options, got 5"
        );
        assert!(err(json!({"funnel": "x"})).starts_with("option 'funnel': must be an array"));
    }

    #[test]
    fn redis_is_not_supported_yet_and_its_url_is_not_echoed() {
        let e = err(json!({"backend": "redis://:s3cret@127.0.0.1:6379/0"}));
        assert!(
            e.contains("not supported yet") && !e.contains("s3cret"),
            "{e}"
        );
    }

    #[test]
    fn header_values_are_not_echoed() {
        let e = err(json!({"headers": {"Authorization": "Bearer s3cret\r\nX: y"}}));
        assert!(
            e.starts_with("option 'headers.Authorization'") && !e.contains("s3cret"),
            "{e}"
        );
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let key = prop_oneof![
            Just("base_url".to_string()),
            Just("timeout".to_string()),
            Just("deadline".to_string()),
            Just("max_attempts".to_string()),
            Just("backoff".to_string()),
            Just("base".to_string()),
            Just("cap".to_string()),
            Just("retry_on".to_string()),
            Just("funnel".to_string()),
            Just("limit".to_string()),
            Just("reserve".to_string()),
            Just("lease".to_string()),
            Just("budget".to_string()),
            Just("ratio".to_string()),
            Just("circuit".to_string()),
            Just("headers".to_string()),
            Just("backend".to_string()),
            Just("connect_timeout".to_string()),
            "\\PC{0,8}",
        ];
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<f64>().prop_map(|f| json!(f)),
            prop_oneof![
                Just("NAN".to_string()),
                Just("INF".to_string()),
                Just("shm".to_string()),
                Just("redis://x".to_string()),
                Just("http://127.0.0.1:1".to_string()),
                "\\PC{0,12}"
            ]
            .prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((key.clone(), inner), 0..6)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn random_json_never_panics(v in arb_json()) {
            let _ = ClientConfig::from_json(&v);
        }
    }
}
