//! `Retry-After` (RFC 9110 §10.2.3): delta-seconds or an HTTP-date, turned into a wait.
//!
//! The server's hint is obeyed and never shortened. Dates are read leniently, as RFC 9110
//! §5.6.7 asks of a recipient: besides the three HTTP-date forms, RFC 5322 dates with a
//! numeric zone or `UTC`, names in any case (`gmt`), and RFC 3339 (`2026-12-07T05:21:56Z`),
//! which servers send and PHP's `strtotime` (the seed's parser) reads; a server asking callers
//! to back off is not retried early for its date's format. Anything that is not a valid value
//! (`-1`, `abc`, `1.5`, an empty string) is *no hint*: the loop falls back to its own backoff. A
//! delta too large for any clock saturates to `Duration::MAX` (the wait exceeds every deadline,
//! so the call fails at once rather than sleeping). A date in the past (1970) means "now": zero.
//! The wall clock is injected: an HTTP-date is relative to it.

use std::time::{Duration, SystemTime};

/// Parses one `Retry-After` value relative to `now`. `None` means "no usable hint".
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim_matches(|c: char| c == ' ' || c == '\t');
    if value.is_empty() {
        return None;
    }
    if value.bytes().all(|b| b.is_ascii_digit()) {
        // delta-seconds = 1*DIGIT. Overflow saturates: a huge wait, never a short one.
        return Some(match value.parse::<u64>() {
            Ok(secs) => Duration::from_secs(secs),
            Err(_) => Duration::MAX,
        });
    }
    let at = httpdate::parse_http_date(value)
        .ok()
        .or_else(|| lenient_date(value))?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// A date in a form other than HTTP-date's that servers send: RFC 5322 (a numeric zone, `UT`,
/// `GMT`, or `UTC`, in any case) or RFC 3339.
fn lenient_date(value: &str) -> Option<SystemTime> {
    use time::format_description::well_known::{Rfc2822, Rfc3339};
    let upper = value.to_ascii_uppercase();
    if let Ok(t) = time::OffsetDateTime::parse(&upper, &Rfc3339) {
        return Some(t.into());
    }
    // RFC 5322's names are case-insensitive; `time` reads them as `Mon`, `Dec`.
    let mut words: Vec<String> = upper.split_ascii_whitespace().map(title_case).collect();
    if let Some(zone) = words.last_mut() {
        if zone.eq_ignore_ascii_case("utc") || zone.eq_ignore_ascii_case("z") {
            *zone = "+0000".to_owned();
        } else if zone.eq_ignore_ascii_case("gmt") || zone.eq_ignore_ascii_case("ut") {
            *zone = zone.to_ascii_uppercase();
        }
    }
    let at = time::OffsetDateTime::parse(&words.join(" "), &Rfc2822).ok()?;
    // A day name that is not the date's is no date (`time` does not check it).
    let named = words.first().and_then(|w| w.strip_suffix(','));
    if named.is_some_and(|day| !at.weekday().to_string().starts_with(day)) {
        return None;
    }
    Some(at.into())
}

/// `MON,` → `Mon,`; digits and signs as they are.
fn title_case(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    for (i, c) in word.chars().enumerate() {
        out.push(if i == 0 { c } else { c.to_ascii_lowercase() });
    }
    out
}

