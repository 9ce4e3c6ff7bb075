//! Helpers shared by the integration tests: seeded runs and limiter construction.

#![allow(dead_code)]

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::time::Duration;
use tollgate::{ManualClock, Quota, RateLimiter};

/// The seed to use: `TOLLGATE_SEED` from the environment when set, else `default`.
pub(crate) fn seed(default: u64) -> u64 {
    std::env::var("TOLLGATE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Runs `f` with a generator seeded by `seed`; on failure prints the seed (and how to
/// rerun with it) before propagating the panic.
pub(crate) fn with_seed<R>(label: &str, seed: u64, f: impl FnOnce(&mut fastrand::Rng) -> R) -> R {
    let mut rng = fastrand::Rng::with_seed(seed);
    match catch_unwind(AssertUnwindSafe(|| f(&mut rng))) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{label}: FAILED with seed {seed} (rerun with TOLLGATE_SEED={seed})");
            resume_unwind(e)
        }
    }
}

/// Nanoseconds in `d` (test durations always fit).
pub(crate) fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).expect("test duration fits in u64 ns")
}

/// A limiter on a fresh manual clock, and that clock.
pub(crate) fn manual(
    algorithm: Algorithm,
    quota: Quota,
) -> (RateLimiter<ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let limiter = RateLimiter::builder(algorithm, quota)
        .clock(clock.clone())
        .build()
        .unwrap_or_else(|e| panic!("{algorithm:?} {quota:?} should build: {e}"));
    (limiter, clock)
}

/// A quota of `limit` per `period_ns` nanoseconds, with an optional burst.
pub(crate) fn quota(limit: u32, period_ns: u64, burst: Option<u32>) -> Quota {
    let q = Quota::new(limit, Duration::from_nanos(period_ns));
    match burst {
        Some(b) => q.with_burst(b),
        None => q,
    }
}

// ---------------------------------------------------------------------------------
// Reference models, in a deliberately different formulation from the engine:
//
// - TokenBucket / LeakyBucket: a "debt" in nanoseconds that drains with elapsed time
//   (not a theoretical arrival time); the leaky bucket's delay is the debt.
// - FixedWindow: a `HashMap` from window number to count.
// - SlidingWindow: a `HashMap` of window counts, weighted in exact `u128` arithmetic.
// - SlidingLog: a `Vec` of every admitted timestamp, counted over `(t − P, t]`.
//
// Every model only answers "does a request of cost `n` fit at time `t`?"; `remaining`,
// `retry_after` and `reset_after` are derived from that predicate by binary search.
// ---------------------------------------------------------------------------------

use std::collections::HashMap;
use tollgate::Algorithm;

/// A reference model: the admission predicate and the state change of an admission.
pub(crate) trait Model {
    /// Whether a request of cost `n` is admitted at `t` (`t` at least the last time
    /// given to `admit`), if nothing else arrives.
    fn fits(&self, t: u64, n: u32) -> bool;
    /// Records an admission of cost `n` at `t`.
    fn admit(&mut self, t: u64, n: u32);
    /// The LeakyBucket hold time of a request admitted at `t` (zero for the others).
    fn delay(&self, _t: u64) -> u64 {
        0
    }
    /// A wait after which every request up to the capacity fits.
    fn max_wait(&self) -> u64;
}

