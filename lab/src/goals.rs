//! The slowdown's goals for the resilient variants in the slow phase (`resilient`, with a funnel
//! wait, and `resilient-failfast`, the contract's default), and the CI check (`--check`, on `resilient`
//! only): each one with the measured number, met or missed. Nothing here is tuned to pass.

use crate::analysis::{PhaseStats, VariantSummary};
use crate::params::{is_resilient, Params, BREAKER_OPEN_FOR_S, RESILIENT_VARIANTS};
use crate::scenario::{ErrorModel, Scenario};

/// The goals evaluated for one resilient variant (the slowdown's, or the scenario's).
#[derive(Debug, Clone, serde::Serialize)]
pub struct VariantGoals {
    pub variant: String,
    pub verdicts: Vec<Verdict>,
}

impl VariantGoals {
    /// "Goals for resilient (funnel wait 50 ms, slow phase)".
    pub fn title(&self, p: &Params) -> String {
        if p.scenario == Scenario::CapacityShift {
            return "Goals of scenario capacity-shift".into();
        }
        if p.scenario == Scenario::TwoHosts {
            return "Goals of scenario two-hosts".into();
        }
        if p.scenario != Scenario::Slowdown {
            return format!("Goals of scenario {}", p.scenario.name());
        }
        match p.funnel_wait_ms_of(&self.variant) {
            Some(0) => format!("Goals for {} (funnel fails fast, slow phase)", self.variant),
            Some(w) => format!(
                "Goals for {} (funnel waits ≤ {w} ms, slow phase)",
                self.variant
            ),
            None => format!("Goals for {} (slow phase)", self.variant),
        }
    }

    pub fn goodput_missed(&self) -> bool {
        self.verdicts
            .iter()
            .any(|g| g.what.starts_with("goodput") && !g.met)
    }
}

/// The goals for every resilient variant of this run, `resilient` first; if none ran, one
/// group saying so for `resilient`.
pub fn all_goals(p: &Params, all: &[VariantSummary]) -> Vec<VariantGoals> {
    let mut out: Vec<VariantGoals> = RESILIENT_VARIANTS
        .iter()
        .filter(|name| **name != "resilient-breaker")
        .filter(|name| find(all, name).is_some())
        .map(|name| VariantGoals {
            variant: name.to_string(),
            verdicts: goals(p, all, name),
        })
        .collect();
    if out.is_empty() {
        out.push(VariantGoals {
            variant: RESILIENT_VARIANTS[0].into(),
            verdicts: goals(p, all, RESILIENT_VARIANTS[0]),
        });
    }
    out
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Verdict {
    pub what: String,
    pub measured: String,
    pub met: bool,
}

pub(crate) fn slow(v: &VariantSummary) -> Option<&PhaseStats> {
    if v.skipped.is_some() {
        return None;
    }
    v.phases.get(1)
}

fn find<'a>(all: &'a [VariantSummary], name: &str) -> Option<&'a VariantSummary> {
    all.iter().find(|v| v.name == name)
}

fn ms(v: Option<f64>) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x:.1} ms"),
        Some(_) => "no answer".into(),
        None => "n/a".into(),
    }
}

