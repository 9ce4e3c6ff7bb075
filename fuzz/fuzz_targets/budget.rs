//! Token budgets on every algorithm, one `RateLimiter` or a small keyed table with a
//! second tier, on a `ManualClock`: charge, charge_owing, `Charge::give_back`, the
//! stateless give_back, check_n, peek, set_quota, reset/remove, against the guide's
//! model (`tollgate_fuzz::model::budget`).
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use std::time::Duration;
use tollgate::{Charge, Decision, KeyedRateLimiter, ManualClock, RateLimiter};
use tollgate_fuzz::budget::{self as q, Under};
use tollgate_fuzz::check::{self, decision, promise, Trace};
use tollgate_fuzz::model::budget::{Budget, Rec};
use tollgate_fuzz::model::{Algo, Params};
use tollgate_fuzz::spec::{QuotaSpec, Step, SET_FROM};

#[derive(Arbitrary, Debug)]
enum Op {
    Advance(Step),
    Check { key: u8, n: u8 },
    Peek { key: u8 },
    Charge { key: u8, n: u8 },
    ChargeOwing { key: u8, n: u8, max_owed: u8 },
    GiveBack { key: u8, n: u8 },
    Refund { i: u8, n: u8 },
    Drop(u8),
    SetQuota(QuotaSpec),
    Reset { key: u8 },
    Remove { key: u8 },
}

#[derive(Arbitrary, Debug)]
struct Input {
    algo: u8,
    quota: QuotaSpec,
    /// `Some`: a keyed table with this second tier; `None`: one limiter.
    tier: Option<QuotaSpec>,
    ops: Vec<Op>,
}

fuzz_target!(|input: Input| run(input));

fn run(input: Input) {
    let algo = Algo::from_byte(input.algo);
    let p0 = q::params(&input.quota, algo, None);
    let clock = ManualClock::new();
    match input.tier {
        None => {
            let l = RateLimiter::builder(algo.engine(), p0.quota())
                .clock(clock.clone())
                .build()
                .unwrap_or_else(|e| panic!("{p0:?} is a valid quota: {e}"));
            Run::new(algo, vec![p0], Under::One(&l), clock).go(&input.ops);
        }
        Some(t1) => {
            let fixed = (!algo.is_bucket()).then_some(p0.period);
            let p1 = q::params(&t1, algo, fixed);
            let l = KeyedRateLimiter::<u64, _>::builder(algo.engine(), p0.quota())
                .tiers([p1.quota()])
                .max_keys(q::MAX_KEYS)
                .clock(clock.clone())
                .build()
                .unwrap_or_else(|e| panic!("{p0:?}, {p1:?} are valid tiers: {e}"));
            Run::new(algo, vec![p0, p1], Under::Many(&l), clock).go(&input.ops);
        }
    }
}

struct Run<'l> {
    algo: Algo,
    tiers: Vec<Params>,
    built_limit: u32,
    t: u128,
    /// The newest reading so far: a reading older than it is a clock stepped back.
    newest: u128,
    u: Under<'l>,
    /// One model per key (a single limiter is key 0).
    m: Vec<Budget>,
    clock: ManualClock,
    held: Vec<(Charge<'l>, Rec, usize)>,
    trace: Trace,
}

impl<'l> Run<'l> {
    fn new(algo: Algo, tiers: Vec<Params>, u: Under<'l>, clock: ManualClock) -> Self {
        let ring = tiers.iter().map(|p| p.limit).max().unwrap_or(1);
        let keys = if matches!(u, Under::One(_)) {
            1
        } else {
            q::KEYS
        };
        Run {
            algo,
            built_limit: tiers[0].limit,
            tiers,
            t: 0,
            newest: 0,
            u,
            m: (0..keys).map(|_| Budget::new(algo, ring)).collect(),
            clock,
            held: Vec::new(),
            trace: Trace::default(),
        }
    }

    fn go(mut self, ops: &[Op]) {
        self.trace.push(format!(
            "build {:?} {:?} {}",
            self.algo,
            self.tiers,
            if self.u.keyed() { "keyed" } else { "single" }
        ));
        check::start();
        for op in ops.iter().take(96) {
            if check::stopped() {
                break;
            }
            self.step(op);
        }
    }

    /// The key and the tier a byte names.
    fn key(&self, b: u8) -> (usize, usize) {
        let k = usize::from(b) % self.m.len();
        let tier = usize::from(b / 16) % self.tiers.len();
        (k, tier)
    }

