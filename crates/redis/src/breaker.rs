//! The circuit breaker on Redis: one state for every host, so one probe goes out across the
//! fleet when the open period ends (`scripts::BREAKER`, one EVALSHA per admission and one per
//! outcome, on the server's clock; a success's is written without waiting for its reply, which
//! is always "not opened"), with `resilient_core::CircuitBreaker`'s rules: count calls
//! and failures in 20 buckets of the window (those since the last close), open when
//! `consecutive_failures` failed in a row, or when `min_calls` were counted and failures
//! reached `failure_ratio`, stay open `open_for` ± 20 %,
//! then one probe whose ticket is given up at its bound.
//!
//! Admissions are kept for [`KEEP_MS`] per process: a closed or refused answer is reused, without
//! a round trip, by this process's admissions in the next 5 ms (the attempt loop asks every
//! guard again at each millisecond of a `funnel.wait`). Bound: a transition made by another
//! host is seen here at most 5 ms late; this process's own transitions clear it at once; a probe
//! is never reused.
//!
//! A success's record that Redis does not run once written (an error answer, a connection
//! dropped before Redis read it, a script flush: at most 16 per process before the answer is
//! read) is lost: the window counts one success less and a streak of failures goes on, so the
//! breaker may open a little earlier, never later.
//!
//! Tickets: a Redis ticket is the word `3 << 62 | generation` (phase bits 3, which a
//! shared-memory ticket never has), so an outcome goes back to the store that issued its
//! ticket, also when Redis went away in between (the `local` fallback issues its own).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use resilient_core::{Admission, BreakerConfig, Ticket, Transition};
use resilient_http::BreakerStore;

use crate::backend::Fallback;
use crate::connection::{evalsha, Server};
use crate::scripts::BREAKER;

const REDIS_TICKET: u64 = 3 << 62;

/// How long an admission answer is reused by this process, ms.
pub const KEEP_MS: u64 = 5;

/// Kept answers: none, closed, refused.
const NONE: u64 = 0;
const CLOSED: u64 = 1;
const REFUSED: u64 = 2;

pub struct RedisBreaker {
    server: Arc<Server>,
    key: String,
    config: BreakerConfig,
    fallback: Fallback<Arc<dyn BreakerStore>>,
    /// The kept answer (`NONE`, `CLOSED`, `REFUSED`) and until when (`now_ms` of the loop).
    kept: AtomicU64,
    kept_until_ms: AtomicU64,
}

impl RedisBreaker {
    pub(crate) fn new(
        server: Arc<Server>,
        key: String,
        config: BreakerConfig,
        fallback: Fallback<Arc<dyn BreakerStore>>,
    ) -> Self {
        Self {
            server,
            key,
            config,
            fallback,
            kept: AtomicU64::new(NONE),
            kept_until_ms: AtomicU64::new(0),
        }
    }

    fn keep(&self, answer: u64, now_ms: u64) {
        self.kept.store(answer, Ordering::Relaxed);
        self.kept_until_ms
            .store(now_ms.saturating_add(KEEP_MS), Ordering::Relaxed);
    }

    fn forget(&self) {
        self.kept.store(NONE, Ordering::Relaxed);
    }

    fn local(&self) -> Option<&Arc<dyn BreakerStore>> {
        match &self.fallback {
            Fallback::Local { store, .. } => Some(store),
            _ => None,
        }
    }
}

fn is_ours(ticket: Ticket) -> bool {
    ticket.to_word() >> 62 == 3
}

impl BreakerStore for RedisBreaker {
    fn why_down(&self) -> Option<String> {
        crate::connection::why_unreachable()
    }

