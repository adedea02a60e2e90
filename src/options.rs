//! The client's options array → `resilient_http::ClientConfig`, and per-request options →
//! `resilient_http::RequestOptions`: the binding's one place for PHP → Rust conversion.
//!
//! Shape and type only: which keys exist (an unknown key is a `\ValueError` naming it), which
//! are arrays, and PHP's coercive typing for numbers (`"4"`, `4.0` and `"0.5"` accepted as
//! PHP's own functions accept them; anything else a `\TypeError` in PHP's words,
//! `option 'funnel.limit' must be of type int, string given`, see [`crate::coerce`]). The
//! values' rules belong to their owners: seconds, counts and the funnel and budget configs to
//! `resilient_core` (the same functions `new Funnel(...)` and `new RetryBudget(...)` use),
//! timeouts, backoff, `retry_on`, headers to `resilient_http`'s setters. Their message gets the
//! option path in front: `option 'funnel.limit': must be between 1 and 64, got 0`
//! (`\ValueError`, as through `new Funnel('x', 0)`: `limit: must be between 1 and 64, got 0`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ext_php_rs::convert::IntoZvalDyn;
use ext_php_rs::exception::PhpException;
use ext_php_rs::prelude::*;
use ext_php_rs::types::{ArrayKey, ZendCallable, ZendHashTable, Zval};
use resilient_core::validate;
use resilient_http::{Body, RequestOptions};
use resilient_http::{CircuitOptions, FunnelOptions};
use resilient_http::{ClientConfig, ConfigError, TransportOptions};

use crate::exceptions;
use crate::{budget, coerce, errors, transport_options};

/// The options only the binding reads.
#[derive(Default)]
pub struct BindingOptions {
    /// `on_attempt` (a counted reference).
    pub on_attempt: Option<Zval>,
    /// `fallback` (a counted reference): called with the `Unavailable` instead of throwing it.
    pub fallback: Option<Zval>,
    /// `context`: `Some(true)` web, `Some(false)` console, `None` as `resilient.context` says.
    pub context: Option<bool>,
}

