//! resilient-lab: seed 000's overload experiment ("ลองทำให้ปลายทางช้า แล้วดูว่าระบบฟื้นไหม") as one
//! command, and the failure scenarios beside it (scenario.rs: slowdown, errors, outage,
//! mixed). For each scenario and each variant (naive, laravel, resilient, resilient-failfast,
//! resilient-breaker) it starts a fresh upstream simulator, php-fpm + nginx serving lab/app (and,
//! in `mixed`, background PHP CLI workers), drives /checkout with an open-loop 50 req/s (and
//! /health lightly) through normal → bad → normal, then reports per phase, plots the timelines
//! and, with --check, asserts the robust CI properties.
//!
//! Layout: params (knobs) → scenario (what goes wrong) → experiment (one variant: sut, upstream,
//! background, loadgen, sampler, progress) → analysis (figures) → goals (verdicts) → report
//! (tables, markdown, raw) and plot (PNGs).

mod analysis;
mod background;
mod capacity_shift;
mod experiment;
mod goals;
mod loadgen;
mod outlock;
mod params;
mod plot;
mod procs;
mod progress;
mod report;
mod runs;
mod sampler;
mod scenario;
mod sockets;
mod sut;
mod two_hosts;
mod upstream;

use std::path::Path;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use params::{is_resilient, Params};

fn main() -> ExitCode {
    let p = match Params::from_args(std::env::args().skip(1)) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    // Held for the whole run, released however the lab ends.
    let _lock = match outlock::OutLock::take(&p.out_dir) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("lab: {e}");
            return ExitCode::FAILURE;
        }
    };
    let sockets = match sockets::SocketDir::create() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("lab: {e}");
            return ExitCode::FAILURE;
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start tokio: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = rt.block_on(async {
        tokio::select! {
            code = run(p) => code,
            _ = interrupted() => {
                eprintln!("\ninterrupted: stopping every process the lab started");
                ExitCode::from(130)
            }
        }
    });
    // Dropping the runtime drops every task, and with them the process guards (procs.rs);
    // then nothing uses the sockets any more.
    drop(rt);
    drop(sockets);
    code
}

async fn interrupted() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! { _ = int.recv() => {}, _ = term.recv() => {} }
}

