#!/usr/bin/env bash
# Runs the PHPUnit suites the one supported way, and cleans up after them whatever happens.
#
#   tests/harness/phpunit.sh [phpunit args...]     e.g. --testsuite Shm, --filter Funnel
#
# Gives the run an id, a scratch dir (tests/.run/<id>) and its own shared-memory files
# (/dev/shm/resilient-test-<id>-*.shm). On exit (success, failure, Ctrl-C, TERM) it kills every
# process the tests recorded under tests/.run/<id>/pids (php children, php-fpm, nginx — each
# by its own pid, with its process group for the masters' workers), removes the shm files and,
# when the run passed, the scratch dir. Set RESILIENT_KEEP_RUN=1 to keep the scratch dir.
set -euo pipefail
cd "$(dirname "$0")/../.."

export RESILIENT_RUN_ID="${RESILIENT_RUN_ID:-$(date -u +%Y%m%dT%H%M%S)-$$}"
export RESILIENT_RUN_DIR="$PWD/tests/.run/$RESILIENT_RUN_ID"
export RESILIENT_SHM_PATH="/dev/shm/resilient-test-$RESILIENT_RUN_ID-main.shm"
mkdir -p "$RESILIENT_RUN_DIR/pids"

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    # TERM first (php-fpm and nginx masters stop their own workers), then KILL what is left;
    # a master that ignored TERM gets its workers killed by parent pid before itself.
    local f pid
    for f in "$RESILIENT_RUN_DIR"/pids/*; do
        [ -e "$f" ] && kill -TERM "$(basename "$f")" 2>/dev/null || true
    done
    sleep 0.5
    for f in "$RESILIENT_RUN_DIR"/*/fpm.pid "$RESILIENT_RUN_DIR"/*/nginx.pid; do
        [ -e "$f" ] || continue
        pid="$(cat "$f")"
        if kill -0 "$pid" 2>/dev/null; then
            pkill -KILL -P "$pid" 2>/dev/null || true
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
    for f in "$RESILIENT_RUN_DIR"/pids/*; do
        [ -e "$f" ] && kill -KILL "$(basename "$f")" 2>/dev/null || true
    done
    rm -rf /dev/shm/resilient-test-"$RESILIENT_RUN_ID"-*
    if [ "$rc" -eq 0 ] && [ "${RESILIENT_KEEP_RUN:-0}" != 1 ]; then
        rm -rf "$RESILIENT_RUN_DIR"
    else
        echo "phpunit.sh: run files kept in $RESILIENT_RUN_DIR" >&2
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The suites' shared segment holds every name they use (each client name has an entry, for its
# metrics at least): created here with room for them all; the processes of the run attach to it
# whatever their resilient.shm_slots (an existing file keeps its own slot count).
tests/harness/php.sh -d resilient.shm_slots=4096 -d resilient.shm_required=1 -r 'Resilient\Funnel::degradedReason();'

# In the background so a TERM/INT reaches the trap at once (bash defers traps while a
# foreground child runs); PHPUnit's own pid is recorded with the others.
tests/harness/php.sh /usr/bin/phpunit -c phpunit.xml.dist "$@" &
echo > "$RESILIENT_RUN_DIR/pids/$!"
wait $!
