//! The budget's script on a real Redis decides as the shared memory's `RetryBudget` does: the
//! same originals and retry decisions at the same times (the script is told the time, its
//! ARGV[5]) give the same answers, through bucket turns, gaps longer than the window and a
//! clock that steps back.

use std::time::Duration;

use resilient_core::{BudgetConfig, RetryBudget};
use resilient_redis::BUDGET;

mod common;

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

#[test]
fn the_script_decides_as_the_shared_memory_does() {
    let redis = common::RedisServer::start();
    let mut conn = redis::Client::open(format!("redis://127.0.0.1:{}/0", redis.port()))
        .unwrap()
        .get_connection()
        .unwrap();
    let config = BudgetConfig::new(0.5, 2, Duration::from_secs(2)).unwrap();
    let shm = RetryBudget::new(common::segment("budget-arithmetic"), "sap", config).unwrap();
    let mut ask = |op: &str, now_ms: u64| -> bool {
        BUDGET
            .key("sap:budget")
            .arg(op)
            .arg(config.bucket_ms())
            .arg(config.floor())
            .arg(config.ratio())
            .arg(now_ms)
            .invoke::<i64>(&mut conn)
            .unwrap()
            == 1
    };

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
            shm.record_original(now_ms);
            assert!(ask("o", now_ms));
        } else {
            let expected = shm.try_consume(now_ms);
            assert_eq!(
                ask("r", now_ms),
                expected,
                "step {step} at {now_ms} ms: shared memory says {expected}"
            );
            decisions += 1;
            allowed += u32::from(expected);
        }
    }
    // Both answers seen often, or the comparison says little.
    assert!(
        allowed > 200 && decisions - allowed > 200,
        "{allowed} of {decisions} allowed"
    );
}