/// The slowdown's goals for one resilient variant (slow phase unless said otherwise).
pub fn goals(p: &Params, all: &[VariantSummary], name: &str) -> Vec<Verdict> {
    let Some(r) = find(all, name) else {
        return vec![Verdict {
            what: format!("{name} variant ran"),
            measured: "not in this run".into(),
            met: false,
        }];
    };
    let Some(s) = slow(r) else {
        return vec![Verdict {
            what: format!("{name} variant ran"),
            measured: r.skipped.clone().unwrap_or_default(),
            met: false,
        }];
    };
    let sv = servable(s, "upstream capacity");
    let cap = sv.rps;
    let mut out = vec![
        Verdict { what: "amplification ≤ 1.1".into(), measured: format!("{:.3} ({} attempts / {} requests)", s.amplification, s.upstream_attempts, s.sent), met: s.amplification <= 1.1 },
        Verdict {
            what: format!("goodput ≥ 90 % of {} ({:.1}/s of {cap:.1}/s)", sv.name, 0.9 * cap),
            measured: format!(
                "{:.1}/s ({:.0} % of {}; upstream slots busy {:.0} % of the phase; a freed slot idled {} (p50) before the next attempt took it)",
                s.goodput_rps,
                100.0 * s.goodput_rps / cap,
                sv.short,
                100.0 * s.upstream_utilization,
                s.free_slot_idle_p50_ms.map(|x| format!("{x:.1} ms")).unwrap_or("?".into())
            ),
            met: s.goodput_rps >= 0.9 * cap,
        },
        health_p99_within(s, 50.0, "/health p99 ≤ 50 ms"),
        Verdict {
            what: "recovery ≤ 1 s after the upstream turns normal".into(),
            measured: r.recovery_s.map(|x| format!("{x:.2} s")).unwrap_or_else(|| "did not recover within the phase".into()),
            met: r.recovery_s.is_some_and(|x| x <= 1.0),
        },
        Verdict {
            what: "FPM never out of idle workers (slow phase)".into(),
            measured: format!(
                "busy max {} of {}, idle min {}, listen queue max {}",
                s.fpm_busy_max.map(|x| x.to_string()).unwrap_or("?".into()),
                p.workers,
                s.fpm_idle_min.map(|x| x.to_string()).unwrap_or("?".into()),
                s.fpm_listen_queue_max.map(|x| x.to_string()).unwrap_or("?".into())
            ),
            met: !s.fpm_out_of_idle && s.fpm_busy_max.is_some(),
        },
        Verdict {
            what: "FPM never out of idle workers (whole run, FPM's own max counters)".into(),
            measured: format!(
                "max active processes {} of {} (listen queue max {})",
                r.fpm_max_active_whole_run.map(|x| x.to_string()).unwrap_or("?".into()),
                p.workers,
                r.fpm_max_listen_queue_whole_run.map(|x| x.to_string()).unwrap_or("?".into())
            ),
            met: !r.fpm_out_of_idle_whole_run && r.fpm_max_active_whole_run.is_some(),
        },
    ];
    if name == "resilient-adaptive" {
        // The learned limit's goal: told nothing of the slots, it does better than the
        // slowdown's goals ask of a hand-set one.
        out.push(goodput_share(
            s,
            0.95,
            cap,
            format!(
                "learned limit: goodput ≥ 95 % of {} ({:.1}/s)",
                sv.name,
                0.95 * cap
            ),
        ));
        out.push(health_p99_within(
            s,
            20.0,
            "learned limit: /health p99 ≤ 20 ms",
        ));
    }
    out
}

/// What the slow phase can serve, as a goal names it.
pub(crate) struct Servable {
    pub(crate) rps: f64,
    /// In the goal: `upstream capacity`, or `the offered load`.
    pub(crate) name: &'static str,
    /// In the measure: `capacity`, or `offered`.
    short: &'static str,
}

/// [`PhaseStats::servable_rps`] of the slow phase; `upstream` names the capacity.
pub(crate) fn servable(s: &PhaseStats, upstream: &'static str) -> Servable {
    let rps = s.servable_rps();
    if rps < s.capacity_rps {
        Servable {
            rps,
            name: "the offered load",
            short: "offered",
        }
    } else {
        Servable {
            rps,
            name: upstream,
            short: "capacity",
        }
    }
}

/// `what`: resilient's amplification is below naive's, or neither is above 1: with no retry
/// storm in either there is nothing to be below.
fn amplification_below_naive(what: &str, resilient: f64, naive: Option<f64>) -> Verdict {
    let neither = naive.is_some_and(|n| resilient <= 1.0 && n <= 1.0);
    Verdict {
        what: what.into(),
        measured: format!(
            "{resilient:.3} vs {}{}",
            naive
                .map(|a| format!("{a:.3}"))
                .unwrap_or("naive did not run".into()),
            if neither { " (neither above 1)" } else { "" }
        ),
        met: neither || naive.is_some_and(|n| resilient < n),
    }
}

/// The longest p99 send lag the open loop allows: every send is on time but for scheduling
/// noise (a few ms measured on 2 busy cores).
pub const MAX_SEND_LAG_P99_MS: f64 = 50.0;

