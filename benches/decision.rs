//! The decision path of `RateLimiter` and `KeyedRateLimiter`, every algorithm, against
//! governor (direct and keyed), a `Mutex<HashMap>` token bucket, dashmap with atomic
//! GCRA words, and the floor (one hash, one probe, one CAS), in the same groups.
//!
//! Threads are driven by rayon pools built outside the timed part; criterion's
//! `iter_custom` gets the slowest thread's wall time, so every figure is time per
//! decision per thread. Run: `cargo bench --bench decision` (filter with a group name,
//! e.g. `cargo bench --bench decision -- "keyed/1M uniform"`). The new-key groups
//! (`keyed/first fill 1M`, `keyed/flood, full 100k`) time only decisions on keys the
//! limiter has never seen, on fresh limiters built outside the timed parts.

#![allow(missing_docs)] // criterion_group! generates undocumented items

#[path = "support/harness.rs"]
mod harness;
#[path = "support/peers.rs"]
mod peers;
#[path = "support/workload.rs"]
mod workload;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use harness::{new_keys_run, pool, populate, run};
use peers::*;
use std::time::Duration;
use tollgate::{Algorithm, KeyedRateLimiter, OnFull, RateLimiter};
use workload::{fresh_keys, Workload};

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

/// One new-key group member: `make` builds a fresh limiter for every `per_limiter`
/// new keys (see `new_keys_run`), at 1 and 2 threads (and all cores).
fn bench_new<L: Limiter>(
    c: &mut Criterion,
    group: &str,
    make: &dyn Fn() -> L,
    prefill: &[u64],
    per_limiter: usize,
    offset: u64,
) {
    let name = make().name();
    let mut g = c.benchmark_group(group);
    for threads in thread_counts() {
        let p = pool(threads);
        g.bench_with_input(
            BenchmarkId::new(name.clone(), format!("{threads}t")),
            &threads,
            |b, _| {
                b.iter_custom(|iters| new_keys_run(&p, make, prefill, per_limiter, offset, iters))
            },
        );
    }
    g.finish();
}

/// Keys the limiters have never seen, as in the shootout: the first fill of a table
/// built for 1,000,000 keys (every decision inserts), and a sustained flood of new
/// keys into a table full of 100,000 live keys (quota one per hour, so no entry goes
/// idle: tollgate's `OnFull` policy decides every new key; governor and dashmap grow
/// their maps, and get a fresh one every 1,000,000 keys like tollgate's table).
fn new_keys(c: &mut Criterion) {
    const FILL: usize = 1_000_000;
    const FULL: usize = 100_000;
    let tollgate = |rate: Rate, keys: usize, policy: OnFull, label: &'static str| {
        move || TollgateKeyed::token_bucket(rate, keys, policy, label)
    };
    let group = "keyed/first fill 1M";
    let open = Rate::OPEN;
    bench_new(
        c,
        group,
        &tollgate(open, FILL, OnFull::Evict, "token bucket"),
        &[],
        FILL,
        0,
    );
    bench_new(c, group, &|| GovernorKeyed::new(open), &[], FILL, 0);
    bench_new(c, group, &|| DashMapGcra::new(open), &[], FILL, 0);
    bench_new(c, group, &|| Floor::new(open, FILL), &[], FILL, 0);
    bench_new(c, group, &|| Floor128::new(open, FILL), &[], FILL, 0);

    let group = "keyed/flood, full 100k";
    let shut = Rate::SHUT;
    let live = fresh_keys(FULL, 0, 8);
    let far = 1 << 62; // never one of the live keys
    for (policy, label) in [
        (OnFull::Evict, "token bucket, Evict"),
        (OnFull::Deny, "token bucket, Deny"),
        (OnFull::Allow, "token bucket, Allow"),
    ] {
        bench_new(
            c,
            group,
            &tollgate(shut, FULL, policy, label),
            &live,
            FILL,
            far,
        );
    }
    bench_new(c, group, &|| GovernorKeyed::new(shut), &live, FILL, far);
    bench_new(c, group, &|| DashMapGcra::new(shut), &live, FILL, far);
    bench_new(c, group, &|| Floor::new(shut, FULL), &live, FILL, far);
    bench_new(c, group, &|| Floor128::new(shut, FULL), &live, FILL, far);
}

criterion_group! {
    name = benches;
    config = config();
    targets = direct, keyed, new_keys
}
criterion_main!(benches);
