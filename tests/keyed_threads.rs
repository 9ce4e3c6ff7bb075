//! Real threads on one keyed limiter: hot keys and churn (a stream of new keys) at the
//! same time. With the clock frozen, each hot key is admitted exactly its capacity,
//! phase after phase; while the clock runs, never more than the quota allows.

use std::sync::{Arc, Barrier};
use std::time::Duration;
use tollgate::{Algorithm, KeyedRateLimiter, ManualClock, OnFull, Quota};

const THREADS: u64 = 4;
const HOT: u64 = 8;
const LIMIT: u32 = 100;
const PERIOD: Duration = Duration::from_secs(1);

fn quota() -> Quota {
    Quota::new(LIMIT, PERIOD)
}

/// Phases with a frozen clock, separated by a barrier and a jump of two periods (every
/// algorithm is back to a full quota). In each phase every thread hammers the hot keys
/// and inserts new keys; each hot key must be admitted exactly `LIMIT` per phase.
#[test]
fn frozen_clock_phases_admit_exactly_capacity_per_key() {
    const PHASES: u64 = 5;
    const OPS: u64 = 400; // per thread and phase: 50 attempts per hot key
    for policy in [OnFull::Deny, OnFull::Allow, OnFull::Evict] {
        for algorithm in Algorithm::ALL {
            let clock = ManualClock::new();
            let limiter = Arc::new(
                KeyedRateLimiter::<u64, _>::builder(algorithm, quota())
                    .max_keys(2_048)
                    .on_full(policy)
                    .clock(clock.clone())
                    .build()
                    .unwrap(),
            );
            let barrier = Arc::new(Barrier::new(THREADS as usize + 1));
            let handles: Vec<_> = (0..THREADS)
                .map(|t| {
                    let limiter = limiter.clone();
                    let barrier = barrier.clone();
                    std::thread::spawn(move || {
                        let mut admitted = vec![[0u32; HOT as usize]; PHASES as usize];
                        for (phase, counts) in admitted.iter_mut().enumerate() {
                            barrier.wait();
                            for i in 0..OPS {
                                let hot = (i + t) % HOT;
                                if limiter.check(&hot).is_allowed() {
                                    counts[hot as usize] += 1;
                                }
                                // Churn: a key never seen before.
                                let fresh = 1_000 + ((phase as u64 * THREADS + t) * OPS + i);
                                let _ = limiter.check(&fresh);
                            }
                            barrier.wait();
                        }
                        admitted
                    })
                })
                .collect();
            for _ in 0..PHASES {
                barrier.wait(); // start
                barrier.wait(); // done
                clock.advance(2 * PERIOD);
            }
            let mut totals = vec![[0u32; HOT as usize]; PHASES as usize];
            for h in handles {
                for (phase, counts) in h.join().unwrap().into_iter().enumerate() {
                    for (k, c) in counts.into_iter().enumerate() {
                        totals[phase][k] += c;
                    }
                }
            }
            for (phase, counts) in totals.iter().enumerate() {
                for (k, &c) in counts.iter().enumerate() {
                    assert_eq!(c, LIMIT, "{policy:?} {algorithm:?} phase {phase} key {k}");
                }
            }
            let stats = limiter.stats();
            assert!(stats.occupied <= stats.slots);
            assert_eq!(
                stats.allowed + stats.rejected,
                PHASES * THREADS * OPS * 2,
                "{policy:?} {algorithm:?}"
            );
        }
    }
}

/// The clock advances while threads hammer hot keys and churn new ones: no hot key is
/// ever admitted more than `LIMIT × (elapsed periods + 1)`, for every algorithm.
#[test]
fn running_clock_never_over_admits() {
    const STEPS: u64 = 200;
    const STEP: Duration = Duration::from_millis(10);
    for algorithm in Algorithm::ALL {
        let clock = ManualClock::new();
        let limiter = Arc::new(
            KeyedRateLimiter::<u64, _>::builder(algorithm, quota())
                .max_keys(1_024)
                .on_full(OnFull::Deny)
                .clock(clock.clone())
                .build()
                .unwrap(),
        );
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ticker = {
            let clock = clock.clone();
            let done = done.clone();
            std::thread::spawn(move || {
                for _ in 0..STEPS {
                    clock.advance(STEP);
                    std::thread::yield_now();
                }
                done.store(true, std::sync::atomic::Ordering::SeqCst);
            })
        };
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let limiter = limiter.clone();
                let done = done.clone();
                std::thread::spawn(move || {
                    let mut counts = [0u64; HOT as usize];
                    let mut i = 0u64;
                    loop {
                        let hot = (i + t) % HOT;
                        if limiter.check(&hot).is_allowed() {
                            counts[hot as usize] += 1;
                        }
                        let _ = limiter.check(&(1_000_000 * (t + 1) + i));
                        i += 1;
                        if done.load(std::sync::atomic::Ordering::SeqCst) {
                            break;
                        }
                    }
                    counts
                })
            })
            .collect();
        ticker.join().unwrap();
        let mut totals = [0u64; HOT as usize];
        for h in handles {
            for (k, c) in h.join().unwrap().into_iter().enumerate() {
                totals[k] += c;
            }
        }
        let elapsed = STEP * STEPS as u32;
        let periods = (elapsed.as_nanos() / PERIOD.as_nanos()) as u64;
        let bound = u64::from(LIMIT) * (periods + 1);
        for (k, &c) in totals.iter().enumerate() {
            assert!(c <= bound, "{algorithm:?} key {k}: {c} > {bound}");
        }
        assert_eq!(limiter.stats().evictions, 0);
    }
}
