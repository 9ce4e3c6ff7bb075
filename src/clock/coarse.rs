//! A coarse clock: a timestamp a background thread refreshes, read with one load.

use super::Clock;
use crate::sync::{lock_std, StdMutex};
use std::fmt;
use std::time::Duration;

/// An opt-in clock read from a timestamp that a background thread refreshes every
/// `granularity` (quanta's upkeep thread and `Clock::recent`, one per process): a
/// reading is one atomic load instead of a time-stamp-counter read and its scaling,
/// which is about a quarter of a keyed hit with [`QuantaClock`](crate::clock::QuantaClock).
///
/// **What it costs in exactness.** A reading is the time of the last refresh, so it lags
/// the true time by up to one `granularity`, more while the refreshing thread waits
/// for a core. Every reading is older than the true time, never newer, so the limiters
/// never admit more than the quota allows at the true times; they may admit less, and
/// report waits up to one granularity (plus that scheduling delay) longer than needed.
/// Requests decided within one refresh share one reading. Windows switch up to one
/// granularity late. Keep `granularity` well below the quota's emission interval
/// (`period / limit`) for decisions to stay close to the exact clock's; the default
/// [`QuantaClock`](crate::clock::QuantaClock) remains exact.
///
/// The refreshing thread is started by the first `CoarseClock` of the process and
/// shared by all; it runs until the process exits (a thread stopped and restarted
/// under a clock being made could leave that clock reading a frozen time). quanta runs
/// one such thread per process: if another library already started it, this clock
/// reads its refreshes (at its granularity, which [`granularity`](Self::granularity)
/// then reports as `None`).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use tollgate::{Algorithm, CoarseClock, KeyedRateLimiter, Quota};
///
/// let clock = CoarseClock::new(Duration::from_millis(1))?;
/// let limiter = KeyedRateLimiter::<u64, _>::builder(Algorithm::TokenBucket, Quota::per_second(100))
///     .clock(clock)
///     .build()?;
/// assert!(limiter.check(&7).is_allowed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct CoarseClock {
    clock: quanta::Clock,
    start: quanta::Instant,
    /// The refreshing thread's granularity (`None`: another user of quanta runs it).
    granularity: Option<Duration>,
}

/// Whether the process's refreshing thread runs, and at which granularity (`Some(None)`
/// when another user of quanta started it).
static UPKEEP: StdMutex<Option<Option<Duration>>> = StdMutex::new(None);

/// Why a [`CoarseClock`] could not start.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use tollgate::{CoarseClock, CoarseClockError};
/// assert!(matches!(CoarseClock::new(Duration::ZERO), Err(CoarseClockError::ZeroGranularity)));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum CoarseClockError {
    /// A granularity of zero would refresh without pause.
    ZeroGranularity,
    /// The refreshing thread could not be spawned.
    Spawn(std::io::Error),
}

impl fmt::Display for CoarseClockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CoarseClockError::ZeroGranularity => {
                write!(f, "a coarse clock needs a granularity above zero")
            }
            CoarseClockError::Spawn(e) => {
                write!(
                    f,
                    "the coarse clock's refreshing thread could not start: {e}"
                )
            }
        }
    }
}

impl std::error::Error for CoarseClockError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CoarseClockError::Spawn(e) => Some(e),
            CoarseClockError::ZeroGranularity => None,
        }
    }
}