    /// Compares `d` with the model's decision of a request of `n` now (the log's bound
    /// only, while its model is loose).
    fn compare(&self, k: usize, tier: usize, what: &str, d: &Decision, n: u32, ctx: &str) {
        let p = self.tiers[tier];
        let m = &self.m[k];
        if m.exact() {
            let e = m.decide(self.t, n, &p);
            decision(self.algo, Some(ctx), what, d, &e, &self.trace);
        } else {
            promise(
                !d.is_allowed() || m.log_room(self.t, n, &p),
                q::LOG_TRULY_HELD,
                format_args!("{what}: admitted {n} past what the log truly holds"),
                &self.trace,
            );
        }
    }

    /// After an operation on key `k`: its state, as a peek under each tier sees it.
    fn verify(&mut self, k: usize, ctx: &str) {
        for tier in 0..self.tiers.len() {
            let d = self.u.peek(k, tier);
            self.compare(
                k,
                tier,
                &format!("peek() under tier {tier} after it"),
                &d,
                1,
                ctx,
            );
        }
    }

    fn step(&mut self, op: &Op) {
        let t = self.t;
        for m in self.m.iter_mut() {
            m.settle(t, &self.tiers[0]);
        }
        match *op {
            Op::Advance(s) if s.unit >= SET_FROM => {
                self.t = s.moved(t, self.tiers[0].period);
                self.clock.set(Duration::from_nanos(self.t as u64));
                self.newest = self.newest.max(self.t);
                check::behind(self.t < self.newest);
                self.trace.push(format!("t={} clock set from {t}", self.t));
            }
            Op::Advance(s) => {
                let d = s.nanos() % (3 * self.tiers[0].period);
                self.t += d;
                self.newest = self.newest.max(self.t);
                check::behind(self.t < self.newest);
                self.clock.advance(Duration::from_nanos(d as u64));
                self.trace.push(format!("t={} advance {d}", self.t));
            }
            Op::Check { key, n } => {
                let (k, tier) = self.key(key);
                let p = self.tiers[tier];
                let n = u32::from(n) % p.cap() + 1;
                let d = self.u.check_n(k, tier, n);
                self.trace.push(format!(
                    "t={t} key {k} tier {tier} check_n({n}) -> {}",
                    d.is_allowed()
                ));
                self.compare(k, tier, "check_n", &d, n, check::admit_quote(self.algo));
                let m = &mut self.m[k];
                if m.exact() {
                    m.check(t, n, &p);
                } else if d.is_allowed() {
                    // The truth: what the engine admitted is held.
                    m.force(t, n, &p);
                }
            }
            Op::Peek { key } => {
                let (k, tier) = self.key(key);
                let d = self.u.peek(k, tier);
                self.trace.push(format!(
                    "t={t} key {k} tier {tier} peek() -> {}",
                    d.is_allowed()
                ));
                self.compare(k, tier, "peek()", &d, 1, check::PEEK);
            }
            Op::Charge { key, n } => self.charge(key, n, None),
            Op::ChargeOwing { key, n, max_owed } => self.charge(key, n, Some(max_owed)),
            Op::GiveBack { key, n } => {
                let (k, tier) = self.key(key);
                let p = self.tiers[tier];
                let n = u32::from(n) % (3 * p.cap() + 3);
                let g = self.u.give_back(k, tier, n);
                self.trace
                    .push(format!("t={t} key {k} tier {tier} give_back({n}) -> {g}"));
                let m = &mut self.m[k];
                match m.give_back(t, n, &p) {
                    Some(want) => promise(
                        g == want,
                        q::GIVE_BACK,
                        format_args!("give_back({n}) gave {g}, the model {want}"),
                        &self.trace,
                    ),
                    None => {
                        promise(
                            g <= n,
                            q::GIVE_BACK,
                            format_args!("give_back({n}) gave {g}"),
                            &self.trace,
                        );
                        m.gave(g, &p);
                    }
                }
                self.verify(k, q::GIVE_BACK);
            }
            Op::Refund { i, n } => {
                if self.held.is_empty() {
                    return;
                }
                let i = usize::from(i) % self.held.len();
                let (c, r, k) = &mut self.held[i];
                let k = *k;
                // Parts of up to the whole cost and one more.
                let n = (u64::from(n) % (u64::from(r.taken) + 2)) as u32;
                c.give_back(n);
                let tier = 0;
                self.m[k].refund(t, r, n, &self.tiers[tier]);
                self.trace.push(format!(
                    "t={t} key {k} charge #{} give_back({n}) (given {} of {})",
                    r.id, r.given, r.taken
                ));
                self.verify(k, q::REFUND);
            }
            Op::Drop(i) => {
                if !self.held.is_empty() {
                    let i = usize::from(i) % self.held.len();
                    self.held.remove(i);
                }
            }
            Op::SetQuota(spec) => self.set_quota(spec),
            Op::Reset { key } => {
                let (k, _) = self.key(key);
                if !self.u.keyed() {
                    return;
                }
                self.u.reset(k);
                self.m[k].reset();
                self.trace.push(format!("t={t} key {k} reset"));
                self.verify(k, q::FRESH);
            }
            Op::Remove { key } => {
                let (k, _) = self.key(key);
                if self.u.remove(k) {
                    self.m[k].reset();
                    self.trace.push(format!("t={t} key {k} remove"));
                    self.verify(k, q::FRESH);
                }
            }
        }
    }

