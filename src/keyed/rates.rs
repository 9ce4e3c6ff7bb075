//! Rate classes: which bucket interval wrote a key's state.
//!
//! A keyed token or leaky bucket may be decided under several quotas: its tiers, and
//! each quota `set_quota` installs. Its state is a time (`TAT`), and what the key owes
//! (`TAT − now`) is counted in the interval of the quota that wrote it. A request under
//! another quota converts that debt into its own requests first (Bucket4j's
//! "additive" carry-over; see `Gcra::convert`), so it must know which interval wrote
//! the state.
//!
//! Each distinct interval a table decides with gets a *class* (0 to 15), kept in every
//! packed slot's key word (`keyed::generation`) and in the bucket's parameters. A
//! request whose parameters' class differs from its entry's converts the state from
//! the interval this registry holds for the entry's class, and writes its own class.
//!
//! Classes are given out by build and `set_quota` (under the limiter's setting lock):
//! an interval already registered keeps its class; a new one takes a class never used.
//! When all sixteen are taken, `set_quota` first converts every entry of a class no
//! tier uses any more into tier 0's class (one pass over the table, deciders never
//! blocked), then reuses those classes. A request that read a quota before the
//! `set_quota` that retired its class and is still in flight when the class is reused
//! by a later one could write a state the table misreads: two quota changes within
//! one decision's time.

use crate::algorithm::PackedParams;
use crate::sync::{AtomicU64, Ordering};
use crate::ConfigError;

/// Rate classes per table.
pub(crate) const CLASSES: usize = 16;

/// The interval (ns) of each rate class; 0 for a class never given out.
pub(crate) struct Rates {
    intervals: [AtomicU64; CLASSES],
}

impl Rates {
    /// Registers every bucket tier's interval, giving each distinct interval a class
    /// (in `tiers`' parameters). The windows have no classes: their states count
    /// requests, which carry over as they are.
    pub(crate) fn new(tiers: &mut [PackedParams]) -> Result<Self, ConfigError> {
        let rates = Rates {
            intervals: std::array::from_fn(|_| AtomicU64::new(0)),
        };
        for tier in tiers.iter_mut() {
            if let PackedParams::Gcra(g) = tier {
                let class = match rates.find(g.interval()) {
                    Some(c) => c,
                    None => rates.unused().ok_or(ConfigError::TooManyRates {
                        rates: CLASSES + 1,
                        max: CLASSES,
                    })?,
                };
                rates.intervals[class as usize].store(g.interval(), Ordering::Release);
                *g = g.with_class(class);
            }
        }
        if rates.find_used(1) {
            for tier in tiers.iter_mut() {
                if let PackedParams::Gcra(g) = tier {
                    *g = g.with_mixed();
                }
            }
        }
        Ok(rates)
    }

    /// The interval of class `class` (0 when never given out: then a state of that
    /// class owes nothing to convert).
    #[inline]
    pub(crate) fn interval(&self, class: u8) -> u64 {
        self.intervals[usize::from(class) % CLASSES].load(Ordering::Acquire)
    }

    /// The class holding `interval`, if any.
    pub(crate) fn find(&self, interval: u64) -> Option<u8> {
        (0..CLASSES as u8).find(|&c| self.interval(c) == interval)
    }

    /// Whether more than `n` classes have been given out.
    fn find_used(&self, n: usize) -> bool {
        (0..CLASSES as u8)
            .filter(|&c| self.interval(c) != 0)
            .count()
            > n
    }

    /// A class never given out.
    pub(crate) fn unused(&self) -> Option<u8> {
        (0..CLASSES as u8).find(|&c| self.interval(c) == 0)
    }

    /// Gives class `class` to `interval` (the class is free: never given out, or
    /// retired and swept).
    pub(crate) fn give(&self, class: u8, interval: u64) {
        self.intervals[usize::from(class)].store(interval, Ordering::Release);
    }

    /// Frees class `class` (after a sweep converted every state of it).
    pub(crate) fn retire(&self, class: u8) {
        self.intervals[usize::from(class)].store(0, Ordering::Release);
    }

    /// The bytes of the registry.
    pub(crate) const BYTES: usize = CLASSES * std::mem::size_of::<AtomicU64>();
}