/// The wait asked for by a response's `Retry-After` headers. Several valid values: the longest
/// wins (obeying every one of them). Header names compare case-insensitively.
pub fn retry_after_of<'a, I>(headers: I, now: SystemTime) -> Option<Duration>
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
{
    headers
        .into_iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("retry-after"))
        .filter_map(|(_, value)| parse_retry_after(value, now))
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
    }

    #[test]
    fn delta_seconds() {
        assert_eq!(parse_retry_after("2", now()), Some(Duration::from_secs(2)));
        assert_eq!(
            parse_retry_after(" 120\t", now()),
            Some(Duration::from_secs(120))
        );
        assert_eq!(parse_retry_after("0", now()), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after("000007", now()),
            Some(Duration::from_secs(7))
        );
    }

    /// Dates servers send in forms other than HTTP-date's (PHP's `strtotime`, the seed's
    /// parser, reads every one): obeyed. Before, each was no hint, and the call retried after
    /// its own backoff, milliseconds into a wait of seconds.
    #[test]
    fn dates_in_the_forms_servers_send_are_obeyed() {
        let in_3s = Some(Duration::from_secs(3));
        // now() + 3 s = 2023-11-14 22:13:23 UTC, a Tuesday.
        for form in [
            "Tue, 14 Nov 2023 22:13:23 GMT",
            "Tue, 14 Nov 2023 22:13:23 +0000",
            "Tue, 14 Nov 2023 22:13:23 UTC",
            "Tue, 14 Nov 2023 22:13:23 gmt",
            "tue, 14 nov 2023 22:13:23 GMT",
            "Tue, 14 Nov 2023 23:13:23 +0100",
            "14 Nov 2023 22:13:23 GMT",
            "2023-11-14T22:13:23Z",
            "2023-11-14t22:13:23z",
            "2023-11-14T23:13:23+01:00",
            "Tuesday, 14-Nov-23 22:13:23 GMT",
            "Tue Nov 14 22:13:23 2023",
            "Tue,  14 Nov 2023  22:13:23 GMT",
        ] {
            assert_eq!(parse_retry_after(form, now()), in_3s, "{form:?}");
        }
        // A day of one digit (RFC 5322), in the past: now.
        assert_eq!(
            parse_retry_after("Wed, 1 Nov 2023 00:00:00 GMT", now()),
            Some(Duration::ZERO)
        );
        for bad in [
            "2023-11-14",
            "Tue, 14 Nov 2023",
            "14 Nov 2023 22:13:23 CET",
            "tomorrow",
            // A day name that is not the date's.
            "Wed, 14 Nov 2023 22:13:23 +0000",
        ] {
            assert_eq!(parse_retry_after(bad, now()), None, "{bad:?}");
        }
    }

    #[test]
    fn absurd_values_are_no_hint_or_a_huge_wait() {
        for bad in [
            "-1", "abc", "", "   ", "1.5", "+3", "2 s", "0x10", "\u{663}",
        ] {
            assert_eq!(parse_retry_after(bad, now()), None, "{bad:?}");
        }
        assert_eq!(
            parse_retry_after("1000000000000", now()),
            Some(Duration::from_secs(1_000_000_000_000))
        );
        assert_eq!(
            parse_retry_after("99999999999999999999999999", now()),
            Some(Duration::MAX)
        );
    }

    #[test]
    fn http_dates_are_relative_to_the_wall_clock() {
        let in_3s = httpdate::fmt_http_date(now() + Duration::from_secs(3));
        assert_eq!(
            parse_retry_after(&in_3s, now()),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            parse_retry_after("Thu, 01 Jan 1970 00:00:00 GMT", now()),
            Some(Duration::ZERO)
        );
        assert_eq!(
            parse_retry_after("Sunday, 06-Nov-94 08:49:37 GMT", now()),
            Some(Duration::ZERO)
        );
        assert_eq!(
            parse_retry_after("Mon, 32 Foo 2024 99:99:99 GMT", now()),
            None
        );
    }

    #[test]
    fn the_longest_of_several_headers_wins() {
        let headers = [
            ("Retry-After", "abc"),
            ("retry-after", "3"),
            ("RETRY-AFTER", "1"),
            ("x", "9"),
        ];
        assert_eq!(retry_after_of(headers, now()), Some(Duration::from_secs(3)));
        assert_eq!(retry_after_of([("x", "9")], now()), None);
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC*", secs in 0u64..4_000_000_000) {
            let now = SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
            let _ = parse_retry_after(&s, now);
        }

        #[test]
        fn never_shortens_delta_seconds(n in 0u64..u64::MAX, pad in "[ \t]{0,3}") {
            let got = parse_retry_after(&format!("{pad}{n}{pad}"), now()).unwrap();
            prop_assert!(got >= Duration::from_secs(n));
        }

        #[test]
        fn never_shortens_dates(ahead in 0u64..10_000_000, behind in 0u64..1_000_000_000) {
            let base = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
            let future = httpdate::fmt_http_date(base + Duration::from_secs(ahead));
            prop_assert_eq!(parse_retry_after(&future, base), Some(Duration::from_secs(ahead)));
            let past = httpdate::fmt_http_date(base - Duration::from_secs(behind));
            prop_assert_eq!(parse_retry_after(&past, base), Some(Duration::ZERO));
        }
    }
}
