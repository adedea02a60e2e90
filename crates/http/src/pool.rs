//! `pool`: many calls under one sliding window, with the seed's batch rule.
//!
//! At most `concurrency` calls are in flight; the moment one finishes the next one starts
//! (a sliding window, not chunks: one slow request never holds back the others). Every call
//! runs the same loop with the same rules (deadline, funnel per attempt, budget, jitter).
//!
//! Batch rule (seed 000): when more than half of the batch's first attempts failed transiently
//! the upstream is in trouble, not hiccuping, and the retry round is skipped for the whole
//! batch (those calls fail as upstream failed). Otherwise the calls that want a retry continue,
//! under the same window. A call that wants a retry waits only until the rule is settled, as
//! soon as the first attempts not ended yet cannot change it (one slow first attempt holds no
//! retry back, and a `Retry-After` runs from its answer). A batch of fewer than
//! [`BATCH_RULE_MIN`] first attempts shows no share: its calls are retried as alone (the
//! retry budget still caps a storm). Results come back in input order (the caller keys them
//! like its input).
//!
//! The deadline (the client's `deadline` option and any enclosing one) bounds the *whole batch*,
//! from the pool's start: calls still queued when it runs out fail at once as deadline exceeded.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::{AbortHandle, Id, JoinError, JoinSet};

use crate::call::{Call, CallEnv, Progress};
use crate::error::Unavailable;
use crate::fork_local::ForkLocal;
use crate::policy::Policy;
use crate::request::PreparedRequest;
use crate::response::Response;

/// The fewest first attempts the batch rule judges: one or two failed calls are a hiccup as
/// likely as a failing upstream, and a pool of one must not retry less than `get()`.
pub const BATCH_RULE_MIN: usize = 3;
/// How often a pool waiting on the request that opens a cold origin looks whether it is warm.
const OPENER_POLL: Duration = Duration::from_millis(2);
/// How long the others wait for it at most: a TLS handshake, not a slow answer. Under a
/// deadline, at most a quarter of what the batch has left.
const OPENER_WAIT: Duration = Duration::from_millis(250);

/// One request of a pool.
#[derive(Clone)]
pub struct PoolItem {
    pub request: Arc<PreparedRequest>,
    pub policy: Arc<Policy>,
}

/// What the batch rule saw, for diagnostics and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BatchSummary {
    /// Calls that made a first attempt.
    pub first_attempts: usize,
    /// Of those, first attempts that failed transiently.
    pub first_failed: usize,
    /// Whether the retry round was skipped.
    pub retry_round_skipped: bool,
}

thread_local! {
    /// A pool whose caller never comes back (PHP's fatal errors long-jump past the Rust frames
    /// that would drop it, and its `JoinSet` with it) leaves its tasks on the runtime, where
    /// the next call would run them on: [`abort_abandoned_pools`] ends them at the request's
    /// end. A forked child does not see the parent's.
    static TASKS: RefCell<ForkLocal<Vec<AbortHandle>>> = const {
        RefCell::new(ForkLocal::new(Vec::new()))
    };
    /// The tasks of pools dropped before they ended (a call cancelled by a throwing callable
    /// or a signal handler): aborted, but only dropped, their funnel slots and other permits
    /// given back, when the runtime next runs them. The binding's driver runs it until they
    /// are ([`take_dropped_pools`]).
    static DROPPED: RefCell<ForkLocal<Vec<AbortHandle>>> = const {
        RefCell::new(ForkLocal::new(Vec::new()))
    };
}

/// Registers a pool's tasks in [`TASKS`] and, when the pool ends or is dropped, takes them out;
/// those still running then (the pool was dropped) go to [`DROPPED`].
#[derive(Default)]
struct Registered(Vec<AbortHandle>);

impl Registered {
    fn add(&mut self, task: AbortHandle) {
        self.0.push(task.clone());
        let _ = TASKS.try_with(|t| t.borrow_mut().here().push(task));
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        let ids: Vec<Id> = self.0.iter().map(AbortHandle::id).collect();
        let _ = TASKS.try_with(|t| {
            t.borrow_mut()
                .here()
                .retain(|task| !ids.contains(&task.id()))
        });
        let unfinished: Vec<AbortHandle> = self
            .0
            .drain(..)
            .filter(|task| !task.is_finished())
            .collect();
        if !unfinished.is_empty() {
            for task in &unfinished {
                // The pool's JoinSet aborts them too as it drops: the same, whichever is first.
                task.abort();
            }
            let _ = DROPPED.try_with(|d| d.borrow_mut().here().extend(unfinished));
        }
    }
}

