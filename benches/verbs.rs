//! What the verbs cost next to a plain check, single-threaded, on one hot key and on
//! 1,000 keys: `peek`, `reserve` (booking with no wait, so every call is admitted on an
//! open quota), and an all-or-nothing `check_all` of two limits against two separate
//! checks, plus governor's check as the peer. Run: `cargo bench --bench verbs`.

#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use std::num::NonZeroU32;
use std::time::Duration;
use tollgate::{check_all, Algorithm, KeyedRateLimiter, Limit, Quota, RateLimiter};

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .configure_from_args()
}

/// A quota no benchmark exhausts: every decision is an admission.
const OPEN: u32 = 1_000_000_000;

fn single(c: &mut Criterion) {
    let mut g = c.benchmark_group("verbs/one key");
    for a in [
        Algorithm::TokenBucket,
        Algorithm::FixedWindow,
        Algorithm::SlidingLog,
    ] {
        let q = match a {
            Algorithm::SlidingLog => Quota::per_second(65_536),
            _ => Quota::per_second(OPEN),
        };
        let l = RateLimiter::builder(a, q).build().unwrap();
        g.bench_function(format!("{a:?}/check"), |b| b.iter(|| black_box(l.check())));
        g.bench_function(format!("{a:?}/peek"), |b| b.iter(|| black_box(l.peek())));
        g.bench_function(format!("{a:?}/reserve"), |b| {
            b.iter(|| {
                black_box(
                    l.reserve(1, Duration::from_secs(3_600))
                        .map(|r| r.wait_time()),
                )
            })
        });
    }
    let gov =
        governor::RateLimiter::direct(governor::Quota::per_second(NonZeroU32::new(OPEN).unwrap()));
    g.bench_function("governor/check", |b| b.iter(|| black_box(gov.check())));
    g.finish();
}

fn two_limits(c: &mut Criterion) {
    let mut g = c.benchmark_group("verbs/two limits, 1,000 keys");
    let per_user =
        KeyedRateLimiter::<u64>::builder(Algorithm::TokenBucket, Quota::per_second(OPEN))
            .max_keys(1_000)
            .build()
            .unwrap();
    let global = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_second(OPEN))
        .build()
        .unwrap();
    let mut key = 0u64;
    let mut next = move || {
        key = (key + 7) % 1_000;
        key
    };
    g.bench_function("two checks", |b| {
        b.iter(|| {
            let k = next();
            black_box((per_user.check(&k), global.check()))
        })
    });
    g.bench_function("check_all", |b| {
        b.iter(|| {
            let k = next();
            let limits = [&per_user.limit(&k) as &dyn Limit, &global];
            black_box(check_all(&limits, 1).map(|d| d.is_allowed()))
        })
    });
    g.bench_function("keyed peek", |b| {
        b.iter(|| black_box(per_user.peek(&next())))
    });
    g.bench_function("keyed reserve", |b| {
        b.iter(|| {
            black_box(
                per_user
                    .reserve(&next(), 1, Duration::from_secs(1))
                    .map(|r| r.wait_time()),
            )
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = single, two_limits
}
criterion_main!(benches);
