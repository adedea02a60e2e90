//! The lab's scenarios: what goes wrong in the middle phase. Every scenario runs normal → bad →
//! normal with the same open-loop web load; they differ in what the upstream does in the bad
//! phase and whether background workers flood the same upstream.
//!
//! - `slowdown` (seed 000's experiment, the default): the upstream's service time goes up.
//! - `errors`: a share of the upstream's answers are 503 (after their normal service time).
//! - `outage`: every request is answered 503 at once, then the upstream is healthy again.
//! - `mixed`: seed 000's semaphore with reserved slots: the upstream slows down as in
//!   `slowdown` while background CLI workers call the same upstream in closed loops.
//! - `capacity-shift` (not in `--all`): five phases in which the upstream's slots and
//!   service time change under the same load (4 at 20 ms → 4 at 120 → 8 at 120 → 2 at 120 → 4
//!   at 20), run by the fixed funnels 4 and 16 and the learned one.

/// One scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    Slowdown,
    Errors,
    Outage,
    Mixed,
    /// The upstream's capacity changes (capacity_shift.rs); not part of `--all`.
    CapacityShift,
    /// The slowdown on two hosts (two_hosts.rs); not part of `--all`.
    TwoHosts,
}

/// One phase of a scenario: its name, the upstream's slots and what it does.
#[derive(Debug, Clone, PartialEq)]
pub struct PhasePlan {
    pub name: String,
    pub slots: u32,
    pub upstream: UpstreamPhase,
}

/// `capacity-shift`'s phases: (slots, service ms).
pub const CAPACITY_SHIFT: [(u32, u64); 5] = [(4, 20), (4, 120), (8, 120), (2, 120), (4, 20)];

/// What the upstream does in one phase (sent to `POST /__control/sim`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UpstreamPhase {
    pub service_ms: u64,
    pub fail_ratio: f64,
    pub outage: bool,
    /// Requests admitted per second, the rest answered 503 at once (0: off).
    pub shed_rps: f64,
}

/// The `errors` scenario's bad phase: 503 answers to `ratio` of the requests offered at
/// `offered_rps` a second, in the way `model` says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Errors {
    pub ratio: f64,
    pub model: ErrorModel,
    pub offered_rps: f64,
}

/// How the upstream comes to answer 503 to `ratio` of the requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ErrorModel {
    /// Overload (the default): it admits `(1 − ratio) × the offered rate` a second and answers
    /// the rest 503 at once, so at the offered load `ratio` of the requests fail, and every extra
    /// attempt a client sends is one more 503 (seed 000: "503 means the system cannot take it
    /// now").
    Shed,
    /// Each request fails with probability `ratio`, independently, after its service time.
    Random,
}

pub const ALL: [Scenario; 4] = [
    Scenario::Slowdown,
    Scenario::Errors,
    Scenario::Outage,
    Scenario::Mixed,
];

/// Scenarios run only when named (`--scenario capacity-shift`, `two-hosts`), not by `--all`.
pub const EXTRA: [Scenario; 2] = [Scenario::CapacityShift, Scenario::TwoHosts];

