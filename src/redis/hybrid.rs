//! The hybrid mode: local decisions, counts shared through Redis in the background.

use super::{
    bounded, lock, Connection, Error, Target, TimeSource, DEFAULT_PREFIX, DEFAULT_TIMEOUT,
};
use crate::algorithm::fixed_window::FixedWindow;
use crate::algorithm::sliding_window::SlidingWindow;
use crate::algorithm::{PackedParams, Params};
use crate::{Algorithm, Clock, Decision, InsufficientCapacity, Quota};
use crossbeam_utils::CachePadded;
use redis::aio::ConnectionLike;
use redis::Script;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::task::JoinHandle;

const SYNC_SCRIPT: &str = include_str!("scripts/hybrid_sync.lua");

/// The most keys one sync sends in one go (one pipeline, or on a cluster one batch of
/// per-slot pipelines): about 17-25 ms of Redis time at the measured 8.5-12 µs per
/// key, well within the default 100 ms timeout. Larger syncs send chunks in sequence.
const SYNC_CHUNK: usize = 2_000;

/// The most keys one sync script call handles: a call is atomic, so this bounds how
/// long a sync holds Redis at once (about 1 ms at the measured cost per key), while
/// amortizing the per-call overhead over many keys.
const SCRIPT_BATCH: usize = 100;

/// Extra TTL on the window counters, for clock skew between instances.
const TTL_GRACE_MS: u64 = 1000;

fn sync_script() -> &'static Script {
    static SCRIPT: OnceLock<Script> = OnceLock::new();
    SCRIPT.get_or_init(|| Script::new(SYNC_SCRIPT))
}

/// Counters of a [`HybridRateLimiter`] (all its clones together).
///
/// # Example
///
/// ```
/// let s = tollgate::redis::HybridStats::default();
/// assert_eq!(s.round_trips, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HybridStats {
    /// Decisions made (all local).
    pub decisions: u64,
    /// Redis round trips made by syncs (one per sync with keys to share and per 2,000 of
    /// its keys; on Redis Cluster one per hash slot among them).
    pub round_trips: u64,
    /// Syncs that failed; their counts are kept and sent with the next sync.
    pub sync_errors: u64,
    /// Decisions denied because the key table was full (see
    /// [`max_keys`](HybridRateLimiterBuilder::max_keys)).
    pub untracked: u64,
    /// Keys tracked now.
    pub keys: u64,
    /// The longest time between two successful syncs so far, in nanoseconds.
    pub max_sync_gap_ns: u64,
}

/// One window's counts as this instance sees them.
///
/// Redis keeps, per key and window, one field per instance holding that instance's
/// *cumulative* admissions in the window. A sync sets our field to `own` (never adds),
/// so a sync retried after a lost reply counts nothing twice.
#[derive(Clone, Copy, Debug, Default)]
struct Win {
    /// The global count read back at the last sync: every instance's field summed,
    /// ours as `own_synced`.
    global: u64,
    /// Our cumulative admissions in this window.
    own: u64,
    /// Our cumulative count as included in `global`.
    own_synced: u64,
}

impl Win {
    /// The global count as this instance sees it: the last global count with our own
    /// admissions since then.
    fn estimate(&self) -> u64 {
        self.global.saturating_sub(self.own_synced) + self.own
    }

    /// What a sync writes for this window: our count, or -1 when we never admitted
    /// anything in it (read only, so no empty hash is created).
    fn to_send(self) -> i64 {
        if self.own == 0 {
            -1
        } else {
            i64::try_from(self.own).unwrap_or(i64::MAX)
        }
    }
}

/// A key's windows `k − 1` and `k`.
#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    k: u64,
    w: [Win; 2],
    /// Decided since the last sync collected it: its global counts are worth reading.
    touched: bool,
}

impl Entry {
    /// Whether the next sync must include this key: it has admissions Redis has not
    /// confirmed, or it was used since the last sync (so others' counts matter).
    fn dirty(&self) -> bool {
        self.touched || self.w.iter().any(|w| w.own != w.own_synced)
    }
}

