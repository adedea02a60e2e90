#!/usr/bin/env bash
# Start or wait for a local nginx of the HTTP benchmarks: plain HTTP (nginx.conf.template) or,
# with `tls`, HTTPS and HTTP/2 (nginx-tls.conf.template, certificates from tls-certs.sh in DIR).
#
#   bench/http/nginx.sh serve DIR PORT [tls]   write DIR/nginx.conf and exec nginx in the
#                                              foreground on 127.0.0.1:PORT (the caller
#                                              backgrounds it, keeps the pid and stops it with
#                                              SIGTERM: nginx's fast shutdown)
#   bench/http/nginx.sh wait DIR PORT [tls]    wait (≤ 5 s) until it answers 200 with the JSON
#                                              body (with tls: over https, trusting DIR/ca.pem
#                                              only); on failure print DIR/error.log and exit 1
#
# bench/run.sh uses both and exports http://127.0.0.1:PORT as RESILIENT_BENCH_HTTP_URL, and
# for the tls one https://127.0.0.1:PORT as RESILIENT_BENCH_HTTPS_URL.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cmd="${1:?usage: nginx.sh serve|wait DIR PORT [tls]}"
dir="${2:?DIR missing}"
port="${3:?PORT missing}"
mode="${4:-plain}"

case "$mode" in
plain) template="$here/nginx.conf.template"; url="http://127.0.0.1:$port/" ;;
tls)   template="$here/nginx-tls.conf.template"; url="https://127.0.0.1:$port/" ;;
*)     echo "nginx.sh: unknown mode '$mode' (plain or tls)" >&2; exit 2 ;;
esac

case "$cmd" in
serve)
    mkdir -p "$dir/tmp"
    sed -e "s|@DIR@|$dir|g" -e "s|@PORT@|$port|g" "$template" >"$dir/nginx.conf"
    # -e: nginx opens its error log before reading the config; keep it out of /var/log.
    exec nginx -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf"
    ;;
wait)
    for _ in $(seq 100); do
        body="$(php -n -r '$c = stream_context_create(["http" => ["timeout" => 0.5],
                "ssl" => ["cafile" => $argv[2], "verify_peer" => true, "verify_peer_name" => true]]);
            echo @file_get_contents($argv[1], false, $c);' "$url" "$dir/ca.pem" 2>/dev/null || true)"
        [ "$body" = '{"ok":true}' ] && exit 0
        sleep 0.05
    done
    echo "bench: nginx did not answer on $url" >&2
    cat "$dir/error.log" >&2 2>/dev/null || true
    exit 1
    ;;
*)
    echo "usage: nginx.sh serve|wait DIR PORT [tls]" >&2
    exit 2
    ;;
esac
