//! Time sources.
//!
//! The engine measures time as `u64` nanoseconds since a clock's own zero, read once
//! per decision. Readings may step backwards (quanta's TSC can, across cores; a user
//! clock may be reset): the engine never lets such a reading move state backwards or
//! re-earn capacity, it treats a reading older than the state as the state's time.

mod coarse;

pub use coarse::{CoarseClock, CoarseClockError};

use crate::sync::{Arc, AtomicU64, Ordering, PlainAtomicU64};
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The latest time the engine represents: 2^62 ns, about 146 years after the clock's
/// zero. Readings past it are treated as this time; quotas whose spans exceed it are
/// refused at build time.
pub(crate) const HORIZON_NS: u64 = 1 << 62;

/// A source of monotonic-ish time, in nanoseconds since the clock's zero.
///
/// Implement it to drive a limiter from your own time source (a simulation, a
/// coarse cached clock, a clock shared with the rest of your program).
///
/// # Example
///
/// ```
/// use tollgate::Clock;
///
/// /// A clock that reads a time the program stores elsewhere.
/// #[derive(Clone)]
/// struct Frozen(u64);
///
/// impl Clock for Frozen {
///     fn now(&self) -> u64 {
///         self.0
///     }
/// }
///
/// assert_eq!(Frozen(42).now(), 42);
/// ```
pub trait Clock: Clone + Send + Sync + 'static {
    /// Nanoseconds since this clock's zero.
    fn now(&self) -> u64;
}

/// The default clock: [`quanta`]'s TSC-based monotonic clock, zero at construction.
///
/// Reading it costs a few nanoseconds (one `rdtsc` and a multiply), which is why it is
/// the default for hot paths.
///
/// # Example
///
/// ```
/// use tollgate::{Clock, QuantaClock};
///
/// let clock = QuantaClock::new();
/// let a = clock.now();
/// let b = clock.now();
/// assert!(b >= a || a - b < 1_000_000); // monotonic up to TSC skew across cores
/// ```
#[derive(Clone)]
pub struct QuantaClock {
    clock: quanta::Clock,
    start: u64,
}

impl QuantaClock {
    /// A clock whose zero is now.
    ///
    /// # Example
    ///
    /// ```
    /// let clock = tollgate::QuantaClock::new();
    /// # let _ = clock;
    /// ```
    #[must_use]
    pub fn new() -> Self {
        let clock = quanta::Clock::new();
        let start = clock.raw();
        QuantaClock { clock, start }
    }
}

impl Default for QuantaClock {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for QuantaClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QuantaClock")
            .field("now_ns", &self.now())
            .finish()
    }
}

impl Clock for QuantaClock {
    #[inline]
    fn now(&self) -> u64 {
        let raw = self.clock.raw();
        // A reading from a core whose TSC is behind the one that took `start` may be
        // smaller than `start`: that is time zero, not a wrap to the far future.
        if raw <= self.start {
            return 0;
        }
        self.clock.delta_as_nanos(self.start, raw)
    }
}

