//! Time sources.
//!
//! The engine measures time as `u64` nanoseconds since a clock's own zero, read once
//! per decision. Readings may step backwards (quanta's TSC can, across cores; a user
//! clock may be reset): the engine never lets such a reading move state backwards or
//! re-earn capacity, it treats a reading older than the state as the state's time.

use crate::sync::{Arc, AtomicU64, Ordering};
use std::fmt;
use std::time::Duration;

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

/// `d` in nanoseconds, saturating at `u64::MAX` (about 584 years) instead of panicking.
pub(crate) fn duration_to_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
