//! The experiment's parameters, from the command line. Defaults are seed 000's experiment:
//! upstream 4 slots, 20 ms → 120 ms → 20 ms, 20 s phases, 50 req/s open loop, 16 FPM workers,
//! deadline 0.85 s.

use std::path::PathBuf;

use crate::scenario::{self, Scenario};

/// Every knob of one lab run.
#[derive(Debug, Clone)]
pub struct Params {
    /// The scenarios to run, in order (`--scenario`, `--all`; default: slowdown only).
    pub scenarios: Vec<Scenario>,
    /// The scenario this copy of the parameters is for (main sets it per scenario).
    pub scenario: Scenario,
    /// Variants to run, in order, for the current scenario.
    pub variants: Vec<String>,
    /// `--variants`, which overrides every scenario's default list.
    pub variants_override: Option<Vec<String>>,
    /// Share of 503 answers in the `errors` scenario's bad phase.
    pub error_ratio: f64,
    /// How the `errors` scenario's upstream comes to that share (`--error-model`).
    pub error_model: scenario::ErrorModel,
    /// Background CLI workers in the `mixed` scenario.
    pub bg_workers: u32,
    /// Funnel slots reserved for web callers in the `mixed` scenario (resilient variants).
    pub reserve: u32,
    /// `mixed`: the resilient variants' funnel `share` option (web keeps the reserve, the
    /// background the other slots, under contention).
    pub share: bool,
    /// A background call's deadline, ms (console: longer than the page's).
    pub bg_deadline_ms: u64,
    /// How long the `resilient` variant's funnel waits for a free slot, ms (counted in the
    /// deadline). `resilient-failfast` always uses 0, the contract's default.
    pub funnel_wait_ms: u64,
    /// The resilient variants' retry budget (`--budget`).
    pub budget: Budget,
    /// Length of each of the three phases (normal, slow, normal), seconds.
    pub phase_secs: f64,
    /// Offered load on /checkout, requests per second (open loop).
    pub rate: f64,
    /// Offered load on /health, requests per second.
    pub health_rate: f64,
    /// Upstream concurrent slots.
    pub capacity: u32,
    /// Upstream service time in the normal phases, ms.
    pub normal_ms: u64,
    /// Upstream service time in the slow phase, ms.
    pub slow_ms: u64,
    /// Share of upstream answers that are 503 during the slow phase (0 = none: the seed's experiment).
    pub slow_fail_ratio: f64,
    /// php-fpm workers (pm static).
    pub workers: u32,
    /// The page's deadline for the whole quote call, ms (the same in every variant).
    pub deadline_ms: u64,
    /// A live answer counts as goodput when the page answered within this many seconds
    /// (the page budget the seed uses: 900 ms + scheduling slack = 1 s).
    pub good_within_s: f64,
    /// Client-side timeout of one load-generator request, seconds.
    pub request_timeout_s: f64,
    /// After the last phase, how long to wait for answers still pending, seconds.
    pub drain_secs: f64,
    /// Exit non-zero unless the CI properties hold (see check.rs).
    pub check: bool,
    /// Short phases for CI.
    pub quick: bool,
    /// Where the run directory and the report go (lab/out).
    pub out_dir: PathBuf,
    /// The repository root (for lab/app, lab/conf, target/release).
    pub root: PathBuf,
    /// The extension to load for the resilient variants.
    pub extension: PathBuf,
    /// The upstream simulator binary.
    pub upstream_bin: PathBuf,
}

/// The resilient variants' retry budget: `'budget' => ['ratio' => .., 'floor' => .., 'window' => ..]`.
///
/// Under sustained failure it holds the attempts per request to about
/// `1 + ratio + floor / (rate × window)`, once the window holds only the failure's requests.
/// Before that, the credit a healthy spell left in the window can be spent at once: so the window
/// is 10 s (Finagle's and tower's), not seed 000's minute, and the ratio 8 %: with the floor, a
/// ceiling of 1.09 at the lab's 50 req/s (`--budget 0.1,5,60` replays the seed's figures).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    pub ratio: f64,
    pub floor: u32,
    pub window_s: f64,
}

