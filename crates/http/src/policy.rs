//! The retry policy: pure decisions, no I/O, no clock of its own.
//!
//! Given what just happened and how much of the deadline is left, the policy says what to do
//! next; the loop in [`crate::call`] carries it out (mechanism apart from policy, as in tower's
//! `Policy` and reqwest-retry's strategies). The rules follow seed 000's `ShippingQuoteClient`:
//!
//! - before an attempt: stop when the remainder cannot cover a useful attempt
//!   (`min_useful_attempt`, 50 ms as in the seed, or the attempt timeout or half the client's
//!   own deadline when smaller);
//! - an attempt gets `min(timeout, remaining)`, its connect phase `min(connect_timeout, that)`;
//! - after a transient outcome: no retry for POST/PATCH without an idempotency key, none past
//!   `max_attempts`; the wait is full jitter, or the server's `Retry-After` when it asks for
//!   longer (a floor: never shortened, and `Retry-After: 0` or a past date still waits the
//!   jittered backoff); a `Retry-After` above `max_retry_after` fails at once as *upstream failed*
//!   (the upstream asked us to stay away longer than we accept), and a wait that leaves no
//!   room for a useful attempt before the deadline fails at once as *deadline exceeded*,
//!   without sleeping.
//!
//! The retry budget is asked by the loop after the policy says "retry" (so a retry the deadline
//! would forbid anyway never spends budget).

use std::time::Duration;

use crate::classify::Verdict;
use crate::decision::{fmt_duration, GiveUpReason, RetryReason};

/// The smallest remainder worth starting an attempt with (seed 000: 50 ms).
pub const MIN_USEFUL_ATTEMPT: Duration = Duration::from_millis(50);

/// Limits a caller imposes on top of the options, e.g. the web context caps
/// (`resilient.web_timeout`, `web_connect_timeout`, `web_max_attempts`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Caps {
    pub timeout: Option<Duration>,
    pub connect_timeout: Option<Duration>,
    pub max_attempts: Option<u32>,
    /// The settings the caps come from, named in the message of a call one of them made
    /// shorter than its options say (`max_attempts (1, capped by resilient.web_max_attempts)
    /// reached`): the option alone would leave the reader looking for a 1 nowhere written.
    pub timeout_name: &'static str,
    pub max_attempts_name: &'static str,
}

/// The numbers the loop runs on.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub deadline: Option<Duration>,
    pub max_attempts: u32,
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    pub retry_on: Vec<u16>,
    pub max_retry_after: Duration,
    /// How long an attempt may wait for a funnel slot; zero fails fast.
    pub funnel_wait: Duration,
    /// The largest response body accepted, in bytes (`max_body`).
    pub max_body: u64,
    /// The caps that lowered `timeout` and `max_attempts`, by name (see [`Caps`]).
    pub timeout_capped_by: Option<&'static str>,
    pub max_attempts_capped_by: Option<&'static str>,
}

/// How often a waiting attempt looks for a free funnel slot (a few shared-memory loads).
pub const FUNNEL_POLL: Duration = Duration::from_millis(1);

/// What to do after an attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Return the response to the caller.
    Return,
    /// Wait `reason.delay()`, then try again.
    Retry { reason: RetryReason },
    /// Stop: the call is unavailable (`reason.kind()` says how).
    GiveUp { reason: GiveUpReason },
}

/// What the policy needs to know about the attempt that just ended.
#[derive(Debug, Clone, Copy)]
pub struct AttemptFacts {
    /// 1-based number of the attempt that just ended.
    pub attempt: u32,
    pub verdict: Verdict,
    /// The method may be sent again (idempotent, or an idempotency key is present).
    pub may_retry: bool,
    /// The response's `Retry-After`, parsed.
    pub retry_after: Option<Duration>,
    /// What is left of the deadline now (`Duration::MAX` without a deadline).
    pub remaining: Duration,
    /// The attempt timed out with its timeout cut to what was left of the deadline: the
    /// deadline ended it.
    pub deadline_cut: bool,
}

impl Policy {
    /// Applies caller caps (each only lowers a value).
    pub fn capped(mut self, caps: Caps) -> Self {
        if let Some(t) = caps.timeout {
            if t < self.timeout {
                self.timeout = t;
                self.timeout_capped_by = Some(caps.timeout_name).filter(|n| !n.is_empty());
            }
            // A web request must not sit in a funnel queue longer than it may wait for an answer.
            self.funnel_wait = self.funnel_wait.min(t);
        }
        if let Some(c) = caps.connect_timeout {
            self.connect_timeout = self.connect_timeout.min(c);
        }
        if let Some(n) = caps
            .max_attempts
            .map(|n| n.max(1))
            .filter(|n| *n < self.max_attempts)
        {
            self.max_attempts = n;
            self.max_attempts_capped_by = Some(caps.max_attempts_name).filter(|n| !n.is_empty());
        }
        self
    }

