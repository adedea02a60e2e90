//! PNG timelines with plotters: the variants overlaid on shared axes, one panel per
//! metric (offered vs goodput, upstream attempts/s, upstream in flight, /health p99, FPM busy
//! workers), the slow phase shaded. Variants that measure the same (laravel and
//! resilient-failfast often do) must stay visible: wider lines are drawn first, so a line on
//! top of another leaves a coloured edge, and resilient-failfast is dashed. Log panels plot log10 of the value on a linear axis with
//! labels written back as values, so every panel shares one code path.

use std::path::Path;

use plotters::prelude::*;

use crate::analysis::{Bin, VariantSummary, BIN_S};
use crate::params::Params;
use crate::scenario::Scenario;

/// A line already drawn in a panel: its variant's index, its points and its look.
type DrawnLine = (usize, Vec<(f64, f64)>, LineLook);
/// One series of the attempts plot: its label, colour, width and value per bin.
type BinSeries = (&'static str, RGBColor, u32, fn(&Bin) -> f64);

/// naive red, laravel blue, resilient green, resilient-failfast orange.
const PALETTE: [RGBColor; 4] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
];
const SLOW_SHADE: RGBColor = RGBColor(255, 236, 214);

/// How a variant's line looks: colour, width, dashed.
#[derive(Clone, Copy)]
struct LineLook {
    color: RGBColor,
    width: u32,
    dashed: bool,
}

fn look_of(name: &str, i: usize) -> LineLook {
    let (color, width, dashed) = match name {
        "naive" => (PALETTE[0], 2, false),
        "laravel" => (PALETTE[1], 6, false),
        "resilient" => (PALETTE[2], 4, false),
        "resilient-failfast" => (PALETTE[3], 2, true),
        "resilient-breaker" => (RGBColor(148, 103, 189), 2, true),
        _ => (PALETTE[i % PALETTE.len()], 2, false),
    };
    LineLook {
        color,
        width,
        dashed,
    }
}

/// A plot of one scenario's variants into a PNG.
pub type PlotFn = fn(&Params, &[VariantSummary], &Path) -> Result<(), String>;

struct Panel {
    title: String,
    y_desc: &'static str,
    log: bool,
    value: fn(&Bin) -> Option<f64>,
    /// A horizontal reference line: (label, value, only in the slow phase).
    reference: Option<(String, f64, bool)>,
    offered: bool,
    legend: SeriesLabelPosition,
}

fn panels(p: &Params) -> Vec<Panel> {
    let slow = p.bad_is_slow();
    let goodput_ref = if p.scenario.has_background() {
        Some((
            format!(
                "reserved slots' capacity when slow {:.1}/s",
                p.reserved_capacity_rps()
            ),
            p.reserved_capacity_rps(),
            true,
        ))
    } else if slow {
        Some((
            format!("upstream capacity when slow {:.1}/s", p.slow_capacity_rps()),
            p.slow_capacity_rps(),
            true,
        ))
    } else {
        None
    };
    vec![
        Panel {
            title: format!(
                "/checkout: offered (grey) vs goodput (live within {:.1} s), req/s",
                p.good_within_s
            ),
            y_desc: "req/s",
            log: false,
            value: |b| Some(b.goodput_rps),
            reference: goodput_ref,
            offered: true,
            legend: SeriesLabelPosition::LowerLeft,
        },
        Panel {
            title: "upstream attempts arriving from the web page, per second".into(),
            y_desc: "attempts/s",
            log: false,
            value: |b| Some(b.upstream_attempts_rps),
            reference: slow.then(|| ("capacity when slow".into(), p.slow_capacity_rps(), true)),
            offered: true,
            legend: SeriesLabelPosition::UpperLeft,
        },
        Panel {
            title: "upstream in flight (in service + queued), max per bin, log scale".into(),
            y_desc: "requests",
            log: true,
            value: |b| Some(b.upstream_in_flight_max as f64),
            reference: Some((format!("{} slots", p.capacity), p.capacity as f64, false)),
            offered: false,
            legend: SeriesLabelPosition::UpperLeft,
        },
        Panel {
            title: "/health p99 latency (2 s window; unanswered = top), log scale".into(),
            y_desc: "ms",
            log: true,
            value: |b| b.health_p99_ms,
            reference: Some(("50 ms goal".into(), 50.0, false)),
            offered: false,
            legend: SeriesLabelPosition::UpperLeft,
        },
        Panel {
            title: "php-fpm busy workers (max per bin)".into(),
            y_desc: "workers",
            log: false,
            value: |b| b.fpm_busy_max.map(|x| x as f64),
            reference: Some((format!("{} workers", p.workers), p.workers as f64, false)),
            offered: false,
            legend: SeriesLabelPosition::MiddleLeft,
        },
    ]
}

