//! The report: a terminal table, lab/out/report.md, and the raw series (CSV + JSON) in the run
//! directory. Rows are metrics, columns are variants, one block per phase.

use std::fmt::Write as _;
use std::path::Path;

use crate::analysis::{PhaseStats, VariantSummary};
use crate::experiment::VariantRun;
use crate::goals::{VariantGoals, Verdict};
use crate::loadgen::Outcome;
use crate::params::Params;
use crate::scenario::{ErrorModel, Scenario};

fn f1(v: Option<f64>) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x:.1}"),
        Some(_) => "∞".into(),
        None => "–".into(),
    }
}

fn opt(v: Option<u32>) -> String {
    v.map(|x| x.to_string()).unwrap_or_else(|| "?".into())
}

fn reasons(m: &std::collections::BTreeMap<String, u64>) -> String {
    if m.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = m.iter().map(|(k, v)| format!("{k} {v}")).collect();
    format!(" ({})", parts.join(", "))
}

/// (metric name, value per phase stats) rows of one block.
fn rows(p: &Params, s: &PhaseStats, last: bool, v: &VariantSummary) -> Vec<(String, String)> {
    let mut r = vec![
        (
            "offered / achieved req/s".into(),
            format!("{:.1} / {:.1}", s.offered_rps, s.achieved_rps),
        ),
        (
            format!("goodput req/s (live ≤ {:.1} s)", p.good_within_s),
            format!("{:.1}", s.goodput_rps),
        ),
        ("live but late".into(), s.live_late.to_string()),
        (
            "fallback (fast refusals etc.)".into(),
            format!("{}{}", s.fallback, reasons(&s.fallback_by_reason)),
        ),
        (
            "errors".into(),
            format!("{}{}", s.errors, reasons(&s.errors_by_kind)),
        ),
        (
            "amplification (attempts/requests)".into(),
            format!(
                "{:.2} ({}/{})",
                s.amplification, s.upstream_attempts, s.sent
            ),
        ),
        (
            "web calls reaching the upstream (attempts per call)".into(),
            format!(
                "{} ({})",
                s.web_calls_seen,
                if s.web_calls_seen > 0 {
                    format!(
                        "{:.2}",
                        s.upstream_attempts as f64 / s.web_calls_seen as f64
                    )
                } else {
                    "–".into()
                }
            ),
        ),
        (
            "upstream max in service / queue".into(),
            format!("{} / {}", s.upstream_max_in_service, s.upstream_max_queue),
        ),
        (
            "upstream slot utilization".into(),
            format!("{:.0} %", 100.0 * s.upstream_utilization),
        ),
        (
            "freed slot idles until next request (p50)".into(),
            s.free_slot_idle_p50_ms
                .map(|x| format!("{x:.1} ms"))
                .unwrap_or_else(|| "–".into()),
        ),
        (
            "live p50 / p99 ms".into(),
            format!("{} / {}", f1(s.live_p50_ms), f1(s.live_p99_ms)),
        ),
        (
            "fallback p50 / p99 ms".into(),
            format!("{} / {}", f1(s.fallback_p50_ms), f1(s.fallback_p99_ms)),
        ),
        (
            "/health p99 ms (ok/sent)".into(),
            format!(
                "{} ({}/{})",
                f1(s.health_p99_ms),
                s.health_ok,
                s.health_sent
            ),
        ),
        (
            "FPM busy max / idle min / queue max".into(),
            format!(
                "{} / {} / {}",
                opt(s.fpm_busy_max),
                opt(s.fpm_idle_min),
                opt(s.fpm_listen_queue_max)
            ),
        ),
        (
            "FPM out of idle workers".into(),
            if s.fpm_out_of_idle { "YES" } else { "no" }.into(),
        ),
    ];
    if p.scenario == Scenario::Outage {
        r.push((
            "web attempts answered by the outage".into(),
            s.outage_answers.to_string(),
        ));
    }
    if p.scenario.has_background() {
        r.push((
            "background attempts at the upstream".into(),
            s.bg_attempts.to_string(),
        ));
        r.push((
            "background calls: live/s (calls, refusals)".into(),
            format!(
                "{:.1} ({}{}{})",
                s.bg_live_rps,
                s.bg_calls,
                reasons(&s.bg_fallback_by_reason),
                if s.bg_errors > 0 {
                    format!(", {} errors", s.bg_errors)
                } else {
                    String::new()
                }
            ),
        ));
    }
    if last {
        r.push((
            "first request after healing answered live (sent at)".into(),
            v.first_live_after_heal_s
                .map(|x| format!("{x:.2} s"))
                .unwrap_or_else(|| "never".into()),
        ));
        r.push((
            "recovery after healing".into(),
            v.recovery_s
                .map(|x| format!("{x:.2} s"))
                .unwrap_or_else(|| "not within phase".into()),
        ));
    }
    r
}

