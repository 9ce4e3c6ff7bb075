//! `OnFull::Evict` forgets the entry whose loss can over-admit least: what it has used
//! (a bucket's debt, a window's count, the log's entries in the period), ties by idle
//! stamp. A throttled key is never freed while an entry that has used less can go.
//!
//! Model tests: a full table of one window, exact decisions before and after a flood.
//! Flood tests: 16 threads, half flooding a full table with new keys, half hammering
//! throttled keys, which are never admitted nor shown quota.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tollgate::{Algorithm, KeyedRateLimiter, ManualClock, OnFull, Quota};

const LIMIT: u32 = 10;

fn limiter(
    algorithm: Algorithm,
    max_keys: usize,
    clock: &ManualClock,
) -> KeyedRateLimiter<u64, ManualClock> {
    KeyedRateLimiter::builder(algorithm, Quota::per_hour(LIMIT))
        .max_keys(max_keys)
        .on_full(OnFull::Evict)
        .clock(clock.clone())
        .build()
        .unwrap()
}

/// Spends `n` of `key`'s quota at once.
fn spend(l: &KeyedRateLimiter<u64, ManualClock>, key: u64, n: u32) {
    assert!(l.check_n(&key, n).unwrap().is_allowed(), "{key}: {n}");
}

const THROTTLED: u64 = 1 << 50;
const HEAVY: u64 = (1 << 50) + 1;
const MIDDLE: u64 = (1 << 50) + 2;

/// A table of 12 slots in one window (every key's only window), full: a throttled key,
/// a heavy one (6 used), a middle one (3 used), and 9 light keys (1 used). The clock
/// then moves on by `later`, and 200 new keys arrive, each using 1: every one of them
/// evicts a light key (or an earlier new key), never the three that used more, whose
/// decisions are exactly what they were before.
fn model(algorithm: Algorithm, later: Duration) {
    let clock = ManualClock::new();
    // Starts mid-window, where a sliding window's previous count weighs half.
    clock.advance(Duration::from_secs(1800));
    let l = limiter(algorithm, 8, &clock);
    assert_eq!(l.stats().slots, 12, "one window of 12 slots");
    spend(&l, THROTTLED, LIMIT);
    spend(&l, HEAVY, 6);
    spend(&l, MIDDLE, 3);
    for light in 0..9 {
        spend(&l, light, 1);
    }
    let s = l.stats();
    assert_eq!((s.occupied, s.evictions, s.idle_reclaims), (12, 0, 0));
    clock.advance(later);
    let denied = l.check(&THROTTLED);
    assert!(!denied.is_allowed());
    assert_eq!(denied.remaining(), 0);
    let kept: Vec<_> = [HEAVY, MIDDLE].iter().map(|&k| (k, l.peek(&k))).collect();
    for (i, key) in (1u64 << 40..).take(200).enumerate() {
        let d = l.check(&key);
        assert!(d.is_allowed(), "{algorithm:?}: new key {i}");
        assert_eq!(d.remaining(), LIMIT - 1, "{algorithm:?}: new key {i}");
        assert_eq!(l.stats().evictions, i as u64 + 1, "{algorithm:?}");
        assert_eq!(
            l.check(&THROTTLED),
            denied,
            "{algorithm:?}: after new key {i}"
        );
        for &(k, before) in &kept {
            assert_eq!(
                l.peek(&k),
                before,
                "{algorithm:?}: key {k} after new key {i}"
            );
        }
    }
    // The newest key is tracked (it ties with the other new keys on what it used, and
    // goes idle last).
    assert_eq!(l.peek(&((1 << 40) + 199)).remaining(), LIMIT - 2);
    assert_eq!(l.stats().occupied, 12);
}

#[test]
fn model_token_bucket_evicts_the_smallest_debt() {
    model(Algorithm::TokenBucket, Duration::from_millis(1));
}

#[test]
fn model_leaky_bucket_evicts_the_smallest_debt() {
    model(Algorithm::LeakyBucket, Duration::from_millis(1));
}

/// Every entry of the window goes idle at the window's end: the count decides.
#[test]
fn model_fixed_window_evicts_the_smallest_count() {
    model(Algorithm::FixedWindow, Duration::from_millis(1));
}

