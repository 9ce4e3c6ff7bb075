//! The limiters tollgate is measured against, all behind one trait so every workload
//! runs the same loop over each of them.
//!
//! Shared by `benches/decision.rs` and `examples/shootout.rs` (through `#[path]`).

#![allow(dead_code)]

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A token-bucket rate every peer is configured with: one token per `interval_ns`,
/// `burst` at most.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rate {
    pub(crate) interval_ns: u64,
    pub(crate) burst: u32,
}

impl Rate {
    /// Never denies at benchmark speeds: 1e9 per second, burst 1e9.
    pub(crate) const OPEN: Rate = Rate {
        interval_ns: 1,
        burst: 1_000_000_000,
    };
    /// One per hour: after the first decision per key, every decision is a denial.
    pub(crate) const SHUT: Rate = Rate {
        interval_ns: 3_600_000_000_000,
        burst: 1,
    };

    /// The same rate as a tollgate quota (`burst` per `burst × interval`).
    pub(crate) fn quota(self) -> tollgate::Quota {
        tollgate::Quota::new(self.burst, Duration::from_nanos(self.tau()))
    }

    fn tau(self) -> u64 {
        self.interval_ns * u64::from(self.burst)
    }

    fn governor(self) -> governor::Quota {
        governor::Quota::with_period(Duration::from_nanos(self.interval_ns))
            .expect("non-zero interval")
            .allow_burst(NonZeroU32::new(self.burst).expect("non-zero burst"))
    }
}

/// The benchmark rate as a tollgate quota for `algorithm`. The sliding log keeps one
/// timestamp per request of its limit, so the open rate runs it at a limit it is meant
/// for (64 per 64 ns: still never denying at these speeds). The packed windows refuse
/// limits their one-word layout cannot hold: the fixed window gets 2^20 per 1 ms (never
/// denying here), the sliding window its largest per-millisecond limit, 1,023 per 1 ms
/// (about 1M/s: on one hot key it denies most decisions, so that row is a denial path).
pub(crate) fn tollgate_quota(algorithm: tollgate::Algorithm, rate: Rate) -> tollgate::Quota {
    use tollgate::{Algorithm, Quota};
    match (algorithm, rate.burst > 1) {
        (Algorithm::SlidingLog, true) => Quota::new(64, Duration::from_nanos(64)),
        // The most a one-millisecond fixed window holds (its word keeps one bit to mark a
        // booking ahead).
        (Algorithm::FixedWindow, true) => Quota::new((1 << 20) - 1, Duration::from_millis(1)),
        (Algorithm::SlidingWindow, true) => Quota::new(1023, Duration::from_millis(1)),
        _ => rate.quota(),
    }
}

/// A short label for an algorithm in tables.
pub(crate) fn algorithm_name(a: tollgate::Algorithm) -> &'static str {
    match a {
        tollgate::Algorithm::TokenBucket => "token bucket",
        tollgate::Algorithm::LeakyBucket => "leaky bucket",
        tollgate::Algorithm::FixedWindow => "fixed window",
        tollgate::Algorithm::SlidingWindow => "sliding window",
        tollgate::Algorithm::SlidingLog => "sliding log",
    }
}

/// One decision for one u64 key; `true` when admitted.
pub(crate) trait Limiter: Sync {
    fn name(&self) -> String;
    fn check(&self, key: u64) -> bool;
    /// Bytes of memory the limiter reports for its keys, if it reports any.
    fn memory_bytes(&self) -> Option<usize> {
        None
    }
}

