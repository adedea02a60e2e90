//! The lab's binary from the outside: its exit status, its run folders and its hold on the
//! output directory. The upstream binary given does not exist (or never listens), so every
//! variant fails before php-fpm or nginx would start: these tests need neither.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A fresh scratch directory of this test.
fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("resilient-lab-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The lab on `out` with one variant and the upstream binary `upstream`.
fn lab(out: &Path, upstream: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_resilient-lab"));
    cmd.args(["--quick", "--variants", "naive", "--upstream-bin", upstream])
        .arg("--root")
        .arg(root())
        .arg("--out")
        .arg(out)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The run folder the lab named on its `raw:` line.
fn run_folder(o: &Output) -> PathBuf {
    let out = String::from_utf8_lossy(&o.stdout);
    let raw = out
        .lines()
        .find_map(|l| l.split_once("  raw: ").map(|(_, r)| r.trim().to_string()))
        .unwrap_or_else(|| panic!("no raw: line in\n{}", text(o)));
    PathBuf::from(raw)
}

#[test]
fn a_run_whose_variants_did_not_run_fails_and_says_which() {
    let out = scratch("failed");
    let o = lab(&out, "/nonexistent").output().unwrap();
    let all = text(&o);
    assert!(!o.status.success(), "exit 0 although nothing ran:\n{all}");
    let line = all
        .lines()
        .find(|l| l.contains("did not run") && l.starts_with("lab:"))
        .unwrap_or_else(|| panic!("no closing line naming the failed variants:\n{all}"));
    assert!(line.contains("slowdown/naive"), "{line}");
    let _ = std::fs::remove_dir_all(&out);
}

/// An upstream simulator that exits at once is said at once, with its exit status. Before,
/// the lab waited the whole 10 s for its port first.
#[test]
fn an_upstream_that_exits_at_start_is_said_at_once() {
    let out = scratch("exits");
    let started = std::time::Instant::now();
    let o = lab(&out, "/bin/false").output().unwrap();
    let all = text(&o);
    assert!(!o.status.success(), "{all}");
    assert!(
        all.contains(
            "[naive] FAILED: resilient-upstream exited early: exit status: 1 (see upstream.log)"
        ),
        "{all}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(8),
        "took {:?}",
        started.elapsed()
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn pruning_keeps_folders_that_are_not_lab_runs_and_the_run_that_just_started() {
    let out = scratch("prune");
    let unrelated = ["run-scripts", "run-notes", "run-2024-notes"];
    for d in unrelated {
        std::fs::create_dir_all(out.join(d)).unwrap();
    }
    // Older runs (both name forms), and five stamped in the future (a clock set back): the run
    // that starts now sorts before those.
    let old = ["run-20200101-000000", "run-20200102-000000-77"];
    let future = (1..=5).map(|i| format!("run-2999010{i}-000000-{i}"));
    for d in old.iter().map(|s| s.to_string()).chain(future) {
        std::fs::create_dir_all(out.join(d)).unwrap();
    }
    let o = lab(&out, "/nonexistent").output().unwrap();
    let current = run_folder(&o);
    assert!(
        current.is_dir(),
        "the current run was deleted:\n{}",
        text(&o)
    );
    for d in unrelated {
        assert!(out.join(d).is_dir(), "{d} was deleted");
    }
    for d in old {
        assert!(!out.join(d).exists(), "{d} was kept");
    }
    let runs = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .count();
    assert_eq!(runs, unrelated.len() + 5, "five lab runs kept");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn each_run_has_a_folder_of_its_own() {
    let out = scratch("unique");
    let child = lab(&out, "/nonexistent").spawn().unwrap();
    let pid = child.id();
    let o = child.wait_with_output().unwrap();
    let name = run_folder(&o)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        name.starts_with("run-") && name.ends_with(&format!("-{pid}")),
        "{name}: two runs started in the same second would share it"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// Waits for `child` at most `secs`.
fn wait_output(mut child: Child, secs: u64) -> Output {
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    panic!("the lab did not finish within {secs} s");
}

#[test]
fn a_second_run_on_the_same_output_directory_is_refused_while_one_runs() {
    let out = scratch("lock");
    // An "upstream" that never listens: the first run waits for it (up to 10 s).
    let never = out.join("never-listens.sh");
    std::fs::write(&never, "#!/bin/sh\nexec sleep 30\n").unwrap();
    std::fs::set_permissions(&never, std::fs::Permissions::from_mode(0o755)).unwrap();
    let first = lab(&out.join("out"), never.to_str().unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    // Until the first run has made its run folder (it holds the directory from then on).
    while !std::fs::read_dir(out.join("out"))
        .map(|mut d| {
            d.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with("run-")))
        })
        .unwrap_or(false)
    {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the first run did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let second = lab(&out.join("out"), "/nonexistent").output().unwrap();
    let first = wait_output(first, 30);
    let msg = text(&second);
    assert!(!second.status.success(), "the second run ran:\n{msg}");
    assert!(
        msg.contains("another lab run") && msg.contains(&out.join("out").display().to_string()),
        "{msg}"
    );
    let reports = std::fs::read_dir(out.join("out"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("run-"))
        .count();
    assert_eq!(
        reports,
        1,
        "only the first run made a run folder:\n{}",
        text(&first)
    );
    let _ = std::fs::remove_dir_all(&out);
}
