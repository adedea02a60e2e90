//! `allow_redirects`: redirects followed inside one attempt, over any transport.
//!
//! Every hop is part of the same attempt: it runs on what is left of the attempt's timeout
//! (so a redirect chain can never outlast it), holds the same funnel permit, and counts as one
//! attempt for the retry policy. The rules are Guzzle's: 303 (and, unless `strict`, 301/302)
//! continue without a body, as GET unless the method was GET, HEAD or OPTIONS, which stay;
//! Authorization, Cookie and Proxy-Authorization are not sent to another host; a redirect to
//! a scheme outside `protocols`, or one more than `max`, ends the attempt with
//! [`FailureKind::Redirects`] (not retried: the same request would be redirected the same
//! way).

use std::borrow::Cow;
use std::time::Duration;

use reqwest::header::{
    HeaderValue, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, COOKIE, HOST, REFERER,
};
use reqwest::{Method, Url};

use crate::clock::Clock;
use crate::request::{display_url, PreparedRequest};
use crate::transport::{AttemptLimits, FailureKind, RawResponse, Transport, TransportError};
use crate::transport_options::{BodyTarget, Redirects};

/// Sends `request`, following up to `rules.max` redirects within `limits.timeout`. The answer
/// comes with the URL that gave it when a redirect was followed (`None`: the request's own).
pub async fn follow(
    transport: &dyn Transport,
    request: &PreparedRequest,
    limits: AttemptLimits,
    rules: Redirects,
    clock: &dyn Clock,
) -> Result<(RawResponse, Option<Url>), TransportError> {
    let began = clock.monotonic_ns();
    let mut current = Cow::Borrowed(request);
    let mut hops = 0;
    loop {
        let spent = Duration::from_nanos(clock.monotonic_ns().saturating_sub(began));
        let left = limits.timeout.saturating_sub(spent);
        if left.is_zero() {
            return Err(TransportError::new(
                FailureKind::Timeout,
                format!("the attempt timed out after {hops} redirect(s)"),
            ));
        }
        let hop_limits = AttemptLimits {
            timeout: left,
            connect_timeout: limits.connect_timeout.min(left),
            follows_redirects: true,
            ..limits.clone()
        };
        let response = transport.send(&current, hop_limits).await?;
        let Some(location) = location_of(&response) else {
            let redirected = match current {
                Cow::Owned(last) => Some(last.url),
                Cow::Borrowed(_) => None,
            };
            return Ok((response, redirected));
        };
        // The redirect's own body is thrown away, whether it is followed or not.
        if let Some(shared) = &limits.body.shared {
            shared.give_back(response.body.len() as u64);
        }
        if hops == rules.max {
            return Err(TransportError::new(
                FailureKind::Redirects,
                format!("too many redirects (allow_redirects.max is {})", rules.max),
            ));
        }
        hops += 1;
        let next = next_request(&current, response.status, location, rules)?;
        current = Cow::Owned(next);
    }
}

/// The `Location` of a redirect status (301, 302, 303, 307, 308), if any.
fn location_of(response: &RawResponse) -> Option<&[u8]> {
    redirect_location(response.status, &response.headers)
}

/// Where the body of an answer with `status` and `headers` goes: a redirect that is followed
/// (`follows_redirects`) is thrown away, never written to the sink, which an answer still to
/// come truncates (or none leaves as it was).
pub(crate) fn body_target_for<'t>(
    target: &'t BodyTarget,
    status: u16,
    headers: &[(String, Vec<u8>)],
    follows_redirects: bool,
) -> Cow<'t, BodyTarget> {
    if target.sink.is_some() && follows_redirects && redirect_location(status, headers).is_some() {
        Cow::Owned(BodyTarget {
            sink: None,
            ..target.clone()
        })
    } else {
        Cow::Borrowed(target)
    }
}

