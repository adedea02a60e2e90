<?php

namespace Resilient\Laravel\Console;

use Resilient\Laravel\ResilientManager;

/**
 * What each named client's every call throws because of its config (a misspelt option, a
 * value the extension refuses), found by building the real client as a call would: for
 * resilient:doctor and resilient:check, which report it beside the rest. Building one connects
 * nowhere; before any process created the segment, it is built on a stand-in (building it
 * would create the segment as the command's user); an unusable segment is said apart.
 */
final class ClientProblems
{
    /**
     * @param list<int|string> $names
     * @return array<int|string, string> name => the client's own message, prefixed with its entry
     */
    public static function of(ResilientManager $manager, array $names): array
    {
        $problems = [];
        $check = function () use ($manager, $names, &$problems): void {
            foreach ($names as $name) {
                try {
                    $problem = $manager->clientProblem((string) $name);
                } catch (\RuntimeException) {
                    continue;
                }
                if ($problem !== null) {
                    $problems[$name] = $problem;
                }
            }
        };
        try {
            $absent = SegmentFiles::notCreatedYet();
        } catch (\RuntimeException) {
            return [];
        }
        $absent === null ? $check() : SegmentFiles::withStandIn($absent, $check);

        return $problems;
    }
}
