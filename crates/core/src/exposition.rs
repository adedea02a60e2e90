//! The Prometheus text exposition (format 0.0.4) of the host-wide metrics.
//!
//! Labels are the upstream's name and, where a family has kinds, `reason` (our refusals) or
//! `outcome` (upstream failure classes, breaker states entered, latency of successes apart
//! from failures); nothing else, so nothing secret can leak through a label. Latency is in
//! seconds, as Prometheus names it (`_seconds`), with cumulative `le` buckets.

use std::fmt::Write;

use crate::metrics::{
    CircuitState, FailureClass, Histogram, MetricsSnapshot, RefusalReason, LATENCY_BOUNDS_MS,
};

/// `name="value"` with the value escaped as the format asks (`\\`, `\"`, `\n`).
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// `{upstream="name"` (escaped, the brace left open for more labels): the part every sample of
/// an upstream shares, made once per upstream.
fn upstream_label(name: &str) -> String {
    format!("{{upstream=\"{}\"", escape(name))
}

struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
}

fn header(out: &mut String, f: &Family) {
    let _ = writeln!(out, "# HELP {} {}", f.name, f.help);
    let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind);
}

/// One sample per upstream of a family without a second label.
fn simple(
    out: &mut String,
    names: &[(String, MetricsSnapshot)],
    labels: &[String],
    f: Family,
    value: impl Fn(&MetricsSnapshot) -> u64,
) {
    header(out, &f);
    for ((_, s), upstream) in names.iter().zip(labels) {
        sample(out, f.name, upstream, None, value(s));
    }
}

/// `name{upstream="u"[,label="kind"]} value\n`, without `fmt` (a scrape of many upstreams is
/// thousands of lines). `upstream` is the label as [`upstream_label`] made it.
fn sample(out: &mut String, name: &str, upstream: &str, kind: Option<(&str, &str)>, value: u64) {
    out.push_str(name);
    out.push_str(upstream);
    if let Some((label, kind)) = kind {
        out.push(',');
        out.push_str(label);
        out.push_str("=\"");
        out.push_str(kind);
        out.push('"');
    }
    out.push_str("} ");
    push_u64(out, value);
    out.push('\n');
}

fn push_u64(out: &mut String, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    // ASCII digits, one char each (no UTF-8 check on every sample).
    out.extend(buf[i..].iter().map(|&d| char::from(d)));
}

/// One sample per upstream and kind (`label="kind"`).
fn by_kind<K: Copy>(
    out: &mut String,
    names: &[(String, MetricsSnapshot)],
    labels: &[String],
    f: Family,
    label: &str,
    kinds: &[(K, &str)],
    value: impl Fn(&MetricsSnapshot, K) -> u64,
) {
    header(out, &f);
    for ((_, s), upstream) in names.iter().zip(labels) {
        for &(k, kind) in kinds {
            sample(out, f.name, upstream, Some((label, kind)), value(s, k));
        }
    }
}

/// The `le` label of each bucket, in seconds.
const LE: [&str; LATENCY_BOUNDS_MS.len() + 1] = [
    "0.001", "0.002", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5",
    "10", "+Inf",
];

/// The `_bucket`, `_sum` and `_count` lines of one histogram; `prefix` is scratch space for the
/// part its bucket lines share (written once, not once per line).
fn histogram(
    out: &mut String,
    prefix: &mut String,
    name: &str,
    upstream: &str,
    outcome: &str,
    h: &Histogram,
) {
    prefix.clear();
    for part in [
        name,
        "_bucket",
        upstream,
        ",outcome=\"",
        outcome,
        "\",le=\"",
    ] {
        prefix.push_str(part);
    }
    let cumulative = h.cumulative();
    for (le, count) in LE.iter().zip(cumulative) {
        out.push_str(prefix);
        out.push_str(le);
        out.push_str("\"} ");
        push_u64(out, count);
        out.push('\n');
    }
    let count = cumulative[cumulative.len() - 1];
    for (suffix, value) in [("_sum", None), ("_count", Some(count))] {
        out.push_str(name);
        out.push_str(suffix);
        out.push_str(upstream);
        out.push_str(",outcome=\"");
        out.push_str(outcome);
        out.push_str("\"} ");
        match value {
            Some(count) => push_u64(out, count),
            None => {
                let _ = write!(out, "{}", h.sum_us as f64 / 1e6);
            }
        }
        out.push('\n');
    }
}

/// Bytes of one upstream's samples besides its label (on ~60 lines, counted apart): measured
/// ~3.6 KB with ten-digit counters, rounded up; the headers fit in the 4 KB reserved besides.
const BYTES_PER_UPSTREAM: usize = 4096;

