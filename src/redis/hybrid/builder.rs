//! [`HybridRateLimiterBuilder`]: connection, prefix, timeout, interval, key bound, clock.

use super::decide::Inner;
use super::plan::{Plan, Window};
use super::table::KeyTable;
use super::{lock, Connection, Error, HybridRateLimiter, Target, TimeSource};
#[cfg(doc)]
use crate::error::ConfigError;
use crate::sync::{PlainAtomicU64 as AtomicU64, StdArc as Arc, StdMutex as Mutex};
use crate::{clock::Clock, quota::Algorithm, quota::Quota};
use crossbeam_utils::atomic::AtomicCell;
use redis::aio::ConnectionLike;
use std::fmt;
use std::time::{Duration, Instant};

/// Builds a [`HybridRateLimiter`]; made by [`HybridRateLimiter::builder`].
///
/// # Example
///
/// ```no_run
/// use std::time::Duration;
/// use tollgate::redis::HybridRateLimiter;
/// use tollgate::{Algorithm, Quota};
///
/// # async fn run() -> Result<(), tollgate::redis::Error> {
/// let limiter = HybridRateLimiter::builder(Algorithm::FixedWindow, Quota::per_second(10_000))
///     .url("redis://127.0.0.1:6379")
///     .prefix("hybrid:api")
///     .sync_interval(Duration::from_millis(20))
///     .max_keys(1 << 16)
///     .build()
///     .await?;
/// # let _ = limiter;
/// # Ok(())
/// # }
/// ```
#[must_use = "a builder does nothing until .build() is called"]
pub struct HybridRateLimiterBuilder {
    pub(super) algorithm: Algorithm,
    pub(super) quota: Quota,
    pub(super) target: Target,
    pub(super) prefix: String,
    pub(super) timeout: Duration,
    pub(super) interval: Duration,
    pub(super) max_keys: usize,
    pub(super) time: TimeSource,
}

crate::redis::shared_settings::shared_settings!(
    HybridRateLimiterBuilder,
    "HybridRateLimiter",
    "FixedWindow",
    "A sync sends one pipeline per hash slot."
);

impl HybridRateLimiterBuilder {
    /// How often the background task syncs (default 100 ms). It must be shorter than
    /// the period; `Duration::MAX` disables the task (sync with
    /// [`HybridRateLimiter::sync`] yourself).
    ///
    /// # Example
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::{redis::HybridRateLimiter, Algorithm, Quota};
    /// let b = HybridRateLimiter::builder(Algorithm::FixedWindow, Quota::per_second(5))
    ///     .sync_interval(Duration::from_millis(10));
    /// # let _ = b;
    /// ```
    pub fn sync_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// The most keys tracked at once (default 100,000): the table holds exactly this
    /// many, in memory allocated once at build (see [`memory_bytes`](Self::memory_bytes)).
    /// While it is full, a new key takes the place of an idle one with nothing left to
    /// sync, or is denied.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{redis::HybridRateLimiter, Algorithm, Quota};
    /// let b = HybridRateLimiter::builder(Algorithm::FixedWindow, Quota::per_second(5))
    ///     .max_keys(1000);
    /// # let _ = b;
    /// ```
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// The bytes [`build`](Self::build) will allocate for the key table, without
    /// allocating them: about 202 bytes per key of [`max_keys`](Self::max_keys)
    /// (1.48 slots of 136 bytes), plus each tracked key's name once it is seen.
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`] for `max_keys` of 0; [`Error::Config`] with
    /// [`ConfigError::InvalidCapacity`] for a `max_keys` beyond what the table can
    /// address.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{redis::HybridRateLimiter, Algorithm, Quota};
    /// let b = HybridRateLimiter::builder(Algorithm::FixedWindow, Quota::per_second(5))
    ///     .max_keys(100_000);
    /// let bytes = b.memory_bytes()?;
    /// assert!(bytes > 100_000 * 100 && bytes < 100_000 * 250);
    /// # Ok::<(), tollgate::redis::Error>(())
    /// ```
    pub fn memory_bytes(&self) -> Result<usize, Error> {
        if self.max_keys == 0 {
            return Err(zero_keys());
        }
        Ok(KeyTable::bytes_for(self.max_keys)?)
    }

    /// Decides at `clock` instead of the system clock (every instance must share it).
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{redis::HybridRateLimiter, Algorithm, ManualClock, Quota};
    /// let b = HybridRateLimiter::builder(Algorithm::FixedWindow, Quota::per_second(5))
    ///     .clock(ManualClock::new());
    /// # let _ = b;
    /// ```
    pub fn clock<C: Clock>(mut self, clock: C) -> Self {
        self.time = TimeSource::from_clock(clock);
        self
    }

    /// Checks the quota, connects, and spawns the sync task on the current tokio
    /// runtime (it stops when the last clone of the limiter is dropped).
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for a quota the local engine refuses; [`Error::Unsupported`]
    /// for an algorithm other than `FixedWindow` and `SlidingWindow`, a sync interval
    /// not shorter than the period, or `max_keys` of 0; [`Error::Config`] with
    /// [`ConfigError::InvalidCapacity`] for a key table too large to allocate;
    /// [`Error::NoTarget`],
    /// [`Error::Redis`] or [`Error::Timeout`] when Redis cannot be reached.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{redis::{Error, HybridRateLimiter}, Algorithm, Quota};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let err = HybridRateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(5))
    ///     .url("redis://127.0.0.1:6379")
    ///     .build()
    ///     .await
    ///     .unwrap_err();
    /// assert!(matches!(err, Error::Unsupported(_)));
    /// # }
    /// ```
    pub async fn build(self) -> Result<HybridRateLimiter, Error> {
        let plan = Plan::new(self.algorithm, self.quota, self.interval)?;
        crate::redis::check_prefix(&self.prefix)?;
        if self.interval.is_zero() || self.max_keys == 0 {
            return Err(zero_keys());
        }
        // The key table, allocated once, before connecting: a max_keys too large for
        // the machine is an error here, never an abort later.
        let keep = if matches!(plan.window, Window::Sliding(_)) {
            2
        } else {
            1
        };
        let table = KeyTable::new(self.max_keys, keep)?;
        // Decisions are local: Redis is optional at start, and syncs fail (counted in
        // the stats) until it can be reached.
        let conn = self.target.connect(self.timeout, true).await?;
        let inner = Arc::new(Inner {
            algorithm: self.algorithm,
            plan: AtomicCell::new(plan),
            interval: self.interval,
            prefix: self.prefix,
            timeout: self.timeout,
            conn,
            time: self.time,
            table,
            sync_lock: tokio::sync::Mutex::new(()),
            instance: format!(
                "{:016x}",
                ahash::RandomState::new().hash_one(std::process::id())
            ),
            round_trips: AtomicU64::new(0),
            sync_errors: AtomicU64::new(0),
            max_gap: AtomicU64::new(0),
            last_sync: AtomicU64::new(0),
            epoch: Instant::now(),
            task: Mutex::new(None),
        });
        if self.interval != Duration::MAX {
            let weak = Arc::downgrade(&inner);
            let task = tokio::spawn(super::sync::run(weak, self.interval));
            *lock(&inner.task) = Some(task);
        }
        Ok(HybridRateLimiter { inner })
    }
}

/// The error for a zero sync interval or `max_keys`.
fn zero_keys() -> Error {
    Error::Unsupported("sync interval and max_keys must be positive".into())
}

impl fmt::Debug for HybridRateLimiterBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HybridRateLimiterBuilder")
            .field("algorithm", &self.algorithm)
            .field("quota", &self.quota)
            .field("prefix", &self.prefix)
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}
