//! # Keyed tables and memory
//!
//! `KeyedRateLimiter<K>` keeps one limiter state per key in a table whose memory is fixed
//! when you build it: a flood of new keys (attackers inventing user ids, spoofed
//! addresses) can neither grow it nor, unless you choose so, make it forget a throttled key.
//! There is no background thread: expired state is reclaimed on the insert path.
//!
//! ```rust
//! use std::net::IpAddr;
//! use tollgate::{Algorithm, KeyedRateLimiter, OnFull, Quota};
//!
//! fn main() -> Result<(), tollgate::ConfigError> {
//!     let limiter = KeyedRateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(10).with_burst(20))
//!         .max_keys(1 << 20)          // room for 1,048,576 active keys; memory fixed here
//!         .on_full(OnFull::Deny)      // Evict (default) | Deny | Allow
//!         .build()?;                  // KeyedRateLimiter<IpAddr>, K inferred from use
//!     println!("{} bytes for {} keys", limiter.memory_bytes(), limiter.max_keys());
//!
//!     let ip: IpAddr = "203.0.113.7".parse().unwrap();
//!     let decision = limiter.check(&ip);
//!     if !decision.is_allowed() {
//!         println!("429 Too Many Requests, retry in {:?}", decision.retry_after());
//!     }
//!
//!     let before = limiter.memory_bytes();
//!     for user in 0..100_000u32 {
//!         let _ = limiter.check(&IpAddr::from(user.to_be_bytes()));
//!     }
//!     assert_eq!(limiter.memory_bytes(), before); // never changes after build
//!     let stats = limiter.stats(); // allowed, rejected, evictions, idle_reclaims, untracked, ...
//!     println!("{} allowed, {} keys held", stats.allowed, stats.occupied);
//!     Ok(())
//! }
//! ```
//!
//! Keys can be anything `Hash`: `u64`, `str`, `[u8]`, `IpAddr`, tuples, your own types
//! (`KeyedRateLimiter::<str>::builder(..)` for unsized keys). All five algorithms work.
//!
//! ## Keys, idle reclaim and memory
//!
//! `max_keys(n)` means *n keys whose state still says something* (the old name
//! `capacity(n)` still works, deprecated: it was easy to confuse with a key's burst, now
//! `burst()`). `memory_bytes()` on the builder says what `build()` will allocate before it
//! does. An entry whose state says
//! nothing any more (a bucket full again, its windows over, its log empty) is **idle**: it
//! decides exactly as a fresh key would, so its slot is silently reused by the next new key
//! (counted in `stats().idle_reclaims`, not as an eviction). A limiter built for 16,384
//! keys serves millions of distinct keys over time, as long as about 16,384 are active at
//! once.
//!
//! The table allocates 1.48 slots per key. Each key may live in either of two
//! groups of 12 slots (three cache lines each) chosen by its hash; it probes them
//! interleaved, each from its own hash-chosen start offset, and takes the first empty slot
//! of that order, which tends to lie in the less loaded group. A lookup finds its key in
//! 1.7 probes on average (measured at 1,000 keys in a table built for 1,000). Measured
//! with exactly `n` live keys (`cargo test --release --test keyed_flood -- --nocapture`):
//!
//! | workload (n = 16,384) | evictions |
//! |---|---|
//! | 12 generations of n new keys, the previous generation idle | 1 of 196,608 insertions (TokenBucket), 0 (SlidingLog) |
//! | continuous churn: one new key every 1 s / n, each live 1 s (10 n insertions) | 0 of 163,840 (TokenBucket, FixedWindow, SlidingLog) |
//!
//! ## When the table is full: `OnFull`
//!
//! Only when both of a new key's groups hold active keys (none idle) does the policy apply:
//!
//! | policy | the new key | keys already tracked | security trade-off |
//! |---|---|---|---|
//! | `Evict` (default) | tracked, in place of the entry that has used least (a bucket's debt, a window's count, the log's entries in the period; ties: the soonest idle; an entry holding a reservation for a later window or time ranks above every entry that holds none, as it admits nothing before then and forgetting it could over-admit a whole quota; among such entries the order is the algorithm's own), read off its state with no step run; counted in `evictions` | the lightest may be forgotten | a throttled key is forgotten only when every entry in its groups has used as much: a flood of new keys pushes out the keys that used less first. Fine when the table is sized for the real population. |
//! | `Deny` | refused: a denial whose `retry_after` is when the soonest entry in its groups frees up; counted in `refused` | never forgotten | **a throttled key stays throttled through any flood.** The cost: during a flood, new legitimate keys are refused until entries go idle. Pick this for login or abuse limits. |
//! | `Allow` | admitted untracked; counted in `untracked` | never forgotten | throttled keys stay throttled; new keys go unlimited until a slot frees. Pick this when availability matters more than the limit. |
//!
//! ## Memory per key
//!
//! `memory_bytes()` reports the table's true size: slots, shard counters and the sliding
//! log's rings. It is fixed at build time (a flood of 1,000,000 new keys into a table built
//! for 16,384 changes it by zero; tested for every algorithm). On Linux a table over 4 MiB
//! (the slots, and the sliding log's rings) is advised onto transparent huge pages before
//! it is first written (`madvise(MADV_HUGEPAGE)`, which a kernel in the usual `madvise`
//! mode needs), so one TLB entry covers 2 MiB of it; `huge_pages()` says whether it was,
//! `TOLLGATE_HUGE_PAGES=0` turns it off, and anywhere the OS does not offer it the table
//! lives on ordinary pages with nothing else changed (`tests/huge_pages.rs` checks the
//! kernel really backs a 1,000,000-key table with huge pages).
//!
//! | algorithm | bytes per key of capacity (measured, capacity 16,384) |
//! |---|---|
//! | TokenBucket, LeakyBucket, FixedWindow, SlidingWindow | 24.30 (1.48 slots × 16 bytes, plus shard and counter-stripe metadata) |
//! | SlidingLog | ≈ 1.48 × (49 + 8 × limit): 96.9 for a limit of 2, 191.8 for 10 (the 49th byte: a prefetch hint per slot); `ring_bytes()` reports the per-slot ring, sized from the quota at build |
//!
//! ## Key identity and collisions
//!
//! A key is identified by its 64-bit hash under `ahash` with a random seed drawn when the
//! limiter is built (the fingerprint; 0 is remapped to 1, as 0 marks an empty slot). Two
//! different keys share a limiter state only if their 64-bit hashes are equal: with `m` keys
//! in the table, a new key collides with probability about `m / 2^64` — for a million
//! tracked keys, about 5 × 10⁻¹⁴ per new key, or one expected collision per ~10¹³ new keys.
//! A collision makes the two keys share one quota (each is limited more, never less). The
//! seed is secret and per limiter, so an attacker can neither craft colliding keys nor aim
//! a flood at one group to evict a chosen victim.
//!
//! ## Concurrency
//!
//! Every slot of the packed algorithms is one 16-byte word `(fingerprint, state)` updated with
//! a 128-bit compare-and-swap. Lookups, updates, the claim of an empty slot, and under `Deny`
//! and `Allow` the answer to a new key whose groups hold only active keys are lock-free.
//! Because every write compares the whole word, a request for key A is never applied to key
//! B's state, even when A's slot is reclaimed or evicted for B in the middle of the request
//! (it then starts over). Claims that replace an entry (idle reclaim, eviction) take the key's
//! claim lock (one of up to 2,048, chosen by the key's hash, so new keys rarely wait for each
//! other), so a key is never present twice. No step runs under the lock. A request that read
//! the clock before its own key's slot was reclaimed (a descheduled thread, a core whose clock
//! lags) is decided no earlier than the newest reclaim in its shard, so it never re-earns
//! quota the old state withheld; its waits are still measured from its own reading. The sliding log keeps a lock per slot. These protocols are
//! model-checked with loom; the rules and their models are in [the promises](super::promises)
//! ("Threads"), and how the table works in ARCHITECTURE.md.
//!
//! **Targets without a 16-byte compare-and-swap** (32-bit targets, wasm, x86-64 CPUs without
//! `cmpxchg16b`): the crate builds (CI checks `i686-unknown-linux-gnu`) and stays exact, but
//! `portable-atomic` then guards each slot word with one of a fixed set of spinlocks, so the
//! packed table is no longer lock-free. `KeyedRateLimiter::is_lock_free()` says which you
//! got; log it at start-up if it matters. The largest `max_keys` shrinks with the address
//! space there (about 90 million keys on 32 bits).
//!
//! **The unsafe code, as a user sees it.** The crate forbids `unsafe` outside one module,
//! `src/machine/`: on x86-64 CPUs with `cmpxchg16b` and AVX (detected once per process) a
//! keyed decision's 16-byte load and compare-and-swap are inline instructions (`vmovdqa`,
//! `lock cmpxchg16b`), and large tables get huge-page advice and prefetch hints. Two
//! environment variables, read before the first decision, rule it out:
//! `TOLLGATE_ATOMICS=portable` makes the process use portable-atomic alone
//! (`TOLLGATE_ATOMICS=cmpxchg16b`: the load without AVX), and `TOLLGATE_HUGE_PAGES=0` turns
//! the huge-page advice off. Every verb decides alike either way
//! (`tests/portable_atomics.rs`). Why the module exists and how each block is argued:
//! ARCHITECTURE.md. tollgate-server has no unsafe code.
//!
//! ## Housekeeping
//!
//! `reset(&key)` / `remove(&key)` (the key's slot becomes idle and is the first reused),
//! `len()` of keys being limited (a scan, for monitoring), and `.stats(false)` on the builder
//! to skip the per-decision counters on the hot path.