/// The exposition of `names` (from [`crate::metrics::snapshot_all`]).
pub fn prometheus(names: &[(String, MetricsSnapshot)]) -> String {
    let labels: Vec<String> = names.iter().map(|(n, _)| upstream_label(n)).collect();
    // BYTES_PER_UPSTREAM per upstream, plus its label on each of its lines (~60, 64
    // counted): sized once, so the text is never copied to grow.
    let size: usize = labels
        .iter()
        .map(|l| BYTES_PER_UPSTREAM + 64 * l.len())
        .sum();
    let mut out = String::with_capacity(4096 + size);
    let o = &mut out;
    simple(
        o,
        names,
        &labels,
        Family {
            name: "resilient_originals_total",
            kind: "counter",
            help: "Calls started: one per task asked for, whatever its attempts.",
        },
        |s| s.originals,
    );
    simple(
        o,
        names,
        &labels,
        Family {
            name: "resilient_attempts_total",
            kind: "counter",
            help: "Attempts sent to the upstream (originals and retries).",
        },
        |s| s.attempts,
    );
    simple(
        o,
        names,
        &labels,
        Family {
            name: "resilient_retries_total",
            kind: "counter",
            help: "Retries sent (attempts after a call's first).",
        },
        |s| s.retries,
    );
    simple(
        o,
        names,
        &labels,
        Family {
            name: "resilient_retries_succeeded_total",
            kind: "counter",
            help: "Calls answered with success on a retry.",
        },
        |s| s.retries_succeeded,
    );
    simple(o, names, &labels, Family { name: "resilient_retries_denied_total", kind: "counter",
        help: "Retries the host-wide retry budget denied (also in resilient_refusals_total{reason=\"budget\"})." },
        |s| s.retries_denied());
    simple(
        o,
        names,
        &labels,
        Family {
            name: "resilient_successes_total",
            kind: "counter",
            help: "Calls answered with a status below 400 within their deadline.",
        },
        |s| s.successes,
    );
    simple(
        o,
        names,
        &labels,
        Family {
            name: "resilient_in_flight",
            kind: "gauge",
            help: "Attempts out now, every process of the host.",
        },
        |s| s.in_flight,
    );
    // The funnel's slots held on this host, for the names whose funnel was used here: exact
    // when a process was killed mid-attempt, which leaves `resilient_in_flight` one too high
    // for good.
    sparse_gauge(o, names, &labels, Family { name: "resilient_funnel_in_flight", kind: "gauge",
        help: "Slots of the name's shared-memory funnel held on this host now (holders killed mid-attempt not counted; a funnel on Redis: only those its local fallback took)." },
        |s| s.funnel_in_flight);
    // The fixed funnel limits, for the names a client with one was made under (the latest one's).
    sparse_gauge(o, names, &labels, Family { name: "resilient_funnel_limit", kind: "gauge",
        help: "The fixed funnel limit of the latest client made with one under the name on this host (a learned limit: resilient_funnel_learned_limit)." },
        |s| s.funnel_limit);
    simple(
        o,
        names,
        &labels,
        Family {
            name: "resilient_fallbacks_total",
            kind: "counter",
            help: "Fallback values used instead of an upstream answer.",
        },
        |s| s.fallbacks,
    );
    simple(
        o,
        names,
        &labels,
        Family {
            name: "resilient_backend_fallbacks_total",
            kind: "counter",
            help: "Guard operations (admissions, records of outcomes and originals) made without the shared backend (Redis down or slow).",
        },
        |s| s.backend_fallbacks,
    );
    let reasons: Vec<_> = RefusalReason::ALL
        .iter()
        .map(|r| (*r, r.as_str()))
        .collect();
    by_kind(
        o,
        names,
        &labels,
        Family {
            name: "resilient_refusals_total",
            kind: "counter",
            help: "Our refusals, by reason: nothing (more) was sent to the upstream.",
        },
        "reason",
        &reasons,
        |s, r| s.refused(r),
    );
    let classes: Vec<_> = FailureClass::ALL.iter().map(|c| (*c, c.as_str())).collect();
    by_kind(
        o,
        names,
        &labels,
        Family {
            name: "resilient_upstream_failures_total",
            kind: "counter",
            help: "Attempts that failed at the upstream, by class.",
        },
        "outcome",
        &classes,
        |s, c| s.failed(c),
    );
    simple(
        o,
        names,
        &labels,
        Family {
            name: "resilient_breaker_state",
            kind: "gauge",
            help: "Circuit breaker state as its last transition left it (it moves when a call passes): 0 closed, 1 open, 2 half-open.",
        },
        |s| s.breaker_state,
    );
    let states: Vec<_> = CircuitState::ALL.iter().map(|b| (*b, b.as_str())).collect();
    by_kind(
        o,
        names,
        &labels,
        Family {
            name: "resilient_breaker_transitions_total",
            kind: "counter",
            help: "Circuit breaker transitions, by the state entered.",
        },
        "outcome",
        &states,
        |s, b| s.breaker_transitions[b as usize],
    );
    learned_gauges(o, names, &labels);
    let name = "resilient_attempt_duration_seconds";
    header(o, &Family { name, kind: "histogram",
        help: "Latency of attempts answered with success apart from attempts failed at the upstream; our refusals are in neither." });
    let mut prefix = String::new();
    for ((_, s), upstream) in names.iter().zip(&labels) {
        histogram(
            o,
            &mut prefix,
            name,
            upstream,
            "success",
            &s.success_latency,
        );
        histogram(
            o,
            &mut prefix,
            name,
            upstream,
            "failure",
            &s.failure_latency,
        );
    }
    out
}