impl CoarseClock {
    /// A clock whose zero is now, refreshed every `granularity` (the thread already
    /// running is reused, at its own granularity).
    ///
    /// # Errors
    ///
    /// [`CoarseClockError::ZeroGranularity`]; [`CoarseClockError::Spawn`] when the
    /// thread cannot be spawned.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Clock, CoarseClock};
    /// let clock = CoarseClock::new(Duration::from_millis(1))?;
    /// let a = clock.now();
    /// // The upkeep thread moves it within about a granularity (a busy machine may
    /// // schedule the thread later: wait for it, boundedly).
    /// let deadline = std::time::Instant::now() + Duration::from_secs(10);
    /// while clock.now() == a && std::time::Instant::now() < deadline {
    ///     std::thread::sleep(Duration::from_millis(1));
    /// }
    /// assert!(clock.now() > a);
    /// # Ok::<(), tollgate::CoarseClockError>(())
    /// ```
    pub fn new(granularity: Duration) -> Result<Self, CoarseClockError> {
        if granularity.is_zero() {
            return Err(CoarseClockError::ZeroGranularity);
        }
        let clock = quanta::Clock::new();
        let granularity = {
            let mut running = lock_std(&UPKEEP);
            match *running {
                Some(g) => g,
                None => {
                    let g = match quanta::Upkeep::new_with_clock(granularity, clock.clone()).start()
                    {
                        Ok(handle) => {
                            // Runs until the process exits (see the type's docs).
                            std::mem::forget(handle);
                            Some(granularity)
                        }
                        // Someone else's thread refreshes the recent time.
                        Err(quanta::Error::UpkeepRunning) => None,
                        Err(quanta::Error::FailedToSpawnUpkeepThread(e)) => {
                            return Err(CoarseClockError::Spawn(e))
                        }
                    };
                    *running = Some(g);
                    g
                }
            }
        };
        let start = clock.recent();
        Ok(CoarseClock {
            clock,
            start,
            granularity,
        })
    }

    /// How often the readings are refreshed: `None` when another user of quanta runs
    /// the refreshing thread, at a granularity this clock does not know.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::CoarseClock;
    /// let clock = CoarseClock::new(Duration::from_millis(2))?;
    /// assert!(clock.granularity().is_some());
    /// # Ok::<(), tollgate::CoarseClockError>(())
    /// ```
    #[must_use]
    pub fn granularity(&self) -> Option<Duration> {
        self.granularity
    }
}

impl fmt::Debug for CoarseClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CoarseClock")
            .field("now_ns", &self.now())
            .field("granularity", &self.granularity)
            .finish()
    }
}

impl Clock for CoarseClock {
    #[inline]
    fn now(&self) -> u64 {
        // The refreshes never go backwards past `start` (a reading before the first
        // refresh after a restart of the thread is time zero).
        let since = self.clock.recent().saturating_duration_since(self.start);
        u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
    }
}

#[cfg(all(test, not(tollgate_loom)))]
mod tests {
    use super::*;

    #[test]
    fn readings_advance_by_refreshes_and_never_go_back() {
        let clock = CoarseClock::new(Duration::from_millis(1)).unwrap();
        // The exact time on the same time base and zero as the coarse readings: a
        // reading taken before it can never be ahead of it, however late the
        // refreshing thread runs (no slack needed).
        let exact = || {
            let since = clock.clock.now().saturating_duration_since(clock.start);
            u64::try_from(since.as_nanos()).unwrap()
        };
        let c0 = clock.now();
        let mut last = c0;
        for _ in 0..50 {
            std::thread::sleep(Duration::from_millis(2));
            let now = clock.now();
            assert!(now >= last, "{now} < {last}");
            let truth = exact();
            assert!(
                now <= truth,
                "a reading {now} ahead of the true time {truth}"
            );
            last = now;
        }
        assert!(last > c0, "the refreshes moved the time on");
    }

    #[test]
    fn every_clock_shares_the_first_ones_thread() {
        let a = CoarseClock::new(Duration::from_millis(3)).unwrap();
        let b = CoarseClock::new(Duration::from_millis(7)).unwrap();
        assert_eq!(a.granularity(), b.granularity());
        drop(a);
        // The thread outlives its clocks: a clock made later still moves.
        let c = CoarseClock::new(Duration::from_millis(5)).unwrap();
        let start = c.now();
        std::thread::sleep(Duration::from_millis(30));
        assert!(c.now() > start);
        assert!(format!("{b:?}").contains("granularity"));
    }
}
