<?php

namespace Resilient\Laravel\Http;

/**
 * The headers a client's config sends with every call, by the client's rule: its `headers`,
 * and its `user_agent` as `User-Agent` unless those name one. For the requests that stand in
 * for the client's (what `Http::fake()` and `Resilient::fake()` record), so assertions see
 * what the upstream would get.
 */
final class ConfiguredHeaders
{
    /** @return array<string, mixed> */
    public static function of(#[\SensitiveParameter] array $config): array
    {
        $headers = is_array($config['headers'] ?? null) ? $config['headers'] : [];
        $named = array_map(fn ($name) => strtolower((string) $name), array_keys($headers));
        if (is_string($config['user_agent'] ?? null) && ! in_array('user-agent', $named, true)) {
            $headers['User-Agent'] = $config['user_agent'];
        }

        return $headers;
    }
}