/// tollgate's single-key limiter (the key is ignored).
pub(crate) struct TollgateDirect(pub(crate) tollgate::RateLimiter, pub(crate) &'static str);

impl Limiter for TollgateDirect {
    fn name(&self) -> String {
        format!("tollgate direct {}", self.1)
    }
    #[inline]
    fn check(&self, _key: u64) -> bool {
        self.0.check().is_allowed()
    }
}

/// tollgate's keyed limiter.
pub(crate) struct TollgateKeyed<C: tollgate::Clock = tollgate::QuantaClock>(
    pub(crate) tollgate::KeyedRateLimiter<u64, C>,
    pub(crate) &'static str,
);

impl TollgateKeyed {
    /// A keyed token bucket at `rate` for `keys` keys, answering a full table by
    /// `on_full` (the new-key workloads' tollgate).
    pub(crate) fn token_bucket(
        rate: Rate,
        keys: usize,
        on_full: tollgate::OnFull,
        label: &'static str,
    ) -> Self {
        TollgateKeyed(
            tollgate::KeyedRateLimiter::<u64>::builder(
                tollgate::Algorithm::TokenBucket,
                rate.quota(),
            )
            .max_keys(keys)
            .on_full(on_full)
            .build()
            .expect("benchmark quota is valid"),
            label,
        )
    }
}

impl<C: tollgate::Clock> Limiter for TollgateKeyed<C> {
    fn name(&self) -> String {
        format!("tollgate {}", self.1)
    }
    #[inline]
    fn check(&self, key: u64) -> bool {
        self.0.check(&key).is_allowed()
    }
    fn memory_bytes(&self) -> Option<usize> {
        Some(self.0.memory_bytes())
    }
}

/// governor's direct (single-key) limiter.
pub(crate) struct GovernorDirect(pub governor::DefaultDirectRateLimiter);

impl GovernorDirect {
    pub(crate) fn new(rate: Rate) -> Self {
        GovernorDirect(governor::RateLimiter::direct(rate.governor()))
    }
}

impl Limiter for GovernorDirect {
    fn name(&self) -> String {
        "governor direct".into()
    }
    #[inline]
    fn check(&self, _key: u64) -> bool {
        self.0.check().is_ok()
    }
}

/// governor's keyed limiter (dashmap state store, quanta clock).
pub(crate) struct GovernorKeyed(pub(crate) governor::DefaultKeyedRateLimiter<u64>);

impl GovernorKeyed {
    pub(crate) fn new(rate: Rate) -> Self {
        GovernorKeyed(governor::RateLimiter::keyed(rate.governor()))
    }
}

impl Limiter for GovernorKeyed {
    fn name(&self) -> String {
        "governor keyed".into()
    }
    #[inline]
    fn check(&self, key: u64) -> bool {
        self.0.check_key(&key).is_ok()
    }
}

/// The token bucket the blog posts write: a global `Mutex<HashMap>` of f64 buckets.
pub(crate) struct MutexHashMap {
    rate_per_ns: f64,
    burst: f64,
    start: Instant,
    map: Mutex<HashMap<u64, (f64, u64)>>,
}

impl MutexHashMap {
    pub(crate) fn new(rate: Rate) -> Self {
        MutexHashMap {
            rate_per_ns: 1.0 / rate.interval_ns as f64,
            burst: f64::from(rate.burst),
            start: Instant::now(),
            map: Mutex::new(HashMap::new()),
        }
    }
}

impl Limiter for MutexHashMap {
    fn name(&self) -> String {
        "Mutex<HashMap> bucket".into()
    }
    #[inline]
    fn check(&self, key: u64) -> bool {
        let now = self.start.elapsed().as_nanos() as u64;
        let mut map = self.map.lock().unwrap();
        let (tokens, last) = map.entry(key).or_insert((self.burst, now));
        let elapsed = now.saturating_sub(*last) as f64;
        *tokens = (*tokens + elapsed * self.rate_per_ns).min(self.burst);
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The GCRA the hand-written peers share: one token per `t` ns, capacity `tau` ns, on
/// a quanta clock (as tollgate's default).
struct PeerGcra {
    t: u64,
    tau: u64,
    clock: quanta::Clock,
    start: u64,
}

impl PeerGcra {
    fn new(rate: Rate) -> Self {
        let clock = quanta::Clock::new();
        let start = clock.raw();
        PeerGcra {
            t: rate.interval_ns,
            tau: rate.tau(),
            clock,
            start,
        }
    }

    /// Nanoseconds since construction.
    #[inline]
    fn now(&self) -> u64 {
        self.clock.delta_as_nanos(self.start, self.clock.raw())
    }

    /// The new TAT for one request at `now`, or `None` when denied.
    #[inline]
    fn step(&self, tat: u64, now: u64) -> Option<u64> {
        let new_tat = tat.max(now) + self.t;
        (new_tat <= now + self.tau).then_some(new_tat)
    }

    /// One decision on an 8-byte TAT word: load, step, compare-and-swap.
    #[inline]
    fn decide(&self, cell: &AtomicU64, now: u64) -> bool {
        let mut cur = cell.load(Ordering::Acquire);
        loop {
            let Some(next) = self.step(cur, now) else {
                return false;
            };
            match cell.compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(a) => cur = a,
            }
        }
    }
}

/// `dashmap` of atomic GCRA words: shard read lock, then a CAS.
pub(crate) struct DashMapGcra {
    gcra: PeerGcra,
    map: dashmap::DashMap<u64, AtomicU64, ahash::RandomState>,
}

impl DashMapGcra {
    pub(crate) fn new(rate: Rate) -> Self {
        DashMapGcra {
            gcra: PeerGcra::new(rate),
            map: dashmap::DashMap::with_hasher(ahash::RandomState::new()),
        }
    }
}

impl Limiter for DashMapGcra {
    fn name(&self) -> String {
        "dashmap + atomic GCRA".into()
    }
    #[inline]
    fn check(&self, key: u64) -> bool {
        let now = self.gcra.now();
        if let Some(cell) = self.map.get(&key) {
            return self.gcra.decide(&cell, now);
        }
        let cell = self.map.entry(key).or_insert_with(|| AtomicU64::new(0));
        self.gcra.decide(&cell, now)
    }
}

/// A floor table: a power-of-two array of slots indexed by one ahash.
struct FloorTable<S> {
    gcra: PeerGcra,
    hasher: ahash::RandomState,
    mask: usize,
    slots: Box<[S]>,
}

impl<S> FloorTable<S> {
    /// Room for `keys` at half load.
    fn new(rate: Rate, keys: usize, slot: impl Fn() -> S) -> Self {
        let n = (keys * 2).next_power_of_two().max(64);
        FloorTable {
            gcra: PeerGcra::new(rate),
            hasher: ahash::RandomState::new(),
            mask: n - 1,
            slots: (0..n).map(|_| slot()).collect(),
        }
    }

    /// The key's fingerprint (never 0) and its one slot.
    #[inline]
    fn probe(&self, key: u64) -> (u64, &S) {
        let h = self.hasher.hash_one(key) | 1;
        (h, &self.slots[h as usize & self.mask])
    }

    fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.slots)
    }
}

