//! A small `KeyedRateLimiter<u64, ManualClock>` (max_keys 1–8, up to three tiers, every
//! `OnFull`, reset/remove, reserve/cancel, check_all with a spent wall) against the model
//! of what each key would get from its own limiter, plus the README's full-table rules.
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
use tollgate_fuzz::model::{Algo, Booking, Expect, Params, Reserved};
use tollgate_fuzz::spec::{QuotaSpec, Step};

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
        .clock(clock.clone())
        .build()
        .unwrap_or_else(|e| panic!("{tiers:?} are valid tiers: {e}"));
    let years = Duration::from_secs(100 * 365 * 86_400);
    let wall = RateLimiter::builder(Algorithm::TokenBucket, Quota::new(255, years).with_burst(255))
        .clock(clock.clone())
        .build()
        .expect("the wall's quota is valid");
    let mut r = Run {
        algo,
        t: 0,
        m: Table::new(algo, tiers.clone(), max_keys, full),
        l: &l,
        wall: &wall,
        clock,
        held: Vec::new(),
        trace: Trace::default(),
    };
    r.trace.push(format!("build {algo:?} max_keys({max_keys}) {full:?} tiers {tiers:?}"));
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
        match (s.evictions - before.evictions, s.refused - before.refused, s.untracked - before.untracked) {
            (0, 0, 0) => Fate::Normal,
            (1, 0, 0) => Fate::Evicted,
            (0, 1, 0) => Fate::Refused,
            (0, 0, 1) => Fate::Untracked,
            other => {
                promise(false, table::ROOM, format_args!("one request changed (evictions, refused, untracked) by {other:?}"), &self.trace);
                Fate::Normal
            }
        }
    }

    /// Before a request on `key` (a new key when `new`): what the README allows the table
    /// to do, given the fate it reported. Returns whether the request was decided on the
    /// key's own state.
    fn judge(&mut self, key: u64, new: bool, fate: &Fate, legal: &[u64], active: usize) -> bool {
        let unknown = self.m.any_unknown();
        let t = self.t;
        if *fate == Fate::Normal {
            return true;
        }
        promise(new || unknown, table::ROOM, format_args!("key {key}, which holds state that still says something, was {fate:?}"), &self.trace);
        let want = match self.m.full {
            Full::Evict => Fate::Evicted,
            Full::Deny => Fate::Refused,
            Full::Allow => Fate::Untracked,
        };
        promise(*fate == want, table::ROOM, format_args!("a {:?} table reported {fate:?}", self.m.full), &self.trace);
        if !unknown {
            let slots = self.m.slots();
            promise(active >= slots, table::ROOM, format_args!("key {key} was {fate:?} while {active} of {slots} slots (max_keys {}) held active keys", self.m.max_keys), &self.trace);
        }
        if *fate != Fate::Evicted {
            return false;
        }
        // Which key went? The one whose peek now reads as a fresh key's.
        let p0 = self.m.p0();
        let (mut gone, mut unsure) = (Vec::new(), Vec::new());
        for (&k, s) in &self.m.keys {
            let Some(s) = s else { continue };
            if k == key || s.is_idle(t, &p0) {
                continue;
            }
            let d = self.l.peek(&k);
            let kept = s.decide(t, 1, &p0).is_some_and(|e| same(&d, &e));
            let fresh = tollgate_fuzz::model::Lim::new(self.algo).decide(t, 1, &p0).is_some_and(|e| same(&d, &e));
            match (kept, fresh) {
                (false, true) => gone.push(k),
                (true, true) => unsure.push(k),
                _ => {}
            }
        }
        promise(gone.len() <= 1, table::EVICT, format_args!("one eviction took keys {gone:?}"), &self.trace);
        let victim = match (gone.as_slice(), unsure.as_slice()) {
            ([v], _) | ([], [v]) => Some(*v),
            ([], many) if !many.is_empty() => {
                for k in many {
                    self.m.keys.insert(*k, None);
                }
                None
            }
            _ => {
                promise(unknown, table::EVICT, format_args!("an eviction was counted but no tracked key lost its state"), &self.trace);
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
                    format_args!("evicted {}, where the README's choice is among {:?}", describe(&v), legal.iter().map(describe).collect::<Vec<_>>()),
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
        let new = self.m.is_new(key, t);
        let active = self.m.active(t).len();
        let legal = if new { self.m.legal_victims(t, key) } else { Vec::new() };
        let soonest = self.m.soonest_idle(t);
        let before = self.l.stats();
        let r = op(self);
        let fate = self.fate(&before);
        let own = self.judge(key, new, &fate, &legal, active);
        (r, fate, own, soonest.map(|s| s - t))
    }
}

impl<'l> Run<'l> {
    fn step(&mut self, op: &Op) {
        let t = self.t;
        match *op {
            Op::Advance(s) => {
                let d = s.nanos();
                self.t += d;
                self.clock.advance(Duration::from_nanos(d as u64));
                self.trace.push(format!("t={} advance {d}", self.t));
            }
            Op::Check(r) => self.check(r),
            Op::Peek(r) => self.peek(r),
            Op::Reserve(r, mw) => self.reserve(r, mw.nanos()),
            Op::Cancel(i) => {
                if self.held.is_empty() {
                    return;
                }
                let (res, b, key) = self.held.remove(usize::from(i) % self.held.len());
                res.cancel();
                self.trace.push(format!("t={t} cancel(key {key}, {b:?})"));
                let p = self.m.p0();
                if let Some(Some(s)) = self.m.keys.get_mut(&key) {
                    s.cancel(t, &b, &p);
                }
                self.verify(key, check::CANCEL, "peek(key) after cancel");
            }
            Op::Keep(i) => {
                if !self.held.is_empty() {
                    let (res, _, key) = self.held.remove(usize::from(i) % self.held.len());
                    drop(res);
                    self.trace.push(format!("t={t} drop a reservation of key {key}"));
                }
            }
            Op::Reset(k) | Op::Remove(k) => {
                let key = u64::from(k % 10);
                let reset = matches!(op, Op::Reset(_));
                let _ = if reset { self.l.reset(&key) } else { self.l.remove(&key) };
                self.trace.push(format!("t={t} {}({key})", if reset { "reset" } else { "remove" }));
                let f = self.m.fresh();
                self.m.keys.insert(key, Some(f));
                self.verify(key, table::RESET, "peek(key) after reset/remove");
            }
            Op::SetQuota(i, q) => {
                let (i, old) = self.tier(i);
                let period = (!self.algo.is_bucket()).then_some(old.period);
                let np = q.params(self.algo, period);
                let tier = self.l.tier(i).expect("a configured tier");
                let got = tier.set_quota(np.quota());
                self.trace.push(format!("t={t} tier({i}).set_quota({np:?}) -> {got:?}"));
                if self.algo == Algo::Log && got.is_err() {
                    return; // MODEL CHOICE: the ring's size for tiers is not stated.
                }
                let quote = if self.algo.is_bucket() { check::SET_QUOTA_BUCKET } else { check::SET_QUOTA_WINDOW };
                promise(got.is_ok(), quote, format_args!("tier({i}).set_quota({np:?}) gave {got:?}"), &self.trace);
                self.m.tiers[i] = np;
            }
            Op::CheckAll(r, wall_first) => self.check_all(r, wall_first),
        }
    }

    /// A peek on `key` after an operation that must have left its state as the model says.
    fn verify(&mut self, key: u64, ctx: &str, what: &str) {
        let t = self.t;
        let p = self.m.p0();
        if self.m.is_new(key, t) && self.m.active(t).len() >= self.m.max_keys {
            return; // a peek of a new key in a full table: not stated
        }
        let Some(Some(s)) = self.m.keys.get(&key).cloned().or(Some(Some(self.m.fresh()))) else {
            return;
        };
        let e = if self.m.is_new(key, t) { self.m.fresh().decide(t, 1, &p) } else { s.decide(t, 1, &p) };
        if let (Some(e), Ok(d)) = (e, self.l.peek_n(&key, 1)) {
            decision(self.algo, Some(ctx), what, &d, &e, &self.trace);
        }
    }

    fn check(&mut self, r: Req) {
        let t = self.t;
        let key = u64::from(r.key % 10);
        let (i, p) = self.tier(r.tier);
        let n = 1 + u32::from(r.n % 9);
        if n > p.cap() {
            let got = self.l.tier(i).expect("tier").check_n(&key, n);
            self.trace.push(format!("t={t} tier({i}).check_n({key}, {n}) -> {got:?}"));
            return promise(got.is_err(), check::CANNOT_FIT, format_args!("check_n({n}) above the cap gave {got:?}"), &self.trace);
        }
        let (got, fate, own, soonest) = self.keyed(key, |s| s.l.tier(i).expect("tier").check_n(&key, n));
        self.trace.push(format!("t={t} tier({i}).check_n({key}, {n}) -> {:?} {fate:?}", got.map(|d| d.is_allowed())));
        let d = match got {
            Ok(d) => d,
            Err(e) => return promise(false, check::CANNOT_FIT, format_args!("check_n({n}) gave {e:?}"), &self.trace),
        };
        self.fated(&fate, &d, soonest, &p);
        if !own {
            return;
        }
        if let Some(s) = self.m.state_for(key, t) {
            let e = s.check(t, n, &p).expect("fits");
            decision(self.algo, None, "check_n(key)", &d, &e, &self.trace);
        }
    }

    /// A refused or untracked request's decision.
    fn fated(&self, fate: &Fate, d: &Decision, soonest: Option<u128>, p: &Params) {
        match fate {
            Fate::Refused => {
                let ra = d.retry_after().map(|r| r.as_nanos());
                promise(!d.is_allowed() && (self.m.any_unknown() || ra == soonest), table::REFUSED, format_args!("refused with {d:?}, the soonest active entry frees up in {soonest:?} ns"), &self.trace);
                promise(d.limit() == p.limit && d.burst() == p.burst, "README: \"A refusal by a full table reports the deciding tier's limit and burst.\"", format_args!("{d:?} under {p:?}"), &self.trace);
            }
            Fate::Untracked => promise(d.is_allowed(), table::UNTRACKED, format_args!("{d:?}"), &self.trace),
            _ => {}
        }
    }

    fn peek(&mut self, r: Req) {
        let t = self.t;
        let key = u64::from(r.key % 10);
        let (i, p) = self.tier(r.tier);
        let n = u32::from(r.n % 10);
        let got = self.l.tier(i).expect("tier").peek_n(&key, n);
        self.trace.push(format!("t={t} tier({i}).peek_n({key}, {n}) -> {:?}", got.map(|d| (d.is_allowed(), d.remaining()))));
        let new = self.m.is_new(key, t);
        if new && self.m.active(t).len() >= self.m.max_keys {
            return; // what a peek of a new key in a full table answers is not stated
        }
        let e = match self.m.keys.get(&key) {
            Some(None) => return,
            Some(Some(s)) if !new => s.decide(t, n, &p),
            _ => self.m.fresh().decide(t, n, &p),
        };
        match (e, got) {
            (Some(e), Ok(d)) if n == 0 => {
                let what = format!("peek_n(key, 0): (remaining, reset_after) {:?}, model {:?}", (d.remaining(), d.reset_after().as_nanos()), (e.remaining, e.reset_after));
                promise(d.remaining() == e.remaining, check::REMAINING, format_args!("{what}"), &self.trace);
                promise(d.reset_after().as_nanos() == e.reset_after, check::RESET, format_args!("{what}"), &self.trace);
            }
            (Some(e), Ok(d)) => decision(self.algo, Some(check::PEEK), "peek_n(key)", &d, &e, &self.trace),
            (e, d) => promise(e.is_none() && d.is_err(), check::CANNOT_FIT, format_args!("peek_n({n}) gave {d:?}"), &self.trace),
        }
    }

    fn reserve(&mut self, r: Req, mw: u128) {
        let t = self.t;
        let key = u64::from(r.key % 10);
        let (i, p) = self.tier(r.tier);
        let n = 1 + u32::from(r.n % 9);
        if n > p.cap() {
            let got = self.l.tier(i).expect("tier").reserve(&key, n, Duration::from_nanos(mw as u64));
            return promise(matches!(got, Err(ReserveError::InsufficientCapacity(_))), check::CANNOT_FIT, format_args!("reserve({n}) above the cap gave {:?}", got.map(|r| r.wait_time())), &self.trace);
        }
        let l = self.l;
        let (got, fate, own, soonest) = self.keyed(key, |_| l.tier(i).expect("tier").reserve(&key, n, Duration::from_nanos(mw as u64)));
        self.trace.push(format!("t={t} tier({i}).reserve({key}, {n}, {mw}) -> {:?} {fate:?}", got.as_ref().map(|r| r.wait_time().as_nanos())));
        match fate {
            Fate::Refused => {
                let ok = matches!(got, Err(ReserveError::Refused { retry_after }) if self.m.any_unknown() || Some(retry_after.as_nanos()) == soonest);
                return promise(ok, table::REFUSED, format_args!("reserve gave {:?}; soonest {soonest:?}", got.map(|r| r.wait_time())), &self.trace);
            }
            Fate::Untracked => {
                return promise(got.as_ref().is_ok_and(|r| r.wait_time().is_zero()), table::UNTRACKED, format_args!("reserve gave {:?}", got.map(|r| r.wait_time())), &self.trace);
            }
            _ => {}
        }
        if !own {
            return;
        }
        let Some(s) = self.m.state_for(key, t) else { return };
        let e = s.reserve(t, n, mw, &p);
        match (e, got) {
            (Reserved::Ok { wait, booking }, Ok(res)) => {
                promise(res.wait_time().as_nanos() == wait, check::RESERVE, format_args!("wait_time {:?}, the model books at {wait} ns", res.wait_time()), &self.trace);
                self.held.push((res, booking, key));
            }
            (Reserved::TooLong { wait }, Err(ReserveError::TooLong { wait: w, max_wait })) => {
                promise(w.as_nanos() == wait, check::RESERVE, format_args!("TooLong wait {w:?}, the model's {wait} ns"), &self.trace);
                promise(w > max_wait, check::TOO_LONG, format_args!("TooLong {{ wait: {w:?}, max_wait: {max_wait:?} }}"), &self.trace);
            }
            (e, got) => promise(false, check::RESERVE, format_args!("reserve gave {:?}, the model {e:?}", got.map(|r| r.wait_time())), &self.trace),
        }
    }

    fn check_all(&mut self, r: Req, wall_first: bool) {
        let t = self.t;
        let key = u64::from(r.key % 10);
        let (i, p) = self.tier(r.tier);
        let n = 1 + u32::from(r.n % 9);
        while self.wall.peek().is_allowed() {
            let _ = self.wall.check();
        }
        let (l, wall) = (self.l, self.wall);
        let run = |_: &Self| {
            let kl = l.tier(i).expect("tier").limit(&key);
            let limits: [&dyn Limit; 2] = if wall_first { [wall, &kl] } else { [&kl, wall] };
            check_all(&limits, n)
        };
        if n > p.cap() {
            let got = run(self);
            return promise(got.is_err(), check::CANNOT_FIT, format_args!("check_all({n}) above the cap gave {got:?}"), &self.trace);
        }
        let (got, fate, own, _) = if wall_first { (run(self), Fate::Normal, false, None) } else { self.keyed(key, run) };
        self.trace.push(format!(
            "t={t} check_all([{}], {n}) (tier {i}) -> {:?} {fate:?}",
            if wall_first { format!("wall, key {key}") } else { format!("key {key}, wall") },
            got.as_ref().map(|d| d.denied().collect::<Vec<_>>())
        ));
        let md = match got {
            Ok(md) => md,
            Err(e) => return promise(false, check::CANNOT_FIT, format_args!("check_all gave {e:?}"), &self.trace),
        };
        promise(!md.is_allowed(), check::DENIAL_NOTHING, format_args!("check_all with a spent wall was admitted"), &self.trace);
        if own && fate == Fate::Normal {
            // MODEL CHOICE: the booking's conversion to the tier's rate stays; nothing else.
            if let Some(s) = self.m.state_for(key, t) {
                s.convert(t, &p);
            }
        }
        self.verify(key, check::DENIAL_NOTHING, "peek(key) after a denied check_all");
    }
}
