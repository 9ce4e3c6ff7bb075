//! The lock-free ranking of `OnFull::Evict` (`rank`) against the locked rescan
//! (`rescan`): on random tables of every packed algorithm and several shapes, for
//! random new keys, both choose the same slot with the same word (the same free slot,
//! or the same victim), and the claim then installs the new key in that slot.

use super::Ranked;
use crate::algorithm::packed::PackedAlgorithm;
use crate::algorithm::Params;
use crate::quota::Algorithm;
use crate::quota::Quota;
use crate::sync::Ordering;
use crate::table::claim::OnFull;
use crate::table::generation;
use crate::table::geometry::Geometry;
use crate::table::packed::{fp_of, state_of, PackedTable};

const MS: u64 = 1_000_000;
/// The first reading of the comparisons: entries installed from 0 to 3 s are live or idle.
const NOW: u64 = 3_000 * MS;

/// A xorshift stream.
fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// Fills a table of `geo` under `algorithm` (4 per second) with a random history:
/// three keys per slot, each checked at a reading on a 250 ms grid up to 3 s for a cost
/// of 1 to 4 (many entries then share a state: ties), evicting as the table fills.
/// Then, for 300 new keys at readings from 3 s on (5 ms apart), compares the two
/// choices, decides the key and checks it went where the rescan said. Returns
/// `(victims, ties, frees)`: how many comparisons found a victim, how many of those had
/// several entries of the lowest rank, and how many found a free slot.
fn compare<A: PackedAlgorithm>(
    algorithm: Algorithm,
    geo: Geometry,
    seed: &mut u64,
) -> (u32, u32, u32) {
    let Params::Packed(packed) = Params::new(algorithm, Quota::per_second(4)).unwrap() else {
        unreachable!("a packed algorithm")
    };
    let p = A::from_params(packed).unwrap();
    let table = PackedTable::new(geo, vec![p], OnFull::Evict, true).unwrap();
    let decide = |h: u64, t: u64, cost: u32| table.decide(h, 0, || t, cost, p);
    for _ in 0..3 * geo.slots() {
        let h = next(seed);
        let t = next(seed) % 13 * 250 * MS;
        decide(h, t, 1 + (next(seed) % 4) as u32);
    }
    let (mut victims, mut ties, mut frees) = (0, 0, 0);
    for j in 0..300 {
        let h = next(seed);
        // The clock moves on 5 ms per key: entries go idle as the keys arrive.
        let reading = NOW + j * 5 * MS;
        let fp = generation::probe_word(h);
        let loc = geo.locate(h);
        let now = table.shards[loc.shard].floor(reading);
        let fast = table.rank(fp, &loc, now, &p);
        let locked = table.rescan(fp, &loc, now);
        let (target, free) = match (fast, locked) {
            (Ranked::Found, Err(_)) => continue,
            (Ranked::Claim(target, true), Ok(scan)) => {
                assert_eq!(scan.target(), Some(target), "{algorithm:?}");
                frees += 1;
                (target, true)
            }
            (Ranked::Claim(victim, false), Ok(scan)) => {
                assert_eq!(scan.target(), None, "{algorithm:?}");
                assert_eq!(scan.victim(), Some(victim), "{algorithm:?}");
                victims += 1;
                let (_, lowest) = p.rank(state_of(victim.1), &p.reading(now));
                let tied = loc
                    .probe(geo.group())
                    .map(|(_, i)| table.slot(i).load(Ordering::Acquire))
                    .filter(|&w| p.rank(state_of(w), &p.reading(now)).1 == lowest)
                    .count();
                ties += u32::from(tied > 1);
                (victim, false)
            }
            (Ranked::Found, Ok(_)) => panic!("{algorithm:?}: found only without the lock"),
            (Ranked::Claim(..), Err(_)) => panic!("{algorithm:?}: found only under the lock"),
        };
        // The claim installs the new key in that very slot.
        let before = table.totals();
        assert!(decide(h, reading, 1).is_some_and(|d| d.is_allowed()));
        let after = table.totals();
        let reclaimed = free && fp_of(target.1) != 0;
        assert_eq!(after.evictions, before.evictions + u64::from(!free));
        assert_eq!(
            after.idle_reclaims,
            before.idle_reclaims + u64::from(reclaimed)
        );
        let there = table.slot(target.0).load(Ordering::Acquire);
        assert!(generation::holds(fp_of(there), fp), "{algorithm:?}");
    }
    (victims, ties, frees)
}

/// Whole groups of 12 (one shard of 3 and of 5 groups, two shards), a single group of
/// 8 slots, and the two-slot table of one key: the same victim as the locked rescan
/// every time, ties included (settled by the key's order in both).
#[test]
fn the_lock_free_ranking_picks_the_locked_rescans_victim() {
    use crate::algorithm::fixed_window::FixedWindow;
    use crate::algorithm::gcra::Gcra;
    use crate::algorithm::sliding_window::SlidingWindow;
    let mut seed = 0x2545_f491_4f6c_dd1d;
    let shapes = [
        (17, Some(1)),
        (40, Some(1)),
        (600, Some(2)),
        (5, None),
        (1, None),
    ];
    let (mut victims, mut ties, mut frees) = (0, 0, 0);
    for (keys, shards) in shapes {
        let geo = Geometry::new(keys, shards).unwrap();
        for (v, t, f) in [
            compare::<Gcra>(Algorithm::TokenBucket, geo, &mut seed),
            compare::<FixedWindow>(Algorithm::FixedWindow, geo, &mut seed),
            compare::<SlidingWindow>(Algorithm::SlidingWindow, geo, &mut seed),
        ] {
            victims += v;
            ties += t;
            frees += f;
        }
    }
    eprintln!("{victims} victims, {ties} with tied lowest ranks, {frees} free");
    // Both outcomes were met often enough to mean something.
    assert!(victims > 2000, "{victims} victims");
    assert!(ties > 500, "{ties} ties");
    assert!(frees > 200, "{frees} free");
}
