//! FixedWindow, SlidingWindow and SlidingLog as a list of admitted requests (time, cost).
//!
//! guide: FixedWindow "at most `limit` per window `[k·P, (k+1)·P)`, aligned to the clock's
//! zero"; SlidingWindow "admitted iff `prev·(P − e) + (curr + n)·P ≤ limit·P`, exact
//! integers"; SlidingLog "exact: at most `limit` admitted in every interval `(t − P, t]`".
//! Reservations: "the fixed window books into the earliest window where the request fits
//! (and gives up the rest of the current one, so nothing overtakes it), the sliding window
//! at the earliest time its weighted count admits the request, the sliding log at the time
//! its `n`-th oldest entry leaves the window. While a booking is pending, `check` denies
//! what would overtake it (the sliding window: what would come before the booking's
//! window; its state keeps counts, not the booked time, ...)." A booking is an entry at
//! its due time; an entry later than the gate (the newest entry, or for the sliding
//! window the start of the newest entry's window) is pending.

use super::{Algo, Booking, Expect, Params};

#[derive(Clone, Copy, Debug)]
pub struct Entry {
    pub ts: u128,
    pub n: u32,
    pub id: u64,
    /// Booked for a time after its reading.
    pub future: bool,
    /// Booked into a window after its reading's (the windows).
    pub window_ahead: bool,
    /// The windows: booked into a later window that held nothing, so the key moved
    /// there from the window before it (guide::promises, cancel-window-moved: "the window that a booking moved the key
    /// from").
    pub moved: bool,
}

#[derive(Clone, Debug, Default)]
pub struct Entries {
    pub v: Vec<Entry>,
    /// The state's time: the latest time a write was decided at (0 for a fresh state).
    /// DESIGN: "Time never runs backwards inside the engine: a clock reading older than
    /// the state is treated as the state's time".
    pub now: u128,
    /// A keyed table's key found missing: the reading it is decided at (the reclaim
    /// floor) until its first write; 0 otherwise.
    pub floor: u128,
    /// The fixed window: windows whose moving booking was cancelled while something else
    /// was booked in them (guide::promises, cancel-window-moved: "else its rest stays given up"): once they hold nothing,
    /// the rest of the window before each is given up.
    pub given_up: Vec<u128>,
    /// The fixed window: what a given-up window's count was set to beyond its entries,
    /// `(window, limit − its entries)` when it was given up (guide::promises, cancel-window-moved: "else its rest stays
    /// given up": counted as full, at the limit of the time).
    pub adjust: Vec<(u128, i128)>,
    /// The sliding window: the start of a window a booking moved the key into, whose
    /// moving booking was cancelled while something else was booked in it
    /// (guide::promises, cancel-window-moved: "a sliding window admits nothing before the
    /// window the key was moved into starts"), 0 when none: nothing is admitted before
    /// it, even once that window's entries are all given back.
    pub held: u128,
}

impl Entries {
    /// The time a reading `t` is decided at: the state's time when the reading is older.
    /// A window's state records only its window (README, Bounds: "The windows decide it
    /// in the state's later window"), so a reading behind it is decided at that window's
    /// start; the log records its newest entry's time.
    pub fn eff(&self, t: u128, p: &Params) -> u128 {
        match p.algo {
            Algo::Log => t.max(self.now),
            _ => t.max(self.now / p.period * p.period),
        }
    }

    fn count(&self, w: u128, p: &Params) -> u128 {
        let entries: u128 = self
            .v
            .iter()
            .filter(|e| e.ts / p.period == w)
            .map(|e| u128::from(e.n))
            .sum();
        let adjust: i128 = self.adjust.iter().filter(|a| a.0 == w).map(|a| a.1).sum();
        u128::try_from(entries as i128 + adjust).expect("a window's count is never negative")
    }

    fn pending(&self, t: u128, p: &Params) -> bool {
        self.gate(p).is_some_and(|g| g > t)
    }