/// What the upstream (and the background) does in phase `i`, for the tables' titles.
fn phase_upstream(p: &Params, i: usize) -> String {
    let bg = if p.scenario.has_background() {
        format!(", {} background workers", p.bg_workers)
    } else {
        String::new()
    };
    if p.scenario == Scenario::CapacityShift {
        let plan = &p.phases()[i];
        return format!(
            "upstream {} slots at {} ms",
            plan.slots, plan.upstream.service_ms
        );
    }
    if i != 1 {
        return format!("upstream {} ms{bg}", p.normal_ms);
    }
    match p.scenario {
        Scenario::Slowdown | Scenario::Mixed | Scenario::TwoHosts => {
            format!("upstream {} ms{bg}", p.slow_ms)
        }
        // Shed: the share answered 503 depends on what a variant sends (its retries are shed
        // too), so the heading names the rate admitted, not a share of 503s.
        Scenario::Errors => match p.error_model {
            ErrorModel::Shed => format!(
                "upstream {} ms, admits {:.0} % of the offered rate, answers the rest 503",
                p.normal_ms,
                100.0 * (1.0 - p.error_ratio)
            ),
            ErrorModel::Random => format!(
                "upstream {} ms, {:.0} % of requests answered 503 (drawn per request)",
                p.normal_ms,
                100.0 * p.error_ratio
            ),
        },
        Scenario::Outage => "upstream answers 503 at once to every request".into(),
        Scenario::CapacityShift => unreachable!("answered above"),
    }
}

/// Markdown (or plain) tables, one per phase.
pub fn tables(p: &Params, all: &[VariantSummary], markdown: bool) -> String {
    let ran: Vec<&VariantSummary> = all.iter().filter(|v| v.skipped.is_none()).collect();
    let mut out = String::new();
    for v in all.iter().filter(|v| v.skipped.is_some()) {
        let _ = writeln!(
            out,
            "{}: did not run — {}\n",
            v.name,
            v.skipped.as_deref().unwrap_or("")
        );
    }
    if ran.is_empty() {
        return out;
    }
    for i in 0..ran[0].phases.len() {
        let ph = &ran[0].phases[i];
        let title = format!(
            "{} ({:.0}–{:.0} s, {})",
            ph.phase,
            ph.from_s,
            ph.to_s,
            phase_upstream(p, i)
        );
        let table: Vec<Vec<(String, String)>> = ran
            .iter()
            .map(|v| rows(p, &v.phases[i], i == 2 && v.phases.len() == 3, v))
            .collect();
        let names: Vec<&str> = table[0].iter().map(|r| r.0.as_str()).collect();
        if markdown {
            let _ = writeln!(out, "### {title}\n");
            let _ = writeln!(
                out,
                "| metric | {} |",
                ran.iter()
                    .map(|v| v.name.as_str())
                    .collect::<Vec<_>>()
                    .join(" | ")
            );
            let _ = writeln!(out, "|---|{}", "---|".repeat(ran.len()));
            for (k, name) in names.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "| {name} | {} |",
                    table
                        .iter()
                        .map(|t| t[k].1.as_str())
                        .collect::<Vec<_>>()
                        .join(" | ")
                );
            }
            let _ = writeln!(out);
        } else {
            let w0 = names.iter().map(|n| n.chars().count()).max().unwrap_or(10) + 2;
            let ws: Vec<usize> = (0..ran.len())
                .map(|j| {
                    table[j]
                        .iter()
                        .map(|r| r.1.chars().count())
                        .max()
                        .unwrap_or(8)
                        .max(ran[j].name.len())
                        + 2
                })
                .collect();
            let _ = writeln!(out, "== {title} ==");
            let mut head = format!("{:w0$}", "");
            for (j, v) in ran.iter().enumerate() {
                let _ = write!(head, "{:<w$}", v.name, w = ws[j]);
            }
            let _ = writeln!(out, "{}", head.trim_end());
            for (k, name) in names.iter().enumerate() {
                let mut line = format!("{:w0$}", name);
                for (j, t) in table.iter().enumerate() {
                    let _ = write!(line, "{:<w$}", t[k].1, w = ws[j]);
                }
                let _ = writeln!(out, "{}", line.trim_end());
            }
            let _ = writeln!(out);
        }
    }
    out
}