/// A gauge of the names that have a value: the others have no sample, and with none the
/// family is left out.
fn sparse_gauge(
    out: &mut String,
    names: &[(String, MetricsSnapshot)],
    labels: &[String],
    family: Family,
    value: fn(&MetricsSnapshot) -> Option<u32>,
) {
    if names.iter().all(|(_, s)| value(s).is_none()) {
        return;
    }
    header(out, &family);
    for ((_, s), upstream) in names.iter().zip(labels) {
        if let Some(n) = value(s) {
            let _ = writeln!(out, "{}{upstream}}} {n}", family.name);
        }
    }
}

/// The learned funnel limits (`'limit' => 'auto'`), for the names that have one. A latency not
/// known yet (0, before the first interval with answers) has no sample: 0 s would read as
/// measured.
fn learned_gauges(out: &mut String, names: &[(String, MetricsSnapshot)], labels: &[String]) {
    type Value = fn(&crate::AdaptiveStats) -> Option<String>;
    let families: [(Family, Value); 3] = [
        (
            Family {
                name: "resilient_funnel_learned_limit",
                kind: "gauge",
                help: "The funnel's learned concurrency limit (fractional; the cap is its whole slots).",
            },
            // In 1/256 of a slot: exact in binary, printed exactly.
            |l| Some(l.limit().to_string()),
        ),
        (
            Family {
                name: "resilient_funnel_no_load_rtt_seconds",
                kind: "gauge",
                help: "The learned limit's slowly tracked latency without queueing (absent until known).",
            },
            |l| seconds(l.no_load_rtt_us),
        ),
        (
            Family {
                name: "resilient_funnel_rtt_seconds",
                kind: "gauge",
                help: "The learned limit's mean latency of answers, over the latest interval that had any (absent until known).",
            },
            |l| seconds(l.rtt_us),
        ),
    ];
    if names.iter().all(|(_, s)| s.learned.is_none()) {
        return;
    }
    for (f, value) in families {
        header(out, &f);
        for ((_, s), upstream) in names.iter().zip(labels) {
            if let Some(v) = s.learned.as_ref().and_then(value) {
                let _ = writeln!(out, "{}{upstream}}} {v}", f.name);
            }
        }
    }
}

