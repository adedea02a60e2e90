//! Issue 4's goals for the resilient variants in the slow phase (`resilient`, with a funnel wait,
//! and `resilient-failfast`, the contract's default), and the CI check (`--check`, on `resilient`
//! only): each one with the measured number, met or missed. Nothing here is tuned to pass.

use crate::analysis::VariantSummary;
use crate::params::{is_resilient, Params, RESILIENT_VARIANTS};

/// Issue 4's goals evaluated for one resilient variant.
#[derive(Debug, Clone, serde::Serialize)]
pub struct VariantGoals {
    pub variant: String,
    pub verdicts: Vec<Verdict>,
}

impl VariantGoals {
    /// "Goals for resilient (funnel wait 50 ms, slow phase)".
    pub fn title(&self, p: &Params) -> String {
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

#[derive(Debug, Clone, serde::Serialize)]
pub struct Verdict {
    pub what: String,
    pub measured: String,
    pub met: bool,
}

fn slow(v: &VariantSummary) -> Option<&crate::analysis::PhaseStats> {
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

/// The goals of issue 4 for one resilient variant (slow phase unless said otherwise).
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
    let cap = p.slow_capacity_rps();
    vec![
        Verdict { what: "amplification ≤ 1.1".into(), measured: format!("{:.3} ({} attempts / {} requests)", s.amplification, s.upstream_attempts, s.sent), met: s.amplification <= 1.1 },
        Verdict {
            what: format!("goodput ≥ 90 % of upstream capacity ({:.1}/s of {cap:.1}/s)", 0.9 * cap),
            measured: format!(
                "{:.1}/s ({:.0} % of capacity; upstream slots busy {:.0} % of the phase; a freed slot idled {} (p50) before the next attempt took it)",
                s.goodput_rps,
                100.0 * s.goodput_rps / cap,
                100.0 * s.upstream_utilization,
                s.free_slot_idle_p50_ms.map(|x| format!("{x:.1} ms")).unwrap_or("?".into())
            ),
            met: s.goodput_rps >= 0.9 * cap,
        },
        Verdict { what: "/health p99 ≤ 50 ms".into(), measured: ms(s.health_p99_ms), met: s.health_p99_ms.is_some_and(|x| x <= 50.0) },
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
    ]
}

/// Proof of the open loop: achieved send rate within 5 % of the target in the slow phase.
pub fn open_loop(p: &Params, all: &[VariantSummary]) -> Vec<Verdict> {
    all.iter()
        .filter_map(|v| slow(v).map(|s| (v, s)))
        .map(|(v, s)| Verdict {
            what: format!(
                "{}: achieved rate within 5 % of {:.0}/s (slow phase)",
                v.name, p.rate
            ),
            measured: format!(
                "{:.2}/s, send lag p99 {:.1} ms",
                s.achieved_rps, s.send_lag_p99_ms
            ),
            met: (s.achieved_rps - p.rate).abs() <= 0.05 * p.rate,
        })
        .collect()
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
            out.push(Verdict {
                what: "resilient amplification (slow) < naive's".into(),
                measured: format!(
                    "{:.3} vs {}",
                    s.amplification,
                    naive_amp
                        .map(|a| format!("{a:.3}"))
                        .unwrap_or("naive did not run".into())
                ),
                met: naive_amp.is_some_and(|n| s.amplification < n),
            });
        }
        None => out.push(Verdict {
            what: "resilient variant ran".into(),
            measured: find(all, "resilient")
                .and_then(|r| r.skipped.clone())
                .unwrap_or("not in this run".into()),
            met: false,
        }),
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
        let (sent, ok): (u64, u64) = v
            .phases
            .iter()
            .fold((0, 0), |a, s| (a.0 + s.health_sent, a.1 + s.health_ok));
        // The storm may starve /health; it must still be served at some point. The resilient
        // variants must serve nearly all.
        let need = if is_resilient(&v.name) {
            (sent as f64 * 0.9).ceil() as u64
        } else {
            1
        };
        out.push(Verdict {
            what: format!("{}: /health served (≥ {need})", v.name),
            measured: format!("{ok} of {sent}"),
            met: ok >= need.max(1),
        });
    }
    out.extend(open_loop(p, all));
    out
}
