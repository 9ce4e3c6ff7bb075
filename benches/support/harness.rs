//! Runs one limiter over one key stream on a rayon pool built outside the timed part.

#![allow(dead_code)]

use super::peers::Limiter;
use super::workload::Workload;
use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Runs `iters` decisions on every thread of `pool` (all released together by a
/// barrier) and returns the slowest thread's wall time: time per decision per thread
/// is that divided by `iters`.
pub(crate) fn run<L: Limiter>(
    pool: &rayon::ThreadPool,
    limiter: &L,
    w: &Workload,
    iters: u64,
) -> Duration {
    let threads = pool.current_num_threads();
    let barrier = Barrier::new(threads);
    let keys = &w.keys[..];
    let mask = w.mask();
    let times = pool.broadcast(|ctx| {
        let mut i = ctx.index() * (keys.len() / threads) + ctx.index() * 7919;
        barrier.wait();
        let t0 = Instant::now();
        for _ in 0..iters {
            black_box(limiter.check(black_box(keys[i & mask])));
            i = i.wrapping_add(1);
        }
        t0.elapsed()
    });
    times.into_iter().max().unwrap_or_default()
}

/// Touches every key of the stream once from one thread (so tables are populated
/// before timing, as they are in a long-running server).
pub(crate) fn populate<L: Limiter>(limiter: &L, w: &Workload) {
    for &k in &w.keys {
        black_box(limiter.check(k));
    }
}

/// A rayon pool of `threads` threads, built outside any timed section.
pub(crate) fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("building a rayon pool")
}

/// Median of `samples` runs of `iters` decisions: ns per decision per thread.
pub(crate) fn median_ns<L: Limiter>(
    pool: &rayon::ThreadPool,
    limiter: &L,
    w: &Workload,
    iters: u64,
    samples: usize,
) -> f64 {
    let mut v: Vec<f64> = (0..samples)
        .map(|_| run(pool, limiter, w, iters).as_nanos() as f64 / iters as f64)
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Picks an iteration count so one run of `limiter` lasts about `target`.
pub(crate) fn calibrate<L: Limiter>(
    pool: &rayon::ThreadPool,
    limiter: &L,
    w: &Workload,
    target: Duration,
) -> u64 {
    let mut iters = 1_000u64;
    loop {
        let t = run(pool, limiter, w, iters);
        if t >= target / 8 || iters >= 1 << 30 {
            let per = t.as_nanos().max(1) as f64 / iters as f64;
            return ((target.as_nanos() as f64 / per) as u64).clamp(1_000, 1 << 32);
        }
        iters *= 4;
    }
}

/// Formats a duration in ns per decision for tables.
pub(crate) fn fmt_ns(ns: f64) -> String {
    if ns >= 1000.0 {
        format!("{:.2} µs", ns / 1000.0)
    } else {
        format!("{ns:.1} ns")
    }
}

/// Runs every key of `stream` once, split into one contiguous share per thread of
/// `pool` (all released together), on a limiter made fresh by `make` and first fed
/// `prefill` (untimed): ns per decision per thread, from the slowest thread. For
/// workloads that change the limiter for good (first fill, floods of new keys), where
/// re-running one limiter would measure something else the second time.
pub(crate) fn one_shot_ns<L: Limiter>(
    pool: &rayon::ThreadPool,
    make: &dyn Fn() -> L,
    prefill: &[u64],
    stream: &[u64],
) -> f64 {
    let limiter = make();
    for &k in prefill {
        black_box(limiter.check(k));
    }
    let threads = pool.current_num_threads();
    let share = stream.len() / threads;
    let barrier = Barrier::new(threads);
    let times = pool.broadcast(|ctx| {
        let mine = &stream[ctx.index() * share..(ctx.index() + 1) * share];
        barrier.wait();
        let t0 = Instant::now();
        for &k in mine {
            black_box(limiter.check(black_box(k)));
        }
        t0.elapsed()
    });
    let t = times.into_iter().max().unwrap_or_default();
    // Dropping a million-key peer takes a while; not part of the decision time.
    drop(limiter);
    t.as_nanos() as f64 / share as f64
}

/// The median of `samples` runs of [`one_shot_ns`], each on a fresh limiter.
pub(crate) fn one_shot_median_ns<L: Limiter>(
    pool: &rayon::ThreadPool,
    make: &dyn Fn() -> L,
    prefill: &[u64],
    stream: &[u64],
    samples: usize,
) -> f64 {
    let mut v: Vec<f64> = (0..samples)
        .map(|_| one_shot_ns(pool, make, prefill, stream))
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs `iters` decisions per thread of `pool` on keys no limiter has seen, for
/// criterion's `iter_custom`: limiters made fresh by `make` and fed `prefill`
/// (untimed), each taking at most `per_limiter` new keys in all (split between the
/// threads) before the next fresh one, so every timed decision is the workload's (a
/// first fill never overfills its table; a flood always meets a full one). Returns the
/// summed slowest-thread wall time of the timed parts. Keys are `mix(offset + i)` over
/// a counter that never repeats within one call.
pub(crate) fn new_keys_run<L: Limiter>(
    pool: &rayon::ThreadPool,
    make: &dyn Fn() -> L,
    prefill: &[u64],
    per_limiter: usize,
    offset: u64,
    iters: u64,
) -> Duration {
    let threads = pool.current_num_threads();
    let share = (per_limiter / threads).max(1) as u64;
    let mut total = Duration::ZERO;
    let mut done = 0u64;
    let mut round = 0u64;
    while done < iters {
        let n = share.min(iters - done);
        let limiter = make();
        for &k in prefill {
            black_box(limiter.check(k));
        }
        let barrier = Barrier::new(threads);
        let times = pool.broadcast(|ctx| {
            // Disjoint per thread and per round: bits 40.. hold (round, thread).
            let base = offset + ((round * threads as u64 + ctx.index() as u64) << 40);
            barrier.wait();
            let t0 = Instant::now();
            for i in 0..n {
                black_box(limiter.check(black_box(super::workload::mix(base + i))));
            }
            t0.elapsed()
        });
        total += times.into_iter().max().unwrap_or_default();
        // Dropping a million-key peer takes a while; not part of the decision time.
        drop(limiter);
        done += n;
        round += 1;
    }
    total
}