/// A client's configuration and the binding's own options.
pub fn client(options: Option<&ZendHashTable>) -> PhpResult<(ClientConfig, BindingOptions)> {
    let mut config = ClientConfig::default();
    let mut binding = BindingOptions::default();
    let Some(options) = options else {
        return Ok((config, binding));
    };
    let base = config.transport.clone();
    let mut transport = transport_options::Reader::new(&base);
    for (key, value) in entries(options, "options")? {
        let key = key.as_str();
        if transport.read(key, value)? {
            continue;
        }
        match key {
            "base_url" => config
                .set_base_url(&text(value, key)?)
                .map_err(config_error)?,
            "connect_timeout" => config
                .set_connect_timeout(timeout(value, key)?)
                .map_err(config_error)?,
            "timeout" => config
                .set_timeout(timeout(value, key)?)
                .map_err(config_error)?,
            "deadline" => {
                let deadline = match off(value) {
                    true => None,
                    false => Some(timeout(value, key)?),
                };
                config.set_deadline(deadline).map_err(config_error)?
            }
            "max_attempts" => config
                .set_max_attempts(count_up_to(value, key, resilient_http::MAX_ATTEMPTS)?)
                .map_err(config_error)?,
            "backoff" => {
                let (mut base, mut cap) = (None, None);
                for (k, v) in entries(table(value, key)?, key)? {
                    match k.as_str() {
                        "base" => base = Some(seconds(v, "backoff.base")?),
                        "cap" => cap = Some(seconds(v, "backoff.cap")?),
                        other => {
                            return Err(unknown(&format!("backoff.{other}"), &["base", "cap"]))
                        }
                    }
                }
                // A bound given alone moves the other, left at its default, out of its way.
                let (base, cap) = match (base, cap) {
                    (Some(base), Some(cap)) => (base, cap),
                    (Some(base), None) => (base, config.backoff.cap.max(base)),
                    (None, Some(cap)) => (config.backoff.base.min(cap), cap),
                    (None, None) => (config.backoff.base, config.backoff.cap),
                };
                config.set_backoff(base, cap).map_err(config_error)?
            }
            "retry_on" => {
                let mut statuses = Vec::new();
                for (_, v) in entries(table(value, key)?, key)? {
                    statuses.push(int(v, key)?);
                }
                config.set_retry_on(&statuses).map_err(config_error)?
            }
            "max_retry_after" => config.set_max_retry_after(seconds(value, key)?),
            "funnel" => {
                let funnel = match off(value) {
                    true => None,
                    false => Some(funnel(table(value, key)?)?),
                };
                config
                    .set_funnel(funnel)
                    .map_err(|e| core_error("funnel.", e))?
            }
            "budget" => {
                let budget = match off(value) {
                    true => None,
                    false => Some(budget(table(value, key)?)?),
                };
                config.set_budget(budget)
            }
            "circuit" => {
                let circuit = match off(value) {
                    true => None,
                    false => Some(circuit(table(value, key)?)?),
                };
                config
                    .set_circuit(circuit)
                    .map_err(|e| core_error("circuit.", e))?
            }
            "backend" => config
                .set_backend(&text(value, key)?)
                .map_err(config_error)?,
            "on_backend_error" => config
                .set_on_backend_error(&text(value, key)?)
                .map_err(config_error)?,
            "hosts" => config.set_hosts(int(value, key)?).map_err(config_error)?,
            "headers" => {
                for (name, v) in header_entries(table(value, key)?, key)? {
                    let path = format!("headers.{}", resilient_http::shown_name(&name));
                    let values = match v.dereference().array() {
                        Some(list) => values(list),
                        None => vec![v],
                    };
                    for v in values {
                        config
                            .add_header(key, name.as_bytes(), header_value(v, &path)?.as_bytes())
                            .map_err(config_error)?;
                    }
                }
            }
            "user_agent" => config
                .set_user_agent(header_value(value, key)?.as_bytes())
                .map_err(config_error)?,
            "max_body" => {
                let n = int(value, key)?;
                let bytes = u64::try_from(n).map_err(|_| {
                    core_error("", validate::unsigned(key, n).expect_err("negative"))
                })?;
                config.set_max_body(bytes).map_err(config_error)?
            }
            "on_attempt" => binding.on_attempt = callable(value, key)?,
            "fallback" => binding.fallback = callable(value, key)?,
            "context" => {
                // Spelled as `resilient.context` accepts it, so a value copied from php.ini or
                // an env file means the same here.
                let text = text(value, key)?;
                binding.context = crate::ini::parse_context(&text).ok_or_else(|| {
                    exceptions::value_error(format!(
                        "option 'context': must be 'web', 'console' or 'auto', got '{}'",
                        resilient_http::shown_name(&text).escape_debug()
                    ))
                })?;
            }
            other => {
                let known: Vec<&str> = ClientConfig::KEYS
                    .iter()
                    .chain(TransportOptions::KEYS)
                    .copied()
                    .chain(["on_attempt", "fallback", "context"])
                    .collect();
                return Err(unknown(other, &known));
            }
        }
    }
    if let Some(accept) = transport.accept_encoding.take() {
        config
            .set_header("decode_content", b"Accept-Encoding", accept.as_bytes())
            .map_err(config_error)?;
    }
    if let Some(own) = transport.finish()? {
        config.transport = Arc::new(own);
    }
    Ok((config, binding))
}