/// The floor: a power-of-two table of 16-byte slots (fingerprint, GCRA state), one
/// ahash, one probe, one 8-byte CAS of the state per decision, no eviction, no stats,
/// no collision handling beyond claiming an empty slot. Nothing real can be cheaper,
/// so the distance to it is the price of tollgate's guarantees.
pub(crate) struct Floor(FloorTable<(AtomicU64, AtomicU64)>);

impl Floor {
    pub(crate) fn new(rate: Rate, keys: usize) -> Self {
        Floor(FloorTable::new(rate, keys, || {
            (AtomicU64::new(0), AtomicU64::new(0))
        }))
    }
}

impl Limiter for Floor {
    fn name(&self) -> String {
        "floor, 8-byte CAS".into()
    }
    #[inline]
    fn check(&self, key: u64) -> bool {
        let (h, (fp, state)) = self.0.probe(key);
        if fp.load(Ordering::Relaxed) != h {
            fp.store(h, Ordering::Relaxed);
        }
        self.0.gcra.decide(state, self.0.gcra.now())
    }
    fn memory_bytes(&self) -> Option<usize> {
        Some(self.0.memory_bytes())
    }
}

/// The floor with the slot as one 16-byte word (fingerprint and state compared and
/// swapped together, as tollgate's slot is, which is what makes slot reuse ABA-free):
/// one ahash, one probe, one 16-byte load and one 16-byte CAS.
pub(crate) struct Floor128(FloorTable<portable_atomic::AtomicU128>);

impl Floor128 {
    pub(crate) fn new(rate: Rate, keys: usize) -> Self {
        Floor128(FloorTable::new(rate, keys, || {
            portable_atomic::AtomicU128::new(0)
        }))
    }
}

impl Limiter for Floor128 {
    fn name(&self) -> String {
        "floor, 16-byte CAS".into()
    }
    #[inline]
    fn check(&self, key: u64) -> bool {
        let (h, slot) = self.0.probe(key);
        let now = self.0.gcra.now();
        let mut cur = slot.load(Ordering::Acquire);
        loop {
            let tat = if (cur >> 64) as u64 == h {
                cur as u64
            } else {
                0
            };
            let Some(next) = self.0.gcra.step(tat, now) else {
                return false;
            };
            let word = (u128::from(h) << 64) | u128::from(next);
            match slot.compare_exchange(cur, word, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(a) => cur = a,
            }
        }
    }
    fn memory_bytes(&self) -> Option<usize> {
        Some(self.0.memory_bytes())
    }
}

/// Resident set size of this process, in bytes (Linux), to measure peers' growth.
pub(crate) fn resident_bytes() -> Option<usize> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}
