//! `Resilient\Response`: the answer a `Resilient\Client` call returns (any status the client
//! does not retry), plus what it cost: `attempts()` and `elapsedMs()`.
//!
//! A thin wrapper over `resilient_http::Response`. The client makes them (also attached to
//! `Unavailable` exceptions as the last response); tests of code that uses a client build one
//! with `Response::fake()` (no `new`: a response is never half-made).

use std::sync::atomic::{AtomicU64, Ordering};

use ext_php_rs::binary::Binary;
use ext_php_rs::boxed::ZBox;
use ext_php_rs::convert::IntoZval;
use ext_php_rs::prelude::*;
use ext_php_rs::types::{ZendCallable, ZendClassObject, ZendHashTable, ZendStr, Zval};

use crate::{coerce, exceptions, options};

#[php_class]
#[php(name = "Resilient\\Response")]
#[php(flags = ext_php_rs::flags::ClassFlags::Final)]
pub struct Response {
    inner: resilient_http::Response,
}

/// Bytes of the bodies that live `Resilient\Response` objects of this process hold: Rust
/// memory, which `memory_limit` does not see. A call's body limit leaves room for them
/// (`context::memory_headroom`), so responses a script keeps count against its limit.
static HELD_BODY_BYTES: AtomicU64 = AtomicU64::new(0);

/// What the bodies live `Resilient\Response` objects hold will take as PHP strings, in bytes
/// ([`crate::context::php_string_size`]).
pub fn held_body_bytes() -> u64 {
    HELD_BODY_BYTES.load(Ordering::Relaxed)
}

/// What `body` counts in [`held_body_bytes`] (nothing when empty).
fn held_size(body: &[u8]) -> u64 {
    if body.is_empty() {
        0
    } else {
        crate::context::php_string_size(body.len() as u64)
    }
}

impl Response {
    pub fn new(inner: resilient_http::Response) -> Self {
        HELD_BODY_BYTES.fetch_add(held_size(inner.body()), Ordering::Relaxed);
        Self { inner }
    }

    /// The response as a PHP object in a zval (to attach to an exception or put in an array).
    pub fn into_zval_object(inner: resilient_http::Response) -> Option<Zval> {
        ZendClassObject::new(Response::new(inner))
            .into_zval(false)
            .ok()
    }
}

impl Drop for Response {
    fn drop(&mut self) {
        HELD_BODY_BYTES.fetch_sub(held_size(self.inner.body()), Ordering::Relaxed);
    }
}

