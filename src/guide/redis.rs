//! # Redis: one limit across instances
//!
//! Enable the `redis` feature to share one quota across every instance of a service:
//!
//! ```toml
//! [dependencies]
//! tollgate = { path = "../tollgate", features = ["redis"] }   # or git = "...": see the README
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! ```
//!
//! Two modes live in `tollgate::redis`, both built on tokio and redis-rs (re-exported as
//! `tollgate::redis::redis`, so connections you build yourself come from the matching
//! version).
//!
//! ## Exact mode: `RedisRateLimiter`
//!
//! Every decision is one atomic Lua script, one `EVALSHA` round trip (a Redis restart's
//! `NOSCRIPT` is handled by reloading the script). All five algorithms run server-side with
//! the local engine's semantics, in whole microseconds: GCRA for `TokenBucket` and
//! `LeakyBucket` (one string per key: the TAT and the emission interval that wrote it),
//! counters for `FixedWindow` and `SlidingWindow` (one small hash per key), a sorted set for
//! the exact `SlidingLog`.
//! The integration tests check the scripts against the local engine decision for decision
//! on random schedules, including backward clock readings.
//!
//! ```rust,no_run
//! use std::time::Duration;
//! use tollgate::redis::{Fallback, RedisRateLimiter};
//! use tollgate::{Algorithm, Quota};
//!
//! #[tokio::main]
//! async fn main() -> Result<(), tollgate::redis::Error> {
//!     let limiter = RedisRateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(100).with_burst(20))
//!         .url("redis://127.0.0.1:6379")       // or .connection(conn) to share yours
//!         .prefix("api")                        // one prefix per limiter
//!         .timeout(Duration::from_millis(50))   // every call is bounded: errors, never hangs
//!         .fallback(Fallback::Local(Quota::per_second(25))) // while Redis is away
//!         .build()
//!         .await?;
//!     let d = limiter.check("user:42").await?;  // Result<Decision, tollgate::redis::Error>
//!     if !d.is_allowed() {
//!         println!("429 Too Many Requests, Retry-After {:?}", d.retry_after());
//!     }
//!     Ok(())
//! }
//! ```
//!
//! Keys are any `tollgate::redis::RedisKey`: `&str`, `String`, bytes (`[u8]`, `Vec<u8>`),
//! IP addresses and integers (written as their text: the address `10.0.0.1` and the string
//! `"10.0.0.1"` are one key), or a type of your own. Both modes write the Redis key name
//! (`prefix:{key}`) straight into the command, without building a `String` per request.
//!
//! - **Time** comes from Redis `TIME` inside the script: one clock for every instance, no
//!   client skew. `.clock(c)` passes the caller's clock instead (tests use it with a
//!   `ManualClock` to compare with the local engine).
//! - **Limits of the Lua arithmetic**: Lua numbers are doubles, so every value is kept
//!   below 2^53: times in µs up to 2^52 (Redis `TIME` is about 2^50.6 today), and quotas
//!   whose period or `burst × interval` exceed 2^50 µs (about 35 years), a
//!   `SlidingWindow` whose `limit × period` does, a period that is not a whole number of
//!   µs, or a bucket rate above one request per µs are refused at build time
//!   (`Error::Unrepresentable`). `FixedWindow` never forms that product, so billing quotas
//!   (20,000 per day, 1,000 per 30 days) fit. The bucket interval is `⌈period_µs / limit⌉`
//!   µs, rounded up like the local engine's: never more than the quota.
//! - **Clones** share one multiplexed connection; a single connection carries many
//!   concurrent tasks (see BENCHMARKS.md for throughput against `redis-benchmark`).
//!
//! ## Hybrid mode: `HybridRateLimiter`
//!
//! Decisions at local speed, counts shared through Redis. Each instance counts its own
//! admissions per key and window; Redis keeps one hash per key and window with one field
//! per instance, holding that instance's cumulative count. A background task (spawned on
//! the current tokio runtime at build, stopped when the last handle drops) sets, every
//! sync interval, the fields of the keys used or changed since the last sync and reads back
//! their global counts. Setting a cumulative count is idempotent: a sync that timed out
//! while Redis still ran it is sent again and counts nothing twice (tested by pausing Redis
//! mid-sync), and a restarted Redis gets its lost counts back. A sync goes in chunks of
//! 2,000 keys, each one round trip bounded by the timeout (on Redis Cluster, one pipeline
//! per hash slot in the chunk, all in flight together), 100 keys per script call: a sync's
//! Redis time grows with the keys used since the last one; keys not used since then cost
//! nothing. `check` is
//! synchronous and never waits on the network. `FixedWindow` and `SlidingWindow`.
//!
//! ```rust,no_run
//! use std::time::Duration;
//! use tollgate::redis::HybridRateLimiter;
//! use tollgate::{Algorithm, Quota};
//!
//! #[tokio::main]
//! async fn main() -> Result<(), tollgate::redis::Error> {
//!     let limiter = HybridRateLimiter::builder(Algorithm::SlidingWindow, Quota::per_second(20_000))
//!         .url("redis://127.0.0.1:6379")
//!         .sync_interval(Duration::from_millis(20))
//!         .max_keys(100_000)                   // tracked keys, memory fixed at build (about 202 bytes each)
//!         .build()
//!         .await?;
//!     let allowed = limiter.check("tenant-3").is_allowed(); // no .await
//!     println!("tenant-3 allowed: {allowed}");
//!     Ok(())
//! }
//! ```
//!
//! **Overshoot bound.** With `N` instances each receiving at most `r` requests/s for a key,
//! sync interval `I` and Redis round-trip time `d`, one window's global count exceeds the
//! limit by at most `3·N·r·(I + d)` (for `FixedWindow` also never more than `(N − 1)·limit`).
//! Redis round trips per decision are at most `1/(r·I)` per instance (`tests/redis`'s
//! overshoot tests check the bound on every run). **Failed syncs** widen `I` to the time between two successful syncs and `d` to
//! a whole sync's duration; the bound holds with those (tested: 4 instances, two of every
//! three rounds' syncs timing out under `CLIENT PAUSE`, 140 admitted against a limit of 100
//! and a bound of 180, and Redis then holding exactly 140).
//!
//! **Key table.** The hybrid mode's per-key state lives in the engine's own fixed-capacity
//! layout (two candidate groups of 12 slots per key, about 1.48 slots per key, one small
//! lock per slot), allocated once at build: `max_keys(n)` holds exactly `n` keys in about
//! 202 bytes per key (`HybridRateLimiterBuilder::memory_bytes()` says how much before
//! building, `HybridRateLimiter::memory_bytes()` after), plus each tracked key's name,
//! stored once when the key is first seen. A `max_keys` too large for the machine is an
//! error at build. Deciding a known key allocates nothing. Keys idle for a window (two for
//! `SlidingWindow`) leave the table at each sync; a new key arriving while it is full takes
//! the slot of an idle key with nothing left to sync, and is otherwise denied (counted in
//! `HybridStats::untracked`; `HybridStats::reclaimed` counts the keys dropped).
//!
//! ## Exact or hybrid?
//!
//! | | exact | hybrid |
//! |---|---|---|
//! | limit across instances | exact | limit + `3·N·r·(I + d)` at most |
//! | cost per decision | one Redis round trip | a lookup in a fixed-size local table under the key's slot lock, one round trip per sync interval |
//! | algorithms | all five | `FixedWindow`, `SlidingWindow` |
//! | Redis down | `Err` within the timeout, or the fallback policy | decisions go on locally; counts are kept and sent when Redis returns |
//!
//! Use **exact** for quotas that must not be exceeded (billing, login attempts, API plans)
//! or low-rate keys; use **hybrid** for high-rate keys where a bounded overshoot is
//! acceptable and the Redis round trip per request is not (edge proxies, hot tenants).
//!
//! ## Quota changes, several limits, and the clock
//!
//! `set_quota(q)` works on both Redis limiters at run time: every key's state stays in Redis
//! under the same keys and no decision waits. From the change on, a key never gets more than
//! a limiter built fresh with the new quota would give it (a lowered limit denies on the old
//! state until it drains; a raised one gives the difference at once). The exact mode's buckets
//! carry what a key used over in requests, as in-process: the state records the emission
//! interval that wrote it, and a decision at `t` under another interval converts it,
//! `TAT' = t + ⌈(TAT − t)·T_new / T_old⌉`. The conversion is lazy (instances sharing the state
//! switch quota each at its own moment): each decision converts at its own time, and the
//! first admission *or denial* under the new quota stores the result (a denial takes nothing:
//! the same debt, counted in the new quota's requests), so from then on the debt is paid off
//! at the new rate, as in-process; only peeks (cost 0) convert for their answer and write
//! nothing, and until the first request the debt keeps draining at the old rate. State
//! written before the interval was recorded is read as the current interval's. Unlike the in-process windows, whose packed state counts in their period, the
//! Redis window state stores its period, so a period change is accepted and restarts the
//! windows (at most `L_old + L_new` across the change).
//!
//! `tollgate::redis::check_all` decides several exact-mode limits all or nothing in one
//! script (one round trip); on Redis Cluster the keys of one call must share a hash slot
//! (a `{tag}` in the keys), and a cross-slot call is refused before anything is sent.
//!
//! Give the Redis limiters a caller-side clock every process agrees on: `SystemClock` (wall
//! time, never decreasing within a process), not `QuantaClock`, whose zero is per process.
//!
//! ```rust,no_run
//! use tollgate::redis::{check_all, RedisRateLimiter};
//! use tollgate::{Algorithm, Quota, SystemClock};
//!
//! #[tokio::main]
//! async fn main() -> Result<(), tollgate::redis::Error> {
//!     let per_user = RedisRateLimiter::builder(Algorithm::SlidingWindow, Quota::per_minute(60))
//!         .url("redis://127.0.0.1:6379")
//!         .prefix("user")
//!         .clock(SystemClock::new())
//!         .build()
//!         .await?;
//!     let per_day = RedisRateLimiter::builder(Algorithm::FixedWindow, Quota::per_hour(24_000))
//!         .connection_of(&per_user)
//!         .prefix("day")
//!         .build()
//!         .await?;
//!     // One script, all or nothing; on Cluster the keys share the {user:42} tag.
//!     let d = check_all(&[(&per_user, "{user:42}"), (&per_day, "{user:42}:day")], 1).await?;
//!     if !d.is_allowed() {
//!         println!("retry after {:?}", d.retry_after());
//!     }
//!     per_user.set_quota(Quota::per_minute(30))?; // a plan change: every key, state kept
//!     Ok(())
//! }
//! ```
//!
//! ## Token budgets on Redis: charge and give back
//!
//! Both Redis limiters have the [token-budget](super::budgets)
//! verbs, keyed: `charge(key, n)`, `charge_owing(key, n, max_owed)` and `give_back(key, n)`.
//! A charge returns a `tollgate::redis::RedisCharge`: `decision()` (the key after the
//! charge, as a request of cost 1 would be decided then), `fit()`, `taken()`, `owed()`,
//! `dropped()`, and `tracked()` (whether anything counted it).
//!
//! **Exact mode: one atomic script per call, the in-process semantics.** A charge is never
//! denied: it takes `n` whatever is left, and the key owes what went past its quota, at most
//! `max_owed` requests (one burst by default); the part past that is dropped. A bucket's
//! `TAT` becomes `max(TAT, now) + taken·T`, at most `now + τ + max_owed·T`; a window's
//! count (the current window's, or the state's own when a newer reading moved it later)
//! passes the limit by at most `max_owed` (the sliding window's weighted count, the
//! previous window's weight included, as its `owed` is);
//! the log logs `min(n, limit)` entries at the reading and keeps its newest `limit`, as
//! the in-process ring does (no bound: the overdraft ends one period later). `give_back`
//! gives back never below an empty state and returns how many requests it gave: a bucket
//! `min(n, ⌈(TAT − now)/T⌉)` of its debt, a window from the counts that still weigh (the
//! current window's first, the sliding window's previous one next), a log from its newest
//! entries in the period, and nothing while all of its newest `limit` entries are in the
//! period (it cannot tell an overdraft it could not log from admissions). The
//! differential test runs random checks, charges (with the default and explicit bounds,
//! costs up to `u32::MAX`) and give-backs on every algorithm against the in-process
//! `RateLimiter` under one `ManualClock`, decision for decision; tasks on four instances
//! charging, checking and giving back one key at once count every request once and never
//! pass the budget plus the bound. A charged key's TTL covers its debt (`TAT − now`, the
//! windows that still count it, the log's period). Redis keeps no record of what a given
//! charge took, so there is no `Charge::give_back` ticket: give back by key what you
//! charged (on a key several callers share, that may be others' requests, as with the
//! in-process `give_back(n)`). Bounds of the Lua arithmetic: a bucket owes at most 2^50 µs
//! (about 35.7 years) of its rate whatever `max_owed` asks (in-process, 2^60 ns), a
//! window's count at most what the in-process count field holds (and a sliding window's
//! at most `2^52 / period_µs`, lower only for periods past about half an hour); every
//! number stays below 2^53. While Redis cannot be used, `Fallback::Local` charges and
//! gives back on its local table, `Allow` and `Deny` answer with their decision and count
//! nothing (`tracked()` is `false`, `give_back` returns 0), and `Error` returns the error.
//!
//! **Hybrid mode: implemented, with the mode's own bound (not exact).** Decisions there
//! are local counts shared by the syncs, and a charge is one more local count: the
//! in-process window charge on this instance's view of the global count, sent to Redis
//! with the next sync as admissions are. Other instances' charges and admissions since the
//! last sync are not in the view, so a window's global count exceeds `limit + max_owed`
//! by at most the overshoot bound above, `3·N·r·(I + d)`, with `r` counting charged
//! requests as well. A give-back (never below 0 in this instance's view; a key this
//! instance does not track gives nothing) goes to Redis as a cumulative count of its own
//! per instance and window (the field `<id>:g` of the window's hash), only ever raised like
//! the admissions, so a retried or late sync counts nothing twice; the global count is the
//! admissions less the give-backs, never read below 0. Two instances giving back the same
//! requests between two syncs give them back twice: give back only what you charged. An
//! instance of an earlier version sharing the prefix adds the `:g` fields instead of
//! subtracting them (it never counts less than the truth).
//!
//! **Check before: `peek` and `peek_n`.** `RedisRateLimiter::peek(key)` / `peek_n(key, n)`
//! return the decision a check of that cost would get now (`peek_n(key, 0)`: what is left
//! now, 0 while the key owes) and write nothing at all: the decision script runs in its
//! peek mode, with no count, no TTL refresh, no clean-up of a log's expired entries and no
//! bucket conversion stored, and a key Redis does not hold is not created (on Redis
//! Cluster too: one key, one slot). `tests/redis/peek.rs` compares each key's `DUMP` and TTL
//! before and after every peek on random schedules of every algorithm, and each peek with
//! the check that follows it at the same reading. `HybridRateLimiter::peek` / `peek_n`
//! decide from a copy of this instance's entry for the key: nothing inserted, marked for
//! the sync or counted. With them, `Policy::budget` takes either Redis limiter (see
//! [the middleware's token budgets](super::middleware)).
//!
//! ## Failure policies (exact mode)
//!
//! Redis down, slow or answering garbage gives an `Err` (`Error::Redis`, `Error::Timeout`,
//! `Error::BadReply`) within the timeout, never a hang. `.fallback(..)` turns those errors
//! into decisions:
//!
//! - `Fallback::Error` (default): return the error, let the caller decide.
//! - `Fallback::Allow`: fail open. `Fallback::Deny`: fail closed (`retry_after` = timeout).
//! - `Fallback::Local(quota)`: a local `RateLimiter` per key (same algorithm, this quota,
//!   typically the global one divided by the number of instances) stands in until Redis
//!   answers; at most 65,536 keys get their own, further keys share one.
//!
//! With a fallback, a failed call makes the fallback answer alone for 100 ms before Redis is
//! tried again, so an outage costs one timeout per 100 ms rather than per request.
//! `limiter.stats()` counts Redis decisions, errors and fallback decisions for operators.
//!
//! ## Key layout and memory
//!
//! - Exact: `<prefix>:{<key>}`, one Redis key per limited key (string, hash or sorted set
//!   by algorithm). Hybrid: `<prefix>:{<key>}:<window index>`, one hash per window (a
//!   field per instance, and `<id>:g` for an instance's give-backs). `<key>` is the key's bytes (text, bytes, or the text of an
//!   address or integer: `RedisKey`).
//! - Every key gets a TTL equal to the time until it is idle (TAT − now for the buckets,
//!   the end of the window, or of the next one for the sliding window, the newest entry +
//!   period for the log), set in the same atomic script that writes it — never an `INCR`
//!   then a separate `EXPIRE` — so Redis memory is bounded by the active keys (a charged
//!   key's TTL covers its debt; a log holds at most its limit of entries). Denials
//!   write nothing. With the caller's clock, TTLs get one extra second of grace.
//! - Give each limiter (algorithm + quota) its own prefix: limiters sharing a prefix share
//!   state.
//!
//! ## Redis Cluster
//!
//! Every key is hash-tagged on the limited key (`prefix:{<key>}:…`), and every script
//! touches one key's state, hence one slot: no `CROSSSLOT`, and load spreads over the
//! cluster by limited key. A prefix containing a brace is refused at build (it would
//! become every key's hash tag and put the whole limiter on one node). Give the builders
//! a cluster connection (`tollgate::redis::redis::cluster::ClusterClient::new(nodes)?
//! .get_async_connection().await?`, the `cluster-async` feature is on). The hybrid sync
//! then sends one pipeline per hash slot, all at once, since a cluster pipeline must stay
//! within one slot. Both modes are tested on a real three-primary cluster on loopback ports
//! (`redis-server --cluster-enabled yes` three times and `redis-cli --cluster create`):
//! the exact mode with all five algorithms, the hybrid mode with two instances sharing
//! limits across the nodes. `scripts/test redis` starts that cluster itself and hands its
//! seed addresses to the tests in `TOLLGATE_REDIS_CLUSTER`
//! (`127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3`); run alone, the tests start their own.