pub fn verdicts(title: &str, v: &[Verdict], markdown: bool) -> String {
    let mut out = String::new();
    if markdown {
        let _ = writeln!(out, "### {title}\n\n| goal | measured | |\n|---|---|---|");
        for x in v {
            let _ = writeln!(
                out,
                "| {} | {} | {} |",
                x.what,
                x.measured,
                if x.met { "met" } else { "**MISSED**" }
            );
        }
    } else {
        let _ = writeln!(out, "== {title} ==");
        for x in v {
            let _ = writeln!(
                out,
                "  [{}] {} — {}",
                if x.met { " met " } else { "MISSED" },
                x.what,
                x.measured
            );
        }
    }
    let _ = writeln!(out);
    out
}

pub fn markdown(
    p: &Params,
    all: &[VariantSummary],
    goals: &[VariantGoals],
    open_loop: &[Verdict],
    run_dir: &Path,
    started: &str,
    plots: &[String],
) -> String {
    let mut md = String::new();
    if p.scenario == Scenario::Slowdown {
        let _ = writeln!(md, "# Retry-storm lab report\n");
    } else {
        let _ = writeln!(
            md,
            "# Retry-storm lab report: scenario `{}`\n",
            p.scenario.name()
        );
    }
    let _ = writeln!(
        md,
        "Scenario `{}`: {}\n",
        p.scenario.name(),
        p.scenario.describe()
    );
    match p.scenario {
        Scenario::Errors => {
            let _ = match p.error_model {
                ErrorModel::Shed => writeln!(
                    md,
                    "Bad phase: the upstream admits {:.0} requests a second ((1 − {:.2}) × the offered {:.0}/s) and answers \
                     the rest 503 at once (`--error-model shed`, `--error-ratio`): {:.0} % of the requests at the offered \
                     load, and every extra attempt a client sends is one more 503.\n",
                    (1.0 - p.error_ratio) * p.rate,
                    p.error_ratio,
                    p.rate,
                    100.0 * p.error_ratio
                ),
                ErrorModel::Random => writeln!(
                    md,
                    "Bad phase: {:.0} % of the upstream's answers are 503, drawn independently per request \
                     (`--error-model random`, `--error-ratio`).\n",
                    100.0 * p.error_ratio
                ),
            };
        }
        Scenario::Mixed => {
            let _ = writeln!(
                md,
                "{} background CLI workers call the same upstream in closed loops for the whole run (a call's deadline {} ms; \
                 a refused call waits 10 ms before the next). The resilient variants' funnel (limit {}) keeps {} slots for web \
                 callers: those can serve {:.1}/s when the upstream is slow; the workers (console) may use only the other {}.\n",
                p.bg_workers, p.bg_deadline_ms, p.capacity, p.reserve, p.reserved_capacity_rps(), p.capacity - p.reserve
            );
        }
        _ => {}
    }
    let upstream = p.upstream_phases();
    let _ = writeln!(
        md,
        "Run {started} UTC{}: upstream {upstream}, {} s per phase, {} req/s open loop on /checkout \
         + {} req/s on /health, php-fpm pm static {} workers behind nginx, deadline {} ms in every variant. \
         Raw data (CSV, JSON), generated configs and logs: `{}/`.\n",
        if p.quick { " (--quick)" } else { "" },
        p.phase_secs, p.rate, p.health_rate, p.workers, p.deadline_ms,
        // Relative to the repository when under it (the default `lab/out`), else as given.
        run_dir.strip_prefix(&p.root).unwrap_or(run_dir).display()
    );
    if p.slow_fail_ratio > 0.0 {
        let _ = writeln!(md, "**Not the seed's experiment:** in the slow phase {:.0} % of the upstream's answers are 503 (`--slow-fail-ratio`), after the same service time: its slots serve {:.1} live answers/s at most, which the goodput goals take their share of.\n", 100.0 * p.slow_fail_ratio, p.slow_capacity_rps() * (1.0 - p.slow_fail_ratio));
    }
    if p.bad_is_slow() {
        let relation = if p.slow_capacity_rps() < p.rate {
            format!("below the offered {} req/s before any retry", p.rate)
        } else {
            format!(
                "not below the offered {} req/s: the slow upstream can serve all of it",
                p.rate
            )
        };
        let _ = writeln!(
            md,
            "Upstream capacity when slow: {} / {} ms = {:.1} req/s, {relation}.\n",
            p.capacity,
            p.slow_ms,
            p.slow_capacity_rps()
        );
    }
    for g in goals {
        let title = g.title(p);
        md.push_str(&verdicts(&title, &g.verdicts, true));
        md.push_str(&scenario_notes(p, all, g));
        md.push_str(&miss_notes(p, all, g));
    }
    md.push_str(&verdicts(
        "Open loop (the generator kept its rate)",
        open_loop,
        true,
    ));
    for plot in plots {
        let _ = writeln!(md, "![{plot}]({plot})\n");
    }
    let _ = writeln!(md, "## Per phase\n");
    md.push_str(&tables(p, all, true));
    md.push_str(&extension_metrics(all));
    let _ = writeln!(md, "## Definitions\n");
    let _ = writeln!(
        md,
        "- Requests are assigned to a phase by send time, upstream attempts by arrival time.\n\
         - goodput: `/checkout` answered `live` within {:.1} s (the seed's 900 ms page budget plus slack), per second.\n\
         - fallback: the page answered with the estimate; the reason is the page's: `funnel_full`, `budget`, `deadline`, \
           `circuit` are our own refusals, `upstream` means the retries were used up.\n\
         - errors: HTTP ≠ 200, a body that is not the page's JSON, transport errors, or no answer by the end of the run (+{} s drain).\n\
         - amplification: upstream attempts / `/checkout` requests sent, in the same phase (attempts by arrival: a \
           backlog of calls that reach the upstream only after a switch counts in the later phase; \"attempts per call\" \
           counts each call's attempts together).\n\
         - first request after healing answered live: the send time (after the switch back) of the first request \
           that got a live answer, however long that answer took.\n\
         - upstream in service / queue: computed from the upstream's own per-attempt rows (start and end of service); \
           utilization = busy slot-seconds / (slots × phase length), work for clients that had gone included.\n\
         - latency is measured by the load generator, from when the request was due (its place in the open-loop schedule) to the full answer; live and fallback apart.\n\
         - `/health` p99 counts an unanswered request as infinitely slow.\n\
         - recovery: from the upstream's switch back to normal until the first request answered good (live within \
           {0:.1} s) from whose send time t the requests sent in [t, t+2 s) got ≥ 95 % goodput.\n\
         - FPM out of idle workers: a 250 ms sample of the pool's status saw 0 idle workers (the whole-run goal also \
           uses FPM's own `max active processes` = pm.max_children; the warm-up uses only half of the workers). The listen \
           queue is reported apart: FPM's TCP backlog, where requests wait when no worker is idle.\n",
        p.good_within_s, p.drain_secs
    );
    let _ = writeln!(md, "## Variants\n");
    let _ = writeln!(
        md,
        "- **naive**: curl, 3 attempts, fixed 100 ms sleep, no funnel, no budget, each attempt min(300 ms, remaining of {} ms) \
           (`lab/app/src/NaiveQuoteClient.php`).\n\
         - **laravel**: seed 000's `ShippingQuoteClient` on Debian's Laravel 8: Http (Guzzle) with 300 ms connect/timeout via \
           `withOptions`, `Redis::funnel` limit 4 per attempt, the seed's cache `RetryBudget` on a real redis-server, full jitter, \
           deadline (`lab/app/src/Laravel/`).\n\
         - **resilient**: `Resilient\\Client` with deadline, 0.3 s per attempt, 3 attempts, full jitter 25–200 ms, funnel 4 \
           that waits up to {} ms for a free slot (`funnel.wait`, counted in the deadline; `--funnel-wait-ms`), \
           budget {} (`--budget`), shared-memory backend; ini `resilient.web_max_attempts=3` (the web default allows no retry) \
           (`lab/app/src/ResilientQuoteClient.php`).\n\
         - **resilient-failfast**: the same client and ini with `funnel.wait` 0, the contract's default: the funnel refuses \
           at once when its slots are busy. Its own php-fpm and shared-memory segment.\n\
         - **resilient-breaker**: `resilient` plus the client option `'circuit' => ['failure_ratio' => 0.5, 'min_calls' => 20, \
           'window' => 10.0, 'open_for' => 5.0]`: it opens at a failure ratio of 0.5 over 20+ calls in 10 s, or after 20 \
           failures in a row (`consecutive_failures`, default `min_calls`); open 5 s ± 20 %, then one probe for the host.\n\
         - Every attempt carries the call's `X-Request-Id` (`w-…` from the page, `b-…` from a background worker), so the \
           upstream's own rows tell web from background attempts and attempts from calls.\n",
        p.deadline_ms,
        p.funnel_wait_ms,
        p.budget.describe()
    );
    for v in all {
        let _ = writeln!(
            md,
            "- {} warm-up: {}",
            v.name,
            if v.warmup.is_empty() {
                v.skipped.as_deref().unwrap_or("–")
            } else {
                &v.warmup
            }
        );
    }
    md
}