/// Besides the count: a key whose whole quota was used in the previous window weighs
/// half of it at mid-window (5 of 10) and goes idle before every other entry, yet
/// stays, since a light key weighs 1.
#[test]
fn model_sliding_window_evicts_the_smallest_weighted_count() {
    let clock_window = Duration::from_secs(3600);
    // Built at mid-window of window 0; `PREVIOUS` spends its quota in window 0, and
    // the table is looked at in window 1, half-way through.
    let clock = ManualClock::new();
    clock.advance(clock_window / 2);
    let l = limiter(Algorithm::SlidingWindow, 8, &clock);
    const PREVIOUS: u64 = (1 << 50) + 3;
    spend(&l, PREVIOUS, LIMIT);
    clock.advance(clock_window);
    // At e = P/2: PREVIOUS weighs 5, so 5 more fit.
    assert_eq!(l.peek(&PREVIOUS).remaining(), LIMIT / 2 - 1);
    spend(&l, THROTTLED, LIMIT);
    spend(&l, HEAVY, 6);
    spend(&l, MIDDLE, 3);
    for light in 0..8 {
        spend(&l, light, 1);
    }
    assert_eq!(l.stats().occupied, 12);
    let denied = l.check(&THROTTLED);
    assert!(!denied.is_allowed());
    let kept: Vec<_> = [PREVIOUS, HEAVY, MIDDLE]
        .iter()
        .map(|&k| (k, l.peek(&k)))
        .collect();
    for (i, key) in (1u64 << 40..).take(200).enumerate() {
        assert!(l.check(&key).is_allowed());
        assert_eq!(l.stats().evictions, i as u64 + 1);
        assert_eq!(l.check(&THROTTLED), denied, "after new key {i}");
        for &(k, before) in &kept {
            assert_eq!(l.peek(&k), before, "key {k} after new key {i}");
        }
    }
    // And the rest of the model, from mid-window.
    model(Algorithm::SlidingWindow, Duration::from_millis(1));
}

/// The throttled log's newest entry is older than every new key's, so it would go idle
/// first; its 10 entries in the period keep it.
#[test]
fn model_sliding_log_evicts_the_fewest_entries_in_the_period() {
    model(Algorithm::SlidingLog, Duration::from_secs(1));
    // Logs of 1 entry (keys 0, 1) and of 2 (keys 2..12), one key a second. Among
    // those that used least, the one idle soonest goes first; a log of 2 entries goes
    // after every log of 1, however old.
    let clock = ManualClock::new();
    let l = limiter(Algorithm::SlidingLog, 8, &clock);
    for key in 0..12u64 {
        spend(&l, key, if key < 2 { 1 } else { 2 });
        clock.advance(Duration::from_secs(1));
    }
    // What `peek` shows for a log of `n` entries (a forgotten key shows 0).
    let shows = |n: u32| LIMIT - n - 1;
    for (new, gone) in [(100, 0), (101, 1), (102, 100), (103, 101)] {
        spend(&l, new, 1);
        clock.advance(Duration::from_secs(1));
        assert_eq!(l.peek(&gone).remaining(), shows(0), "{new} evicts {gone}");
        assert_eq!(l.peek(&new).remaining(), shows(1), "{new}");
        for key in 2..12u64 {
            assert_eq!(l.peek(&key).remaining(), shows(2), "{new}: {key}");
        }
    }
    assert_eq!(l.stats().evictions, 4);
}

/// Throttled keys per flood test: fewer than the 24 slots of a key's two windows, so
/// every pair of windows always holds an entry that has used less.
const THROTTLED_KEYS: u64 = 16;

