//! The `two-hosts` scenario: seed 000's slowdown on two "servers" at once. Two
//! php-fpm masters, each with its own shared-memory segment (`resilient.shm_path`), stand for two
//! hosts; one nginx balances `/checkout` and `/health` across both (round robin); one
//! redis-server serves the `resilient-redis` variant. The question: does a funnel of 4 stay 4
//! for the upstream when the app runs on two hosts?
//!
//! - `resilient`: the funnel of 4 in each host's own shared memory, so the upstream may see 8;
//! - `resilient-redis`: the same client with `'backend' => 'redis://…?prefix=lab:'` (funnel,
//!   budget and breaker on Redis), so one funnel of 4 across both hosts.
//!
//! Host `a` is the variant's usual php-fpm (its directory, segment, status page); host `b` is
//! started here, in `host-b/`. Every web attempt's `X-Request-Id` names its host (`w-a-…`,
//! `w-b-…`), so the upstream's own rows give the concurrency per host as well as in total.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::analysis::VariantSummary;
use crate::experiment::VariantRun;
use crate::goals::{VariantGoals, Verdict};
use crate::params::{is_resilient, Params};
use crate::procs::{free_port, wait_listening, Child};
use crate::scenario::Scenario;
use crate::upstream::UpstreamAttempt;

/// The variants the scenario runs (quick or not).
pub const VARIANTS: [&str; 2] = ["resilient", "resilient-redis"];

/// The hosts.
pub const HOSTS: u32 = 2;

/// nginx's config when there are two hosts (lab/conf).
pub const NGINX_TEMPLATE: &str = "nginx-two-hosts.conf.tmpl";

pub const DESCRIBE: &str = "seed 000's slowdown on two hosts: two php-fpm masters with their own shared-memory segments stand for two servers, one nginx balances /checkout and /health across both (round robin), one redis-server. `resilient` keeps its funnel of 4 in each host's shared memory (the upstream may see 8); `resilient-redis` is the same client with `'backend' => 'redis://…'`: funnel, budget and breaker on Redis, one funnel of 4 across both hosts.";

/// The funnel limit of the lab's client (lab/app/src/ResilientQuoteClient.php).
const FUNNEL_LIMIT: u32 = 4;

/// The second host of the `two-hosts` scenario: its php-fpm and its own segment. Dropping it
/// stops the php-fpm and removes the segment.
pub struct HostB {
    fpm: Child,
    port: u16,
    status_sock: PathBuf,
    shm_path: Option<PathBuf>,
}

impl HostB {
    /// In the `two-hosts` scenario: marks host a's FPM config (`fpm_conf_a`, rendered, not yet
    /// started) as host `a`, and starts host `b`'s php-fpm from the same template and ini with its
    /// own directory, port and segment. `None` in every other scenario.
    pub fn start(
        p: &Params,
        variant: &str,
        dir: &Path,
        fpm_conf_a: &Path,
        vars: &[(&str, String)],
    ) -> Result<Option<HostB>, String> {
        if p.scenario != Scenario::TwoHosts {
            return Ok(None);
        }
        append(fpm_conf_a, "env[LAB_HOST] = a\n")?;
        let bdir = dir.join("host-b");
        std::fs::create_dir_all(&bdir).map_err(|e| e.to_string())?;
        let port = free_port()?;
        let status_sock = crate::sockets::fpm_status(p.scenario.name(), variant, 'b')?;
        let vars_b: Vec<(&str, String)> = vars
            .iter()
            .map(|(k, v)| match *k {
                "DIR" => (*k, bdir.display().to_string()),
                "FPM_PORT" => (*k, port.to_string()),
                "STATUS_SOCK" => (*k, status_sock.display().to_string()),
                _ => (*k, v.clone()),
            })
            .collect();
        let conf = bdir.join("php-fpm.conf");
        crate::sut::render(&p.root.join("lab/conf/php-fpm.conf.tmpl"), &conf, &vars_b)?;
        append(&conf, "env[LAB_HOST] = b\n")?;
        let shm_path = is_resilient(variant).then(|| {
            let shm = PathBuf::from(format!(
                "/dev/shm/resilient-lab-{}-{}-{variant}-host-b.shm",
                std::process::id(),
                p.scenario.name(),
            ));
            let _ = std::fs::remove_file(&shm);
            shm
        });
        let mut cmd = Command::new("php-fpm8.2");
        cmd.args(["-n", "-R", "-F", "-y"]).arg(&conf);
        for d in crate::sut::php_ini(p, shm_path.as_deref()) {
            cmd.args(["-d", &d]);
        }
        std::fs::write(bdir.join("php-fpm.cmd"), format!("{cmd:?}\n"))
            .map_err(|e| e.to_string())?;
        let mut fpm = Child::spawn("php-fpm (host b)", cmd, &bdir.join("fpm.out"))?;
        let log = format!("{}/fpm-error.log", bdir.display());
        wait_listening(&mut fpm, port, &log)?;
        Ok(Some(HostB {
            fpm,
            port,
            status_sock,
            shm_path,
        }))
    }