    fn charge(&mut self, key: u8, n: u8, max_owed: Option<u8>) {
        let t = self.t;
        let (k, tier) = self.key(key);
        let p = self.tiers[tier];
        // Buckets: a bound byte from 240 up asks for a bound near `u32::MAX` (and a cost
        // byte from 128 up, a cost near it), so that such charges repeated, a smaller
        // burst (`set_quota`, the other tier) or a slower rate reach debts past 2^32
        // requests (issue 37). The windows' counts stay within their fields.
        let huge = self.algo.is_bucket() && max_owed.is_some_and(|m| m >= 240);
        let n = if huge && n >= 128 {
            u32::MAX - u32::from(n & 7)
        } else {
            u32::from(n) % (3 * p.cap() + 3)
        };
        let bound = max_owed.map(|m| {
            if huge {
                u32::MAX - u32::from(255 - m)
            } else {
                u32::from(m) % (2 * p.cap() + 2)
            }
        });
        let c = self.u.charge(k, tier, n, bound);
        self.trace.push(format!(
            "t={t} key {k} tier {tier} charge_owing({n}, {bound:?}) -> taken {} owed {} dropped {}",
            c.taken(),
            c.owed(),
            c.dropped()
        ));
        let m = &mut self.m[k];
        let exact = m.exact();
        let (taken, owed, rec) = m.charge(t, n, bound.unwrap_or(p.cap()), &p);
        let quote = if bound.is_some() { q::BOUND } else { q::CHARGE };
        promise(
            c.tracked() && c.taken() == taken && c.dropped() == n - taken,
            quote,
            format_args!(
                "charge_owing({n}, {bound:?}): (taken, dropped) ({}, {}), the model ({taken}, {})",
                c.taken(),
                c.dropped(),
                n - taken
            ),
            &self.trace,
        );
        if exact {
            promise(
                c.owed() == owed && c.fit() == (owed == 0),
                quote,
                format_args!(
                    "charge_owing({n}, {bound:?}): owed {} (fit {}), the model {owed}",
                    c.owed(),
                    c.fit()
                ),
                &self.trace,
            );
        }
        let d = c.decision();
        self.compare(k, tier, "Charge::decision()", &d, 1, q::CHARGE);
        self.held.push((c, rec, k));
        if self.held.len() > 8 {
            self.held.remove(0);
        }
        self.verify(k, quote);
    }

    fn set_quota(&mut self, spec: QuotaSpec) {
        let Under::One(l) = self.u else { return };
        let t = self.t;
        let fixed = (!self.algo.is_bucket()).then_some(self.tiers[0].period);
        let np = q::params(&spec, self.algo, fixed);
        if self.algo == Algo::Log && np.limit > self.built_limit {
            return;
        }
        let got = l.set_quota(np.quota());
        self.trace
            .push(format!("t={t} set_quota({np:?}) -> {got:?}"));
        promise(
            got.is_ok(),
            check::SET_QUOTA_WINDOW,
            format_args!("set_quota({np:?}) gave {got:?}"),
            &self.trace,
        );
        self.m[0].convert(t, &np);
        // A bucket that owes nothing at a change of rate is written as full at the change.
        if self.algo.is_bucket() && self.tiers[0].t() != np.t() {
            self.m[0].tat = self.m[0].tat.max(t);
            self.m[0].wt = np.t();
        }
        self.tiers[0] = np;
        self.verify(0, check::SET_QUOTA_BUCKET);
    }
}