impl Entry {
    /// Moves the entry to window `k_now` (never backwards); returns the window decided in.
    fn roll(&mut self, k_now: u64) -> u64 {
        if k_now > self.k {
            if k_now == self.k + 1 {
                self.w = [self.w[1], Win::default()];
            } else {
                self.w = [Win::default(); 2];
            }
            self.k = k_now;
        }
        self.k
    }
}

/// Keys are `Arc<str>` so that a sync takes them out of the table without allocating
/// under the shard's lock.
type Table = HashMap<Arc<str>, Entry, ahash::RandomState>;

/// One shard of the key table, on its own cache lines.
struct Shard {
    table: Mutex<Table>,
    decisions: AtomicU64,
}

/// A distributed limiter that decides locally, at in-memory speed, and shares its
/// counts through Redis in the background (FixedWindow and SlidingWindow).
///
/// Each instance counts its own admissions per key and window. Redis keeps, per key
/// and window, a hash with one field per instance: that instance's *cumulative*
/// admissions in the window. A background task, every sync interval `I`, sets this
/// instance's fields for the keys that changed or were used since the last sync and
/// reads back their global counts (the fields summed), in one pipelined round trip
/// per 2,000 keys (one atomic script per key; the hash's TTL is set with every write). Setting a
/// cumulative count is idempotent: a sync whose reply was lost (a timeout while Redis
/// still ran it) is simply sent again, and nothing is counted twice. Keys neither used
/// nor changed since the last sync cost nothing, so a sync costs what changed, not
/// what is tracked. A decision compares the last global count plus this instance's
/// admissions since then with the limit; it never waits on the network.
///
/// # Overshoot bound
///
/// With `N` instances, each receiving at most `r` requests per second for a key, sync
/// interval `I` and Redis round-trip time `d`, the global count of one window exceeds
/// the limit by at most `3·N·r·(I + d)`: an instance's view of a tracked key misses at
/// most the last `2·(I + d)` of the others' admissions, and a key an instance has not
/// seen before (or has not used since its last sync) is decided with no (or an old)
/// global count for up to `I + d`, until the next sync reads it. Failed syncs widen
/// `I` to the time between two successful ones ([`HybridStats::max_sync_gap_ns`]). (For `FixedWindow`
/// the excess is also never more than `(N − 1)·limit`, since no instance alone admits
/// more than the limit.) A sync sends its keys in chunks of 2,000 (each chunk one
/// round trip within the timeout; on Redis Cluster one pipeline per hash slot in the
/// chunk, sent together; 100 keys per script call), so `d` is the whole sync's
/// duration: measured at 8.5-12 µs of Redis time per key sent, a sync of 100,000
/// tracked keys of which 1% were used takes about 9 ms of Redis time, all 100,000
/// about 0.85 s. Redis round trips per decision
/// are at most `1 / (r·I)` per instance and chunk. Windows are aligned to the Unix epoch and
/// instances' clocks must agree to well within a window.
///
/// If Redis is unavailable, decisions continue locally; the cumulative counts go with
/// the next successful sync ([`HybridStats::sync_errors`] counts failures), which also
/// restores counts a restarted Redis lost.
///
/// The number of tracked keys is bounded ([`max_keys`](HybridRateLimiterBuilder::max_keys)):
/// keys idle for a window (two for `SlidingWindow`) are dropped at each sync, and while
/// the table is full a new key is denied (counted in [`HybridStats::untracked`]). From
/// 4096 keys up the table has 16 shards (one lock each) of `max_keys / 16` keys, and a
/// new key is denied when its shard is full.
///
/// # Example
///
/// ```no_run
/// use std::time::Duration;
/// use tollgate::redis::HybridRateLimiter;
/// use tollgate::{Algorithm, Quota};
///
/// # async fn run() -> Result<(), tollgate::redis::Error> {
/// let limiter = HybridRateLimiter::builder(Algorithm::SlidingWindow, Quota::per_minute(6000))
///     .url("redis://127.0.0.1:6379")
///     .sync_interval(Duration::from_millis(50))
///     .build()
///     .await?;
/// let d = limiter.check("tenant-3"); // no await: decided locally
/// # let _ = d;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct HybridRateLimiter {
    inner: Arc<Inner>,
}

