#!/usr/bin/env bash
# `make bench`: starts the services the benchmarks compare against on 127.0.0.1 (a throw-away
# redis-server, nginx, and nginx with TLS + HTTP/2, each on a free port), runs every
# bench/cases/*.php in ONE PHP process and prints µs per operation side by side with ratios and
# the targets. Everything started here is stopped on exit, also on failure or Ctrl-C.
#
#   bench/run.sh [group...]        e.g. bench/run.sh funnel, bench/run.sh https-pool
#   BENCH_SCALE=0.2 bench/run.sh   fewer iterations (quick look)
#
# Adding a benchmark = adding a file to bench/cases/ (see bench/run.php for the format). A
# benchmark that needs another local server gets it started here, next to redis, with its port
# exported in an environment variable.
set -euo pipefail
cd "$(dirname "$0")/.."

# One CPU for every process of the run (PHP, nginx, redis-server) unless BENCH_PIN=0. On this
# kind of VM a request that crosses to an idle core waits for that core to wake up (measured:
# sequential GET to local nginx ≈ 92 µs with the machine idle and the processes spread, ≈ 17 µs
# pinned or with the other core busy), which swamps the per-call overheads being compared and
# makes every client look alike. Pinning treats every contestant the same way.
if [[ "${BENCH_PIN:-1}" != 0 && -z "${RESILIENT_BENCH_PINNED:-}" ]] && command -v taskset >/dev/null; then
    export RESILIENT_BENCH_PINNED=1
    exec taskset -c 0 "$0" "$@"
fi
if [[ -n "${RESILIENT_BENCH_PINNED:-}" ]]; then
    echo "(all processes of this run pinned to CPU 0; BENCH_PIN=0 lets them spread)"
fi

run_id="$(date -u +%Y%m%dT%H%M%S)-$$"
run_dir="$PWD/bench/.run/$run_id"
mkdir -p "$run_dir"
pids=()

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    done
    rm -f /dev/shm/resilient-bench-"$run_id"*.shm
    rm -rf "$run_dir"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
    php -n -r '$s = stream_socket_server("tcp://127.0.0.1:0"); $n = stream_socket_get_name($s, false); echo substr($n, strrpos($n, ":") + 1);'
}

# --- redis-server (Laravel's Redis::funnel and cache store) ---
redis_port="$(free_port)"
redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no --dir "$run_dir" \
    --daemonize no --loglevel warning --logfile "$run_dir/redis.log" &
pids+=($!)
for _ in $(seq 100); do
    redis-cli -h 127.0.0.1 -p "$redis_port" ping >/dev/null 2>&1 && break
    sleep 0.05
done
redis-cli -h 127.0.0.1 -p "$redis_port" ping >/dev/null || { echo "bench: redis-server did not start" >&2; cat "$run_dir/redis.log" >&2; exit 1; }
export RESILIENT_BENCH_REDIS_PORT="$redis_port"

# --- nginx: the one HTTP server of the http-* groups (bench/http/, owned by the HTTP benches) ---
http_port="$(free_port)"
bench/http/nginx.sh serve "$run_dir/nginx" "$http_port" &
pids+=($!)
bench/http/nginx.sh wait "$run_dir/nginx" "$http_port"
export RESILIENT_BENCH_HTTP_URL="http://127.0.0.1:$http_port"
# --- end nginx ---

# --- nginx with TLS and HTTP/2: the https-pool group (a second nginx, so the plain one's config
# and figures stay as they are; its certificates come from a test CA made fresh for this run) ---
tls_dir="$run_dir/nginx-tls"
bench/http/tls-certs.sh "$tls_dir"
https_port="$(free_port)"
bench/http/nginx.sh serve "$tls_dir" "$https_port" tls &
pids+=($!)
bench/http/nginx.sh wait "$tls_dir" "$https_port" tls
export RESILIENT_BENCH_HTTPS_URL="https://127.0.0.1:$https_port"
export RESILIENT_BENCH_HTTPS_CA="$tls_dir/ca.pem"
export RESILIENT_BENCH_HTTPS_LOG="$tls_dir/access.log"
# --- end nginx with TLS ---

export RESILIENT_SHM_PATH="/dev/shm/resilient-bench-$run_id.shm"
tests/harness/php.sh -d apc.enable_cli=1 -d apc.shm_size=64M bench/run.php "$@"
