#!/usr/bin/env bash
# `make install`: puts the built extension where PHP looks for it and enables it by name.
#
#   - target/release/libresilient.so → `php-config --extension-dir`/resilient.so
#   - /etc/php/<version>/mods-available/resilient.ini with `extension=resilient`, written only
#     when absent: an existing one is the user's (its `resilient.*` settings) and is kept as it
#     is, given an `extension=resilient` line only when nothing in it loads the extension (its
#     mode, owner and group kept: it may hold a Redis password; a symlink's target is written)
#   - enabled for every SAPI installed (Debian's `phpenmod -s ALL`); with DESTDIR, conf.d links
#     for the CLI and FPM
#   - a PHP without Debian's layout (no /etc/php/<version>: built from source, the official
#     Docker images): resilient.ini in the directory PHP scans (`php-config --ini-dir`), the
#     same rules for an existing one
#   - then, without DESTDIR, the PHP php-config belongs to (`php-config --php-binary`) must list
#     the extension in `php -m`, else the install fails saying so
#
# To uninstall: see the README's Install section.
#
# Each file is written to a temporary file beside it and renamed over it: a PHP process that
# starts during an upgrade loads the old file or the new one, never a half-written one (mapping
# a .so still being written ends in SIGBUS), and running processes keep the old one.
#
# DESTDIR=/some/root installs under that root instead (nothing outside it is touched): how
# the tests check the layout without changing the machine's PHP.
set -euo pipefail
# A relative DESTDIR is the caller's, not the repository's.
destdir="${DESTDIR:-}"
[ -z "$destdir" ] || destdir="$(realpath -m "$destdir")"
# DESTDIR=/ is the machine itself.
[ "$destdir" != / ] || destdir=""
cd "$(dirname "$0")/.."

so=target/release/libresilient.so
[ -f "$so" ] || { echo "install: $so is missing: run 'cargo build --release -p resilient' first" >&2; exit 1; }
command -v php-config >/dev/null || { echo "install: php-config not found (apt-get install php8.2-dev)" >&2; exit 1; }

ext_dir="$(php-config --extension-dir)"
version="$(php-config --version | cut -d. -f1,2)"
conf_root="/etc/php/$version"
if [ -d "$conf_root" ]; then
    debian=1
    ini="$conf_root/mods-available/resilient.ini"
else
    debian=""
    scan_dir="$(php-config --ini-dir 2>/dev/null || true)"
    [ -n "$scan_dir" ] || {
        echo "install: this PHP has no $conf_root and no directory it scans for ini files" \
            "(php-config --ini-dir is empty): copy $so into $ext_dir as resilient.so and add" \
            "extension=resilient to your php.ini" >&2
        exit 1
    }
    ini="$scan_dir/resilient.ini"
fi

# The temporary file being written, removed if the install stops before renaming it.
tmp=""
trap '[ -z "$tmp" ] || rm -f "$tmp"' EXIT

# Replaces $1 with stdin by a rename in the same directory (atomic): mode 0644, or with
# `keep`, the mode, owner and group of the file it replaces.
put() {
    tmp="$(mktemp "$(dirname "$1")/.$(basename "$1").XXXXXX")"
    cat > "$tmp"
    if [ "${2:-}" = keep ] && [ -e "$1" ]; then
        chmod --reference="$1" "$tmp"
        chown --reference="$1" "$tmp"
    else
        chmod 0644 "$tmp"
    fi
    mv -fT "$tmp" "$1"
    tmp=""
}

install -d "$destdir$ext_dir" "$(dirname "$destdir$ini")"
put "$destdir$ext_dir/resilient.so" < "$so"

# An uncommented `extension=resilient` (or `extension=/path/to/resilient.so`) line.
loads='^[[:space:]]*extension[[:space:]]*=[[:space:]]*"?([^";]*/)?resilient(\.so)?"?[[:space:]]*(;.*)?$'
# Without Debian's layout, another file of the scan dir may load it already (the official
# Docker images' `docker-php-ext-enable resilient` writes docker-php-ext-resilient.ini): a
# second line would load it twice.
other=""
if [ -z "$debian" ] && [ ! -e "$destdir$ini" ]; then
    for f in "$destdir$scan_dir"/*.ini; do
        if [ -f "$f" ] && grep -Eq "$loads" "$f"; then
            other="$f"
            break
        fi
    done
fi
if [ -n "$other" ]; then
    ini_state="not written: $other loads it already"
elif [ ! -e "$destdir$ini" ]; then
    put "$destdir$ini" <<INI
; resilient: a resilient HTTP client and host-wide limits in shared memory.
; priority=20
extension=resilient
INI
    ini_state="written"
elif grep -Eq "$loads" "$destdir$ini"; then
    ini_state="existing, kept as it was with its settings"
else
    # A symlink stays one: its target gets the line (under DESTDIR, a target inside it).
    file="$destdir$ini"
    if [ -L "$file" ]; then
        file="$(readlink -f "$file")"
        case "$file" in
            "$destdir"/*) ;;
            *) echo "install: $destdir$ini links outside DESTDIR ($file): add extension=resilient to it yourself" >&2
               exit 1 ;;
        esac
    fi
    # The file's own lines first (ended by a newline if the last one has none), then the line.
    put "$file" keep < <(
        cat "$file"
        [ -z "$(tail -c1 "$file")" ] || echo
        echo "extension=resilient"
    )
    ini_state="existing, kept with its settings, extension=resilient added"
fi

if [ -z "$debian" ]; then
    sapis="every SAPI reading $scan_dir"
elif [ -z "$destdir" ] && command -v phpenmod >/dev/null; then
    phpenmod -v "$version" -s ALL resilient
    sapis="every SAPI"
else
    sapis="cli and fpm"
    for sapi in cli fpm; do
        link="$destdir$conf_root/$sapi/conf.d/20-resilient.ini"
        install -d "$(dirname "$link")"
        # Left alone when right: replacing it would unlink it for a moment.
        [ "$(readlink "$link" 2>/dev/null)" = "$ini" ] || ln -sfn "$ini" "$link"
    done
fi
echo "install: $destdir$ext_dir/resilient.so, enabled for $sapis by $destdir$ini ($ini_state)"
if [ -z "$destdir" ]; then
    # The PHP php-config belongs to (not whichever `php` comes first in PATH), its list read
    # whole, then searched: `grep -q` leaving early would have `php -m` die of SIGPIPE, and
    # pipefail fail a good install.
    php_bin="$(php-config --php-binary 2>/dev/null || true)"
    modules="$("${php_bin:-php}" -m 2>/dev/null || true)"
    if ! grep -qx resilient <<<"$modules"; then
        echo "install: but the CLI's PHP (${php_bin:-php}) does not load it ('php -m' does not" \
            "list resilient): check 'php --ini' for the files it reads, and that $ext_dir is its" \
            "extension_dir" >&2
        exit 1
    fi
    echo "install: restart php-fpm to load it in the workers (e.g. 'service php$version-fpm restart')"
fi
