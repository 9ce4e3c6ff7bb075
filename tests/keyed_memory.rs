//! Memory of keyed tables: reported before build, allocated fallibly in one block, and
//! a table too large for the machine refused with an error, never an abort (issue 13.3).

use tollgate::{Algorithm, ConfigError, KeyedRateLimiter, Quota};

#[test]
fn a_sliding_log_too_large_to_allocate_is_an_error_not_an_abort() {
    // 65,536 timestamps of 8 bytes for each of ~97,000 slots: about 50 GB.
    let b = KeyedRateLimiter::<u64>::builder(Algorithm::SlidingLog, Quota::per_minute(65_536));
    let bytes = b.memory_bytes().unwrap();
    assert!(bytes > 40 << 30, "{bytes}");
    match b.build() {
        Err(ConfigError::InvalidCapacity { requested, .. }) => assert_eq!(requested, 1 << 16),
        Err(e) => panic!("wrong error: {e}"),
        Ok(l) => panic!("built a {} byte table", l.memory_bytes()),
    }
}

#[test]
fn invalid_capacity_reports_the_key_count_asked_for() {
    let err = KeyedRateLimiter::<u64>::builder(Algorithm::SlidingLog, Quota::per_second(65_536))
        .max_keys(1 << 30)
        .build()
        .unwrap_err();
    assert!(
        matches!(err, ConfigError::InvalidCapacity { requested, .. } if requested == 1 << 30),
        "{err:?}"
    );
    // Past the largest key count: refused before anything is computed or allocated.
    let err = KeyedRateLimiter::<u64>::builder(Algorithm::TokenBucket, Quota::per_second(1))
        .max_keys((1 << 32) + 1)
        .memory_bytes()
        .unwrap_err();
    assert!(
        matches!(err, ConfigError::InvalidCapacity { requested, .. } if requested == (1 << 32) + 1)
    );
}

#[test]
fn the_builder_reports_exactly_the_memory_build_takes() {
    for algorithm in Algorithm::ALL {
        for max_keys in [1, 1_000, 100_000] {
            let b = KeyedRateLimiter::<str>::builder(algorithm, Quota::per_minute(100))
                .max_keys(max_keys);
            let predicted = b.memory_bytes().unwrap();
            let built = b.build().unwrap().memory_bytes();
            assert_eq!(predicted, built, "{algorithm:?} {max_keys}");
        }
    }
}

#[test]
fn packed_tables_stay_within_24_bytes_per_key() {
    for algorithm in Algorithm::ALL
        .into_iter()
        .filter(|a| *a != Algorithm::SlidingLog)
    {
        let l = KeyedRateLimiter::<u64>::builder(algorithm, Quota::per_second(10))
            .max_keys(1 << 20)
            .build()
            .unwrap();
        let per_key = l.memory_bytes() as f64 / f64::from(1u32 << 20);
        assert!(per_key <= 24.0, "{algorithm:?}: {per_key:.2} bytes per key");
    }
}

#[test]
fn shard_counts_that_would_break_the_capacity_promise_are_refused() {
    let b = || KeyedRateLimiter::<u64>::builder(Algorithm::TokenBucket, Quota::per_hour(1));
    for (keys, shards, ok) in [
        (1_000, 256, false),
        (1_000, 4, false),
        (1_024, 4, true),
        (1_000, 1, true),
        (1, 1, true),
        (1 << 16, 3, false),
        (1 << 16, 512, false),
    ] {
        let r = b().max_keys(keys).shards(shards).build();
        assert_eq!(r.is_ok(), ok, "{keys} keys over {shards} shards: {r:?}");
        if !ok {
            assert!(
                matches!(r, Err(ConfigError::InvalidShards { requested }) if requested == shards)
            );
        }
    }
}

/// Filling a table to exactly `max_keys` live keys under `Deny`: two-choice placement
/// refuses a few keys in 10,000 whatever the shard count (the default geometry too);
/// a shard count finer than 256 keys per shard refused 48 in 1,000, which `build`
/// now refuses instead.
#[test]
fn at_the_finest_shard_count_allowed_live_keys_fit() {
    use tollgate::{ManualClock, OnFull};
    for seed in 0..4 {
        let keys = 256 * 64;
        let l = KeyedRateLimiter::<u64, _>::builder(Algorithm::TokenBucket, Quota::per_hour(1))
            .max_keys(keys)
            .shards(64)
            .on_full(OnFull::Deny)
            .hash_seed(seed)
            .clock(ManualClock::new())
            .build()
            .unwrap();
        let refused = (0..keys as u64)
            .filter(|k| !l.check(k).is_allowed())
            .count();
        assert!(
            refused <= keys / 1_000,
            "seed {seed}: {refused} of {keys} refused"
        );
    }
}

#[test]
fn the_slot_word_is_lock_free_on_this_machine() {
    let l = KeyedRateLimiter::<u64>::builder(Algorithm::TokenBucket, Quota::per_second(1))
        .build()
        .unwrap();
    // Every x86_64 and aarch64 machine this crate is tested on has a 16-byte CAS; a
    // failure here means the build silently fell back to locks.
    if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        assert!(l.is_lock_free());
    }
}
