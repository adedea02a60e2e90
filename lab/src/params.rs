//! The experiment's parameters, from the command line. Defaults are seed 000's experiment:
//! upstream 4 slots, 20 ms → 120 ms → 20 ms, 20 s phases, 50 req/s open loop, 16 FPM workers,
//! deadline 0.85 s.

use std::path::PathBuf;

/// Every knob of one lab run.
#[derive(Debug, Clone)]
pub struct Params {
    /// Variants to run, in order (naive, laravel, resilient, resilient-failfast).
    pub variants: Vec<String>,
    /// How long the `resilient` variant's funnel waits for a free slot, ms (counted in the
    /// deadline). `resilient-failfast` always uses 0, the contract's default.
    pub funnel_wait_ms: u64,
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

impl Params {
    pub const USAGE: &'static str = "\
usage: resilient-lab [options]
  --quick                 short phases (5 s) for CI
  --check                 exit non-zero unless the CI properties hold
  --variants a,b,c        naive,laravel,resilient,resilient-failfast (default: all four)
  --funnel-wait-ms MS     how long the resilient variant's funnel waits for a slot (default 50;
                          resilient-failfast always 0)
  --phase-secs S          seconds per phase (default 20; --quick 5)
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
            variants: VARIANTS.iter().map(|v| v.to_string()).collect(),
            funnel_wait_ms: 50,
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
                "--variants" => {
                    p.variants = val(&a)?
                        .split(',')
                        .map(|s| s.trim().to_string())
                        .filter(|s| !s.is_empty())
                        .collect();
                    for v in &p.variants {
                        if !VARIANTS.contains(&v.as_str()) {
                            return Err(format!(
                                "unknown variant '{v}' (known: {})",
                                VARIANTS.join(", ")
                            ));
                        }
                    }
                }
                "--funnel-wait-ms" => p.funnel_wait_ms = num(&a, &val(&a)?)? as u64,
                "--phase-secs" => p.phase_secs = num(&a, &val(&a)?)?,
                "--rate" => p.rate = num(&a, &val(&a)?)?,
                "--health-rate" => p.health_rate = num(&a, &val(&a)?)?,
                "--capacity" => p.capacity = num(&a, &val(&a)?)? as u32,
                "--normal-ms" => p.normal_ms = num(&a, &val(&a)?)? as u64,
                "--slow-ms" => p.slow_ms = num(&a, &val(&a)?)? as u64,
                "--slow-fail-ratio" => p.slow_fail_ratio = num(&a, &val(&a)?)?.min(1.0),
                "--workers" => p.workers = num(&a, &val(&a)?)? as u32,
                "--deadline-ms" => p.deadline_ms = num(&a, &val(&a)?)? as u64,
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
        p.out_dir = out.unwrap_or_else(|| p.root.join("lab/out"));
        p.extension = ext.unwrap_or_else(|| p.root.join("target/release/libresilient.so"));
        p.upstream_bin = up.unwrap_or_else(|| p.root.join("target/release/resilient-upstream"));
        Ok(p)
    }

    /// The upstream's throughput when slow: slots / service time.
    pub fn slow_capacity_rps(&self) -> f64 {
        self.capacity as f64 * 1000.0 / self.slow_ms as f64
    }

    /// The funnel wait a variant's client uses, ms; `None` for the variants without the extension.
    pub fn funnel_wait_ms_of(&self, variant: &str) -> Option<u64> {
        match variant {
            "resilient" => Some(self.funnel_wait_ms),
            "resilient-failfast" => Some(0),
            _ => None,
        }
    }

    pub fn total_secs(&self) -> f64 {
        3.0 * self.phase_secs
    }
}

fn num(name: &str, v: &str) -> Result<f64, String> {
    v.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .ok_or_else(|| format!("{name}: '{v}' is not a non-negative number"))
}

/// Every variant, in the default order.
pub const VARIANTS: [&str; 4] = ["naive", "laravel", "resilient", "resilient-failfast"];

/// The variants that run this extension's client (they need libresilient.so, shared memory and
/// the resilient.* ini).
pub const RESILIENT_VARIANTS: [&str; 2] = ["resilient", "resilient-failfast"];

pub fn is_resilient(variant: &str) -> bool {
    RESILIENT_VARIANTS.contains(&variant)
}

/// The three phases, in order.
pub const PHASES: [&str; 3] = ["normal", "slow", "normal-again"];

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Params, String> {
        Params::from_args(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn both_resilient_variants_run_by_default_and_only_one_waits() {
        let p = parse(&[]).unwrap();
        assert_eq!(
            p.variants,
            ["naive", "laravel", "resilient", "resilient-failfast"]
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
}
