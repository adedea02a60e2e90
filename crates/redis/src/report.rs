//! Errors Redis answers that no timeout explains (a wrong password, a user without the right to
//! run scripts, a database index out of range, a key of the wrong type). The guards fall back
//! as for an unreachable Redis (`on_backend_error`), and the first of each kind in a process is
//! reported, so a misconfiguration is never silent. Reports never hold the URL.

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
    if crate::connection::lost(e) {
        return;
    }
    let Some(report) = REPORTER.get() else {
        return;
    };
    let code = e.code().unwrap_or_else(|| e.category()).to_owned();
    let pid = resilient_core::current_pid();
    {
        let mut reported = REPORTED.lock().unwrap_or_else(PoisonError::into_inner);
        if reported.iter().any(|(p, c)| *p == pid && *c == code) {
            return;
        }
        reported.push((pid, code.clone()));
    }
    report(&format!(
        "resilient: Redis answered {code}{}; calls follow on_backend_error until it is fixed \
         (reported once per process)",
        e.detail().map(|d| format!(" ({d})")).unwrap_or_default()
    ));
}