fn tf(log: bool, v: f64) -> f64 {
    if log {
        v.max(1.0).log10()
    } else {
        v
    }
}

/// Top of the y axis for a panel: the same for every variant (shared axes).
fn y_top(panel: &Panel, ran: &[&VariantSummary]) -> f64 {
    let mut ymax = 1.0f64;
    for v in ran {
        for b in &v.bins {
            if let Some(x) = (panel.value)(b).filter(|x| x.is_finite()) {
                ymax = ymax.max(x);
            }
            if panel.offered {
                ymax = ymax.max(b.offered_rps);
            }
        }
    }
    if let Some((_, r, _)) = &panel.reference {
        ymax = ymax.max(*r);
    }
    tf(panel.log, ymax) * 1.1 + if panel.log { 0.1 } else { 0.0 }
}

fn header(
    area: &DrawingArea<BitMapBackend, plotters::coord::Shift>,
    p: &Params,
    what: &str,
) -> Result<(), String> {
    let bad = match p.scenario {
        Scenario::Slowdown => format!("{}→{}→{} ms", p.normal_ms, p.slow_ms, p.normal_ms),
        Scenario::TwoHosts => format!(
            "{}→{}→{} ms, 2 hosts (php-fpm each) behind nginx",
            p.normal_ms, p.slow_ms, p.normal_ms
        ),
        Scenario::Errors => format!(
            "{} ms, {:.0} % 503 in the middle phase",
            p.normal_ms,
            100.0 * p.error_ratio
        ),
        Scenario::Outage => format!("{} ms, all 503 at once in the middle phase", p.normal_ms),
        Scenario::Mixed => format!(
            "{}→{}→{} ms, {} background workers, reserve {}",
            p.normal_ms, p.slow_ms, p.normal_ms, p.bg_workers, p.reserve
        ),
        Scenario::CapacityShift => p.phase_names().join(" → ") + " (slots@service)",
    };
    area.draw_text(
        &format!(
            "Lab `{}`{what}: {} req/s open loop, upstream {} slots {bad}, {} FPM workers, deadline {} ms ({} phase shaded)",
            p.scenario.name(), p.rate, p.capacity, p.workers, p.deadline_ms, p.scenario.bad_phase()
        ),
        &("sans-serif", 24).into_font().color(&BLACK),
        (20, 22),
    )
    .map_err(|e| e.to_string())
}