    /// The nginx template's placeholders for host b.
    pub fn vars(&self) -> [(&'static str, String); 2] {
        [
            ("FPM_PORT_B", self.port.to_string()),
            ("STATUS_SOCK_B", self.status_sock.display().to_string()),
        ]
    }
}

impl Drop for HostB {
    fn drop(&mut self) {
        self.fpm.stop();
        if let Some(p) = &self.shm_path {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn append(file: &Path, line: &str) -> Result<(), String> {
    std::fs::OpenOptions::new()
        .append(true)
        .open(file)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .map_err(|e| format!("{}: {e}", file.display()))
}

/// Host b's metrics are reset after the warm-up too (`/lab-metrics` reaches host a only).
pub async fn reset_host_b_metrics(p: &Params, http: &reqwest::Client, base: &str) {
    if p.scenario == Scenario::TwoHosts {
        let _ = http
            .get(format!("{base}/lab-metrics-b?reset=1"))
            .send()
            .await;
    }
}

/// Adds host b's `Resilient\Metrics::snapshot()` to host a's (numbers summed; the other leaves
/// are host a's), and keeps both under `hosts`: the report's table then counts both hosts.
pub async fn add_host_b_metrics(
    p: &Params,
    http: &reqwest::Client,
    base: &str,
    metrics: &mut Option<serde_json::Value>,
) {
    if p.scenario != Scenario::TwoHosts {
        return;
    }
    let b = match http.get(format!("{base}/lab-metrics-b")).send().await {
        Ok(r) => r.json::<serde_json::Value>().await.ok(),
        Err(_) => None,
    };
    let (Some(a), Some(b)) = (metrics.as_mut(), b) else {
        return;
    };
    let host_a = a.clone();
    if let (Some(sa), Some(sb)) = (a.get_mut("snapshot"), b.get("snapshot")) {
        add_numbers(sa, sb);
    }
    a["hosts"] = serde_json::json!({ "a": host_a, "b": b });
}

fn add_numbers(a: &mut serde_json::Value, b: &serde_json::Value) {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, vb) in b {
                match a.get_mut(k) {
                    Some(va) => add_numbers(va, vb),
                    None => {
                        a.insert(k.clone(), vb.clone());
                    }
                }
            }
        }
        (a @ Value::Number(_), Value::Number(b)) => {
            if let (Some(x), Some(y)) = (a.as_u64(), b.as_u64()) {
                *a = (x + y).into();
            }
        }
        _ => {}
    }
}

/// The host of a web attempt, from its `X-Request-Id` (`w-a-…`).
fn host_of(a: &UpstreamAttempt) -> Option<char> {
    let id = a.call.as_deref()?.strip_prefix("w-")?;
    let mut c = id.chars();
    let h = c.next()?;
    (c.next() == Some('-')).then_some(h)
}

/// The most attempts inside the upstream at once (arrival to end of service: queued or in
/// service) among `attempts`, within [from, to), counting what was already inside at `from`.
pub fn max_in_flight<'a>(
    attempts: impl Iterator<Item = &'a UpstreamAttempt>,
    from: f64,
    to: f64,
) -> u32 {
    let mut ev: Vec<(f64, i32)> = Vec::new();
    for a in attempts.filter(|a| !a.unserved) {
        ev.push((a.arrival_s, 1));
        // Still inside when the rows were read: inside until the end.
        ev.push((a.end_s.unwrap_or(f64::INFINITY), -1));
    }
    // At equal times an end comes before an arrival: no peak that never existed.
    ev.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut level, mut max) = (0i32, 0i32);
    for (t, d) in ev {
        if t >= to {
            break;
        }
        level += d;
        // Before `from` only the level carried into the window counts.
        max = if t < from { level } else { max.max(level) };
    }
    max.max(0) as u32
}