async fn run(p: Params) -> ExitCode {
    let stamp = utc_stamp();
    let run_dir = p
        .out_dir
        .join(runs::folder_name(&stamp, std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&run_dir) {
        eprintln!("cannot create {}: {e}", run_dir.display());
        return ExitCode::FAILURE;
    }
    runs::prune(&p.out_dir, 5, &run_dir);
    let mut report = String::new();
    let mut failed_checks = false;
    let mut all_checks = Vec::new();
    // "scenario/variant (why)" of every variant that did not run.
    let mut not_run = Vec::new();
    let mut variants = 0;
    for sc in p.scenarios.clone() {
        let mut ps = p.clone();
        ps.set_scenario(sc);
        let (md, checks, scenario_runs) = run_scenario(&ps, &run_dir, &stamp).await;
        variants += scenario_runs.len();
        for r in scenario_runs {
            if let Some(why) = r.skipped {
                not_run.push(format!("{}/{} ({why})", sc.name(), r.name));
            }
        }
        if !report.is_empty() {
            report.push_str("\n---\n\n");
        }
        report.push_str(&md);
        if let Some(c) = checks {
            failed_checks |= c.iter().any(|c| !c.met);
            all_checks.push(serde_json::json!({ "scenario": sc.name(), "checks": c }));
        }
    }
    let _ = std::fs::write(run_dir.join("report.md"), &report);
    if let Err(e) = std::fs::write(p.out_dir.join("report.md"), &report) {
        eprintln!("report: {e}");
    }
    println!(
        "report: {}  raw: {}",
        p.out_dir.join("report.md").display(),
        run_dir.display()
    );
    // Every scenario's CI verdicts together at the end (tests/harness/summary.sh counts the
    // lines after the first "== CI check"; the goals above may be missed without failing CI).
    for c in &all_checks {
        if let (Some(name), Ok(checks)) = (
            c["scenario"].as_str(),
            serde_json::from_value::<Vec<goals::Verdict>>(c["checks"].clone()),
        ) {
            print!(
                "{}",
                report::verdicts(
                    &format!("CI check (--check), scenario {name}"),
                    &checks,
                    false
                )
            );
        }
    }
    if !not_run.is_empty() {
        println!(
            "lab: {} of {variants} variants did not run: {}",
            not_run.len(),
            not_run.join(", ")
        );
    }
    if p.check {
        let _ = std::fs::write(
            run_dir.join("check.json"),
            serde_json::to_string_pretty(&all_checks).unwrap_or_default(),
        );
        if failed_checks || !not_run.is_empty() {
            println!("CHECK FAILED");
            return ExitCode::FAILURE;
        }
        println!("CHECK PASSED");
    }
    // A run with a variant missing is not the experiment asked for, --check or not.
    if not_run.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// One scenario: every variant, then its figures, plots and report section. Returns the
/// markdown, with --check its CI verdicts, and the variants' runs. The slowdown (seed 000)
/// keeps its file names (timelines.png, …); the other scenarios' plots are prefixed with the
/// scenario's name.
async fn run_scenario(
    p: &Params,
    run_dir: &Path,
    stamp: &str,
) -> (
    String,
    Option<Vec<goals::Verdict>>,
    Vec<experiment::VariantRun>,
) {
    let sc = p.scenario;
    let dir = run_dir.join(sc.name());
    let _ = std::fs::create_dir_all(&dir);
    eprintln!(
        "lab: scenario {}: {} variants × {} phases × {} s, {} req/s; output in {}",
        sc.name(),
        p.variants.len(),
        p.phases().len(),
        p.phase_secs,
        p.rate,
        dir.display()
    );
    let mut runs = Vec::new();
    for v in &p.variants {
        let vdir = dir.join(v);
        let run = if is_resilient(v) {
            match resilient_available(p) {
                Ok(()) => experiment::run_variant(p, v, &vdir).await,
                Err(why) => {
                    eprintln!("[{v}] skipped: {why}");
                    experiment::VariantRun {
                        name: v.clone(),
                        skipped: Some(why),
                        ..Default::default()
                    }
                }
            }
        } else {
            experiment::run_variant(p, v, &vdir).await
        };
        runs.push(run);
    }

    let summaries: Vec<_> = runs.iter().map(|r| analysis::summarize(p, r)).collect();
    let goals = goals::scenario_goals(p, &summaries);
    let open_loop = goals::open_loop(p, &summaries);
    if let Err(e) = report::write_raw(&dir, &runs, &summaries) {
        eprintln!("raw data: {e}");
    }
    let prefix = if sc == scenario::Scenario::Slowdown {
        String::new()
    } else {
        format!("{}-", sc.name())
    };
    let mut plots = Vec::new();
    let kinds: [(&str, plot::PlotFn); 3] = [
        ("timelines.png", plot::timelines),
        ("timelines_by_variant.png", plot::grid),
        ("attempts.png", plot::attempts),
    ];
    for (name, draw) in kinds {
        let file = format!("{prefix}{name}");
        let png = dir.join(&file);
        match draw(p, &summaries, &png) {
            Ok(()) => {
                let _ = std::fs::copy(&png, run_dir.join(&file));
                let _ = std::fs::copy(&png, p.out_dir.join(&file));
                plots.push(file);
            }
            Err(e) => eprintln!("plot {file}: {e}"),
        }
    }
    let mut md = report::markdown(p, &summaries, &goals, &open_loop, &dir, stamp, &plots);
    if sc == scenario::Scenario::CapacityShift {
        let file = "capacity-shift-limit.png";
        let png = dir.join(file);
        let plot = match capacity_shift::plot(p, &summaries, &png) {
            Ok(()) => {
                let _ = std::fs::copy(&png, run_dir.join(file));
                let _ = std::fs::copy(&png, p.out_dir.join(file));
                format!("\n![the learned limit beside the upstream's slots]({file})\n")
            }
            Err(e) => {
                eprintln!("plot {file}: {e}");
                String::new()
            }
        };
        let table = capacity_shift::table(p, &summaries);
        md.push_str(&format!(
            "\n### Per phase: served vs capacity\n\n{table}{plot}"
        ));
        println!("\n{table}");
    }
    if sc == scenario::Scenario::TwoHosts {
        let at = md.find("## Per phase").unwrap_or(md.len());
        md.insert_str(at, &two_hosts::section(p, &runs, &summaries, true));
        print!("{}", two_hosts::section(p, &runs, &summaries, false));
    }

    println!(
        "\n### scenario {}\n{}",
        sc.name(),
        report::tables(p, &summaries, false)
    );
    for g in &goals {
        print!("{}", report::verdicts(&g.title(p), &g.verdicts, false));
    }
    print!("{}", report::verdicts("Open loop", &open_loop, false));
    let checks = p.check.then(|| goals::scenario_check(p, &summaries));
    (md, checks, runs)
}

/// The resilient variants need the extension with its client class (helpers H1/H4), and one
/// that knows the funnel's `wait` option (an older build rejects it as unknown).
fn resilient_available(p: &Params) -> Result<(), String> {
    if !p.extension.exists() {
        return Err(format!("{} not built", p.extension.display()));
    }
    let probe = r#"if (!class_exists('Resilient\Client')) exit(3);
        try { new Resilient\Client('probe', ['base_url' => 'http://127.0.0.1:9', 'funnel' => ['limit' => 1, 'wait' => 0.001]]); }
        catch (Throwable $e) { fwrite(STDERR, $e->getMessage()); exit(4); }
        exit(0);"#;
    let out = std::process::Command::new("php")
        .args(["-n", "-d", &format!("extension={}", p.extension.display())])
        .args(["-r", probe])
        .output()
        .map_err(|e| format!("php: {e}"))?;
    match out.status.code() {
        Some(0) => Ok(()),
        Some(3) => Err(format!(
            "{} has no Resilient\\Client yet",
            p.extension.display()
        )),
        Some(4) => Err(format!(
            "{} has no funnel wait yet: {}",
            p.extension.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        _ => Err(format!(
            "php cannot load {}: {}",
            p.extension.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

/// "YYYY-MM-DD HH:MM:SS" UTC, without a date crate.
fn utc_stamp() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
