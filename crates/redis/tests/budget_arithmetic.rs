//! The budget's script on a real Redis decides as the shared memory's `RetryBudget` does: the
//! same originals and retry decisions at the same times (the script is told the time, its
//! ARGV[5]) give the same answers, through bucket turns, gaps longer than the window and a
//! clock that steps back.

use std::time::{Duration, Instant};

use resilient_core::{BudgetConfig, RetryBudget};
use resilient_redis::{BUDGET, GIVE_BACK};

mod common;
use common::RedisServer;

/// A small deterministic generator (xorshift64*): the sequence is the same on every run.
struct Steps(u64);

impl Steps {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// One budget twice: the script on Redis under `key`, and the shared memory's.
struct Both {
    conn: redis::Connection,
    key: String,
    config: BudgetConfig,
    shm: RetryBudget,
    /// PERSIST the key with each script, in one transaction: its expiry runs on Redis's real
    /// clock, so a test on virtual time with a window of a few ms would see the key expire
    /// whenever the machine stalls that long between two steps.
    persist: bool,
}

impl Both {
    fn new(redis: &RedisServer, key: &str, config: BudgetConfig) -> Both {
        let mut conn = redis::Client::open(format!("redis://127.0.0.1:{}/0", redis.port()))
            .unwrap()
            .get_connection()
            .unwrap();
        let shm = RetryBudget::new(common::segment(key), "sap", config).unwrap();
        // Loaded first: inside a transaction (`persist`) an unknown script is not loaded again.
        BUDGET.prepare_invoke().load(&mut conn).unwrap();
        Both {
            conn,
            key: key.to_owned(),
            config,
            shm,
            persist: false,
        }
    }

    /// The script's answer to `op` (`o`: an original, `r`: a retry) at `now_ms`.
    fn script(&mut self, op: &str, now_ms: u64) -> bool {
        let mut invocation = BUDGET.prepare_invoke();
        invocation
            .key(&self.key)
            .arg(op)
            .arg(self.config.bucket_ms())
            .arg(self.config.floor())
            .arg(self.config.ratio())
            .arg(now_ms);
        let answer: i64 = if self.persist {
            // In one transaction: no time passes on the server between the two.
            let (answer,): (i64,) = redis::pipe()
                .atomic()
                .invoke_script(&invocation)
                .cmd("PERSIST")
                .arg(&self.key)
                .ignore()
                .query(&mut self.conn)
                .unwrap();
            answer
        } else {
            invocation.invoke(&mut self.conn).unwrap()
        };
        answer == 1
    }

    /// A retry counted at `consumed_at` given back at `now_ms`, by both.
    fn give_back(&mut self, consumed_at: u64, now_ms: u64) {
        self.shm.give_back(consumed_at);
        let _: i64 = GIVE_BACK
            .key(&self.key)
            .arg(self.config.bucket_ms())
            .arg(now_ms - consumed_at)
            .arg(now_ms)
            .invoke(&mut self.conn)
            .unwrap();
    }

    fn record_original(&mut self, now_ms: u64) {
        self.shm.record_original(now_ms);
        assert!(self.script("o", now_ms));
    }

