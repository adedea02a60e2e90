//! [`Pipelined`], the connection as one operation sees it: a command written before the
//! replies of the commands sent ahead of it without waiting are read, every read bounded by
//! what is left of the operation's wait; and how Redis's errors are told apart.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::MIN_WAIT;

/// Replies left unread are read before anything more is sent once there are this many: a
/// process that only sends (an original's record per call, [`Pipelined::send_script`]) reads
/// them in batches rather than letting them pile up.
pub(super) const MAX_UNREAD: usize = 16;

/// What a reply not read yet answers.
#[derive(Clone, PartialEq, Eq)]
pub(super) enum Unread {
    /// A release's ZREM (`leftovers.rs`: its entry), or a command sent with
    /// [`Server::send`].
    Release(Option<u64>),
    /// An EVALSHA sent by [`Pipelined::send_script`] (the script's hash, and the key it works
    /// on, whose node a `MOVED` names).
    Script(&'static str, Option<Arc<str>>),
}

/// What a connection was sent without waiting for its reply, and what those replies said.
#[derive(Default)]
pub(super) struct Pending {
    /// Replies not read yet, in order: read after the next command is written
    /// ([`Pipelined`]).
    pub(super) unread: VecDeque<Unread>,
    /// A release's reply read with [`Pipelined::drain`] was an error: a release Redis refused
    /// (BUSY, LOADING, READONLY, MISCONF), to be sent again rather than taken as done.
    pub(super) refused: bool,
    /// Of those, one that no wait explains (an ACL's NOPERM, a replica's READONLY, MISCONF),
    /// with what Redis answered: the operation counts as failed (see [`Server::exec`]). Not
    /// BUSY, LOADING or a cluster's ASK, TRYAGAIN, CLUSTERDOWN: they pass, and the command
    /// itself tells.
    pub(super) release_refused_for_good: Option<String>,
    /// Releases answered `MOVED` (their entry, the node named): the slot was resharded while
    /// held, and the release follows its key.
    pub(super) moved: Vec<(u64, String)>,
    /// Scripts sent without waiting answered `MOVED` (their key, the node named): the key's
    /// next ones go there.
    pub(super) moved_keys: Vec<(Arc<str>, String)>,
    /// The scripts this connection loaded (SCRIPT LOAD answered), whose EVALSHA may be sent
    /// without waiting: it will not come back NOSCRIPT unless the scripts were flushed since.
    pub(super) loaded: Vec<&'static str>,
    /// A script sent without waiting was answered with an error other than NOSCRIPT: Redis
    /// refuses to run it (a replica's READONLY, OOM, NOPERM...), so the next ones are waited
    /// for until one runs, and their errors fall back as any command's.
    pub(super) scripts_refused: bool,
    /// The reply to a command written by this operation was read (an error reply too): Redis
    /// has read what this process wrote before the operation began (see
    /// [`Server::answered_ms`]). Replies to commands sent ahead without waiting do not count.
    /// (A reply to a command written earlier in the same operation does: a SCRIPT LOAD, the
    /// idle check's PING. The operation's start is what is recorded, so an admission sent in
    /// the same millisecond as it began is still counted unanswered; one begun later, as a
    /// cluster's second try after MOVED is, may not be.)
    pub(super) answered: bool,
}

/// This process's connection as a command sees it: a command is written *before* the replies
/// of the commands sent ahead of it without waiting ([`Server::send`], a release) are read, so
/// those replies and the command's come back in the one round trip the command costs anyway.
/// Reading them first would make every release a round trip of its own in a loop of calls
/// (the next admission would wait for the release's reply before it is even sent).
pub struct Pipelined<'a> {
    pub(super) conn: &'a mut redis::Connection,
    /// The key the operation works on (a cluster's `MOVED` names its node).
    pub(super) key: Option<&'a str>,
    /// What was sent without waiting (the slot's).
    pub(super) pending: &'a mut Pending,
    /// The read/write timeout set on `conn` now (the slot's).
    pub(super) timeout: &'a mut Option<Duration>,
    /// When the operation began, and the wait it has in all.
    pub(super) started: Instant,
    pub(super) wait: Duration,
    /// Set when the connection is found dropped as a command is written, or as the replies
    /// ahead of its own (commands sent without waiting) are read: Redis closed it before it read
    /// the command (a restart, its idle `timeout`), so the operation may go again on a new
    /// connection. (Unless Redis ran it and died before answering, within microseconds: then
    /// a budget or breaker decision counts twice.)
    pub(super) unread_by_redis: &'a mut bool,
}