/// Proof of the open loop: achieved send rate within 5 % of the target in the slow phase, and
/// the sends on time (the rate alone misses sends late by less than the phase's length).
pub fn open_loop(p: &Params, all: &[VariantSummary]) -> Vec<Verdict> {
    all.iter()
        .filter_map(|v| slow(v).map(|s| (v, s)))
        .map(|(v, s)| Verdict {
            what: format!(
                "{}: achieved rate within 5 % of {:.0}/s, send lag p99 ≤ {MAX_SEND_LAG_P99_MS:.0} ms (slow phase)",
                v.name, p.rate
            ),
            measured: format!(
                "{:.2}/s, send lag p99 {:.1} ms",
                s.achieved_rps, s.send_lag_p99_ms
            ),
            met: (s.achieved_rps - p.rate).abs() <= 0.05 * p.rate
                && s.send_lag_p99_ms <= MAX_SEND_LAG_P99_MS,
        })
        .collect()
}

/// `what`: goodput at least `share` of `of` req/s.
pub(crate) fn goodput_share(s: &PhaseStats, share: f64, of: f64, what: String) -> Verdict {
    Verdict {
        what,
        measured: format!(
            "{:.1}/s of {of:.1}/s ({:.0} %)",
            s.goodput_rps,
            100.0 * s.goodput_rps / of
        ),
        met: s.goodput_rps >= share * of,
    }
}

/// `what`: `/health` p99 at most `limit_ms`.
fn health_p99_within(s: &PhaseStats, limit_ms: f64, what: &str) -> Verdict {
    Verdict {
        what: what.into(),
        measured: ms(s.health_p99_ms),
        met: s.health_p99_ms.is_some_and(|x| x <= limit_ms),
    }
}

/// The CI properties: only robust ones, never exact timings. The amplification checks are on
/// `resilient` (the variant the project ships as its recommendation).
pub fn ci_check(p: &Params, all: &[VariantSummary]) -> Vec<Verdict> {
    let mut out = Vec::new();
    let naive_amp = find(all, "naive").and_then(slow).map(|s| s.amplification);
    match find(all, "resilient").and_then(slow) {
        Some(s) => {
            out.push(Verdict {
                what: "resilient amplification (slow) ≤ 1.3".into(),
                measured: format!("{:.3}", s.amplification),
                met: s.amplification <= 1.3,
            });
            out.push(amplification_below_naive(
                "resilient amplification (slow) < naive's",
                s.amplification,
                naive_amp,
            ));
            // Amplification alone cannot fail here (the slow upstream never errs, so the
            // client never retries, and refusals only lower it): the variant must also serve.
            // Bounds for 5 s phases that only a broken variant misses (quick runs: 99 %, 1–5 ms).
            let sv = servable(s, "the upstream's capacity");
            out.push(goodput_share(
                s,
                0.7,
                sv.rps,
                format!("resilient goodput (slow) ≥ 70 % of {}", sv.name),
            ));
            // A quick phase sends 25 `/health` requests, so its p99 is their slowest: 1 s
            // leaves one stall of a loaded machine room, while a starved FPM takes seconds.
            out.push(health_p99_within(
                s,
                1000.0,
                "resilient /health p99 (slow) ≤ 1 s (a starved FPM takes seconds)",
            ));
        }
        None => out.push(Verdict {
            what: "resilient variant ran".into(),
            measured: find(all, "resilient")
                .and_then(|r| r.skipped.clone())
                .unwrap_or("not in this run".into()),
            met: false,
        }),
    }
    // The learned limit's goal in the slowdown, with a bound for 5 s phases that only a broken
    // limit misses (the goal, 95 %, is judged by the full run; quick runs gave 86–96 %, a limit
    // stuck at 1 serves 25 %): the learned limit, told nothing, still serves most of the slow
    // upstream.
    if let Some(s) = find(all, "resilient-adaptive").and_then(slow) {
        let sv = servable(s, "the upstream's capacity");
        out.push(goodput_share(
            s,
            0.7,
            sv.rps,
            format!("resilient-adaptive goodput (slow) ≥ 70 % of {}", sv.name),
        ));
    }
    for v in all {
        if let Some(reason) = &v.skipped {
            if v.name == "resilient" {
                continue; // already reported above
            }
            out.push(Verdict {
                what: format!("{} ran", v.name),
                measured: reason.clone(),
                met: false,
            });
            continue;
        }
        out.push(health_served(v));
        out.extend(no_page_errors(v));
    }
    out.extend(open_loop(p, all));
    out
}

