#!/usr/bin/env bash
# The retry-storm lab (`make lab`): installs what is missing, builds, runs the experiment
# (naive, laravel, resilient, resilient-failfast side by side) and leaves lab/out/report.md + lab/out/timelines.png.
#
#   bash lab/run.sh                  full run of the seed's slowdown (3 × 20 s phases per variant, ≈ 7 min)
#   bash lab/run.sh --scenario errors|outage|mixed, or --all: the failure scenarios (≈ 6 min each)
#   bash lab/run.sh --quick --check --all  the first four scenarios, 5 s phases, exit non-zero unless the robust
#                                    properties hold (CI, `make lab-check`, adds capacity-shift and two-hosts)
#   bash lab/run.sh --help           every knob (rate, capacity, latencies, phases, workers, deadline)
#
# Every process the lab starts (upstream simulator, redis-server, php-fpm, nginx) is a child of
# resilient-lab, which stops them on exit, error or signal, and each gets SIGTERM from the kernel
# should the lab itself be SIGKILLed; this script also runs the lab in its own process group and
# kills that whole group on exit, Ctrl-C or failure as a last resort.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# Only once: ext-php-rs's build script reruns (a rebuild) whenever PATH changes.
case ":$PATH:" in *":$HOME/.cargo/bin:"*) ;; *) export PATH="$HOME/.cargo/bin:$PATH" ;; esac

for a in "$@"; do
    if [ "$a" = "-h" ] || [ "$a" = "--help" ]; then
        [ -x target/release/resilient-lab ] && exec target/release/resilient-lab --help
        sed -n '2,14p' "$0"; exit 0
    fi
done

# --- dependencies -------------------------------------------------------------------------
# The project's one list (PHP, php-fpm, nginx, redis, Laravel 8, Guzzle, Rust, and the
# fontconfig/freetype/font the plots need): only what is missing is installed.
.ci/deps.sh

# --- build ----------------------------------------------------------------------------------
# The whole workspace, as `make build` does: building a subset with -p unifies features
# differently and would recompile shared dependencies (minutes on 2 cores) for nothing.
cargo build --release --workspace

# --- run --------------------------------------------------------------------------------------
lab_pid=""
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ -n "$lab_pid" ] && kill -0 "$lab_pid" 2>/dev/null; then
        kill -TERM -- "-$lab_pid" 2>/dev/null || true
        # The lab stops its children one by one, each within 3 s (lab/src/procs.rs): give it
        # time for all of them, since the group kill below cannot reach php-fpm (a session of
        # its own).
        for _ in $(seq 1 300); do
            kill -0 "$lab_pid" 2>/dev/null || break
            sleep 0.1
        done
    fi
    # Whatever is left of the lab's process group (children of a killed lab), for sure.
    [ -n "$lab_pid" ] && kill -KILL -- "-$lab_pid" 2>/dev/null || true
    [ -n "$lab_pid" ] && rm -f /dev/shm/resilient-lab-"$lab_pid"-*.shm
    # The run's unix sockets (lab/src/sockets.rs), should the lab have been killed.
    [ -n "$lab_pid" ] && rm -rf /tmp/resilient-lab-"$lab_pid"
    exit "$rc"
}
trap cleanup EXIT
trap 'echo "lab: interrupted" >&2; exit 130' INT TERM

set -m   # the lab gets its own process group, so cleanup can kill the whole group
target/release/resilient-lab --root "$root" "$@" &
lab_pid=$!
set +m
set +e
wait "$lab_pid"
rc=$?
set -e
exit "$rc"
