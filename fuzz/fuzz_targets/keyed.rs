//! A small `KeyedRateLimiter<u64, ManualClock>` (max_keys 1–8, up to three tiers, every
//! `OnFull`, reset/remove, reserve/cancel, check_all with a spent wall) against the model
//! of what each key would get from its own limiter, plus the guide's full-table rules.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use std::time::Duration;
use tollgate::{
    check_all, Algorithm, Decision, KeyedRateLimiter, Limit, ManualClock, OnFull, Quota,
    RateLimiter, Reservation, ReserveError,
};
use tollgate_fuzz::check::{self, decision, promise, Trace};
use tollgate_fuzz::model::table::{self, Full, Table};
use tollgate_fuzz::model::{Algo, Booking, Expect, Lim, Params, Reserved};
use tollgate_fuzz::spec::{QuotaSpec, Step, SET_FROM};

#[derive(Arbitrary, Debug, Clone, Copy)]
struct Req {
    key: u8,
    tier: u8,
    n: u8,
}

#[derive(Arbitrary, Debug)]
enum Op {
    Advance(Step),
    Check(Req),
    Peek(Req),
    Reserve(Req, Step),
    Cancel(u8),
    Keep(u8),
    Reset(u8),
    Remove(u8),
    SetQuota(u8, QuotaSpec),
    CheckAll(Req, bool),
}

#[derive(Arbitrary, Debug)]
struct Input {
    algo: u8,
    max_keys: u8,
    on_full: u8,
    quota: QuotaSpec,
    tiers: Vec<QuotaSpec>,
    ops: Vec<Op>,
}

fuzz_target!(|input: Input| run(input));

type Keyed = KeyedRateLimiter<u64, ManualClock>;

struct Run<'l> {
    algo: Algo,
    t: u128,
    /// The newest reading so far: a reading older than it is a clock stepped back.
    newest: u128,
    m: Table,
    l: &'l Keyed,
    wall: &'l RateLimiter<ManualClock>,
    clock: ManualClock,
    held: Vec<(Reservation<'l>, Booking, u64)>,
    trace: Trace,
}

fn run(input: Input) {
    let algo = Algo::from_byte(input.algo);
    let p0 = input.quota.params(algo, None);
    let period = (!algo.is_bucket()).then_some(p0.period);
    let mut tiers = vec![p0];
    tiers.extend(input.tiers.iter().take(2).map(|q| q.params(algo, period)));
    let max_keys = usize::from(input.max_keys % 8) + 1;
    let (full, policy) = match input.on_full % 3 {
        0 => (Full::Evict, OnFull::Evict),
        1 => (Full::Deny, OnFull::Deny),
        _ => (Full::Allow, OnFull::Allow),
    };
    let clock = ManualClock::new();
    let l = KeyedRateLimiter::<u64>::builder(algo.engine(), p0.quota())
        .max_keys(max_keys)
        .on_full(policy)
        .tiers(tiers[1..].iter().map(Params::quota))
        // A fixed hash seed: an input places its keys alike on every run, so a replay
        // reproduces it and a smoke run explores the same inputs every time.
        .hash_seed(0x7011)
        .clock(clock.clone())
        .build()
        .unwrap_or_else(|e| panic!("{tiers:?} are valid tiers: {e}"));
    let years = Duration::from_secs(100 * 365 * 86_400);
    let wall = RateLimiter::builder(
        Algorithm::TokenBucket,
        Quota::new(255, years).with_burst(255),
    )
    .clock(clock.clone())
    .build()
    .expect("the wall's quota is valid");
    let mut r = Run {
        algo,
        t: 0,
        newest: 0,
        m: Table::new(algo, tiers.clone(), max_keys, full),
        l: &l,
        wall: &wall,
        clock,
        held: Vec::new(),
        trace: Trace::default(),
    };
    r.trace.push(format!(
        "build {algo:?} max_keys({max_keys}) {full:?} tiers {tiers:?}"
    ));
    check::start();
    for op in input.ops.iter().take(96) {
        if check::stopped() {
            break;
        }
        r.step(op);
    }
}

fn same(d: &Decision, e: &Expect) -> bool {
    d.is_allowed() == e.allowed
        && d.remaining() == e.remaining
        && d.reset_after().as_nanos() == e.reset_after
        && d.retry_after().map(|r| r.as_nanos()) == e.retry_after
}

