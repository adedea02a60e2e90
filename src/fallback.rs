//! The `fallback` option's one hook for metrics.

/// METRICS: a call of client `name` ended unavailable and its `fallback` was called instead of
/// throwing (counted before the callable runs, whatever it then returns or throws). Nothing is
/// counted yet: the host-wide metrics connect here.
pub fn metrics_fallback_used(name: &str) {
    let _ = name;
}