/// The `Location` of an answer with `status` and `headers` that is a redirect, if any.
pub(crate) fn redirect_location(status: u16, headers: &[(String, Vec<u8>)]) -> Option<&[u8]> {
    if !matches!(status, 301 | 302 | 303 | 307 | 308) {
        return None;
    }
    headers
        .iter()
        .find(|(n, _)| n == "location")
        .map(|(_, v)| v.as_slice())
}

/// The request a redirect asks for.
fn next_request(
    previous: &PreparedRequest,
    status: u16,
    location: &[u8],
    rules: Redirects,
) -> Result<PreparedRequest, TransportError> {
    let invalid = || {
        TransportError::new(
            FailureKind::Redirects,
            "a redirect's Location is not a valid URL",
        )
    };
    let location = std::str::from_utf8(location)
        .ok()
        .and_then(|l| previous.url.join(l.trim()).ok())
        .ok_or_else(invalid)?;
    let allowed = match location.scheme() {
        "https" => rules.https,
        "http" => rules.http,
        _ => false,
    };
    if !allowed {
        return Err(TransportError::new(
            FailureKind::Redirects,
            format!(
                "a redirect to {}:// is not allowed by allow_redirects.protocols",
                location.scheme()
            ),
        ));
    }
    // A URL the `http` crate takes too (not longer than 65,534 bytes): one it refuses could
    // not be requested, and would be said as our failure.
    if hyper::Uri::try_from(location.as_str()).is_err() {
        return Err(invalid());
    }
    let mut next = previous.clone();
    // Guzzle's rule (what `Http::` and its fakes do), not the browsers': no body goes where a
    // move points, and a method but GET, HEAD or OPTIONS (a PUT or a DELETE too) becomes GET.
    if status == 303 || (!rules.strict && matches!(status, 301 | 302)) {
        if ![Method::GET, Method::HEAD, Method::OPTIONS].contains(&previous.method) {
            next.method = Method::GET;
        }
        next.body = None;
        next.multipart = None;
        next.headers.remove(CONTENT_TYPE);
        next.headers.remove(CONTENT_LENGTH);
    }
    // Origin = scheme, host and port: a hop from https to http on the same port would send the
    // credentials in clear text.
    let same_authority = location.host_str() == previous.url.host_str()
        && location.port_or_known_default() == previous.url.port_or_known_default();
    let same_origin = same_authority && location.scheme() == previous.url.scheme();
    if !same_authority {
        // A Host given for the first server (a vhost name) would misroute the request at the
        // next one and tell it the internal name: the new URL's host is sent instead.
        next.headers.remove(HOST);
    }
    if !same_origin {
        for secret in [AUTHORIZATION, COOKIE, reqwest::header::PROXY_AUTHORIZATION] {
            next.headers.remove(secret);
        }
    }
    next.headers.remove(REFERER);
    if rules.referer && !(previous.url.scheme() == "https" && location.scheme() == "http") {
        if let Ok(referer) = HeaderValue::from_str(&display_url(&previous.url)) {
            next.headers.insert(REFERER, referer);
        }
    }
    next.url = location;
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::ClientConfig;
    use crate::request::{join_url, prepare_at, RequestOptions};

    fn request(method: &str, url: &str) -> PreparedRequest {
        let c = ClientConfig::default();
        let options = RequestOptions::new()
            .header("Authorization", b"Bearer s3cret")
            .unwrap()
            .header("Cookie", b"s=1")
            .unwrap()
            .body(crate::request::Body::Json(b"{}".to_vec()))
            .unwrap();
        prepare_at(&c, method, join_url(None, url).unwrap(), options).unwrap()
    }

    #[test]
    fn another_host_gets_no_credentials_and_a_post_becomes_a_get() {
        let r = request("POST", "http://127.0.0.1:8080/a");
        let next = next_request(&r, 302, b"http://localhost:8080/b", Redirects::default()).unwrap();
        assert_eq!(next.method, Method::GET);
        assert!(next.body.is_none() && next.headers.get(CONTENT_TYPE).is_none());
        assert!(next.headers.get(AUTHORIZATION).is_none());
        assert!(next.headers.get(COOKIE).is_none());
        assert_eq!(next.url.as_str(), "http://localhost:8080/b");
    }

    /// Guzzle's rule, which `Http::` and its fakes follow: a 303, and unless `strict` a 301 or
    /// 302, continues as GET without a body for every method but GET, HEAD and OPTIONS, which
    /// keep theirs. A PUT or DELETE is not sent again, body and all, where the redirect points.
    #[test]
    fn a_see_other_or_non_strict_move_continues_as_get_unless_the_method_is_safe() {
        let strict = Redirects {
            strict: true,
            ..Redirects::default()
        };
        for method in ["POST", "PUT", "PATCH", "DELETE", "PURGE"] {
            let r = request(method, "http://127.0.0.1:8080/a");
            for (status, rules) in [
                (301, Redirects::default()),
                (302, Redirects::default()),
                (303, Redirects::default()),
                (303, strict),
            ] {
                let next = next_request(&r, status, b"/b", rules).unwrap();
                assert_eq!(next.method, Method::GET, "{method} after {status}");
                assert!(next.body.is_none() && next.headers.get(CONTENT_TYPE).is_none());
            }
            for (status, rules) in [(301, strict), (302, strict), (307, Redirects::default())] {
                let next = next_request(&r, status, b"/b", rules).unwrap();
                assert_eq!(next.method.as_str(), method, "{method} after {status}");
                assert!(next.body.is_some());
            }
        }
        for method in ["GET", "HEAD", "OPTIONS"] {
            let r = request(method, "http://127.0.0.1:8080/a");
            for status in [301, 302, 303, 307, 308] {
                let next = next_request(&r, status, b"/b", Redirects::default()).unwrap();
                assert_eq!(next.method.as_str(), method, "{method} after {status}");
                // Their body too goes, as Guzzle drops it, except after a 307 or 308.
                assert_eq!(
                    next.body.is_some(),
                    status >= 307,
                    "{method} after {status}"
                );
            }
        }
    }

    #[test]
    fn a_host_header_is_kept_on_the_same_server_only() {
        let c = ClientConfig::default();
        let options = RequestOptions::new()
            .header("Host", b"api.internal")
            .unwrap();
        let r = prepare_at(
            &c,
            "GET",
            join_url(None, "http://127.0.0.1:8080/a").unwrap(),
            options,
        )
        .unwrap();
        let same = next_request(&r, 302, b"/b", Redirects::default()).unwrap();
        assert_eq!(same.headers.get(HOST).unwrap(), "api.internal");
        for elsewhere in [&b"http://localhost:8080/b"[..], b"http://127.0.0.1:8081/b"] {
            let next = next_request(&r, 302, elsewhere, Redirects::default()).unwrap();
            assert!(next.headers.get(HOST).is_none(), "{next:?}");
        }
    }

    #[test]
    fn the_same_host_keeps_credentials_and_strict_keeps_the_method() {
        let r = request("POST", "http://127.0.0.1:8080/a");
        let strict = Redirects {
            strict: true,
            ..Redirects::default()
        };
        let next = next_request(&r, 302, b"/b?x=1", strict).unwrap();
        assert_eq!(next.method, Method::POST);
        assert_eq!(next.body.as_deref(), Some(b"{}".as_slice()));
        assert!(next.headers.get(AUTHORIZATION).is_some());
        assert_eq!(next.url.as_str(), "http://127.0.0.1:8080/b?x=1");
        assert_eq!(
            next_request(&r, 303, b"/c", strict).unwrap().method,
            Method::GET
        );
        assert_eq!(
            next_request(&r, 307, b"/c", Redirects::default())
                .unwrap()
                .method,
            Method::POST
        );
    }

    #[test]
    fn a_hop_to_another_scheme_on_the_same_host_and_port_gets_no_credentials() {
        let r = request("GET", "https://127.0.0.1:8443/a");
        let next = next_request(&r, 302, b"http://127.0.0.1:8443/b", Redirects::default()).unwrap();
        assert!(
            next.headers.get(AUTHORIZATION).is_none(),
            "https to http: in clear text"
        );
        assert!(next.headers.get(COOKIE).is_none());
        let r = request("GET", "http://127.0.0.1:8443/a");
        let next =
            next_request(&r, 302, b"https://127.0.0.1:8443/b", Redirects::default()).unwrap();
        assert!(next.headers.get(AUTHORIZATION).is_none(), "another origin");
    }

    /// Answers every request with a redirect to `/next`, counting sends.
    struct Loop(std::sync::atomic::AtomicU32);

    impl Transport for Loop {
        fn send(
            &self,
            _: &PreparedRequest,
            _: AttemptLimits,
        ) -> crate::clock::BoxFuture<'static, Result<RawResponse, TransportError>> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async {
                Ok(RawResponse {
                    status: 302,
                    headers: vec![("location".into(), b"/next".to_vec())],
                    body: vec![],
                })
            })
        }
    }

    #[test]
    fn a_loop_stops_after_max_redirects_within_one_attempt() {
        let transport = Loop(Default::default());
        let limits = AttemptLimits {
            timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(1),
            connect_timeout_setting: Duration::from_secs(1),
            body: 1024.into(),
            follows_redirects: false,
        };
        let rules = Redirects {
            max: 3,
            ..Redirects::default()
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let e = rt
            .block_on(follow(
                &transport,
                &request("GET", "http://h/a"),
                limits,
                rules,
                &crate::clock::SystemClock,
            ))
            .unwrap_err();
        assert_eq!(e.kind, FailureKind::Redirects);
        assert!(e.detail.contains("too many redirects"), "{}", e.detail);
        assert_eq!(
            transport.0.load(std::sync::atomic::Ordering::SeqCst),
            4,
            "the first send and 3 redirects"
        );
        assert!(!e.kind.is_transient(), "never retried");
    }

    #[test]
    fn refused_schemes_and_bad_locations_end_the_attempt() {
        let r = request("GET", "https://127.0.0.1/a");
        let only_https = Redirects {
            http: false,
            ..Redirects::default()
        };
        let e = next_request(&r, 301, b"http://127.0.0.1/b", only_https).unwrap_err();
        assert_eq!(e.kind, FailureKind::Redirects);
        let e = next_request(&r, 301, b"ftp://x/", Redirects::default()).unwrap_err();
        assert!(e.detail.contains("ftp://"), "{}", e.detail);
        // A URL of another scheme that the `http` crate cannot request says its scheme too.
        for location in [
            &b"file:///etc/passwd"[..],
            b"mailto:a@example.com",
            b"data:,x",
        ] {
            let e = next_request(&r, 302, location, Redirects::default()).unwrap_err();
            let scheme = std::str::from_utf8(location)
                .unwrap()
                .split(':')
                .next()
                .unwrap();
            assert!(
                e.detail.contains(&format!("{scheme}:// is not allowed")),
                "{}",
                e.detail
            );
        }
        let e = next_request(&r, 301, b"http://[::1", Redirects::default()).unwrap_err();
        assert!(e.detail.contains("not a valid URL"));
        // A URL the `http` crate refuses (longer than 65,534 bytes), though `url` takes it:
        // the upstream's bad redirect, not a request we could not make.
        let long = format!("/b?{}", "x".repeat(70_000));
        let e = next_request(&r, 302, long.as_bytes(), Redirects::default()).unwrap_err();
        assert_eq!(e.kind, FailureKind::Redirects);
        assert!(e.detail.contains("not a valid URL"));
    }
}