/// What the table did to a request, read off its counters.
#[derive(Debug, PartialEq, Eq)]
enum Fate {
    Normal,
    Evicted,
    Refused,
    Untracked,
}

impl<'l> Run<'l> {
    fn tier(&self, i: u8) -> (usize, Params) {
        let i = usize::from(i) % self.m.tiers.len();
        (i, self.m.tiers[i])
    }

    fn fate(&self, before: &tollgate::Stats) -> Fate {
        let s = self.l.stats();
        match (
            s.evictions - before.evictions,
            s.refused - before.refused,
            s.untracked - before.untracked,
        ) {
            (0, 0, 0) => Fate::Normal,
            (1, 0, 0) => Fate::Evicted,
            (0, 1, 0) => Fate::Refused,
            (0, 0, 1) => Fate::Untracked,
            other => {
                promise(
                    false,
                    table::ROOM,
                    format_args!(
                        "one request changed (evictions, refused, untracked) by {other:?}"
                    ),
                    &self.trace,
                );
                Fate::Normal
            }
        }
    }

    /// Before a request on `key` (a new key when `new`): what the guide allows the table
    /// to do, given the fate it reported. Returns whether the request was decided on the
    /// key's own state.
    fn judge(&mut self, key: u64, new: bool, fate: &Fate, legal: &[u64], active: usize) -> bool {
        let unknown = self.m.any_unknown();
        let t = self.t;
        if *fate == Fate::Normal {
            return true;
        }
        promise(
            new || unknown,
            table::ROOM,
            format_args!("key {key}, which holds state that still says something, was {fate:?}"),
            &self.trace,
        );
        let want = match self.m.full {
            Full::Evict => Fate::Evicted,
            Full::Deny => Fate::Refused,
            Full::Allow => Fate::Untracked,
        };
        promise(
            *fate == want,
            table::ROOM,
            format_args!("a {:?} table reported {fate:?}", self.m.full),
            &self.trace,
        );
        if !unknown {
            let slots = self.m.slots();
            promise(active >= slots, table::ROOM, format_args!("key {key} was {fate:?} while {active} of {slots} slots (max_keys {}) held active keys (the model's keys: {:?})", self.m.max_keys, self.m.keys), &self.trace);
        }
        if *fate != Fate::Evicted {
            return false;
        }
        // Which key went? The one whose peek now reads as a fresh key's.
        let p0 = self.m.p0();
        let (mut gone, mut unsure) = (Vec::new(), Vec::new());
        for (&k, s) in &self.m.keys {
            let Some(s) = s else { continue };
            if k == key || s.is_idle(t.max(self.m.floor), &p0) {
                continue;
            }
            let d = self.l.peek(&k);
            let kept = s.decide(t, 1, &p0).is_some_and(|e| same(&d, &e));
            // An evicted key is missing: decided no earlier than the floor.
            // (Only which key went is read here: a peek measured from the floor, as the
            // engine's missing keys are today, names it too; the waits are checked at
            // the key's own requests, `table::FLOOR`.)
            let fresh = Lim::fresh_at(self.algo, self.m.floor)
                .decide(t, 1, &p0)
                .is_some_and(|e| same(&d, &e))
                || Lim::new(self.algo)
                    .decide(t.max(self.m.floor), 1, &p0)
                    .is_some_and(|e| same(&d, &e));
            match (kept, fresh) {
                (false, true) => gone.push(k),
                (true, true) => unsure.push(k),
                _ => {}
            }
        }
        promise(
            gone.len() <= 1,
            table::EVICT,
            format_args!("one eviction took keys {gone:?}"),
            &self.trace,
        );
        let victim = match (gone.as_slice(), unsure.as_slice()) {
            ([v], _) | ([], [v]) => Some(*v),
            ([], many) if !many.is_empty() => {
                for k in many {
                    self.m.keys.insert(*k, None);
                }
                None
            }
            _ => {
                promise(
                    unknown,
                    table::EVICT,
                    format_args!("an eviction was counted but no tracked key lost its state"),
                    &self.trace,
                );
                None
            }
        };
        if let Some(v) = victim {
            if !unknown {
                let p = self.m.p0();
                let describe = |k: &u64| {
                    let s = self.m.keys[k].as_ref().expect("known");
                    format!("key {k}: {:?} idle at {}", s.s, s.idle_at(&p))
                };
                promise(
                    legal.contains(&v),
                    table::EVICT,
                    format_args!(
                        "evicted {}, where the guide's choice is among {:?}",
                        describe(&v),
                        legal.iter().map(describe).collect::<Vec<_>>()
                    ),
                    &self.trace,
                );
            }
            self.m.keys.remove(&v);
        }
        true
    }