/// A full table of 1,024 keys (1,536 slots) with 16 throttled keys among light ones;
/// then 8 threads flood it with new keys (one request each) while 8 hammer the
/// throttled keys: every answer to a throttled key is a denial showing no quota.
fn flood(algorithm: Algorithm) {
    let clock = ManualClock::new();
    let l = limiter(algorithm, 1_024, &clock);
    let throttled: Vec<u64> = (0..THROTTLED_KEYS).map(|k| u64::MAX - k).collect();
    for &k in &throttled {
        spend(&l, k, LIMIT);
    }
    // Light keys until every slot holds a live entry.
    let mut light = 0u64;
    while l.stats().occupied < l.stats().slots {
        spend(&l, light, 1);
        light += 1;
        assert!(light < 100_000, "{algorithm:?}");
    }
    // The flood comes later: its entries go idle after the throttled ones.
    clock.advance(Duration::from_millis(1));
    let done = AtomicBool::new(false);
    // The floods start once every hammer has made one pass, so that on a machine with
    // fewer cores than threads the hammers cannot all be scheduled after the floods.
    let started = std::sync::Barrier::new(16);
    let hammered = std::thread::scope(|s| {
        let floods: Vec<_> = (0..8u64)
            .map(|t| {
                let (l, started) = (&l, &started);
                s.spawn(move || {
                    started.wait();
                    for i in 0..4_000u64 {
                        let key = ((t + 1) << 32) | i;
                        assert!(l.check(&key).is_allowed(), "{algorithm:?}");
                    }
                })
            })
            .collect();
        let hammers: Vec<_> = (0..8usize)
            .map(|t| {
                let (l, done, throttled, started) = (&l, &done, &throttled, &started);
                s.spawn(move || {
                    let mut n = 0u64;
                    let mut first = true;
                    while first || !done.load(Ordering::Acquire) {
                        for &k in throttled.iter().skip(t % 2) {
                            let d = if n % 3 == 0 { l.peek(&k) } else { l.check(&k) };
                            assert!(
                                !d.is_allowed() && d.remaining() == 0,
                                "{algorithm:?}: throttled key {k} freed: {d:?}"
                            );
                            n += 1;
                        }
                        if first {
                            first = false;
                            started.wait();
                        }
                    }
                    n
                })
            })
            .collect();
        for f in floods {
            f.join().unwrap();
        }
        done.store(true, Ordering::Release);
        hammers.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
    });
    let s = l.stats();
    assert!(s.evictions >= 32_000, "{algorithm:?}: {s:?}");
    assert!(hammered > 0);
    for &k in &throttled {
        assert!(!l.check(&k).is_allowed(), "{algorithm:?}: {k}");
    }
}

#[test]
fn flood_never_frees_a_throttled_token_bucket_key() {
    flood(Algorithm::TokenBucket);
}

#[test]
fn flood_never_frees_a_throttled_leaky_bucket_key() {
    flood(Algorithm::LeakyBucket);
}

#[test]
fn flood_never_frees_a_throttled_fixed_window_key() {
    flood(Algorithm::FixedWindow);
}

#[test]
fn flood_never_frees_a_throttled_sliding_window_key() {
    flood(Algorithm::SlidingWindow);
}

#[test]
fn flood_never_frees_a_throttled_sliding_log_key() {
    flood(Algorithm::SlidingLog);
}

/// Keys of tiers with different rates are ranked by what they used in requests, not
/// by their debt in time: a pro key that used 20 of 1,000 per hour (a debt of 72 s)
/// stays, while a free key that used 5 of 10 per hour (a debt of 30 min) goes first.
#[test]
fn tiers_of_different_rates_are_ranked_in_requests() {
    let clock = ManualClock::new();
    let l = KeyedRateLimiter::<u64, _>::builder(Algorithm::TokenBucket, Quota::per_hour(10))
        .tiers([Quota::per_hour(1_000)])
        .max_keys(8)
        .on_full(OnFull::Evict)
        .clock(clock.clone())
        .build()
        .unwrap();
    assert_eq!(l.stats().slots, 12, "one window of 12 slots");
    let (pro, free) = (l.tier(1).unwrap(), l.tier(0).unwrap());
    const PRO: u64 = 1 << 40;
    const LIGHT: u64 = (1 << 40) + 1;
    assert!(pro.check_n(&PRO, 20).unwrap().is_allowed());
    assert!(free.check_n(&LIGHT, 5).unwrap().is_allowed());
    for k in 0..10 {
        assert!(free.check_n(&k, 6).unwrap().is_allowed());
    }
    assert_eq!(l.stats().occupied, 12);
    assert!(free.check(&(1 << 41)).is_allowed()); // a new key: one eviction
    assert_eq!(l.stats().evictions, 1);
    assert_eq!(pro.peek(&PRO).remaining(), 1_000 - 21, "the pro key stays");
    assert_eq!(
        free.peek(&LIGHT).remaining(),
        10 - 1,
        "the free key that used 5 went"
    );
}

