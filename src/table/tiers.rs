//! Each quota tier's parameters, replaceable at run time, and the retry of a request
//! whose parameters went stale under it (read them again, check the cost, run again).

use crate::error::InsufficientCapacity;
use crate::sync::{Replaceable, Words};
/// Each quota tier's parameters (tier 0 is the builder's quota), fixed in number at
/// build, each replaceable at run time by `set_quota`; deciders read one tier's once
/// per decision (see [`Replaceable`](crate::sync::Replaceable)).
pub(crate) struct Tiers<P: Words>(Box<[Replaceable<P>]>);

impl<P: Words> Tiers<P> {
    /// The tiers `all`, tier 0 first.
    pub(crate) fn new(all: Vec<P>) -> Self {
        Tiers(all.into_iter().map(Replaceable::new).collect())
    }

    /// Tier `tier`'s parameters (`tier` < the number of tiers, checked by callers).
    #[inline]
    pub(crate) fn get(&self, tier: usize) -> P {
        self.0[tier].load()
    }

    /// Replaces tier `tier`'s parameters.
    pub(crate) fn set(&self, tier: usize, params: P) {
        self.0[tier].store(params);
    }

    /// Every tier's parameters now, tier 0 first.
    pub(crate) fn all(&self) -> impl Iterator<Item = P> + '_ {
        self.0.iter().map(Replaceable::load)
    }

    /// The bytes `n` tiers take, known before allocating.
    pub(crate) fn bytes(n: usize) -> usize {
        n * std::mem::size_of::<Replaceable<P>>()
    }

    /// The bytes these tiers take.
    pub(crate) fn memory_bytes(&self) -> usize {
        Self::bytes(self.0.len())
    }
}

/// `f` with the parameters `p`; when they went stale under it (`None`: see `store::Store`),
/// again with fresh ones ([`fresh_again`]).
#[inline(always)]
pub(crate) fn fresh<P, R>(
    p: P,
    cost: u32,
    reload: impl Fn() -> P,
    burst: impl Fn(&P) -> u32,
    mut f: impl FnMut(P) -> Option<R>,
) -> Result<R, InsufficientCapacity> {
    match f(p) {
        Some(r) => Ok(r),
        None => fresh_again(cost, reload, burst, f),
    }
}

/// `f` with the parameters `reload()` reads, again for as long as they go stale under
/// it, out of the hot path: `Err` when `cost` exceeds their burst (the request no
/// longer fits the quota now in force).
#[cold]
#[inline(never)]
pub(crate) fn fresh_again<P, R>(
    cost: u32,
    reload: impl Fn() -> P,
    burst: impl Fn(&P) -> u32,
    mut f: impl FnMut(P) -> Option<R>,
) -> Result<R, InsufficientCapacity> {
    loop {
        let p = reload();
        InsufficientCapacity::check(cost, burst(&p))?;
        if let Some(r) = f(p) {
            return Ok(r);
        }
    }
}
