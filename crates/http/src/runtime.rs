//! Per-process I/O: a tokio current-thread runtime and the reqwest transport, created lazily.
//!
//! PHP-FPM runs MINIT in the master and then forks; tokio does not survive a fork and a
//! connection pool must not be shared between processes. So nothing is created before the
//! first call, and everything is keyed by the pid: a process that finds a runtime made by
//! another pid (a child of `pcntl_fork`, or an FPM worker forked after the master somehow made
//! one) creates its own and *leaks* the inherited one: dropping it would touch the parent's
//! threads and sockets (shared file descriptors: closing or shutting down a TLS stream would
//! break the parent's connections).
//!
//! The runtime is current-thread: it runs on the PHP thread, only while a call blocks in
//! [`ProcessIo::drive`]. `drive` returns to the caller between polls whenever an attempt record
//! arrives, so PHP code (`on_attempt`) runs *outside* the runtime: it may throw, or even make
//! another call on the same runtime, without re-entering tokio.

use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc::UnboundedReceiver;
use tokio::task::AbortHandle;

use crate::attempt::AttemptRecord;
use crate::http1_transport::Http1Transport;
use crate::reqwest_transport::ReqwestTransport;
use crate::transport::Transport;

/// This process's runtime and transport.
pub struct ProcessIo {
    pid: u32,
    runtime: tokio::runtime::Runtime,
    transport: Arc<Http1Transport>,
}

static CURRENT: Mutex<Option<&'static ProcessIo>> = Mutex::new(None);

/// This process's I/O, created on first use (and again, fresh, in a forked child).
pub fn process_io() -> Result<&'static ProcessIo, String> {
    let pid = resilient_core::current_pid();
    let mut current = CURRENT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(io) = *current {
        if io.pid == pid {
            return Ok(io);
        }
        // Inherited across fork: leave it untouched (leaked), never drop it.
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        // The runtime's only threads would be its blocking pool's, which nothing of ours uses
        // (host names are looked up by `lookup`'s threads): should a dependency use it, its
        // threads leave signals to PHP's thread too (`resilient_core::signals`), blocked first
        // thing on the new thread (tokio starts it: no creator holds them off meanwhile).
        .on_thread_start(|| {
            resilient_core::signals::block_all();
        })
        .build()
        .map_err(|e| format!("cannot start the I/O runtime: {e}"))?;
    let io: &'static ProcessIo = Box::leak(Box::new(ProcessIo {
        pid,
        runtime,
        transport: Arc::new(Http1Transport::new(Arc::new(ReqwestTransport::new()))),
    }));
    *current = Some(io);
    Ok(io)
}

/// This process's transport; when its I/O runtime cannot start (out of file descriptors, of
/// memory), one whose every attempt fails with the failure `request`, saying why: the
/// default of [`crate::HttpClientBuilder::build`], so a client can still be made then. (The
/// binding asks [`process_io`] again at each call, and ends it as
/// [`crate::Unavailable::not_sent`] says while that fails: a process that got its descriptors
/// back sends again.)
pub(crate) fn process_transport() -> Arc<dyn Transport> {
    match process_io() {
        Ok(io) => io.transport(),
        Err(why) => Arc::new(NotStarted(why)),
    }
}

/// The transport of a process whose I/O runtime did not start: why.
struct NotStarted(String);

impl Transport for NotStarted {
    fn send(
        &self,
        _: &crate::request::PreparedRequest,
        _: crate::transport::AttemptLimits,
    ) -> crate::clock::BoxFuture<
        'static,
        Result<crate::transport::RawResponse, crate::transport::TransportError>,
    > {
        let failure = crate::transport::TransportError::new(
            crate::transport::FailureKind::Request,
            self.0.clone(),
        );
        Box::pin(std::future::ready(Err(failure)))
    }
}

/// Ends what a call cut short by a fatal error left on this process's runtime: aborts the
/// tasks of its pools ([`crate::pool::abort_abandoned_pools`]) and runs the runtime until they
/// (and any of a pool dropped earlier and not yet ended) are dropped, giving back their funnel
/// slots and other permits. Creates nothing: a process without a runtime has nothing to end.
/// Returns how many tasks it aborted.
pub fn end_abandoned_tasks() -> usize {
    let mut aborted = crate::pool::abort_abandoned_pools();
    let count = aborted.len();
    aborted.extend(crate::pool::take_dropped_pools());
    if !aborted.is_empty() {
        let current = *CURRENT.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(io) = current.filter(|io| io.pid == resilient_core::current_pid()) {
            io.run_until_finished(&aborted);
        }
    }
    count
}

/// One step of [`ProcessIo::drive`].
enum Step<T> {
    Event(AttemptRecord),
    Done(T),
    /// Time to ask whether the host has an interrupt pending.
    Tick,
}

/// Why [`ProcessIo::drive`] hands control back to its caller during a call.
#[derive(Debug)]
pub enum Wake {
    /// An attempt ended (for `on_attempt`).
    Record(AttemptRecord),
    /// The host has an interrupt pending (PHP: a signal under `pcntl_async_signals`, or
    /// `max_execution_time`): its handler should run now, not after the call.
    Interrupt,
}

/// How often a call in progress asks whether the host has an interrupt pending (one load).
pub const INTERRUPT_POLL: std::time::Duration = std::time::Duration::from_millis(20);

impl ProcessIo {
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The process's transport (keep-alive connections live here): plain http on hyper's
    /// connection API, https on reqwest.
    pub fn transport(&self) -> Arc<dyn Transport> {
        self.transport.clone()
    }

    /// Idle keep-alive connections of the plain-http transport.
    pub fn idle_connections(&self) -> usize {
        self.transport.idle_connections()
    }

