#!/bin/sh
# Regenerates stubs/resilient.stub.php:
#   `cargo php stubs` (cargo-php 0.2.x) for the #[php_class] classes, plus the
#   hand-written stubs/exceptions.stub.php (classes registered in MINIT with
#   ClassBuilder are invisible to cargo-php).
# cargo-php reads the `ext_php_rs_describe_module_v2` symbol, which ext-php-rs
# only emits with debug assertions, so the extension crate alone is rebuilt
# with them (dependencies stay the shared release builds), then rebuilt normally.
set -eu
cd "$(dirname "$0")/.."
command -v cargo-php >/dev/null || cargo install cargo-php --version '^0.2' --locked
cargo rustc --release -p resilient --lib --crate-type cdylib -- -C debug-assertions=on
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
cargo php stubs --stdout target/release/libresilient.so > "$tmp"
{ cat "$tmp"; cat stubs/exceptions.stub.php; } > stubs/resilient.stub.php
cargo build --release -p resilient
echo "wrote stubs/resilient.stub.php"
