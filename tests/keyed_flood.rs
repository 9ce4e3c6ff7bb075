//! Floods of distinct keys: the memory never changes, each `OnFull` policy does what it
//! promises, and a table built for `n` keys holds `n` live keys with (almost) no
//! evictions.

use std::time::Duration;
use tollgate::{Algorithm, KeyedRateLimiter, ManualClock, OnFull, Quota};

fn quota(algorithm: Algorithm) -> Quota {
    match algorithm {
        Algorithm::TokenBucket | Algorithm::LeakyBucket => Quota::per_hour(4).with_burst(2),
        _ => Quota::per_hour(2),
    }
}

/// 1,000,000 new keys into a table built for 16,384: `memory_bytes()` moves by zero.
#[test]
fn a_million_new_keys_change_memory_by_zero() {
    for algorithm in Algorithm::ALL {
        let clock = ManualClock::new();
        let limiter = KeyedRateLimiter::<u64, _>::builder(algorithm, quota(algorithm))
            .max_keys(16_384)
            .clock(clock.clone())
            .build()
            .unwrap();
        let before = limiter.memory_bytes();
        // Two threads, half a million new keys each, the clock moving meanwhile.
        std::thread::scope(|s| {
            for half in 0..2u64 {
                let (limiter, clock) = (&limiter, &clock);
                s.spawn(move || {
                    for key in half * 500_000..(half + 1) * 500_000 {
                        let _ = limiter.check(&key);
                        if key % 100_000 == 0 {
                            clock.advance(Duration::from_secs(60));
                        }
                    }
                });
            }
        });
        assert_eq!(limiter.memory_bytes(), before, "{algorithm:?}");
        let stats = limiter.stats();
        assert_eq!(stats.allowed + stats.rejected, 1_000_000, "{algorithm:?}");
        assert!(stats.occupied <= stats.slots, "{algorithm:?}");
    }
}

/// The packed algorithms stay within about 24 bytes per key of capacity; the sliding
/// log adds its rings, sized from the quota at build.
#[test]
fn memory_per_key_of_capacity() {
    const CAP: usize = 16_384;
    for algorithm in Algorithm::ALL {
        let limiter = KeyedRateLimiter::<u64>::builder(algorithm, quota(algorithm))
            .max_keys(CAP)
            .build()
            .unwrap();
        let per_key = limiter.memory_bytes() as f64 / CAP as f64;
        eprintln!("{algorithm:?}: {per_key:.2} bytes per key of capacity");
        if algorithm.is_packed() {
            assert!(per_key <= 24.5, "{algorithm:?}: {per_key}");
            assert_eq!(limiter.ring_bytes(), 0);
        } else {
            assert_eq!(limiter.ring_bytes(), 16); // limit 2 × 8 bytes
            let rings = limiter.stats().slots as usize * limiter.ring_bytes();
            assert!(limiter.memory_bytes() > rings);
        }
    }
}

/// Under `Deny`, a throttled key stays throttled through a flood of new keys, which
/// are refused once the table is full; nothing is evicted.
#[test]
fn deny_keeps_a_throttled_key_throttled_through_the_flood() {
    for algorithm in Algorithm::ALL {
        let clock = ManualClock::new();
        let limiter = KeyedRateLimiter::<u64, _>::builder(algorithm, quota(algorithm))
            .max_keys(1_024)
            .on_full(OnFull::Deny)
            .clock(clock.clone())
            .build()
            .unwrap();
        let victim = u64::MAX;
        let cap = limiter.burst();
        assert!(limiter.check_n(&victim, cap).unwrap().is_allowed());
        assert!(!limiter.check(&victim).is_allowed());
        let before = limiter.memory_bytes();
        for key in 0..200_000u64 {
            // Each new key spends its whole quota: no entry ever goes idle.
            let _ = limiter.check_n(&key, cap);
            if key % 10_000 == 0 {
                assert!(
                    !limiter.check(&victim).is_allowed(),
                    "{algorithm:?} at {key}"
                );
                clock.advance(Duration::from_millis(1));
            }
        }
        assert!(!limiter.check(&victim).is_allowed(), "{algorithm:?}");
        let stats = limiter.stats();
        assert_eq!(stats.evictions, 0, "{algorithm:?}");
        assert!(stats.refused > 100_000, "{algorithm:?}: {stats:?}");
        assert_eq!(limiter.memory_bytes(), before);
        // A refused key gets a denial that says when to retry.
        let d = limiter.check(&(1 << 40)).unwrap_or_deny();
        assert!(!d.is_allowed());
        assert!(d.retry_after().is_some());
    }
}

