//! The Lua scripts, each one round trip by EVALSHA (loaded by SCRIPT LOAD on NOSCRIPT, then
//! sent again). Every script reads the time with TIME on the server, so the hosts of a fleet
//! share one clock for leases and windows, whatever their own clocks say.

use std::sync::LazyLock;

use redis::Script;

/// KEYS[1]: the funnel's sorted set (member: a holder's token, score: its lease's expiry, ms
/// on the server's clock). ARGV: cap, lease ms, token. Returns 1 when the slot was taken, 0 at
/// the cap. Expired leases are dropped only when the count reaches the cap (below it, counting
/// them too still admits rightly), then counted again. The key expires with its longest lease
/// (`GT`: a shorter lease never shortens it). Idempotent by token, for an admission sent again
/// after its reply was lost (`connection/mod.rs`): below the cap its ZADD only renews the token's
/// score, and at the cap a token already held is granted (checked there only: one call less
/// on the way of every admission).
pub static FUNNEL_ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cap = tonumber(ARGV[1])
local n = redis.call('ZCARD', KEYS[1])
if n >= cap then
  if redis.call('ZSCORE', KEYS[1], ARGV[3]) then
    return 1
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  n = redis.call('ZCARD', KEYS[1])
  if n >= cap then
    return 0
  end
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
if n == 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2], 'GT')
end
return 1
",
    )
});

/// `FUNNEL_ACQUIRE` for a funnel with `share` (web and background each keep their part under
/// contention, as `resilient_core::Funnel`'s slot ranges do in shared memory). KEYS[1]: every
/// holder, as in `FUNNEL_ACQUIRE`; KEYS[2]: the background holders (the same tokens and
/// scores); KEYS[3]: set for ARGV[6] ms by a background caller refused (its demand; 0: none,
/// for the background callers of a funnel without `share`, kept in KEYS[2] only so that a
/// funnel with `share` of the same name counts them as background). ARGV: limit,
/// lease ms, token, `b` (background) or `w` (web), the caller's part (background: limit −
/// reserve; web: reserve), demand ms. A background caller is admitted while fewer than the
/// limit are held in all and fewer than its part in the background; a web caller while fewer
/// than the limit are held, and, while the background's demand is recent, fewer than its part
/// by web callers. Returns 1 or 0 as `FUNNEL_ACQUIRE`, idempotent by token as it.
pub static FUNNEL_ACQUIRE_SHARED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local part = tonumber(ARGV[5])
local bg = ARGV[4] == 'b'
local n, nb
local function full()
  n = redis.call('ZCARD', KEYS[1])
  nb = redis.call('ZCARD', KEYS[2])
  if n >= limit then return true end
  if bg then return nb >= part end
  return n - nb >= part and redis.call('EXISTS', KEYS[3]) == 1
end
if full() then
  if redis.call('ZSCORE', KEYS[1], ARGV[3]) then
    return 1
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  if full() then
    if bg and tonumber(ARGV[6]) > 0 then
      redis.call('SET', KEYS[3], 1, 'PX', ARGV[6])
    end
    return 0
  end
end
local expiry = now + tonumber(ARGV[2])
local function add(key, count)
  redis.call('ZADD', key, expiry, ARGV[3])
  if count == 0 then
    redis.call('PEXPIRE', key, ARGV[2])
  else
    redis.call('PEXPIRE', key, ARGV[2], 'GT')
  end
end
add(KEYS[1], n)
if bg then
  add(KEYS[2], nb)
end
return 1
",
    )
});

/// KEYS[1]: the budget's hash, 20 buckets of `window / 20` ms on the server's clock, as the
/// shared memory's ring: fields `o<i>` (originals), `r<i>` (retries), beside `at` (the
/// newest bucket's epoch) and the window's sums `o` and `r`. ARGV: op (`o`: record an
/// original; `r`: try to spend a retry), bucket ms, floor, ratio. Returns 1 (recorded /
/// allowed) or 0 (denied); ARGV[5], given by tests only, is the time in ms instead of the
/// server's clock. The arithmetic is `resilient_core::RetryBudget`'s: a retry is
/// allowed while `retries + 1 <= floor + ratio × originals` (+1e-9) over the buckets of the
/// window. The sums make a decision as cheap as a record (no read of all 20 buckets): when the
/// epoch moves on, the buckets it comes round to leave the window, so their counts are taken
/// off the sums and zeroed. A clock that steps back less than a window counts in the newest
/// bucket (as the shared memory counts a caller whose reading is behind); one that steps back a
/// window or more starts a new window: pinned to the newest bucket, every decision until the
/// clock caught up would land in that one bucket, which never leaves the window, so the spent
/// floor would stay spent and the originals of the whole period keep allowing retries, and the
/// key would live as long. The key expires one bucket after its newest bucket has left the
/// window (reckoned from that bucket, which a clock stepped back keeps ahead of now).
pub static BUDGET: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local now = tonumber(ARGV[5])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local bucket_ms = tonumber(ARGV[2])
local epoch = math.floor(now / bucket_ms)
local v = redis.call('HMGET', KEYS[1], 'at', 'o', 'r', 'o' .. epoch % 20, 'r' .. epoch % 20)
local at = tonumber(v[1])
local o, r = tonumber(v[2]) or 0, tonumber(v[3]) or 0
local oi, ri = tonumber(v[4]) or 0, tonumber(v[5]) or 0
if at and at - epoch >= 20 then
  at = nil
