//! The five algorithms, as pure, allocation-free step functions.
//!
//! Each packed algorithm is a function `(params, state: u64, now, cost) -> (Option<new
//! state>, Decision)`: `None` means "leave the state as it is" (a denial, or a zero-cost
//! peek), so the cell skips the compare-and-swap. The sliding log works on a ring of
//! timestamps behind a lock instead.
//!
//! All time is `u64` nanoseconds since the clock's zero, clamped to [`HORIZON_NS`]
//! (about 146 years) so that every sum the algorithms make fits in a `u64` and every
//! product in a `u128`.

pub(crate) mod booking;
pub(crate) mod fixed_window;
pub(crate) mod gcra;
pub(crate) mod sliding_log;
pub(crate) mod sliding_window;

use crate::clock::duration_to_nanos;
use crate::{ConfigError, Decision, Quota};
use std::time::Duration;

/// The latest time the engine represents: 2^62 ns, about 146 years after the clock's
/// zero. Readings past it are treated as this time; quotas whose spans exceed it are
/// refused at build time.
pub(crate) const HORIZON_NS: u64 = 1 << 62;

/// The engine's reading of `clock`: nanoseconds since its zero, clamped to
/// [`HORIZON_NS`]. Every limiter reads time through this, once per decision.
#[inline]
pub(crate) fn now<C: crate::Clock>(clock: &C) -> u64 {
    clock.now().min(HORIZON_NS)
}

/// The largest limit the sliding log accepts (it stores one timestamp per request).
pub(crate) const SLIDING_LOG_MAX_LIMIT: u32 = 1 << 16;

/// Which rate-limiting algorithm a limiter runs.
///
/// | algorithm | guarantee | state per key |
/// |---|---|---|
/// | `TokenBucket` | GCRA: at most `burst + t/T` in any span `t`, `T = period/limit` | 8 bytes |
/// | `LeakyBucket` | admits as `TokenBucket`, and [`Decision::delay`] spaces releases by `T` | 8 bytes |
/// | `FixedWindow` | at most `limit` per aligned window `[k·P, (k+1)·P)` | 8 bytes |
/// | `SlidingWindow` | weighted counter: `prev·(P−e)/P + curr ≤ limit` | 8 bytes |
/// | `SlidingLog` | exact: at most `limit` in every interval `(t−P, t]` | `8 × limit` bytes |
///
/// # Example
///
/// ```
/// use tollgate::{Algorithm, Quota, RateLimiter};
///
/// for algorithm in Algorithm::ALL {
///     let limiter = RateLimiter::builder(algorithm, Quota::per_second(5)).build()?;
///     assert!(limiter.check().is_allowed());
/// }
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// GCRA token bucket: smooth refill at `limit/period`, bursts up to `burst`.
    TokenBucket,
    /// The shaper: admits what `TokenBucket` admits and says how long to delay each
    /// admitted request so releases are evenly spaced (nginx `limit_req` with `burst`).
    LeakyBucket,
    /// At most `limit` per window, windows aligned to the clock's zero.
    FixedWindow,
    /// Sliding window counter: the previous window's count, weighted by how much of it
    /// still overlaps the sliding period, plus the current count.
    SlidingWindow,
    /// Exact sliding log: a ring of the last `limit` admission timestamps.
    SlidingLog,
}

impl Algorithm {
    /// All five algorithms, in declaration order.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(tollgate::Algorithm::ALL.len(), 5);
    /// ```
    pub const ALL: [Algorithm; 5] = [
        Algorithm::TokenBucket,
        Algorithm::LeakyBucket,
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
        Algorithm::SlidingLog,
    ];

    /// Whether this algorithm's state fits in one atomic `u64`.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::Algorithm;
    /// assert!(Algorithm::TokenBucket.is_packed());
    /// assert!(!Algorithm::SlidingLog.is_packed());
    /// ```
    #[must_use]
    pub const fn is_packed(self) -> bool {
        !matches!(self, Algorithm::SlidingLog)
    }
}