/// Whole µs as seconds, exactly (`0.021233`, `1.5`): one division is correctly rounded, and
/// the shortest text that reads back prints it as written (via ms, two divisions printed
/// `0.021233000000000002`); `None` for 0, not known yet.
fn seconds(us: u32) -> Option<String> {
    (us > 0).then(|| (f64::from(us) / 1e6).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn le_labels_are_the_bounds_in_seconds() {
        for (le, ms) in LE.iter().zip(LATENCY_BOUNDS_MS) {
            assert_eq!(le.parse::<f64>().unwrap(), ms as f64 / 1000.0);
        }
        let mut s = String::new();
        push_u64(&mut s, 0);
        push_u64(&mut s, u64::MAX);
        assert_eq!(s, format!("0{}", u64::MAX));
    }

    #[test]
    fn the_text_fits_the_size_reserved_for_it() {
        let mut s = MetricsSnapshot {
            learned: Some(crate::AdaptiveStats {
                limit_256ths: 40 * 256 + 77,
                no_load_rtt_us: 123_456,
                rtt_us: 234_567,
                intervals: 1_000_000,
            }),
            funnel_in_flight: Some(64),
            funnel_limit: Some(64),
            ..MetricsSnapshot::default()
        };
        // Ten-digit counters everywhere: a host that ran a long time.
        let big = 1_234_567_890;
        (s.originals, s.attempts, s.retries, s.successes) = (big, big, big, big);
        s.refusals = [big; 4];
        s.failures = [big; 5];
        s.breaker_transitions = [big; 3];
        s.success_latency.buckets = [big / 14; crate::metrics::LATENCY_BUCKETS];
        s.success_latency.sum_us = 987_654_321_987;
        s.failure_latency = s.success_latency;
        for name in ["a", "shipping", &"n".repeat(crate::validate::MAX_NAME_LEN)] {
            let names = vec![(name.to_string(), s); 3];
            let text = prometheus(&names);
            let reserved = 4096 + 3 * (BYTES_PER_UPSTREAM + 64 * upstream_label(name).len());
            assert_eq!(
                text.capacity(),
                reserved,
                "grown: {} bytes for {name}",
                text.len()
            );
        }
    }

    /// Latencies as whole µs in seconds, without the noise of two float divisions
    /// (`0.021233000000000002`); a latency not known yet (0) is no sample, not a measured 0 s.
    #[test]
    fn learned_latencies_print_exact_and_unknown_ones_not_at_all() {
        let learned = |no_load_rtt_us, rtt_us| MetricsSnapshot {
            learned: Some(crate::AdaptiveStats {
                limit_256ths: 3 * 256 + 64,
                no_load_rtt_us,
                rtt_us,
                intervals: 7,
            }),
            ..MetricsSnapshot::default()
        };
        let text = prometheus(&[
            ("a".to_string(), learned(21_233, 1_500_000)),
            ("b".to_string(), learned(0, 0)),
        ]);
        assert!(
            text.contains("resilient_funnel_no_load_rtt_seconds{upstream=\"a\"} 0.021233\n"),
            "{text}"
        );
        assert!(
            text.contains("resilient_funnel_rtt_seconds{upstream=\"a\"} 1.5\n"),
            "{text}"
        );
        assert!(
            text.contains("resilient_funnel_learned_limit{upstream=\"a\"} 3.25\n"),
            "{text}"
        );
        assert!(
            text.contains("resilient_funnel_learned_limit{upstream=\"b\"} 3.25\n"),
            "{text}"
        );
        assert!(
            !text.contains("resilient_funnel_no_load_rtt_seconds{upstream=\"b\"}"),
            "{text}"
        );
        assert!(
            !text.contains("resilient_funnel_rtt_seconds{upstream=\"b\"}"),
            "{text}"
        );
    }

    /// The fixed limit beside the slots held, for the names that have one: a dashboard's
    /// saturation is `resilient_funnel_in_flight / resilient_funnel_limit`.
    #[test]
    fn the_fixed_funnel_limit_is_a_gauge_of_the_names_that_have_one() {
        let with = MetricsSnapshot {
            funnel_limit: Some(10),
            funnel_in_flight: Some(3),
            ..MetricsSnapshot::default()
        };
        let names = [
            ("a".to_string(), with),
            ("b".to_string(), MetricsSnapshot::default()),
        ];
        let text = prometheus(&names);
        assert!(
            text.contains("# TYPE resilient_funnel_limit gauge\n"),
            "{text}"
        );
        assert!(
            text.contains("resilient_funnel_limit{upstream=\"a\"} 10\n"),
            "{text}"
        );
        assert!(
            !text.contains("resilient_funnel_limit{upstream=\"b\"}"),
            "{text}"
        );
        let none = prometheus(&[("b".to_string(), MetricsSnapshot::default())]);
        assert!(
            !none.contains("resilient_funnel_limit"),
            "no family without a sample"
        );
    }

    #[test]
    fn families_have_help_type_and_escaped_labels() {
        let mut s = MetricsSnapshot {
            attempts: 3,
            ..MetricsSnapshot::default()
        };
        s.success_latency.buckets[1] = 2;
        s.success_latency.sum_us = 3_000;
        let text = prometheus(&[("a\"b\\c".to_string(), s)]);
        assert!(text.contains("# TYPE resilient_attempts_total counter\n"));
        assert!(text.contains("resilient_attempts_total{upstream=\"a\\\"b\\\\c\"} 3\n"));
        assert!(text.contains(
            "resilient_attempt_duration_seconds_bucket{upstream=\"a\\\"b\\\\c\",outcome=\"success\",le=\"0.001\"} 0\n"
        ));
        assert!(text.contains(",outcome=\"success\",le=\"0.002\"} 2\n"));
        assert!(text.contains(",outcome=\"success\",le=\"+Inf\"} 2\n"));
        assert!(text.contains("resilient_attempt_duration_seconds_sum{upstream=\"a\\\"b\\\\c\",outcome=\"success\"} 0.003\n"));
        assert!(text.contains(",le=\"10\"} 2\n"));
    }
}