/// A clock that moves only when told to: for tests and simulations.
///
/// It starts at zero; clones share one time, and [`advance`](Self::advance) is safe
/// from any thread.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use tollgate::{Clock, ManualClock};
///
/// let clock = ManualClock::new();
/// let shared = clock.clone();
/// clock.advance(Duration::from_millis(5));
/// assert_eq!(shared.now(), 5_000_000);
/// ```
#[derive(Clone, Default)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock reading zero.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Clock, ManualClock};
    /// assert_eq!(ManualClock::new().now(), 0);
    /// ```
    #[must_use]
    pub fn new() -> Self {
        ManualClock {
            nanos: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Moves the clock forward by `by`, saturating at `u64::MAX` nanoseconds.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Clock, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(clock.now(), 1_000_000_000);
    /// ```
    pub fn advance(&self, by: Duration) {
        let by = duration_to_nanos(by);
        let mut cur = self.nanos.load(Ordering::Relaxed);
        loop {
            let next = cur.saturating_add(by);
            match self
                .nanos
                .compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Sets the clock to `to` since its zero, which may be earlier than now.
    ///
    /// Stepping a clock backwards is how tests reproduce a TSC that reads behind on
    /// another core; the engine must (and does) tolerate it.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Clock, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// clock.set(Duration::from_secs(10));
    /// clock.set(Duration::from_secs(3));
    /// assert_eq!(clock.now(), 3_000_000_000);
    /// ```
    pub fn set(&self, to: Duration) {
        self.nanos.store(duration_to_nanos(to), Ordering::Relaxed);
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManualClock")
            .field("now_ns", &self.now())
            .finish()
    }
}

impl Clock for ManualClock {
    #[inline]
    fn now(&self) -> u64 {
        self.nanos.load(Ordering::Relaxed)
    }
}

/// Wall time: nanoseconds since the UNIX epoch (1970-01-01 UTC), never decreasing
/// within a process.
///
/// This is the clock to pass as a *caller-side* clock to the Redis limiters
/// (`RedisRateLimiterBuilder::clock` and `HybridRateLimiterBuilder::clock`, feature
/// `redis`):
/// the state in Redis is shared by every process, so every process must read the same
/// time. [`QuantaClock`]'s zero is the moment each process created it, so two processes
/// (or one process before and after a restart) disagree by their uptimes, and state
/// written by one is decided by the other hours in its past or future (a bucket full
/// for hours, or a fresh one every restart). Every host's wall clock, kept by NTP, has
/// the same zero, the same one Redis `TIME` uses, so instances on `SystemClock` and
/// instances on the server's time share state correctly (to the hosts' clock skew).
///
/// **Never decreasing.** NTP (or an operator) may step the wall clock back. The
/// largest reading so far is kept in one process-wide atomic, and a reading below it
/// returns it instead: after a step back the clock stands still until the wall clock
/// catches up, so no limiter in the process moves back or re-earns capacity. The
/// converse is the price: a wall clock stepped far *forward* and back again holds this
/// clock at the far reading until real time reaches it. Readings before the epoch are 0;
/// readings past `u64::MAX` nanoseconds (the year 2554) saturate there.
///
/// A `SystemClock` is zero-sized and `Copy`: every instance in the process shares the
/// one reading. A read costs one `clock_gettime` (tens of nanoseconds, through the
/// vDSO on Linux) and one atomic `fetch_max`; [`QuantaClock`] stays the faster choice
/// for limiters that live in one process.
///
/// # Example
///
/// ```
/// use std::time::{SystemTime, UNIX_EPOCH};
/// use tollgate::{Algorithm, Clock, Quota, RateLimiter, SystemClock};
///
/// let clock = SystemClock::new();
/// let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
/// let a = clock.now();
/// assert!(a.abs_diff(wall) < 5_000_000_000); // the same zero as every other host
/// assert!(clock.now() >= a); // never backwards
///
/// // A local limiter on wall time (windows aligned to the epoch, like Redis TIME's).
/// let limiter = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_second(5))
///     .clock(clock)
///     .build()?;
/// assert!(limiter.check().is_allowed());
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
///
/// Shared by the processes of a service through Redis (feature `redis`):
///
/// ```no_run
/// # #[cfg(feature = "redis")]
/// # async fn run() -> Result<(), tollgate::redis::Error> {
/// use tollgate::redis::RedisRateLimiter;
/// use tollgate::{Algorithm, Quota, SystemClock};
///
/// // Every instance decides at its own wall clock (one fewer Redis `TIME` per script,
/// // the same windows as instances on the server's time).
/// let limiter = RedisRateLimiter::builder(Algorithm::SlidingWindow, Quota::per_minute(600))
///     .url("redis://127.0.0.1:6379")
///     .clock(SystemClock::new())
///     .build()
///     .await?;
/// # let _ = limiter;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Copy, Default)]
pub struct SystemClock {
    _private: (),
}

/// The largest wall-clock reading any [`SystemClock`] in this process has returned.
/// Plain std atomic: clocks are outside the loom models, and a loom atomic cannot live
/// in a `static`.
static SYSTEM_CLOCK_MAX: PlainAtomicU64 = PlainAtomicU64::new(0);

impl SystemClock {
    /// The process's wall clock.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Clock, SystemClock};
    /// assert!(SystemClock::new().now() > 1_600_000_000 * 1_000_000_000); // after 2020
    /// ```
    #[must_use]
    pub const fn new() -> Self {
        SystemClock { _private: () }
    }
}

/// `wall` (a fresh reading), or the largest reading so far when `wall` is behind it;
/// raises the maximum.
fn never_decreasing(max: &PlainAtomicU64, wall: u64) -> u64 {
    // Relaxed is enough: the maximum is one location, and its modification order
    // alone makes the values returned by successive reads never decrease.
    max.fetch_max(wall, Ordering::Relaxed).max(wall)
}

fn wall_nanos(t: SystemTime) -> u64 {
    // Before the epoch (a badly set clock) is time zero, as a reading below a
    // QuantaClock's start is.
    t.duration_since(UNIX_EPOCH).map_or(0, duration_to_nanos)
}

impl fmt::Debug for SystemClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SystemClock")
            .field("now_ns", &self.now())
            .finish()
    }
}

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> u64 {
        never_decreasing(&SYSTEM_CLOCK_MAX, wall_nanos(SystemTime::now()))
    }
}

/// `d` in nanoseconds, saturating at `u64::MAX` (about 584 years) instead of panicking.
pub(crate) fn duration_to_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(all(test, not(tollgate_loom)))]
mod tests {
    use super::*;

    #[test]
    fn system_clock_is_wall_time_and_never_decreases() {
        let clock = SystemClock::new();
        let mut last = 0;
        for _ in 0..10_000 {
            let before = wall_nanos(SystemTime::now());
            let t = clock.now();
            assert!(t >= last, "stepped back from {last} to {t}");
            // Close to the wall clock: at or after the reading just before (unless an
            // earlier reading was later still), and within a second of it.
            assert!(t + 1_000_000 >= before && t.abs_diff(before) < 1_000_000_000);
            last = t;
        }
        // Clones and new instances share the reading.
        let other = SystemClock::new();
        assert!(other.now() >= last);
        let copy = clock;
        assert!(copy.now() >= last);
    }

    #[test]
    fn a_wall_clock_stepped_back_does_not_move_the_clock_back() {
        let max = PlainAtomicU64::new(0);
        assert_eq!(never_decreasing(&max, 1_000), 1_000);
        assert_eq!(never_decreasing(&max, 5_000), 5_000);
        // NTP steps the wall clock back by 4 µs: the clock stands still...
        assert_eq!(never_decreasing(&max, 1_000), 5_000);
        assert_eq!(never_decreasing(&max, 4_999), 5_000);
        // ...until the wall clock catches up.
        assert_eq!(never_decreasing(&max, 5_001), 5_001);
    }

    #[test]
    fn wall_readings_are_clamped() {
        assert_eq!(wall_nanos(UNIX_EPOCH - Duration::from_secs(10)), 0);
        assert_eq!(wall_nanos(UNIX_EPOCH + Duration::from_nanos(7)), 7);
        let far = UNIX_EPOCH + Duration::from_secs(u64::MAX / 1_000_000_000 + 10);
        assert_eq!(wall_nanos(far), u64::MAX);
    }
}
