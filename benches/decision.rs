//! The decision path of `RateLimiter` and `KeyedRateLimiter`, every algorithm, against
//! governor (direct and keyed), a `Mutex<HashMap>` token bucket, dashmap with atomic
//! GCRA words, and the floor (one hash, one probe, one CAS), in the same groups.
//!
//! Threads are driven by rayon pools built outside the timed part; criterion's
//! `iter_custom` gets the slowest thread's wall time, so every figure is time per
//! decision per thread. Run: `cargo bench --bench decision` (filter with a group name,
//! e.g. `cargo bench --bench decision -- "keyed/1M uniform"`).

#![allow(missing_docs)] // criterion_group! generates undocumented items

#[path = "support/harness.rs"]
mod harness;
#[path = "support/peers.rs"]
mod peers;
#[path = "support/workload.rs"]
mod workload;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use harness::{pool, populate, run};
use peers::*;
use std::time::Duration;
use tollgate::{Algorithm, KeyedRateLimiter, RateLimiter};
use workload::Workload;

fn thread_counts() -> Vec<usize> {
    let all = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut v = vec![1, 2, all];
    v.sort_unstable();
    v.dedup();
    v
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .configure_from_args()
}

fn bench_one<L: Limiter>(c: &mut Criterion, group: &str, w: &Workload, limiter: &L) {
    populate(limiter, w);
    let mut g = c.benchmark_group(group);
    for threads in thread_counts() {
        let p = pool(threads);
        g.bench_with_input(
            BenchmarkId::new(limiter.name(), format!("{threads}t")),
            &threads,
            |b, _| b.iter_custom(|iters| run(&p, limiter, w, iters)),
        );
    }
    g.finish();
}

fn direct(c: &mut Criterion) {
    let hot = Workload::hot();
    for (label, rate) in [
        ("direct/hot key, all admitted", Rate::OPEN),
        ("direct/hot key, mostly denied", Rate::SHUT),
    ] {
        for algorithm in Algorithm::ALL {
            let l = RateLimiter::builder(algorithm, tollgate_quota(algorithm, rate))
                .build()
                .expect("quota");
            bench_one(
                c,
                label,
                &hot,
                &TollgateDirect(l, algorithm_name(algorithm)),
            );
        }
        bench_one(c, label, &hot, &GovernorDirect::new(rate));
    }
}

fn keyed(c: &mut Criterion) {
    let workloads = [
        (Workload::hot(), Rate::OPEN, "keyed/hot key, all admitted"),
        (Workload::hot(), Rate::SHUT, "keyed/hot key, mostly denied"),
        (
            Workload::uniform("1k uniform", 1_000, 1),
            Rate::OPEN,
            "keyed/1k uniform",
        ),
        (
            Workload::uniform("1M uniform", 1_000_000, 2),
            Rate::OPEN,
            "keyed/1M uniform",
        ),
        (
            Workload::zipf("1M zipf", 1_000_000, 1.0, 3),
            Rate::OPEN,
            "keyed/1M zipf s=1",
        ),
    ];
    for (w, rate, group) in &workloads {
        for algorithm in Algorithm::ALL {
            let l = KeyedRateLimiter::<u64>::builder(algorithm, tollgate_quota(algorithm, *rate))
                .max_keys(w.distinct)
                .build()
                .expect("quota");
            bench_one(c, group, w, &TollgateKeyed(l, algorithm_name(algorithm)));
        }
        bench_one(c, group, w, &GovernorKeyed::new(*rate));
        bench_one(c, group, w, &MutexHashMap::new(*rate));
        bench_one(c, group, w, &DashMapGcra::new(*rate));
        bench_one(c, group, w, &Floor::new(*rate, w.distinct));
        bench_one(c, group, w, &Floor128::new(*rate, w.distinct));
    }
}

criterion_group! {
    name = benches;
    config = config();
    targets = direct, keyed
}
criterion_main!(benches);
