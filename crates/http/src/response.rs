//! The answer a call returns: the final upstream response plus what it cost to get it.

use std::time::Duration;

use reqwest::Url;

use crate::transport::RawResponse;

/// A final upstream response (any status the loop does not retry), with the attempt count and
/// the elapsed time of the whole call (all attempts and sleeps).
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    status: u16,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
    attempts: u32,
    elapsed: Duration,
    /// The URL that gave the answer (after redirects), without user-info or fragment; `None`
    /// for a response made without a request (a test's fake).
    url: Option<String>,
    /// The answer came after following at least one redirect.
    redirected: bool,
}

impl Response {
    pub fn new(raw: RawResponse, attempts: u32, elapsed: Duration) -> Self {
        Self {
            status: raw.status,
            headers: raw.headers,
            body: raw.body,
            attempts,
            elapsed,
            url: None,
            redirected: false,
        }
    }

    /// The response as the answer from `url`, reached by following redirects or not.
    pub fn answered_from(mut self, url: &Url, redirected: bool) -> Self {
        self.redirected = redirected;
        let mut shown = url.clone();
        let _ = shown.set_username("");
        let _ = shown.set_password(None);
        shown.set_fragment(None);
        self.url = Some(shown.into());
        self
    }

    /// The URL that gave the answer: the request's, or the last redirect's target. No
    /// user-info (the client sends it as Authorization) and no fragment.
    pub fn url(&self) -> Option<&str> {
        self.url.as_deref()
    }

    /// Whether redirects were followed to get this answer (then [`Response::url`] is the last
    /// one's target).
    pub fn redirected(&self) -> bool {
        self.redirected
    }

    pub fn status(&self) -> u16 {
        self.status
    }

    /// 2xx.
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// All values of a header (case-insensitive name), in arrival order, as received (bytes:
    /// a value need not be UTF-8).
    pub fn header_values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }

    /// A header's values joined with ", " (as PSR-7 `getHeaderLine` and Laravel's `header()`),
    /// or `None` when absent.
    pub fn header(&self, name: &str) -> Option<Vec<u8>> {
        let values: Vec<&[u8]> = self.header_values(name).collect();
        (!values.is_empty()).then(|| values.join(b", ".as_slice()))
    }

    /// Every header as (lower-case name, value), a name repeated per value, in arrival order.
    pub fn headers(&self) -> &[(String, Vec<u8>)] {
        &self.headers
    }

    /// Headers grouped by name, names in first-seen order: name => [values].
    pub fn headers_grouped(&self) -> Vec<(&str, Vec<&[u8]>)> {
        let mut grouped: Vec<(&str, Vec<&[u8]>)> = Vec::new();
        for (name, value) in &self.headers {
            match grouped.iter_mut().find(|(n, _)| n == name) {
                Some((_, values)) => values.push(value),
                None => grouped.push((name, vec![value])),
            }
        }
        grouped
    }

    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// The body decoded as JSON.
    pub fn json(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_slice(&self.body)
    }

    /// Attempts made by the call, the first one included.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Time from the call's start to this answer, sleeps included.
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_multi_valued_and_case_insensitive() {
        let raw = RawResponse {
            status: 200,
            headers: vec![
                ("set-cookie".into(), b"a=1".to_vec()),
                ("x-n".into(), b"1".to_vec()),
                ("set-cookie".into(), b"b=2".to_vec()),
            ],
            body: br#"{"x":1}"#.to_vec(),
        };
        let r = Response::new(raw, 2, Duration::from_millis(5));
        assert_eq!(
            r.header("Set-Cookie").as_deref(),
            Some(b"a=1, b=2".as_slice())
        );
        assert_eq!(r.header("missing"), None);
        assert_eq!(
            r.headers_grouped()[0],
            ("set-cookie", vec![b"a=1".as_slice(), b"b=2".as_slice()])
        );
        assert_eq!(r.json().unwrap()["x"], 1);
        assert!(r.ok());
        assert_eq!((r.attempts(), r.elapsed()), (2, Duration::from_millis(5)));
    }
}
