//! The quota a hybrid limiter enforces and the window arithmetic it decides with,
//! replaced whole by `set_quota`.

use super::Error;
use crate::algorithm::fixed_window::FixedWindow;
use crate::algorithm::sliding_window::SlidingWindow;
use crate::algorithm::{PackedParams, Params};
#[cfg(doc)]
use crate::error::ConfigError;
use crate::{quota::Algorithm, quota::Quota};
use std::time::Duration;

/// A quota and what the decisions compute from it, swapped together.
#[derive(Clone, Copy, Debug)]
pub(super) struct Plan {
    pub(super) quota: Quota,
    pub(super) period_ns: u64,
    /// The local engine's window arithmetic, run on this instance's view of the
    /// global counts.
    pub(super) window: Window,
}

impl Plan {
    /// The plan for `quota`, checked as the builder checks it: the local engine's
    /// [`ConfigError`] as [`Error::Config`]; [`Error::Unsupported`] for an algorithm
    /// other than the two windows, or a period not longer than the sync `interval`.
    pub(super) fn new(
        algorithm: Algorithm,
        quota: Quota,
        interval: Duration,
    ) -> Result<Self, Error> {
        // The local engine's checks and arithmetic: the same ConfigError for the same
        // quota, the same decisions for the same counts.
        let window = match Params::new(algorithm, quota)? {
            Params::Packed(PackedParams::Fixed(f)) => Window::Fixed(f),
            Params::Packed(PackedParams::Sliding(s)) => Window::Sliding(s),
            _ => {
                return Err(Error::Unsupported(format!(
                    "the hybrid mode runs FixedWindow and SlidingWindow, not {algorithm:?}"
                )))
            }
        };
        if interval != Duration::MAX && interval >= quota.period() {
            return Err(Error::Unsupported(format!(
                "sync interval {interval:?} must be shorter than the period {:?}",
                quota.period()
            )));
        }
        Ok(Plan {
            quota,
            period_ns: crate::clock::duration_to_nanos(quota.period()),
            window,
        })
    }

    pub(super) fn limit(&self) -> u32 {
        self.quota.limit()
    }
}

/// The window algorithm a hybrid limiter runs.
#[derive(Clone, Copy, Debug)]
pub(super) enum Window {
    Fixed(FixedWindow),
    Sliding(SlidingWindow),
}
