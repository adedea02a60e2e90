
// Exception classes: registered in MINIT with ClassBuilder (src/exceptions.rs),
// so `cargo php stubs` does not see them; this part is written by hand.
//
// php.ini (src/ini.rs), all PHP_INI_ALL; a bad value is refused (ini_set returns false):
//   resilient.shm_path            = ""     ; "" = /dev/shm/resilient-<uid>.v8.shm
//   resilient.shm_slots           = 256    ; names the segment holds (fixed when the file is created)
//   resilient.shm_required        = 0      ; 1: an unusable segment throws SharedMemoryError;
//                                          ; 0: process-local guards (said once in PHP's error log)
//   resilient.web_timeout         = 10     ; seconds, cap of Context::timeout() under a web SAPI
//   resilient.web_connect_timeout = 3      ; seconds, cap of Context::connectTimeout() under a web SAPI
//   resilient.web_max_attempts    = 1      ; cap of Context::maxAttempts() under a web SAPI
//   resilient.backend             = "shm"  ; or a redis://, rediss:// or unix:// URL (docs/redis.md)
//   resilient.context             = "auto" ; auto: the SAPI decides (web unless cli, phpdbg, embed,
//                                          ; micro); web or console says it outright

namespace Resilient {
    /**
     * No answer worth returning: our own refusal (deadline, funnel full,
     * budget spent, circuit open) or retryable upstream outcomes exhausted.
     * Constructible and subclassable from PHP.
     */
    class Unavailable extends \RuntimeException {
        /** The last attempt's response, if it got one (set by Resilient\Client). */
        protected $response = null;

        /**
         * The last attempt's Response, or null when that attempt got none (a timeout, a
         * refused connection: see failure()) or no attempt was sent; an answer an earlier
         * attempt got is not kept.
         *
         * @return \Resilient\Response|null
         */
        public function response(): ?\Resilient\Response {}

        /** Why the last attempt got no answer, if it got none (set by Resilient\Client). */
        protected $failure = null;

        /**
         * Why the last attempt got no answer: 'timeout' (its timeout or the
         * deadline ran out), 'connect' (refused, unreachable, DNS, connect
         * timeout), 'closed' (closed or reset before a complete response),
         * 'body' (the body could not be read), 'too_large' (over max_body),
         * 'tls', 'redirects', 'decode' (its Content-Encoding could not be
         * decoded), 'sink' (the sink file could not be written), 'request'
         * (the request could not be made, on our side: a multipart file gone
         * before a retry) or 'other'.
         * Null when it got an answer (getCode() and response() say which) or
         * no attempt was sent.
         *
         * @return string|null
         */
        public function failure(): ?string {}
    }

    /** The deadline left no time for the work. */
    class DeadlineExceeded extends Unavailable {}

    /** The funnel had no free slot (at once, or within the client's funnel 'wait'). */
    class FunnelFull extends Unavailable {}

    /** The retry budget is spent for this window. */
    class BudgetExhausted extends Unavailable {}

    /** The circuit breaker is open. */
    class CircuitOpen extends Unavailable {}

    /** Retryable upstream outcomes exhausted. Code = last HTTP status, 0 when the last attempt got no answer (failure() says why). */
    class UpstreamFailed extends Unavailable {}

    /**
     * The shared-memory segment cannot be used: corrupt, another layout
     * version, owned by another user, readable or writable by group or others
     * (the mode must be 600), a symlink or a file with more than one hard
     * link, or its table of names is full.
     * The message names the file and the problem.
     */
    class SharedMemoryError extends \RuntimeException {}
}