struct Inner {
    algorithm: Algorithm,
    quota: Quota,
    limit: u32,
    period_ns: u64,
    /// The local engine's window arithmetic, run on this instance's view of the
    /// global counts.
    window: Window,
    prefix: String,
    timeout: Duration,
    conn: Connection,
    time: TimeSource,
    /// The key table, sharded by key hash so that threads rarely share a lock.
    shards: Box<[CachePadded<Shard>]>,
    hasher: ahash::RandomState,
    /// Keys per shard.
    shard_cap: usize,
    sync_lock: tokio::sync::Mutex<()>,
    /// This instance's field name in the per-window hashes: random per limiter.
    instance: String,
    round_trips: AtomicU64,
    sync_errors: AtomicU64,
    untracked: AtomicU64,
    max_gap: AtomicU64,
    last_sync: AtomicU64,
    epoch: Instant,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(task) = lock(&self.task).take() {
            task.abort();
        }
    }
}

/// The window algorithm a hybrid limiter runs.
#[derive(Clone, Copy, Debug)]
enum Window {
    Fixed(FixedWindow),
    Sliding(SlidingWindow),
}

/// One key's share of a sync: the cumulative counts sent, for which window.
struct Sent {
    key: Arc<str>,
    k: u64,
    own: [u64; 2],
    send: [i64; 2],
}

impl HybridRateLimiter {
    /// Starts building a hybrid limiter running `algorithm` (`FixedWindow` or
    /// `SlidingWindow`) on `quota`.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::redis::HybridRateLimiter;
    /// use tollgate::{Algorithm, Quota};
    ///
    /// let b = HybridRateLimiter::builder(Algorithm::FixedWindow, Quota::per_second(1000))
    ///     .url("redis://127.0.0.1:6379");
    /// # let _ = b;
    /// ```
    pub fn builder(algorithm: Algorithm, quota: Quota) -> HybridRateLimiterBuilder {
        HybridRateLimiterBuilder {
            algorithm,
            quota,
            target: Target::None,
            prefix: DEFAULT_PREFIX.to_owned(),
            timeout: DEFAULT_TIMEOUT,
            interval: Duration::from_millis(100),
            max_keys: 100_000,
            time: TimeSource::Server,
        }
    }

    /// Decides one request of cost 1 for `key`, locally.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn run(limiter: tollgate::redis::HybridRateLimiter) {
    /// if limiter.check("10.1.2.3").is_allowed() { /* serve */ }
    /// # }
    /// ```
    pub fn check(&self, key: &str) -> Decision {
        self.inner.decide(key, 1)
    }

    /// Decides one request of cost `n` for `key`, locally.
    ///
    /// # Errors
    ///
    /// [`InsufficientCapacity`] when `n` exceeds the limit.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn run(limiter: tollgate::redis::HybridRateLimiter) -> Result<(), tollgate::InsufficientCapacity> {
    /// let d = limiter.check_n("batch", 10)?;
    /// # let _ = d;
    /// # Ok(())
    /// # }
    /// ```
    pub fn check_n(&self, key: &str, n: u32) -> Result<Decision, InsufficientCapacity> {
        let capacity = self.inner.limit;
        if n > capacity {
            return Err(InsufficientCapacity {
                requested: n,
                capacity,
            });
        }
        Ok(self.inner.decide(key, n))
    }

    /// Syncs now (what the background task does every interval): sends the unsent
    /// counts and reads back the global ones. Returns the number of keys synced.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`], [`Error::Timeout`] or [`Error::BadReply`]; the unsent counts
    /// are then kept for the next sync.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn run(limiter: tollgate::redis::HybridRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// limiter.sync().await?; // e.g. before shutting down
    /// # Ok(())
    /// # }
    /// ```
    pub async fn sync(&self) -> Result<usize, Error> {
        self.inner.sync().await
    }

