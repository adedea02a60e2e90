//! Scenario `capacity-shift`: the upstream's capacity changes under the same load, and a fixed
//! funnel limit is right in at most some phases. Its goals (a learned limit that follows the
//! capacity), its per-phase table (served vs capacity, the upstream's queue) and the plot of the learned
//! limit beside the upstream's true slot count.

use std::fmt::Write;
use std::path::Path;

use plotters::prelude::*;

use crate::analysis::{PhaseStats, VariantSummary};
use crate::goals::Verdict;
use crate::params::Params;

/// Served (goodput) / what can be served.
fn served_share(ps: &PhaseStats) -> f64 {
    if ps.servable_rps() > 0.0 {
        ps.goodput_rps / ps.servable_rps()
    } else {
        0.0
    }
}

/// The fixed limit a variant was tuned for: 4 is right where the upstream has 4 slots, 16 in
/// no phase (it is too high everywhere).
fn tuned_for(variant: &str, ps: &PhaseStats) -> bool {
    match variant {
        "resilient" => ps.slots == 4,
        _ => false,
    }
}

/// resilient-adaptive's run, or the verdict that it did not run.
fn adaptive_run(all: &[VariantSummary]) -> Result<&VariantSummary, Verdict> {
    all.iter()
        .find(|v| v.name == "resilient-adaptive" && v.skipped.is_none())
        .ok_or_else(|| Verdict {
            what: "capacity-shift: resilient-adaptive ran".into(),
            measured: "did not run".into(),
            met: false,
        })
}

/// resilient-adaptive serves at least `min` (a share) of what the phase can serve.
fn served_at_least(ps: &PhaseStats, min: f64) -> Verdict {
    let share = served_share(ps);
    Verdict {
        what: format!(
            "capacity-shift {}: resilient-adaptive serves ≥ {:.0} % of capacity",
            ps.phase,
            100.0 * min
        ),
        measured: format!(
            "{:.1}/s of {:.1}/s ({:.0} %)",
            ps.goodput_rps,
            ps.servable_rps(),
            100.0 * share
        ),
        met: share >= min,
    }
}

/// The upstream's queue p99 in the phase is within its slots; the measure says how many of the
/// phase's events were over them, and how many the p99 allows (after a fall in capacity, more
/// than any limit learned from answers can avoid: docs/adaptive-limit.md).
fn queue_within_slots(ps: &PhaseStats) -> Verdict {
    let q = ps.upstream_queue_p99.unwrap_or(0);
    let (over, all) = ps.upstream_queue_over_slots;
    Verdict {
        what: format!(
            "capacity-shift {}: upstream queue p99 ≤ its {} slots",
            ps.phase, ps.slots
        ),
        measured: format!(
            "{q} ({over} of {all} events over {}; the p99 allows {})",
            ps.slots,
            all / 100
        ),
        met: q <= ps.slots,
    }
}

/// The scenario's goals: resilient-adaptive ≥ 90 % of the capacity in every phase with the
/// upstream's queue p99 ≤ its slots, and better than each fixed limit in the phases that limit
/// was not tuned for (served, or the same served with a shorter queue).
pub fn goals(all: &[VariantSummary]) -> Vec<Verdict> {
    let adaptive = match adaptive_run(all) {
        Ok(a) => a,
        Err(missing) => return vec![missing],
    };
    let find = |n: &str| all.iter().find(|v| v.name == n && v.skipped.is_none());
    let mut out = Vec::new();
    for ps in &adaptive.phases {
        out.push(served_at_least(ps, 0.9));
        out.push(queue_within_slots(ps));
    }
    for fixed in ["resilient", "resilient-16"] {
        let Some(f) = find(fixed) else { continue };
        for (a, x) in adaptive.phases.iter().zip(&f.phases) {
            if tuned_for(fixed, x) {
                continue;
            }
            let (sa, sx) = (served_share(a), served_share(x));
            let (qa, qx) = (
                a.upstream_queue_p99.unwrap_or(0),
                x.upstream_queue_p99.unwrap_or(0),
            );
            // "Beats": serves more, or as much (within 2 %) with a shorter queue at the upstream.
            // Both serving everything without a queue (a load below every limit) is a tie,
            // shown as one: no limit can do better there.
            let tie = sa >= 0.98 && sx >= 0.98 && qa == 0 && qx == 0;
            let met = tie || sa > sx + 0.02 || (sa >= sx - 0.02 && qa < qx);
            out.push(Verdict {
                what: format!(
                    "capacity-shift {}: resilient-adaptive beats {fixed} (or ties)",
                    a.phase
                ),
                measured: format!(
                    "{}served {:.0} % vs {:.0} %, queue p99 {qa} vs {qx}",
                    if tie { "tie: " } else { "" },
                    100.0 * sa,
                    100.0 * sx
                ),
                met,
            });
        }
    }
    out
}

