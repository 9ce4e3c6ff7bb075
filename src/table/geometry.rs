//! Where a key lives: the table's geometry, the key's fingerprint and its two candidate
//! groups of slots.
//!
//! A key is hashed once with a randomly seeded `ahash` into `h: u64`.
//!
//! * Its identity in the table is the fingerprint `h` itself (`0` is remapped to `1`,
//!   since `0` marks an empty slot): two keys share a state only if their 64-bit
//!   hashes are equal.
//! * The high bits of `h` pick the shard (`h >> (64 − shard_bits)`, at most 8 bits).
//! * Bits 0..32 pick the first group within the shard and bits 24..56 the second
//!   (multiply-shift, so any group count works): a key may live in either of its two
//!   groups of [`GROUP`] slots (192 bytes, three cache lines each), probed interleaved
//!   (see [`Location::probe`]).

use crate::error::ConfigError;

/// Slots per group: 12 slots of 16 bytes, three cache lines.
///
/// Measured with `max_keys` live keys churning continuously (one new key per
/// `1 s / max_keys`, each live for 1 s): 8-slot groups evict about 0.055% of
/// insertions, 12-slot groups about 0.0003%, 16-slot groups none, at twice the
/// probe length of 8.
pub(crate) const GROUP: usize = 12;

/// Slots allocated per key the table holds (`max_keys`), as a fraction `NUM / DEN` (here 1.48).
///
/// With two candidate groups per key and the new key placed in the group holding
/// fewer live keys, 1.48 slots per key keeps evictions with `max_keys` live keys far
/// under 0.1% of insertions (see [`GROUP`] and `tests/keyed_flood.rs`) at about 24 bytes per
/// key (16-byte slots, plus the shard counters).
pub(crate) const SLOTS_NUM: usize = 37;
/// See [`SLOTS_NUM`].
pub(crate) const SLOTS_DEN: usize = 25;

/// The most keys a keyed limiter accepts (`max_keys`): 2³² keys where the address space
/// allows it, and on 32-bit targets as many as 16-byte slots fit in half the address
/// space (`isize::MAX` bytes, the most one allocation may take).
pub(crate) const MAX_KEYS: usize = {
    let by_design: u64 = 1 << 32;
    let by_address_space = isize::MAX as usize / 16 / SLOTS_NUM * SLOTS_DEN;
    if (by_address_space as u64) < by_design {
        by_address_space
    } else {
        // Only reached where usize holds 2^32.
        by_design as usize
    }
};

/// The fewest keys an explicitly chosen shard count may leave each shard: below it,
/// keys spread over shards too unevenly for the table to hold `max_keys` (at 4 keys
/// per shard, 48 of 1,000 live keys found their shard full).
pub(crate) const MIN_KEYS_PER_SHARD: usize = 256;

/// The largest shard count: the shard takes the top bits of the hash, and the second
/// group the bits just below them.
pub(crate) const MAX_SHARDS: usize = 1 << 8;

/// The fingerprint of the hash `h`: never `0`, which marks an empty slot.
#[inline]
pub(crate) fn fingerprint(h: u64) -> u64 {
    if h == 0 {
        1
    } else {
        h
    }
}

/// Whether `n` is an acceptable shard count on its own (the slot count is checked at
/// build time).
pub(crate) fn check_shards(n: usize) -> Result<(), ConfigError> {
    if n == 0 || !n.is_power_of_two() || n > MAX_SHARDS {
        return Err(ConfigError::InvalidShards { requested: n });
    }
    Ok(())
}

/// The shape of a table: `shards × groups_per_shard × group` slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    max_keys: usize,
    shard_bits: u32,
    groups_per_shard: usize,
    group: usize,
    /// Slots per shard (`groups_per_shard × group`).
    shard_slots: usize,
    /// The span the per-key start offsets are drawn from: [`GROUP`] for full groups,
    /// 0 (probe from the front) for tables too small for one.
    start_span: u64,
}

/// The candidate slots of one key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Location {
    /// The shard (index into the shard metadata).
    pub(crate) shard: usize,
    /// The first slot of each candidate group; `groups[1] == groups[0]` when the
    /// shard has a single group.
    pub(crate) groups: [usize; 2],
    /// Where the key's probe starts within each group (then wraps around it).
    pub(crate) starts: [usize; 2],
}