    /// A call's deadline: this policy's own or what an enclosing one has left, the earlier.
    pub fn deadline_within(&self, enclosing_remaining: Option<Duration>) -> Option<Duration> {
        match (self.deadline, enclosing_remaining) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The smallest remainder worth starting an attempt with: 50 ms, or the attempt timeout or
    /// half the client's own deadline when smaller (a client told to finish within 30 ms
    /// expects answers faster than that: with the 50 ms it could never send, and with the whole
    /// deadline neither, some microseconds being gone before the first attempt).
    pub fn min_useful_attempt(&self) -> Duration {
        MIN_USEFUL_ATTEMPT
            .min(self.timeout)
            .min(self.deadline.map_or(Duration::MAX, |d| d / 2))
    }

    /// The attempt's limits: `(timeout, connect_timeout)` cut to the remainder.
    pub fn attempt_limits(&self, remaining: Duration) -> (Duration, Duration) {
        let timeout = self.timeout.min(remaining);
        (timeout, self.connect_timeout.min(timeout))
    }

    /// Whether an attempt may start with `remaining` left; the reason when not.
    pub fn before_attempt(&self, attempt: u32, remaining: Duration) -> Result<(), String> {
        if remaining < self.min_useful_attempt() {
            return Err(format!(
                "deadline exceeded: {} left before attempt {attempt}, less than a useful attempt ({})",
                fmt_duration(remaining),
                fmt_duration(self.min_useful_attempt())
            ));
        }
        Ok(())
    }

    /// Decides what follows an attempt. `jitter` is consulted only when a backoff wait is needed.
    pub fn after_attempt(
        &self,
        facts: AttemptFacts,
        jitter: &mut dyn Iterator<Item = Duration>,
    ) -> Next {
        let upstream = |reason| Next::GiveUp { reason };
        match facts.verdict {
            Verdict::Final => return Next::Return,
            Verdict::FatalFailure(_) => return upstream(GiveUpReason::NotRetryable),
            Verdict::TransientStatus(_) | Verdict::TransientFailure(_) => {}
        }
        if facts.deadline_cut {
            return upstream(GiveUpReason::DeadlineEnded);
        }
        if !facts.may_retry {
            return upstream(GiveUpReason::NotIdempotent);
        }
        if facts.attempt >= self.max_attempts {
            return upstream(GiveUpReason::MaxAttempts {
                n: self.max_attempts,
                capped_by: self.max_attempts_capped_by,
            });
        }
        if let Some(wait) = facts.retry_after.filter(|w| *w > self.max_retry_after) {
            return upstream(GiveUpReason::RetryAfterTooLong {
                wait,
                max: self.max_retry_after,
            });
        }
        // The jittered backoff is the least wait; a longer Retry-After is obeyed in full.
        let backoff = jitter.next().unwrap_or(Duration::ZERO);
        let reason = match facts.retry_after {
            Some(wait) if wait > backoff => RetryReason::RetryAfter(wait),
            Some(retry_after) => RetryReason::BackoffOverRetryAfter {
                backoff,
                retry_after,
            },
            None => RetryReason::Backoff(backoff),
        };
        if facts.remaining != Duration::MAX
            && facts.remaining < reason.delay().saturating_add(self.min_useful_attempt())
        {
            return upstream(GiveUpReason::NoTimeForRetry {
                wait: reason,
                left: facts.remaining,
            });
        }
        Next::Retry { reason }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::classify;
    use crate::error::UnavailableKind;
    use crate::transport::{FailureKind, RawResponse};

    const MS: Duration = Duration::from_millis(1);

    fn policy() -> Policy {
        let mut p = Policy {
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            deadline: None,
            max_attempts: 3,
            backoff_base: 25 * MS,
            backoff_cap: 200 * MS,
            retry_on: vec![429, 503],
            max_retry_after: Duration::from_secs(30),
            funnel_wait: Duration::ZERO,
            max_body: 32 << 20,
            timeout_capped_by: None,
            max_attempts_capped_by: None,
        };
        p.timeout = 300 * MS;
        p.max_attempts = 3;
        p
    }

    fn facts(
        attempt: u32,
        verdict: Verdict,
        retry_after: Option<Duration>,
        remaining: Duration,
    ) -> AttemptFacts {
        AttemptFacts {
            attempt,
            verdict,
            may_retry: true,
            retry_after,
            remaining,
            deadline_cut: false,
        }
    }

    fn no_jitter() -> std::iter::Repeat<Duration> {
        std::iter::repeat(10 * MS)
    }

    /// Counts this thread's heap allocations (a test-build allocator: other tests' threads do
    /// not disturb the count).
    mod allocations {
        use std::alloc::{GlobalAlloc, Layout, System};
        use std::cell::Cell;

        thread_local!(static COUNT: Cell<u64> = const { Cell::new(0) });

        struct Counting;

        // SAFETY: every call is forwarded to the system allocator unchanged.
        unsafe impl GlobalAlloc for Counting {
            unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
                let _ = COUNT.try_with(|c| c.set(c.get() + 1));
                System.alloc(layout)
            }
            unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
                System.dealloc(ptr, layout)
            }
        }

        #[global_allocator]
        static COUNTING: Counting = Counting;

        /// `f`'s result and how many allocations it made on this thread.
        pub fn during<T>(f: impl FnOnce() -> T) -> (T, u64) {
            let before = COUNT.with(Cell::get);
            let out = f();
            (out, COUNT.with(Cell::get) - before)
        }
    }