impl Pipelined<'_> {
    /// Notes that Redis answered this operation's own command ([`Pending::answered`]): an
    /// error Redis answered is an answer; a timeout or a lost connection is none.
    fn note_answer<T>(&mut self, reply: &redis::RedisResult<T>) {
        self.pending.answered |= reply
            .as_ref()
            .map_or_else(|e| !leaves_out_of_step(e), |_| true);
    }

    /// Before each read or write: once a quarter of the wait is used, what is left of it
    /// (none left: a timeout). Free while the operation is quick (no syscall).
    fn bound(&mut self) -> redis::RedisResult<()> {
        let used = self.started.elapsed();
        if used > self.wait / 4 {
            fit(self.conn, self.timeout, self.wait.saturating_sub(used))?;
        }
        Ok(())
    }

    /// Writes `packed` (`replies` commands), leaving their replies to be read after the next
    /// command is written.
    pub(super) fn send(&mut self, packed: &[u8], replies: u32) -> redis::RedisResult<()> {
        self.write(
            packed,
            std::iter::repeat_n(Unread::Release(None), replies as usize),
        )
    }

    /// [`Pipelined::send`] of releases' ZREMs, one reply per entry of `ids`, the entry it
    /// answers for (`leftovers.rs`).
    pub(super) fn send_releases(&mut self, packed: &[u8], ids: &[u64]) -> redis::RedisResult<()> {
        self.write(packed, ids.iter().map(|&id| Unread::Release(Some(id))))
    }

    /// Sends `evalsha` (an EVALSHA of `script`, see [`evalsha`]) without waiting for its
    /// reply, read with the next command's: for a script whose answer changes nothing here (an
    /// original's record). On a connection that has not loaded `script` yet, SCRIPT LOAD
    /// first: one round trip, once per connection. Should the reply be NOSCRIPT after all (the
    /// scripts flushed on a live connection), the next one loads it again; any other error reply
    /// (READONLY, OOM, NOPERM, MOVED...) has the next ones waited for, until one is run.
    pub fn send_script(
        &mut self,
        script: &'static redis::Script,
        evalsha: &redis::Cmd,
    ) -> redis::RedisResult<()> {
        // Replies read first at the bound, so that a NOSCRIPT among them counts for this one.
        if self.pending.unread.len() >= MAX_UNREAD {
            self.drain()?;
        }
        if self.pending.scripts_refused {
            // Waited for until Redis runs one: an error now is this operation's, reported, with
            // its back-off, and the caller's fallback.
            self.query_script::<redis::Value>(script, evalsha)?;
            self.pending.scripts_refused = false;
            return Ok(());
        }
        self.load_once(script)?;
        let hash = script.get_hash();
        self.write(
            &evalsha.get_packed_command(),
            std::iter::once(Unread::Script(hash, self.key.map(Arc::from))),
        )
    }

    /// Runs `evalsha` (an EVALSHA of `script`, see [`evalsha`]) and reads its reply, loading
    /// the script first on a connection that has not, and again after NOSCRIPT: as
    /// `ScriptInvocation::invoke`, for a command also sent without waiting
    /// ([`Pipelined::send_script`]) in other cases.
    pub fn query_script<T: redis::FromRedisValue>(
        &mut self,
        script: &'static redis::Script,
        evalsha: &redis::Cmd,
    ) -> redis::RedisResult<T> {
        self.load_once(script)?;
        match evalsha.query(self) {
            Err(e) if e.kind() == redis::ErrorKind::NoScriptError => {
                script.load(self)?;
                evalsha.query(self)
            }
            answer => answer,
        }
    }

    /// SCRIPT LOAD of `script`, once per connection (see [`Pending::loaded`]).
    fn load_once(&mut self, script: &'static redis::Script) -> redis::RedisResult<()> {
        let hash = script.get_hash();
        if !self.pending.loaded.contains(&hash) {
            script.load(self)?;
            self.pending.loaded.push(hash);
        }
        Ok(())
    }

    /// `result` of writing a command or reading the replies ahead of its own: a dropped
    /// connection there means Redis did not read the command ([`Pipelined::unread_by_redis`]).
    fn not_read_if_dropped(&mut self, result: redis::RedisResult<()>) -> redis::RedisResult<()> {
        if result.as_ref().is_err_and(|e| e.is_connection_dropped()) {
            *self.unread_by_redis = true;
        }
        result
    }

    /// Writes `packed`, whose replies will answer for `replies`.
    fn write(
        &mut self,
        packed: &[u8],
        replies: impl Iterator<Item = Unread>,
    ) -> redis::RedisResult<()> {
        if self.pending.unread.len() >= MAX_UNREAD {
            self.drain()?;
        }
        self.bound()?;
        let written = self.conn.send_packed_command(packed);
        self.not_read_if_dropped(written)?;
        self.pending.unread.extend(replies);
        Ok(())
    }

    /// Reads (and drops) the replies left unread. A release's ZREM has nothing to answer but
    /// a count: an error reply means Redis did not run it (BUSY, LOADING, READONLY, MISCONF),
    /// so it is marked to be sent again; WRONGTYPE (the key is not a funnel's) says there is
    /// nothing to remove; MOVED names the node the key went to (see [`Pending::moved`]). A
    /// script's error reply means it did not run: NOSCRIPT has it loaded again before the next
    /// one is sent; any other has the next ones waited for.
    pub(super) fn drain(&mut self) -> redis::RedisResult<()> {
        while let Some(kind) = self.pending.unread.front().cloned() {
            self.bound()?;
            // An error reply comes as a value (redis-rs leaves extracting it to the caller).
            let (code, moved_to, error) = match self.conn.recv_response() {
                Ok(redis::Value::ServerError(e)) => {
                    // `MOVED <slot> <host:port>`
                    let to = e.details().and_then(|d| d.split_whitespace().nth(1));
                    let (code, to) = (e.code().to_owned(), to.map(str::to_owned));
                    (Some(code), to, Some(redis::RedisError::from(e)))
                }
                Ok(_) => (None, None, None),
                Err(e) if leaves_out_of_step(&e) => return Err(e),
                Err(e) => (Some(e.code().unwrap_or_default().to_owned()), None, Some(e)),
            };
            self.pending.unread.pop_front();
            match (kind, code.as_deref(), moved_to) {
                (_, None, _) => {}
                (Unread::Release(Some(id)), Some("MOVED"), Some(to)) => {
                    self.pending.moved.push((id, to))
                }
                (Unread::Release(_), Some("WRONGTYPE"), _) => {}
                (Unread::Release(_), Some(code), _) => {
                    // Reported as a refused command is (a NOPERM on ZREM: a misconfiguration
                    // that holds every slot until its lease ends is never silent).
                    self.pending.refused = true;
                    if let Some(e) = &error {
                        crate::report::failure(e);
                        if !matches!(
                            code,
                            "BUSY" | "LOADING" | "ASK" | "TRYAGAIN" | "CLUSTERDOWN" | "MOVED"
                        ) {
                            (self.pending.release_refused_for_good)
                                .get_or_insert_with(|| crate::report::describe(e));
                        }
                    }
                }
                (Unread::Script(hash, _), Some("NOSCRIPT"), _) => {
                    self.pending.loaded.retain(|&h| h != hash)
                }
                (Unread::Script(_, Some(key)), Some("MOVED"), Some(to)) => {
                    self.pending.moved_keys.push((key, to))
                }
                (Unread::Script(..), Some(_), _) => self.pending.scripts_refused = true,
            }
        }
        Ok(())
    }
}