impl Budget {
    pub const DEFAULT: Budget = Budget {
        ratio: 0.08,
        floor: 5,
        window_s: 10.0,
    };

    /// `RATIO,FLOOR,WINDOW`.
    fn parse(text: &str) -> Result<Budget, String> {
        let bad = || format!("--budget: RATIO,FLOOR,WINDOW (e.g. 0.08,5,10), got '{text}'");
        let parts: Vec<&str> = text.split(',').map(str::trim).collect();
        let [ratio, floor, window] = parts[..] else {
            return Err(bad());
        };
        let b = Budget {
            ratio: ratio.parse().map_err(|_| bad())?,
            floor: floor.parse().map_err(|_| bad())?,
            window_s: window.parse().map_err(|_| bad())?,
        };
        if !((0.0..=1000.0).contains(&b.ratio)
            && b.floor <= resilient_core::BudgetConfig::MAX_FLOOR
            && b.window_s >= 0.02
            && b.window_s.is_finite())
        {
            return Err(bad());
        }
        Ok(b)
    }

    /// Attempts per request the budget allows under sustained failure at `rate` requests/s.
    pub fn ceiling(&self, rate: f64) -> f64 {
        1.0 + self.ratio + self.floor as f64 / (rate * self.window_s).max(1.0)
    }

    /// As the client option reads: `ratio 0.08, floor 5, window 10 s`.
    pub fn describe(&self) -> String {
        format!(
            "ratio {}, floor {}, window {} s",
            self.ratio, self.floor, self.window_s
        )
    }
}

impl Params {
    pub const USAGE: &'static str = "\
usage: resilient-lab [options]
  --quick                 short phases (5 s) and per scenario only the variants its checks compare, for CI
  --check                 exit non-zero unless the CI properties hold
  --scenario a,b          slowdown (default), errors, outage, mixed; capacity-shift and
                          two-hosts (not in --all)
  --all                   every scenario of the first four, in that order
  --variants a,b,c        naive,laravel,resilient,resilient-failfast,resilient-breaker,
                          resilient-16 (funnel 16), resilient-adaptive (funnel 'auto'),
                          resilient-redis (funnel, budget, breaker on Redis)
                          (default per scenario: slowdown and mixed the first four, errors and
                          outage naive,laravel,resilient,resilient-breaker; capacity-shift
                          resilient,resilient-16,resilient-adaptive; two-hosts
                          resilient,resilient-redis)
  --error-ratio R         errors: share of the offered rate answered 503 in the bad phase
                          (default 0.3)
  --error-model M         errors: shed (default: the upstream admits (1 - R) x the offered rate
                          and answers the rest 503 at once) or random (each request fails with
                          probability R after its service time)
  --bg-workers N          mixed: background CLI workers (default 8)
  --reserve N             mixed: funnel slots reserved for web in the resilient variants (default 2)
  --share true|false      mixed: the resilient variants' funnel 'share' option: under contention
                          web keeps the reserve and the background the other slots (default true;
                          false: the seed's interactive first)
  --bg-deadline-ms MS     mixed: a background call's deadline (default 2000)
  --funnel-wait-ms MS     how long the resilient variant's funnel waits for a slot (default 50;
                          resilient-failfast always 0)
  --budget R,F,W          the resilient variants' retry budget: ratio, floor, window in
                          seconds (default 0.08,5,10)
  --phase-secs S          seconds per phase, at least 2 (default 20; --quick 5)
  --rate R                /checkout requests per second (default 50)
  --health-rate R         /health requests per second (default 5)
  --capacity N            upstream slots (default 4)
  --normal-ms MS          upstream service time when normal (default 20)
  --slow-ms MS            upstream service time when slow (default 120)
  --slow-fail-ratio R     share of upstream answers that are 503 in the slow phase (default 0)
  --workers N             php-fpm workers, pm static (default 16)
  --deadline-ms MS        the page's deadline for the quote (default 850)
  --good-within S         live answers slower than this are not goodput (default 1.0)
  --drain-secs S          wait for pending answers after the last phase (default 20; --quick 10)
  --out DIR               output directory (default lab/out)
  --root DIR              repository root (default: current directory)
  --extension PATH        libresilient.so (default target/release/libresilient.so)
  --upstream-bin PATH     resilient-upstream (default target/release/resilient-upstream)";