    #[test]
    fn classifying_and_deciding_format_no_text() {
        let p = policy();
        let ok = Ok(RawResponse {
            status: 200,
            headers: vec![("content-type".into(), b"text/plain".to_vec())],
            body: b"ok".to_vec(),
        });
        let unavailable = Ok(RawResponse {
            status: 503,
            headers: vec![],
            body: vec![],
        });
        let mut jitter = no_jitter();
        let (next, allocated) = allocations::during(|| {
            let verdict = classify(&ok, &p.retry_on);
            p.after_attempt(facts(1, verdict, None, 800 * MS), &mut jitter)
        });
        assert_eq!(
            (next, allocated),
            (Next::Return, 0),
            "a success allocates nothing"
        );
        let (next, allocated) = allocations::during(|| {
            let verdict = classify(&unavailable, &p.retry_on);
            p.after_attempt(facts(1, verdict, None, 800 * MS), &mut jitter)
        });
        assert!(matches!(next, Next::Retry { .. }), "{next:?}");
        assert_eq!(allocated, 0, "a retry decision is an enum, not text");
        // The counter does count: building text is seen.
        let (_, allocated) = allocations::during(|| format!("{next:?}"));
        assert!(allocated > 0);
    }

    #[test]
    fn final_answers_return() {
        assert_eq!(
            policy().after_attempt(facts(1, Verdict::Final, None, 800 * MS), &mut no_jitter()),
            Next::Return
        );
    }

    #[test]
    fn transient_outcomes_retry_with_jitter_or_retry_after() {
        let p = policy();
        let n = p.after_attempt(
            facts(1, Verdict::TransientStatus(503), None, 800 * MS),
            &mut no_jitter(),
        );
        assert!(
            matches!(n, Next::Retry { reason } if reason.delay() == 10 * MS),
            "{n:?}"
        );
        let n = p.after_attempt(
            facts(
                1,
                Verdict::TransientStatus(429),
                Some(2000 * MS),
                Duration::MAX,
            ),
            &mut no_jitter(),
        );
        assert!(
            matches!(n, Next::Retry { reason } if reason.delay() == 2000 * MS),
            "{n:?}"
        );
        let n = p.after_attempt(
            facts(
                2,
                Verdict::TransientFailure(FailureKind::Connect),
                None,
                800 * MS,
            ),
            &mut no_jitter(),
        );
        assert!(matches!(n, Next::Retry { .. }), "{n:?}");
    }

    #[test]
    fn stops_at_max_attempts_and_for_non_idempotent_methods() {
        let p = policy();
        let n = p.after_attempt(
            facts(3, Verdict::TransientStatus(503), None, 800 * MS),
            &mut no_jitter(),
        );
        assert!(
            matches!(
                n,
                Next::GiveUp { reason } if reason.kind() == UnavailableKind::UpstreamFailed
            ),
            "{n:?}"
        );
        let mut f = facts(1, Verdict::TransientStatus(503), None, 800 * MS);
        f.may_retry = false;
        assert!(matches!(
            p.after_attempt(f, &mut no_jitter()),
            Next::GiveUp { reason } if reason.kind() == UnavailableKind::UpstreamFailed
        ));
    }

