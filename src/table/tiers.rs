//! Each quota tier's parameters, replaceable at run time.

use crate::sync::{Swap, Words};
/// Each quota tier's parameters (tier 0 is the builder's quota), fixed in number at
/// build, each replaceable at run time by `set_quota`; deciders read one tier's once
/// per decision (see [`Swap`](crate::sync::Swap)).
pub(crate) struct Tiers<P: Words>(Box<[Swap<P>]>);

impl<P: Words> Tiers<P> {
    /// The tiers `all`, tier 0 first.
    pub(crate) fn new(all: Vec<P>) -> Self {
        Tiers(all.into_iter().map(Swap::new).collect())
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
        self.0.iter().map(Swap::load)
    }

    /// The bytes `n` tiers take, known before allocating.
    pub(crate) fn bytes(n: usize) -> usize {
        n * std::mem::size_of::<Swap<P>>()
    }

    /// The bytes these tiers take.
    pub(crate) fn memory_bytes(&self) -> usize {
        Self::bytes(self.0.len())
    }
}