/// Per phase and variant: the upstream's concurrency (in flight in total and per host, in
/// service, queue) and goodput, from the upstream's own rows.
struct PhaseRow {
    in_flight: u32,
    per_host: [u32; 2],
    attempts_per_host: [usize; 2],
    in_service: u32,
    queue: u32,
    goodput_rps: f64,
    utilization: f64,
}

fn phase_rows(p: &Params, run: &VariantRun, s: &VariantSummary) -> Vec<PhaseRow> {
    (0..3)
        .map(|i| {
            let (from, to) = (i as f64 * p.phase_secs, (i + 1) as f64 * p.phase_secs);
            let ph = &s.phases[i];
            let on = |h: char| {
                let of = move |a: &&UpstreamAttempt| host_of(a) == Some(h);
                (
                    max_in_flight(run.attempts.iter().filter(of), from, to),
                    run.attempts
                        .iter()
                        .filter(of)
                        .filter(|a| a.arrival_s >= from && a.arrival_s < to)
                        .count(),
                )
            };
            let (a, b) = (on('a'), on('b'));
            PhaseRow {
                in_flight: max_in_flight(run.attempts.iter(), from, to),
                per_host: [a.0, b.0],
                attempts_per_host: [a.1, b.1],
                in_service: ph.upstream_max_in_service,
                queue: ph.upstream_max_queue,
                goodput_rps: ph.goodput_rps,
                utilization: ph.upstream_utilization,
            }
        })
        .collect()
}

/// The scenario's goal (one funnel limit across hosts on Redis), from the summaries' 0.5 s bins
/// (in flight = in service + queued, from the upstream's rows): on Redis the upstream never has
/// more than the funnel's limit at once; on each host's shared memory it gets up to hosts ×
/// limit, and more than one host's limit.
pub fn goals(p: &Params, all: &[VariantSummary]) -> Vec<VariantGoals> {
    verdicts(p, all, 0.9)
}

/// [`goals`]' verdicts, resilient-redis's goodput in the slow phase at least `share` of what
/// the upstream serves: a funnel on Redis that held slots it never gave back, or refused
/// every call, would keep the upstream under the bound too.
fn verdicts(p: &Params, all: &[VariantSummary], share: f64) -> Vec<VariantGoals> {
    let max_of = |name: &str| {
        all.iter()
            .find(|v| v.name == name && v.skipped.is_none())
            .map(|v| {
                let end = p.total_secs();
                v.bins
                    .iter()
                    .filter(|b| b.t_s < end)
                    .map(|b| b.upstream_in_flight_max)
                    .max()
                    .unwrap_or(0)
            })
    };
    let mut v = Vec::new();
    match max_of("resilient-redis") {
        Some(m) => v.push(Verdict {
            what: format!(
                "resilient-redis (funnel of {FUNNEL_LIMIT} on Redis): the upstream never has more than {FUNNEL_LIMIT} at once across both hosts"
            ),
            measured: format!("max in flight {m} (whole run, every phase)"),
            met: m <= FUNNEL_LIMIT,
        }),
        None => v.push(not_run("resilient-redis", all)),
    }
    if let Some(s) = (all.iter())
        .find(|v| v.name == "resilient-redis")
        .and_then(crate::goals::slow)
    {
        let sv = crate::goals::servable(s, "the upstream's capacity");
        v.push(crate::goals::goodput_share(
            s,
            share,
            sv.rps,
            format!(
                "resilient-redis goodput (slow) ≥ {:.0} % of {}",
                100.0 * share,
                sv.name
            ),
        ));
    }
    match max_of("resilient") {
        Some(m) => v.push(Verdict {
            what: format!(
                "resilient (funnel of {FUNNEL_LIMIT} in each host's shared memory): the upstream gets more than {FUNNEL_LIMIT}, up to {}",
                HOSTS * FUNNEL_LIMIT
            ),
            measured: format!("max in flight {m}"),
            met: m > FUNNEL_LIMIT && m <= HOSTS * FUNNEL_LIMIT,
        }),
        None => v.push(not_run("resilient", all)),
    }
    vec![VariantGoals {
        variant: "resilient-redis".into(),
        verdicts: v,
    }]
}