/// A `?callable` option (`null`: none), kept as a `Closure`: bound now, in the scope of the
/// code creating the client, as `Closure::fromCallable` does. A private method given here
/// then stays callable wherever the client is used, and a callable given by reference is the
/// value it had here, not whatever its variable holds later.
fn callable(value: &Zval, key: &str) -> PhpResult<Option<Zval>> {
    let value = value.dereference();
    if value.is_null() {
        return Ok(None);
    }
    if !value.is_callable() {
        return Err(coerce::TypeMismatch {
            expected: "?callable",
            given: coerce::type_name(value),
        }
        .for_option(key));
    }
    let from_callable = ZendCallable::try_from_name("Closure::fromCallable")
        .map_err(|_| PhpException::from("Closure::fromCallable is not available"))?;
    from_callable
        .try_call(vec![value as &dyn IntoZvalDyn])
        .map(Some)
        .map_err(|e| PhpException::from(format!("option '{key}': {e}")))
}

fn funnel(table: &ZendHashTable) -> PhpResult<FunnelOptions> {
    let (mut limit, mut reserve, mut lease, mut wait) = (None, None, None, Duration::ZERO);
    let (mut auto, mut share) = (false, false);
    let (mut min, mut max, mut initial) = (None, None, None);
    for (key, v) in entries(table, "funnel")? {
        let path = format!("funnel.{key}");
        match key.as_str() {
            // 'auto' in any case (as a `.env` may give it).
            "limit"
                if v.dereference()
                    .str()
                    .is_some_and(|s| s.eq_ignore_ascii_case("auto")) =>
            {
                auto = true
            }
            "limit" => {
                let n = coerce::int(v).map_err(|mut e| {
                    e.expected = "int or 'auto'";
                    e.for_option(&path)
                })?;
                limit = Some(crate::funnel::slots(&path, n).map_err(|e| core_error("", e))?);
            }
            // Checked once the limit is known (it may come after, or be learned).
            "reserve" => reserve = Some((int(v, &path)?, path)),
            "lease" => {
                lease = match off(v) {
                    true => None,
                    false => Some(seconds(v, &path)?),
                }
            }
            "wait" => wait = seconds(v, &path)?,
            "share" => share = flag(v, &path)?,
            // Any int: the bounds name their ranges (below).
            "min" => min = Some((int(v, &path)?, path)),
            "max" => max = Some((int(v, &path)?, path)),
            "initial" => initial = Some((int(v, &path)?, path)),
            _ => {
                return Err(unknown(
                    &path,
                    &[
                        "limit", "reserve", "lease", "wait", "share", "min", "max", "initial",
                    ],
                ))
            }
        }
    }
    if !auto {
        if let Some((_, path)) = min.iter().chain(&max).chain(&initial).next() {
            return Err(exceptions::value_error(format!(
                "option '{path}': only with 'limit' => 'auto'"
            )));
        }
        let limit =
            limit.ok_or_else(|| exceptions::value_error("option 'funnel.limit': is required"))?;
        return Ok(FunnelOptions {
            limit,
            auto: None,
            reserve: reserve_below(reserve, limit)?,
            lease,
            wait,
            share,
        });
    }
    use resilient_core::AdaptiveConfig as Bounds;
    let min = min.map_or(Bounds::DEFAULT_MIN.into(), |m| m.0);
    let max = max.map_or(Bounds::DEFAULT_MAX.into(), |m| m.0);
    let initial = initial.map_or_else(
        || i64::from(Bounds::DEFAULT_INITIAL).clamp(min, max.max(min)),
        |i| i.0,
    );
    let bounds = Bounds::new(min, max, initial).map_err(|e| core_error("funnel.", e))?;
    Ok(FunnelOptions {
        limit: bounds.max(),
        auto: Some(bounds),
        reserve: reserve_below(reserve, bounds.max())?,
        lease,
        wait,
        share,
    })
}

/// The funnel's `reserve` (0 when not given), below `limit`.
fn reserve_below(reserve: Option<(i64, String)>, limit: u32) -> PhpResult<u32> {
    reserve.map_or(Ok(0), |(n, path)| {
        crate::funnel::reserve_below(&path, n, limit).map_err(|e| core_error("", e))
    })
}

