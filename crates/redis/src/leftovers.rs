//! Funnel slots this process holds on Redis right now, so the binding can give them back at
//! request end when a bailout (fatal error, `max_execution_time`) long-jumped past the frames
//! that would have dropped their permits. Without this a slot would stay held until its lease
//! ends (twice the timeout by default).
//!
//! Entries of another pid (inherited across fork) are dropped, never released: the parent's
//! slots are the parent's.

use std::sync::{Arc, Mutex, PoisonError};

use crate::connection::Server;

struct Held {
    pid: u32,
    server: Arc<Server>,
    key: String,
    /// The background holders' set of a funnel with `share`.
    background_key: Option<String>,
    token: String,
}

static HELD: Mutex<Vec<Held>> = Mutex::new(Vec::new());

pub(crate) fn add(server: &Arc<Server>, key: &str, background_key: Option<&str>, token: &str) {
    HELD.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(Held {
            pid: resilient_core::current_pid(),
            server: server.clone(),
            key: key.to_owned(),
            background_key: background_key.map(str::to_owned),
            token: token.to_owned(),
        });
}

pub(crate) fn remove(token: &str) {
    let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(i) = held.iter().position(|h| h.token == token) {
        held.swap_remove(i);
    }
}

/// Gives back every slot this process still holds on Redis (ZREM by token); returns how many
/// were sent.
pub fn release_leftovers() -> usize {
    let taken = std::mem::take(&mut *HELD.lock().unwrap_or_else(PoisonError::into_inner));
    let pid = resilient_core::current_pid();
    taken
        .into_iter()
        .filter(|h| h.pid == pid)
        .filter(|h| {
            h.server
                .send_zrem(&h.key, h.background_key.as_deref(), &h.token)
                .is_ok()
        })
        .count()
}