/// The CI properties (`--quick --check`): with 5 s phases the transitions weigh too much for
/// the scenario's goals, so only what a broken limit could not show:
/// - every phase but the fall to 2 slots ≥ 50 % served (a limit stuck at 1 serves 25 % at 4
///   slots of 120 ms, one stuck high 3 %; a working one 85–100 %). The 5 s after the fall are
///   mostly the queue the 8-slot limit left (44–89 % served in CI runs): judged by the limit;
/// - the learned limit higher where the upstream has more slots (8 @ 120 ms against 4 @ 120 ms
///   and 2 @ 120 ms);
/// - no queue at the upstream beyond its slots once the limit had a phase to learn them
///   (8 @ 120 ms, the last phase).
pub fn check(all: &[VariantSummary]) -> Vec<Verdict> {
    let adaptive = match adaptive_run(all) {
        Ok(a) => a,
        Err(missing) => return vec![missing],
    };
    // Phase 4 (`scenario::CAPACITY_SHIFT`) is the fall from 8 slots to 2.
    let mut out: Vec<Verdict> = adaptive
        .phases
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != 3)
        .map(|(_, ps)| served_at_least(ps, 0.5))
        .collect();
    // Phases 2, 3 and 4 (`scenario::CAPACITY_SHIFT`): 4, 8 and 2 slots at 120 ms.
    let learned = |i: usize| adaptive.phases.get(i).and_then(|ps| ps.learned_limit_mean);
    let (four, eight, two) = (learned(1), learned(2), learned(3));
    let shown = |x: Option<f64>| x.map_or("–".into(), |x| format!("{x:.1}"));
    out.push(Verdict {
        what: "capacity-shift: the learned limit (mean) is higher at 8 slots than at 4 and at 2"
            .into(),
        measured: format!("8: {}, 4: {}, 2: {}", shown(eight), shown(four), shown(two)),
        met: matches!((four, eight, two), (Some(f), Some(e), Some(t)) if e > f && e > t),
    });
    out.extend(
        adaptive
            .phases
            .iter()
            .skip(2)
            .step_by(2)
            .map(queue_within_slots),
    );
    out
}

/// The per-phase table: served vs capacity, queue, /health, the learned limit.
pub fn table(p: &Params, all: &[VariantSummary]) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "| phase | slots@service | capacity/s (servable: min with offered) | variant | served/s | served / servable | upstream queue p99 (max) | /checkout live p99 | /health p99 | learned limit (mean) |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|");
    let plan = p.phases();
    for (i, phase) in plan.iter().enumerate() {
        for v in all.iter().filter(|v| v.skipped.is_none()) {
            let Some(ps) = v.phases.get(i) else { continue };
            let ms = |x: Option<f64>| x.map_or("–".into(), |x| format!("{x:.0} ms"));
            let _ = writeln!(
                md,
                "| {} | {}@{} ms | {:.1} ({:.1}) | {} | {:.1} | {:.0} % | {} ({}) | {} | {} | {} |",
                i + 1,
                phase.slots,
                phase.upstream.service_ms,
                ps.capacity_rps,
                ps.servable_rps(),
                v.name,
                ps.goodput_rps,
                100.0 * served_share(ps),
                ps.upstream_queue_p99.map_or("–".into(), |q| q.to_string()),
                ps.upstream_max_queue,
                ms(ps.live_p99_ms),
                ms(ps.health_p99_ms),
                ps.learned_limit_mean
                    .map_or("–".into(), |l| format!("{l:.1}")),
            );
        }
    }
    md
}