fn budget(table: &ZendHashTable) -> PhpResult<resilient_core::BudgetConfig> {
    let (mut ratio, mut floor, mut window) = (0.1, 5, 60.0);
    for (key, v) in entries(table, "budget")? {
        let path = format!("budget.{key}");
        match key.as_str() {
            "ratio" => ratio = float(v, &path)?,
            "floor" => floor = int(v, &path)?,
            "window" => window = float(v, &path)?,
            _ => return Err(unknown(&path, &["ratio", "floor", "window"])),
        }
    }
    budget::config(ratio, floor, window).map_err(|e| core_error("budget.", e))
}

fn circuit(table: &ZendHashTable) -> PhpResult<CircuitOptions> {
    let mut circuit = CircuitOptions::default();
    for (key, v) in entries(table, "circuit")? {
        let path = format!("circuit.{key}");
        match key.as_str() {
            "failure_ratio" => circuit.failure_ratio = float(v, &path)?,
            "min_calls" => circuit.min_calls = count_up_to(v, &path, MAX_CALLS)?,
            "window" => circuit.window = seconds(v, &path)?,
            "open_for" => circuit.open_for = seconds(v, &path)?,
            "consecutive_failures" => {
                circuit.consecutive_failures = Some(count_up_to(v, &path, MAX_CALLS)?)
            }
            _ => {
                return Err(unknown(
                    &path,
                    &[
                        "failure_ratio",
                        "min_calls",
                        "window",
                        "open_for",
                        "consecutive_failures",
                    ],
                ))
            }
        }
    }
    Ok(circuit)
}

/// `null` or `false` turns an optional section off.
pub(crate) fn off(value: &Zval) -> bool {
    let value = value.dereference();
    value.is_null() || value.is_false()
}

fn int(value: &Zval, path: &str) -> PhpResult<i64> {
    coerce::int(value).map_err(|e| e.for_option(path))
}

fn float(value: &Zval, path: &str) -> PhpResult<f64> {
    coerce::float(value).map_err(|e| e.for_option(path))
}

/// A `bool` (no coercion: `'share' => 'no'` must not turn it on).
fn flag(value: &Zval, path: &str) -> PhpResult<bool> {
    value
        .dereference()
        .bool()
        .ok_or_else(|| mismatch("bool", value, path))
}

/// The breaker's counts of calls are 1 to this.
const MAX_CALLS: u32 = resilient_core::BreakerConfig::MAX_MIN_CALLS;

/// A count its owner takes within `1..=max`: a value out of that range is refused with the
/// owner's range and words, not "must not be negative" or "at most 4294967295".
fn count_up_to(value: &Zval, path: &str, max: u32) -> PhpResult<u32> {
    let n = int(value, path)?;
    u32::try_from(n)
        .ok()
        .filter(|&n| (1..=max).contains(&n))
        .ok_or_else(|| {
            exceptions::value_error(format!(
                "option '{path}': must be an integer between 1 and {max}, got {n}"
            ))
        })
}

/// Seconds as PHP gives them: finite, not negative, at most a year (`resilient_core`'s rule,
/// as for `Funnel`'s lease and `Deadline::within`).
fn seconds(value: &Zval, path: &str) -> PhpResult<Duration> {
    validate::duration(path, float(value, path)?).map_err(|e| core_error("", e))
}

/// A `timeout`, `connect_timeout` or `deadline`: at least the 1 ms the client counts in, checked
/// before the conversion so that 1e-10 gets the same words as 0.0005.
fn timeout(value: &Zval, path: &str) -> PhpResult<Duration> {
    let secs =
        validate::timeout_seconds(path, float(value, path)?).map_err(|e| core_error("", e))?;
    Ok(Duration::from_secs_f64(secs))
}

pub(crate) fn text(value: &Zval, path: &str) -> PhpResult<String> {
    match value.dereference().zend_str() {
        Some(s) => utf8(s.as_bytes(), path).map_err(exceptions::value_error),
        None => Err(mismatch("string", value, path)),
    }
}

