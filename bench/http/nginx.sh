#!/usr/bin/env bash
# Start or wait for the local nginx of the HTTP benchmarks (config: nginx.conf.template).
#
#   bench/http/nginx.sh serve DIR PORT   write DIR/nginx.conf and exec nginx in the foreground on
#                                        127.0.0.1:PORT (the caller backgrounds it, keeps the pid
#                                        and stops it with SIGTERM: nginx's fast shutdown)
#   bench/http/nginx.sh wait DIR PORT    wait (≤ 5 s) until it answers 200 with the JSON body;
#                                        on failure print DIR/error.log and exit 1
#
# bench/run.sh uses both and exports http://127.0.0.1:PORT as RESILIENT_BENCH_HTTP_URL.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cmd="${1:?usage: nginx.sh serve|wait DIR PORT}"
dir="${2:?DIR missing}"
port="${3:?PORT missing}"

case "$cmd" in
serve)
    mkdir -p "$dir/tmp"
    sed -e "s|@DIR@|$dir|g" -e "s|@PORT@|$port|g" "$here/nginx.conf.template" >"$dir/nginx.conf"
    # -e: nginx opens its error log before reading the config; keep it out of /var/log.
    exec nginx -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf"
    ;;
wait)
    for _ in $(seq 100); do
        body="$(php -n -r '$c = stream_context_create(["http" => ["timeout" => 0.5]]);
            echo @file_get_contents($argv[1], false, $c);' "http://127.0.0.1:$port/" 2>/dev/null || true)"
        [ "$body" = '{"ok":true}' ] && exit 0
        sleep 0.05
    done
    echo "bench: nginx did not answer on 127.0.0.1:$port" >&2
    cat "$dir/error.log" >&2 2>/dev/null || true
    exit 1
    ;;
*)
    echo "usage: nginx.sh serve|wait DIR PORT" >&2
    exit 2
    ;;
esac
