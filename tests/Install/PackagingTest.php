<?php

declare(strict_types=1);

namespace Resilient\Tests\Install;

use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * What `make install` builds and what the composer.json files promise: a production host builds
 * the extension alone (the lab's plots need fontconfig, which such a host lacks), and neither
 * package claims a PHP or an installer the extension does not work with.
 */
final class PackagingTest extends TestCase
{
    /** The extension is built and tested for PHP 8.2's API (src/stack.rs reads its fiber layout). */
    private const PHP = '>=8.2';

    public function testMakeInstallBuildsOnlyTheExtension(): void
    {
        exec(sprintf('make -n -C %s install 2>&1', escapeshellarg(Run::root())), $out, $rc);
        $plan = implode("\n", $out);
        $this->assertSame(0, $rc, $plan);
        $this->assertMatchesRegularExpression('/build --release -p resilient\b/', $plan);
        $this->assertStringNotContainsString('--workspace', $plan, 'not the lab crate');
        $this->assertStringContainsString('scripts/install.sh', $plan);
    }

    public function testTheLaravelPackageAsksForThePhpTheExtensionNeeds(): void
    {
        $this->assertSame(self::PHP, $this->composer('php/composer.json')['require']['php']);
        $this->assertSame(self::PHP, $this->composer('composer.json')['require']['php']);
    }

    public function testTheExtensionIsNoPiePackageWithoutAPhpizeBuild(): void
    {
        $root = $this->composer('composer.json');
        $forPie = ($root['type'] ?? '') === 'php-ext' || isset($root['php-ext']);
        // PIE runs phpize, configure and make, which need a config.m4.
        $this->assertFalse($forPie && !file_exists(Run::root() . '/config.m4'), 'a php-ext package PIE cannot build');
    }

    /** @return array<string, mixed> */
    private function composer(string $path): array
    {
        $json = json_decode((string) file_get_contents(Run::root() . '/' . $path), true, 512, JSON_THROW_ON_ERROR);
        $this->assertIsArray($json);
        return $json;
    }
}
