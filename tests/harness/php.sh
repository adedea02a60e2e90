#!/usr/bin/env bash
# The one way the test suites, the fixtures and the benchmarks run PHP.
#
# `php -n` (no php.ini, so the machine's configuration cannot change a result), the shared
# extensions the suites need loaded explicitly (Debian builds them as .so files; igbinary must come
# before redis), the extension under test, and a shared-memory segment path of this run only, so
# two runs (or a run and a production process of the same user) can never disturb each other.
#
# Environment (all optional):
#   RESILIENT_SO        the extension; default target/release/libresilient.so
#   RESILIENT_RUN_ID    id of this test run; default "manual"
#   RESILIENT_SHM_PATH  segment file; default /dev/shm/resilient-test-<run id>-main.shm
#   PHP_BIN             the PHP binary; default php8.2 (the extension is built for PHP 8.2's API)
# Further `-d` flags given by the caller come after ours, so they win.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
so="${RESILIENT_SO:-$root/target/release/libresilient.so}"
run_id="${RESILIENT_RUN_ID:-manual}"
shm="${RESILIENT_SHM_PATH:-/dev/shm/resilient-test-$run_id-main.shm}"

# Shared extensions in Debian's load order (see /etc/php/8.2/mods-available/*.ini priorities).
exts=(ctype iconv mbstring posix tokenizer xml dom simplexml xmlreader xmlwriter curl igbinary apcu redis)

args=(-n -d error_reporting=-1 -d display_errors=stderr -d display_startup_errors=1 -d log_errors=0
      -d memory_limit=512M -d zend.assertions=1)
for e in "${exts[@]}"; do args+=(-d "extension=$e"); done
args+=(-d "extension=$so" -d "resilient.shm_path=$shm")

php_bin="${PHP_BIN:-$(command -v php8.2 || command -v php)}"
exec "$php_bin" "${args[@]}" "$@"