    /// The counters of this limiter and its clones.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn run(limiter: tollgate::redis::HybridRateLimiter) {
    /// let s = limiter.stats();
    /// println!("{} round trips for {} decisions", s.round_trips, s.decisions);
    /// # }
    /// ```
    #[must_use]
    pub fn stats(&self) -> HybridStats {
        let i = &self.inner;
        HybridStats {
            decisions: i
                .shards
                .iter()
                .map(|s| s.decisions.load(Ordering::Relaxed))
                .sum(),
            round_trips: i.round_trips.load(Ordering::Relaxed),
            sync_errors: i.sync_errors.load(Ordering::Relaxed),
            untracked: i.untracked.load(Ordering::Relaxed),
            keys: i.shards.iter().map(|s| lock(&s.table).len() as u64).sum(),
            max_sync_gap_ns: i.max_gap.load(Ordering::Relaxed),
        }
    }

    /// The algorithm this limiter runs.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn run(limiter: tollgate::redis::HybridRateLimiter) {
    /// println!("{:?}", limiter.algorithm());
    /// # }
    /// ```
    #[must_use]
    pub fn algorithm(&self) -> Algorithm {
        self.inner.algorithm
    }

    /// The quota this limiter enforces.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn run(limiter: tollgate::redis::HybridRateLimiter) {
    /// println!("{:?}", limiter.quota());
    /// # }
    /// ```
    #[must_use]
    pub fn quota(&self) -> Quota {
        self.inner.quota
    }
}

impl fmt::Debug for HybridRateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HybridRateLimiter")
            .field("algorithm", &self.inner.algorithm)
            .field("quota", &self.inner.quota)
            .field("prefix", &self.inner.prefix)
            .finish_non_exhaustive()
    }
}

impl Inner {
    fn now_ns(&self) -> u64 {
        match &self.time {
            TimeSource::Server => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
            TimeSource::Caller(f) => f(),
        }
    }

    fn shard(&self, key: &str) -> &Shard {
        // The shard count is a power of two.
        let h = self.hasher.hash_one(key) as usize;
        &self.shards[h & (self.shards.len() - 1)]
    }

    fn redis_key(&self, key: &str, k: u64) -> String {
        format!("{}:{{{key}}}:{k}", self.prefix)
    }

    fn decide(&self, key: &str, n: u32) -> Decision {
        let t = self.now_ns();
        let p = self.period_ns;
        let k_now = t / p;
        let shard = self.shard(key);
        shard.decisions.fetch_add(1, Ordering::Relaxed);
        let mut table = lock(&shard.table);
        if !table.contains_key(key) {
            if table.len() >= self.shard_cap {
                drop(table);
                self.untracked.fetch_add(1, Ordering::Relaxed);
                let wait = p - t % p;
                return Decision::deny(self.limit, 0, wait, wait);
            }
            table.insert(
                key.into(),
                Entry {
                    k: k_now,
                    w: [Win::default(); 2],
                    touched: false,
                },
            );
        }
        let Some(entry) = table.get_mut(key) else {
            unreachable!("inserted above under the same lock")
        };
        let k = entry.roll(k_now);
        let curr = entry.w[1].estimate();
        let d = match &self.window {
            Window::Fixed(f) => f.decide(k, curr, t, n),
            Window::Sliding(s) => s.decide(&s.at(k, t, entry.w[0].estimate(), curr), t, n),
        };
        if d.is_allowed() {
            entry.w[1].own += u64::from(n);
        }
        entry.touched = true;
        d
    }

    /// Whether the previous window's count still matters.
    fn sliding(&self) -> bool {
        matches!(self.window, Window::Sliding(_))
    }