    /// The earliest time a new request may be decided at: the newest entry (a pending
    /// booking's time), or, for the sliding window, the start of its window (guide:
    /// "its state keeps counts, not the booked time").
    fn gate(&self, p: &Params) -> Option<u128> {
        if p.algo == Algo::Sliding && self.newest().is_none() && self.held > 0 {
            return Some(self.held);
        }
        let m = self.newest()?;
        // A window's state records its window, not the time within it: a reading behind
        // the newest entry but in its window is decided there (clock-back-window), and only
        // a booking into a later window is pending.
        Some(match p.algo {
            Algo::Sliding => (m / p.period * p.period).max(self.held),
            Algo::Fixed => m / p.period * p.period,
            _ => m,
        })
    }

    fn newest(&self) -> Option<u128> {
        self.v.iter().map(|e| e.ts).max()
    }

    /// The earliest time, from `t`, at which a request of `n` is admitted (nothing
    /// overtakes a pending booking).
    pub fn earliest(&self, t: u128, n: u32, p: &Params) -> u128 {
        let big_p = p.period;
        let l = u128::from(p.limit);
        let n = u128::from(n);
        let t0 = self.gate(p).map_or(t, |g| g.max(t));
        let k0 = t0 / big_p;
        match p.algo {
            Algo::Fixed => {
                for w in k0..k0 + 3 {
                    if self.count(w, p) + n <= l {
                        return if w == k0 { t0 } else { w * big_p };
                    }
                }
                (k0 + 3) * big_p
            }
            Algo::Sliding => {
                for j in k0..k0 + 4 {
                    let e_start = if j == k0 { t0 - j * big_p } else { 0 };
                    let prev = if j == 0 { 0 } else { self.count(j - 1, p) };
                    let curr = self.count(j, p);
                    if curr + n > l {
                        continue;
                    }
                    let x = l - curr - n;
                    if prev == 0 {
                        return j * big_p + e_start;
                    }
                    // prev·(P − e) ≤ x·P  <=>  P − e ≤ ⌊x·P / prev⌋
                    let thr = x * big_p / prev;
                    let e_min = e_start.max(big_p.saturating_sub(thr));
                    if e_min < big_p {
                        return j * big_p + e_min;
                    }
                }
                (k0 + 4) * big_p
            }
            _ => {
                let mut live: Vec<u128> = self
                    .v
                    .iter()
                    .filter(|e| e.ts + big_p > t0)
                    .flat_map(|e| std::iter::repeat_n(e.ts, e.n as usize))
                    .collect();
                live.sort_unstable();
                let c = live.len() as u128;
                if c + n <= l {
                    return t0;
                }
                let k = (c + n - l) as usize;
                live[k - 1] + big_p
            }
        }
    }

    /// guide (Decision::remaining): "How many more requests of cost 1 would be admitted
    /// right now": none while a booking is pending.
    pub fn remaining(&self, t: u128, p: &Params) -> u32 {
        if self.pending(t, p) {
            return 0;
        }
        let big_p = p.period;
        let l = u128::from(p.limit);
        let k = t / big_p;
        let r = match p.algo {
            Algo::Fixed => l.saturating_sub(self.count(k, p)),
            Algo::Sliding => {
                let e = t - k * big_p;
                let prev = if k == 0 { 0 } else { self.count(k - 1, p) };
                let used = prev * (big_p - e);
                ((l * big_p).saturating_sub(used) / big_p).saturating_sub(self.count(k, p))
            }
            _ => {
                let c: u128 = self
                    .v
                    .iter()
                    .filter(|e| e.ts + big_p > t)
                    .map(|e| u128::from(e.n))
                    .sum();
                l.saturating_sub(c)
            }
        };
        r as u32
    }

