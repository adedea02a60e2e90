<?php
declare(strict_types=1);

namespace App\Exceptions;

/** The upstream said 429/503: transient, worth a retry if the budget and deadline allow. */
final class ShippingQuoteBusy extends \RuntimeException
{
}
