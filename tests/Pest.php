<?php

/*
 * Pest entry point. The suites are plain PHPUnit 9 TestCase classes, which Pest runs unchanged
 * (`vendor/bin/pest` when Pest is installed from Packagist; this machine cannot reach Packagist,
 * so `make test` uses Debian's phpunit). Nothing is bound here on purpose: every test class
 * extends its TestCase explicitly.
 */