trait UnwrapOrDeny {
    fn unwrap_or_deny(self) -> tollgate::Decision;
}

impl UnwrapOrDeny for tollgate::Decision {
    fn unwrap_or_deny(self) -> tollgate::Decision {
        self
    }
}

/// Under `Allow`, new keys that find no room are admitted untracked, and existing
/// throttled keys are never forgotten.
#[test]
fn allow_admits_untracked_and_keeps_throttled_keys() {
    for algorithm in Algorithm::ALL {
        let limiter = KeyedRateLimiter::<u64, _>::builder(algorithm, quota(algorithm))
            .max_keys(1_024)
            .on_full(OnFull::Allow)
            .clock(ManualClock::new())
            .build()
            .unwrap();
        let victim = u64::MAX;
        let cap = limiter.burst();
        assert!(limiter.check_n(&victim, cap).unwrap().is_allowed());
        for key in 0..100_000u64 {
            assert!(
                limiter.check_n(&key, cap).unwrap().is_allowed(),
                "{algorithm:?}"
            );
        }
        assert!(!limiter.check(&victim).is_allowed(), "{algorithm:?}");
        let stats = limiter.stats();
        assert_eq!(stats.evictions, 0);
        assert!(stats.untracked > 90_000, "{algorithm:?}: {stats:?}");
        assert_eq!(stats.allowed, 100_001);
    }
}

/// Under `Evict`, the flood is tracked by forgetting the entries that know the least,
/// and every eviction is counted.
#[test]
fn evict_tracks_the_flood_and_counts_evictions() {
    for algorithm in Algorithm::ALL {
        let limiter = KeyedRateLimiter::<u64, _>::builder(algorithm, quota(algorithm))
            .max_keys(1_024)
            .clock(ManualClock::new())
            .build()
            .unwrap();
        let before = limiter.memory_bytes();
        for key in 0..100_000u64 {
            assert!(limiter.check(&key).is_allowed(), "{algorithm:?}");
        }
        let stats = limiter.stats();
        assert!(stats.evictions > 90_000, "{algorithm:?}: {stats:?}");
        assert_eq!(stats.occupied, stats.slots);
        assert_eq!(stats.untracked + stats.refused, 0);
        assert_eq!(limiter.memory_bytes(), before);
        // The newest key was just tracked: its second request sees its first.
        let last = 99_999;
        let d = limiter.check_n(&last, 0).unwrap();
        assert_eq!(d.remaining(), limiter.burst() - 1, "{algorithm:?}");
    }
}

