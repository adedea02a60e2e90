#!/usr/bin/env bash
# Installs what building and testing need on Debian bookworm (run as root), skipping what is
# already there: `apt-get update` at most once, and only when something is missing. Idempotent.
set -euo pipefail

packages=(
    php8.2-cli php8.2-dev php8.2-fpm php8.2-curl php8.2-redis php8.2-apcu php8.2-mbstring php8.2-xml
    libclang-dev clang pkg-config phpunit nginx libfcgi-bin redis-server
    php-laravel-framework php-guzzlehttp-guzzle php-symfony-http-client wrk procps curl ca-certificates
    # the client's TLS and proxy suites (tests/Client): certificates made by openssl, a real forward proxy
    openssl tinyproxy
    # artisan in the Laravel fixture app (Symfony Console needs intl)
    php8.2-intl
    # the lab's plots (plotters draws text with fontconfig/freetype; the workspace build needs them)
    libfontconfig1-dev libfreetype-dev fonts-dejavu-core
    # tests/Metrics: promtool checks the exposition, a real Prometheus server scrapes it
    prometheus
)

missing=()
for p in "${packages[@]}"; do
    status="$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)"
    [ "$status" = installed ] || missing+=("$p")
done

if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "deps: missing packages: ${missing[*]} (run as root, or install them)" >&2
        exit 1
    fi
    echo "deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends "${missing[@]}"
    # Debian starts these services on install; the tests start their own on loopback.
    for svc in nginx redis-server php8.2-fpm tinyproxy prometheus; do
        if command -v service >/dev/null && service "$svc" status >/dev/null 2>&1; then
            service "$svc" stop >/dev/null 2>&1 || true
        fi
    done
else
    echo "deps: all Debian packages present"
fi

# Rust: Debian's rustc is too old for ext-php-rs; use rustup's toolchain.
# Only once: ext-php-rs's build script reruns (a rebuild) whenever PATH changes.
case ":$PATH:" in *":$HOME/.cargo/bin:"*) ;; *) export PATH="$HOME/.cargo/bin:$PATH" ;; esac
if ! command -v cargo >/dev/null; then
    echo "deps: installing Rust with rustup (minimal profile)"
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
fi
cargo --version