    /// The time from which the state says nothing: the window's end, the sliding window's
    /// next window's end (or the start of the window it is held until), the log's newest
    /// entry plus the period.
    pub fn idle_at(&self, p: &Params) -> u128 {
        let Some(m) = self.newest() else {
            return if p.algo == Algo::Sliding {
                self.held
            } else {
                0
            };
        };
        let big_p = p.period;
        match p.algo {
            Algo::Fixed => (m / big_p + 1) * big_p,
            Algo::Sliding => ((m / big_p + 2) * big_p).max(self.held),
            _ => m + big_p,
        }
    }

    /// The decision for `n` read at `t`: decided at the state's time when the reading is
    /// older, every wait measured from the reading itself.
    pub fn decide(&self, t: u128, n: u32, p: &Params) -> Expect {
        let e = self.eff(t, p);
        let at = self.earliest(e, n, p);
        let allowed = at == e;
        let mut after = self.clone();
        if allowed && n > 0 {
            after.v.push(Entry {
                ts: e,
                n,
                id: 0,
                future: false,
                window_ahead: false,
                moved: false,
            });
        }
        let idle = after.idle_at(p);
        Expect {
            allowed,
            limit: p.limit,
            burst: p.limit,
            remaining: after.remaining(e, p),
            reset_after: if idle > e { idle - t } else { 0 },
            retry_after: (!allowed).then_some(at - t),
            delay: 0,
        }
    }

    /// Drops the windows' counts that no longer weigh at `t`. The log keeps every entry:
    /// a booking given back restores the entries its write outlived, which a reading
    /// older than the state (the clock stepped back) sees in the window again.
    pub fn prune(&mut self, t: u128, p: &Params) {
        if p.algo == Algo::Log {
            return;
        }
        let big_p = p.period;
        let k = t / big_p;
        self.v.retain(|e| match p.algo {
            Algo::Fixed => e.ts / big_p >= k,
            Algo::Sliding => e.ts / big_p + 1 >= k,
            _ => e.ts + big_p > t,
        });
        self.adjust.retain(|a| a.0 >= k);
    }

    /// Takes `n` decided at `t` (the state's time already applied), due at `at`.
    pub fn take(&mut self, t: u128, at: u128, n: u32, p: &Params, id: u64) {
        self.prune(t, p);
        self.now = self.now.max(t);
        self.floor = 0;
        let w = at / p.period;
        let ahead = w > t / p.period;
        let moved = ahead && !self.v.iter().any(|e| e.ts / p.period == w);
        self.v.push(Entry {
            ts: at,
            n,
            id,
            future: at > t,
            window_ahead: ahead,
            moved,
        });
    }

    /// guide: "for the windows and the log, everything while nothing later was booked
    /// into a later ... window or entry, else nothing" (the log: "a booking for a later
    /// time gives nothing back once anything was logged after it"). The windows
    /// (guide::promises, cancel-window: "A window booking (fixed or sliding) gives its
    /// count back in any order while the key is still in the booking's window";
    /// cancel-window-moved: "The window a booking moved the key from is given back only by
    /// cancelling that booking while nothing else is booked in its window; else its rest
    /// stays given up: a fixed window counts it at the limit, a sliding window admits
    /// nothing before the window the key was moved into starts").
    pub fn cancel(&mut self, t: u128, b: &Booking, p: &Params) {
        let Some(i) = self.v.iter().position(|e| e.id == b.id) else {
            return;
        };
        if p.algo == Algo::Log {
            return self.cancel_log(t, i, b);
        }
        let (mine, future, moved) = {
            let e = &self.v[i];
            (e.ts, e.future, e.moved)
        };
        let w = mine / p.period;
        let later = |e: &Entry| match p.algo {
            Algo::Log => e.ts > mine || (future && e.ts == mine && e.id > b.id),
            _ => e.ts / p.period > w,
        };
        // A sliding window held until a later window's start is in that window, whose
        // counts superseded this one's.
        if p.algo == Algo::Sliding && self.held / p.period > w {
            return;
        }
        if self.v.iter().any(|e| e.id != b.id && later(e)) {
            return;
        }
        // A given-up window set to the limit may count less than the booking (the limit
        // was lowered below its count before): nothing to take it from.
        if p.algo == Algo::Fixed && self.count(w, p) < u128::from(self.v[i].n) {
            return;
        }
        self.v.remove(i);
        let others = self.count(w, p) > 0;
        if p.algo == Algo::Sliding && moved && others {
            self.held = self.held.max(w * p.period);
        }
        if p.algo != Algo::Fixed {
            return;
        }
        if moved && others && !self.given_up.contains(&w) {
            self.given_up.push(w);
        }
        if !others {
            if let Some(at) = self.given_up.iter().position(|&g| g == w) {
                self.given_up.swap_remove(at);
                if w == 0 {
                    // None before window 0: the key is fresh.
                    return;
                }
                // The window the key was moved from, counted at the limit; it is itself
                // given up in turn once it counts nothing (the key is never held until
                // a window that counts nothing).
                let from = w - 1;
                let rest = i128::from(p.limit) - self.count(from, p) as i128;
                self.adjust.push((from, rest));
                if !self.given_up.contains(&from) {
                    self.given_up.push(from);
                }
                self.v.push(Entry {
                    ts: from * p.period,
                    n: 0,
                    id: 0,
                    future: false,
                    window_ahead: false,
                    moved: false,
                });
            }
        }
    }

