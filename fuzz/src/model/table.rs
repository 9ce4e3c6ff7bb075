//! A small keyed table: what each key would get from its own unbounded limiter, plus the
//! the guide's rules for a full table.
//!
//! guide: "An entry whose state says nothing any more (a bucket full again, its windows
//! over, its log empty) is **idle**: it decides exactly as a fresh key would, so its slot
//! is silently reused by the next new key"; "Only when both of a new key's windows hold
//! active keys (none idle) does the policy apply"; `Evict`: "in place of the entry that
//! has used least (a bucket's debt, a window's count, the log's entries in the period;
//! ties: the soonest idle)"; `Deny`: "refused: a denial whose `retry_after` is when the
//! soonest entry in its windows frees up"; `Allow`: "admitted untracked".

use super::{Algo, Lim, Params, State};
use std::collections::BTreeMap;

pub const ROOM: &str = "guide::promises (room): \"`max_keys(n)` is room for `n` active keys. Only when both of a new key's groups hold active keys (none idle) does the policy apply\"";
pub const EVICT: &str = "guide::promises (evict): \"tracks the new key in place of the entry that has used least (a bucket's debt, a window's count, the log's entries in the period; ties: the soonest idle)\"";
pub const REFUSED: &str = "guide::promises (deny): \"a new key is refused: a denial whose `retry_after` is when the soonest entry in its groups frees up; counted in `refused`\"";
pub const UNTRACKED: &str =
    "guide::promises (allow): \"a new key is admitted untracked; counted in `untracked`\"";
pub const IDLE: &str = "guide::promises (idle): \"An entry whose state says nothing any more (a bucket full again, its windows over, its log empty) is **idle**: it decides exactly as a fresh key would, so its slot is silently reused by the next new key\"";
pub const FLOOR: &str = "guide::promises (reclaimed): \"A request that finds its key reclaimed by a later reading is decided no earlier than the newest reclaim in its shard: it never re-earns quota the old state withheld.\"; (retry-after): \"never too early, even measured from a stale reading\"";
pub const RESET: &str = "guide::promises (reset): \"`reset(&key)` / `remove(&key)` leave the key's slot idle, and it is the first reused\"";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Full {
    Evict,
    Deny,
    Allow,
}

/// One key as the model knows it: `None` when an eviction the model could not pin down
/// may have taken it (its decisions are then not checked until a reset or remove).
pub type Known = Option<Lim>;

pub struct Table {
    pub algo: Algo,
    pub tiers: Vec<Params>,
    pub max_keys: usize,
    pub full: Full,
    pub keys: BTreeMap<u64, Known>,
    /// The entries a log's ring holds: the largest tier's limit at build (`set_quota`
    /// never grows a ring, and a lower limit does not shrink it).
    pub ring: u32,
    /// The newest reading at which an entry was reclaimed or evicted: a key found
    /// missing is decided no earlier (README: "A request that read the clock before its
    /// own key's slot was reclaimed ... finds the key missing and is decided no earlier
    /// than the newest reclaim in its shard"; a table of at most 8 keys has one shard).
    pub floor: u128,
    /// Keys that were idle at an idle reclaim and may have lost their slot to it: found
    /// again (their own state, which a reading older than the reclaim may see live) or
    /// missing, whichever the engine's answer shows.
    pub maybe_gone: std::collections::BTreeSet<u64>,
}

impl Table {
    pub fn new(algo: Algo, tiers: Vec<Params>, max_keys: usize, full: Full) -> Table {
        let ring = tiers.iter().map(|q| q.limit).max().unwrap_or(1);
        Table {
            ring,
            algo,
            tiers,
            max_keys,
            full,
            keys: BTreeMap::new(),
            floor: 0,
            maybe_gone: Default::default(),
        }
    }

    /// guide: "The table allocates 1.48 slots per key."
    pub fn slots(&self) -> usize {
        (self.max_keys * 148).div_ceil(100)
    }

    /// The parameters the idle stamp and the used amount are read with (the windows'
    /// and the log's tiers share one period; a bucket's stamp is its TAT).
    pub fn p0(&self) -> Params {
        self.tiers[0]
    }

    /// A fresh state for `key`, in a generation no booking was made on.
    pub fn fresh(&mut self) -> Lim {
        Lim::new(self.algo)
    }

    /// Keys whose state still says something at `t` (unknown keys count as active).
    pub fn active(&self, t: u128) -> Vec<u64> {
        let p = self.p0();
        self.keys
            .iter()
            .filter(|(_, k)| k.as_ref().is_none_or(|l| !l.is_idle(t, &p)))
            .map(|(&k, _)| k)
            .collect()
    }

    pub fn any_unknown(&self) -> bool {
        self.keys.values().any(Option::is_none)
    }

    /// Whether `key` needs a slot at `t`: it has no state that still says something.
    pub fn is_new(&self, key: u64, t: u128) -> bool {
        let p = self.p0();
        match self.keys.get(&key) {
            None => true,
            Some(None) => false,
            Some(Some(l)) => l.is_idle(t, &p),
        }
    }

