//! Issue 30, found by the `budget` fuzz target (fuzz/regressions/budget/
//! bucket-charge-given-back-after-set-quota-round-trip and -after-tier-round-trip): a
//! bucket's `Charge::give_back` after its state was converted to another rate and back
//! while it owed nothing. README (Token budgets): never "after a bucket's conversion to
//! another rate (a `RateLimiter`'s `set_quota` that changes its interval; a keyed
//! table's request that writes a key's state at another rate than it was written at: a
//! tier's, or after `set_quota`), whether or not it owed anything then, and even once
//! converted back".

use std::time::Duration;
use tollgate::{Algorithm, KeyedRateLimiter, ManualClock, Quota, RateLimiter};

/// 4 per ms, burst 8: `T` = 250 µs.
fn budget(a: Algorithm) -> (RateLimiter<ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let l = RateLimiter::builder(a, Quota::new(4, Duration::from_millis(1)).with_burst(8))
        .clock(clock.clone())
        .build()
        .unwrap();
    (l, clock)
}

/// The finding's sequence. `early` is charged 16 at 0 (`TAT` 4 ms), and at 2 ms a
/// stateless `give_back` empties the bucket (`TAT` = now) while `early`'s record still
/// says it holds 8 of its requests' time. With `round_trip`, `set_quota` then goes to
/// another rate and back (owing nothing: the state is written as `now` at the new
/// rate). A later charge of 16 puts the bucket 16 requests ahead (`TAT` 6 ms); then
/// `early` gives back 3. Returns the wait for one request after it.
fn wait_after_early_give_back(a: Algorithm, round_trip: bool) -> Option<Duration> {
    let (l, clock) = budget(a);
    let mut early = l.charge(21);
    assert_eq!((early.taken(), early.owed(), early.dropped()), (16, 8, 5));
    clock.advance(Duration::from_millis(2));
    assert_eq!(l.give_back(9), 8, "the bucket held 8 requests' time");
    early.give_back(1); // nothing left to give: the bucket is already empty
    assert!(l.peek_n(8).unwrap().is_allowed());
    if round_trip {
        let slow = Quota::new(4, Duration::from_millis(100));
        l.set_quota(slow).unwrap();
        l.set_quota(Quota::new(4, Duration::from_millis(1)).with_burst(8))
            .unwrap();
    }
    let later = l.charge(21);
    assert_eq!((later.taken(), later.owed()), (16, 8));
    early.give_back(3);
    l.peek().retry_after()
}

/// After the round trip, `early` gives nothing back: the later charge's debt stays
/// whole, 8 past the burst and one more request to wait for (2.25 ms). Without it,
/// `early` still gives back what its record says it holds (3 of its requests, which
/// the stateless give-back cannot be told apart from): 1.5 ms.
#[test]
fn a_charge_gives_nothing_back_after_set_quota_converted_an_empty_bucket_and_back() {
    for a in [Algorithm::TokenBucket, Algorithm::LeakyBucket] {
        assert_eq!(
            wait_after_early_give_back(a, true),
            Some(Duration::from_micros(2_250)),
            "{a:?}: a give-back after a conversion to another rate and back"
        );
        assert_eq!(
            wait_after_early_give_back(a, false),
            Some(Duration::from_micros(1_500)),
            "{a:?}: a give-back with no conversion between"
        );
    }
}

/// A charge made before a `set_quota` that changed the rate while the bucket owed
/// nothing gives nothing to a later charge's debt; a `set_quota` that keeps the
/// interval (a new burst only) converts nothing, so a charge made before it still gives
/// back (what its record says it holds).
#[test]
fn only_a_set_quota_that_changes_the_interval_ends_a_charges_give_backs() {
    for (other, gives) in [
        (Quota::new(4, Duration::from_millis(100)), false),
        (Quota::new(4, Duration::from_millis(1)).with_burst(2), true),
    ] {
        let (l, clock) = budget(Algorithm::TokenBucket);
        let mut early = l.charge(8);
        assert!(early.fit());
        // Booked `TAT` 2 ms; at 0.25 ms a stateless give-back empties the bucket.
        clock.advance(Duration::from_micros(250));
        assert_eq!(l.give_back(8), 7);
        l.set_quota(other).unwrap();
        l.set_quota(Quota::new(4, Duration::from_millis(1)).with_burst(8))
            .unwrap();
        let later = l.charge(16);
        assert_eq!((later.taken(), later.owed()), (16, 8));
        let before = l.peek().retry_after();
        early.give_back(8);
        let after = l.peek().retry_after();
        assert_eq!(before, Some(Duration::from_micros(2_250)));
        if gives {
            // min(8·T, booked 2 ms − 0.25 ms) = 1.75 ms given back.
            assert_eq!(after, Some(Duration::from_micros(500)), "{other:?}");
        } else {
            assert_eq!(after, before, "{other:?}");
        }
    }
}