/// Issue 27, item 5: of two keys of different tiers that used as much in requests, the
/// one that goes idle sooner is evicted (README: "ties by idle stamp"): the key that
/// owes 40 minutes of its hourly tier stays, the one that owes 200 ms goes.
#[test]
fn tiers_tied_in_requests_evict_the_soonest_idle() {
    for keyed_first in [false, true] {
        let clock = ManualClock::new();
        let l = KeyedRateLimiter::<u64, _>::builder(Algorithm::TokenBucket, Quota::per_second(10))
            .tiers([Quota::per_hour(3)])
            .max_keys(1)
            .clock(clock.clone())
            .build()
            .unwrap();
        let slots = l.stats().slots;
        let (slow, fast) = (l.tier(1).unwrap(), l.tier(0).unwrap());
        // Fill every slot: the hourly key first or last in the scan's order.
        let others: Vec<u64> = (100..100 + slots - 2).collect();
        if keyed_first {
            assert!(slow.check_n(&3, 2).unwrap().is_allowed());
        }
        for k in &others {
            assert!(slow.check_n(k, 3).unwrap().is_allowed()); // each used all 3
        }
        assert!(fast.check_n(&5, 2).unwrap().is_allowed());
        if !keyed_first {
            assert!(slow.check_n(&3, 2).unwrap().is_allowed());
        }
        assert_eq!(l.stats().occupied, slots);
        assert!(fast.check(&7).is_allowed()); // a new key: one eviction
        assert_eq!(l.stats().evictions, 1);
        assert_eq!(
            slow.peek_n(&3, 0).unwrap().remaining(),
            1,
            "the key owing 40 minutes was evicted for one owing 200 ms"
        );
    }
}

/// Issue 27, item 5 (found by the fuzzer), the sliding log: a key of a tier with a
/// larger limit that used 3 entries stays, one that used 1 goes, although tier 0's
/// limit (1) would count both as 1.
#[test]
fn log_tiers_are_ranked_by_every_entry_they_hold() {
    let clock = ManualClock::new();
    let l = KeyedRateLimiter::<u64, _>::builder(Algorithm::SlidingLog, Quota::per_second(1))
        .tiers([Quota::per_second(4)])
        .max_keys(1)
        .clock(clock.clone())
        .build()
        .unwrap();
    let slots = l.stats().slots;
    let big = l.tier(1).unwrap();
    assert!(big.check_n(&7, 3).unwrap().is_allowed());
    for k in 100..100 + slots - 2 {
        assert!(big.check_n(&k, 4).unwrap().is_allowed());
    }
    assert!(big.check_n(&5, 1).unwrap().is_allowed());
    assert_eq!(l.stats().occupied, slots);
    assert!(big.check(&9).is_allowed()); // a new key: one eviction
    assert_eq!(l.stats().evictions, 1);
    assert_eq!(
        big.peek_n(&7, 0).unwrap().remaining(),
        1,
        "the key that used 3 was evicted"
    );
}

/// A booking on a key that is then evicted, and the key back with a fresh state: the
/// booking's cancel gives the fresh state nothing (its generation is new), for every
/// algorithm; compared with a twin that never cancels.
#[test]
fn a_cancel_after_the_key_was_evicted_gives_nothing_to_its_new_state() {
    for a in Algorithm::ALL {
        let run = |cancel: bool| {
            let clock = ManualClock::new();
            let l = limiter(a, 8, &clock);
            const A: u64 = 1 << 45;
            let r = l.reserve(&A, 1, Duration::ZERO).expect("booked at once");
            for k in 0..11 {
                spend(&l, k, 5);
            }
            assert_eq!(l.stats().occupied, 12);
            spend(&l, 1 << 46, 1); // evicts A, which used least
            assert_eq!(l.stats().evictions, 1, "{a:?}");
            spend(&l, A, LIMIT); // A again, fresh, and spent
            if cancel {
                r.cancel();
            } else {
                drop(r);
            }
            (l.check(&A).is_allowed(), l.peek(&A))
        };
        let (with, without) = (run(true), run(false));
        assert!(!with.0, "{a:?}: the cancel gave the new state room");
        assert_eq!(with, without, "{a:?}");
    }
}
