//! Multi-threaded exactness on real OS threads, one shared `Arc<RateLimiter<_>>`.
//!
//! No timing assertions: a frozen clock makes the expected totals exact whatever the
//! interleaving, and with a clock advanced by another thread the totals are checked
//! against an upper bound that holds for every interleaving.

mod common;

use common::{manual, ns};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;
use tollgate::{Algorithm, Clock, ManualClock, Quota, RateLimiter};

const THREADS: usize = 6;

fn quotas(a: Algorithm) -> Vec<Quota> {
    let mut qs = vec![
        Quota::per_second(1),
        Quota::per_second(500),
        Quota::new(97, Duration::from_millis(333)),
    ];
    if matches!(a, Algorithm::TokenBucket | Algorithm::LeakyBucket) {
        qs.push(Quota::per_second(10).with_burst(300));
    }
    qs
}

/// Runs `f(thread index)` on `THREADS` threads released together; returns the results.
fn on_threads<R: Send + 'static>(f: impl Fn(usize) -> R + Send + Sync + 'static) -> Vec<R> {
    let f = Arc::new(f);
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|i| {
            let f = Arc::clone(&f);
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                barrier.wait();
                f(i)
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("thread panicked"))
        .collect()
}

#[test]
fn frozen_clock_admits_exactly_the_capacity() {
    for a in Algorithm::ALL {
        for q in quotas(a) {
            let (limiter, clock) = manual(a, q);
            clock.advance(Duration::from_millis(1_234));
            let limiter = Arc::new(limiter);
            let cap = limiter.burst();
            let l = Arc::clone(&limiter);
            // Every thread alone asks for the whole capacity, one request at a time.
            let admitted: u32 = on_threads(move |_| {
                (0..cap)
                    .map(|_| u32::from(l.check().is_allowed()))
                    .sum::<u32>()
            })
            .into_iter()
            .sum();
            assert_eq!(admitted, cap, "{a:?} {q:?}");
            let peek = limiter.check_n(0).unwrap();
            assert_eq!(peek.remaining(), 0, "{a:?} {q:?}");
        }
    }
}

#[test]
fn frozen_clock_mixed_costs_account_exactly() {
    for a in Algorithm::ALL {
        for q in quotas(a) {
            let (limiter, _clock) = manual(a, q);
            let limiter = Arc::new(limiter);
            let cap = limiter.burst();
            let l = Arc::clone(&limiter);
            // Costs 1..=3 (and some zero-cost peeks): the admitted costs plus what is
            // left must be exactly the capacity; every remaining() seen is consistent.
            let admitted: u64 = on_threads(move |i| {
                let mut rng = fastrand::Rng::with_seed(i as u64);
                let mut sum = 0u64;
                for _ in 0..cap {
                    let n = rng.u32(0..=3).min(cap);
                    let d = l.check_n(n).unwrap();
                    assert!(d.remaining() <= cap);
                    if d.is_allowed() {
                        sum += u64::from(n);
                    }
                }
                sum
            })
            .into_iter()
            .sum();
            let left = limiter.check_n(0).unwrap().remaining();
            assert_eq!(admitted + u64::from(left), u64::from(cap), "{a:?} {q:?}");
            // Whatever is left fits, one by one, and then nothing more.
            for _ in 0..left {
                assert!(limiter.check().is_allowed(), "{a:?} {q:?}");
            }
            assert!(!limiter.check().is_allowed(), "{a:?} {q:?}");
        }
    }
}

/// The most cost-1 admissions `q` allows for `a` over readings in `[0, elapsed]`,
/// starting fresh.
fn bound(a: Algorithm, q: Quota, elapsed: u64) -> u64 {
    let period = ns(q.period());
    match a {
        // GCRA: the burst, plus one per emission interval elapsed.
        Algorithm::TokenBucket | Algorithm::LeakyBucket => {
            u64::from(q.burst()) + elapsed / (period / u64::from(q.limit()))
        }
        // At most `limit` per window [kP, (k+1)P) (the sliding counter's current count
        // never exceeds the limit; the log allows `limit` in every half-open span of
        // length P), and [0, elapsed] touches elapsed / P + 1 of them.
        Algorithm::FixedWindow | Algorithm::SlidingWindow | Algorithm::SlidingLog => {
            u64::from(q.limit()) * (elapsed / period + 1)
        }
    }
}

