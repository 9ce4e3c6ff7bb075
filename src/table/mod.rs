//! The keyed table: one core, two slot kinds.
//!
//! Every keyed limiter of the crate keeps its keys' states in a table of fixed
//! capacity, laid out and probed the same way:
//!
//! * [`geometry`]: a key's 64-bit hash picks its shard and its two candidate *groups*
//!   of slots, and where its probe starts in each; its fingerprint is its identity.
//! * [`generation`]: a packed slot's key word (tag, rate class, generation), so that a
//!   booking is given back only to the state it was made on.
//! * [`claim`]: what a new key does in a table with no free slot — the scan that ranks
//!   its candidates, the claim locks that serialize the claims of one key, the refusal
//!   of a full table, and the policy ([`OnFull`]) that chooses between them.
//! * [`counters`]: per-shard stamps, epochs and counts; per-thread stripes of the hot
//!   counters.
//! * [`tiers`]: each quota tier's parameters, replaceable at run time.
//!
//! The two slot kinds:
//!
//! * [`packed`]: `PackedTable`, lock-free 16-byte slots `(key word, state)` updated by
//!   one compare-and-swap (token bucket, leaky bucket, fixed and sliding window); its
//!   protocol, and why a key's request can never touch another key's state, is on the
//!   module. `packed::rates` holds its rate classes (carry-over across quota changes).
//! * [`locked`]: `LockedTable<E>`, a lock and a hint word per slot, for entries whose
//!   state does not fit a word; its protocol (claims, full policy, reclaim floor, lock
//!   order) is on the module, and the entry type states how its users differ
//!   (`SlotEntry`). [`log`] holds the sliding log's entry (`LogTable`); the Redis
//!   hybrid's is in `redis::hybrid`.
//!
//! The invariants every table keeps: a key is never present twice; a request is never
//! applied to another key's state; a key found missing is decided no earlier than its
//! shard's last reclaim; memory is fixed at build.

pub(crate) mod claim;
pub(crate) mod counters;
pub(crate) mod generation;
pub(crate) mod geometry;
pub(crate) mod locked;
pub(crate) mod log;
pub(crate) mod packed;
pub(crate) mod tiers;

pub use claim::OnFull;