/// The extension's own metrics beside the upstream's: `Resilient\Metrics::snapshot()` read at
/// the end of each resilient variant's run (/lab-metrics, reset after the warm-up as the
/// upstream's rows are), and the breaker's transitions.
fn extension_metrics(all: &[VariantSummary]) -> String {
    let mut out = String::from(
        "## The extension's own metrics\n\n\
         `Resilient\\Metrics::snapshot()['shipping']` at the end of each resilient variant's run (every FPM worker and \
         background process of the host counts into it; reset right after the warm-up, when the upstream's rows start). \
         `attempts` should equal what the upstream saw; `shed` are our refusals (nothing sent), `failures` the \
         upstream's. The breaker's state over time is the lane in the attempts plot.\n\n\
         | variant | originals | attempts (ext) | attempts (upstream) | retries sent | retries that succeeded | retries denied | successes | shed funnel/budget/deadline/circuit | failures 5xx/timeout/connection | fallbacks | breaker opened/half-open/closed |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for v in all.iter().filter(|v| crate::params::is_resilient(&v.name)) {
        let snap = v
            .metrics
            .as_ref()
            .filter(|m| m.get("available").and_then(|a| a.as_bool()) == Some(true))
            .and_then(|m| m.pointer("/snapshot/shipping"));
        let Some(m) = snap else {
            let _ = writeln!(
                out,
                "| {} | *(no snapshot: /lab-metrics did not answer)* |||||||||||",
                v.name
            );
            continue;
        };
        let n = |path: &str| m.pointer(path).and_then(|x| x.as_u64()).unwrap_or(0);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {}/{}/{}/{} | {}/{}/{} | {} | {}/{}/{} |",
            v.name,
            n("/originals"),
            n("/attempts"),
            v.upstream_attempts_total,
            n("/retries"),
            n("/retries_succeeded"),
            n("/retries_denied"),
            n("/successes"),
            n("/shed/funnel"),
            n("/shed/budget"),
            n("/shed/deadline"),
            n("/shed/circuit"),
            n("/failures/5xx"),
            n("/failures/timeout"),
            n("/failures/connection"),
            n("/fallbacks"),
            n("/breaker/transitions/open"),
            n("/breaker/transitions/half_open"),
            n("/breaker/transitions/closed"),
        );
    }
    out.push('\n');
    out
}