/// The learned limit over time (every sample) beside the upstream's true slot count and the
/// fixed limits.
pub fn plot(p: &Params, all: &[VariantSummary], path: &Path) -> Result<(), String> {
    let Some(adaptive) = all
        .iter()
        .find(|v| v.name == "resilient-adaptive" && !v.learned_limit.is_empty())
    else {
        return Err("no learned limit sampled".into());
    };
    let xmax = p.total_secs();
    let ymax = adaptive
        .learned_limit
        .iter()
        .map(|x| x.1)
        .fold(17.0f64, f64::max)
        + 1.0;
    let root = BitMapBackend::new(path, (1500, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "capacity-shift: the learned funnel limit vs the upstream's slots ({})",
                p.phase_names().join(" → ")
            ),
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("seconds since the load started")
        .y_desc("concurrent attempts")
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(|e| e.to_string())?;
    let mut truth = Vec::new();
    for (i, ph) in p.phases().iter().enumerate() {
        let (a, b) = (i as f64 * p.phase_secs, (i + 1) as f64 * p.phase_secs);
        truth.push((a, ph.slots as f64));
        truth.push((b, ph.slots as f64));
    }
    let black = BLACK.stroke_width(3);
    chart
        .draw_series(LineSeries::new(truth, black))
        .map_err(|e| e.to_string())?
        .label("upstream slots (true capacity)")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], black));
    for (label, limit, color) in [
        ("resilient: fixed 4", 4.0, RGBColor(44, 160, 44)),
        ("resilient-16: fixed 16", 16.0, RGBColor(255, 127, 14)),
    ] {
        let style = color.stroke_width(2);
        chart
            .draw_series(DashedLineSeries::new(
                vec![(0.0, limit), (xmax, limit)],
                8,
                6,
                style,
            ))
            .map_err(|e| e.to_string())?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    let blue = RGBColor(31, 119, 180).stroke_width(3);
    chart
        .draw_series(LineSeries::new(adaptive.learned_limit.clone(), blue))
        .map_err(|e| e.to_string())?
        .label("resilient-adaptive: learned limit (read from the segment every 250 ms)")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], blue));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font(("sans-serif", 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .draw()
        .map_err(|e| e.to_string())?;
    root.present()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// resilient-adaptive's phases as `(slots, capacity/s, served/s, queue p99, learned mean)`.
    fn adaptive(phases: &[(u32, f64, f64, u32, f64)]) -> Vec<VariantSummary> {
        let phases = phases
            .iter()
            .map(|&(slots, capacity_rps, goodput_rps, q, l)| PhaseStats {
                phase: format!("{slots}slots"),
                slots,
                capacity_rps,
                offered_rps: 50.0,
                goodput_rps,
                upstream_queue_p99: Some(q),
                learned_limit_mean: Some(l),
                ..Default::default()
            })
            .collect();
        vec![VariantSummary {
            name: "resilient-adaptive".into(),
            phases,
            ..Default::default()
        }]
    }

    fn missed(v: &[Verdict]) -> Vec<&str> {
        v.iter()
            .filter(|v| !v.met)
            .map(|v| v.what.as_str())
            .collect()
    }

    #[test]
    fn the_ci_check_wants_a_limit_that_follows_the_slots() {
        // A quick run in CI as measured: the 2-slot phase only 44 % served, its queue over 2.
        let good = adaptive(&[
            (4, 200.0, 50.0, 0, 3.2),
            (4, 33.3, 28.7, 4, 5.1),
            (8, 66.7, 49.0, 0, 9.3),
            (2, 16.7, 7.3, 8, 6.9),
            (4, 200.0, 50.0, 0, 3.4),
        ]);
        assert_eq!(missed(&check(&good)), Vec::<&str>::new());
        // A limit stuck where it started: lower at 8 slots than at 4.
        let stuck = adaptive(&[
            (4, 200.0, 50.0, 0, 3.2),
            (4, 33.3, 29.4, 4, 5.2),
            (8, 66.7, 33.0, 0, 5.0),
            (2, 16.7, 10.8, 8, 5.5),
            (4, 200.0, 50.0, 0, 3.4),
        ]);
        assert_eq!(
            missed(&check(&stuck)),
            ["capacity-shift: the learned limit (mean) is higher at 8 slots than at 4 and at 2"]
        );
        // A limit that overshoots: a queue at the upstream with 8 slots, a phase half lost.
        let high = adaptive(&[
            (4, 200.0, 50.0, 0, 3.2),
            (4, 33.3, 1.0, 12, 12.0),
            (8, 66.7, 49.8, 9, 16.0),
            (2, 16.7, 10.8, 8, 5.5),
            (4, 200.0, 50.0, 0, 3.4),
        ]);
        assert_eq!(
            missed(&check(&high)),
            [
                "capacity-shift 4slots: resilient-adaptive serves ≥ 50 % of capacity",
                "capacity-shift 8slots: upstream queue p99 ≤ its 8 slots"
            ]
        );
        assert!(!check(&[]).iter().all(|v| v.met), "not run: missed");
    }
}