    /// The states a new `key` read at `t` may be decided on: a key the model holds no
    /// entry for is missing (decided no earlier than the floor); one it holds idle may
    /// have been found idle (decided at the reading, as a fresh key) or reclaimed
    /// meanwhile (missing). Empty when the key is not new.
    pub fn candidates(&self, key: u64, t: u128) -> Vec<Lim> {
        let gone = self.maybe_gone.contains(&key);
        let new = self.is_new(key, t);
        if !new && !gone {
            return Vec::new();
        }
        let missing = Lim::fresh_at(self.algo, self.floor.max(t));
        match self.keys.get(&key) {
            Some(Some(l)) if !new => vec![l.clone(), missing],
            // Found idle: decided on its own state, which says nothing at the reading
            // (as a fresh key's) unless the reading is older than it (clock-back-window: a
            // window that counts nothing still decides a reading behind it in its window).
            Some(Some(l)) if t < self.floor => vec![l.clone(), missing],
            Some(Some(l)) => vec![l.clone()],
            _ => vec![missing],
        }
    }

    /// Whether `key` may need a slot at `t` (new, or maybe reclaimed).
    pub fn may_claim(&self, key: u64, t: u128) -> bool {
        self.is_new(key, t) || self.maybe_gone.contains(&key)
    }

    /// An idle reclaim at `tf` (the floor): every key idle then may have lost its slot.
    pub fn reclaimed(&mut self, tf: u128, except: u64) {
        let p = self.p0();
        for (&k, l) in &self.keys {
            if k != except && l.as_ref().is_some_and(|l| l.is_idle(tf, &p)) {
                self.maybe_gone.insert(k);
            }
        }
    }

    /// The state `key` decides with: its own, or a fresh one when idle (an idle entry
    /// "decides exactly as a fresh key would").
    pub fn state_for(&mut self, key: u64, t: u128) -> Option<&mut Lim> {
        if self.is_new(key, t) && !matches!(self.keys.get(&key), Some(Some(_))) {
            let f = self.fresh();
            self.keys.insert(key, Some(f));
        }
        self.keys.get_mut(&key).and_then(Option::as_mut)
    }

    /// The soonest moment an active entry frees up (`Deny`'s `retry_after`).
    pub fn soonest_idle(&self, t: u128) -> Option<u128> {
        let p = self.p0();
        self.keys
            .values()
            .flatten()
            .filter(|l| !l.is_idle(t, &p))
            .map(|l| l.idle_at(&p))
            .min()
    }

    /// The keys `Evict` may take at `t` (all active, known, other than `new`), by each
    /// reading of "has used least" the model accepts: a bucket's debt in requests exactly
    /// or rounded up; a window's current count or all it counts.
    pub fn legal_victims(&self, t: u128, new: u64) -> Vec<u64> {
        let p = self.p0();
        let cands: Vec<(u64, &Lim)> = self
            .keys
            .iter()
            .filter(|(&k, l)| k != new && l.as_ref().is_some_and(|l| !l.is_idle(t, &p)))
            .map(|(&k, l)| (k, l.as_ref().expect("filtered")))
            .collect();
        let mut legal = Vec::new();
        // Readings of "has used": 0, the current window's count (a bucket's debt in
        // requests exactly); 1, all it counts (rounded up); 2, for the sliding window,
        // the weighted count that still counts at `t`, `prev·(P − e) + curr·P` (its own
        // measure of use, in requests × P).
        for reading in 0..3 {
            // used as a fraction num/den, then the idle stamp; guide: "an entry holding
            // a reservation for a later window or time ranks above every entry that
            // holds none" (windows and log: a booked entry after `t`).
            let key = |l: &Lim| -> (u128, u128, u128) {
                let ahead = match &l.s {
                    State::Entries(e) => {
                        e.v.iter().any(|x| {
                            x.future
                                && match p.algo {
                                    Algo::Log => x.ts > t,
                                    _ => x.ts / p.period > t / p.period,
                                }
                        }) || (p.algo == Algo::Sliding && e.held / p.period > t / p.period)
                    }
                    State::Gcra(_) => false,
                };
                // An entry ahead ranks above any count a window or a log can hold.
                let lift = if ahead { 1u128 << 100 } else { 0 };
                let (num, den) = match &l.s {
                    State::Gcra(g) => {
                        let (d, w) = g.used(t);
                        if reading == 0 {
                            (d, w)
                        } else {
                            (d.div_ceil(w), 1)
                        }
                    }
                    State::Entries(e) => {
                        // guide: a keyed log ranks "every entry its ring holds": the
                        // largest tier's limit at build, whatever set_quota did since.
                        let (curr, all) = e.used(
                            t,
                            &Params {
                                limit: self.ring,
                                ..p
                            },
                        );
                        match reading {
                            0 => (lift + curr, 1),
                            // Every entry of the table shares `P`: compared as is,
                            // an entry ahead lifted above any weighted count (< 2^96).
                            2 if p.algo == Algo::Sliding => ((lift << 20) + e.weighted(t, &p), 1),
                            _ => (lift + all, 1),
                        }
                    }
                };
                (num, den, l.idle_at(&p))
            };
            let best = cands
                .iter()
                .map(|(_, l)| key(l))
                .min_by(|a, b| (a.0 * b.1).cmp(&(b.0 * a.1)).then(a.2.cmp(&b.2)));
            // guide: "among those, the order is the algorithm's own": when every
            // candidate holds a reservation ahead, any of them may go.
            if best.is_some_and(|b| b.0 >= 1u128 << 100 && b.1 == 1) {
                for (k, _) in &cands {
                    if !legal.contains(k) {
                        legal.push(*k);
                    }
                }
                continue;
            }
            if let Some(b) = best {
                for (k, l) in &cands {
                    let c = key(l);
                    if c.0 * b.1 == b.0 * c.1 && c.2 == b.2 && !legal.contains(k) {
                        legal.push(*k);
                    }
                }
            }
        }
        legal
    }
}