impl Geometry {
    /// The geometry for `max_keys` keys over `shards` shards (a default when `None`).
    pub(crate) fn new(max_keys: usize, shards: Option<usize>) -> Result<Self, ConfigError> {
        if max_keys == 0 || max_keys > MAX_KEYS {
            return Err(ConfigError::InvalidCapacity {
                requested: max_keys,
                max: MAX_KEYS,
            });
        }
        // At least 2 slots, so a table of one key still has room to reclaim.
        let needed = (max_keys * SLOTS_NUM).div_ceil(SLOTS_DEN).max(2);
        let shards = match shards {
            Some(n) => {
                check_shards(n)?;
                if n > 1 && max_keys / n < MIN_KEYS_PER_SHARD {
                    return Err(ConfigError::InvalidShards { requested: n });
                }
                n
            }
            None => default_shards(needed),
        };
        let per_shard = needed.div_ceil(shards);
        let group = GROUP.min(per_shard);
        let groups_per_shard = per_shard.div_ceil(group);
        Ok(Geometry {
            max_keys,
            shard_bits: shards.trailing_zeros(),
            groups_per_shard,
            group,
            shard_slots: groups_per_shard * group,
            start_span: if group == GROUP { GROUP as u64 } else { 0 },
        })
    }

    /// The number of keys asked for.
    pub(crate) fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// The number of shards.
    pub(crate) fn shards(&self) -> usize {
        1 << self.shard_bits
    }

    /// Slots in one group.
    pub(crate) fn group(&self) -> usize {
        self.group
    }

    /// The shard slot `slot` belongs to.
    pub(crate) fn shard_of(&self, slot: usize) -> usize {
        slot / self.shard_slots
    }

    /// Total slots.
    pub(crate) fn slots(&self) -> usize {
        self.shards() * self.groups_per_shard * self.group
    }

    /// Where the key hashed to `h` may live.
    #[inline]
    pub(crate) fn locate(&self, h: u64) -> Location {
        // The top `shard_bits` bits: `(h >> 1) >> (63 − bits)` is `h >> (64 − bits)`
        // and 0 when there is one shard, with no branch.
        let shard = ((h >> 1) >> (63 - self.shard_bits)) as usize;
        let n = self.groups_per_shard as u64;
        // Multiply-shift: a uniform 32-bit value scaled to 0..n.
        let w1 = ((h & 0xFFFF_FFFF) * n) >> 32;
        let w2 = (((h >> 24) & 0xFFFF_FFFF) * n) >> 32;
        // Two distinct groups whenever the shard has two (the next one, wrapping).
        let w2 = if w2 != w1 {
            w2
        } else if w1 + 1 < n {
            w1 + 1
        } else {
            0
        };
        let base = shard * self.shard_slots;
        let group = self.group as u64;
        // Start offsets from bits mixed out of all of `h`, so they are independent of
        // the group choice. Tables too small for a full group (a handful of slots,
        // as in the loom models) probe from the front (`start_span` 0): with so few
        // slots there is no walk to shorten, and every key then competes for the same
        // first slot.
        let m = (h ^ (h >> 31)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let span = self.start_span;
        Location {
            shard,
            groups: [base + (w1 * group) as usize, base + (w2 * group) as usize],
            starts: [
                (((m & 0xFFFF_FFFF) * span) >> 32) as usize,
                (((m >> 32) * span) >> 32) as usize,
            ],
        }
    }
}

impl Location {
    /// The candidate groups, each as a range of slot indices, without repeating a
    /// group when both candidates coincide.
    #[cfg(test)]
    pub(crate) fn groups(&self, group: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
        let [a, b] = self.groups;
        let second = if b == a { None } else { Some(b..b + group) };
        std::iter::once(a..a + group).chain(second)
    }

    /// The key's canonical probe order: `(which group, slot)`, the two groups
    /// interleaved, each from the key's own start offset and wrapping around
    /// (`a+s, b+t, a+s+1, b+t+1, ...`).
    ///
    /// Empty slots are only ever claimed as the first empty slot of this order, and
    /// never become empty again. The order is fixed per key, which is what makes
    /// lock-free claims of empty slots duplicate-free. The per-key start offsets spread
    /// keys over their groups, so a lookup finds its key within about two probes
    /// instead of walking the group's filled prefix; the first empty slot still tends
    /// to lie in the emptier group (two-choice balancing, measured in
    /// `tests/keyed_flood.rs`).
    #[inline]
    pub(crate) fn probe(&self, group: usize) -> Probe {
        Probe {
            bases: self.groups,
            offsets: self.starts,
            group,
            left: if self.groups[0] == self.groups[1] {
                group
            } else {
                2 * group
            },
            next_group: 0,
        }
    }
}

/// The iterator of [`Location::probe`]: wraps offsets with a comparison instead of a
/// division, so it compiles to a tight loop (a `%`-based `flat_map` measured about a
/// fifth of a sliding-log decision).
pub(crate) struct Probe {
    bases: [usize; 2],
    offsets: [usize; 2],
    group: usize,
    /// Slots still to visit.
    left: usize,
    /// The group the next slot comes from (always 0 when both groups are one).
    next_group: usize,
}

impl Iterator for Probe {
    type Item = (usize, usize);