    /// A retry decision, the same from both (else a failure naming `at`); the answer.
    fn try_consume(&mut self, now_ms: u64, at: &str) -> bool {
        let expected = self.shm.try_consume(now_ms);
        assert_eq!(
            self.script("r", now_ms),
            expected,
            "{at}, {now_ms} ms: the shared memory says {expected}"
        );
        expected
    }
}

#[test]
fn the_script_decides_as_the_shared_memory_does() {
    let redis = RedisServer::start();
    let config = BudgetConfig::new(0.5, 2, Duration::from_secs(2)).unwrap();
    let mut both = Both::new(&redis, "budget-arithmetic", config);
    let mut steps = Steps(0x9e37_79b9_7f4a_7c15);
    let mut now_ms: u64 = 1_000_000_000;
    let (mut decisions, mut allowed) = (0, 0);
    for step in 0..4000 {
        now_ms = match steps.below(100) {
            0..=69 => now_ms + steps.below(30),
            70..=89 => now_ms + 30 + steps.below(270),
            90..=95 => now_ms + 300 + steps.below(2200),
            96..=97 => now_ms + 2000 + steps.below(4000),
            _ => now_ms - steps.below(250),
        };
        if steps.below(100) < 55 {
            both.record_original(now_ms);
        } else {
            decisions += 1;
            allowed += u32::from(both.try_consume(now_ms, &format!("step {step}")));
        }
    }
    // Both answers seen often, or the comparison says little.
    assert!(
        allowed > 200 && decisions - allowed > 200,
        "{allowed} of {decisions} allowed"
    );
}

/// As above, at the edges: gaps of exactly 19, 20, 21 buckets, steps back of up to 19 buckets
/// (within the window, where the script counts in the newest bucket as the shared memory does
/// for a caller whose reading is behind; a step back of a window or more starts a new window on
/// Redis, tested below), ratio 0.1, floors 0 and 1, windows of 20 and 39 ms (the key kept: its
/// expiry, a few real ms, is not what this compares).
#[test]
fn the_script_matches_the_shared_memory_at_the_edges() {
    let redis = RedisServer::start();
    for (n, (ratio, floor, window)) in [
        (0.1, 0, 2000u64),
        (0.1, 1, 2000),
        (0.3, 0, 20),
        (1.0, 0, 39),
    ]
    .into_iter()
    .enumerate()
    {
        let config = BudgetConfig::new(ratio, floor, Duration::from_millis(window)).unwrap();
        let b = config.bucket_ms();
        let mut both = Both::new(&redis, &format!("edge{n}"), config);
        both.persist = true;
        let mut steps = Steps(0x1234_5678_9abc_def1 ^ (n as u64));
        let mut now: u64 = 5_000_000_000;
        // The newest time yet: steps back stop in its window's oldest bucket (at most 19
        // buckets behind the newest, however many steps back follow each other).
        let mut newest = now;
        for step in 0..6000 {
            now = match steps.below(100) {
                0..=59 => now + steps.below(b),
                60..=69 => now + b * 19 + steps.below(2),
                70..=74 => now + b * 20,
                75..=79 => now + b * 21,
                80..=89 => now + b * (1 + steps.below(25)),
                90..=95 => now - b * (1 + steps.below(19)),
                _ => now - (b * steps.below(19) + steps.below(b)),
            }
            .max((newest / b - 19) * b);
            newest = newest.max(now);
            if steps.below(100) < 70 {
                both.record_original(now);
            } else {
                both.try_consume(now, &format!("config {n} step {step}"));
            }
        }
    }
}

/// The key lives until its newest bucket has left the window, reckoned from that bucket, not
/// from the last write: after the server's clock stepped back, writes count in the newest
/// bucket, whose retries stay in the window longer than 21 buckets after the last write.
#[test]
fn after_a_clock_step_back_the_key_outlives_the_retries_still_in_the_window() {
    let redis = RedisServer::start();
    // A window of 400 ms: buckets of 20 ms.
    let config = BudgetConfig::new(0.0, 3, Duration::from_millis(400)).unwrap();
    let mut both = Both::new(&redis, "ttl", config);
    let start = Instant::now();
    let base: u64 = 1_000_000_000;
    let clock = |ahead: u64| base + start.elapsed().as_millis() as u64 + ahead;
    // The clock 200 ms (10 buckets) ahead: the 3 retries of the floor spent.
    let t = clock(200);
    for _ in 0..3 {
        assert!(both.try_consume(t, "ahead"));
    }
    assert!(!both.try_consume(t, "ahead, spent"));
    // The clock steps back 200 ms; an original is recorded (the last write).
    both.record_original(clock(0));
    // Quiet for more than 21 buckets of real time: a key reckoned from the last write is gone.
    std::thread::sleep(Duration::from_millis(440));
    both.try_consume(clock(0), "after the quiet time");
}

/// A server clock stepped back a window or more (an NTP correction, a VM restored from a
/// snapshot): the window starts again at the new time. Pinned to the newest bucket instead (as
/// a step back within the window is), every decision until the clock caught up would land in
/// that one bucket, which never leaves the window: the spent floor stays spent, and the
/// originals of the whole catch-up period keep allowing retries, for as long as the step.
#[test]
fn a_clock_stepped_back_a_window_or_more_starts_a_new_window() {
    let redis = RedisServer::start();
    // A window of 2 s: buckets of 100 ms; a floor of 3 retries.
    let config = BudgetConfig::new(0.0, 3, Duration::from_secs(2)).unwrap();
    let mut both = Both::new(&redis, "step-back-far", config);
    let t0: u64 = 5_000_000_000;
    for _ in 0..3 {
        assert!(both.script("r", t0));
    }
    assert!(!both.script("r", t0), "the floor is spent");
    // Back one hour (36,000 buckets).
    let t1 = t0 - 3_600_000;
    for n in 0..3 {
        assert!(both.script("r", t1), "retry {n} of a new window's floor");
    }
    assert!(!both.script("r", t1), "the new window's floor is spent");
    let ttl: i64 = redis::cmd("PTTL")
        .arg(&both.key)
        .query(&mut both.conn)
        .unwrap();
    assert!(
        (0..=2100).contains(&ttl),
        "the key lives one window and a bucket from the new time, not until the old one: {ttl} ms"
    );
    // Back 19 buckets, less than the window: counted in the newest bucket, the floor spent.
    let t2 = t1 - 19 * 100;
    assert!(
        !both.script("r", t2),
        "within the window the window is kept"
    );
    // Back a whole window (20 buckets) from the newest bucket: a new window.
    let t3 = t1 - 20 * 100;
    assert!(
        both.script("r", t3),
        "a step back of a window starts a new one"
    );
}

/// A 600 s window (buckets of 30 s) whose server clock steps back an hour (120 buckets), then
/// one original a second: once the floor spent before the step is no longer in the window
/// (on the new clock), the retries allowed follow `floor + ratio × originals` of the last
/// window, as the shared memory on a clock that did not step allows them.
#[test]
fn after_a_long_step_back_the_budget_holds_its_limit() {
    let redis = RedisServer::start();
    let config = BudgetConfig::new(0.1, 3, Duration::from_secs(600)).unwrap();
    let mut both = Both::new(&redis, "step-back-hour", config);
    both.persist = true;
    let t0: u64 = 9_000_000_000;
    for _ in 0..3 {
        assert!(both.script("r", t0));
    }
    assert!(!both.script("r", t0), "the floor is spent");
    // An hour back, then one original a second for 599 s.
    let t1 = t0 - 3_600_000;
    for s in 0..599 {
        assert!(both.script("o", t1 + s * 1000));
    }
    let now = t1 + 599 * 1000;
    let mut allowed = 0;
    while both.script("r", now) {
        allowed += 1;
        assert!(allowed <= 1000, "no limit");
    }
    // 3 + 0.1 × 599 = 62.9: 62 retries (the shared memory's answer on an unstepped clock).
    assert_eq!(allowed, 62, "floor + ratio × the window's originals");
}

/// A retry given back comes off the bucket it was counted in, on Redis as in shared memory:
/// soon after (the same bucket), buckets later (a long Retry-After before the refusal), and
/// once that bucket has left the window, off nothing newer.
#[test]
fn a_retry_given_back_comes_off_where_it_was_counted() {
    let redis = RedisServer::start();
    // A window of 2 s: buckets of 100 ms; a floor of 3 retries.
    let config = BudgetConfig::new(0.0, 3, Duration::from_secs(2)).unwrap();
    let mut both = Both::new(&redis, "give-back", config);
    both.persist = true;
    let t: u64 = 7_000_000_000;
    assert!(both.try_consume(t, "first"));
    both.give_back(t, t + 30);
    assert!(both.try_consume(t + 40, "a"));
    assert!(both.try_consume(t + 350, "b"));
    both.give_back(t + 40, t + 650);
    assert!(both.try_consume(t + 700, "c"));
    assert!(both.try_consume(t + 710, "d"));
    assert!(!both.try_consume(t + 720, "b, c, d: the floor is spent"));
    // b's bucket has left the window: c and d stay counted.
    both.give_back(t + 350, t + 2_500);
    assert!(both.try_consume(t + 2_500, "e, beside c and d"));
    assert!(!both.try_consume(t + 2_510, "c, d, e"));
}