fn not_run(name: &str, all: &[VariantSummary]) -> Verdict {
    Verdict {
        what: format!("{name} ran"),
        measured: all
            .iter()
            .find(|v| v.name == name)
            .and_then(|v| v.skipped.clone())
            .unwrap_or_else(|| "not among the variants".into()),
        met: false,
    }
}

/// The CI properties: the same, robust in 5 s phases (the Redis funnel's bound is exact; 50
/// req/s against a slow upstream fills both hosts' funnels; quick runs serve 97 % of the slow
/// upstream's capacity on Redis, where 70 % is asked as in `slowdown`'s check).
pub fn check(p: &Params, all: &[VariantSummary]) -> Vec<Verdict> {
    verdicts(p, all, 0.7).remove(0).verdicts
}

/// The report's section: per phase, the upstream's concurrency in total and per host, and the
/// goodput, for both variants; and the Redis fallbacks counted by the extension.
pub fn section(p: &Params, runs: &[VariantRun], all: &[VariantSummary], markdown: bool) -> String {
    let mut out = String::new();
    let ran: Vec<(&VariantRun, &VariantSummary)> = runs
        .iter()
        .zip(all)
        .filter(|(r, s)| r.skipped.is_none() && s.phases.len() == 3)
        .collect();
    if ran.is_empty() {
        return out;
    }
    let rows: Vec<Vec<PhaseRow>> = ran.iter().map(|(r, s)| phase_rows(p, r, s)).collect();
    if markdown {
        let _ = writeln!(
            out,
            "## The upstream's concurrency on two hosts\n\n\
             From the upstream's own rows (an attempt is in flight from its arrival to the end of its service: \
             queued or in service; the upstream serves {} at once and queues the rest). Hosts by the attempt's \
             `X-Request-Id` (`w-a-…`, `w-b-…`).\n\n\
             | phase | variant | max in flight (both hosts) | host a / host b | max in service / queue | attempts a / b | goodput | slots busy |\n\
             |---|---|---|---|---|---|---|---|",
            p.capacity
        );
    } else {
        let _ = writeln!(
            out,
            "== two hosts: the upstream's concurrency (its own rows) =="
        );
    }
    let names = p.phase_names();
    for (i, phase) in names.iter().enumerate() {
        for (k, (r, _)) in ran.iter().enumerate() {
            let x = &rows[k][i];
            let line = [
                phase.to_string(),
                r.name.clone(),
                x.in_flight.to_string(),
                format!("{} / {}", x.per_host[0], x.per_host[1]),
                format!("{} / {}", x.in_service, x.queue),
                format!("{} / {}", x.attempts_per_host[0], x.attempts_per_host[1]),
                format!("{:.1}/s", x.goodput_rps),
                format!("{:.0} %", 100.0 * x.utilization),
            ];
            if markdown {
                let _ = writeln!(out, "| {} |", line.join(" | "));
            } else {
                let _ = writeln!(
                    out,
                    "  {:<13} {:<16} in flight {:>2} (a {} / b {}), in service/queue {}, attempts a/b {}, goodput {}, slots busy {}",
                    line[0], line[1], line[2], x.per_host[0], x.per_host[1], line[4], line[5], line[6], line[7]
                );
            }
        }
    }
    let fallbacks: Vec<String> = ran
        .iter()
        .filter_map(|(_, s)| {
            let m = s.metrics.as_ref()?;
            let n = |h: &str| {
                m.pointer(&format!("/hosts/{h}/snapshot/shipping/backend_fallbacks"))
                    .and_then(|x| x.as_u64())
            };
            Some(format!(
                "{}: {} / {}",
                s.name,
                n("a").map_or("–".into(), |x| x.to_string()),
                n("b").map_or("–".into(), |x| x.to_string())
            ))
        })
        .collect();
    let _ = writeln!(
        out,
        "{}Redis fallbacks counted by the extension (`backend_fallbacks`, host a / host b): {}.{}",
        if markdown { "\n" } else { "  " },
        if fallbacks.is_empty() {
            "no snapshot".to_string()
        } else {
            fallbacks.join("; ")
        },
        if markdown {
            " Host a's php-fpm alone is behind `/fpm-status`: the FPM rows of the per-phase tables are host a's.\n"
        } else {
            "\n"
        }
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(arrival: f64, end: f64, id: &str) -> UpstreamAttempt {
        UpstreamAttempt {
            arrival_s: arrival,
            start_s: Some(arrival),
            end_s: Some(end),
            gone: false,
            status: Some(200),
            unserved: false,
            background: false,
            call: Some(id.into()),
        }
    }

    #[test]
    fn in_flight_counts_what_was_inside_at_the_window_start_and_ends_before_arrivals() {
        let rows = [
            at(0.0, 2.0, "w-a-1"),
            at(0.5, 1.0, "w-b-2"),
            // Arrives as the one before ends: not two at once.
            at(1.0, 3.0, "w-b-3"),
            at(2.5, 4.0, "w-a-4"),
        ];
        assert_eq!(max_in_flight(rows.iter(), 0.0, 5.0), 2);
        // Inside at 1.5: rows 1 and 3, carried into the window.
        assert_eq!(max_in_flight(rows.iter(), 1.5, 1.6), 2);
        assert_eq!(max_in_flight(rows.iter(), 3.5, 5.0), 1);
        assert_eq!(max_in_flight(rows.iter(), 4.5, 5.0), 0);
        let b = |a: &&UpstreamAttempt| host_of(a) == Some('b');
        assert_eq!(max_in_flight(rows.iter().filter(b), 0.0, 5.0), 1);
        assert_eq!(
            host_of(&at(0.0, 1.0, "w-0123abcd")),
            None,
            "one host: no host in the id"
        );
    }

    #[test]
    fn two_hosts_is_named_not_part_of_all_and_runs_both_backends() {
        let parse = |a: &[&str]| Params::from_args(a.iter().map(|s| s.to_string())).unwrap();
        assert!(!parse(&["--all"]).scenarios.contains(&Scenario::TwoHosts));
        // make lab-check's list.
        let mut p = parse(&[
            "--quick",
            "--scenario",
            "slowdown,errors,outage,mixed,two-hosts",
        ]);
        assert_eq!(p.scenarios.len(), 5);
        p.set_scenario(Scenario::TwoHosts);
        assert_eq!(p.variants, VARIANTS);
        assert!(p.bad_is_slow() && is_resilient("resilient-redis"));
        assert_eq!(p.funnel_wait_ms_of("resilient-redis"), Some(50));
    }

    /// The bound alone holds for a funnel that serves nothing (0 in flight is under 4): the
    /// check also wants resilient-redis to serve the slow upstream. Before, a Redis funnel
    /// that leaked every slot, or refused every call, passed.
    #[test]
    fn a_redis_funnel_that_serves_nothing_fails_the_check() {
        let p = crate::goals::tests::params(&["--quick", "--scenario", "two-hosts"]);
        let mut redis = crate::goals::tests::served_everything("resilient-redis", 50.0, 1.0);
        let shm = crate::goals::tests::served_everything("resilient", 50.0, 1.0);
        let goodput = |v: &[Verdict]| {
            v.iter()
                .find(|x| x.what.starts_with("resilient-redis goodput (slow) ≥ 70 %"))
                .map(|x| x.met)
        };
        let both = [redis.clone(), shm.clone()];
        assert_eq!(
            goodput(&check(&p, &both)),
            Some(true),
            "{:#?}",
            check(&p, &both)
        );
        redis.phases[1].goodput_rps = 0.0;
        let v = check(&p, &[redis, shm]);
        assert_eq!(goodput(&v), Some(false), "{v:#?}");
        assert!(
            v[0].met,
            "the bound alone is met by a funnel that serves nothing"
        );
    }

    #[test]
    fn metrics_of_both_hosts_add_up() {
        let mut a =
            serde_json::json!({"shipping": {"attempts": 3, "breaker": {"state": "closed"}}});
        let b = serde_json::json!({"shipping": {"attempts": 4, "backend_fallbacks": 1}});
        add_numbers(&mut a, &b);
        assert_eq!(a["shipping"]["attempts"], 7);
        assert_eq!(a["shipping"]["backend_fallbacks"], 1);
        assert_eq!(a["shipping"]["breaker"]["state"], "closed");
    }
}
