<?php

namespace Resilient\Laravel\Testing;

/**
 * A call `Resilient::fake()` has no answer for: a call past the end of a name's list of
 * answers, or, while `preventStrayRequests()` is on, a call to an unscripted client name.
 */
final class StrayRequest extends \RuntimeException
{
}
