//! The circuit breaker on Redis: one state for every host, so one probe goes out across the
//! fleet when the open period ends (`scripts::BREAKER`, one EVALSHA per admission and one per
//! outcome, on the server's clock), with `resilient_core::CircuitBreaker`'s rules: count calls
//! and failures in 20 buckets of the window (those since the last close), open when
//! `min_calls` were counted and failures reached `failure_ratio`, stay open `open_for` ± 20 %,
//! then one probe whose ticket is given up at its bound.
//!
//! Tickets: a Redis ticket is the word `3 << 62 | generation` (phase bits 3, which a
//! shared-memory ticket never has), so an outcome goes back to the store that issued its
//! ticket, also when Redis went away in between (the `local` fallback issues its own).

use std::sync::Arc;

use resilient_core::{Admission, BreakerConfig, Ticket, Transition};
use resilient_http::BreakerStore;

use crate::backend::Fallback;
use crate::connection::Server;
use crate::scripts::BREAKER;

const REDIS_TICKET: u64 = 3 << 62;

pub struct RedisBreaker {
    server: Arc<Server>,
    key: String,
    config: BreakerConfig,
    fallback: Fallback<Arc<dyn BreakerStore>>,
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
        }
    }

    /// `open_for` × (1 ± 20 %), `jitter` a uniform u64; at least 1 ms.
    fn open_ms(&self, jitter: u64) -> u64 {
        let u = (jitter >> 11) as f64 / (1u64 << 53) as f64;
        let factor = 1.0 + resilient_core::breaker::OPEN_JITTER * (2.0 * u - 1.0);
        ((self.config.open_for().as_millis() as f64 * factor).round() as u64).max(1)
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
    fn admit(&self, now_ms: u64) -> Admission {
        let probe_ms = self.config.probe_timeout().as_millis() as u64;
        let answer = self.server.run(|c| {
            BREAKER
                .key(&self.key)
                .arg("admit")
                .arg(probe_ms.max(1))
                .invoke::<Vec<i64>>(c)
        });
        match answer.as_deref() {
            Ok([0]) => Admission::Closed,
            Ok([1, _until]) => Admission::Refused {
                // The server's clock is not ours: ask again soon rather than at its moment.
                until_ms: now_ms.saturating_add(1),
            },
            Ok([2, generation, took_over]) => Admission::Probe {
                ticket: Ticket::from_word(REDIS_TICKET | *generation as u64),
                took_over: *took_over == 1,
            },
            _ => self.fallback.decide(
                |local| local.admit(now_ms),
                || Admission::Closed,
                || Admission::Refused {
                    until_ms: now_ms.saturating_add(1),
                },
            ),
        }
    }

    fn record(&self, failure: bool, now_ms: u64, jitter: u64) -> Option<Transition> {
        let bucket_ms = (self.config.window().as_millis() as u64 / 20).max(1);
        let answer = self.server.run(|c| {
            BREAKER
                .key(&self.key)
                .arg("record")
                .arg(u8::from(failure))
                .arg(bucket_ms)
                .arg(self.config.min_calls())
                .arg(self.config.failure_ratio())
                .arg(self.open_ms(jitter))
                .invoke::<i64>(c)
        });
        match answer {
            Ok(1) => Some(Transition::Opened),
            Ok(_) => None,
            Err(_) => self
                .local()
                .and_then(|local| local.record(failure, now_ms, jitter)),
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
        let answer = self.server.run(|c| {
            BREAKER
                .key(&self.key)
                .arg("resolve")
                .arg(generation)
                .arg(u8::from(success))
                .arg(self.open_ms(jitter))
                .invoke::<i64>(c)
        });
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
            .run(|c| {
                BREAKER
                    .key(&self.key)
                    .arg("give_back")
                    .arg(generation)
                    .invoke::<i64>(c)
            })
            .is_ok_and(|n| n == 1)
    }
}