    /// An attempt the deadline ended (its timeout cut to what was left, then timed out): the
    /// deadline is why the call ends, with one attempt allowed or a POST without key as well.
    #[test]
    fn an_attempt_the_deadline_ended_is_deadline_exceeded() {
        let p = policy();
        let timeout = Verdict::TransientFailure(FailureKind::Timeout);
        for (attempt, may_retry) in [(1, true), (3, true), (1, false)] {
            let mut f = facts(attempt, timeout, None, Duration::ZERO);
            f.may_retry = may_retry;
            f.deadline_cut = true;
            let n = p.after_attempt(f, &mut no_jitter());
            assert!(
                matches!(
                    n,
                    Next::GiveUp {
                        reason: GiveUpReason::DeadlineEnded
                    }
                ),
                "{n:?}"
            );
            assert_eq!(
                GiveUpReason::DeadlineEnded.kind(),
                UnavailableKind::DeadlineExceeded
            );
        }
        // Not cut by the deadline: the attempt's own timeout, as before.
        let n = p.after_attempt(facts(3, timeout, None, 800 * MS), &mut no_jitter());
        assert!(
            matches!(
                n,
                Next::GiveUp {
                    reason: GiveUpReason::MaxAttempts {
                        n: 3,
                        capped_by: None
                    }
                }
            ),
            "{n:?}"
        );
    }

    #[test]
    fn retry_after_beyond_the_remainder_or_the_maximum_fails_at_once() {
        let p = policy();
        let n = p.after_attempt(
            facts(
                1,
                Verdict::TransientStatus(429),
                Some(Duration::from_secs(2)),
                Duration::from_secs(1),
            ),
            &mut no_jitter(),
        );
        assert!(
            matches!(
                n,
                Next::GiveUp { reason } if reason.kind() == UnavailableKind::DeadlineExceeded
            ),
            "{n:?}"
        );
        let n = p.after_attempt(
            facts(
                1,
                Verdict::TransientStatus(429),
                Some(Duration::MAX),
                Duration::MAX,
            ),
            &mut no_jitter(),
        );
        assert!(
            matches!(
                n,
                Next::GiveUp {
                    reason: GiveUpReason::RetryAfterTooLong { .. }
                }
            ),
            "{n:?}"
        );
        // A wait that fits but leaves less than a useful attempt is also refused.
        let n = p.after_attempt(
            facts(
                1,
                Verdict::TransientStatus(503),
                Some(960 * MS),
                Duration::from_secs(1),
            ),
            &mut no_jitter(),
        );
        assert!(
            matches!(
                n,
                Next::GiveUp { reason } if reason.kind() == UnavailableKind::DeadlineExceeded
            ),
            "{n:?}"
        );
    }

    #[test]
    fn limits_are_cut_to_the_remainder_and_caps_only_lower() {
        let mut p = policy();
        p.connect_timeout = Duration::from_secs(10);
        assert_eq!(p.attempt_limits(120 * MS), (120 * MS, 120 * MS));
        assert_eq!(p.attempt_limits(Duration::MAX), (300 * MS, 300 * MS));
        let caps = Caps {
            timeout: Some(Duration::from_secs(10)),
            connect_timeout: Some(Duration::from_secs(3)),
            max_attempts: Some(1),
            ..Caps::default()
        };
        let c = p.clone().capped(caps);
        assert_eq!(
            (c.timeout, c.connect_timeout, c.max_attempts),
            (300 * MS, Duration::from_secs(3), 1)
        );
        assert!(p.before_attempt(1, 49 * MS).is_err());
        assert!(p.before_attempt(1, 50 * MS).is_ok());
    }

    #[test]
    fn a_retry_after_shorter_than_the_backoff_waits_the_backoff() {
        let p = policy();
        for hint in [Duration::ZERO, 3 * MS] {
            let n = p.after_attempt(
                facts(1, Verdict::TransientStatus(429), Some(hint), Duration::MAX),
                &mut no_jitter(),
            );
            assert!(
                matches!(n, Next::Retry { reason: RetryReason::BackoffOverRetryAfter { backoff, .. } } if backoff == 10 * MS),
                "{n:?}"
            );
        }
    }

    #[test]
    fn a_body_over_max_body_is_never_retried() {
        let n = policy().after_attempt(
            facts(
                1,
                Verdict::FatalFailure(FailureKind::TooLarge),
                None,
                Duration::MAX,
            ),
            &mut no_jitter(),
        );
        assert!(
            matches!(
                n,
                Next::GiveUp {
                    reason: GiveUpReason::NotRetryable
                }
            ),
            "{n:?}"
        );
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(fmt_duration(Duration::from_millis(2500)), "2.5s");
        assert_eq!(fmt_duration(Duration::from_secs(2)), "2s");
        assert_eq!(fmt_duration(Duration::from_millis(40)), "40ms");
        assert_eq!(fmt_duration(Duration::MAX), ">1y");
        // A year, the longest `max_retry_after`, is said: "Retry-After >1y exceeds
        // max_retry_after 31536000s", not "... exceeds max_retry_after >1y".
        assert_eq!(fmt_duration(Duration::from_secs(365 * 86_400)), "31536000s");
    }
}