/// The tasks of pools dropped before they ended, aborted and not yet known to be dropped
/// ([`DROPPED`]), taken out: the caller runs the runtime until they are finished.
pub fn take_dropped_pools() -> Vec<AbortHandle> {
    DROPPED
        .try_with(|d| std::mem::take(d.borrow_mut().here()))
        .unwrap_or_default()
}

/// Aborts the tasks of every pool of this thread that neither ended nor was dropped; the
/// binding calls it at a request's end, when no pool can still be running. An aborted task is
/// dropped (its funnel slot and other permits given back) the next time the runtime runs it;
/// the handles returned tell when that happened.
pub fn abort_abandoned_pools() -> Vec<AbortHandle> {
    let tasks = TASKS
        .try_with(|t| std::mem::take(t.borrow_mut().here()))
        .unwrap_or_default();
    for task in &tasks {
        task.abort();
    }
    tasks
}

/// A finished task's value. Tasks do not panic, but if one did (a bug), the others are aborted
/// and awaited before the panic goes on: the binding runs the pool with `block_on` and does not
/// drive the runtime again, so an aborted task left alone would keep its funnel slot and other
/// permits until some later call ran the runtime.
async fn result_of<T: 'static>(running: &mut JoinSet<T>, joined: Result<T, JoinError>) -> T {
    match joined {
        Ok(value) => value,
        Err(e) => {
            running.shutdown().await;
            match e.try_into_panic() {
                Ok(payload) => std::panic::resume_unwind(payload),
                Err(e) => panic!("a pool task ended without a result: {e}"),
            }
        }
    }
}

/// The batch rule, once `unfinished` first attempts (running or queued) can no longer change
/// it: `Some(true)` skips the retry round (more than half of at least [`BATCH_RULE_MIN`] first
/// attempts failed transiently, whatever the others do), `Some(false)` runs it (even if every
/// unfinished one failed), `None` not yet. An unfinished call that makes no attempt (the
/// deadline) counts neither way.
fn settled(summary: &BatchSummary, unfinished: usize) -> Option<bool> {
    let (made, failed) = (summary.first_attempts, summary.first_failed);
    if made >= BATCH_RULE_MIN && 2 * failed > made + unfinished {
        return Some(true);
    }
    if made + unfinished < BATCH_RULE_MIN || 2 * failed + unfinished <= made {
        return Some(false);
    }
    None
}

/// What is left now of a batch deadline `batch`, counted from the pool's start
/// (`pool_start`, monotonic ns).
fn batch_left(batch: Option<Duration>, env: &CallEnv, pool_start: u64) -> Option<Duration> {
    batch.map(|left| {
        left.saturating_sub(Duration::from_nanos(
            env.clock().monotonic_ns().saturating_sub(pool_start),
        ))
    })
}

