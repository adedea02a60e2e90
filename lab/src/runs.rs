//! The run folders under the output directory, `run-YYYYMMDD-HHMMSS-PID`: their names, and
//! pruning the old ones without touching anything else there.

use std::path::Path;

/// The folder of a run started at `stamp` ("YYYY-MM-DD HH:MM:SS") by the lab `pid`: the pid
/// keeps apart two runs started in the same second.
pub fn folder_name(stamp: &str, pid: u32) -> String {
    format!(
        "run-{}-{pid}",
        stamp.replace([':', '-'], "").replace(' ', "-")
    )
}

/// A lab run's folder: `run-` 8 digits `-` 6 digits, then `-PID` (runs before the pid was
/// added have none).
pub fn is_run_folder(name: &str) -> bool {
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    let Some(rest) = name.strip_prefix("run-") else {
        return false;
    };
    let parts: Vec<&str> = rest.split('-').collect();
    match parts[..] {
        [day, time] => digits(day, 8) && digits(time, 6),
        [day, time, pid] => {
            digits(day, 8) && digits(time, 6) && !pid.is_empty() && digits(pid, pid.len())
        }
        _ => false,
    }
}

/// Keeps `keep` run folders under `out`: `current`, and the newest others by name (so by start
/// time). Nothing that is not a run folder is touched.
pub fn prune(out: &Path, keep: usize, current: &Path) {
    let Ok(rd) = std::fs::read_dir(out) else {
        return;
    };
    let mut others: Vec<_> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| is_run_folder(&e.file_name().to_string_lossy()))
        .map(|e| e.path())
        .filter(|p| p.file_name() != current.file_name())
        .collect();
    others.sort();
    let drop = others.len().saturating_sub(keep.saturating_sub(1));
    for old in &others[..drop] {
        let _ = std::fs::remove_dir_all(old);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_the_time_and_the_pid_and_only_lab_runs_match() {
        let name = folder_name("2026-12-06 09:12:55", 4548);
        assert_eq!(name, "run-20261206-091255-4548");
        assert!(is_run_folder(&name));
        assert!(is_run_folder("run-20261206-091255"), "older runs");
        for other in [
            "run-scripts",
            "run-delta-notes",
            "run-2024-notes",
            "run-20261206-091255-",
            "run-20261206-091255-x",
            "run-20261206-0912",
            "run-20261206-091255-1-2",
            "xrun-20261206-091255",
        ] {
            assert!(!is_run_folder(other), "{other}");
        }
    }

    #[test]
    fn pruning_keeps_the_current_run_and_the_newest_others() {
        let out = std::env::temp_dir().join(format!("resilient-lab-prune-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let names = [
            "run-20200101-000000",
            "run-20200102-000000-1",
            "run-20200103-000000-2",
            "run-29990101-000000-3",
            "run-29990102-000000-4",
            "run-scripts",
        ];
        for n in names {
            std::fs::create_dir_all(out.join(n)).unwrap();
        }
        std::fs::write(out.join("run-20190101-000000-9"), "a file, not a run").unwrap();
        let current = out.join("run-20261206-091255-5");
        std::fs::create_dir_all(&current).unwrap();
        prune(&out, 3, &current);
        let mut left: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "run-20190101-000000-9",
                "run-20261206-091255-5",
                "run-29990101-000000-3",
                "run-29990102-000000-4",
                "run-scripts"
            ]
        );
        let _ = std::fs::remove_dir_all(&out);
    }
}