/// The keyed finding: tier 0 is 4 per ms (`T` 250 µs), tier 1 2 per ms (`T` 500 µs),
/// both burst 4. `early` is charged at tier 1 (8 taken, `TAT` 4 ms) and a stateless
/// give-back empties the key; with `other_tier`, a tier-0 request then writes the key
/// at tier 0's rate (owing nothing) before a tier-1 charge of 3 at 1.265 ms writes it
/// back at tier 1's. Returns what a tier-0 peek has left after `early` gives back 1.
fn left_after_early_give_back(other_tier: bool) -> u32 {
    let clock = ManualClock::new();
    let per_ms = |n| Quota::new(n, Duration::from_millis(1)).with_burst(4);
    let l = KeyedRateLimiter::<u64, _>::builder(Algorithm::TokenBucket, per_ms(4))
        .tiers([per_ms(2)])
        .clock(clock.clone())
        .build()
        .unwrap();
    let (fast, slow) = (l.tier(0).unwrap(), l.tier(1).unwrap());
    let mut early = slow.charge(&7, 12);
    assert_eq!((early.taken(), early.owed()), (8, 4));
    assert_eq!(slow.give_back(&7, 12), 8);
    if other_tier {
        assert!(fast.check_n(&7, 4).unwrap().is_allowed());
    }
    clock.advance(Duration::from_micros(1_265));
    let later = slow.charge_owing(&7, 3, 5);
    assert_eq!((later.taken(), later.owed()), (3, 0));
    early.give_back(1);
    fast.peek(&7).remaining()
}

/// After the tier round trip `early` gives nothing back: the later charge's 1.5 ms
/// at tier 1 are 3 of tier 0's requests, so a peek leaves 0. Without it, `early`
/// gives back one of its requests (500 µs, which its record says it still holds): 1.
#[test]
fn a_keyed_charge_gives_nothing_back_after_another_tier_wrote_the_key_and_back() {
    assert_eq!(left_after_early_give_back(true), 0);
    assert_eq!(left_after_early_give_back(false), 1);
}

/// Issue 37 item 6: a `set_quota` that changes the rate ends the give-backs of every
/// charge and the cancels of every reservation made at the rate it replaced, with no
/// request in between, alike on a `RateLimiter`, a `KeyedRateLimiter` and a tier; a
/// keyed table's `set_quota` converts at once only the keys written at a rate no tier
/// uses after it. README (Token budgets): "nor after a bucket's conversion to another
/// rate: by a `set_quota` that changes its interval (a keyed table's converts at once
/// every key written at a rate that no tier uses after it) ...". 10 per second, burst 5:
/// 3 charged (or reserved), then 20 per second: the debt is 3 of 10 per second, 150 ms
/// at 20, and 2 remain whether or not the charge is given back.
#[test]
fn a_set_quota_that_changes_the_rate_ends_give_backs_and_cancels_at_once() {
    let q = |n| Quota::per_second(n).with_burst(5);
    for a in [Algorithm::TokenBucket, Algorithm::LeakyBucket] {
        for cancel in [false, true] {
            let what = format!("{a:?}, cancel: {cancel}");
            let clock = ManualClock::new();
            let one = RateLimiter::builder(a, q(10))
                .clock(clock.clone())
                .build()
                .unwrap();
            if cancel {
                let r = one.reserve(3, Duration::ZERO).unwrap();
                one.set_quota(q(20)).unwrap();
                r.cancel();
            } else {
                let mut c = one.charge(3);
                one.set_quota(q(20)).unwrap();
                c.give_back(3);
            }
            assert_eq!(one.peek_n(0).unwrap().remaining(), 2, "{what}: one");

            let keyed = KeyedRateLimiter::<u64, _>::builder(a, q(10))
                .clock(clock.clone())
                .build()
                .unwrap();
            if cancel {
                let r = keyed.reserve(&7, 3, Duration::ZERO).unwrap();
                keyed.set_quota(q(20)).unwrap();
                r.cancel();
            } else {
                let mut c = keyed.charge(&7, 3);
                keyed.set_quota(q(20)).unwrap();
                c.give_back(3);
            }
            assert_eq!(keyed.peek_n(&7, 0).unwrap().remaining(), 2, "{what}: keyed");

            // Tier 1 at its own rate: its keys are converted at once.
            let tiers = KeyedRateLimiter::<u64, _>::builder(a, q(50))
                .tiers([q(10)])
                .clock(clock.clone())
                .build()
                .unwrap();
            let t1 = tiers.tier(1).unwrap();
            if cancel {
                let r = t1.reserve(&7, 3, Duration::ZERO).unwrap();
                t1.set_quota(q(20)).unwrap();
                r.cancel();
            } else {
                let mut c = t1.charge(&7, 3);
                t1.set_quota(q(20)).unwrap();
                c.give_back(3);
            }
            assert_eq!(t1.peek_n(&7, 0).unwrap().remaining(), 2, "{what}: tier");

            // Tier 1 at tier 0's rate: its change converts no key (tier 0 still uses
            // the rate), so the give-back or cancel gives all 3 back.
            let shared = KeyedRateLimiter::<u64, _>::builder(a, q(10))
                .tiers([q(10)])
                .clock(clock.clone())
                .build()
                .unwrap();
            let t1 = shared.tier(1).unwrap();
            if cancel {
                let r = t1.reserve(&7, 3, Duration::ZERO).unwrap();
                t1.set_quota(q(20)).unwrap();
                r.cancel();
            } else {
                let mut c = t1.charge(&7, 3);
                t1.set_quota(q(20)).unwrap();
                c.give_back(3);
            }
            assert_eq!(
                t1.peek_n(&7, 0).unwrap().remaining(),
                5,
                "{what}: shared tier"
            );
        }
    }
}
