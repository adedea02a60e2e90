<?php

namespace Resilient\Laravel\Testing;

use Resilient\Client;

/**
 * The client that checks a faked call (`Client::validator()`: the real client's checks, bound
 * to nothing shared, sending nothing), so that a fake — `Resilient::fake()` or Laravel's
 * `Http::fake()` under `Http::resilient()` — refuses what production refuses.
 *
 * Built from the name's config (a config the extension refuses throws here, as it would in
 * production) without what depends on the machine the tests run on, which a test host need not
 * have: the `verify`, `cert` and `ssl_key` files, a Redis `backend`, a `proxy`; and a base URL
 * when config has none (an unset `env()`). Its funnel, budget and breaker, which a fake never
 * uses, are checked as production checks them (a reserve over the limit, a negative ratio, a
 * limit left unset by an `env()` without a default: production refuses each at its first call).
 */
final class CallValidator
{
    /** Config keys a fake's checks leave out (see above). */
    private const MACHINE_BOUND = ['verify', 'cert', 'ssl_key', 'backend', 'on_backend_error', 'hosts', 'proxy'];

    /**
     * @param array<string, mixed> $config the name's client config ([] for a name only faked)
     * @return Client|null null without the extension (or one older than `validator()`): nothing is checked
     */
    public static function for(string $name, #[\SensitiveParameter] array $config, #[\SensitiveParameter] ?string $baseUrl = null): ?Client
    {
        if (! method_exists(Client::class, 'validator')) {
            return null;
        }
        $options = array_diff_key($config, array_flip(self::MACHINE_BOUND));
        $options['base_url'] ??= $baseUrl ?? 'http://localhost/';
        try {
            return Client::validator($name, $options);
        } catch (\ValueError $e) {
            throw new \ValueError("resilient.clients.{$name}: " . $e->getMessage(), 0, $e);
        } catch (\TypeError $e) {
            throw new \TypeError("resilient.clients.{$name}: " . $e->getMessage(), 0, $e);
        }
    }
}