/// A header value: a string (UTF-8 text), or a number written out as PHP writes it (`0.3`,
/// `1.0E+25`). Never echoed.
pub(crate) fn header_value(value: &Zval, path: &str) -> PhpResult<String> {
    let v = value.dereference();
    if let Some(n) = v.long() {
        return Ok(n.to_string());
    }
    if v.double().is_some() {
        return php_float(v);
    }
    text(value, path)
}

pub(crate) fn table<'a>(value: &'a Zval, path: &str) -> PhpResult<&'a ZendHashTable> {
    value
        .dereference()
        .array()
        .ok_or_else(|| mismatch("array", value, path))
}

pub(crate) fn mismatch(expected: &'static str, value: &Zval, path: &str) -> PhpException {
    coerce::TypeMismatch {
        expected,
        given: coerce::type_name(value),
    }
    .for_option(path)
}

pub(crate) fn unknown(path: &str, known: &[&str]) -> PhpException {
    exceptions::value_error(format!(
        "option '{}': unknown option (known: {})",
        resilient_http::shown_name(path),
        known.join(", ")
    ))
}

/// A value rule of `resilient_http` broken: `\ValueError`, the option named.
pub fn config_error(e: ConfigError) -> PhpException {
    exceptions::value_error(e.to_string())
}

/// A value rule of `resilient_core` broken: `\ValueError` with the option path (`prefix` +
/// the core's argument name) in front of the core's words.
fn core_error(prefix: &str, e: resilient_core::Error) -> PhpException {
    let Some(argument) = e.argument().filter(|_| e.is_invalid_argument()) else {
        return errors::php(e);
    };
    let message = e.to_string();
    let problem = message
        .strip_prefix(argument)
        .and_then(|m| m.strip_prefix(": "))
        .unwrap_or(&message);
    exceptions::value_error(format!("option '{prefix}{argument}': {problem}"))
}

/// The values of a list whose keys mean nothing (a header's values, a `[path, password]`
/// pair). Unlike ext-php-rs's `values()`, which panics on a key that is not valid UTF-8, it
/// never reads the keys.
pub fn values(table: &ZendHashTable) -> Vec<&Zval> {
    let mut iter = table.iter();
    let mut out = Vec::with_capacity(table.len());
    while let Some((_, value)) = iter.next_zval() {
        out.push(value);
    }
    out
}

/// The entries of an array, keys as UTF-8 text (a non-UTF-8 key is a `\ValueError`).
pub fn entries<'a>(table: &'a ZendHashTable, path: &str) -> PhpResult<Vec<(String, &'a Zval)>> {
    let mut iter = table.iter();
    let mut out = Vec::with_capacity(table.len());
    while let Some((key, value)) = iter.next_zval() {
        let key = match key.long() {
            Some(i) => i.to_string(),
            None => utf8(
                key.zend_str().map(|z| z.as_bytes()).unwrap_or_default(),
                path,
            )
            .map_err(exceptions::value_error)?,
        };
        out.push((key, value));
    }
    Ok(out)
}

/// A `headers` array's entries, name first. A list (`['Name: value', ...]`, curl's style) is
/// refused by its key: sent as it is, its lines would be headers named `0`, `1`, ... and the
/// request would go out without them. The message names the key, never the line (a secret).
pub fn header_entries<'a>(
    table: &'a ZendHashTable,
    path: &str,
) -> PhpResult<Vec<(String, &'a Zval)>> {
    let entries = entries(table, path)?;
    if let Some((i, _)) = entries.iter().find(|(name, _)| name.parse::<i64>().is_ok()) {
        return Err(exceptions::value_error(format!(
            "option '{path}.{i}': the key must be the header's name, as in ['Name' => 'value']; a list of 'Name: value' lines is not read"
        )));
    }
    // Header names have no case: `Host` and `host` would both be sent (two Host lines, two
    // Authorization lines, two Idempotency-Keys), and which one a server or a proxy reads is a
    // guess.
    let mut seen = std::collections::HashMap::with_capacity(entries.len());
    for (name, _) in &entries {
        if let Some(other) = seen.insert(name.to_ascii_lowercase(), name.as_str()) {
            return Err(exceptions::value_error(format!(
                "option '{path}': '{}' and '{}' name the same header (give it once; several values as a list)",
                resilient_http::shown_name(other).escape_debug(),
                resilient_http::shown_name(name).escape_debug(),
            )));
        }
    }
    Ok(entries)
}