/// Why a failure scenario's goal was missed, from the measurements and the rules that explain
/// them.
fn scenario_notes(p: &Params, all: &[VariantSummary], g: &VariantGoals) -> String {
    let mut out = String::new();
    let missed = |prefix: &str| {
        g.verdicts
            .iter()
            .any(|v| v.what.starts_with(prefix) && !v.met)
    };
    let phase = |name: &str| {
        all.iter()
            .find(|v| v.name == name && v.skipped.is_none())
            .and_then(|v| v.phases.get(1))
    };
    match p.scenario {
        Scenario::Errors => {
            if missed("resilient: amplification (errors") {
                if let (Some(s), Some(n)) = (
                    phase("resilient"),
                    all.iter().find(|v| v.name == "resilient"),
                ) {
                    let b = p.budget;
                    let _ = writeln!(
                        out,
                        "**Why resilient's amplification in the errors phase is above 1.1.** The budget allows `floor` + \
                         `ratio` × the originals in its {} s window ({}): under sustained failure at most {:.3} attempts per \
                         request. A window longer than the errors phase still holds healthy originals, which needed no \
                         retry, when the errors start: their credit is spent at once. Over the whole run the attempts per \
                         request are {:.3} ({} requests in the errors phase).\n",
                        b.window_s,
                        b.describe(),
                        b.ceiling(p.rate),
                        n.amplification_whole_run,
                        s.sent,
                    );
                }
            }
            if missed("naive: amplification") && p.error_model == ErrorModel::Random {
                let pr = p.error_ratio;
                let _ = writeln!(
                    out,
                    "**Why naive's amplification is below 1.5.** With independent failures at share p, 3 attempts cost \
                     1 + p + p² per request: {:.2} at p = {:.2}. Reaching 1.5 takes p ≥ 0.37 (`--error-ratio 0.5` gives 1.75).\n",
                    1.0 + pr + pr * pr,
                    pr
                );
            }
        }
        Scenario::Mixed => {
            if missed("resilient: the background work") {
                let _ = writeln!(
                    out,
                    "**Why the background workers get no slot in the slow phase.** The funnel keeps one count and two caps \
                     (seed 000's semaphore with reserved slots): a web caller may take a slot while fewer than `limit` ({}) are \
                     in use, a console caller only while fewer than `limit - reserve` ({}) are. The reserve is a floor for the \
                     web, not a quota for the background. Here the web alone (50/s) exceeds what the slow upstream serves \
                     ({:.1}/s), so web callers hold the slots all the time and every background call is refused at once \
                     (`funnel_full`, no upstream work). In the normal phases, where the web leaves room, the workers are \
                     served (see the tables). Laravel's `Redis::funnel` has no reserve: there the workers hold the slots and \
                     the web is refused.\n",
                    p.capacity,
                    p.capacity - p.reserve,
                    p.slow_capacity_rps()
                );
            }
        }
        Scenario::Outage => {}
        Scenario::Slowdown | Scenario::CapacityShift | Scenario::TwoHosts => {}
    }
    out
}