    pub fn from_args(args: impl IntoIterator<Item = String>) -> Result<Params, String> {
        let args: Vec<String> = args.into_iter().collect();
        let quick = args.iter().any(|a| a == "--quick");
        let root = std::env::current_dir().map_err(|e| e.to_string())?;
        let mut p = Params {
            scenarios: vec![Scenario::Slowdown],
            scenario: Scenario::Slowdown,
            variants: Vec::new(),
            variants_override: None,
            error_ratio: 0.3,
            error_model: scenario::ErrorModel::Shed,
            bg_workers: 8,
            reserve: 2,
            share: true,
            bg_deadline_ms: 2000,
            funnel_wait_ms: 50,
            budget: Budget::DEFAULT,
            phase_secs: if quick { 5.0 } else { 20.0 },
            rate: 50.0,
            health_rate: 5.0,
            capacity: 4,
            normal_ms: 20,
            slow_ms: 120,
            slow_fail_ratio: 0.0,
            workers: 16,
            deadline_ms: 850,
            good_within_s: 1.0,
            request_timeout_s: 30.0,
            drain_secs: if quick { 10.0 } else { 20.0 },
            check: false,
            quick,
            out_dir: PathBuf::new(),
            root: root.clone(),
            extension: PathBuf::new(),
            upstream_bin: PathBuf::new(),
        };
        let (mut out, mut ext, mut up) = (None, None, None);
        let mut it = args.into_iter();
        while let Some(a) = it.next() {
            let mut val = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
            match a.as_str() {
                "--quick" => {}
                "--check" => p.check = true,
                "--all" => p.scenarios = scenario::ALL.to_vec(),
                "--scenario" => {
                    p.scenarios = val(&a)?
                        .split(',')
                        .map(|s| Scenario::parse(s.trim()))
                        .collect::<Result<_, _>>()?;
                }
                "--error-ratio" => p.error_ratio = share(&a, &val(&a)?)?,
                "--error-model" => {
                    p.error_model = match val(&a)?.as_str() {
                        "shed" => scenario::ErrorModel::Shed,
                        "random" => scenario::ErrorModel::Random,
                        other => {
                            return Err(format!(
                                "--error-model: '{other}' is not one of shed, random"
                            ))
                        }
                    }
                }
                "--bg-workers" => p.bg_workers = whole(&a, &val(&a)?)?,
                "--reserve" => p.reserve = whole(&a, &val(&a)?)?,
                "--share" => {
                    p.share = match val(&a)?.as_str() {
                        "true" => true,
                        "false" => false,
                        other => return Err(format!("--share: true or false, got '{other}'")),
                    }
                }
                "--bg-deadline-ms" => p.bg_deadline_ms = whole(&a, &val(&a)?)?,
                "--variants" => {
                    let list: Vec<String> = val(&a)?
                        .split(',')
                        .map(|s| s.trim().to_string())
                        .filter(|s| !s.is_empty())
                        .collect();
                    for v in &list {
                        if !VARIANTS.contains(&v.as_str()) {
                            return Err(format!(
                                "unknown variant '{v}' (known: {})",
                                VARIANTS.join(", ")
                            ));
                        }
                    }
                    p.variants_override = Some(list);
                }
                "--funnel-wait-ms" => p.funnel_wait_ms = whole(&a, &val(&a)?)?,
                "--budget" => p.budget = Budget::parse(&val(&a)?)?,
                "--phase-secs" => p.phase_secs = num(&a, &val(&a)?)?,
                "--rate" => p.rate = num(&a, &val(&a)?)?,
                "--health-rate" => p.health_rate = num(&a, &val(&a)?)?,
                "--capacity" => p.capacity = whole(&a, &val(&a)?)?,
                "--normal-ms" => p.normal_ms = whole(&a, &val(&a)?)?,
                "--slow-ms" => p.slow_ms = whole(&a, &val(&a)?)?,
                "--slow-fail-ratio" => p.slow_fail_ratio = share(&a, &val(&a)?)?,
                "--workers" => p.workers = whole(&a, &val(&a)?)?,
                "--deadline-ms" => p.deadline_ms = whole(&a, &val(&a)?)?,
                "--good-within" => p.good_within_s = num(&a, &val(&a)?)?,
                "--drain-secs" => p.drain_secs = num(&a, &val(&a)?)?,
                "--out" => out = Some(PathBuf::from(val(&a)?)),
                "--root" => p.root = PathBuf::from(val(&a)?),
                "--extension" => ext = Some(PathBuf::from(val(&a)?)),
                "--upstream-bin" => up = Some(PathBuf::from(val(&a)?)),
                "-h" | "--help" => return Err(Self::USAGE.to_string()),
                other => return Err(format!("unknown option '{other}'\n{}", Self::USAGE)),
            }
        }
        if p.rate <= 0.0
            || p.phase_secs <= 0.0
            || p.capacity == 0
            || p.workers == 0
            || p.slow_ms == 0
        {
            return Err("rate, phase-secs, capacity, workers and slow-ms must be positive".into());
        }
        // The upstream simulator's bound (`POST /__control/sim`): refused here rather than at
        // the first phase switch, after a variant's set-up and a phase of load.
        if p.normal_ms.max(p.slow_ms) > MAX_SERVICE_MS {
            return Err(format!(
                "--normal-ms and --slow-ms must be at most {MAX_SERVICE_MS} (the upstream simulator's bound)"
            ));
        }
        if p.phase_secs < MIN_PHASE_SECS {
            return Err(format!(
                "--phase-secs: {} is below {MIN_PHASE_SECS} s (recovery is judged over 2 s of the last phase)",
                p.phase_secs
            ));
        }
        if p.rate * p.phase_secs < 1.0 {
            return Err(format!(
                "--rate {} × --phase-secs {} is less than one /checkout request per phase",
                p.rate, p.phase_secs
            ));
        }
        if p.reserve >= p.capacity {
            return Err("reserve must be below capacity (the funnel's limit)".into());
        }
        p.out_dir = out.unwrap_or_else(|| p.root.join("lab/out"));
        let first = p.scenarios[0];
        p.set_scenario(first);
        p.extension = ext.unwrap_or_else(|| p.root.join("target/release/libresilient.so"));
        p.upstream_bin = up.unwrap_or_else(|| p.root.join("target/release/resilient-upstream"));
        Ok(p)
    }