    /// Runs `op` on `key` with the table's bookkeeping: the fate it reports is judged, and
    /// returns whether the key was decided on its own state and, for a refusal, when the
    /// soonest active entry frees up.
    fn keyed<R>(&mut self, key: u64, op: impl FnOnce(&Self) -> R) -> (R, Fate, bool, Option<u128>) {
        let t = self.t;
        // A claim for a missing key ranks the entries no earlier than the floor.
        let tf = t.max(self.m.floor);
        let new = self.m.may_claim(key, t);
        let active = self.m.active(tf).len();
        let legal = if new {
            self.m.legal_victims(tf, key)
        } else {
            Vec::new()
        };
        let soonest = self.m.soonest_idle(tf);
        let before = self.l.stats();
        let r = op(self);
        let after = self.l.stats();
        if after.evictions > before.evictions || after.idle_reclaims > before.idle_reclaims {
            self.m.floor = tf;
        }
        if after.idle_reclaims > before.idle_reclaims {
            self.m.reclaimed(tf, key);
        }
        let fate = self.fate(&before);
        let own = self.judge(key, new, &fate, &legal, active);
        if matches!(fate, Fate::Refused | Fate::Untracked) {
            // Only a missing key is refused or admitted untracked.
            self.m.keys.remove(&key);
            self.m.maybe_gone.remove(&key);
        }
        (r, fate, own, soonest.map(|s| s - t))
    }
}

impl Run<'_> {
    /// A new key's request decided on each of its candidate states (`Table::candidates`):
    /// the one whose answer the engine gave (`fits`), a tie settled by a peek of what
    /// each left; `None` when even that cannot tell (the key is then unknown). A lone
    /// candidate, or none that fits, is returned as is for the caller to compare.
    fn resolve<X>(
        &mut self,
        key: u64,
        cands: Vec<Lim>,
        mut run: impl FnMut(&mut Lim, u128) -> X,
        fits: impl Fn(&X) -> bool,
    ) -> Option<(Lim, X)> {
        let (t, floor) = (self.t, self.m.floor);
        let last = cands.len().saturating_sub(1);
        // (state, answer, fits, fits only as measured from the floor): the last
        // candidate is the missing key's, which the engine may (wrongly) answer with its
        // waits measured from the floor rather than the reading.
        let mut outs: Vec<(Lim, X, bool, bool)> = cands
            .into_iter()
            .enumerate()
            .map(|(i, mut s)| {
                let x = run(&mut s, t);
                let fit = fits(&x);
                let floor_fit = !fit && i == last && t < floor && {
                    let mut f = Lim::new(self.algo);
                    fits(&run(&mut f, floor))
                };
                (s, x, fit, floor_fit)
            })
            .collect();
        if outs.len() > 1 && outs.iter().any(|o| o.2 || o.3) {
            outs.retain(|o| o.2 || o.3);
        }
        if outs.len() > 1 {
            let p0 = self.m.p0();
            let d = self.l.peek_n(&key, 0).expect("0 fits");
            outs.retain(|(s, ..)| {
                s.decide(self.t, 0, &p0).is_some_and(|e| {
                    e.remaining == d.remaining() && e.reset_after == d.reset_after().as_nanos()
                })
            });
            if outs.len() != 1 {
                self.m.keys.insert(key, None);
                self.m.maybe_gone.remove(&key);
                return None;
            }
        }
        self.m.maybe_gone.remove(&key);
        let (s, x, _, floor_fit) = outs.pop()?;
        promise(
            !floor_fit,
            table::FLOOR,
            format_args!(
                "key {key}, missing, was answered with its waits measured from the floor {floor}, not from the reading {t}"
            ),
            &self.trace,
        );
        Some((s, x))
    }
}

#[path = "keyed_ops.rs"]
mod ops;
