//! [`SlotEntry`]: what a kind of entry states about itself, the ways the locked
//! tables differ.

use super::super::claim::ClaimScan;
use super::super::counters::Shard;

/// Which stamp bounds the readings a claim may decide at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Floor {
    /// The key's shard's: keys live in their shard's groups only.
    Shard,
    /// One for the whole table (kept in shard 0's counters): a displaced key may live
    /// in any shard.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    Table,
}

/// A candidate slot of a claim: `(slot, fingerprint seen, entry's mark seen)`.
pub(crate) type Candidate<M> = (usize, u64, M);

/// What a slot kind states about its entries: the five ways the locked tables differ.
pub(crate) trait SlotEntry: Sized {
    /// What a lookup names a key by, compared under the slot's lock after the
    /// fingerprint.
    type Key: ?Sized;
    /// What an installed key keeps of its name (handed back when it leaves, to be
    /// dropped once the slot's lock is released).
    type Name;
    /// What the table keeps beside its slots for its entries (the sliding log's ring
    /// block and quotas, the hybrid's hasher).
    type Ext;
    /// What a claim checks again under the lock of the entry it ranked for eviction.
    type Mark: Copy + PartialEq;

    /// Whether a claim takes an empty slot before an idle entry.
    const EMPTY_FIRST: bool;
    /// Whether a slot empties again (entries leave), so that keys are counted and
    /// bounded by `max_keys`, and may be displaced outside their groups.
    const EMPTIES: bool;
    /// The reclaim stamp claims decide above.
    const FLOOR: Floor;

    /// The entry of a slot that never held a key.
    fn vacant() -> Self;

    /// Whether this entry, whose fingerprint matched, is `key`'s.
    fn is(&self, key: &Self::Key) -> bool;

    /// Whether a new key may take this entry's slot at `now`: it says nothing a fresh
    /// entry would not.
    fn idle(&self, ext: &Self::Ext, slot: usize, now: u64) -> bool;

    /// What identifies this entry's state for a ranking (checked again under the lock
    /// before evicting).
    fn mark(&self) -> Self::Mark;

    /// Ranks this live entry (`me`) for eviction into `scan`, computing the exact rank
    /// only when `evict` (eviction is the policy) and it could matter. Entries that
    /// cannot be evicted leave `scan` as it is (the default).
    fn rank(
        &self,
        ext: &Self::Ext,
        now: u64,
        evict: bool,
        me: Candidate<Self::Mark>,
        scan: &mut ClaimScan<Candidate<Self::Mark>>,
    ) {
        let _ = (ext, now, evict, me, scan);
    }

    /// When this entry goes idle if nothing decides on it again; `None` when that
    /// cannot be known from the entry (the sweep of a full table then does not wait
    /// for it).
    fn settles_at(&self, ext: &Self::Ext) -> Option<u64> {
        let _ = ext;
        None
    }

    /// Makes this entry (of slot `slot`, in `shard`) the empty state of the key named
    /// `name`; returns the name it held.
    fn install(
        &mut self,
        ext: &Self::Ext,
        slot: usize,
        shard: &Shard,
        name: Self::Name,
        displaced: bool,
    ) -> Self::Name;

    /// Takes the key out of this entry (its slot empties); returns its name.
    fn vacate(&mut self) -> Self::Name;

    /// Whether this entry lives outside its key's groups.
    fn displaced(&self) -> bool {
        false
    }

    /// Bytes of `ext`'s allocations.
    fn ext_bytes(ext: &Self::Ext) -> usize;
}