/// One packed algorithm's step, split for the keyed table's fast path: the state a
/// request leaves (computed in the compare-and-swap loop) and the decision (computed
/// once, after, from the state the winning compare-and-swap replaced). Both are
/// [`both`](Self::both)'s halves, exactly; forced inline, so that no 40-byte decision
/// travels through memory between a call and its caller.
pub(crate) trait Step: Copy {
    /// The algorithm's `step(state, now, cost)`: the new state and the decision.
    fn both(&self, state: u64, now: u64, cost: u32) -> (Option<u64>, Decision);
    /// `both(state, now, cost).0`.
    #[inline(always)]
    fn next_state(&self, state: u64, now: u64, cost: u32) -> Option<u64> {
        self.both(state, now, cost).0
    }
    /// `both(state, now, cost).1`.
    #[inline(always)]
    fn decision(&self, state: u64, now: u64, cost: u32) -> Decision {
        self.both(state, now, cost).1
    }
    /// Whether `state` has moved into a window that starts after the reading `now`
    /// (another request read a later time first, or a booking went there). A denial
    /// of such a reading may be due to its age alone (a thread pre-empted between its
    /// reading and its decision at a window boundary): the limiters read the clock
    /// once more before returning it. Never for the buckets, whose stale readings
    /// are decided at the state's time.
    #[inline(always)]
    fn ahead(&self, _state: u64, _now: u64) -> bool {
        false
    }
    /// The buckets' rate class (see `keyed::rates`); `None` for the windows, whose
    /// states count requests and carry over between quotas as they are.
    #[inline(always)]
    fn class(&self) -> Option<u8> {
        None
    }
}

/// The bucket in a table of one rate ever: no class to compare on a hit.
impl Step for gcra::Gcra {
    #[inline(always)]
    fn both(&self, state: u64, now: u64, cost: u32) -> (Option<u64>, Decision) {
        self.step(state, now, cost)
    }
}

/// The bucket in a table that may hold states of several rate classes: a hit whose
/// state another class wrote goes to the slow path, which converts it.
#[derive(Clone, Copy)]
pub(crate) struct Classed(pub(crate) gcra::Gcra);

impl Step for Classed {
    #[inline(always)]
    fn both(&self, state: u64, now: u64, cost: u32) -> (Option<u64>, Decision) {
        self.0.step(state, now, cost)
    }
    #[inline(always)]
    fn class(&self) -> Option<u8> {
        Some(self.0.class())
    }
}

impl Step for fixed_window::FixedWindow {
    #[inline(always)]
    fn both(&self, state: u64, now: u64, cost: u32) -> (Option<u64>, Decision) {
        self.step(state, now, cost)
    }
    #[inline(always)]
    fn ahead(&self, state: u64, now: u64) -> bool {
        fixed_window::FixedWindow::ahead(self, state, now)
    }
}

impl Step for sliding_window::SlidingWindow {
    #[inline(always)]
    fn both(&self, state: u64, now: u64, cost: u32) -> (Option<u64>, Decision) {
        self.step(state, now, cost)
    }
    /// Without the decision's divisions (see `SlidingWindow::next_state`).
    #[inline(always)]
    fn next_state(&self, state: u64, now: u64, cost: u32) -> Option<u64> {
        sliding_window::SlidingWindow::next_state(self, state, now, cost)
    }
    #[inline(always)]
    fn ahead(&self, state: u64, now: u64) -> bool {
        sliding_window::SlidingWindow::ahead(self, state, now)
    }
}

/// Parameters of a packed algorithm, validated and precomputed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PackedParams {
    Gcra(gcra::Gcra),
    Fixed(fixed_window::FixedWindow),
    Sliding(sliding_window::SlidingWindow),
}

impl PackedParams {
    /// One decision: the new state (`None` to leave it) and the decision.
    ///
    /// `inline(always)` here and on each algorithm's `step`/`decide`: inside the keyed
    /// table's large `decide` a plain `#[inline]` is not taken, the `Decision` then
    /// travels through memory, and a keyed decision on 1,000 keys measured 48 ns
    /// instead of 37 ns (`examples`-style loop, same run).
    #[inline(always)]
    pub(crate) fn step(&self, state: u64, now: u64, cost: u32) -> (Option<u64>, Decision) {
        match self {
            PackedParams::Gcra(p) => p.step(state, now, cost),
            PackedParams::Fixed(p) => p.step(state, now, cost),
            PackedParams::Sliding(p) => p.step(state, now, cost),
        }
    }

