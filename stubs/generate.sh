#!/bin/sh
# Regenerates stubs/resilient.stub.php and the copy the Laravel package ships
# (php/stubs/resilient.stub.php), or with --check compares a fresh generation with both (exit 1
# and a diff when they differ: CI catches a stub that no longer matches the code):
#   `cargo php stubs` (cargo-php 0.2.x) for the #[php_class] classes, plus the
#   hand-written stubs/exceptions.stub.php (classes registered in MINIT with
#   ClassBuilder are invisible to cargo-php), with the class modifiers cargo-php leaves out
#   added from the loaded extension (stubs/class-modifiers.php: final, private constructors).
# cargo-php reads the `ext_php_rs_describe_module_v2` symbol, which ext-php-rs
# only emits with debug assertions, so the extension crate alone is rebuilt
# with them (dependencies stay the shared release builds), then rebuilt normally.
set -eu
cd "$(dirname "$0")/.."
command -v cargo-php >/dev/null || cargo install cargo-php --version '^0.2' --locked
cargo rustc --release -p resilient --lib --crate-type cdylib -- -C debug-assertions=on
raw=$(mktemp)
tmp=$(mktemp)
fresh=$(mktemp)
trap 'rm -f "$raw" "$tmp" "$fresh"' EXIT
cargo php stubs --stdout target/release/libresilient.so > "$raw"
php -n -d extension="$PWD/target/release/libresilient.so" stubs/class-modifiers.php < "$raw" > "$tmp"
{ cat "$tmp"; cat stubs/exceptions.stub.php; } > "$fresh"
cargo build --release -p resilient
shipped="stubs/resilient.stub.php php/stubs/resilient.stub.php"
if [ "${1:-}" = --check ]; then
    for f in $shipped; do
        if ! diff -u "$f" "$fresh"; then
            echo "stubs: $f differs from a fresh generation: run 'make stubs' and commit it" >&2
            exit 1
        fi
    done
    echo "stubs: stubs/resilient.stub.php and php/stubs/resilient.stub.php match a fresh generation"
else
    mkdir -p php/stubs
    for f in $shipped; do cp "$fresh" "$f"; done
    echo "wrote $shipped"
fi
