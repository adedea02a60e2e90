#!/usr/bin/env bash
# Builds the extension at a git revision (default HEAD~1) for `make bench BASELINE=REV`, in a
# worktree and target dir of its own under bench/.baseline/ (the current build is untouched),
# and prints the path of its libresilient.so. Rebuilds only when the revision changed.
#
#   BENCH_BASELINE_SO=$(bench/baseline.sh HEAD~1) bench/run.sh funnel http-seq http-pool
set -euo pipefail
cd "$(dirname "$0")/.."
rev="$(git rev-parse --verify "${1:-HEAD~1}^{commit}")"
dir="$PWD/bench/.baseline"
mkdir -p "$dir"
if [[ "$(cat "$dir/rev" 2>/dev/null)" != "$rev" ]]; then
    git worktree remove --force "$dir/src" 2>/dev/null || rm -rf "$dir/src"
    git worktree prune
    git worktree add --detach "$dir/src" "$rev" >&2
    (cd "$dir/src" && CARGO_TARGET_DIR="$dir/target" cargo build --release -p resilient >&2)
    echo "$rev" > "$dir/rev"
fi
echo "$dir/target/release/libresilient.so"
