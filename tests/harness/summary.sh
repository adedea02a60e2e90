#!/usr/bin/env bash
# Prints one closing line for `make test`: "tests: N passed, M failed", added up from the logs
# of its layers (cargo test, PHPUnit, the lab's --check). A layer whose log shows no result at
# all (it crashed before reporting) counts as one failure.
#
#   tests/harness/summary.sh CARGO_LOG PHPUNIT_LOG LAB_LOG [STUBS_LOG]
set -uo pipefail
cargo_log=$1 phpunit_log=$2 lab_log=$3 stubs_log=${4:-}
passed=0 failed=0

# cargo: "test result: ok. 27 passed; 0 failed; ..."
if grep -q '^test result:' "$cargo_log" 2>/dev/null; then
    read -r p f < <(grep -E '^test result:' "$cargo_log" \
        | sed -E 's/.* ([0-9]+) passed; ([0-9]+) failed.*/\1 \2/' \
        | awk '{p += $1; f += $2} END {print p + 0, f + 0}')
    passed=$((passed + p)) failed=$((failed + f))
else
    failed=$((failed + 1))
fi

# PHPUnit: "OK (130 tests, 854 assertions)" or "Tests: 130, Assertions: 850, Failures: 2, Errors: 1."
# Risky tests and warnings fail the run (phpunit.xml.dist: failOnRisky, failOnWarning): failed
# here too. Skipped and incomplete ones neither passed nor failed.
if line=$(grep -E '^OK \([0-9]+ tests?' "$phpunit_log" 2>/dev/null | tail -1) && [ -n "$line" ]; then
    passed=$((passed + $(sed -E 's/^OK \(([0-9]+).*/\1/' <<<"$line")))
elif line=$(grep -E '^Tests: [0-9]+' "$phpunit_log" 2>/dev/null | tail -1) && [ -n "$line" ]; then
    total=$(sed -E 's/^Tests: ([0-9]+).*/\1/' <<<"$line")
    count() { grep -oE "$1: [0-9]+" <<<"$line" | grep -oE '[0-9]+' || echo 0; }
    bad=$(($(count Errors) + $(count Failures) + $(count Warnings) + $(count Risky)))
    neither=$(($(count Skipped) + $(count Incomplete)))
    passed=$((passed + total - bad - neither)) failed=$((failed + bad))
else
    failed=$((failed + 1))
fi

# The lab's --check: one "[ met ]" or "[MISSED]" line per property after "== CI check".
if grep -q '^== CI check' "$lab_log" 2>/dev/null; then
    section=$(sed -n '/^== CI check/,$p' "$lab_log")
    passed=$((passed + $(grep -c '\[ met \]' <<<"$section")))
    failed=$((failed + $(grep -c '\[MISSED\]' <<<"$section")))
else
    failed=$((failed + 1))
fi

# The stubs check: one line saying whether the shipped stubs match a fresh generation.
if [ -n "$stubs_log" ]; then
    if grep -q '^stubs: .* match a fresh generation' "$stubs_log" 2>/dev/null; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
    fi
fi

echo "tests: $passed passed, $failed failed"