    /// These parameters for one scenario: its variants (unless `--variants`).
    pub fn set_scenario(&mut self, s: Scenario) {
        self.scenario = s;
        self.variants = match &self.variants_override {
            Some(v) => v.clone(),
            None => s
                .default_variants(self.quick)
                .iter()
                .map(|v| v.to_string())
                .collect(),
        };
    }

    /// Funnel slots a variant's web client reserves (only the resilient variants, only in
    /// `mixed`: the other scenarios keep the seed's funnel).
    pub fn reserve_of(&self, variant: &str) -> u32 {
        if self.scenario.has_background() && is_resilient(variant) {
            self.reserve
        } else {
            0
        }
    }

    /// Whether a variant's funnel shares its slots (`'share' => true`): the resilient variants
    /// with a reserve, in `mixed`.
    pub fn share_of(&self, variant: &str) -> bool {
        self.share && self.reserve_of(variant) > 0
    }

    /// Web throughput the reserved slots can serve when the upstream is slow.
    pub fn reserved_capacity_rps(&self) -> f64 {
        self.reserve as f64 * 1000.0 / self.slow_ms as f64
    }

    /// The phases in order (normal, the scenario's bad phase, normal-again; or capacity-shift's).
    /// `--slow-fail-ratio` adds 503s to a slow phase (not the seed's experiment).
    pub fn phases(&self) -> Vec<scenario::PhasePlan> {
        let mut plan = self.scenario.plan(
            self.capacity,
            self.normal_ms,
            self.slow_ms,
            scenario::Errors {
                ratio: self.error_ratio,
                model: self.error_model,
                offered_rps: self.rate,
            },
        );
        if self.bad_is_slow() && self.slow_fail_ratio > 0.0 {
            plan[1].upstream.fail_ratio = self.slow_fail_ratio;
        }
        plan
    }