/// Runs `items` with at most `concurrency` in flight. Must run inside a tokio runtime (tasks
/// are spawned on it). `enclosing_remaining` is an enclosing deadline's remainder at the start.
pub async fn run_pool(
    env: CallEnv,
    items: Vec<PoolItem>,
    concurrency: usize,
    enclosing_remaining: Option<Duration>,
) -> (Vec<Result<Response, Unavailable>>, BatchSummary) {
    let count = items.len();
    let concurrency = concurrency.clamp(1, count.max(1));
    let pool_start = env.clock().monotonic_ns();
    let mut results: Vec<Option<Result<Response, Unavailable>>> =
        (0..count).map(|_| None).collect();
    let mut summary = BatchSummary::default();

    // Every call runs up to the point where it would retry (its first attempt, round 1). While
    // the first call to a cold TLS origin opens it, the others wait (once per pool): over
    // HTTP/2 they then share its connection instead of racing a handshake each. They go as soon
    // as the origin is warm (its first answer's headers), the opener's attempt ended, or
    // `OPENER_WAIT` passed (under a deadline, a quarter of what the batch has left if less): a
    // slow first answer never holds the batch. The retries (round 2) wait only for the batch
    // rule to be settled, which is as soon as the first attempts not ended yet cannot change it
    // (`settled`), and then share the window, after the first attempts still queued: a retry
    // never waits for the slowest first attempt of the batch.
    let mut paused: std::collections::VecDeque<(usize, Call)> = Default::default();
    let mut queue = items.into_iter().enumerate().peekable();
    let mut running = JoinSet::new();
    let mut registered = Registered::default();
    let mut opener: Option<usize> = None;
    let mut opener_since_ns = 0;
    let mut opener_wait = OPENER_WAIT;
    let mut opened = false;
    // First attempts started and not ended yet.
    let mut first_running = 0;
    // The batch rule once settled: `Some(true)` skips every retry.
    let mut skip: Option<bool> = None;
    loop {
        if skip.is_none() {
            skip = settled(&summary, first_running + queue.len());
            summary.retry_round_skipped = skip == Some(true);
        }
        if skip == Some(true) {
            for (index, call) in paused.drain(..) {
                results[index] = Some(Err(
                    call.skip_retry(summary.first_failed, summary.first_attempts)
                ));
            }
        }
        while running.len() < concurrency {
            let Some((_, next)) = queue.peek() else {
                // No first attempt left to start: the retries, once the rule lets them.
                if skip != Some(false) {
                    break;
                }
                let Some((index, mut call)) = paused.pop_front() else {
                    break;
                };
                registered.add(running.spawn(async move {
                    let progress = call.advance(false).await;
                    (index, call, progress, false)
                }));
                continue;
            };
            let cold = !opened && !env.transport_ref().is_warm(&next.request);
            if cold && opener.is_some() {
                break;
            }
            let Some((index, item)) = queue.next() else {
                break;
            };
            let env = env.clone();
            // The deadline bounds the whole batch, counted from the pool's start: a call that
            // starts late gets only what is left (none left: it fails as deadline exceeded).
            let batch = item.policy.deadline_within(enclosing_remaining);
            if cold {
                opener = Some(index);
                opener_since_ns = env.clock().monotonic_ns();
                // Under a deadline, at most a quarter of what is left: the others must fit.
                opener_wait = batch_left(batch, &env, pool_start)
                    .map_or(OPENER_WAIT, |left| OPENER_WAIT.min(left / 4));
            }
            first_running += 1;
            registered.add(running.spawn(async move {
                // Counted when the task first runs, which may be later than its spawn (another
                // task's guard blocked the thread on Redis meanwhile): the call's deadline is
                // the batch's, never pushed back by that wait.
                let enclosing = batch_left(batch, &env, pool_start);
                let mut call = Call::start(env, item.policy, item.request, enclosing);
                let progress = call.advance(true).await;
                (index, call, progress, true)
            }));
        }
        // Only a cold origin being opened keeps a free place empty.
        let waiting_on_opener =
            opener.is_some() && running.len() < concurrency && queue.peek().is_some();
        let joined = if waiting_on_opener {
            tokio::select! {
                joined = running.join_next() => joined,
                () = tokio::time::sleep(OPENER_POLL) => {
                    let warm = queue
                        .peek()
                        .is_some_and(|(_, next)| env.transport_ref().is_warm(&next.request));
                    let waited = env.clock().monotonic_ns().saturating_sub(opener_since_ns);
                    if warm || waited >= opener_wait.as_nanos() as u64 {
                        opener = None;
                        opened = true;
                    }
                    continue;
                }
            }
        } else {
            running.join_next().await
        };
        let Some(joined) = joined else {
            break;
        };
        let (index, call, progress, first) = result_of(&mut running, joined).await;
        if opener == Some(index) {
            opener = None;
            opened = true;
        }
        if first {
            first_running -= 1;
            if call.attempts() > 0 {
                summary.first_attempts += 1;
                summary.first_failed += usize::from(call.first_attempt_transient());
            }
        }
        match progress {
            Progress::Done(result) => results[index] = Some(result),
            Progress::RetryPending => paused.push_back((index, call)),
        }
    }
    let results = results
        .into_iter()
        .map(|r| r.expect("every pool item has a result"))
        .collect();
    (results, summary)
}
