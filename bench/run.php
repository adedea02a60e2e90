<?php

declare(strict_types=1);

/*
 * The benchmark runner (started by bench/run.sh, which provides the local services).
 *
 * Every bench/cases/*.php returns one group:
 *
 *   return [
 *       'group'   => 'funnel',                        // short id (selectable on the command line)
 *       'order'   => 10,                              // groups print in this order
 *       'title'   => 'what one operation is',
 *       'cases'   => [
 *           'id' => [
 *               'label' => 'shown in the table',
 *               'ours'  => true,                      // the reference the others are compared to
 *               'ops'   => 200_000,                   // operations per round
 *               'make'  => fn (): Closure => fn (int $n) => ...,  // returns a runner doing $n ops
 *               'requires' => fn (): ?string => null, // optional: a reason to skip, or null
 *               'note'  => fn (): string => '...',    // optional: a line under the row, taken
 *                                                     // right after the case ran (e.g. what the
 *                                                     // server saw of it)
 *           ],
 *       ],
 *       'targets' => [
 *           ['max_us', 'id', 1.0],                    // µs per op of case id ≤ 1.0
 *           ['faster', 'id', 'other id', 150.0],      // case id ≥ 150× faster than other id
 *           ['check', 'what must hold', fn (): array => [true, 'what was seen']], // anything else
 *       ],
 *   ];
 *
 * With BENCH_BASELINE_SO set to another build of the extension (bench/baseline.sh builds one
 * from a git revision), each group's own case is measured again right after it by a child PHP
 * process that loads that build, and shown beside it: a regression check in the same run, on
 * the same pinned CPU. (`run.php --ours-json group...` is that child: it prints
 * {"group": µs} for the groups' own cases.)
 *
 * Each case: one warm-up round, then ROUNDS timed rounds; the median µs per operation is shown,
 * with ops/s and the ratio to the group's own case. All groups run in this one process, one
 * after the other, so ratios compare like with like.
 */

const ROUNDS = 5;

$scale = (float) (getenv('BENCH_SCALE') ?: 1.0);
$only = array_slice($argv, 1);
$oursJson = ($only[0] ?? '') === '--ours-json';
if ($oursJson) {
    array_shift($only);
}
$baseline = (string) getenv('BENCH_BASELINE_SO');

$groups = [];
$known = [];
foreach (glob(__DIR__ . '/cases/*.php') as $file) {
    $g = require $file;
    $known[] = $g['group'];
    if ($only === [] || in_array($g['group'], $only, true)) {
        $groups[] = $g;
    }
}
// A misspelt group is an error, not a run that measures nothing and says every target was met.
if ($unknown = array_diff($only, $known)) {
    fprintf(STDERR, "bench: no group named %s (the groups: %s)\n", implode(', ', $unknown), implode(' ', $known));
    exit(2);
}
usort($groups, fn ($a, $b) => ($a['order'] ?? 100) <=> ($b['order'] ?? 100));

if ($oursJson) {
    $out = [];
    foreach ($groups as $g) {
        foreach ($g['cases'] as $id => $case) {
            if (compared($case) && (!isset($case['requires']) || ($case['requires'])() === null)) {
                gc_collect_cycles();
                $out[$g['group']][$id] = measure($case['make'](), max(1, (int) ($case['ops'] * $scale)));
            }
        }
    }
    echo json_encode($out), "\n";
    exit(0);
}

printf("resilient bench — %s UTC, PHP %s, %d CPUs, median of %d rounds%s\n",
    gmdate('Y-m-d H:i'), PHP_VERSION, (int) trim((string) shell_exec('nproc')), ROUNDS,
    $scale !== 1.0 ? ", BENCH_SCALE=$scale" : '');

