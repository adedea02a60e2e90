<?php

declare(strict_types=1);

namespace Resilient\Tests\Api;

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\TestCase;

/** The extension exposes exactly the contract's class names, and its exceptions behave like PHP's. */
final class ClassesTest extends TestCase
{
    private const CLASSES = ['Funnel', 'Lease', 'RetryBudget', 'Deadline', 'Context'];
    private const UNAVAILABLE_SUBCLASSES = ['DeadlineExceeded', 'FunnelFull', 'BudgetExhausted', 'CircuitOpen', 'UpstreamFailed'];

    public function testReflectionListsTheContractClasses(): void
    {
        $r = PhpProcess::args(['--re', 'resilient'])->wait(10);
        $this->assertSame(0, $r->exitCode, $r->describe());
        foreach ([...self::CLASSES, 'Unavailable', ...self::UNAVAILABLE_SUBCLASSES] as $c) {
            $this->assertStringContainsString("Resilient\\$c", $r->stdout, "php --re resilient does not list Resilient\\$c");
        }
    }

    public function testClassesExist(): void
    {
        foreach (self::CLASSES as $c) {
            $this->assertTrue(class_exists("Resilient\\$c"), "Resilient\\$c missing");
        }
    }

    public function testExceptionHierarchy(): void
    {
        $this->assertContains(\RuntimeException::class, class_parents('Resilient\\Unavailable'));
        foreach (self::UNAVAILABLE_SUBCLASSES as $c) {
            $this->assertContains('Resilient\\Unavailable', class_parents("Resilient\\$c"), "Resilient\\$c must extend Unavailable");
        }
    }

    public function testExceptionsAreConstructibleFromPhp(): void
    {
        foreach (['Unavailable', ...self::UNAVAILABLE_SUBCLASSES] as $c) {
            $class = "Resilient\\$c";
            $prev = new \LogicException('cause');
            $e = new $class("message of $c", 42, $prev);
            $this->assertSame("message of $c", $e->getMessage());
            $this->assertSame(42, $e->getCode());
            $this->assertSame($prev, $e->getPrevious());
            try {
                throw $e;
            } catch (\Resilient\Unavailable $caught) {
                $this->assertSame($e, $caught);
            }
        }
    }

    public function testExceptionsAreSubclassableFromPhp(): void
    {
        // An anonymous class, so a missing parent fails this test only, not the whole suite.
        $e = new class ('shipping is busy') extends \Resilient\FunnelFull {
            public function extra(): string
            {
                return 'extra';
            }
        };
        $this->assertInstanceOf(\Resilient\FunnelFull::class, $e);
        $this->assertInstanceOf(\Resilient\Unavailable::class, $e);
        $this->assertInstanceOf(\RuntimeException::class, $e);
        $this->assertSame('shipping is busy', $e->getMessage());
        $this->assertSame('extra', $e->extra());
    }
}