    fn admit(&self, now_ms: u64) -> Admission {
        if now_ms < self.kept_until_ms.load(Ordering::Relaxed) {
            match self.kept.load(Ordering::Relaxed) {
                CLOSED => return Admission::Closed,
                REFUSED => {
                    return Admission::Refused {
                        until_ms: now_ms.saturating_add(1),
                    }
                }
                _ => {}
            }
        }
        let probe_ms = self.config.probe_timeout().as_millis() as u64;
        let answer = self.server.route(&self.key).run(|c| {
            BREAKER
                .key(&self.key)
                .arg("admit")
                .arg(self.config.bucket_ms())
                .arg(probe_ms.max(1))
                .invoke::<Vec<i64>>(c)
        });
        match answer.as_deref() {
            Ok([0]) => {
                self.keep(CLOSED, now_ms);
                Admission::Closed
            }
            Ok([1, _until]) => {
                self.keep(REFUSED, now_ms);
                Admission::Refused {
                    // The server's clock is not ours: ask again soon rather than at its moment.
                    until_ms: now_ms.saturating_add(1),
                }
            }
            Ok([2, generation, took_over]) => Admission::Probe {
                ticket: Ticket::from_word(REDIS_TICKET | *generation as u64),
                took_over: *took_over == 1,
            },
            _ => self.fallback.decide(
                |local| local.admit(now_ms),
                || Admission::Closed,
                || Admission::Unreachable,
            ),
        }
    }

    fn record(
        &self,
        failure: bool,
        started_ms: u64,
        now_ms: u64,
        jitter: u64,
    ) -> Option<Transition> {
        // The server's clock is not ours: it gets how long ago the attempt was sent.
        let duration_ms = now_ms.saturating_sub(started_ms);
        let mut command = evalsha(&BREAKER, &[&self.key]);
        command
            .arg("record")
            .arg(self.config.bucket_ms())
            .arg(u8::from(failure))
            .arg(self.config.min_calls())
            .arg(self.config.failure_ratio())
            .arg(self.config.open_ms(jitter))
            .arg(self.config.consecutive_failures())
            .arg(duration_ms);
        // A success never opens the breaker (its answer is always 0): written without waiting,
        // its reply read with the next command's, so a successful call returns without a round
        // trip after its attempt. A failure waits: it may open the breaker.
        let answer = self
            .server
            .route(&self.key)
            .run_after_attempt(|c| match failure {
                false => c.send_script(&BREAKER, &command).map(|()| 0),
                true => c.query_script::<i64>(&BREAKER, &command),
            });
        match answer {
            Ok(1) => {
                self.forget();
                Some(Transition::Opened)
            }
            Ok(_) => None,
            // Counted as a fallback like an admission decided without Redis.
            Err(_) => self.fallback.decide(
                |local| local.record(failure, started_ms, now_ms, jitter),
                || None,
                || None,
            ),
        }
    }

    fn resolve(
        &self,
        ticket: Ticket,
        success: bool,
        now_ms: u64,
        jitter: u64,
    ) -> Option<Transition> {
        if !is_ours(ticket) {
            return self
                .local()
                .and_then(|local| local.resolve(ticket, success, now_ms, jitter));
        }
        let generation = ticket.to_word() & !REDIS_TICKET;
        let answer = self.server.route(&self.key).run_after_attempt(|c| {
            BREAKER
                .key(&self.key)
                .arg("resolve")
                .arg(self.config.bucket_ms())
                .arg(generation)
                .arg(u8::from(success))
                .arg(self.config.open_ms(jitter))
                .invoke::<i64>(c)
        });
        self.forget();
        match answer {
            Ok(1) => Some(Transition::Closed),
            Ok(2) => Some(Transition::Reopened),
            // Given up, or Redis gone: the ticket is given up at its bound on the server.
            _ => None,
        }
    }

    fn give_back(&self, ticket: Ticket, now_ms: u64) -> bool {
        if !is_ours(ticket) {
            return self
                .local()
                .is_some_and(|local| local.give_back(ticket, now_ms));
        }
        let generation = ticket.to_word() & !REDIS_TICKET;
        self.server
            .route(&self.key)
            .run_after_attempt(|c| {
                BREAKER
                    .key(&self.key)
                    .arg("give_back")
                    .arg(self.config.bucket_ms())
                    .arg(generation)
                    .invoke::<i64>(c)
            })
            .is_ok_and(|n| n == 1)
    }

    fn retakes(&self, returned: Ticket, granted: Ticket) -> bool {
        match (is_ours(returned), is_ours(granted)) {
            (true, true) => {}
            // Both from the local fallback; or one from each store: not the same period.
            (false, false) => {
                return self
                    .local()
                    .is_some_and(|local| local.retakes(returned, granted))
            }
            _ => return false,
        }
        // give back, then admit: two transitions, each one generation.
        let generation = |t: Ticket| t.to_word() & !REDIS_TICKET;
        generation(granted) == generation(returned) + 2
    }
}