/// The variants overlaid, one panel per metric.
pub fn timelines(p: &Params, all: &[VariantSummary], path: &Path) -> Result<(), String> {
    let ran: Vec<&VariantSummary> = all
        .iter()
        .filter(|v| v.skipped.is_none() && !v.bins.is_empty())
        .collect();
    if ran.is_empty() {
        return Err("nothing to plot".into());
    }
    let panels = panels(p);
    let (w, h) = (1500u32, 360 * panels.len() as u32 + 70);
    let root = BitMapBackend::new(path, (w, h)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (head, body) = root.split_vertically(70);
    header(&head, p, "")?;
    let areas = body.split_evenly((panels.len(), 1));
    for (panel, area) in panels.iter().zip(areas.iter()) {
        draw_panel(p, panel, area, &ran, y_top(panel, &ran), &panel.title, true)?;
    }
    root.present()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(())
}

/// One column per variant, one row per metric, the same axes along each row.
pub fn grid(p: &Params, all: &[VariantSummary], path: &Path) -> Result<(), String> {
    let ran: Vec<&VariantSummary> = all
        .iter()
        .filter(|v| v.skipped.is_none() && !v.bins.is_empty())
        .collect();
    if ran.is_empty() {
        return Err("nothing to plot".into());
    }
    let panels = panels(p);
    let (w, h) = (700 * ran.len() as u32, 330 * panels.len() as u32 + 70);
    let root = BitMapBackend::new(path, (w, h)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (head, body) = root.split_vertically(70);
    header(&head, p, " by variant")?;
    let areas = body.split_evenly((panels.len(), ran.len()));
    for (r, panel) in panels.iter().enumerate() {
        let top = y_top(panel, &ran);
        for (c, v) in ran.iter().enumerate() {
            let short = panel.title.split(',').next().unwrap_or(&panel.title);
            draw_panel(
                p,
                panel,
                &areas[r * ran.len() + c],
                &[*v],
                top,
                &format!("{}: {short}", v.name),
                false,
            )?;
        }
    }
    root.present()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(())
}

fn draw_panel(
    p: &Params,
    panel: &Panel,
    area: &DrawingArea<BitMapBackend, plotters::coord::Shift>,
    ran: &[&VariantSummary],
    ytop: f64,
    title: &str,
    // Several variants on the same axes: widths and dashes keep equal lines apart. Alone in
    // its panel, a variant gets a plain solid line.
    overlay: bool,
) -> Result<(), String> {
    let xmax = p.total_secs();
    {
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..xmax, 0f64..ytop)
            .map_err(|e| e.to_string())?;
        let log = panel.log;
        chart
            .configure_mesh()
            .x_desc("seconds since the load started")
            .y_desc(panel.y_desc)
            .y_label_formatter(&|y| {
                if log {
                    let v = 10f64.powf(*y);
                    if v >= 100.0 {
                        format!("{:.0}", v)
                    } else {
                        format!("{:.1}", v)
                    }
                } else {
                    format!("{:.0}", y)
                }
            })
            .label_style(("sans-serif", 15))
            .axis_desc_style(("sans-serif", 16))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(p.phase_secs, 0.0), (2.0 * p.phase_secs, ytop)],
                SLOW_SHADE.filled(),
            )))
            .map_err(|e| e.to_string())?;
        if let Some((label, r, slow_only)) = &panel.reference {
            let (x0, x1) = if *slow_only {
                (p.phase_secs, 2.0 * p.phase_secs)
            } else {
                (0.0, xmax)
            };
            let y = tf(log, *r);
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(x0, y), (x1, y)],
                    BLACK.mix(0.6).stroke_width(1),
                )))
                .map_err(|e| e.to_string())?
                .label(label.clone())
                .legend(|(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], BLACK.mix(0.6).stroke_width(1))
                });
        }
        if panel.offered {
            let pts: Vec<(f64, f64)> = ran[0]
                .bins
                .iter()
                .map(|b| (b.t_s + BIN_S / 2.0, b.offered_rps))
                .collect();
            chart
                .draw_series(LineSeries::new(
                    pts,
                    RGBColor(150, 150, 150).stroke_width(3),
                ))
                .map_err(|e| e.to_string())?
                .label("offered")
                .legend(|(x, y)| {
                    PathElement::new(
                        vec![(x, y), (x + 20, y)],
                        RGBColor(150, 150, 150).stroke_width(3),
                    )
                });
        }
        // Widest first, so that narrower lines on top leave the wider ones' edges visible; the
        // legend keeps the variants' own order.
        let mut order: Vec<(usize, LineLook)> = ran
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let look = look_of(&v.name, i);
                (
                    i,
                    if overlay {
                        look
                    } else {
                        LineLook {
                            width: 3,
                            dashed: false,
                            ..look
                        }
                    },
                )
            })
            .collect();
        order.sort_by_key(|(i, look)| (std::cmp::Reverse(look.width), *i));
        let mut drawn: Vec<DrawnLine> = Vec::new();
        for (i, look) in order {
            let pts: Vec<(f64, f64)> = ran[i]
                .bins
                .iter()
                .filter_map(|b| {
                    (panel.value)(b).map(|y| {
                        (
                            b.t_s + BIN_S / 2.0,
                            if y.is_finite() { tf(log, y) } else { ytop },
                        )
                    })
                })
                .collect();
            let style = look.color.stroke_width(look.width);
            if look.dashed {
                chart
                    .draw_series(DashedLineSeries::new(pts.clone(), 9, 5, style))
                    .map_err(|e| e.to_string())?;
            } else {
                chart
                    .draw_series(LineSeries::new(pts.clone(), style))
                    .map_err(|e| e.to_string())?;
            }
            drawn.push((i, pts, look));
        }
        // Legend entries, in the variants' order (empty series that only carry the label).
        drawn.sort_by_key(|d| d.0);
        for (i, _, look) in drawn {
            let style = look.color.stroke_width(look.width.min(4));
            chart
                .draw_series(std::iter::empty::<PathElement<(f64, f64)>>())
                .map_err(|e| e.to_string())?
                .label(ran[i].name.clone())
                .legend(
                    move |(x, y)| -> DynElement<'static, BitMapBackend, (i32, i32)> {
                        if look.dashed {
                            plotters::element::DashedPathElement::new(
                                vec![(x, y), (x + 24, y)],
                                7,
                                4,
                                style,
                            )
                            .into_dyn()
                        } else {
                            PathElement::new(vec![(x, y), (x + 24, y)], style).into_dyn()
                        }
                    },
                );
        }
        chart
            .configure_series_labels()
            .position(panel.legend.clone())
            .label_font(("sans-serif", 15))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .draw()
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Attempts/s at the upstream, one panel per variant on the same axes: the web page's attempts
/// against the offered load (an amplification above 1 shows as a line above the grey one), the
/// background workers' attempts apart, and for a variant with a circuit breaker a lane along
/// the bottom of its panel: the breaker's state per bin as the extension's metrics show it
/// (sampled from the segment every 250 ms; red open, orange half-open).
pub fn attempts(p: &Params, all: &[VariantSummary], path: &Path) -> Result<(), String> {
    let ran: Vec<&VariantSummary> = all
        .iter()
        .filter(|v| v.skipped.is_none() && !v.bins.is_empty())
        .collect();
    if ran.is_empty() {
        return Err("nothing to plot".into());
    }
    let (w, h) = (1500u32, 300 * ran.len() as u32 + 110);
    let root = BitMapBackend::new(path, (w, h)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (head, body) = root.split_vertically(70);
    header(&head, p, ": upstream attempts/s per variant")?;
    let (body, foot) = body.split_vertically(h - 70 - 40);
    let lane = format!(
        "Lane at the bottom of a panel: the circuit breaker of `shipping` per {} s bin, from Resilient's own metrics \
         (red: open at some sample of the bin, orange: half-open, none: closed or no breaker).",
        crate::analysis::BIN_S
    );
    foot.draw_text(
        &lane,
        &("sans-serif", 17).into_font().color(&BLACK.mix(0.7)),
        (20, 10),
    )
    .map_err(|e| e.to_string())?;
    let ymax = ran
        .iter()
        .flat_map(|v| v.bins.iter())
        .map(|b| {
            b.upstream_attempts_rps
                .max(b.bg_attempts_rps)
                .max(b.offered_rps)
        })
        .fold(1.0f64, f64::max)
        * 1.1;
    let xmax = p.total_secs();
    let areas = body.split_evenly((ran.len(), 1));
    for (i, (v, area)) in ran.iter().zip(areas.iter()).enumerate() {
        let look = look_of(&v.name, i);
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("{}: upstream attempts arriving per second", v.name),
                ("sans-serif", 20),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..xmax, 0f64..ymax)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("seconds since the load started")
            .y_desc("attempts/s")
            .label_style(("sans-serif", 15))
            .axis_desc_style(("sans-serif", 16))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(p.phase_secs, 0.0), (2.0 * p.phase_secs, ymax)],
                SLOW_SHADE.filled(),
            )))
            .map_err(|e| e.to_string())?;
        if v.bins
            .iter()
            .any(|b| matches!(b.breaker, Some("open" | "half_open")))
        {
            let lane = ymax * 0.06;
            chart
                .draw_series(v.bins.iter().filter_map(|b| {
                    let color = match b.breaker? {
                        "open" => RGBColor(214, 39, 40),
                        "half_open" => RGBColor(255, 127, 14),
                        _ => return None,
                    };
                    Some(Rectangle::new(
                        [(b.t_s, 0.0), (b.t_s + BIN_S, lane)],
                        color.mix(0.8).filled(),
                    ))
                }))
                .map_err(|e| e.to_string())?
                .label("breaker open (red) / half-open (orange)")
                .legend(|(x, y)| {
                    Rectangle::new(
                        [(x, y - 5), (x + 20, y + 5)],
                        RGBColor(214, 39, 40).filled(),
                    )
                });
        }
        let grey = RGBColor(150, 150, 150);
        let series: [BinSeries; 3] = [
            ("web requests offered", grey, 3, |b| b.offered_rps),
            ("web attempts", look.color, 3, |b| b.upstream_attempts_rps),
            ("background attempts", BLACK, 2, |b| b.bg_attempts_rps),
        ];
        for (k, (label, color, width, f)) in series.into_iter().enumerate() {
            if k == 2 && v.bins.iter().all(|b| b.bg_attempts_rps == 0.0) {
                continue;
            }
            let pts: Vec<(f64, f64)> = v.bins.iter().map(|b| (b.t_s + BIN_S / 2.0, f(b))).collect();
            chart
                .draw_series(LineSeries::new(pts, color.stroke_width(width)))
                .map_err(|e| e.to_string())?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(width))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font(("sans-serif", 15))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .draw()
            .map_err(|e| e.to_string())?;
    }
    root.present()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(())
}
