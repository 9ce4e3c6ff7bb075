//! # Run-time quotas and tiers
//!
//! ## `set_quota`
//!
//! `set_quota(q)` works on every limiter at run time and keeps each key's state. Every decision
//! is made with one quota, old or new, never a mix (the parameters sit in a seqlock cell).
//!
//! What a key has used carries over **in requests** (Bucket4j's "additive" strategy; Go's
//! x/time/rate agrees while the burst stays): a bucket's debt at the change `c` is converted
//! into the new quota's requests, `TAT' = c + ⌈(TAT − c)·T_new / T_old⌉`, rounded up so the
//! limit is never exceeded, exactly however long the debt. A converted debt ends at the
//! clock's horizon (2^62 ns after its zero, about 146 years) at the latest, unless it already
//! ended later; converted back to a faster rate, what is left of that is converted. So raising a limit never lengthens a wait and lowering one never
//! shortens it: a key that used 10 of a plan's 10 per minute has used 10 of the next plan's
//! 1,000.
//!
//! Over a span `[a, b]` around the change, at most `burst_old + (c − a)/T_old` are admitted
//! before `c`, and from `c` on at most `burst_new + (b − c)/T_new` less what the key still owed
//! at `c` in new requests. A request is never priced at one rate on a state counted at the
//! other: a single limiter converts its bucket while deciders wait (one compare-and-swap), and
//! a decision that read the old quota and then finds the state converted starts over with the
//! new one.
//!
//! A keyed table records which rate (emission interval) wrote each state: 16 distinct rates
//! per table at once, one of them the rate it was built with, kept for good. More tier rates
//! is `ConfigError::TooManyRates`; rates `set_quota` retired are swept and reused once no
//! request that read them can still write them. A keyed table converts a key's state when a
//! request writes it at the new rate, not at the `set_quota` call; but the bookings and charges
//! of a key written at a rate no tier uses after the call can no longer be given back from
//! that call on (see [the promises](super::promises), `give-back-set-quota`).
//!
//! The windows keep their counts and apply the new limit at once (the window containing the
//! change admits at most `max(old, new)`). Their packed layout depends on the period alone, so
//! any limit the period can represent fits, but the period itself is fixed at build
//! (`ConfigError::PeriodChange`). The sliding log keeps its timestamps; its rings keep the size
//! they were built with (`ConfigError::LogBeyondRing` above it). A refused change changes
//! nothing.
//!
//! ## Tiers: a quota per key
//!
//! Plans, tiers, per-customer overrides: one keyed table, several quotas. The builder's quota
//! is tier 0; `.tiers([...])` adds more; each request names its key's tier. The caller knows
//! the plan at request time (from its authentication), so nothing is stored per key, no
//! resolver closure runs on the hot path, and memory is still fixed at build.
//!
//! What a key used carries over between tiers in requests, as across `set_quota`: a request
//! under another tier converts the key's debt, as run up and paid off under the tier that
//! wrote it, into its own tier's requests when it is decided. A free user (10 per minute) who
//! spent 10 and upgrades to the pro tier (1,000 per minute) has 1,000 − 10 left, and a pro
//! user who spent 10 has nothing left on the free tier. A refusal by a full table reports the
//! deciding tier's limit and burst. The windows' and the log's tiers share one period (their
//! counts carry over as they are).
//!
//! ```rust
//! use tollgate::{Algorithm, KeyedRateLimiter, Quota};
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     const FREE: usize = 0;
//!     const PRO: usize = 1;
//!     let limiter = KeyedRateLimiter::<str>::builder(Algorithm::TokenBucket, Quota::per_second(10))
//!         .tiers([Quota::per_second(1_000)])
//!         .build()?;
//!     let tier = |plan| limiter.tier(plan).expect("a configured tier");
//!     assert!(tier(FREE).check_n("alice", 10)?.is_allowed());
//!     assert!(!tier(FREE).check("alice").is_allowed());
//!     assert!(tier(PRO).check_n("bob", 1_000)?.is_allowed());
//!     Ok(())
//! }
//! ```
//!
//! The rules and their tests: [the promises](super::promises) ("Run-time quotas and tiers").