    /// The upstream in the run's phases, for the report, read from [`Params::phases`]: the
    /// service times, and the slots once when no phase changes them (capacity-shift's do, and
    /// it ignores `--capacity`).
    pub fn upstream_phases(&self) -> String {
        let phases = self.phases();
        let slots = phases[0].slots;
        let each = |f: &dyn Fn(&scenario::PhasePlan) -> String| {
            phases.iter().map(f).collect::<Vec<_>>().join(" → ")
        };
        if phases.iter().all(|ph| ph.slots == slots) {
            format!(
                "{slots} slots, {}",
                each(&|ph| format!("{} ms", ph.upstream.service_ms))
            )
        } else {
            each(&|ph| format!("{} slots at {} ms", ph.slots, ph.upstream.service_ms))
        }
    }

    /// The phases' names.
    pub fn phase_names(&self) -> Vec<String> {
        self.phases().into_iter().map(|x| x.name).collect()
    }

    /// The bad phase slows the upstream (slowdown, mixed): the capacity goals apply.
    pub fn bad_is_slow(&self) -> bool {
        matches!(
            self.scenario,
            Scenario::Slowdown | Scenario::Mixed | Scenario::TwoHosts
        )
    }

    /// The upstream's throughput when slow: slots / service time.
    pub fn slow_capacity_rps(&self) -> f64 {
        self.capacity as f64 * 1000.0 / self.slow_ms as f64
    }

    /// The funnel wait a variant's client uses, ms; `None` for the variants without the extension.
    pub fn funnel_wait_ms_of(&self, variant: &str) -> Option<u64> {
        match variant {
            "resilient" | "resilient-breaker" | "resilient-16" | "resilient-adaptive"
            | "resilient-redis" => Some(self.funnel_wait_ms),
            "resilient-failfast" => Some(0),
            _ => None,
        }
    }

    /// The funnel limit a resilient variant's client uses: 4 (the seed's), 16, or `auto`.
    pub fn funnel_limit_of(&self, variant: &str) -> &'static str {
        match variant {
            "resilient-16" => "16",
            "resilient-adaptive" => "auto",
            _ => "4",
        }
    }

    pub fn total_secs(&self) -> f64 {
        self.phases().len() as f64 * self.phase_secs
    }
}

/// The shortest phase: recovery is measured over 2 s windows of the last phase.
pub const MIN_PHASE_SECS: f64 = 2.0;

/// The longest service time the upstream simulator takes (its `MAX_WAIT_MS`).
pub const MAX_SERVICE_MS: u64 = 600_000;

fn num(name: &str, v: &str) -> Result<f64, String> {
    v.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .ok_or_else(|| format!("{name}: '{v}' is not a non-negative number"))
}

/// A count or a number of milliseconds: refused rather than rounded or clamped, so the run
/// is the one asked for.
fn whole<T: TryFrom<u64>>(name: &str, v: &str) -> Result<T, String> {
    let x = num(name, v)?;
    if x.fract() != 0.0 {
        return Err(format!("{name}: '{v}' is not a whole number"));
    }
    let too_large = || format!("{name}: '{v}' is too large");
    if x >= u64::MAX as f64 {
        return Err(too_large());
    }
    T::try_from(x as u64).map_err(|_| too_large())
}

/// A share from 0 to 1, refused rather than clamped.
fn share(name: &str, v: &str) -> Result<f64, String> {
    Some(num(name, v)?)
        .filter(|x| *x <= 1.0)
        .ok_or_else(|| format!("{name}: '{v}' is not a share from 0 to 1"))
}

