//! Model-based test: a keyed limiter against a `HashMap` of single-key reference
//! limiters, on random key, cost and time schedules, with keys that fit the capacity.
//! Every decision must be identical (allowed, remaining, reset, retry, delay).

use std::collections::HashMap;
use std::time::Duration;
use tollgate::{Algorithm, KeyedRateLimiter, ManualClock, Quota, RateLimiter};

fn quota(algorithm: Algorithm) -> Quota {
    match algorithm {
        Algorithm::TokenBucket | Algorithm::LeakyBucket => {
            Quota::new(5, Duration::from_millis(100)).with_burst(3)
        }
        _ => Quota::new(4, Duration::from_millis(100)),
    }
}

/// Whether a reference limiter's state still says something (its peek shows a reset
/// ahead): exactly the keys the table must not forget.
fn is_live(l: &RateLimiter<ManualClock>) -> bool {
    !l.check_n(0).unwrap().reset_after().is_zero()
}

/// Runs `ops` random requests over `keys` distinct keys; returns the disagreements.
/// Requests to a new key are redirected to a live one whenever `capacity` keys are
/// live already, so the keys always fit.
fn run(algorithm: Algorithm, seed: u64, keys: u64, capacity: usize, ops: usize) -> usize {
    run_with(algorithm, quota(algorithm), seed, keys, capacity, ops)
}

/// [`run`] under quota `q`.
fn run_with(
    algorithm: Algorithm,
    q: Quota,
    seed: u64,
    keys: u64,
    capacity: usize,
    ops: usize,
) -> usize {
    let mut rng = fastrand::Rng::with_seed(seed);
    let clock = ManualClock::new();
    let keyed = KeyedRateLimiter::<u64, _>::builder(algorithm, q)
        .max_keys(capacity)
        .clock(clock.clone())
        .build()
        .unwrap();
    let mut reference: HashMap<u64, RateLimiter<ManualClock>> = HashMap::new();
    let cap = keyed.burst();
    let mut disagreements = 0;
    for op in 0..ops {
        match rng.u8(0..10) {
            0 => clock.advance(Duration::from_nanos(rng.u64(0..250_000_000))),
            1 => clock.advance(Duration::from_nanos(rng.u64(0..10_000_000))),
            _ => {}
        }
        // A few hot keys and a long tail.
        let mut key = if rng.bool() {
            rng.u64(0..keys.min(4))
        } else {
            rng.u64(0..keys)
        };
        if keys > capacity as u64 {
            let live: Vec<u64> = reference
                .iter()
                .filter(|(_, l)| is_live(l))
                .map(|(k, _)| *k)
                .collect();
            if live.len() >= capacity && !live.contains(&key) {
                key = live[rng.usize(0..live.len())];
            }
        }
        let cost = rng.u32(0..=cap + 1);
        let single = reference.entry(key).or_insert_with(|| {
            RateLimiter::builder(algorithm, q)
                .clock(clock.clone())
                .build()
                .unwrap()
        });
        let want = single.check_n(cost);
        let got = keyed.check_n(&key, cost);
        if want != got {
            disagreements += 1;
            if disagreements <= 5 {
                eprintln!(
                    "{algorithm:?} seed {seed} op {op}: key {key} cost {cost}: \
                     reference {want:?}, keyed {got:?}"
                );
            }
        }
    }
    let stats = keyed.stats();
    assert_eq!(
        stats.evictions + stats.untracked + stats.refused,
        0,
        "{stats:?}"
    );
    if keys > capacity as u64 {
        assert!(stats.idle_reclaims > 0, "{stats:?}");
    }
    disagreements
}

#[test]
fn keyed_agrees_with_a_map_of_single_key_limiters() {
    for algorithm in Algorithm::ALL {
        let mut total = 0;
        for seed in 0..20 {
            total += run(algorithm, seed, 200, 200, 5_000);
        }
        assert_eq!(total, 0, "{algorithm:?}: {total} disagreements");
    }
}

/// A sliding log too large for the caches (rings of 64 timestamps for 20,000 keys, about
/// 15 MiB) decides on another copy of the code, which prefetches each decision's slot and
/// ring line by a hint kept beside the slots: it decides alike.
#[test]
fn a_sliding_log_beyond_the_caches_agrees_too() {
    let q = Quota::new(64, Duration::from_millis(100));
    let mut total = 0;
    for seed in 0..5 {
        total += run_with(Algorithm::SlidingLog, q, 2_000 + seed, 300, 20_000, 5_000);
    }
    assert_eq!(total, 0, "{total} disagreements");
}

/// Many keys through a tiny table (one window of 5 slots for 3 live keys): slots are
/// reclaimed over and over, and the decisions still agree.
#[test]
fn keyed_agrees_in_a_tiny_table_with_constant_reclaim() {
    for algorithm in Algorithm::ALL {
        let mut total = 0;
        for seed in 0..20 {
            total += run(algorithm, 1_000 + seed, 40, 3, 3_000);
        }
        assert_eq!(total, 0, "{algorithm:?}: {total} disagreements");
    }
}

/// Keys of every shape agree too (`str`, `[u8]`, `IpAddr`).
#[test]
fn unsized_and_address_keys_agree() {
    use std::net::IpAddr;
    for algorithm in Algorithm::ALL {
        let clock = ManualClock::new();
        let by_str = KeyedRateLimiter::<str, _>::builder(algorithm, quota(algorithm))
            .max_keys(64)
            .clock(clock.clone())
            .build()
            .unwrap();
        let by_bytes = KeyedRateLimiter::<[u8], _>::builder(algorithm, quota(algorithm))
            .max_keys(64)
            .clock(clock.clone())
            .build()
            .unwrap();
        let by_ip = KeyedRateLimiter::<IpAddr, _>::builder(algorithm, quota(algorithm))
            .max_keys(64)
            .clock(clock.clone())
            .build()
            .unwrap();
        let mut reference: HashMap<u8, RateLimiter<ManualClock>> = HashMap::new();
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..2_000 {
            if rng.u8(0..8) == 0 {
                clock.advance(Duration::from_millis(rng.u64(0..60)));
            }
            let k = rng.u8(0..20);
            let name = format!("user-{k}");
            let ip = IpAddr::from([10, 0, 0, k]);
            let want = reference
                .entry(k)
                .or_insert_with(|| {
                    RateLimiter::builder(algorithm, quota(algorithm))
                        .clock(clock.clone())
                        .build()
                        .unwrap()
                })
                .check();
            assert_eq!(by_str.check(&name), want, "{algorithm:?} str");
            assert_eq!(by_bytes.check(name.as_bytes()), want, "{algorithm:?} bytes");
            assert_eq!(by_ip.check(&ip), want, "{algorithm:?} ip");
        }
    }
}
