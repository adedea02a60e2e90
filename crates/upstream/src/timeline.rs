//! The simulator's timeline: per time bucket, how many requests arrived, started, completed,
//! and the highest number in service and waiting in the queue. Computed from the recorded rows
//! by one sweep over their events, so any bucket size can be asked for after the run.

use serde::Serialize;

use crate::sim::SimRow;

/// Most buckets one answer may hold.
pub const MAX_BUCKETS: usize = 100_000;

/// One time bucket `[t_ms, t_ms + bucket_ms)` (monotonic ms since server start).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Bucket {
    pub t_ms: f64,
    pub arrivals: u32,
    pub started: u32,
    pub completed: u32,
    /// Completed with a status >= 400.
    pub failed: u32,
    /// Clients that went away in this bucket.
    pub gone: u32,
    /// Services completed in this bucket for clients already gone (wasted work).
    pub completed_after_gone: u32,
    pub max_in_service: u32,
    pub max_queue: u32,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    // Order at equal times: a slot freed before the next one starts, before new arrivals,
    // so simultaneous events do not show a peak that never existed.
    End,
    Start,
    Arrival,
    Gone,
}

/// How many buckets of `bucket_ms` cover `[from_ms, to_ms)` (at least one).
pub fn bucket_count(from_ms: f64, to_ms: f64, bucket_ms: f64) -> f64 {
    ((to_ms - from_ms).max(0.0) / bucket_ms).ceil().max(1.0)
}

/// Buckets covering `[from_ms, to_ms)`; at most [`MAX_BUCKETS`] (callers refuse more).
pub fn build(rows: &[SimRow], from_ms: f64, to_ms: f64, bucket_ms: f64) -> Vec<Bucket> {
    let n = (bucket_count(from_ms, to_ms, bucket_ms) as usize).min(MAX_BUCKETS);
    let mut buckets: Vec<Bucket> = (0..n)
        .map(|i| Bucket {
            t_ms: from_ms + i as f64 * bucket_ms,
            ..Bucket::default()
        })
        .collect();

    let mut events: Vec<(f64, Kind, &SimRow)> = Vec::with_capacity(rows.len() * 3);
    for r in rows {
        events.push((r.t_ms, Kind::Arrival, r));
        if let Some(t) = r.start_ms {
            events.push((t, Kind::Start, r));
        }
        if let Some(t) = r.end_ms {
            events.push((t, Kind::End, r));
        }
        if let Some(t) = r.gone_ms {
            events.push((t, Kind::Gone, r));
        }
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));

    let (mut queue, mut service) = (0i64, 0i64);
    // A request that found a free slot goes straight into service: it never counts as queued.
    let apply = |kind: Kind, row: &SimRow, queue: &mut i64, service: &mut i64| match kind {
        Kind::Arrival => *queue += row.queued as i64,
        Kind::Start => {
            *queue -= row.queued as i64;
            *service += 1;
        }
        Kind::End => *service -= 1,
        Kind::Gone => {}
    };
    let mut i = 0;
    while i < events.len() && events[i].0 < from_ms {
        apply(events[i].1, events[i].2, &mut queue, &mut service);
        i += 1;
    }
    // Levels are right-continuous (a request in service over [start, end) is gone at `end`),
    // so a bucket's starting level is the one after the events at its very first instant.
    let level = |v: i64| v.max(0) as u32;
    let mut seeded = vec![false; n];
    let mut current = 0;
    for &(t, kind, row) in &events[i..] {
        if t >= to_ms {
            break;
        }
        let b = (((t - from_ms) / bucket_ms) as usize).min(n - 1);
        while current < b {
            if !seeded[current] {
                buckets[current].max_in_service = level(service);
                buckets[current].max_queue = level(queue);
                seeded[current] = true;
            }
            current += 1;
        }
        if !seeded[b] && t > buckets[b].t_ms {
            buckets[b].max_in_service = level(service);
            buckets[b].max_queue = level(queue);
            seeded[b] = true;
        }
        apply(kind, row, &mut queue, &mut service);
        let bucket = &mut buckets[b];
        match kind {
            Kind::Arrival => bucket.arrivals += 1,
            Kind::Start => bucket.started += 1,
            Kind::End => {
                bucket.completed += 1;
                if row.status.is_some_and(|s| s >= 400) {
                    bucket.failed += 1;
                }
                if row.gone_ms.is_some_and(|g| g <= t) {
                    bucket.completed_after_gone += 1;
                }
            }
            Kind::Gone => bucket.gone += 1,
        }
        if seeded[b] {
            bucket.max_in_service = bucket.max_in_service.max(level(service));
            bucket.max_queue = bucket.max_queue.max(level(queue));
        }
    }
    for b in current..n {
        if !seeded[b] {
            buckets[b].max_in_service = level(service);
            buckets[b].max_queue = level(queue);
        }
    }
    buckets
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(seq: u64, t: f64, start: f64, end: f64) -> SimRow {
        SimRow {
            seq,
            t_ms: t,
            unix_ms: 0.0,
            start_ms: Some(start),
            end_ms: Some(end),
            gone_ms: None,
            status: Some(200),
            queue_at_arrival: 0,
            in_service_at_arrival: 0,
            queued: start > t,
            request_id: None,
            attempt: None,
        }
    }

    #[test]
    fn counts_and_levels_per_bucket() {
        // Capacity 1: three arrivals at 0, served 0-10, 10-20, 20-30.
        let rows = [
            row(1, 0.0, 0.0, 10.0),
            row(2, 0.0, 10.0, 20.0),
            row(3, 0.0, 20.0, 30.0),
        ];
        let b = build(&rows, 0.0, 40.0, 10.0);
        assert_eq!(b.len(), 4);
        assert_eq!(
            b.iter().map(|x| x.arrivals).collect::<Vec<_>>(),
            [3, 0, 0, 0]
        );
        assert_eq!(
            b.iter().map(|x| x.completed).collect::<Vec<_>>(),
            [0, 1, 1, 1]
        );
        assert_eq!(
            b.iter().map(|x| x.max_in_service).collect::<Vec<_>>(),
            [1, 1, 1, 0]
        );
        assert_eq!(
            b.iter().map(|x| x.max_queue).collect::<Vec<_>>(),
            [2, 1, 0, 0]
        );
    }

    #[test]
    fn events_before_the_window_set_the_starting_level() {
        let rows = [row(1, 0.0, 5.0, 100.0)];
        let b = build(&rows, 50.0, 70.0, 10.0);
        assert_eq!(
            b.iter().map(|x| x.max_in_service).collect::<Vec<_>>(),
            [1, 1]
        );
        assert_eq!(b.iter().map(|x| x.arrivals).sum::<u32>(), 0);
    }
}