/// A resilient variant's page always answers (live or its fallback): an HTTP error, a broken
/// body or no answer is a bug, whatever the upstream does. Without this a page that failed
/// would pass the checks that only count attempts.
fn no_page_errors(v: &VariantSummary) -> Option<Verdict> {
    if !is_resilient(&v.name) {
        return None;
    }
    let mut kinds = std::collections::BTreeMap::<&str, u64>::new();
    for ph in &v.phases {
        for (k, n) in &ph.errors_by_kind {
            *kinds.entry(k).or_default() += n;
        }
    }
    let errors: u64 = v.phases.iter().map(|ph| ph.errors).sum();
    Some(Verdict {
        what: format!(
            "{}: every page answered (no HTTP error, bad body or lost request)",
            v.name
        ),
        measured: if errors == 0 {
            "0 errors".into()
        } else {
            format!("{errors} errors {kinds:?}")
        },
        met: errors == 0,
    })
}

/// `/health` served during the run: the storm may starve it, but it must still be served at
/// some point; the resilient variants must serve nearly all (90 %).
fn health_served(v: &VariantSummary) -> Verdict {
    let (sent, ok): (u64, u64) = v
        .phases
        .iter()
        .fold((0, 0), |a, s| (a.0 + s.health_sent, a.1 + s.health_ok));
    let need = if is_resilient(&v.name) {
        (sent as f64 * 0.9).ceil() as u64
    } else {
        1
    };
    Verdict {
        what: format!("{}: /health served (≥ {need})", v.name),
        measured: format!("{ok} of {sent}"),
        met: ok >= need.max(1),
    }
}

/// The goals of the current scenario: the slowdown's, or those of the failure scenario run.
pub fn scenario_goals(p: &Params, all: &[VariantSummary]) -> Vec<VariantGoals> {
    match p.scenario {
        Scenario::Slowdown => all_goals(p, all),
        Scenario::Errors => vec![VariantGoals {
            variant: "errors".into(),
            verdicts: errors_goals(p, all),
        }],
        Scenario::Outage => vec![VariantGoals {
            variant: "outage".into(),
            verdicts: outage_goals(all),
        }],
        Scenario::Mixed => vec![VariantGoals {
            variant: "mixed".into(),
            verdicts: mixed_goals(p, all),
        }],
        Scenario::CapacityShift => vec![VariantGoals {
            variant: "capacity-shift".into(),
            verdicts: crate::capacity_shift::goals(all),
        }],
        Scenario::TwoHosts => crate::two_hosts::goals(p, all),
    }
}

fn ran<'a>(all: &'a [VariantSummary], name: &str) -> Option<&'a crate::analysis::PhaseStats> {
    find(all, name).and_then(slow)
}

fn missing(name: &str, all: &[VariantSummary]) -> Verdict {
    Verdict {
        what: format!("{name} variant ran"),
        measured: find(all, name)
            .and_then(|v| v.skipped.clone())
            .unwrap_or_else(|| "not in this run".into()),
        met: false,
    }
}

fn amp(s: &crate::analysis::PhaseStats) -> String {
    format!(
        "{:.3} ({} attempts / {} requests; {:.2} attempts per call that reached the upstream)",
        s.amplification,
        s.upstream_attempts,
        s.sent,
        if s.web_calls_seen > 0 {
            s.upstream_attempts as f64 / s.web_calls_seen as f64
        } else {
            0.0
        }
    )
}

