#!/usr/bin/env bash
# `make install`: puts the built extension where PHP looks for it and enables it by name.
#
#   - target/release/libresilient.so → `php-config --extension-dir`/resilient.so
#   - /etc/php/<version>/mods-available/resilient.ini with `extension=resilient`
#   - enabled for every SAPI installed (Debian's `phpenmod -s ALL`); with DESTDIR, conf.d links
#     for the CLI and FPM
#
# DESTDIR=/some/root installs under that root instead (nothing outside it is touched): how
# the tests check the layout without changing the machine's PHP.
set -euo pipefail
cd "$(dirname "$0")/.."

so=target/release/libresilient.so
[ -f "$so" ] || { echo "install: $so is missing: run 'make build' first" >&2; exit 1; }
command -v php-config >/dev/null || { echo "install: php-config not found (apt-get install php8.2-dev)" >&2; exit 1; }

destdir="${DESTDIR:-}"
ext_dir="$(php-config --extension-dir)"
version="$(php-config --version | cut -d. -f1,2)"
conf_root="/etc/php/$version"
ini="$conf_root/mods-available/resilient.ini"

install -d "$destdir$ext_dir" "$destdir$conf_root/mods-available"
install -m 0644 "$so" "$destdir$ext_dir/resilient.so"
cat > "$destdir$ini" <<INI
; resilient: a resilient HTTP client and host-wide limits in shared memory.
; priority=20
extension=resilient
INI

if [ -z "$destdir" ] && command -v phpenmod >/dev/null; then
    phpenmod -v "$version" -s ALL resilient
    sapis="every SAPI"
else
    sapis="cli and fpm"
    for sapi in cli fpm; do
        install -d "$destdir$conf_root/$sapi/conf.d"
        ln -sf "$ini" "$destdir$conf_root/$sapi/conf.d/20-resilient.ini"
    done
fi
echo "install: $destdir$ext_dir/resilient.so, enabled by $destdir$ini (extension=resilient) for $sapis"
if [ -z "$destdir" ]; then
    echo "install: restart php-fpm to load it in the workers (e.g. 'service php$version-fpm restart')"
fi