    /// `step(state, now, cost).0`: the new state alone. The sliding window computes it
    /// without the decision's divisions (the others' decision is cheap, and what the
    /// caller does not use of it is optimized away).
    #[inline(always)]
    pub(crate) fn next_state(&self, state: u64, now: u64, cost: u32) -> Option<u64> {
        match self {
            PackedParams::Gcra(p) => Step::next_state(p, state, now, cost),
            PackedParams::Fixed(p) => Step::next_state(p, state, now, cost),
            PackedParams::Sliding(p) => Step::next_state(p, state, now, cost),
        }
    }

    /// The bucket's parameters (`None` for a window algorithm): what a keyed table
    /// needs to carry a state written under another interval over (see
    /// `keyed::rates`).
    #[inline(always)]
    pub(crate) fn gcra(&self) -> Option<gcra::Gcra> {
        match self {
            PackedParams::Gcra(g) => Some(*g),
            _ => None,
        }
    }

    /// [`Step::ahead`] of the algorithm.
    #[inline(always)]
    pub(crate) fn ahead(&self, state: u64, now: u64) -> bool {
        match self {
            PackedParams::Gcra(_) => false,
            PackedParams::Fixed(p) => p.ahead(state, now),
            PackedParams::Sliding(p) => p.ahead(state, now),
        }
    }

    /// Books `cost` (at most the capacity) at the earliest time it may proceed, if
    /// that is at most `max_wait` (`<= MAX_WAIT_NS`) after `now`; see each
    /// algorithm's `reserve` for the order of service.
    #[inline]
    pub(crate) fn reserve(
        &self,
        state: u64,
        now: u64,
        cost: u32,
        max_wait: u64,
    ) -> (Option<u64>, booking::Reserved) {
        match self {
            PackedParams::Gcra(p) => p.reserve(state, now, cost, max_wait),
            PackedParams::Fixed(p) => p.reserve(state, now, cost, max_wait),
            PackedParams::Sliding(p) => p.reserve(state, now, cost, max_wait),
        }
    }

    /// What an admission of `cost` that left `state` booked (for a roll-back).
    #[inline]
    pub(crate) fn booking(&self, state: u64, cost: u32) -> booking::Booking {
        match self {
            PackedParams::Gcra(p) => p.booking(state, cost),
            PackedParams::Fixed(p) => p.booking(state, cost),
            PackedParams::Sliding(p) => p.booking(state, cost),
        }
    }

    /// The state with `booking` given back at `now`: by a cancel, as far as no later
    /// booking depends on it; by a roll-back (`roll_back`: the request never
    /// proceeded), exactly what the booking took (see each algorithm's `refund`).
    /// `None` when nothing can be given back.
    #[inline]
    pub(crate) fn refund(
        &self,
        state: u64,
        booking: &booking::Booking,
        now: u64,
        roll_back: bool,
    ) -> Option<u64> {
        use booking::Booking;
        match (self, *booking) {
            (PackedParams::Gcra(p), Booking::Gcra { tat, weight }) => {
                p.refund(state, tat, weight, now, roll_back)
            }
            (PackedParams::Fixed(p), Booking::Window { index, cost }) => {
                p.refund(state, index, cost)
            }
            (PackedParams::Sliding(p), Booking::Window { index, cost }) => {
                p.refund(state, index, cost)
            }
            _ => None,
        }
    }

    /// Whether `state` says nothing any more at `now`: it decides exactly as the
    /// fresh state `0` would, now and at every later time.
    #[inline]
    pub(crate) fn is_idle(&self, state: u64, now: u64) -> bool {
        match self {
            PackedParams::Gcra(p) => p.is_idle(state, now),
            PackedParams::Fixed(p) => p.is_idle(state, now),
            PackedParams::Sliding(p) => p.is_idle(state, now),
        }
    }