#[test]
fn advancing_clock_never_exceeds_the_quota() {
    for a in Algorithm::ALL {
        for q in quotas(a) {
            let (limiter, clock) = manual(a, q);
            let limiter: Arc<RateLimiter<ManualClock>> = Arc::new(limiter);
            let period = ns(q.period());
            // Steps that do not divide the period evenly, over about 40 periods.
            let step = period / 13 + 7;
            let steps = 40 * 13;
            let stop = Arc::new(AtomicBool::new(false));
            let total = Arc::new(AtomicU64::new(0));
            let (l, c, s, t) = (
                Arc::clone(&limiter),
                clock.clone(),
                Arc::clone(&stop),
                Arc::clone(&total),
            );
            let cap = limiter.burst();
            on_threads(move |i| {
                let mut rng = fastrand::Rng::with_seed(i as u64);
                let mut check = || {
                    let n = if rng.u32(0..4) == 0 {
                        rng.u32(1..=cap.min(4))
                    } else {
                        1
                    };
                    if l.check_n(n).unwrap().is_allowed() {
                        t.fetch_add(u64::from(n), Ordering::Relaxed);
                    }
                };
                if i == 0 {
                    // The clock thread checks too, and advances the clock after every
                    // few of its own checks (progress is counted in checks, not time).
                    for _ in 0..steps {
                        for _ in 0..8 {
                            check();
                        }
                        c.advance(Duration::from_nanos(step));
                    }
                    s.store(true, Ordering::Release);
                } else {
                    while !s.load(Ordering::Acquire) {
                        check();
                    }
                }
            });
            let elapsed = clock.now();
            assert_eq!(elapsed, step * steps);
            let admitted = total.load(Ordering::Relaxed);
            let most = bound(a, q, elapsed);
            assert!(
                admitted <= most,
                "{a:?} {q:?}: admitted {admitted} over {elapsed} ns, the quota allows {most}"
            );
            // The clock thread's first check ran on the fresh key at time 0.
            assert!(admitted > 0, "{a:?} {q:?}: nothing admitted at all");
            eprintln!("{a:?} {q:?}: admitted {admitted} of at most {most}");
        }
    }
}

/// As above, but the clock thread also steps the clock backwards (by up to two
/// periods) a third of the time: the total stays within the quota over the latest
/// reading ever made, whatever the interleaving.
#[test]
fn a_clock_stepping_back_under_contention_never_exceeds_the_quota() {
    for a in Algorithm::ALL {
        for q in quotas(a) {
            let (limiter, clock) = manual(a, q);
            let limiter = Arc::new(limiter);
            let period = ns(q.period());
            let step = period / 13 + 7;
            let steps = 40 * 13;
            let stop = Arc::new(AtomicBool::new(false));
            let total = Arc::new(AtomicU64::new(0));
            let latest = Arc::new(AtomicU64::new(0));
            let (l, c, s, t, m) = (
                Arc::clone(&limiter),
                clock.clone(),
                Arc::clone(&stop),
                Arc::clone(&total),
                Arc::clone(&latest),
            );
            let cap = limiter.burst();
            on_threads(move |i| {
                let mut rng = fastrand::Rng::with_seed(0x5EED + i as u64);
                let check = |rng: &mut fastrand::Rng| {
                    let n = if rng.u32(0..4) == 0 {
                        rng.u32(1..=cap.min(4))
                    } else {
                        1
                    };
                    if l.check_n(n).unwrap().is_allowed() {
                        t.fetch_add(u64::from(n), Ordering::Relaxed);
                    }
                };
                if i == 0 {
                    let mut max_seen = 0u64;
                    let mut now = 0u64;
                    for _ in 0..steps {
                        for _ in 0..8 {
                            check(&mut rng);
                        }
                        now = if rng.u32(0..3) == 0 {
                            now.saturating_sub(rng.u64(0..=2 * period))
                        } else {
                            max_seen + step
                        };
                        max_seen = max_seen.max(now);
                        c.set(Duration::from_nanos(now));
                    }
                    m.store(max_seen, Ordering::Release);
                    s.store(true, Ordering::Release);
                } else {
                    while !s.load(Ordering::Acquire) {
                        check(&mut rng);
                    }
                }
            });
            let latest = latest.load(Ordering::Acquire);
            let admitted = total.load(Ordering::Relaxed);
            let most = bound(a, q, latest);
            assert!(
                admitted <= most,
                "{a:?} {q:?}: admitted {admitted} with readings up to {latest} ns, the quota allows {most}"
            );
            assert!(admitted > 0, "{a:?} {q:?}: nothing admitted at all");
        }
    }
}