/// The least `w` with `model.fits(t + w, n)`, by binary search (the predicate is
/// monotone in time: waiting never makes a request fit less).
pub(crate) fn least_wait(model: &dyn Model, t: u64, n: u32) -> u64 {
    if model.fits(t, n) {
        return 0;
    }
    let (mut lo, mut hi) = (0u64, model.max_wait());
    assert!(model.fits(t + hi, n), "model bound too small");
    // Invariant: !fits(t + lo), fits(t + hi).
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if model.fits(t + mid, n) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// The largest cost `m <= capacity` that fits at `t`, by binary search on the cost.
pub(crate) fn largest_fit(model: &dyn Model, t: u64, capacity: u32) -> u32 {
    let (mut lo, mut hi) = (0u32, capacity);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if model.fits(t, mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

/// Token bucket as a debt: every admission of cost `n` adds `n·T` ns of debt, which
/// drains one ns per elapsed ns; a request fits iff the debt it leaves is at most
/// `burst·T`.
pub(crate) struct DebtBucket {
    interval: u128,
    burst: u128,
    debt: u128,
    last: u64,
    leaky: bool,
}

impl DebtBucket {
    pub(crate) fn new(q: Quota, leaky: bool) -> Self {
        DebtBucket {
            // T rounded up, as the engine does (it never exceeds the limit).
            interval: u128::from(ns(q.period()).div_ceil(u64::from(q.limit()))),
            burst: u128::from(q.burst()),
            debt: 0,
            last: 0,
            leaky,
        }
    }

    fn debt_at(&self, t: u64) -> u128 {
        self.debt.saturating_sub(u128::from(t - self.last))
    }
}

impl Model for DebtBucket {
    fn fits(&self, t: u64, n: u32) -> bool {
        self.debt_at(t) + u128::from(n) * self.interval <= self.burst * self.interval
    }
    fn admit(&mut self, t: u64, n: u32) {
        self.debt = self.debt_at(t) + u128::from(n) * self.interval;
        self.last = t;
    }
    fn delay(&self, t: u64) -> u64 {
        if self.leaky {
            u64::try_from(self.debt_at(t)).unwrap()
        } else {
            0
        }
    }
    fn max_wait(&self) -> u64 {
        u64::try_from(self.debt + 1).unwrap()
    }
}

/// Fixed window as a map from window number to admitted count.
pub(crate) struct WindowMap {
    period: u64,
    limit: u32,
    counts: HashMap<u64, u32>,
}

impl WindowMap {
    pub(crate) fn new(q: Quota) -> Self {
        WindowMap {
            period: ns(q.period()),
            limit: q.limit(),
            counts: HashMap::new(),
        }
    }
    fn count(&self, window: u64) -> u32 {
        self.counts.get(&window).copied().unwrap_or(0)
    }
}

impl Model for WindowMap {
    fn fits(&self, t: u64, n: u32) -> bool {
        u64::from(self.count(t / self.period)) + u64::from(n) <= u64::from(self.limit)
    }
    fn admit(&mut self, t: u64, n: u32) {
        if n > 0 {
            *self.counts.entry(t / self.period).or_insert(0) += n;
        }
    }
    fn max_wait(&self) -> u64 {
        self.period + 1
    }
}

/// Sliding window counter over a map of window counts, in exact `u128` arithmetic:
/// at `t` in window `k`, `e = t − k·P` into it, a request of cost `n` fits iff
/// `count(k−1)·(P − e) + (count(k) + n)·P <= limit·P`.
pub(crate) struct SlidingMap(pub(crate) WindowMap);

impl Model for SlidingMap {
    fn fits(&self, t: u64, n: u32) -> bool {
        let w = &self.0;
        let p = u128::from(w.period);
        let k = t / w.period;
        let e = u128::from(t % w.period);
        let prev = if k == 0 { 0 } else { w.count(k - 1) };
        let curr = w.count(k);
        u128::from(prev) * (p - e) + (u128::from(curr) + u128::from(n)) * p
            <= u128::from(w.limit) * p
    }
    fn admit(&mut self, t: u64, n: u32) {
        self.0.admit(t, n);
    }
    fn max_wait(&self) -> u64 {
        2 * self.0.period + 1
    }
}

/// Sliding log as the list of every admitted timestamp (one entry per unit of cost),
/// counted over `(t − P, t]`.
pub(crate) struct TimestampLog {
    period: u64,
    limit: u32,
    admitted: Vec<u64>,
}

impl TimestampLog {
    pub(crate) fn new(q: Quota) -> Self {
        TimestampLog {
            period: ns(q.period()),
            limit: q.limit(),
            admitted: Vec::new(),
        }
    }
    fn in_window(&self, t: u64) -> u32 {
        let n = self
            .admitted
            .iter()
            .filter(|&&a| a <= t && a + self.period > t)
            .count();
        u32::try_from(n).unwrap()
    }
}

impl Model for TimestampLog {
    fn fits(&self, t: u64, n: u32) -> bool {
        self.in_window(t) + n <= self.limit
    }
    fn admit(&mut self, t: u64, n: u32) {
        // Time never goes backwards in these schedules: forget what can never count again.
        let period = self.period;
        self.admitted.retain(|&a| a + period > t);
        let len = self.admitted.len() + n as usize;
        self.admitted.resize(len, t);
    }
    fn max_wait(&self) -> u64 {
        self.period + 1
    }
}

pub(crate) fn model_for(algorithm: Algorithm, q: Quota) -> Box<dyn Model> {
    match algorithm {
        Algorithm::TokenBucket => Box::new(DebtBucket::new(q, false)),
        Algorithm::LeakyBucket => Box::new(DebtBucket::new(q, true)),
        Algorithm::FixedWindow => Box::new(WindowMap::new(q)),
        Algorithm::SlidingWindow => Box::new(SlidingMap(WindowMap::new(q))),
        Algorithm::SlidingLog => Box::new(TimestampLog::new(q)),
    }
}

/// What runs at a [`Hooked`] clock's next reading.
type Hook = Box<dyn FnOnce() + Send>;

/// A clock fixed at one reading that runs a hook (once) when it is next read: a way
/// to put another call between two steps of one verb (a booking and its roll-back).
#[derive(Clone)]
pub(crate) struct Hooked {
    at: u64,
    hook: std::sync::Arc<std::sync::Mutex<Option<Hook>>>,
}

impl Hooked {
    /// A clock that always reads `at`.
    pub(crate) fn new(at: u64) -> Self {
        Hooked {
            at,
            hook: Default::default(),
        }
    }

    /// Runs `f` at the next reading.
    pub(crate) fn on_next_read(&self, f: impl FnOnce() + Send + 'static) {
        *self.hook.lock().unwrap() = Some(Box::new(f));
    }

    /// Whether the hook has run (or was never set).
    pub(crate) fn ran(&self) -> bool {
        self.hook.lock().unwrap().is_none()
    }
}

impl tollgate::Clock for Hooked {
    fn now(&self) -> u64 {
        let hook = self.hook.lock().unwrap().take();
        if let Some(f) = hook {
            f();
        }
        self.at
    }
}