    /// The time (engine nanoseconds) from which `state` is idle, in O(1) from the
    /// state alone: `is_idle(state, now)` iff `now >= idle_at(state)`. The keyed table
    /// reads it with the eviction rank, in one dispatch ([`Ranking::of`]), instead of
    /// running a step per entry.
    #[cfg(test)]
    #[inline]
    pub(crate) fn idle_at(&self, state: u64) -> u64 {
        match self {
            PackedParams::Gcra(p) => p.idle_at(state),
            PackedParams::Fixed(p) => p.idle_at(state),
            PackedParams::Sliding(p) => p.idle_at(state),
        }
    }

    /// The eviction ranking at the reading `now` (see [`Ranking::of`]), with the
    /// reading's window computed once for the whole scan.
    #[inline]
    pub(crate) fn ranking(&self, now: u64) -> Ranking {
        let (current, rest) = match self {
            PackedParams::Sliding(p) => {
                let current = now / p.period();
                (current, p.period() - (now - current * p.period()))
            }
            _ => (0, 0),
        };
        Ranking {
            params: *self,
            current,
            rest,
        }
    }

    /// The quota's limit (what decisions report as `limit()`).
    #[inline]
    pub(crate) fn limit(&self) -> u32 {
        match self {
            PackedParams::Gcra(p) => p.limit(),
            PackedParams::Fixed(p) => p.limit(),
            PackedParams::Sliding(p) => p.limit(),
        }
    }

    /// The largest cost ever admitted at once.
    #[inline]
    pub(crate) fn capacity(&self) -> u32 {
        match self {
            PackedParams::Gcra(p) => p.burst(),
            PackedParams::Fixed(p) => p.limit(),
            PackedParams::Sliding(p) => p.limit(),
        }
    }
}

/// What forgetting a state can over-admit, at one reading: the keyed table evicts the
/// live entry that has used least (a bucket's debt, a window's count), ties by idle
/// stamp (the soonest idle first), so a throttled key is never forgotten while an
/// entry that has used less can go.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ranking {
    params: PackedParams,
    /// For the sliding window: the reading's window `now / P`, and what is left of it.
    current: u64,
    rest: u64,
}

impl Ranking {
    /// The idle stamp of `state` (the time from which it is idle) and, for a state live
    /// at the reading, its eviction rank: one number ordered as (what the state has
    /// used, its idle stamp), read off the state in O(1) with no step (each
    /// algorithm's `evict_rank`). Comparable only within one table at one reading.
    #[inline]
    pub(crate) fn of(&self, state: u64) -> (u64, u128) {
        match self.params {
            PackedParams::Gcra(p) => (p.idle_at(state), u128::from(p.evict_rank(state))),
            PackedParams::Fixed(p) => (p.idle_at(state), u128::from(p.evict_rank(state))),
            PackedParams::Sliding(p) => (
                p.idle_at(state),
                p.evict_rank(state, self.current, self.rest),
            ),
        }
    }
}

/// Word 0 holds the variant (and the shaper flag), words 1–3 the variant's own.
impl crate::sync::Words for PackedParams {
    #[inline]
    fn as_words(&self) -> [u64; 4] {
        let (tag, [a, b, c]) = match self {
            // The flags keep the low byte 0, the variant tag of the bucket.
            PackedParams::Gcra(p) => (p.flags(), p.as_words()),
            PackedParams::Fixed(p) => (1, p.as_words()),
            PackedParams::Sliding(p) => (2, p.as_words()),
        };
        [tag, a, b, c]
    }

    #[inline]
    fn from_words(w: [u64; 4]) -> Self {
        let rest = [w[1], w[2], w[3]];
        match w[0] & 0xFF {
            1 => PackedParams::Fixed(fixed_window::FixedWindow::from_words(rest)),
            2 => PackedParams::Sliding(sliding_window::SlidingWindow::from_words(rest)),
            _ => PackedParams::Gcra(gcra::Gcra::from_words(rest, w[0])),
        }
    }
}

impl crate::sync::Words for sliding_log::SlidingLog {
    #[inline]
    fn as_words(&self) -> [u64; 4] {
        let [a, b] = sliding_log::SlidingLog::as_words(self);
        [a, b, 0, 0]
    }

    #[inline]
    fn from_words(w: [u64; 4]) -> Self {
        sliding_log::SlidingLog::from_words([w[0], w[1]])
    }
}