/// An EVALSHA of `script` on `keys`, its arguments to be added (for
/// [`Pipelined::send_script`]).
pub fn evalsha(script: &redis::Script, keys: &[&str]) -> redis::Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(script.get_hash()).arg(keys.len()).arg(keys);
    cmd
}

impl redis::ConnectionLike for Pipelined<'_> {
    fn req_packed_command(&mut self, cmd: &[u8]) -> redis::RedisResult<redis::Value> {
        self.bound()?;
        let ahead = self
            .conn
            .send_packed_command(cmd)
            .and_then(|()| self.drain());
        self.not_read_if_dropped(ahead)?;
        self.bound()?;
        let reply = self.conn.recv_response();
        self.note_answer(&reply);
        reply
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> redis::RedisResult<Vec<redis::Value>> {
        let ahead = self.drain();
        self.not_read_if_dropped(ahead)?;
        self.bound()?;
        let replies = self.conn.req_packed_commands(cmd, offset, count);
        self.note_answer(&replies);
        replies
    }

    fn get_db(&self) -> i64 {
        self.conn.get_db()
    }

    fn check_connection(&mut self) -> bool {
        self.drain().is_ok() && self.conn.check_connection()
    }

    fn is_open(&self) -> bool {
        self.conn.is_open()
    }
}