    #[inline]
    fn next(&mut self) -> Option<(usize, usize)> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let w = self.next_group;
        let slot = self.bases[w] + self.offsets[w];
        let o = self.offsets[w] + 1;
        self.offsets[w] = if o == self.group { 0 } else { o };
        if self.bases[0] != self.bases[1] {
            self.next_group = 1 - w;
        }
        Some((w, slot))
    }
}

/// Groups a default shard keeps at least: keys spread over shards by hash, and a shard
/// of many groups averages out the shards' uneven shares of the keys.
const MIN_GROUPS_PER_SHARD: usize = 256;

/// The default shard count: a few per core, as long as each shard keeps at least
/// [`MIN_GROUPS_PER_SHARD`] groups.
fn default_shards(slots: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let wanted = (cores * 4).next_power_of_two().min(MAX_SHARDS);
    let mut shards = wanted;
    while shards > 1 && slots / shards < MIN_GROUPS_PER_SHARD * GROUP {
        shards /= 2;
    }
    shards
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_holds_about_one_and_a_half_slots_per_key() {
        let g = Geometry::new(16_384, Some(16)).unwrap();
        assert!(g.slots() >= 16_384 * SLOTS_NUM / SLOTS_DEN);
        assert!(g.slots() * 16 <= 16_384 * 24);
        assert_eq!(g.group(), GROUP);
        let g = Geometry::new(1, None).unwrap();
        assert_eq!(g.slots(), 2);
        assert_eq!(g.group(), 2);
    }

    #[test]
    fn bad_shards_and_capacities_are_refused() {
        assert!(Geometry::new(0, None).is_err());
        assert!(Geometry::new(MAX_KEYS + 1, None).is_err());
        assert!(Geometry::new(100, Some(3)).is_err());
        assert!(Geometry::new(100, Some(0)).is_err());
        assert!(Geometry::new(1, Some(4)).is_err());
        assert!(Geometry::new(100_000, Some(MAX_SHARDS * 2)).is_err());
    }

    #[test]
    fn locations_stay_inside_their_shard() {
        let g = Geometry::new(10_000, Some(4)).unwrap();
        let per_shard = g.slots() / g.shards();
        for i in 0..10_000u64 {
            let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let loc = g.locate(h);
            assert_eq!(loc.shard, (h >> 62) as usize);
            for r in loc.groups(g.group()) {
                assert_eq!(r.start / per_shard, loc.shard);
                assert!(r.end <= (loc.shard + 1) * per_shard);
            }
            let probe: Vec<_> = loc.probe(g.group()).collect();
            assert_eq!(probe.len(), 2 * g.group());
            let w = g.group();
            assert_eq!(probe[0], (0, loc.groups[0] + loc.starts[0]));
            assert_eq!(probe[1], (1, loc.groups[1] + loc.starts[1]));
            assert_eq!(probe[2], (0, loc.groups[0] + (loc.starts[0] + 1) % w));
            assert_eq!(probe.len(), 2 * w);
            assert_ne!(loc.groups[0], loc.groups[1]);
        }
        assert_eq!(fingerprint(0), 1);
        assert_eq!(fingerprint(7), 7);
    }

    /// The probe order, slot by slot, against its definition (`a+s, b+t, a+s+1,
    /// b+t+1, ...` wrapping within each group), for tables with two groups per key,
    /// one group, and groups smaller than `GROUP`.
    #[test]
    fn probe_visits_both_groups_interleaved_from_their_offsets() {
        for (keys, shards) in [(10_000, Some(4)), (1, None), (5, None), (17, None)] {
            let g = Geometry::new(keys, shards).unwrap();
            let w = g.group();
            for i in 0..2_000u64 {
                let loc = g.locate(i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ i);
                let [a, b] = loc.groups;
                let [sa, sb] = loc.starts;
                let mut expected = Vec::new();
                for j in 0..w {
                    expected.push((0, a + (sa + j) % w));
                    if a != b {
                        expected.push((1, b + (sb + j) % w));
                    }
                }
                assert_eq!(loc.probe(w).collect::<Vec<_>>(), expected, "{keys} keys");
            }
        }
    }
}
