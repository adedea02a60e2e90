//! `Resilient\RetryBudget`: retries allowed per sliding window =
//! `floor + ratio × originals`, counted across every process of the host.

use std::sync::Arc;

use ext_php_rs::boxed::ZBox;
use ext_php_rs::prelude::*;
use ext_php_rs::types::{ZendHashTable, Zval};
use resilient_core::{clock, BudgetConfig, RetryBudget as CoreBudget, Segment};

use crate::coerce::StringArg;
use crate::segment::Rebinding;
use crate::{coerce, errors};

pub const DEFAULT_RATIO: f64 = 0.1;
pub const DEFAULT_FLOOR: i64 = 5;
pub const DEFAULT_WINDOW_SECONDS: f64 = 60.0;

/// A budget's settings from PHP's numbers: the conversions name the argument, the core
/// owns the rules. The client's `budget` option goes through the same function.
pub fn config(
    ratio: f64,
    floor: i64,
    window_seconds: f64,
) -> Result<BudgetConfig, resilient_core::Error> {
    use resilient_core::validate;
    BudgetConfig::from_seconds(
        ratio,
        validate::count("floor", floor, 0, i64::from(BudgetConfig::MAX_FLOOR))?,
        window_seconds,
    )
}

/// A retry budget per name: per sliding window, retries may be at most
/// `floor + ratio × originals`, counted across every process of the host.
/// Throws `\ValueError` on a bad argument. When the segment cannot be used
/// the budget counts this process only (degraded mode, see
/// `Funnel::degradedReason()`), or throws `Resilient\SharedMemoryError`
/// with `resilient.shm_required=1`.
#[php_class]
#[php(name = "Resilient\\RetryBudget")]
pub struct RetryBudget {
    name: String,
    config: BudgetConfig,
    bound: Rebinding<CoreBudget>,
}

impl RetryBudget {
    /// The budget on this process's current segment (see [`Rebinding`]), and whether that is
    /// the degraded one (counting this process only).
    fn current(&self) -> PhpResult<(bool, CoreBudget)> {
        let (segment, inner) = self.bound.get(|seg| self.build(seg))?;
        Ok((segment.is_local(), inner))
    }

    fn build(&self, seg: Arc<Segment>) -> PhpResult<CoreBudget> {
        CoreBudget::new(seg, &self.name, self.config).map_err(errors::php)
    }
}

/// Stats are rounded to 1e-6: the core adds a tiny epsilon to `allowed` so
/// 5 + 0.1 × 100 does not land under 15.
fn round6(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

#[php_impl]
impl RetryBudget {
    /// `new RetryBudget(string $name, float $ratio = 0.1, int $floor = 5, float $window = 60.0)`.
    /// `$ratio` 0..=1000 (retries earned per original), `$floor` 0..=1048575 (retries always
    /// allowed per window), `$window` seconds, at least 0.02 (20 buckets of 1 ms) and at most
    /// 600 (each of the 20 buckets counts up to 1048575 originals: 34952 a second at 600),
    /// counted in whole milliseconds (a fraction of one is dropped; `stats()['window']` says
    /// what is used). Numbers may be given as numeric strings (or an integral float for the floor), as
    /// PHP's coercive mode allows; a bad one throws `\ValueError` or `\TypeError` naming it.
    pub fn __construct(
        name: StringArg,
        ratio: Option<&Zval>,
        floor: Option<&Zval>,
        window: Option<&Zval>,
    ) -> PhpResult<Self> {
        const CTOR: &str = "Resilient\\RetryBudget::__construct";
        crate::construct_once::refuse_second_call::<Self>(CTOR)?;
        let name = name.utf8(CTOR, 1, "name")?;
        resilient_core::validate::name("name", &name).map_err(errors::php)?;
        let ratio = match coerce::given(ratio) {
            Some(z) => coerce::float_arg(z, CTOR, 2, "ratio")?,
            None => DEFAULT_RATIO,
        };
        let floor = match coerce::given(floor) {
            Some(z) => coerce::int_arg(z, CTOR, 3, "floor")?,
            None => DEFAULT_FLOOR,
        };
        let window = match coerce::given(window) {
            Some(z) => coerce::float_arg(z, CTOR, 4, "window")?,
            None => DEFAULT_WINDOW_SECONDS,
        };
        let config = config(ratio, floor, window).map_err(errors::php)?;
        let bound = Rebinding::new(|seg| CoreBudget::new(seg, &name, config).map_err(errors::php))?;
        Ok(RetryBudget {
            name,
            config,
            bound,
        })
    }

    /// Deposit: one original request (whatever its attempts).
    pub fn record_original(&self) -> PhpResult<()> {
        self.bound.with(
            clock::monotonic_ms(),
            |seg| self.build(seg),
            |_, b, now_ms| b.record_original(now_ms),
        )
    }

    /// Withdraw: true (and counted) when one retry may be sent now.
    pub fn try_consume(&self) -> PhpResult<bool> {
        self.bound.with(
            clock::monotonic_ms(),
            |seg| self.build(seg),
            |_, b, now_ms| b.try_consume(now_ms),
        )
    }

    /// `['originals' => int, 'retries' => int, 'allowed' => float,
    /// 'remaining' => float, 'window' => float (s), 'ratio' => float, 'floor' => int,
    /// 'degraded' => bool]` for the current window (`degraded`: counting this
    /// process only, see `Funnel::degradedReason()`; `remaining`: `allowed - retries`, at
    /// most what the window's newest bucket can still count; `tryConsume()` grants while at
    /// least 1 remains).
    pub fn stats(&self) -> PhpResult<ZBox<ZendHashTable>> {
        let (degraded, inner) = self.current()?;
        let s = inner.stats(clock::monotonic_ms());
        let cfg = self.config;
        let mut ht = ZendHashTable::new();
        let to_i = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        ht.insert("originals", to_i(s.originals))?;
        ht.insert("retries", to_i(s.retries))?;
        ht.insert("allowed", round6(s.allowed))?;
        ht.insert("remaining", round6(s.remaining))?;
        ht.insert("window", cfg.window().as_secs_f64())?;
        ht.insert("ratio", cfg.ratio())?;
        ht.insert("floor", i64::from(cfg.floor()))?;
        ht.insert("degraded", degraded)?;
        Ok(ht)
    }

    pub fn name(&self) -> String {
        self.name.clone()
    }

    /// True when this budget counts only this process (degraded mode, see
    /// `Funnel::degradedReason()`).
    pub fn is_degraded(&self) -> PhpResult<bool> {
        Ok(self.current()?.0)
    }
}