$allMet = true;
foreach ($groups as $g) {
    printf("\n[%s] %s\n", $g['group'], $g['title']);
    printf("  %-62s %10s %12s   %s\n", 'case', 'µs/op', 'ops/s', 'vs ours');
    $us = [];
    $notes = [];
    $ours = null;
    foreach ($g['cases'] as $id => $case) {
        $skip = isset($case['requires']) ? ($case['requires'])() : null;
        if ($skip !== null) {
            printf("  %-62s %s\n", $case['label'], "skipped: $skip");
            continue;
        }
        // Collect what the previous case left (Laravel's Http leaves many cycles), so no case pays
        // for another's garbage.
        gc_collect_cycles();
        try {
            $us[$id] = measure($case['make'](), max(1, (int) ($case['ops'] * $scale)));
            if (isset($case['note'])) {
                $notes[$id] = ($case['note'])();
            }
        } catch (Throwable $e) {
            printf("  %-62s %s\n", $case['label'], 'failed: ' . get_class($e) . ': ' . $e->getMessage());
            continue;
        }
        if (!empty($case['ours'])) {
            $ours = $id;
        }
    }
    foreach ($g['cases'] as $id => $case) {
        if (!isset($us[$id])) {
            continue;
        }
        $rel = '';
        if ($ours !== null && isset($us[$ours])) {
            $rel = $id === $ours ? '1× (ours)' : ratioText($us[$id] / $us[$ours]);
        }
        printf("  %-62s %10s %12s   %s\n", $case['label'], fmtUs($us[$id]), number_format(1e6 / $us[$id]), $rel);
        if (isset($notes[$id])) {
            printf("    ↳ %s\n", $notes[$id]);
        }
    }
    $compared = array_filter(array_keys($us), fn ($id) => compared($g['cases'][$id]));
    if ($baseline !== '' && $compared !== []) {
        $bases = baselineUs($baseline, $g['group']);
        foreach ($compared as $id) {
            $base = $bases[$id] ?? null;
            $label = $id === $ours ? 'the same' : $g['cases'][$id]['label'];
            printf("  %-62s %10s %12s   %s\n", "  $label, baseline build (BENCH_BASELINE_SO)",
                $base === null ? 'failed' : fmtUs($base), $base === null ? '' : number_format(1e6 / $base),
                $base === null ? '' : sprintf('ours %+.1f %%', ($us[$id] / $base - 1) * 100));
        }
    }
    foreach ($g['targets'] ?? [] as $t) {
        [$met, $text] = match ($t[0]) {
            'max_us' => isset($us[$t[1]])
                ? [$us[$t[1]] <= $t[2], sprintf('%s ≤ %s µs per op: %s µs', $g['cases'][$t[1]]['label'], $t[2], fmtUs($us[$t[1]]))]
                : [false, "{$t[1]} did not run"],
            'faster' => isset($us[$t[1]], $us[$t[2]])
                ? [$us[$t[2]] / $us[$t[1]] >= $t[3], sprintf('≥ %s× as fast as %s: %s×', $t[3], $g['cases'][$t[2]]['label'], ratioNumber($us[$t[2]] / $us[$t[1]]))]
                : [false, "{$t[1]} or {$t[2]} did not run"],
            'check' => (fn (array $r): array => [$r[0], "{$t[1]}: {$r[1]}"])(($t[2])()),
        };
        $allMet = $allMet && $met;
        printf("  target %s %s\n", $met ? 'MET   ' : 'MISSED', $text);
    }
}
echo "\n", $allMet ? "all targets met\n" : "some targets missed (see above)\n";

/**
 * Whether a case is measured with the baseline build too: the group's own (`ours`), and any
 * other case of the extension alone that says `'baseline' => true` (`Metrics::snapshot()`: a
 * regression there went unseen while only each group's first case was compared).
 */
function compared(array $case): bool
{
    return !empty($case['ours']) || !empty($case['baseline']);
}

/**
 * The group's compared cases (see compared()), by id, measured by a child PHP process that
 * loads the baseline build.
 *
 * @return array<string, float>
 */
function baselineUs(string $so, string $group): array
{
    // Its own segment file: the two builds may have different layouts.
    $shm = preg_replace('/\.shm$/', '', (string) getenv('RESILIENT_SHM_PATH')) . '-baseline.shm';
    $cmd = sprintf('RESILIENT_SO=%s RESILIENT_SHM_PATH=%s %s/../tests/harness/php.sh -d apc.enable_cli=1 -d apc.shm_size=64M %s --ours-json %s 2>&1',
        escapeshellarg($so), escapeshellarg($shm), __DIR__, escapeshellarg(__FILE__), escapeshellarg($group));
    $raw = (string) shell_exec($cmd);
    $json = json_decode($raw, true);
    if (!is_array($json)) {
        fwrite(STDERR, "baseline build failed:\n" . substr($raw, 0, 2000) . "\n");
    }
    return is_array($json) && is_array($json[$group] ?? null) ? array_map('floatval', $json[$group]) : [];
}

/** Median µs per operation over ROUNDS rounds of $ops operations (after one warm-up round). */
function measure(Closure $run, int $ops): float
{
    $run(max(1, intdiv($ops, 10)));
    $samples = [];
    for ($i = 0; $i < ROUNDS; $i++) {
        $t = hrtime(true);
        $run($ops);
        $samples[] = (hrtime(true) - $t) / 1e3 / $ops;
    }
    sort($samples);
    return $samples[intdiv(ROUNDS, 2)];
}

function fmtUs(float $us): string
{
    return $us < 10 ? sprintf('%.3f', $us) : sprintf('%.1f', $us);
}

/** Two decimals below 10 (so 0.96× and 1.24× are told apart), whole numbers above. */
function ratioNumber(float $r): string
{
    return $r >= 10 ? number_format($r, 0) : number_format($r, 2);
}

function ratioText(float $r): string
{
    return $r >= 1 ? ratioNumber($r) . '× slower' : ratioNumber(1 / $r) . '× faster';
}