/// UTF-8 text, or the message saying the option holds other bytes.
pub fn utf8(bytes: &[u8], path: &str) -> Result<String, String> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Ok(text.to_owned()),
        Err(e) => Err(format!(
            "option '{path}': is not valid UTF-8 (invalid byte at offset {}); header, query and form values and array keys must be UTF-8 text: encode binary data (e.g. base64_encode) or send it as 'body', which is sent byte for byte",
            e.valid_up_to()
        )),
    }
}

// ---- Per-request options (request(), get(), post()..., pool()) ----

/// Deepest array nesting accepted in a query or form (a cycle through references cannot hang
/// us).
const MAX_DEPTH: u32 = 32;
/// `json_encode` flags: none, as Guzzle's `json` option and Laravel's `Http::` encode (`1.0` as
/// `1`, `/` as `\/`, non-ASCII as `\uXXXX`): the same bytes, so a signature computed over
/// `json_encode($data)` matches the body. No `JSON_THROW_ON_ERROR`: a value that cannot be
/// encoded is a bad option, reported as `\ValueError` like every other.
const JSON_FLAGS: i64 = 0;

/// A request's own option keys ([`TransportOptions::KEYS`] are accepted too).
const REQUEST_KEYS: &[&str] = &[
    "query",
    "json",
    "body",
    "form",
    "multipart",
    "headers",
    "idempotency_key",
    "timeout",
    "connect_timeout",
    "sink",
];