impl Scenario {
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Slowdown => "slowdown",
            Scenario::Errors => "errors",
            Scenario::Outage => "outage",
            Scenario::Mixed => "mixed",
            Scenario::CapacityShift => "capacity-shift",
            Scenario::TwoHosts => "two-hosts",
        }
    }

    pub fn parse(s: &str) -> Result<Scenario, String> {
        let known = ALL.iter().chain(EXTRA.iter());
        known
            .clone()
            .copied()
            .find(|x| x.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown scenario '{s}' (known: {})",
                    known.map(|x| x.name()).collect::<Vec<_>>().join(", ")
                )
            })
    }

    /// The phases in order: normal → bad → normal-again, or `capacity-shift`'s five.
    pub fn plan(
        self,
        capacity: u32,
        normal_ms: u64,
        slow_ms: u64,
        errors: Errors,
    ) -> Vec<PhasePlan> {
        if self == Scenario::CapacityShift {
            return CAPACITY_SHIFT
                .iter()
                .map(|&(slots, service_ms)| PhasePlan {
                    name: format!("{slots}@{service_ms}ms"),
                    slots,
                    upstream: UpstreamPhase {
                        service_ms,
                        fail_ratio: 0.0,
                        outage: false,
                        shed_rps: 0.0,
                    },
                })
                .collect();
        }
        let [normal, bad] = self.upstream(normal_ms, slow_ms, errors);
        [
            ("normal", normal),
            (self.bad_phase(), bad),
            ("normal-again", normal),
        ]
        .into_iter()
        .map(|(name, upstream)| PhasePlan {
            name: name.to_string(),
            slots: capacity,
            upstream,
        })
        .collect()
    }

    /// The middle phase's name in tables and plots.
    pub fn bad_phase(self) -> &'static str {
        match self {
            Scenario::Slowdown | Scenario::TwoHosts => "slow",
            Scenario::Errors => "errors",
            Scenario::Outage => "outage",
            Scenario::Mixed => "slow+flood",
            Scenario::CapacityShift => "shift",
        }
    }

    /// The variants it runs unless `--variants` says otherwise. `resilient-breaker` runs where
    /// a breaker matters (errors, outage); the slowdown keeps the seed's four.
    pub fn default_variants(self, quick: bool) -> &'static [&'static str] {
        match (self, quick) {
            (Scenario::Slowdown, false) => &["naive", "laravel", "resilient", "resilient-failfast"],
            (Scenario::Errors | Scenario::Outage, false) => {
                &["naive", "laravel", "resilient", "resilient-breaker"]
            }
            (Scenario::Mixed, false) => &["naive", "laravel", "resilient", "resilient-failfast"],
            // CI (--quick): only the variants its checks compare, so all four fit in ~3 min. The
            // outage is judged on `resilient`: 5 s phases are shorter than the breaker's
            // `open_for` (5 s ± 20 %), so a breaker re-opened by a probe late in the outage
            // would still be open through most of the short recovery phase (tests/Breaker
            // covers the breaker itself).
            (Scenario::Slowdown, true) => &["naive", "resilient", "resilient-adaptive"],
            (Scenario::Errors, true) => &["naive", "resilient"],
            (Scenario::Outage, true) => &["naive", "resilient"],
            (Scenario::Mixed, true) => &["laravel", "resilient"],
            (Scenario::CapacityShift, false) => {
                &["resilient", "resilient-16", "resilient-adaptive"]
            }
            // Its CI properties are about the learned limit only.
            (Scenario::CapacityShift, true) => &["resilient-adaptive"],
            (Scenario::TwoHosts, _) => &crate::two_hosts::VARIANTS,
        }
    }

    /// Background workers run in this scenario.
    pub fn has_background(self) -> bool {
        self == Scenario::Mixed
    }

    /// The upstream in the normal phases and in the bad one.
    pub fn upstream(self, normal_ms: u64, slow_ms: u64, errors: Errors) -> [UpstreamPhase; 2] {
        let normal = UpstreamPhase {
            service_ms: normal_ms,
            fail_ratio: 0.0,
            outage: false,
            shed_rps: 0.0,
        };
        let bad = match self {
            Scenario::Slowdown | Scenario::Mixed | Scenario::TwoHosts => UpstreamPhase {
                service_ms: slow_ms,
                ..normal
            },
            Scenario::CapacityShift => normal,
            Scenario::Errors => match errors.model {
                ErrorModel::Random => UpstreamPhase {
                    fail_ratio: errors.ratio,
                    ..normal
                },
                ErrorModel::Shed => UpstreamPhase {
                    // Never 0, which means "off".
                    shed_rps: ((1.0 - errors.ratio) * errors.offered_rps).max(1e-3),
                    ..normal
                },
            },
            Scenario::Outage => UpstreamPhase {
                outage: true,
                ..normal
            },
        };
        [normal, bad]
    }

    /// One sentence for the report.
    pub fn describe(self) -> &'static str {
        match self {
            Scenario::Slowdown => "seed 000's experiment: the upstream's service time goes from normal to slow and back; it never fails.",
            Scenario::Errors => "the upstream keeps its normal speed but answers 503 to a share of the requests in the middle phase: by default an overloaded upstream that admits only (1 − share) × the offered rate and answers the rest 503 at once (`--error-model shed`: every extra attempt is one more 503), or failures drawn independently per request after the service time (`--error-model random`).",
            Scenario::Outage => "in the middle phase the upstream answers every request 503 at once (a load balancer with no healthy backend), then it is healthy again.",
            Scenario::CapacityShift => "the upstream's capacity changes under the same offered load: 4 slots at 20 ms → 4 at 120 ms → 8 at 120 ms → 2 at 120 ms → 4 at 20 ms; the fixed funnels 4 (tuned for the first phase) and 16 (too high) against the learned one (`'limit' => 'auto'`, told nothing about the slots).",
            Scenario::TwoHosts => crate::two_hosts::DESCRIBE,
            Scenario::Mixed => "seed 000's semaphore with reserved slots: the upstream slows down as in `slowdown` while background CLI workers (PHP CLI processes, console context) call the same upstream in closed loops through the variant's own client and funnel; the resilient variants keep `reserve` of the funnel's slots for web requests, Laravel's `Redis::funnel` has no reserve.",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(model: ErrorModel) -> Errors {
        Errors {
            ratio: 0.3,
            model,
            offered_rps: 50.0,
        }
    }

    #[test]
    fn names_parse_back_and_only_the_bad_phase_differs() {
        for s in ALL {
            assert_eq!(Scenario::parse(s.name()), Ok(s));
            let [normal, _] = s.upstream(20, 120, errors(ErrorModel::Shed));
            assert_eq!(
                normal,
                UpstreamPhase {
                    service_ms: 20,
                    fail_ratio: 0.0,
                    outage: false,
                    shed_rps: 0.0,
                }
            );
        }
        assert!(Scenario::parse("storm")
            .unwrap_err()
            .contains("known: slowdown"));
        let (random, shed) = (errors(ErrorModel::Random), errors(ErrorModel::Shed));
        assert_eq!(
            Scenario::Errors.upstream(20, 120, random)[1].fail_ratio,
            0.3
        );
        let bad = Scenario::Errors.upstream(20, 120, shed)[1];
        assert_eq!(bad.fail_ratio, 0.0);
        assert!((bad.shed_rps - 35.0).abs() < 1e-9, "{bad:?}");
        assert!(Scenario::Outage.upstream(20, 120, shed)[1].outage);
        assert_eq!(Scenario::Mixed.upstream(20, 120, shed)[1].service_ms, 120);
        assert!(Scenario::Mixed.has_background() && !Scenario::Slowdown.has_background());
    }
}
