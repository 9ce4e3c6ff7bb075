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

/// A time step: an amount and a unit.
#[derive(Arbitrary, Clone, Copy, Debug)]
pub struct Step {
    pub amount: u16,
    pub unit: u8,
}

impl Step {
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
