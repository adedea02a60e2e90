//! Errors Redis answers that no timeout explains (a wrong password, a user without the right to
//! run scripts, a database index out of range, a key of the wrong type), and connections that
//! fail for a reason no network trouble explains (a TLS certificate not trusted, a name that
//! does not match it). The guards fall back as for an unreachable Redis (`on_backend_error`),
//! and the first of each kind in a process is reported, so a misconfiguration is never silent.
//! Reports never hold the URL, nor the arguments Redis quotes back.

use std::sync::{Mutex, OnceLock, PoisonError};

static REPORTER: OnceLock<fn(&str)> = OnceLock::new();

/// The kinds this process reported already, with its pid (a forked child reports again).
static REPORTED: Mutex<Vec<(u32, String)>> = Mutex::new(Vec::new());

/// Where reports go (the binding: PHP's error log). Unset, nowhere. The first call wins.
pub fn report_to(reporter: fn(&str)) {
    let _ = REPORTER.set(reporter);
}

/// Reports `e` once per process and kind, unless a timeout or a lost connection explains it.
pub(crate) fn failure(e: &redis::RedisError) {
    let refused = refused_connection(e);
    if crate::connection::lost(e) && refused.is_none() {
        return;
    }
    let Some(report) = REPORTER.get() else {
        return;
    };
    // The kind reported once per process, and what the log line says of it.
    let (code, what) = match refused {
        Some(why) => (
            why.clone(),
            format!("the connection to Redis failed: {why}"),
        ),
        None if e.kind() == redis::ErrorKind::ParseError => (
            "parse error".to_owned(),
            format!(
                "the server at the Redis URL does not answer as Redis does (another service on \
                 that port?): {}",
                one_line(e.detail().unwrap_or("a reply that is not RESP"))
            ),
        ),
        None => (code(e).to_owned(), format!("Redis {}", answered(e))),
    };
    let pid = resilient_core::current_pid();
    {
        let mut reported = REPORTED.lock().unwrap_or_else(PoisonError::into_inner);
        if reported.iter().any(|(p, c)| *p == pid && *c == code) {
            return;
        }
        reported.push((pid, code));
    }
    report(&format!(
        "resilient: {what}; calls follow on_backend_error while it lasts (reported once per \
         process)"
    ));
}

/// What went wrong with `e`, in a few words for the message of a call refused under
/// `on_backend_error` 'closed', after `Redis: ` (`connection refused`, `no answer in time`,
/// `answered NOPERM (...)`). Never the URL, nor the arguments Redis quotes back.
pub(crate) fn describe(e: &redis::RedisError) -> String {
    if let Some(why) = refused_connection(e) {
        return format!("the connection failed: {}", one_line(&why));
    }
    if e.kind() == redis::ErrorKind::ParseError {
        return "the server does not answer as Redis does".to_owned();
    }
    if let Some(io) = io_error(e) {
        // This crate's own words (`the lookup of the Redis host name did not answer in
        // time`), else the kind's rather than the system's.
        return match (io.get_ref(), io.kind()) {
            (Some(ours), _) => one_line(&ours.to_string()),
            (None, std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock) => {
                "no answer in time".to_owned()
            }
            (None, std::io::ErrorKind::ConnectionRefused) => "connection refused".to_owned(),
            (None, _) if e.is_connection_dropped() => "the connection was closed".to_owned(),
            (None, _) => one_line(&io.to_string()),
        };
    }
    // A cluster's redirection names a node's address, which a message shown to users leaves out.
    if matches!(e.kind(), redis::ErrorKind::Moved | redis::ErrorKind::Ask) {
        return format!("answered {}", code(e));
    }
    answered(e)
}

/// The error code Redis answered (`NOPERM`), or the error's category when it has none.
fn code(e: &redis::RedisError) -> &str {
    e.code().unwrap_or_else(|| e.category())
}

/// `answered NOPERM (Redis's words on one line, without the arguments it quotes back)`.
fn answered(e: &redis::RedisError) -> String {
    format!(
        "answered {}{}",
        code(e),
        e.detail()
            .map(|d| format!(" ({})", one_line(without_arguments(d))))
            .unwrap_or_default()
    )
}

/// Redis's words without the arguments it quotes back (`unknown command 'HELLO', with args
/// beginning with: '3' 'AUTH' 'default' '<password>'`): what was sent may hold a password.
fn without_arguments(detail: &str) -> &str {
    match detail.find("with args beginning with") {
        Some(at) => detail[..at].trim_end_matches([',', ' ']),
        None => detail,
    }
}

/// `text` on one line of the log, at most 200 characters: what a server answered may run over
/// lines (a parser's words, an HTTP server's).
fn one_line(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(200) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

/// Why a connection failed when no network trouble explains it: the I/O error the TLS layer
/// gives for a certificate it does not trust, or a name that does not match (`InvalidData`,
/// its text naming the problem, never the URL).
fn refused_connection(e: &redis::RedisError) -> Option<String> {
    let io = io_error(e)?;
    (io.kind() == std::io::ErrorKind::InvalidData).then(|| io.to_string())
}

/// The I/O error behind `e`, when a read, a write or a connect failed.
pub(crate) fn io_error(e: &redis::RedisError) -> Option<&std::io::Error> {
    std::error::Error::source(e)?.downcast_ref::<std::io::Error>()
}

#[cfg(test)]
mod tests {
    use super::describe;
    use redis::{ErrorKind, RedisError};

    /// What a refused call's message says of each kind of failure: never an address (a
    /// cluster's redirection names a node's) nor the arguments Redis quotes back.
    #[test]
    fn a_failure_is_told_without_addresses_or_arguments() {
        let io = |kind: std::io::ErrorKind| RedisError::from(std::io::Error::from(kind));
        assert_eq!(
            describe(&io(std::io::ErrorKind::TimedOut)),
            "no answer in time"
        );
        assert_eq!(
            describe(&io(std::io::ErrorKind::WouldBlock)),
            "no answer in time"
        );
        assert_eq!(
            describe(&io(std::io::ErrorKind::ConnectionRefused)),
            "connection refused"
        );
        assert_eq!(
            describe(&io(std::io::ErrorKind::ConnectionReset)),
            "the connection was closed"
        );
        let ours = std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "the lookup of the Redis host name did not answer in time",
        );
        assert_eq!(
            describe(&RedisError::from(ours)),
            "the lookup of the Redis host name did not answer in time"
        );
        for kind in [ErrorKind::Moved, ErrorKind::Ask] {
            let e = RedisError::from((kind, "redirected", "3999 10.0.0.7:6379".to_owned()));
            let told = describe(&e);
            assert!(told.starts_with("answered "), "{told}");
            assert!(!told.contains("10.0.0.7"), "{told}");
        }
        let e = RedisError::from((
            ErrorKind::ResponseError,
            "An error was signalled by the server",
            "unknown command 'HELLO', with args beginning with: '3' 'AUTH' 'default' 's3cret'"
                .to_owned(),
        ));
        let told = describe(&e);
        assert!(
            told.contains("unknown command 'HELLO'") && !told.contains("s3cret"),
            "{told}"
        );
    }
}