/// Why a goal was missed, from the measurements (only for the goals whose cause the lab can show):
/// the goodput goal, for whichever resilient variant misses it.
fn miss_notes(p: &Params, all: &[VariantSummary], g: &VariantGoals) -> String {
    let mut out = String::new();
    let slow = all
        .iter()
        .find(|v| v.name == g.variant && v.skipped.is_none())
        .and_then(|v| v.phases.get(1));
    let (true, Some(s), Some(wait_ms)) =
        (g.goodput_missed(), slow, p.funnel_wait_ms_of(&g.variant))
    else {
        return out;
    };
    // The explanation below is about arrivals that outpace the slots.
    if s.offered_rps < s.capacity_rps {
        return out;
    }
    let interval = 1000.0 / p.rate;
    let per_cycle = (p.slow_ms as f64 / interval).floor() + 1.0;
    let ceiling = p.slow_ms as f64 / (per_cycle * interval);
    let gap = s
        .free_slot_idle_p50_ms
        .map(|x| format!("{x:.1} ms"))
        .unwrap_or("?".into());
    let laravel = all
        .iter()
        .find(|v| v.name == "laravel" && v.skipped.is_none())
        .and_then(|v| v.phases.get(1))
        .map(|l| {
            format!(
                " The Laravel variant's funnel (same limit, also fail-fast) got {:.1}/s.",
                l.goodput_rps
            )
        })
        .unwrap_or_default();
    if wait_ms == 0 {
        let _ = writeln!(
            out,
            "**Why {name} misses the goodput goal.** Its funnel refuses at once when its {cap} slots are busy (the contract's \
             default: fail fast, no queueing), and nobody waits for a slot when it frees, so it idles until the next request \
             arrives: measured p50 {gap} with arrivals every {interval:.0} ms; the upstream's slots were busy {util:.0} % of the \
             slow phase. With a constant arrival rate and {svc} ms of service, a slot that frees just after an arrival serves at \
             most one request per {per_cycle:.0} arrival intervals: a ceiling of {ceil:.0} % of capacity for any fail-fast funnel \
             of {cap} in front of {cap} slots (random arrivals would lose more).{laravel}{waiting} The lab reports the miss \
             rather than changing the experiment to hide it.\n",
            name = g.variant,
            cap = p.capacity,
            util = 100.0 * s.upstream_utilization,
            svc = p.slow_ms,
            ceil = 100.0 * ceiling,
            waiting = waiting_variant(p, all),
        );
    } else {
        let _ = writeln!(
            out,
            "**Why {name} misses the goodput goal.** Its funnel waits up to {wait_ms} ms for a free slot (arrivals every \
             {interval:.0} ms), yet the upstream's slots were busy only {util:.0} % of the slow phase and a freed slot idled \
             p50 {gap} before the next attempt took it. A fail-fast funnel of {cap} in front of {cap} slots is capped at \
             {ceil:.0} % here ({svc} ms of service, one request per {per_cycle:.0} arrival intervals per slot); a wait shorter \
             than the arrival interval, or waiters that give up before a slot frees, leave part of that gap. The lab reports \
             the miss rather than changing the experiment to hide it.\n",
            name = g.variant,
            cap = p.capacity,
            util = 100.0 * s.upstream_utilization,
            svc = p.slow_ms,
            ceil = 100.0 * ceiling,
        );
    }
    out
}

