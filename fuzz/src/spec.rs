//! Arbitrary inputs shared by the targets: quotas from a small, varied set.

use crate::model::{Algo, Params};
use arbitrary::Arbitrary;

/// Periods that exercise rounding (`T = ⌈P / limit⌉` with a remainder), short and long.
pub const PERIODS: [u128; 8] = [
    1_000,
    1_000_000,
    7_000_003,
    100_000_000,
    1_000_000_000,
    999_999_999,
    60_000_000_000,
    3_600_000_000_000,
];

#[derive(Arbitrary, Clone, Copy, Debug)]
pub struct QuotaSpec {
    pub limit: u8,
    pub period: u8,
    pub burst: u8,
}

impl QuotaSpec {
    /// A valid quota for `algo` (limit and burst 1..=8), with `period` forced when given
    /// (the windows' and the log's period is fixed at build).
    pub fn params(&self, algo: Algo, period: Option<u128>) -> Params {
        let limit = u32::from(self.limit % 8) + 1;
        Params {
            algo,
            limit,
            period: period.unwrap_or(PERIODS[usize::from(self.period) % PERIODS.len()]),
            burst: if algo.is_bucket() {
                u32::from(self.burst % 8) + 1
            } else {
                limit
            },
        }
    }
}

/// A time step: an amount and a unit; a unit byte from `0xF0` sets the clock instead
/// (see [`Step::moved`]): mostly backwards.
#[derive(Arbitrary, Clone, Copy, Debug)]
pub struct Step {
    pub amount: u16,
    pub unit: u8,
}

/// The first unit byte that sets the clock rather than advancing it (the bytes below it
/// advance as they always did, so committed inputs without them decode as before).
pub const SET_FROM: u8 = 0xF0;

impl Step {
    /// The reading this step leaves the clock at, from `t`, for a quota of period `p`:
    /// forward by [`nanos`](Self::nanos), or for a unit byte from [`SET_FROM`] a step
    /// back (README, Bounds: "A clock reading older than the state (quanta's TSC stepping
    /// back across cores, a reset user clock, a thread pre-empted between its reading and
    /// its decision)"): a skew of a few ns to a few ms, a reset to 0 or to an arbitrary
    /// earlier reading, back across window boundaries or to just before the current
    /// window's start; or forward, far (past 2^61 ns) or near the horizon.
    pub fn moved(&self, t: u128, p: u128) -> u128 {
        if self.unit < SET_FROM {
            return t + self.nanos();
        }
        let a = u128::from(self.amount);
        match self.unit - SET_FROM {
            0 | 1 => t.saturating_sub(1 + a % 10_000),
            2 | 3 => t.saturating_sub((1 + a % 10_000) * 1_000),
            4 => t.saturating_sub((1 + a % 10) * 1_000_000),
            5 => 0,
            6..=8 => t * a / 65_536,
            9..=12 => {
                let back = u128::from(self.unit - SET_FROM - 8);
                ((t / p).saturating_sub(back) * p + p * a / 65_536).min(t)
            }
            13 => t.max((1 << 61) + a * 1_000_003),
            // Near the horizon, leaving room for a few periods, bookings and waits.
            14 => t.max(crate::model::HORIZON - (1 << (54 + a % 7))),
            _ => (t / p * p).saturating_sub(1 + a % 1_000).min(t),
        }
    }

    pub fn nanos(&self) -> u128 {
        let unit: u128 = match self.unit % 6 {
            0 => 1,
            1 => 1_000,
            2 => 1_000_000,
            3 => 10_000_000,
            4 => 1_000_000_000,
            _ => 60_000_000_000,
        };
        u128::from(self.amount) * unit
    }
}
