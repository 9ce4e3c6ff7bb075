//! The `budget` target's limiter under test (one `RateLimiter`, or keys of a keyed table
//! under one of its tiers), its quotas and the promises it checks.

use crate::model::{Algo, Params};
use crate::spec::QuotaSpec;
use tollgate::{Charge, Decision, KeyedRateLimiter, ManualClock, RateLimiter};

/// Keys the keyed table is driven with, and its room: more than enough, so nothing is
/// evicted (the `keyed` target drives eviction).
pub const KEYS: usize = 3;
pub const MAX_KEYS: usize = 16;

pub const CHARGE: &str = "guide::promises (charge): \"`charge(n)` takes its cost after the fact, **never denied**: whatever is left is used up and the key then **owes** the rest\"; (debt-bound): \"A debt is bounded: a bucket or a window owes at most one burst past its quota\"";
pub const BOUND: &str = "guide::promises (debt-bound): \"`charge_owing(n, max_owed)` sets another bound; for the sliding window the bound is on its weighted count, the previous window's weight included, as `owed` is\"; (dropped): \"The part of a cost past the bound is not counted, and `Charge::dropped()` says how much\"";
pub const REFUND: &str = "guide::promises (give-back): \"`Charge::give_back(n)` returns part or all of what a charge took, to the state it was taken from only\"; (give-back-bucket): \"A bucket's charge gives back only what of it the key still owes (time pays debts off)\"; (give-back-window): \"A window's charge gives back while the state is still in the charged window (the sliding window: until something is counted in a later one)\"; (give-back-log): \"A log's charge gives back exactly while it is the log's last write, in parts too (the part past its ring first, which frees nothing)\"";
pub const GIVE_BACK: &str = "guide::promises (stateless-give-back): \"`give_back(n)` on the limiter gives back without a `Charge` (a stateless caller: never below an empty state; it cannot tell its own charge from others')\"; (stateless-give-back): \"A window gives back from its counts that still weigh, the current window's first (the sliding window's previous one next); a log from its newest entries, and nothing while every slot of its ring is in the window\"";
pub const FRESH: &str =
    "guide::promises (give-back): \"never after a `reset`, `remove` or eviction of the key\"";
pub const LOG_TRULY_HELD: &str = "guide::promises (sliding-log): \"exact: at most `limit` admitted in every interval `(t − P, t]`\"; (give-back-log-later): \"the log cannot tell its entries from those: it keeps them until its period ends, never fewer than it holds\"; (log-overdraft): \"its overdraft ends one period after the charge\"";

/// Periods whose sliding-window count field holds every count the target makes
/// (`limit + max_owed` up to 26): 1 ms and longer.
pub const PERIODS: [u128; 5] = [
    1_000_000,
    7_000_003,
    100_000_000,
    999_999_999,
    60_000_000_000,
];

/// A valid quota for `algo` (limit and burst 1..=8), `period` forced when given.
pub fn params(q: &QuotaSpec, algo: Algo, period: Option<u128>) -> Params {
    let mut p = q.params(algo, period);
    if period.is_none() {
        p.period = PERIODS[usize::from(q.period) % PERIODS.len()];
    }
    p
}

/// The limiter under test.
#[derive(Clone, Copy)]
pub enum Under<'l> {
    One(&'l RateLimiter<ManualClock>),
    Many(&'l KeyedRateLimiter<u64, ManualClock>),
}

impl<'l> Under<'l> {
    pub fn keyed(&self) -> bool {
        matches!(self, Under::Many(_))
    }

    fn tier(
        l: &'l KeyedRateLimiter<u64, ManualClock>,
        tier: usize,
    ) -> tollgate::Tier<'l, u64, ManualClock> {
        l.tier(tier).expect("the target's tiers exist")
    }

    pub fn check_n(&self, key: usize, tier: usize, n: u32) -> Decision {
        match *self {
            Under::One(l) => l.check_n(n),
            Under::Many(l) => Self::tier(l, tier).check_n(&(key as u64), n),
        }
        .expect("the target's costs fit")
    }

    pub fn peek(&self, key: usize, tier: usize) -> Decision {
        match *self {
            Under::One(l) => l.peek(),
            Under::Many(l) => Self::tier(l, tier).peek(&(key as u64)),
        }
    }

    pub fn charge(&self, key: usize, tier: usize, n: u32, max_owed: Option<u32>) -> Charge<'l> {
        match (*self, max_owed) {
            (Under::One(l), None) => l.charge(n),
            (Under::One(l), Some(m)) => l.charge_owing(n, m),
            (Under::Many(l), None) => Self::tier(l, tier).charge(&(key as u64), n),
            (Under::Many(l), Some(m)) => Self::tier(l, tier).charge_owing(&(key as u64), n, m),
        }
    }

    pub fn give_back(&self, key: usize, tier: usize, n: u32) -> u32 {
        match *self {
            Under::One(l) => l.give_back(n),
            Under::Many(l) => Self::tier(l, tier).give_back(&(key as u64), n),
        }
    }

    /// `reset(&key)` (a single limiter has none: nothing happens).
    pub fn reset(&self, key: usize) {
        if let Under::Many(l) = *self {
            let _ = l.reset(&(key as u64));
        }
    }

    /// `remove(&key)`; false for a single limiter (it has none).
    pub fn remove(&self, key: usize) -> bool {
        match *self {
            Under::One(_) => false,
            Under::Many(l) => {
                let _ = l.remove(&(key as u64));
                true
            }
        }
    }
}
