//! The packed table's own tests (the protocol's corner cases; the limiters' suites
//! test it through the public API).
use super::*;
use crate::algorithm::Params;
use crate::quota::Algorithm;
use crate::quota::Quota;

const SECOND: u64 = 1_000_000_000;

/// The token bucket's parameters for `quota`.
fn token_bucket(quota: Quota) -> Gcra {
    match Params::new(Algorithm::TokenBucket, quota).unwrap() {
        Params::Packed(p) => Gcra::from_params(p).expect("the token bucket's parameters"),
        Params::Log(_) => unreachable!("the token bucket is packed"),
    }
}

/// A hash whose two groups are `groups` (slot indices of their first slots).
fn hash_for(geo: &Geometry, groups: [usize; 2], seed: &mut u64) -> u64 {
    loop {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        if geo.locate(*seed).groups == groups {
            return *seed;
        }
    }
}

/// A key's request in flight across a reclaim of its own slot, when its other
/// group has an empty slot: the key is found missing, and the insert into the
/// empty slot (the fast path's, not the locked claim's) must still decide it no
/// earlier than the reclaim. Key A (groups 0 and 24) spends its burst at 10 s and
/// is idle from 11 s; 23 keys fill groups 0 and 12 at 10.9 s; C (groups 0 and
/// 12) reclaims A's slot at 11 s; then A's request read at 10.5 s arrives, and A
/// is drained at 11 s. A single bucket fed A's readings in order admits 4; deciding
/// the in-flight request at 10.5 s as a fresh key admits 5. Decided at 11 s, its
/// waits are still measured from its reading.
#[test]
fn an_insert_into_an_empty_slot_never_decides_before_a_reclaim() {
    let geo = Geometry::new(17, Some(1)).unwrap();
    assert_eq!((geo.slots(), geo.group()), (36, 12));
    let p = token_bucket(Quota::per_second(2));
    let table = PackedTable::new(geo, vec![p], OnFull::Deny, true).unwrap();
    let mut seed = 0x2545_f491_4f6c_dd1d;
    let a = hash_for(&geo, [0, 24], &mut seed);
    let c = hash_for(&geo, [0, 12], &mut seed);
    let decide = |h: u64, t: u64, cost: u32| {
        table
            .decide(h, 0, || t, cost, p)
            .is_some_and(|d| d.is_allowed())
    };
    let mut admitted = 0;
    assert!(decide(a, 10 * SECOND, 2));
    admitted += 2;
    // Fill every other slot of groups 0 and 12 with keys live until 11.4 s.
    let mut fillers = 0;
    while fillers < 23 {
        let h = hash_for(&geo, [[0, 12], [12, 0]][fillers % 2], &mut seed);
        assert!(decide(h, 10_900_000_000, 1), "filler {fillers}");
        fillers += 1;
    }
    // C finds both its groups full and only A idle: it takes A's slot.
    assert!(decide(c, 11 * SECOND, 1));
    assert_eq!(table.totals().idle_reclaims, 1);
    // A's request that read the clock at 10.5 s, before the reclaim: decided at 11 s
    // (its bucket then full for half a second), its reset measured from 10.5 s.
    let d = table.decide(a, 0, || 10_500_000_000, 1, p).unwrap();
    assert_eq!(d.reset_after().as_nanos(), u128::from(SECOND), "{d:?}");
    admitted += u32::from(d.is_allowed());
    while admitted < 10 && decide(a, 11 * SECOND, 1) {
        admitted += 1;
    }
    assert_eq!(admitted, 4);
}

/// Tables scanned in pairs with the first group's empty slot ending the scan, one
/// larger than the caches (whose scans prefetch) and one they hold: every key of a
/// random stream filling each to `max_keys` is installed once and found again (its
/// second request, at a quota of one per hour, is denied; a key installed twice would
/// be admitted afresh).
#[test]
fn a_table_scanned_in_pairs_finds_every_key_it_installed_once() {
    for (keys, large) in [(200_000, true), (2_000, false)] {
        let geo = Geometry::new(keys, None).unwrap();
        let p = token_bucket(Quota::per_hour(1));
        let table = PackedTable::new(geo, vec![p], OnFull::Deny, true).unwrap();
        assert_eq!(table.large, large);
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let stream: Vec<u64> = (0..keys)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed
            })
            .collect();
        let decide = |h: u64| {
            table
                .decide(h, 0, || SECOND, 1, p)
                .is_some_and(|d| d.is_allowed())
        };
        let refused = stream.iter().filter(|&&h| !decide(h)).count();
        // Two-choice placement refuses a few keys in 10,000 at exactly `max_keys`.
        assert!(refused <= keys / 1000, "{refused} of {keys} refused");
        let admitted_again = stream.iter().filter(|&&h| decide(h)).count();
        assert_eq!(admitted_again, 0, "{keys} keys");
        assert_eq!(table.occupancy(SECOND).0, (keys - refused) as u64);
    }
}

/// The rate registry's retirement protocol (`rates`): a class is not converted and
/// freed while a write of it is registered, and a write of a class being retired is
/// refused. The second thread's pass can only run after the first write is dropped,
/// whatever the scheduling (the pause only gives a broken protocol the time to show).
#[test]
fn a_class_is_retired_only_once_no_write_of_it_is_in_flight() {
    use std::sync::atomic::AtomicBool;
    let (rates, class, _) = two_rates();
    let swept = AtomicBool::new(false);
    let writing = rates.enter(class).expect("not retiring");
    std::thread::scope(|s| {
        let retirer = s.spawn(|| {
            rates.retire(|c| c == class, || swept.store(true, Ordering::SeqCst));
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            !swept.load(Ordering::SeqCst),
            "swept under a registered write"
        );
        drop(writing);
        retirer.join().unwrap();
    });
    assert!(swept.load(Ordering::SeqCst));
    assert_eq!(rates.interval(class), 0, "freed after the pass");
    assert!(
        rates.enter(class).is_some(),
        "no longer retiring once freed"
    );
}

/// A write that registers while its class is being retired is refused (`None`): its
/// parameters are stale, and the request starts over with fresh ones.
#[test]
fn a_write_of_a_retiring_class_is_refused() {
    let (rates, class, other) = two_rates();
    rates.retire(
        |c| c == class,
        || {
            assert!(rates.enter(class).is_none(), "a retiring class registered");
            assert!(rates.enter(other).is_some(), "another class refused");
        },
    );
}

/// A registry of two rates: it, the second rate's class and the first's.
fn two_rates() -> (rates::Rates, u8, u8) {
    let mut tiers = [
        token_bucket(Quota::per_second(10)),
        token_bucket(Quota::per_second(20)),
    ];
    let rates = rates::Rates::new(&mut tiers).unwrap();
    (rates, tiers[1].class(), tiers[0].class())
}
