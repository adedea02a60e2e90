//! The mock upstream: requests under `/k/{key}/...` answered by the key's script (or an echo)
//! and recorded for the test to read back.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Either, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::http::{header, HeaderName, HeaderValue, Request, Response, StatusCode};
use serde_json::json;

use crate::body::{self, CloseConnection, DripBody, HandlerResult, StreamBody};
use crate::received::{BodyReader, BodySummary};
use crate::recorder::{AttemptGuard, Outcome, RequestInfo};
use crate::script::Step;
use crate::App;

/// Largest request body the control API reads into memory (a bigger one gets 413).
pub const MAX_REQUEST_BODY: usize = 16 * 1024 * 1024;
/// Largest request body of a mock request (a bigger one gets 413). It is read as a stream and
/// never held (see [`crate::received`]), so the bound is only there to end a runaway upload.
pub const MAX_MOCK_BODY: u64 = 4 * 1024 * 1024 * 1024;

/// Headers repeated in the echo body (never secrets; the attempts log has all of them).
const ECHOED_HEADERS: &[&str] = &[
    "accept",
    "content-type",
    "idempotency-key",
    "user-agent",
    "x-attempt",
    "x-request-id",
];

/// Serves one request for `key`; `path` is what follows `/k/{key}`.
pub async fn handle(
    app: Arc<App>,
    key: String,
    path: String,
    req: Request<Incoming>,
) -> HandlerResult {
    let info = request_info(&req, path);
    let state = app.keys.get(&key);
    let (guard, step) = state.arrive(app.clock, info.clone());
    // Read the whole body first: hyper notices a client that goes away only once the body is
    // consumed, and tests want its length and digest anyway. It streams: nothing is held but
    // the first 64 KiB.
    let content_type = info.headers.get("content-type").cloned();
    let summary = match read_streaming(req.into_body(), content_type.as_deref()).await {
        Ok(b) => b,
        Err(ReadError::TooLarge) => {
            guard.finish(Outcome::Answered, Some(413));
            return Ok(body::error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request body too large",
            ));
        }
        Err(ReadError::Io) => return Err(CloseConnection), // guard drop: abandoned
    };
    let body_len = summary.len;
    guard.set_body(summary);
    match step {
        None => {
            let r = echo(&key, guard.seq(), &info, body_len, StatusCode::OK);
            guard.finish(Outcome::Answered, Some(200));
            Ok(r)
        }
        Some((_, step)) => run_step(&key, &info, body_len, step, guard).await,
    }
}

async fn run_step(
    key: &str,
    info: &RequestInfo,
    body_len: u64,
    step: Step,
    guard: AttemptGuard,
) -> HandlerResult {
    if step.delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(step.delay_ms)).await;
    }
    if step.close {
        guard.finish(Outcome::Closed, None);
        return Err(CloseConnection);
    }
    if step.hang {
        tokio::time::sleep(Duration::from_millis(step.hang_limit_ms())).await;
        guard.finish(Outcome::Closed, None);
        return Err(CloseConnection);
    }
    let status = StatusCode::from_u16(step.status).unwrap_or(StatusCode::OK);
    let mut response = match step.body_bytes() {
        Some(bytes) => {
            let ct = if step.json.is_some()
                || serde_json::from_slice::<serde_json::Value>(&bytes).is_ok()
            {
                "application/json"
            } else {
                "text/plain; charset=utf-8"
            };
            body::with_type(status, ct, bytes)
        }
        None if status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED => {
            let mut r = Response::new(body::full(Bytes::new()));
            *r.status_mut() = status;
            r
        }
        None => echo(key, guard.seq(), info, body_len, status),
    };
    for (name, values) in &step.headers {
        for value in values.iter() {
            // Validated when the script was set.
            if let (Ok(n), Ok(v)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                if n == header::CONTENT_TYPE {
                    response.headers_mut().insert(n, v);
                } else {
                    response.headers_mut().append(n, v);
                }
            }
        }
    }
    if let Some(drip) = step.drip {
        let (parts, b) = response.into_parts();
        let data = match b {
            Either::Left(full) => full
                .collect()
                .await
                .map(|c| c.to_bytes())
                .unwrap_or_default(),
            Either::Right(_) => Bytes::new(),
        };
        let dripping = DripBody::new(
            data,
            drip.chunk_bytes,
            Duration::from_millis(drip.interval_ms),
            guard,
            step.status,
        );
        return Ok(Response::from_parts(
            parts,
            Either::Right(Either::Left(dripping)),
        ));
    }
    if let Some(stream) = step.stream {
        let (mut parts, _) = response.into_parts();
        parts.headers.remove(header::CONTENT_LENGTH);
        parts.headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
        let generated = StreamBody::new(stream.bytes, stream.chunked, guard, step.status);
        return Ok(Response::from_parts(
            parts,
            Either::Right(Either::Right(generated)),
        ));
    }
    guard.finish(Outcome::Answered, Some(step.status));
    Ok(response)
}

/// The unscripted answer: what the server received, without secret headers.
fn echo(
    key: &str,
    seq: u64,
    info: &RequestInfo,
    body_len: u64,
    status: StatusCode,
) -> Response<body::OutBody> {
    let headers: BTreeMap<&str, &str> = ECHOED_HEADERS
        .iter()
        .filter_map(|h| info.headers.get(*h).map(|v| (*h, v.as_str())))
        .collect();
    let value = json!({
        "ok": status.is_success(),
        "key": key,
        "seq": seq,
        "method": info.method,
        "path": info.path,
        "query": info.query,
        "headers": headers,
        "body_len": body_len,
    });
    body::json(status, &value)
}

/// Why a request body could not be read.
pub enum ReadError {
    TooLarge,
    Io,
}

/// Reads a mock request's body chunk by chunk into its summary, up to [`MAX_MOCK_BODY`].
async fn read_streaming(
    mut body: Incoming,
    content_type: Option<&str>,
) -> Result<BodySummary, ReadError> {
    let mut reader = BodyReader::new(content_type);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| ReadError::Io)?;
        if let Ok(data) = frame.into_data() {
            reader.push(&data);
            if reader.len() > MAX_MOCK_BODY {
                return Err(ReadError::TooLarge);
            }
        }
    }
    Ok(reader.finish())
}

/// Reads the whole request body, up to [`MAX_REQUEST_BODY`].
pub async fn read_body(body: Incoming) -> Result<Bytes, ReadError> {
    match Limited::new(body, MAX_REQUEST_BODY).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(ReadError::TooLarge)
        }
        Err(_) => Err(ReadError::Io),
    }
}

/// Method, path, query and headers (names lower-case, repeated headers joined with ", ").
pub fn request_info<B>(req: &Request<B>, path: String) -> RequestInfo {
    let mut headers: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in req.headers() {
        let v = String::from_utf8_lossy(value.as_bytes()).into_owned();
        headers
            .entry(name.as_str().to_string())
            .and_modify(|old| {
                old.push_str(", ");
                old.push_str(&v);
            })
            .or_insert(v);
    }
    RequestInfo {
        method: req.method().as_str().to_string(),
        path,
        query: req.uri().query().unwrap_or("").to_string(),
        uri: req
            .uri()
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default(),
        headers,
        connection: req
            .extensions()
            .get::<crate::server::ConnectionId>()
            .map_or(0, |c| c.0),
    }
}