elseif at and epoch < at then
  epoch = at
  v = redis.call('HMGET', KEYS[1], 'o' .. at % 20, 'r' .. at % 20)
  oi, ri = tonumber(v[1]) or 0, tonumber(v[2]) or 0
end
-- The buckets the epoch comes round to leave the window: their counts come off the sums,
-- and are zeroed with the write (a denied retry writes nothing, as in shared memory).
local set, fresh = {}, false
if at ~= epoch then
  set = {'at', epoch}
  if not at or epoch - at >= 20 then
    fresh = true
    o, r = 0, 0
  else
    local fields = {}
    for e = at + 1, epoch do
      fields[#fields + 1] = 'o' .. e % 20
      fields[#fields + 1] = 'r' .. e % 20
    end
    local old = redis.call('HMGET', KEYS[1], unpack(fields))
    for k = 1, #fields do
      local n = tonumber(old[k]) or 0
      if k % 2 == 1 then o = o - n else r = r - n end
      set[#set + 1] = fields[k]
      set[#set + 1] = 0
    end
  end
  oi, ri = 0, 0
end
local i = epoch % 20
if ARGV[1] == 'o' then
  o, oi = o + 1, oi + 1
elseif r + 1 > tonumber(ARGV[3]) + tonumber(ARGV[4]) * o + 1e-9 then
  return 0
else
  r, ri = r + 1, ri + 1
end
for _, f in ipairs({'o', o, 'r', r, 'o' .. i, oi, 'r' .. i, ri}) do
  set[#set + 1] = f
end
if fresh then
  redis.call('DEL', KEYS[1])
end
redis.call('HSET', KEYS[1], unpack(set))
redis.call('PEXPIRE', KEYS[1], (epoch + 21) * bucket_ms - now)
return 1
",
    )
});

/// KEYS[1]: the budget's hash (`BUDGET`'s). Gives back one retry counted `ARGV[2]` ms ago
/// and never sent (a guard refused it after its backoff): off the window's sum and the bucket
/// of that moment on the server's clock (ARGV[1]: bucket ms; ARGV[3], given by tests only, the
/// time in ms), or the newest when the clock has stepped back since (`BUDGET` counts there).
/// A bucket that has left the window took the retry with it: nothing newer is taken off in its
/// place. Rotates nothing: the next `BUDGET` call takes the buckets that left the window off
/// the sums, as they are then. Returns 1, or 0 when nothing was given back.
pub static GIVE_BACK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local now = tonumber(ARGV[3])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local at = tonumber(redis.call('HGET', KEYS[1], 'at'))
if not at then
  return 0
end
local bucket_ms = tonumber(ARGV[1])
local e = math.min(math.floor((now - tonumber(ARGV[2])) / bucket_ms), at)
if e <= math.max(at, math.floor(now / bucket_ms)) - 20 then
  return 0
end
local field = 'r' .. e % 20
if (tonumber(redis.call('HGET', KEYS[1], field)) or 0) < 1 then
  return 0
end
redis.call('HINCRBY', KEYS[1], field, -1)
redis.call('HINCRBY', KEYS[1], 'r', -1)
return 1
",
    )
});