/// Every variant, in the default order: the two without this extension first, then those
/// with it (see [`RESILIENT_VARIANTS`]).
pub const VARIANTS: [&str; 8] = [
    "naive",
    "laravel",
    "resilient",
    "resilient-failfast",
    "resilient-breaker",
    "resilient-16",
    "resilient-adaptive",
    "resilient-redis",
];

/// The variants that run this extension's client (they need libresilient.so, shared memory and
/// the resilient.* ini): every variant after naive and laravel. `resilient-breaker` is
/// `resilient` plus the client option `circuit` (failure_ratio 0.5, min_calls 20 (and so 20
/// failures in a row), window 10 s, open_for 5 s). `resilient-16` and `resilient-adaptive`
/// are `resilient` with the funnel limit 16 and `'auto'`; `resilient-redis` is `resilient`
/// with `'backend' => 'redis://…'` (funnel, budget and breaker on the lab's redis-server; the
/// `two-hosts` scenario).
pub const RESILIENT_VARIANTS: &[&str] = VARIANTS.split_at(2).1;

/// The breaker's `open_for`, seconds (lab/app/src/ResilientQuoteClient.php).
pub const BREAKER_OPEN_FOR_S: f64 = 5.0;

pub fn is_resilient(variant: &str) -> bool {
    RESILIENT_VARIANTS.contains(&variant)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Params, String> {
        Params::from_args(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn the_report_names_each_phase_of_the_upstream() {
        let p = parse(&[]).unwrap();
        assert_eq!(p.upstream_phases(), "4 slots, 20 ms → 120 ms → 20 ms");
        let p = parse(&["--scenario", "errors"]).unwrap();
        assert_eq!(p.upstream_phases(), "4 slots, 20 ms → 20 ms → 20 ms");
        let p = parse(&["--scenario", "capacity-shift", "--capacity", "6"]).unwrap();
        assert_eq!(
            p.upstream_phases(),
            "4 slots at 20 ms → 4 slots at 120 ms → 8 slots at 120 ms → 2 slots at 120 ms → 4 slots at 20 ms"
        );
    }

    #[test]
    fn both_resilient_variants_run_by_default_and_only_one_waits() {
        let p = parse(&[]).unwrap();
        assert_eq!(p.scenarios, [Scenario::Slowdown]);
        assert_eq!(
            p.variants,
            ["naive", "laravel", "resilient", "resilient-failfast"]
        );
        assert_eq!(p.funnel_wait_ms_of("resilient-breaker"), Some(50));
        assert_eq!(
            p.reserve_of("resilient"),
            0,
            "the seed's funnel has no reserve"
        );
        assert_eq!(p.funnel_wait_ms_of("resilient"), Some(50));
        assert_eq!(p.funnel_wait_ms_of("resilient-failfast"), Some(0));
        assert_eq!(p.funnel_wait_ms_of("laravel"), None);

        let p = parse(&[
            "--funnel-wait-ms",
            "20",
            "--variants",
            "resilient-failfast,resilient",
        ])
        .unwrap();
        assert_eq!(p.variants, ["resilient-failfast", "resilient"]);
        assert_eq!(p.funnel_wait_ms_of("resilient"), Some(20));
        assert_eq!(
            p.funnel_wait_ms_of("resilient-failfast"),
            Some(0),
            "the fail-fast variant ignores the flag"
        );
        assert!(parse(&["--variants", "naive,resilient-wait"])
            .unwrap_err()
            .contains("unknown variant 'resilient-wait'"));
    }

    #[test]
    fn scenarios_choose_their_variants_and_the_reserve_is_only_for_mixed() {
        let mut p = parse(&["--all"]).unwrap();
        assert_eq!(p.scenarios.len(), 4);
        p.set_scenario(Scenario::Outage);
        assert_eq!(
            p.variants,
            ["naive", "laravel", "resilient", "resilient-breaker"]
        );
        p.set_scenario(Scenario::Mixed);
        assert_eq!((p.reserve_of("resilient"), p.reserve_of("laravel")), (2, 0));
        assert!((p.reserved_capacity_rps() - 2000.0 / 120.0).abs() < 1e-9);
        let mut q = parse(&["--quick", "--scenario", "mixed,errors"]).unwrap();
        assert_eq!(q.variants, ["laravel", "resilient"]);
        q.set_scenario(Scenario::Errors);
        assert_eq!(q.variants, ["naive", "resilient"]);
        q.set_scenario(Scenario::Slowdown);
        assert_eq!(q.variants, ["naive", "resilient", "resilient-adaptive"]);
        q.set_scenario(Scenario::CapacityShift);
        assert_eq!(q.variants, ["resilient-adaptive"]);
        let mut o = parse(&["--scenario", "outage", "--variants", "naive"]).unwrap();
        o.set_scenario(Scenario::Mixed);
        assert_eq!(o.variants, ["naive"], "--variants overrides every scenario");
        assert!(parse(&["--reserve", "4"]).is_err());
    }

    #[test]
    fn share_is_on_for_the_resilient_variants_of_mixed_unless_told_otherwise() {
        let mut p = parse(&["--scenario", "mixed"]).unwrap();
        assert!(p.share_of("resilient") && p.share_of("resilient-failfast"));
        assert!(!p.share_of("laravel") && !p.share_of("naive"));
        p.set_scenario(Scenario::Slowdown);
        assert!(!p.share_of("resilient"), "no reserve outside mixed");
        let q = parse(&["--scenario", "mixed", "--share", "false"]).unwrap();
        assert!(!q.share_of("resilient"));
        assert!(!parse(&["--scenario", "mixed", "--reserve", "0"])
            .unwrap()
            .share_of("resilient"));
        assert!(parse(&["--share", "yes"]).is_err());
    }

    #[test]
    fn values_that_would_change_silently_are_refused_naming_the_option() {
        for args in [
            ["--capacity", "4.9"],
            ["--capacity", "99999999999"],
            ["--workers", "16.5"],
            ["--bg-workers", "1e12"],
            ["--reserve", "1.5"],
            ["--normal-ms", "20.5"],
            ["--deadline-ms", "1e30"],
            ["--error-ratio", "5"],
            ["--slow-fail-ratio", "1.01"],
            ["--phase-secs", "0.0001"],
            // Over the upstream simulator's bound: refused before any variant runs.
            ["--slow-ms", "700000"],
            ["--normal-ms", "600001"],
        ] {
            let e = parse(&args).expect_err(&args.join(" "));
            assert!(e.contains(args[0]), "{args:?}: {e}");
        }
        // Too few requests to measure a phase: at least one /checkout request per phase.
        let e = parse(&["--rate", "0.01"]).unwrap_err();
        assert!(e.contains("--rate") && e.contains("--phase-secs"), "{e}");
        let p = parse(&[
            "--capacity",
            "6",
            "--workers",
            "8.0",
            "--error-ratio",
            "1",
            "--phase-secs",
            "2",
        ])
        .unwrap();
        assert_eq!((p.capacity, p.workers, p.error_ratio), (6, 8, 1.0));
    }

    #[test]
    fn the_budget_is_parsed_and_its_ceiling_is_ratio_plus_floor_per_window() {
        let p = parse(&[]).unwrap();
        assert_eq!(p.budget, Budget::DEFAULT);
        // 1 + 8 % + 5 retries per 10 s of 50 req/s.
        assert!((p.budget.ceiling(50.0) - 1.09).abs() < 1e-12);
        let q = parse(&["--budget", "0.1, 5, 60"]).unwrap();
        assert_eq!(
            q.budget,
            Budget {
                ratio: 0.1,
                floor: 5,
                window_s: 60.0
            }
        );
        for bad in [
            "0.1,5",
            "0.1,5,60,1",
            "x,5,60",
            "0.1,-1,60",
            "0.1,5,0",
            "-0.1,5,60",
            "0.1,5,inf",
        ] {
            assert!(
                parse(&["--budget", bad]).unwrap_err().contains("--budget"),
                "{bad}"
            );
        }
    }
}
