//! Scripts: what a mock key answers, request after request.
//!
//! A script is a list of steps and a rule for what happens after the last one. The n-th request
//! a key receives after its script was set gets step `n` (or the rule's choice past the end).
//! Parsing validates everything (status range, header names and values, mutually exclusive
//! actions) so a typo in a test fails loudly at `POST /__control/script`, not as a strange answer.

use std::collections::BTreeMap;

use hyper::http::{HeaderName, HeaderValue, StatusCode};
use serde::Deserialize;

/// Upper bound for any wait a script asks for, so a forgotten hang cannot outlive a test run.
pub const MAX_WAIT_MS: u64 = 600_000;
/// How long `"hang": true` waits for the client to go away before closing the connection.
pub const DEFAULT_HANG_MS: u64 = 120_000;

/// `POST /__control/script` body.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptRequest {
    pub key: String,
    /// Only for requests to this exact path (after `/k/{key}`, without the query), e.g.
    /// `/slow`; other paths keep the key's script.
    pub path: Option<String>,
    pub steps: Vec<Step>,
    #[serde(default)]
    pub then: Then,
}

/// What a key answers once its steps are used up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Then {
    /// Keep answering with the last step (the default).
    #[default]
    RepeatLast,
    /// Start over at the first step.
    Cycle,
    /// Fall back to the unscripted echo answer.
    Echo,
}

/// A scripted header's value, or its values in order.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum HeaderValues {
    One(String),
    Many(Vec<String>),
}

impl HeaderValues {
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        match self {
            HeaderValues::One(v) => std::slice::from_ref(v),
            HeaderValues::Many(vs) => vs.as_slice(),
        }
        .iter()
        .map(String::as_str)
    }
}

/// One scripted answer.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// Response status (default 200).
    #[serde(default = "default_status")]
    pub status: u16,
    /// Extra response headers, e.g. `{"Retry-After": "2"}`; a list sends the header once per
    /// value (`{"Retry-After": ["5", "120"]}`).
    #[serde(default)]
    pub headers: BTreeMap<String, HeaderValues>,
    /// Response body as text. Without `body` and `json` the echo JSON is sent.
    pub body: Option<String>,
    /// Response body as JSON (sets `Content-Type: application/json`).
    pub json: Option<serde_json::Value>,
    /// Wait this long (after reading the request) before acting.
    #[serde(default)]
    pub delay_ms: u64,
    /// Read the request, then never answer until the client goes away (or `hang_ms` passes,
    /// then close without a response).
    #[serde(default)]
    pub hang: bool,
    /// Cap for `hang` (default 120 s).
    pub hang_ms: Option<u64>,
    /// Close the connection without any response (after `delay_ms`).
    #[serde(default)]
    pub close: bool,
    /// Send the headers at once, then the body in small chunks with a pause before each.
    pub drip: Option<Drip>,
    /// Send a generated body of `bytes` bytes (absent: endless), never held in memory.
    pub stream: Option<Stream>,
}

/// Generated-body settings for a step: `{"bytes": 300000000}` (with `Content-Length`),
/// `{"bytes": N, "chunked": true}` (no length announced) or `{}` (an endless chunked body).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stream {
    pub bytes: Option<u64>,
    #[serde(default)]
    pub chunked: bool,
}

/// Slow-body settings for a step.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Drip {
    /// Bytes per chunk (default 1).
    #[serde(default = "default_chunk")]
    pub chunk_bytes: usize,
    /// Pause before each chunk, the first one included.
    pub interval_ms: u64,
}

fn default_status() -> u16 {
    200
}

fn default_chunk() -> usize {
    1
}

/// A validated script, ready to hand out steps.
#[derive(Debug, Clone)]
pub struct Script {
    steps: Vec<Step>,
    then: Then,
}

impl Script {
    /// Validates a request body's steps; the error names the step and the problem.
    pub fn new(steps: Vec<Step>, then: Then) -> Result<Script, String> {
        if steps.is_empty() {
            return Err("steps: at least one step is required".into());
        }
        for (i, s) in steps.iter().enumerate() {
            s.validate().map_err(|e| format!("steps[{i}]: {e}"))?;
        }
        Ok(Script { steps, then })
    }

    /// The step for the `n`-th request (0-based) since the script was set, with its index;
    /// `None` means "answer with the echo".
    pub fn step_for(&self, n: usize) -> Option<(usize, &Step)> {
        let len = self.steps.len();
        let i = if n < len {
            n
        } else {
            match self.then {
                Then::RepeatLast => len - 1,
                Then::Cycle => n % len,
                Then::Echo => return None,
            }
        };
        Some((i, &self.steps[i]))
    }
}