    /// Runs a future to completion on this process's runtime.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// Runs `future`, handing each attempt record from `events` (if any) to `on_wake` as soon
    /// as it arrives, outside the runtime; with `interrupt_pending`, it is asked every
    /// [`INTERRUPT_POLL`] and once more when the future completes, and when it says yes
    /// `on_wake(Wake::Interrupt)` runs the host's handler (a signal handler must run during a
    /// long call, and before the call's outcome is returned: PHP drops a signal whose handler
    /// is due while an exception is pending). `on_wake` returning `false` cancels the call: the
    /// future is dropped (funnel slots are released by drop) and [`Driven::Cancelled`] is
    /// returned. Records still queued when the future completes are delivered before returning.
    ///
    /// Fork: `on_wake` runs PHP code, which may call `pcntl_fork`. The child must never go on
    /// with the parent's call (its runtime, its half-read or kept-alive socket: it could read
    /// the parent's response), so the pid is checked on entry and after every `on_wake`; in a
    /// child the call ends with [`Driven::Forked`] and the future is leaked, not dropped
    /// (dropping deregisters sockets from the epoll instance the child shares with the parent).
    pub fn drive<F: Future>(
        &self,
        future: F,
        events: Option<UnboundedReceiver<AttemptRecord>>,
        interrupt_pending: Option<&dyn Fn() -> bool>,
        mut on_wake: impl FnMut(Wake) -> bool,
    ) -> Driven<F::Output> {
        if self.forked() {
            std::mem::forget(future);
            return Driven::Forked;
        }
        if events.is_none() && interrupt_pending.is_none() {
            return Driven::Done(self.runtime.block_on(future));
        }
        let mut events = events;
        let mut future = Box::pin(future);
        let mut tick = interrupt_pending.map(|_| {
            let _runtime = self.runtime.enter();
            let first = tokio::time::Instant::now() + INTERRUPT_POLL;
            tokio::time::interval_at(first, INTERRUPT_POLL)
        });
        loop {
            let step = self.runtime.block_on(async {
                tokio::select! {
                    biased;
                    Some(record) = next_record(&mut events) => Step::Event(record),
                    output = &mut future => Step::Done(output),
                    () = next_tick(&mut tick) => Step::Tick,
                }
            });
            let wake = match step {
                Step::Event(record) => Wake::Record(record),
                Step::Tick if interrupt_pending.is_some_and(|pending| pending()) => Wake::Interrupt,
                Step::Tick => continue,
                Step::Done(output) => {
                    let mut wakes: Vec<Wake> = Vec::new();
                    while let Some(Ok(record)) = events.as_mut().map(|e| e.try_recv()) {
                        wakes.push(Wake::Record(record));
                    }
                    for wake in wakes {
                        let go_on = on_wake(wake);
                        if self.forked() {
                            std::mem::forget(output);
                            return Driven::Forked;
                        }
                        if !go_on {
                            // As while the call runs: the host's stop (an exception, or a
                            // bailout it goes on with) is the call's end, not its output.
                            return Driven::Cancelled;
                        }
                    }
                    if interrupt_pending.is_some_and(|pending| pending()) {
                        let go_on = on_wake(Wake::Interrupt);
                        if self.forked() {
                            std::mem::forget(output);
                            return Driven::Forked;
                        }
                        if !go_on {
                            return Driven::Cancelled;
                        }
                    }
                    return Driven::Done(output);
                }
            };
            let go_on = on_wake(wake);
            if self.forked() {
                std::mem::forget(future);
                return Driven::Forked;
            }
            if !go_on {
                // Cancel: dropping the future aborts the tasks it spawned (a pool's
                // requests), but an aborted task is only dropped, and its funnel slot
                // given back, when the runtime next runs. Run it now, not at the next call.
                drop(future);
                self.run_until_finished(&crate::pool::take_dropped_pools());
                return Driven::Cancelled;
            }
        }
    }

    /// Runs the runtime until `aborted` tasks are finished (dropped, with their permits). Each
    /// pass runs a bounded batch of tasks (61, tokio's event interval); a pool has at most 1024
    /// tasks, 17 passes: the bound only guards against a task that never ends.
    fn run_until_finished(&self, aborted: &[AbortHandle]) {
        for _ in 0..64 {
            if aborted.iter().all(AbortHandle::is_finished) {
                break;
            }
            self.runtime.block_on(tokio::task::yield_now());
        }
    }

    /// True in a child forked after this runtime was made (this is not its process).
    fn forked(&self) -> bool {
        resilient_core::current_pid() != self.pid
    }
}

/// The next record, or never when there is no channel or it is closed.
async fn next_record(
    events: &mut Option<UnboundedReceiver<AttemptRecord>>,
) -> Option<AttemptRecord> {
    match events {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// The next tick, or never without an interval.
async fn next_tick(tick: &mut Option<tokio::time::Interval>) {
    match tick {
        Some(interval) => {
            interval.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// How [`ProcessIo::drive`] ended.
#[derive(Debug)]
pub enum Driven<T> {
    /// The future completed.
    Done(T),
    /// `on_wake` returned false: the call was cancelled.
    Cancelled,
    /// The process forked while the call was in progress (inside `on_event`) and this is the
    /// child: the call cannot go on here.
    Forked,
}

impl<T> Driven<T> {
    /// The output, if the future completed.
    pub fn done(self) -> Option<T> {
        match self {
            Driven::Done(t) => Some(t),
            _ => None,
        }
    }
}

/// The message for a call that a fork cut off, the same for every caller.
pub const FORKED_MESSAGE: &str = "the call was in progress when this process forked (pcntl_fork in on_attempt, or in a signal handler run during the call): a forked child cannot continue its parent's call (its connection and runtime belong to the parent); make calls in the child after the fork instead";