    /// One sync: sends the cumulative counts of every key that changed or was used
    /// since the last sync, and reads back their global counts, in one pipelined round
    /// trip per chunk of keys. Keys neither used nor changed cost nothing. Shard locks are held only to
    /// collect and to apply (no network I/O, no allocation per key under them).
    async fn sync(&self) -> Result<usize, Error> {
        let _one_at_a_time = self.sync_lock.lock().await;
        let t = self.now_ns();
        let k_now = t / self.period_ns;
        let keep = if self.sliding() { 2 } else { 1 };
        let mut sent: Vec<Sent> = Vec::new();
        for shard in self.shards.iter() {
            let mut table = lock(&shard.table);
            table.retain(|_, e| e.k + keep > k_now);
            for (key, e) in table.iter_mut() {
                if !e.dirty() {
                    continue;
                }
                e.touched = false;
                sent.push(Sent {
                    key: Arc::clone(key),
                    k: e.k,
                    own: [e.w[0].own, e.w[1].own],
                    send: [e.w[0].to_send(), e.w[1].to_send()],
                });
            }
        }
        if sent.is_empty() {
            self.note_sync();
            return Ok(0);
        }
        // Chunks go one after another, each within the timeout, so that a large sync
        // makes progress instead of timing out whole (and again at every later sync);
        // after a failed chunk the rest wait for the next sync (still dirty) rather
        // than each costing a timeout.
        let mut first_error = None;
        for start in (0..sent.len()).step_by(SYNC_CHUNK) {
            let chunk = start..(start + SYNC_CHUNK).min(sent.len());
            if first_error.is_some() {
                self.retouch(&sent[chunk]);
                continue;
            }
            if let Err(err) = self.sync_chunk(t, &sent, chunk).await {
                first_error.get_or_insert(err);
            }
        }
        match first_error {
            None => {
                self.note_sync();
                Ok(sent.len())
            }
            Some(err) => {
                self.sync_errors.fetch_add(1, Ordering::Relaxed);
                Err(err)
            }
        }
    }