/// `errors`: resilient's amplification ≤ 1.1 while naive's ≥ 1.5.
pub fn errors_goals(p: &Params, all: &[VariantSummary]) -> Vec<Verdict> {
    let mut out = Vec::new();
    for name in ["resilient", "resilient-breaker"] {
        let Some(v) = find(all, name) else { continue };
        match slow(v) {
            Some(s) => out.push(Verdict {
                what: format!(
                    "{name}: amplification (errors phase) ≤ 1.1 (the budget allows about 1 + ratio + floor / (rate × window) = {:.3})",
                    p.budget.ceiling(p.rate)
                ),
                measured: amp(s),
                met: s.amplification <= 1.1,
            }),
            None => out.push(missing(name, all)),
        }
    }
    if out.is_empty() {
        out.push(missing("resilient", all));
    }
    let pr = p.error_ratio;
    let expected = match p.error_model {
        ErrorModel::Random => format!(
            "3 attempts at {:.0} % independent failures: expected 1 + p + p² = {:.2}",
            100.0 * pr,
            1.0 + pr + pr * pr
        ),
        ErrorModel::Shed => format!(
            "3 attempts against an upstream that admits {:.0} % of the offered rate; {:.2} if each attempt failed independently at the share it sheds",
            100.0 * (1.0 - pr),
            naive_against_shedding(pr)
        ),
    };
    match ran(all, "naive") {
        Some(s) => out.push(Verdict {
            what: format!("naive: amplification (errors phase) ≥ 1.5 ({expected})"),
            measured: amp(s),
            met: s.amplification >= 1.5,
        }),
        None => out.push(missing("naive", all)),
    }
    out
}

/// Naive's attempts per request (up to 3 each) against an upstream that admits `1 − p` of the
/// offered rate and sheds the rest: a share `q = 1 − (1 − p) / a` of its attempts fail, so
/// `a = 1 + q + q²`; the fixed point, by iteration (it converges: the map is a contraction
/// near it).
pub fn naive_against_shedding(p: f64) -> f64 {
    let mut a = 1.0;
    for _ in 0..200 {
        let q = (1.0 - (1.0 - p) / a).max(0.0);
        a = 1.0 + q + q * q;
    }
    a
}

/// `outage`: resilient-breaker sends ≤ 5 % of naive's attempts during the outage and serves
/// again within 1 s + open_for of the upstream's return. resilient is reported too.
pub fn outage_goals(all: &[VariantSummary]) -> Vec<Verdict> {
    let mut out = Vec::new();
    let naive = ran(all, "naive").map(|s| s.upstream_attempts);
    for name in ["resilient-breaker", "resilient"] {
        let Some(v) = find(all, name) else { continue };
        let Some(s) = slow(v) else {
            out.push(missing(name, all));
            continue;
        };
        let share = naive.map(|n| s.upstream_attempts as f64 / n.max(1) as f64);
        out.push(Verdict {
            what: format!("{name}: attempts during the outage ≤ 5 % of naive's"),
            measured: format!(
                "{} vs naive's {} ({})",
                s.upstream_attempts,
                naive.map(|n| n.to_string()).unwrap_or("–".into()),
                share
                    .map(|x| format!("{:.1} %", 100.0 * x))
                    .unwrap_or("naive did not run".into())
            ),
            met: share.is_some_and(|x| x <= 0.05),
        });
        // `open_for` is drawn ± OPEN_JITTER per opening (so a fleet's hosts do not probe in
        // step): a breaker that reopened just before the return stays open up to its longest.
        let open_for = BREAKER_OPEN_FOR_S * (1.0 + resilient_core::breaker::OPEN_JITTER);
        let limit = 1.0
            + if name == "resilient-breaker" {
                open_for
            } else {
                0.0
            };
        let within = if name == "resilient-breaker" {
            format!("1 s + open_for ({BREAKER_OPEN_FOR_S:.0} s, at most {open_for:.0} s with its jitter)")
        } else {
            "1 s".to_string()
        };
        out.push(Verdict {
            what: format!("{name}: serves again within {within} of the upstream's return"),
            measured: format!(
                "first request answered live sent at {}, recovery (95 % goodput over 2 s) {}",
                v.first_live_after_heal_s
                    .map(|x| format!("{x:.2} s"))
                    .unwrap_or("never".into()),
                v.recovery_s
                    .map(|x| format!("{x:.2} s"))
                    .unwrap_or("not within the phase".into())
            ),
            met: v.recovery_s.is_some_and(|x| x <= limit),
        });
    }
    if out.is_empty() {
        out.push(missing("resilient-breaker", all));
    }
    out
}