impl Step {
    fn validate(&self) -> Result<(), String> {
        StatusCode::from_u16(self.status)
            .ok()
            .filter(|s| s.as_u16() >= 200)
            .ok_or_else(|| {
                format!(
                    "status {} is not a final HTTP status (200..=999)",
                    self.status
                )
            })?;
        for (name, values) in &self.headers {
            HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("header name {name:?} is invalid"))?;
            for value in values.iter() {
                HeaderValue::from_str(value)
                    .map_err(|_| format!("header {name:?} has an invalid value"))?;
            }
        }
        let actions = [
            self.hang,
            self.close,
            self.drip.is_some(),
            self.stream.is_some(),
        ]
        .iter()
        .filter(|b| **b)
        .count();
        if actions > 1 {
            return Err("hang, close, drip and stream are mutually exclusive".into());
        }
        if self.stream.is_some() && (self.body.is_some() || self.json.is_some()) {
            return Err("stream generates the body: no body or json with it".into());
        }
        if self.body.is_some() && self.json.is_some() {
            return Err("body and json are mutually exclusive".into());
        }
        if self.delay_ms > MAX_WAIT_MS || self.hang_ms.unwrap_or(0) > MAX_WAIT_MS {
            return Err(format!(
                "delay_ms and hang_ms must be at most {MAX_WAIT_MS}"
            ));
        }
        if let Some(d) = self.drip {
            if d.chunk_bytes == 0 {
                return Err("drip.chunk_bytes must be at least 1".into());
            }
            if d.interval_ms > MAX_WAIT_MS {
                return Err(format!("drip.interval_ms must be at most {MAX_WAIT_MS}"));
            }
        }
        Ok(())
    }

    /// The body this step sends, if it names one (`json` is serialized).
    pub fn body_bytes(&self) -> Option<Vec<u8>> {
        match (&self.body, &self.json) {
            (Some(b), _) => Some(b.clone().into_bytes()),
            (None, Some(j)) => Some(serde_json::to_vec(j).unwrap_or_default()),
            (None, None) => None,
        }
    }

    /// How long a hang lasts before the connection is closed anyway.
    pub fn hang_limit_ms(&self) -> u64 {
        self.hang_ms.unwrap_or(DEFAULT_HANG_MS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<Script, String> {
        let r: ScriptRequest = serde_json::from_str(json).map_err(|e| e.to_string())?;
        Script::new(r.steps, r.then)
    }

    #[test]
    fn steps_then_rules() {
        let s = parse(r#"{"key":"k","steps":[{"status":429},{"status":200}]}"#).unwrap();
        let seq: Vec<u16> = (0..4).map(|n| s.step_for(n).unwrap().1.status).collect();
        assert_eq!(seq, [429, 200, 200, 200]);
        let s =
            parse(r#"{"key":"k","steps":[{"status":429},{"status":200}],"then":"cycle"}"#).unwrap();
        let seq: Vec<u16> = (0..4).map(|n| s.step_for(n).unwrap().1.status).collect();
        assert_eq!(seq, [429, 200, 429, 200]);
        let s = parse(r#"{"key":"k","steps":[{"status":503}],"then":"echo"}"#).unwrap();
        assert!(s.step_for(0).is_some());
        assert!(s.step_for(1).is_none());
    }

    #[test]
    fn rejects_mistakes_with_a_reason() {
        assert!(parse(r#"{"key":"k","steps":[{"statsu":429}]}"#)
            .unwrap_err()
            .contains("statsu"));
        assert!(parse(r#"{"key":"k","steps":[{"status":99}]}"#)
            .unwrap_err()
            .contains("steps[0]"));
        assert!(parse(r#"{"key":"k","steps":[{"hang":true,"close":true}]}"#).is_err());
        assert!(parse(r#"{"key":"k","steps":[{"headers":{"Bad Name":"x"}}]}"#).is_err());
        assert!(parse(r#"{"key":"k","steps":[{"headers":{"A":["x","y\n"]}}]}"#).is_err());
        assert!(parse(r#"{"key":"k","steps":[{"headers":{"A":["x","y"]}}]}"#).is_ok());
        assert!(parse(r#"{"key":"k","steps":[]}"#).is_err());
        assert!(parse(r#"{"key":"k","steps":[{}],"then":"loop"}"#).is_err());
    }
}