/// With `n` live keys in a table built for `n`, keys churning generation after
/// generation, evictions stay below 0.1% of insertions.
#[test]
fn capacity_holds_n_live_keys() {
    const N: u64 = 16_384;
    const GENERATIONS: u64 = 12;
    for algorithm in [Algorithm::TokenBucket, Algorithm::SlidingLog] {
        let clock = ManualClock::new();
        // One request per key makes it live for exactly one second.
        let limiter = KeyedRateLimiter::<u64, _>::builder(algorithm, Quota::per_second(1))
            .max_keys(N as usize)
            .clock(clock.clone())
            .build()
            .unwrap();
        for g in 0..GENERATIONS {
            for k in 0..N {
                assert!(limiter.check(&(g * N + k)).is_allowed());
            }
            let s = limiter.stats();
            assert!(s.active <= N);
            clock.advance(Duration::from_secs(1));
        }
        let s = limiter.stats();
        let inserted = N * GENERATIONS;
        let rate = s.evictions as f64 / inserted as f64;
        eprintln!(
            "{algorithm:?}: {} evictions, {} idle reclaims over {inserted} insertions ({:.4}%)",
            s.evictions,
            s.idle_reclaims,
            rate * 100.0
        );
        assert!(rate < 0.001, "{algorithm:?}: {s:?}");
    }
}

/// Continuous churn: one new key every `1 s / n`, each live for 1 s, so `n` keys are
/// live at every moment and old ones go idle one by one. Evictions stay below 0.1%.
#[test]
fn capacity_holds_n_live_keys_under_continuous_churn() {
    const N: u64 = 16_384;
    // (A sliding-window key stays live up to two periods: it would not fit this schedule.)
    for algorithm in [
        Algorithm::TokenBucket,
        Algorithm::FixedWindow,
        Algorithm::SlidingLog,
    ] {
        let clock = ManualClock::new();
        let limiter = KeyedRateLimiter::<u64, _>::builder(algorithm, Quota::per_second(1))
            .max_keys(N as usize)
            .clock(clock.clone())
            .build()
            .unwrap();
        // Rounded up, so that at most N keys are live at once.
        let step = Duration::from_nanos(1_000_000_000 / N + 1);
        let inserted = 10 * N;
        for key in 0..inserted {
            assert!(limiter.check(&key).is_allowed());
            clock.advance(step);
        }
        let s = limiter.stats();
        let rate = s.evictions as f64 / inserted as f64;
        eprintln!(
            "{algorithm:?} continuous churn: {} evictions over {inserted} insertions ({:.4}%)",
            s.evictions,
            rate * 100.0
        );
        assert!(s.active <= N);
        assert!(rate < 0.001, "{algorithm:?}: {s:?}");
    }
}

/// A new key refused by a table whose entries are all live (the refusal made without
/// the claim lock) is told to retry exactly when the soonest of them goes idle, and is
/// admitted then; under `Allow` it is admitted untracked meanwhile.
#[test]
fn a_refused_new_key_retries_when_the_soonest_entry_goes_idle() {
    for policy in [OnFull::Deny, OnFull::Allow] {
        let clock = ManualClock::new();
        // A two-slot table: room for A and C only.
        let limiter =
            KeyedRateLimiter::<u64, _>::builder(Algorithm::TokenBucket, Quota::per_second(1))
                .max_keys(1)
                .on_full(policy)
                .clock(clock.clone())
                .build()
                .unwrap();
        assert_eq!(limiter.stats().slots, 2);
        assert!(limiter.check(&1).is_allowed()); // A: idle at 1.0 s
        clock.advance(Duration::from_millis(300));
        assert!(limiter.check(&3).is_allowed()); // C: idle at 1.3 s
        clock.advance(Duration::from_millis(200));
        let d = limiter.check(&2);
        match policy {
            OnFull::Deny => {
                assert!(!d.is_allowed());
                assert_eq!(d.retry_after(), Some(Duration::from_millis(500)));
                assert_eq!(limiter.stats().refused, 1);
            }
            _ => {
                assert!(d.is_allowed());
                assert_eq!(limiter.stats().untracked, 1);
            }
        }
        // At 1.0 s A is idle: B takes its slot.
        clock.advance(Duration::from_millis(500));
        assert!(limiter.check(&2).is_allowed(), "{policy:?}");
        assert!(!limiter.check(&2).is_allowed(), "{policy:?}");
        assert_eq!(limiter.stats().idle_reclaims, 1, "{policy:?}");
    }
}