    /// Sends the keys `sent[chunk]` and takes in their global counts: one pipeline on a
    /// single Redis; on a cluster, where a pipeline must stay within one hash slot, one
    /// per slot, all sent concurrently. Keys of a failed pipeline stay dirty.
    async fn sync_chunk(
        &self,
        t: u64,
        sent: &[Sent],
        chunk: std::ops::Range<usize>,
    ) -> Result<(), Error> {
        let groups: Vec<Vec<usize>> = if self.conn.is_cluster() {
            let mut by_slot: HashMap<u16, Vec<usize>> = HashMap::new();
            for i in chunk {
                let s = &sent[i];
                let slot = super::hash_slot(self.redis_key(&s.key, s.k).as_bytes());
                by_slot.entry(slot).or_default().push(i);
            }
            by_slot.into_values().collect()
        } else {
            vec![chunk.collect()]
        };
        let mut first_error = None;
        let mut calls = tokio::task::JoinSet::new();
        for (g, members) in groups.iter().enumerate() {
            let batch: Vec<&Sent> = members.iter().map(|&i| &sent[i]).collect();
            let pipe = self.sync_pipeline(t, &batch);
            let mut conn = self.conn.clone();
            let timeout = self.timeout;
            calls.spawn(async move {
                // One flat reply per script call: both windows' counts of each key.
                let reply: Result<Vec<Vec<u64>>, Error> =
                    bounded(timeout, pipe.query_async(&mut conn)).await;
                (g, reply.map(|r| r.concat()))
            });
        }
        self.round_trips
            .fetch_add(groups.len() as u64, Ordering::Relaxed);
        while let Some(joined) = calls.join_next().await {
            let (g, reply) = match joined {
                Ok(r) => r,
                Err(e) => {
                    // A panicked or cancelled call: its keys stay dirty (below).
                    first_error.get_or_insert(Error::BadReply(e.to_string()));
                    continue;
                }
            };
            let members = &groups[g];
            let reply = reply.and_then(|r| {
                if r.len() == 2 * members.len() {
                    Ok(r)
                } else {
                    Err(Error::BadReply(format!(
                        "{} counts for {} keys",
                        r.len(),
                        members.len()
                    )))
                }
            });
            match reply {
                Ok(globals) => {
                    for (&i, g) in members.iter().zip(globals.chunks_exact(2)) {
                        self.apply(&sent[i], g[0], g[1]);
                    }
                }
                Err(err) => {
                    // Nothing to give back: the next sync sends the cumulative counts
                    // again (still unconfirmed, so still dirty) and reads these keys.
                    for &i in members {
                        self.retouch(std::slice::from_ref(&sent[i]));
                    }
                    first_error.get_or_insert(err);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Marks keys whose sync failed as used, so that the next sync reads them again.
    fn retouch(&self, sent: &[Sent]) {
        for s in sent {
            if let Some(e) = lock(&self.shard(&s.key).table).get_mut(&s.key) {
                e.touched = true;
            }
        }
    }

    /// The pipeline for some keys of a sync taken at `t`: the script loaded first (so
    /// every `EVALSHA` succeeds, even right after a restart), then one call per key.
    fn sync_pipeline(&self, t: u64, keys: &[&Sent]) -> redis::Pipeline {
        let script = sync_script();
        let mut pipe = redis::pipe();
        pipe.cmd("SCRIPT").arg("LOAD").arg(SYNC_SCRIPT).ignore();
        // The idle time of window j ends at (j + 2)·P (it is still "previous" in j + 1).
        let ttl = |j: u64| {
            let end = (j + 2).saturating_mul(self.period_ns);
            end.saturating_sub(t).div_ceil(1_000_000).max(1) + TTL_GRACE_MS
        };
        for batch in keys.chunks(SCRIPT_BATCH) {
            let call = pipe
                .cmd("EVALSHA")
                .arg(script.get_hash())
                .arg(2 * batch.len());
            for s in batch {
                call.arg(self.redis_key(&s.key, s.k.saturating_sub(1)))
                    .arg(self.redis_key(&s.key, s.k));
            }
            call.arg(&self.instance);
            for s in batch {
                // Window k − 1 does not exist before window 1.
                call.arg(if s.k == 0 { -1 } else { s.send[0] })
                    .arg(s.send[1])
                    .arg(ttl(s.k.saturating_sub(1)))
                    .arg(ttl(s.k));
            }
        }
        pipe
    }

    /// Takes in one key's global counts read back by a sync.
    fn apply(&self, s: &Sent, g_prev: u64, g_curr: u64) {
        let mut table = lock(&self.shard(&s.key).table);
        let Some(e) = table.get_mut(&s.key) else {
            return;
        };
        if e.k == s.k {
            if s.k > 0 {
                e.w[0].global = g_prev;
                e.w[0].own_synced = s.own[0];
            }
            e.w[1].global = g_curr;
            e.w[1].own_synced = s.own[1];
        } else if e.k == s.k + 1 {
            e.w[0].global = g_curr;
            e.w[0].own_synced = s.own[1];
        }
    }

    fn note_sync(&self) {
        let now = self.epoch.elapsed().as_nanos() as u64;
        let last = self.last_sync.swap(now, Ordering::Relaxed);
        if last != 0 {
            self.max_gap
                .fetch_max(now - last.min(now), Ordering::Relaxed);
        }
    }
}

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
    algorithm: Algorithm,
    quota: Quota,
    target: Target,
    prefix: String,
    timeout: Duration,
    interval: Duration,
    max_keys: usize,
    time: TimeSource,
}

impl HybridRateLimiterBuilder {
    /// Connects to the Redis at `url` when built.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{redis::HybridRateLimiter, Algorithm, Quota};
    /// let b = HybridRateLimiter::builder(Algorithm::FixedWindow, Quota::per_second(5))
    ///     .url("redis://127.0.0.1:6379");
    /// # let _ = b;
    /// ```
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.target = Target::Url(url.into());
        self
    }

    /// Uses an existing connection (a `ConnectionManager` or `MultiplexedConnection`;
    /// a sync pipelines keys of many slots, so a Cluster connection is not supported).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # use tollgate::{redis::HybridRateLimiter, Algorithm, Quota};
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = tollgate::redis::redis::Client::open("redis://127.0.0.1:6379")?;
    /// let b = HybridRateLimiter::builder(Algorithm::FixedWindow, Quota::per_second(5))
    ///     .connection(client.get_connection_manager().await?);
    /// # let _ = b;
    /// # Ok(())
    /// # }
    /// ```
    pub fn connection<C>(mut self, connection: C) -> Self
    where
        C: ConnectionLike + Clone + Send + Sync + 'static,
    {
        self.target = Target::Connection(Connection::new(connection));
        self
    }

    /// Prefixes every Redis key (default `tollgate`); one prefix per limiter.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{redis::HybridRateLimiter, Algorithm, Quota};
    /// let b = HybridRateLimiter::builder(Algorithm::FixedWindow, Quota::per_second(5))
    ///     .prefix("h:upload");
    /// # let _ = b;
    /// ```
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Bounds each sync's round trip and connecting (default 100 ms).
    ///
    /// # Example
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::{redis::HybridRateLimiter, Algorithm, Quota};
    /// let b = HybridRateLimiter::builder(Algorithm::FixedWindow, Quota::per_second(5))
    ///     .timeout(Duration::from_millis(50));
    /// # let _ = b;
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

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

    /// The most keys tracked at once (default 100,000); while full, new keys are denied
    /// (from 4096 up: while the new key's shard, a sixteenth of the table, is full).
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
    /// not shorter than the period, or `max_keys` of 0; [`Error::NoTarget`],
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
        // The local engine's checks and arithmetic: the same ConfigError for the same
        // quota, the same decisions for the same counts.
        let window = match Params::new(self.algorithm, self.quota)? {
            Params::Packed(PackedParams::Fixed(f)) => Window::Fixed(f),
            Params::Packed(PackedParams::Sliding(s)) => Window::Sliding(s),
            _ => {
                return Err(Error::Unsupported(format!(
                    "the hybrid mode runs FixedWindow and SlidingWindow, not {:?}",
                    self.algorithm
                )))
            }
        };
        super::check_prefix(&self.prefix)?;
        let period_ns = crate::clock::duration_to_nanos(self.quota.period());
        if self.interval != Duration::MAX && self.interval >= self.quota.period() {
            return Err(Error::Unsupported(format!(
                "sync interval {:?} must be shorter than the period {:?}",
                self.interval,
                self.quota.period()
            )));
        }
        if self.interval.is_zero() || self.max_keys == 0 {
            return Err(Error::Unsupported(
                "sync interval and max_keys must be positive".into(),
            ));
        }
        // Decisions are local: Redis is optional at start, and syncs fail (counted in
        // the stats) until it can be reached.
        let conn = self.target.connect(self.timeout, true).await?;
        // Small tables keep one shard, so that their bound is exact.
        let shards = if self.max_keys >= 4096 { 16 } else { 1 };
        let inner = Arc::new(Inner {
            algorithm: self.algorithm,
            quota: self.quota,
            limit: self.quota.limit(),
            period_ns,
            window,
            prefix: self.prefix,
            timeout: self.timeout,
            conn,
            time: self.time,
            shards: (0..shards)
                .map(|_| {
                    CachePadded::new(Shard {
                        table: Mutex::new(HashMap::default()),
                        decisions: AtomicU64::new(0),
                    })
                })
                .collect(),
            hasher: ahash::RandomState::new(),
            shard_cap: self.max_keys.div_ceil(shards),
            sync_lock: tokio::sync::Mutex::new(()),
            instance: format!(
                "{:016x}",
                ahash::RandomState::new().hash_one(std::process::id())
            ),
            round_trips: AtomicU64::new(0),
            sync_errors: AtomicU64::new(0),
            untracked: AtomicU64::new(0),
            max_gap: AtomicU64::new(0),
            last_sync: AtomicU64::new(0),
            epoch: Instant::now(),
            task: Mutex::new(None),
        });
        if self.interval != Duration::MAX {
            let weak = Arc::downgrade(&inner);
            let task = tokio::spawn(run(weak, self.interval));
            *lock(&inner.task) = Some(task);
        }
        Ok(HybridRateLimiter { inner })
    }
}

/// The sync task: holds the limiter weakly, so dropping the last handle stops it.
async fn run(weak: Weak<Inner>, interval: Duration) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(inner) = weak.upgrade() else {
            return;
        };
        // Failures are counted in the stats and the counts retried next time.
        let _ = inner.sync().await;
    }
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