    /// The log's cancel at `t` of entry `i`: "a booking for a later time gives nothing
    /// back once anything was logged after it". It restores the log as it was before the
    /// booking: its time is its newest entry's again (a roll-back gives back what it took);
    /// a booking whose time the state has reached (the cancel's reading, or the state's own
    /// time) is pending no more.
    fn cancel_log(&mut self, t: u128, i: usize, b: &Booking) {
        let (mine, future) = (self.v[i].ts, self.v[i].future);
        let later = |e: &Entry| e.ts > mine || (future && e.ts == mine && e.id > b.id);
        if self.v.iter().any(|e| e.id != b.id && later(e)) {
            return;
        }
        self.v.remove(i);
        let seen = t.max(self.now);
        for e in &mut self.v {
            if e.ts <= seen {
                e.future = false;
            }
        }
        self.now = self
            .v
            .iter()
            .filter(|e| !e.future)
            .map(|e| e.ts)
            .max()
            .unwrap_or(0);
    }

    /// The sliding window's weighted count at `t`: `prev·(P − e) + curr·P` (requests ×
    /// P), what still counts of the previous window and the current one.
    pub fn weighted(&self, t: u128, p: &Params) -> u128 {
        let k = t / p.period;
        let e = t - k * p.period;
        let prev = if k == 0 { 0 } else { self.count(k - 1, p) };
        prev * (p.period - e) + self.count(k, p) * p.period
    }

    /// What the entry has used, under each reading of the guide's "a window's count, the
    /// log's entries in the period": (the current window's count, every counted request).
    pub fn used(&self, t: u128, p: &Params) -> (u128, u128) {
        let k = t / p.period;
        let all: u128 = self
            .v
            .iter()
            .filter(|e| match p.algo {
                Algo::Log => e.ts + p.period > t,
                Algo::Fixed => e.ts / p.period >= k,
                _ => e.ts / p.period + 1 >= k,
            })
            .map(|e| u128::from(e.n))
            .sum();
        // The log holds its last `limit` admissions: no more of them can count in any
        // window of the period (guide: "at most `limit` admitted in every interval").
        let all = match p.algo {
            Algo::Log => all.min(u128::from(p.limit)),
            Algo::Fixed => {
                let adjust: i128 = self.adjust.iter().filter(|a| a.0 >= k).map(|a| a.1).sum();
                (all as i128 + adjust) as u128
            }
            _ => all,
        };
        let curr = match p.algo {
            Algo::Log | Algo::Fixed => all,
            _ => {
                self.count(k, p)
                    + self
                        .v
                        .iter()
                        .filter(|e| e.ts / p.period > k)
                        .map(|e| u128::from(e.n))
                        .sum::<u128>()
            }
        };
        (curr, all)
    }
}