/// KEYS[1]: the breaker's hash: `p` (phase: 0 closed, 1 open, 2 half-open), `g` (generation,
/// +1 on every transition), `at` (closed: since when; open: until when; half-open: the probe's
/// bound; ms on the server's clock), `l` (how far ahead `at` was set: the open period or the
/// probe bound, as the process that set it had them) and 20 counting buckets `e<i>`/`c<i>`/`f<i>` of
/// `window / 20` ms, as `resilient_core::CircuitBreaker`'s. ARGV[1] is the operation, ARGV[2]
/// the bucket ms:
/// - `admit`, bucket ms, probe ms → {0} closed, {1, until} refused, {2, generation,
///   took_over} probe;
/// - `record`, bucket ms, failure (0/1), min calls, failure ratio, open ms, consecutive
///   failures, the attempt's duration ms → 1 opened, else 0. An attempt sent before the close
///   (now − duration < `at`) is not counted. `s`/`se`: the streak of failures in a row and the
///   epoch of its last (a failure more than a window after the one before starts it again,
///   so a run may outlast the window); a success ends it, and so does a close. Opens on the
///   streak, or else on the window's ratio;
/// - `resolve`, bucket ms, generation, success (0/1), open ms → 1 closed, 2 reopened, 0 given
///   up. A close empties the bucket it falls in (the window starts afresh);
/// - `give_back`, bucket ms, generation → 1, or 0 when it had been given up.
///
/// A server clock stepped back leaves `at` ahead of now: closed, it becomes now (else every
/// attempt would pass for one sent before the close); open or half-open, a moment further ahead
/// than `l` is over (else every host would be refused for as long as the step).
///
/// Every write keeps the key for one window past its state's moment (the open period's end,
/// the probe's bound, or now), and an open or half-open one a day more: a closed breaker
/// nobody calls goes away (its absence reads as closed), an open one stays open as in shared
/// memory, its next admission the one probe, however long nobody called (a day at most: a
/// name no longer used leaves no key for good).
pub static BREAKER: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local k = KEYS[1]
local s = redis.call('HMGET', k, 'p', 'g', 'at', 's', 'se', 'l')
local p, g, at = tonumber(s[1]) or 0, tonumber(s[2]) or 0, tonumber(s[3]) or 0
local streak, streak_epoch = tonumber(s[4]) or 0, tonumber(s[5]) or 0
local op = ARGV[1]
local bucket_ms = tonumber(ARGV[2])
local function keep(phase, until_ms)
  local ttl = math.max(until_ms, now) - now + bucket_ms * 21
  if phase ~= 0 then
    ttl = ttl + 86400000
  end
  redis.call('PEXPIRE', k, ttl)
end
local function set(phase, until_ms)
  redis.call('HSET', k, 'p', phase, 'g', g + 1, 'at', until_ms, 'l', until_ms - now)
  keep(phase, until_ms)
end
if op == 'admit' then
  if p == 0 then return {0} end
  -- Further ahead than the period that set it: the server's clock stepped back, and the
  -- moment is over. (A key written without `l` is taken at its word.)
  local ahead = at - now
  if ahead > 0 and ahead <= (tonumber(s[6]) or ahead) then return {1, at} end
  set(2, now + tonumber(ARGV[3]))
  return {2, g + 1, p == 2 and 1 or 0}
elseif op == 'record' then
  if p == 0 and at > now then
    -- Closed since a moment ahead: the server's clock stepped back. Since now, then.
    at = now
    redis.call('HSET', k, 'at', at)
  end
  if p == 0 and now - tonumber(ARGV[8]) < at then return 0 end
  local epoch = math.floor(now / bucket_ms)
  local i = epoch % 20
  if tonumber(redis.call('HGET', k, 'e' .. i)) ~= epoch then
    redis.call('HSET', k, 'e' .. i, epoch, 'c' .. i, 0, 'f' .. i, 0)
  end
  redis.call('HINCRBY', k, 'c' .. i, 1)
  keep(p, at)
  if ARGV[3] ~= '1' then
    if streak ~= 0 then
      redis.call('HSET', k, 's', 0)
    end
    return 0
  end
  redis.call('HINCRBY', k, 'f' .. i, 1)
  if streak > 0 and streak_epoch <= epoch and epoch - streak_epoch < 20 then
    streak = streak + 1
  else
    streak = 1
  end
  streak_epoch = epoch
  redis.call('HSET', k, 's', streak, 'se', streak_epoch)
  if p ~= 0 then return 0 end
  if streak >= tonumber(ARGV[7]) then
    set(1, now + tonumber(ARGV[6]))
    return 1
  end
  local since = math.floor(at / bucket_ms)
  local all = redis.call('HGETALL', k)
  local f = {}
  for j = 1, #all, 2 do f[all[j]] = tonumber(all[j + 1]) end
  local calls, fails = 0, 0
  for j = 0, 19 do
    local ej = f['e' .. j]
    if ej and ej <= epoch and epoch - ej < 20 and ej >= since then
      calls = calls + (f['c' .. j] or 0)
      fails = fails + (f['f' .. j] or 0)
    end
  end
  if calls < tonumber(ARGV[4]) or fails < tonumber(ARGV[5]) * calls - 1e-9 then return 0 end
  set(1, now + tonumber(ARGV[6]))
  return 1
elseif op == 'resolve' then
  if p ~= 2 or g ~= tonumber(ARGV[3]) then return 0 end
  if ARGV[4] == '1' then
    set(0, now)
    local i = math.floor(now / bucket_ms) % 20
    redis.call('HDEL', k, 'e' .. i, 'c' .. i, 'f' .. i)
    redis.call('HSET', k, 's', 0)
    return 1
  end
  set(1, now + tonumber(ARGV[5]))
  return 2
elseif op == 'give_back' then
  if p ~= 2 or g ~= tonumber(ARGV[3]) then return 0 end
  set(1, now)
  return 1
end
return redis.error_reply('unknown operation')
",
    )
});