/// What the funnel wait did in this run, for the fail-fast variant's note.
fn waiting_variant(p: &Params, all: &[VariantSummary]) -> String {
    let cap = p.slow_capacity_rps();
    let w = p.funnel_wait_ms;
    match all.iter().find(|v| v.name == "resilient" && v.skipped.is_none()).and_then(|v| v.phases.get(1)) {
        Some(r) if w > 0 => format!(
            " The remedy is a short funnel wait, counted in the deadline, so that the request that arrived just before a \
             slot freed takes it: the `resilient` variant waits up to {w} ms (`--funnel-wait-ms`) and got {:.1}/s ({:.0} % of \
             capacity; slots busy {:.0} %, a freed slot idled p50 {}).",
            r.goodput_rps,
            100.0 * r.goodput_rps / cap,
            100.0 * r.upstream_utilization,
            r.free_slot_idle_p50_ms.map(|x| format!("{x:.1} ms")).unwrap_or("?".into())
        ),
        _ => " The remedy is a short funnel wait, counted in the deadline (`funnel.wait`; the `resilient` variant with \
              `--funnel-wait-ms` > 0), so that the request that arrived just before a slot freed takes it."
            .into(),
    }
}

/// Raw series: requests.csv, upstream_attempts.csv, samples.csv, timeline.csv, summary.json.
pub fn write_raw(dir: &Path, runs: &[VariantRun], all: &[VariantSummary]) -> Result<(), String> {
    let w = |name: &str, s: String| {
        std::fs::write(dir.join(name), s).map_err(|e| format!("{name}: {e}"))
    };
    let mut req =
        String::from("variant,page,scheduled_s,sent_s,latency_ms,http_status,outcome,detail\n");
    let mut att = String::from(
        "variant,arrival_s,start_s,end_s,client_gone,status,unserved,background,call\n",
    );
    let mut smp = String::from(
        "variant,t_s,fpm_active,fpm_idle,fpm_listen_queue,upstream_in_service,upstream_queued,breaker,ext_attempts,learned_limit\n",
    );
    let o = |v: Option<u32>| v.map(|x| x.to_string()).unwrap_or_default();
    for r in runs {
        for x in &r.records {
            let (kind, detail) = match &x.outcome {
                Outcome::Live => ("live", String::new()),
                Outcome::Fallback(d) => ("fallback", d.clone()),
                Outcome::Error(d) => ("error", d.replace(',', ";")),
            };
            let _ = writeln!(
                req,
                "{},{:?},{:.4},{:.4},{},{},{kind},{detail}",
                r.name,
                x.page,
                x.scheduled_s,
                x.sent_s,
                x.latency_s
                    .map(|l| format!("{:.2}", l * 1000.0))
                    .unwrap_or_default(),
                x.http_status
            );
        }
        for a in &r.attempts {
            let t = |v: Option<f64>| v.map(|x| format!("{x:.4}")).unwrap_or_default();
            let _ = writeln!(
                att,
                "{},{:.4},{},{},{},{},{},{},{}",
                r.name,
                a.arrival_s,
                t(a.start_s),
                t(a.end_s),
                a.gone,
                a.status.map(|s| s.to_string()).unwrap_or_default(),
                a.unserved,
                a.background,
                a.call.as_deref().unwrap_or("")
            );
        }
        for s in &r.samples {
            let _ = writeln!(
                smp,
                "{},{:.3},{},{},{},{},{},{},{},{}",
                r.name,
                s.t_s,
                o(s.fpm_active),
                o(s.fpm_idle),
                o(s.fpm_listen_queue),
                o(s.upstream_in_service),
                o(s.upstream_queued),
                s.breaker.unwrap_or_default(),
                s.ext_attempts.map(|n| n.to_string()).unwrap_or_default(),
                s.learned_limit
                    .map(|l| format!("{l:.2}"))
                    .unwrap_or_default()
            );
        }
    }
    let mut tl = String::from("variant,t_s,offered_rps,goodput_rps,fallback_rps,error_rps,upstream_attempts_rps,upstream_in_service_max,upstream_queue_max,upstream_in_flight_max,health_p99_ms,fpm_busy_max,fpm_listen_queue_max,bg_attempts_rps\n");
    for v in all {
        for b in &v.bins {
            let _ = writeln!(
                tl,
                "{},{:.2},{:.1},{:.1},{:.1},{:.1},{:.1},{},{},{},{},{},{},{:.1}",
                v.name,
                b.t_s,
                b.offered_rps,
                b.goodput_rps,
                b.fallback_rps,
                b.error_rps,
                b.upstream_attempts_rps,
                b.upstream_in_service_max,
                b.upstream_queue_max,
                b.upstream_in_flight_max,
                b.health_p99_ms
                    .map(|x| if x.is_finite() {
                        format!("{x:.1}")
                    } else {
                        "inf".into()
                    })
                    .unwrap_or_default(),
                o(b.fpm_busy_max),
                o(b.fpm_listen_queue_max),
                b.bg_attempts_rps
            );
        }
    }
    let mut bg = String::from("variant,worker,start_s,latency_ms,outcome,reason\n");
    for r in runs {
        for c in &r.bg_calls {
            let _ = writeln!(
                bg,
                "{},{},{:.4},{:.2},{},{}",
                r.name,
                c.worker,
                c.start_s,
                c.latency_s * 1000.0,
                c.outcome,
                c.reason
            );
        }
    }
    if runs.iter().any(|r| !r.bg_calls.is_empty()) {
        w("background_calls.csv", bg)?;
    }
    w("requests.csv", req)?;
    w("upstream_attempts.csv", att)?;
    w("samples.csv", smp)?;
    w("timeline.csv", tl)?;
    w(
        "summary.json",
        serde_json::to_string_pretty(&serde_json::json!({ "variants": all, "runs": runs }))
            .map_err(|e| e.to_string())?,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::goals::tests::{params, served_everything};

    fn report(p: &Params, all: &[VariantSummary]) -> String {
        let goals = crate::goals::scenario_goals(p, all);
        let open_loop = crate::goals::open_loop(p, all);
        markdown(p, all, &goals, &open_loop, Path::new("/tmp"), "now", &[])
    }

    #[test]
    fn a_load_below_capacity_is_not_reported_as_above_it_nor_as_missed() {
        // 20 req/s against a slow upstream that serves 33.3/s, every request served.
        let p = params(&["--quick", "--rate", "20"]);
        let md = report(&p, &[served_everything("resilient", 20.0, 1.0)]);
        assert!(!md.contains("misses the goodput goal"), "{md}");
        assert!(!md.contains("req/s, below the offered"), "{md}");
        assert!(
            md.contains("33.3 req/s, not below the offered 20 req/s"),
            "{md}"
        );
    }

    #[test]
    fn a_load_above_capacity_keeps_its_sentence_and_its_miss_note() {
        let p = params(&["--quick"]);
        let mut r = served_everything("resilient", 50.0, 1.0);
        r.phases[1].goodput_rps = 20.0;
        let md = report(&p, &[r]);
        assert!(md.contains("33.3 req/s, below the offered 50 req/s before any retry"));
        assert!(md.contains("Why resilient misses the goodput goal"), "{md}");
    }
}
