<?php

namespace Resilient\Laravel\Testing;

/**
 * A call `Resilient::fake()` has no answer for while `preventStrayRequests()` is on: an
 * unscripted client name, or a call past the end of a name's script.
 */
final class StrayRequest extends \RuntimeException
{
}