/// `mixed`: resilient's web goodput ≥ 90 % of what the reserved slots serve and /health p99
/// ≤ 20 ms, while Laravel's web requests are refused by the flood; the background work still
/// gets the unreserved slots.
pub fn mixed_goals(p: &Params, all: &[VariantSummary]) -> Vec<Verdict> {
    let mut out = Vec::new();
    let reserved = p.reserved_capacity_rps();
    let unreserved = (p.capacity - p.reserve) as f64 * 1000.0 / p.slow_ms as f64;
    match ran(all, "resilient") {
        Some(s) => {
            out.push(goodput_share(
                s,
                0.9,
                reserved,
                format!(
                    "resilient: web goodput ≥ 90 % of what the {} reserved slots serve ({:.1}/s of {reserved:.1}/s)",
                    p.reserve,
                    0.9 * reserved
                ),
            ));
            out.push(health_p99_within(s, 20.0, "resilient: /health p99 ≤ 20 ms"));
            out.push(Verdict {
                what: format!(
                    "resilient: the background work still gets the {} unreserved slots (≥ 90 % of {unreserved:.1}/s)",
                    p.capacity - p.reserve
                ),
                measured: format!(
                    "{:.1}/s background calls live ({:.0} % of {unreserved:.1}/s; {} attempts, refusals {:?})",
                    s.bg_live_rps,
                    100.0 * s.bg_live_rps / unreserved,
                    s.bg_attempts,
                    s.bg_fallback_by_reason
                ),
                met: s.bg_live_rps >= 0.9 * unreserved,
            });
        }
        None => out.push(missing("resilient", all)),
    }
    match ran(all, "laravel") {
        Some(s) => {
            let refused = s
                .fallback_by_reason
                .get("funnel_full")
                .copied()
                .unwrap_or(0);
            out.push(Verdict {
                what: "laravel: web requests refused by the flood (funnel_full for most of them)".into(),
                measured: format!(
                    "{refused} of {} refused (funnel_full), web goodput {:.1}/s, background {:.1}/s live",
                    s.sent, s.goodput_rps, s.bg_live_rps
                ),
                met: refused * 2 > s.sent,
            });
        }
        None => out.push(missing("laravel", all)),
    }
    out
}