/// Validated parameters of any algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Params {
    Packed(PackedParams),
    Log(sliding_log::SlidingLog),
}

impl Params {
    /// Checks `quota` for `algorithm` and precomputes its parameters.
    pub(crate) fn new(algorithm: Algorithm, quota: Quota) -> Result<Self, ConfigError> {
        let limit = quota.limit();
        if limit == 0 {
            return Err(ConfigError::ZeroLimit);
        }
        let period = duration_to_nanos(quota.period());
        if period == 0 {
            return Err(ConfigError::ZeroPeriod);
        }
        if period > HORIZON_NS {
            return Err(ConfigError::PeriodTooLong {
                span: quota.period(),
                max: Duration::from_nanos(HORIZON_NS),
            });
        }
        let burst = quota.burst();
        if burst == 0 {
            return Err(ConfigError::ZeroBurst);
        }
        if !matches!(algorithm, Algorithm::TokenBucket | Algorithm::LeakyBucket) {
            if let Some(b) = quota.explicit_burst() {
                if b != limit {
                    return Err(ConfigError::BurstNotSupported {
                        algorithm,
                        burst: b,
                        limit,
                    });
                }
            }
        }
        Ok(match algorithm {
            Algorithm::TokenBucket | Algorithm::LeakyBucket => {
                let shaper = algorithm == Algorithm::LeakyBucket;
                Params::Packed(PackedParams::Gcra(gcra::Gcra::new(quota, period, shaper)?))
            }
            Algorithm::FixedWindow => Params::Packed(PackedParams::Fixed(
                fixed_window::FixedWindow::new(quota, period)?,
            )),
            Algorithm::SlidingWindow => Params::Packed(PackedParams::Sliding(
                sliding_window::SlidingWindow::new(quota, period)?,
            )),
            Algorithm::SlidingLog => Params::Log(sliding_log::SlidingLog::new(quota, period)?),
        })
    }

    /// Checks that `next` (same algorithm) can replace these parameters at run time
    /// with every stored state keeping its meaning: the buckets' states are times, so
    /// anything goes; the windows' states count in windows of their period, so the
    /// period stays (their layout depends on the period alone, so any limit fits); a
    /// log keeps at most `ring` timestamps, allocated at build.
    pub(crate) fn can_become(&self, next: &Params, ring: u32) -> Result<(), ConfigError> {
        let (algorithm, period, requested) = match (self, next) {
            (Params::Packed(PackedParams::Fixed(a)), Params::Packed(PackedParams::Fixed(b))) => {
                (Algorithm::FixedWindow, a.period(), b.period())
            }
            (
                Params::Packed(PackedParams::Sliding(a)),
                Params::Packed(PackedParams::Sliding(b)),
            ) => (Algorithm::SlidingWindow, a.period(), b.period()),
            (Params::Log(_), Params::Log(b)) if b.limit() > ring => {
                return Err(ConfigError::LogBeyondRing {
                    limit: b.limit(),
                    ring,
                })
            }
            _ => return Ok(()),
        };
        if period != requested {
            return Err(ConfigError::PeriodChange {
                algorithm,
                period: Duration::from_nanos(period),
                requested: Duration::from_nanos(requested),
            });
        }
        Ok(())
    }
}

/// Bits needed to hold every count from 0 to `limit`.
pub(crate) const fn count_bits(limit: u32) -> u32 {
    32 - limit.leading_zeros()
}

/// Bits holding every window index from 0 to the horizon, for windows of `period` ns.
pub(crate) const fn index_bits(period: u64) -> u32 {
    64 - (HORIZON_NS / period).leading_zeros()
}

/// The shortest period (ns) whose window index, over the whole horizon, fits in
/// `index_bits` bits: `HORIZON_NS / period < 2^index_bits`.
pub(crate) fn min_window_period(index_bits: u32) -> u64 {
    if index_bits >= 63 {
        return 1;
    }
    // period > HORIZON / 2^bits  <=>  period >= HORIZON / 2^bits + 1
    (HORIZON_NS >> index_bits) + 1
}

#[cfg(test)]
mod tests;
