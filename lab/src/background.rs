//! The `mixed` scenario's background workers: real PHP CLI processes (lab/app/bin/background.php,
//! console context) calling the same upstream in closed loops through the variant's client,
//! with the same extensions, ini and shared-memory segment as the variant's php-fpm. Each
//! writes one CSV line per call; they stop by themselves at the end of the load (and are
//! stopped for sure when their guards drop).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::params::Params;
use crate::procs::Child;
use crate::sut::{php_ini, SystemUnderTest};

/// One background call, on the lab's clock.
#[derive(Debug, Clone, Serialize)]
pub struct BgCall {
    pub worker: u32,
    pub start_s: f64,
    pub latency_s: f64,
    /// live | fallback | error
    pub outcome: String,
    pub reason: String,
}

/// The running workers.
pub struct Workers {
    children: Vec<Child>,
    outputs: Vec<(u32, PathBuf)>,
}

impl Workers {
    /// Starts `p.bg_workers` workers that call from `from_unix_ms` (PHP starts up meanwhile)
    /// until `until_unix_ms`.
    pub fn start(
        p: &Params,
        variant: &str,
        dir: &Path,
        sut: &SystemUnderTest,
        from_unix_ms: f64,
        until_unix_ms: f64,
    ) -> Result<Workers, String> {
        let script = p.root.join("lab/app/bin/background.php");
        let mut w = Workers {
            children: Vec::new(),
            outputs: Vec::new(),
        };
        for i in 0..p.bg_workers {
            let out = dir.join(format!("background-{i}.csv"));
            let mut cmd = Command::new("php");
            cmd.arg("-n");
            for d in php_ini(p, sut.shm_path.as_deref()) {
                cmd.args(["-d", &d]);
            }
            cmd.args([
                "-d",
                &format!("error_log={}", dir.join("php-cli-error.log").display()),
            ]);
            cmd.arg(&script);
            cmd.env_clear()
                .env("PATH", "/usr/bin:/bin")
                .env("LAB_VARIANT", variant)
                .env("LAB_UPSTREAM_URL", &sut.upstream_url)
                .env("LAB_REDIS_PORT", sut.redis_port.to_string())
                .env(
                    "LAB_FUNNEL_WAIT_MS",
                    p.funnel_wait_ms_of(variant).unwrap_or(0).to_string(),
                )
                .env("LAB_FUNNEL_RESERVE", p.reserve_of(variant).to_string())
                .env("LAB_BUDGET_RATIO", p.budget.ratio.to_string())
                .env("LAB_BUDGET_FLOOR", p.budget.floor.to_string())
                .env("LAB_BUDGET_WINDOW", p.budget.window_s.to_string())
                .env(
                    "LAB_FUNNEL_SHARE",
                    if p.share_of(variant) { "1" } else { "0" },
                )
                .env("LAB_BG_DEADLINE_MS", p.bg_deadline_ms.to_string())
                .env("LAB_BG_FROM_UNIX_MS", format!("{from_unix_ms:.0}"))
                .env("LAB_BG_UNTIL_UNIX_MS", format!("{until_unix_ms:.0}"))
                .env("LAB_BG_ID", i.to_string())
                .env("LAB_BG_OUT", &out);
            w.children.push(Child::spawn(
                &format!("background worker {i}"),
                cmd,
                &dir.join("background.log"),
            )?);
            w.outputs.push((i, out));
        }
        Ok(w)
    }

    /// Waits (up to `grace`) for the workers to finish their last call, stops any that did not,
    /// and reads every call, on the lab's clock (`t0_unix_ms` = the lab's t0).
    pub fn finish(mut self, grace: Duration, t0_unix_ms: f64) -> Vec<BgCall> {
        let until = Instant::now() + grace;
        while Instant::now() < until && self.children.iter_mut().any(|c| c.check_alive().is_ok()) {
            std::thread::sleep(Duration::from_millis(50));
        }
        for c in &mut self.children {
            c.stop();
        }
        let mut calls = Vec::new();
        for (worker, path) in &self.outputs {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            calls.extend(parse(*worker, &text, t0_unix_ms));
        }
        calls.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
        calls
    }
}

/// `start_unix_ms,latency_ms,outcome,reason` lines; a torn last line is skipped.
fn parse(worker: u32, text: &str, t0_unix_ms: f64) -> Vec<BgCall> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.splitn(4, ',');
            let start: f64 = f.next()?.parse().ok()?;
            let latency: f64 = f.next()?.parse().ok()?;
            let outcome = f.next()?.to_string();
            let reason = f.next()?.to_string();
            Some(BgCall {
                worker,
                start_s: (start - t0_unix_ms) / 1000.0,
                latency_s: latency / 1000.0,
                outcome,
                reason,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_on_the_labs_clock_and_a_torn_line_is_skipped() {
        let calls = parse(
            3,
            "1000500.000,121.5,live,\n1000700.000,0.8,fallback,funnel_full\n1000900.0,12",
            1_000_000.0,
        );
        assert_eq!(calls.len(), 2);
        assert_eq!((calls[0].worker, calls[0].start_s), (3, 0.5));
        assert!((calls[0].latency_s - 0.1215).abs() < 1e-9);
        assert_eq!(
            (calls[1].outcome.as_str(), calls[1].reason.as_str()),
            ("fallback", "funnel_full")
        );
    }
}