/// The CI properties of the current scenario (only robust ones).
pub fn scenario_check(p: &Params, all: &[VariantSummary]) -> Vec<Verdict> {
    let mut out = match p.scenario {
        Scenario::Slowdown => return ci_check(p, all),
        Scenario::CapacityShift if p.quick => crate::capacity_shift::check(all),
        Scenario::CapacityShift => crate::capacity_shift::goals(all),
        Scenario::TwoHosts => crate::two_hosts::check(p, all),
        Scenario::Errors => {
            let mut v = Vec::new();
            let naive = ran(all, "naive").map(|s| s.amplification);
            match ran(all, "resilient") {
                Some(s) => {
                    v.push(Verdict {
                        what: "errors: resilient amplification ≤ 1.3".into(),
                        measured: format!("{:.3}", s.amplification),
                        met: s.amplification <= 1.3,
                    });
                    v.push(amplification_below_naive(
                        "errors: resilient amplification < naive's",
                        s.amplification,
                        naive,
                    ));
                    // Sending less passes both above (refusals, no retry at all): the client
                    // must still retry within its budget and serve what the upstream admits.
                    v.push(Verdict {
                        what: "errors: resilient retries within its budget (amplification > 1)"
                            .into(),
                        measured: amp(s),
                        met: s.amplification > 1.0,
                    });
                    let admitted = p.rate * (1.0 - p.error_ratio);
                    v.push(goodput_share(
                        s,
                        0.5,
                        admitted,
                        format!(
                            "errors: resilient goodput ≥ 50 % of the {admitted:.0}/s the upstream admits"
                        ),
                    ));
                }
                None => v.push(missing("resilient", all)),
            }
            v.push(Verdict {
                what: "errors: naive retries (amplification ≥ 1.2)".into(),
                measured: naive
                    .map(|a| format!("{a:.3}"))
                    .unwrap_or("naive did not run".into()),
                met: naive.is_some_and(|a| a >= 1.2),
            });
            v
        }
        Scenario::Outage => {
            let mut v = Vec::new();
            let naive = ran(all, "naive").map(|s| s.upstream_attempts);
            let r = ["resilient", "resilient-breaker"]
                .iter()
                .find_map(|n| find(all, n).and_then(|x| slow(x).map(|s| (x, s))));
            match r {
                Some((x, s)) => {
                    v.push(Verdict {
                        what: format!(
                            "outage: {} sends fewer attempts than naive during the outage",
                            x.name
                        ),
                        measured: format!(
                            "{} vs {}",
                            s.upstream_attempts,
                            naive
                                .map(|n| n.to_string())
                                .unwrap_or("naive did not run".into())
                        ),
                        met: naive.is_some_and(|n| s.upstream_attempts < n),
                    });
                    let last = &x.phases[2];
                    v.push(Verdict {
                        what: format!("outage: {} serves again after the upstream returns (≥ half of the last phase live)", x.name),
                        measured: format!("{} of {} good", last.good, last.sent),
                        met: last.good * 2 >= last.sent && last.sent > 0,
                    });
                }
                None => v.push(missing("resilient", all)),
            }
            v
        }
        Scenario::Mixed => {
            let mut v = Vec::new();
            let (r, l) = (ran(all, "resilient"), ran(all, "laravel"));
            match r {
                Some(s) => {
                    v.push(goodput_share(
                        s,
                        0.5,
                        p.reserved_capacity_rps(),
                        "mixed: resilient web goodput (slow) ≥ 50 % of the reserved slots' capacity".into(),
                    ));
                    // Without `--share` the reserve is a floor for web, not a quota for the
                    // background: when the web alone fills the slow upstream the workers get
                    // nothing, by design (with it they keep the unreserved slots). Either way
                    // they must be served when the web leaves room (the normal phases).
                    let x = find(all, "resilient").map(|x| &x.phases);
                    let (live, calls) = x
                        .map(|ph| {
                            ph.iter()
                                .fold((0, 0), |a, q| (a.0 + q.bg_live, a.1 + q.bg_calls))
                        })
                        .unwrap_or((0, 0));
                    v.push(Verdict {
                        what: "mixed: resilient's background workers are served when the web leaves room (whole run)".into(),
                        measured: format!("{live} live of {calls} calls (slow phase: {} of {})", s.bg_live, s.bg_calls),
                        met: live > 0,
                    });
                    if p.share_of("resilient") {
                        // With `share` the workers keep the unreserved slots while the web wants
                        // them too (half their capacity: a bound that only catches breakage).
                        let unreserved =
                            (p.capacity - p.reserve) as f64 * 1000.0 / p.slow_ms as f64;
                        v.push(Verdict {
                            what: "mixed: with share, resilient's background workers keep the unreserved slots in the slow phase (≥ 50 % of their capacity)".into(),
                            measured: format!("{:.1}/s of {unreserved:.1}/s", s.bg_live_rps),
                            met: s.bg_live_rps >= 0.5 * unreserved,
                        });
                    }
                }
                None => v.push(missing("resilient", all)),
            }
            match l {
                Some(s) => v.push(Verdict {
                    what: "mixed: laravel's web requests are refused by the flood (funnel_full) and its web goodput is below resilient's".into(),
                    measured: format!(
                        "{} funnel_full, goodput {:.1}/s vs {}",
                        s.fallback_by_reason.get("funnel_full").copied().unwrap_or(0),
                        s.goodput_rps,
                        r.map(|r| format!("{:.1}/s", r.goodput_rps)).unwrap_or("–".into())
                    ),
                    met: s.fallback_by_reason.get("funnel_full").copied().unwrap_or(0) > 0
                        && r.is_some_and(|r| s.goodput_rps < r.goodput_rps),
                }),
                None => v.push(missing("laravel", all)),
            }
            v
        }
    };
    // /health served, every resilient page answered, and the open loop held, in every scenario.
    for v in all.iter().filter(|v| v.skipped.is_none()) {
        out.push(health_served(v));
        out.extend(no_page_errors(v));
    }
    out.extend(open_loop(p, all));
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A variant that served every request of a slow phase offered `rate` req/s, with
    /// `amplification` attempts per request.
    pub(crate) fn served_everything(name: &str, rate: f64, amplification: f64) -> VariantSummary {
        let phase = |i: usize| PhaseStats {
            phase: ["normal", "slow", "normal-again"][i].into(),
            slots: 4,
            capacity_rps: if i == 1 { 4000.0 / 120.0 } else { 200.0 },
            offered_rps: rate,
            achieved_rps: rate,
            goodput_rps: rate,
            sent: (5.0 * rate) as u64,
            good: (5.0 * rate) as u64,
            upstream_attempts: (5.0 * rate * amplification) as u64,
            amplification,
            health_sent: 25,
            health_ok: 25,
            health_p99_ms: Some(3.0),
            fpm_busy_max: Some(2),
            ..Default::default()
        };
        VariantSummary {
            name: name.into(),
            phases: (0..3).map(phase).collect(),
            recovery_s: Some(0.0),
            fpm_max_active_whole_run: Some(3),
            ..Default::default()
        }
    }

    pub(crate) fn params(args: &[&str]) -> Params {
        Params::from_args(args.iter().map(|s| s.to_string())).unwrap()
    }

    fn find_verdict<'a>(v: &'a [Verdict], what: &str) -> &'a Verdict {
        v.iter()
            .find(|x| x.what.contains(what))
            .unwrap_or_else(|| panic!("no verdict about {what:?} in {v:#?}"))
    }

    #[test]
    fn serving_all_of_a_load_below_capacity_meets_the_goodput_goal_and_check() {
        // 20 req/s against a slow upstream that serves 33.3/s: everything offered is served.
        let p = params(&["--quick", "--rate", "20"]);
        let all = [
            served_everything("naive", 20.0, 1.0),
            served_everything("resilient", 20.0, 1.0),
        ];
        let goals = all_goals(&p, &all);
        assert!(!goals[0].goodput_missed(), "{:#?}", goals[0].verdicts);
        let check = ci_check(&p, &all);
        assert!(find_verdict(&check, "resilient goodput").met, "{check:#?}");
        assert!(find_verdict(&check, "< naive's").met, "{check:#?}");
        assert!(check.iter().all(|v| v.met), "{check:#?}");
    }

    #[test]
    fn above_capacity_goodput_is_still_judged_against_the_capacity() {
        // 50 req/s offered, 20/s served of the 33.3/s the slow upstream serves: 60 %.
        let p = params(&["--quick"]);
        let mut r = served_everything("resilient", 50.0, 1.0);
        r.phases[1].goodput_rps = 20.0;
        let all = [served_everything("naive", 50.0, 2.0), r];
        assert!(all_goals(&p, &all)[0].goodput_missed());
        assert!(!find_verdict(&ci_check(&p, &all), "resilient goodput").met);
    }

    #[test]
    fn amplification_below_naive_holds_when_neither_retries() {
        let p = params(&["--quick"]);
        let check = |naive: f64, resilient: f64| {
            let all = [
                served_everything("naive", 50.0, naive),
                served_everything("resilient", 50.0, resilient),
            ];
            find_verdict(&ci_check(&p, &all), "< naive's").met
        };
        assert!(check(1.0, 1.0), "no storm in either");
        assert!(check(2.0, 1.05));
        assert!(!check(1.0, 1.2), "resilient retries while naive does not");
        assert!(!check(1.2, 1.2));
    }

    #[test]
    fn naive_against_a_shedding_upstream_settles_where_its_failures_feed_themselves() {
        let a = super::naive_against_shedding(0.3);
        let q = 1.0 - 0.7 / a;
        assert!((a - (1.0 + q + q * q)).abs() < 1e-9, "{a}");
        assert!(a > 2.0 && a < 2.2, "{a}");
        assert_eq!(super::naive_against_shedding(0.0), 1.0);
    }
}