/// A verb's `$data` argument: the query of a GET or HEAD, the JSON body of the others.
#[derive(Clone, Copy)]
pub enum Data<'a> {
    Query(&'a ZendHashTable),
    Json(&'a ZendHashTable),
}

/// An array key as a string (`0`, `name`).
pub fn key_string(key: &ArrayKey) -> String {
    match key {
        ArrayKey::Long(i) => i.to_string(),
        ArrayKey::String(s) => s.clone(),
        ArrayKey::Str(s) => (*s).to_string(),
        ArrayKey::ZendString(s) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
    }
}

/// The per-request options (and a verb's `$data`) as `RequestOptions`. `query` and `form`
/// are flattened as `http_build_query` does; `json` is encoded by PHP's own `json_encode`
/// (objects, `JsonSerializable`, floats exactly as PHP writes them); a string `body` is sent
/// byte for byte. `$data` as a query comes first, the options' `query` replacing a key of the
/// same name; `$data` as JSON beside another body is refused, never dropped.
/// `until`: the call's deadline, which bounds reading a `multipart` part's stream.
pub fn request(
    options: Option<&ZendHashTable>,
    data: Option<Data>,
    client: &TransportOptions,
    until: Option<Instant>,
) -> PhpResult<RequestOptions> {
    let mut query: Vec<(String, &Zval)> = Vec::new();
    // Counted copies: encoding a body runs PHP code (jsonSerialize, a multipart part's stream
    // wrapper), which may free options reached by reference (a pool item's) before the next.
    let mut bodies: Vec<(&str, Zval)> = Vec::new();
    let mut out = RequestOptions::new();
    let mut transport = transport_options::Reader::new(client);
    if let Some(Data::Query(data)) = data {
        query = entries(data, "query")?;
    }
    if let Some(options) = options {
        for (key, value) in entries(options, "options")? {
            if transport.read(&key, value)? {
                continue;
            }
            match key.as_str() {
                "query" if off(value) => {}
                "query" => {
                    for (k, v) in entries(table(value, "query")?, "query")? {
                        match query.iter_mut().find(|(name, _)| *name == k) {
                            Some(slot) => slot.1 = v,
                            None => query.push((k, v)),
                        }
                    }
                }
                // A null body is no body, as Guzzle's `isset` reads it.
                "json" | "body" | "form" | "multipart" if value.dereference().is_null() => {}
                "json" => bodies.push(("json", counted(value))),
                "body" => bodies.push(("body", counted(value))),
                "form" => bodies.push(("form", counted(value))),
                "multipart" => bodies.push(("multipart", counted(value))),
                "timeout" => {
                    out = out
                        .timeout(timeout(value, "timeout")?)
                        .map_err(config_error)?
                }
                "connect_timeout" => {
                    out = out
                        .connect_timeout(timeout(value, "connect_timeout")?)
                        .map_err(config_error)?
                }
                "sink" if off(value) => {}
                "sink" => {
                    out = out
                        .sink(transport_options::sink(value)?)
                        .map_err(config_error)?
                }
                "headers" => {
                    for (name, v) in header_entries(table(value, "headers")?, "headers")? {
                        let path = format!("headers.{}", resilient_http::shown_name(&name));
                        let values = match v.dereference().array() {
                            Some(list) => values(list),
                            None => vec![v],
                        };
                        for v in values {
                            out = out
                                .header(&name, header_value(v, &path)?.as_bytes())
                                .map_err(config_error)?;
                        }
                    }
                }
                "idempotency_key" => {
                    let key = match value.dereference().long() {
                        Some(n) => n.to_string(),
                        None => text(value, "idempotency_key")?,
                    };
                    out = out.idempotency_key(&key).map_err(config_error)?;
                }
                other => {
                    let known: Vec<&str> = REQUEST_KEYS
                        .iter()
                        .chain(TransportOptions::KEYS)
                        .copied()
                        .collect();
                    return Err(unknown(other, &known));
                }
            }
        }
    }
    if let Some(accept) = transport.accept_encoding.take() {
        out = out
            .set_header("Accept-Encoding", accept.as_bytes())
            .map_err(config_error)?;
    }
    if let Some(own) = transport.finish()? {
        out = out.transport(own);
    }
    let mut pairs = Vec::new();
    for (k, v) in &query {
        flatten(k.clone(), v, "query", &mut pairs, 0)?;
    }
    for (k, v) in pairs {
        out = out.query(k, v);
    }
    if let Some(Data::Json(data)) = data.filter(|d| matches!(d, Data::Json(t) if !t.is_empty())) {
        if !bodies.is_empty() {
            return Err(exceptions::value_error(
                "option 'json': only one of 'json', 'body', 'form' and 'multipart' may be given (a non-empty $json argument is the JSON body)",
            ));
        }
        let mut z = Zval::new();
        z.set_hashtable(data.to_owned());
        return out.body(Body::Json(json_encode(&z)?)).map_err(config_error);
    }
    for (key, value) in bodies {
        let value = &value;
        let body = match key {
            "json" => Body::Json(json_encode(value)?),
            "body" => match value.dereference().zend_str() {
                Some(s) => Body::Raw(s.as_bytes().to_vec()),
                None => return Err(mismatch("string", value, "body")),
            },
            "multipart" => Body::Multipart(transport_options::multipart(value, until)?),
            _ => {
                let mut pairs = Vec::new();
                if !off(value) {
                    for (k, v) in entries(table(value, "form")?, "form")? {
                        flatten(k, v, "form", &mut pairs, 0)?;
                    }
                }
                Body::Form(pairs)
            }
        };
        out = out.body(body).map_err(config_error)?;
    }
    Ok(out)
}

/// A counted copy of an option's value, which PHP code run meanwhile cannot free or change:
/// PHP copies an array held twice before writing to it.
pub(crate) fn counted(value: &Zval) -> Zval {
    value.dereference().shallow_clone()
}

/// One `http_build_query` entry: lists and maps as `key[i]` / `key[name]`, `true` as `1`,
/// `false` as `0`, `null` left out, floats as PHP writes them.
fn flatten(
    key: String,
    value: &Zval,
    option: &str,
    pairs: &mut Vec<(String, String)>,
    depth: u32,
) -> PhpResult<()> {
    if depth > MAX_DEPTH {
        return Err(exceptions::value_error(format!(
            "option '{option}': nested too deeply"
        )));
    }
    let v = value.dereference();
    if v.is_null() {
        return Ok(());
    }
    if let Some(b) = v.bool() {
        pairs.push((key, if b { "1" } else { "0" }.into()));
    } else if let Some(n) = v.long() {
        pairs.push((key, n.to_string()));
    } else if v.double().is_some() {
        pairs.push((key, php_float(v)?));
    } else if v.is_string() {
        let path = format!("{option}.{key}");
        pairs.push((key, text(v, &path)?));
    } else if let Some(table) = v.array() {
        for (k, child) in entries(table, option)? {
            flatten(format!("{key}[{k}]"), child, option, pairs, depth + 1)?;
        }
    } else {
        return Err(mismatch("array|string|int|float|bool|null", v, option));
    }
    Ok(())
}

/// A float as PHP's string conversion writes it, with `precision` digits (`0.3` for 0.1 + 0.2,
/// `1.0E+100`, `2`, `INF`), as `http_build_query` does: PHP's own conversion, not Rust's
/// shortest round-trip form.
fn php_float(value: &Zval) -> PhpResult<String> {
    let strval = ZendCallable::try_from_name("strval")
        .map_err(|_| PhpException::from("strval is not available"))?;
    let text = exceptions::outside_item(|| strval.try_call(vec![value as &dyn IntoZvalDyn]))
        .map_err(PhpException::from)?;
    Ok(text.string().unwrap_or_default())
}

/// `json_encode($value)`'s bytes.
fn json_encode(value: &Zval) -> PhpResult<Vec<u8>> {
    let encode = ZendCallable::try_from_name("json_encode")
        .map_err(|_| PhpException::from("json_encode is not available"))?;
    let encoded =
        exceptions::outside_item(|| encode.try_call(vec![value as &dyn IntoZvalDyn, &JSON_FLAGS]))
            .map_err(PhpException::from)?;
    match encoded.zend_str() {
        Some(text) => Ok(text.as_bytes().to_vec()),
        None => {
            let why = ZendCallable::try_from_name("json_last_error_msg")
                .ok()
                .and_then(|f| f.try_call(vec![]).ok())
                .and_then(|z| z.str().map(str::to_owned))
                .unwrap_or_else(|| "unknown error".to_owned());
            Err(exceptions::value_error(format!(
                "option 'json': cannot be encoded as JSON ({why})"
            )))
        }
    }
}

/// A table's entries. ext-php-rs's own iterator panics on a string key that is not UTF-8;
/// such a key is refused here instead, as an option error naming `path`.
pub fn keyed_entries<'a>(
    table: &'a ZendHashTable,
    path: &str,
) -> Result<Vec<(ArrayKey<'static>, &'a Zval)>, String> {
    let mut iter = table.iter();
    let mut out = Vec::with_capacity(table.len());
    while let Some((key, value)) = iter.next_zval() {
        let key = match key.long() {
            Some(i) => ArrayKey::Long(i),
            None => ArrayKey::String(utf8(
                key.zend_str().map(|z| z.as_bytes()).unwrap_or_default(),
                path,
            )?),
        };
        out.push((key, value));
    }
    Ok(out)
}