/// An error after which the connection's replies may be out of step with its commands (I/O,
/// timeout, a reply that did not parse): the connection must be dropped. A reply error from
/// the server (a script error, BUSY, LOADING, OOM) leaves it in step.
pub(super) fn leaves_out_of_step(e: &redis::RedisError) -> bool {
    lost(e) || e.kind() == redis::ErrorKind::ParseError
}

/// An error Redis answers before it runs a command (a replica's READONLY, an ACL's NOPERM, a
/// cluster's MOVED, a script's WRONGTYPE at its first read...). Any other error reply (`ERR`, or
/// a proxy's own words after it forwarded the command) may come after Redis ran it.
pub(super) fn ran_nothing(e: &redis::RedisError) -> bool {
    const BEFORE_RUNNING: [&str; 17] = [
        "READONLY",
        "NOPERM",
        "OOM",
        "BUSY",
        "LOADING",
        "MASTERDOWN",
        "MOVED",
        "ASK",
        "CLUSTERDOWN",
        "TRYAGAIN",
        "CROSSSLOT",
        "NOAUTH",
        "WRONGPASS",
        "NOSCRIPT",
        "WRONGTYPE",
        "MISCONF",
        "EXECABORT",
    ];
    !leaves_out_of_step(e) && e.code().is_some_and(|c| BEFORE_RUNNING.contains(&c))
}

/// A read or write that a stop of this process ended (EINTR): Redis may be fine.
pub(super) fn interrupted(e: &redis::RedisError) -> bool {
    crate::report::io_error(e).is_some_and(|io| io.kind() == std::io::ErrorKind::Interrupted)
}

/// The connection failed, was refused or timed out: nothing Redis answered.
pub(crate) fn lost(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_timeout() || e.is_connection_dropped()
}

/// Sets `conn`'s read and write timeouts to `wait` (or keeps `current`, see below); no time
/// left is a timeout.
pub(super) fn fit(
    conn: &mut redis::Connection,
    current: &mut Option<Duration>,
    wait: Duration,
) -> redis::RedisResult<()> {
    if wait < MIN_WAIT {
        return Err(std::io::Error::from(std::io::ErrorKind::TimedOut).into());
    }
    // Inside a call the allowed wait shrinks a little with every command: a timeout already
    // set that is no longer than allowed, and not much shorter, is kept (two syscalls saved).
    if !current.is_some_and(|t| t <= wait && t >= wait - wait / 4) {
        *current = None;
        conn.set_read_timeout(Some(wait))?;
        conn.set_write_timeout(Some(wait))?;
        *current = Some(wait);
    }
    Ok(())
}