#[php_impl]
impl Response {
    /// `Response::fake(int $status = 200, string $body = '', array $headers = [])`: a response
    /// built in PHP for tests (`attempts()` 0, `elapsedMs()` 0); headers are `name => value` or
    /// `name => [values]`.
    pub fn fake(
        status: Option<&Zval>,
        body: Option<&Zval>,
        headers: Option<coerce::ArrayArg>,
    ) -> PhpResult<Self> {
        let headers = coerce::ArrayArg::optional(
            headers.as_ref(),
            "Resilient\\Response::fake",
            3,
            "headers",
        )?;
        let status = match coerce::given(status) {
            Some(z) => coerce::int_arg(z, "Resilient\\Response::fake", 1, "status")?,
            None => 200,
        };
        let status = u16::try_from(status)
            .ok()
            .filter(|s| (100..=599).contains(s))
            .ok_or_else(|| {
                exceptions::value_error(format!(
                    "Resilient\\Response::fake(): argument 'status' must be an HTTP status 100..599, got {status}"
                ))
            })?;
        // A null body is the default's (''), as a null status is the default's (200).
        let body = match body.map(Zval::dereference).filter(|z| !z.is_null()) {
            None => Vec::new(),
            Some(z) => match z.zend_str() {
                Some(s) => s.as_bytes().to_vec(),
                None => {
                    return Err(coerce::type_error(format!(
                        "Resilient\\Response::fake(): Argument #2 ($body) must be of type string, {} given",
                        coerce::type_name(z)
                    )))
                }
            },
        };
        let mut list = Vec::new();
        if let Some(headers) = headers {
            for (name, value) in options::header_entries(headers, "headers")? {
                // What a real response could carry: a token for the name, no line break or NUL
                // in a value (code under test may copy them into a response of its own).
                let shown = resilient_http::shown_name(&name);
                if resilient_http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                    return Err(exceptions::value_error(format!(
                        "Resilient\\Response::fake(): header name {shown:?} is not a valid header name"
                    )));
                }
                let values: Vec<&Zval> = match value.dereference().array() {
                    Some(many) => crate::options::values(many),
                    None => vec![value],
                };
                for v in values {
                    let v = v.dereference();
                    let bytes = match v.zend_str() {
                        Some(s) => s.as_bytes().to_vec(),
                        None if v.long().is_some() || v.double().is_some() => {
                            options::header_value(v, &format!("headers.{shown}"))?.into_bytes()
                        }
                        None => {
                            return Err(coerce::type_error(format!(
                                "Resilient\\Response::fake(): header {name:?} must be of type string, {} given",
                                coerce::type_name(v)
                            )))
                        }
                    };
                    if resilient_http::HeaderValue::from_bytes(&bytes).is_err() {
                        return Err(exceptions::value_error(format!(
                            "Resilient\\Response::fake(): header {name:?} has a value with a line break or another control character"
                        )));
                    }
                    list.push((name.to_ascii_lowercase(), bytes));
                }
            }
        }
        let raw = resilient_http::RawResponse {
            status,
            headers: list,
            body,
        };
        Ok(Self::new(resilient_http::Response::new(
            raw,
            0,
            std::time::Duration::ZERO,
        )))
    }

    /// The HTTP status.
    pub fn status(&self) -> i64 {
        i64::from(self.inner.status())
    }

    /// True for 2xx.
    pub fn ok(&self) -> bool {
        self.inner.ok()
    }

    /// A header's values joined with ", " (case-insensitive name), or null when absent. Bytes
    /// as received (a value that is not UTF-8 is not rewritten).
    pub fn header(&self, name: crate::coerce::StringArg) -> PhpResult<Option<Binary<u8>>> {
        let name = name.utf8("Resilient\\Response::header", 1, "name")?;
        Ok(self.inner.header(&name).map(Binary::from))
    }

    /// Every header: lower-case name => list of values (bytes as received).
    pub fn headers(&self) -> PhpResult<ZBox<ZendHashTable>> {
        let mut ht = ZendHashTable::new();
        for (name, values) in self.inner.headers_grouped() {
            let mut list = ZendHashTable::new();
            for v in values {
                list.push(binary(v))?;
            }
            ht.insert(name, list)?;
        }
        Ok(ht)
    }

    /// The body, bytes as received (a binary-safe PHP string). Copied once, straight into
    /// the PHP string (bodies may be up to `max_body`).
    pub fn body(&self) -> Zval {
        binary(self.inner.body())
    }

    /// `json(?string $key = null, mixed $default = null)`: the body decoded as JSON into arrays
    /// (`json_decode($body, true)`; null when not JSON). With `$key`, the value at that
    /// dot-separated path (`'data.items.0.id'`), or `$default` when the path is not there (a
    /// `Closure` is called for it), as Laravel's `Response::json($key, $default)` reads it
    /// (without its `*` wildcard).
    pub fn json(&self, key: Option<coerce::StringArg>, default: Option<&Zval>) -> PhpResult<Zval> {
        let key =
            coerce::StringArg::optional_key(key.as_ref(), "Resilient\\Response::json", 1, "key")?;
        let decode = ZendCallable::try_from_name("json_decode")
            .map_err(|_| PhpException::from("json_decode is not available"))?;
        let body = self.body();
        let assoc = true;
        let decoded = decode
            .try_call(vec![&body as &dyn ext_php_rs::convert::IntoZvalDyn, &assoc])
            .map_err(PhpException::from)?;
        let Some(key) = key else {
            return Ok(decoded);
        };
        let mut at = &decoded;
        for segment in key.split('.') {
            match at.array().and_then(|table| table.get(segment)) {
                Some(value) => at = value.dereference(),
                None => return or_default(default),
            }
        }
        Ok(at.shallow_clone())
    }

    /// Attempts the call made, the first one included.
    pub fn attempts(&self) -> i64 {
        i64::from(self.inner.attempts())
    }

    /// Milliseconds from the call's start to this answer (sleeps between attempts included).
    pub fn elapsed_ms(&self) -> f64 {
        self.inner.elapsed().as_secs_f64() * 1000.0
    }

    /// The URL that gave this answer: the request's, or where its redirects led
    /// (`allow_redirects`); without user-info or fragment. `null` for `Response::fake()`.
    pub fn url(&self) -> Option<String> {
        self.inner.url().map(str::to_owned)
    }

    /// Whether redirects were followed to get this answer (`allow_redirects`); `url()` is then
    /// where they led.
    pub fn redirected(&self) -> bool {
        self.inner.redirected()
    }

    /// What `var_dump()`, `print_r()` and Laravel's `dump()` show: the status, the URL without
    /// its query (`url()` keeps it), the attempts and the time, the headers' names and the
    /// body's length. No header's value and no body: a `Set-Cookie` or a token in an answer
    /// would end up in the logs that dumps go to. `headers()` and `body()` give them.
    pub fn __debug_info(&self) -> PhpResult<ZBox<ZendHashTable>> {
        let mut info = ZendHashTable::new();
        info.insert("status", self.status())?;
        info.insert("url", self.inner.url().map(resilient_http::shown_label))?;
        info.insert("attempts", self.attempts())?;
        info.insert("elapsedMs", self.elapsed_ms())?;
        let mut names = ZendHashTable::new();
        for (name, _) in self.inner.headers_grouped() {
            names.push(name)?;
        }
        info.insert("headers", names)?;
        info.insert(
            "bodyBytes",
            i64::try_from(self.inner.body().len()).unwrap_or(i64::MAX),
        )?;
        Ok(info)
    }
}

/// `$default` as Laravel's `value()` gives it: a `Closure` called, anything else as it is.
fn or_default(default: Option<&Zval>) -> PhpResult<Zval> {
    let Some(default) = default.map(Zval::dereference) else {
        return Ok(Zval::new());
    };
    let is_closure = default
        .object()
        .and_then(|o| o.get_class_name().ok())
        .is_some_and(|class| class == "Closure");
    if !is_closure {
        return Ok(default.shallow_clone());
    }
    let call = ZendCallable::new(default)
        .map_err(|_| PhpException::from("the default is not callable"))?;
    call.try_call(vec![]).map_err(PhpException::from)
}

/// Bytes as a PHP string, copied once.
fn binary(bytes: &[u8]) -> Zval {
    let mut z = Zval::new();
    z.set_zend_string(ZendStr::new(bytes, false));
    z
}

pub fn register(module: ModuleBuilder) -> ModuleBuilder {
    module.class::<Response>()
}
