//! One `RateLimiter` (every algorithm) on a `ManualClock` against the guide's exact model:
//! check, check_n, peek, peek_n, reserve + cancel, set_quota, check_all with a spent wall.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use std::time::Duration;
use tollgate::{
    check_all, Algorithm, Limit, ManualClock, Quota, RateLimiter, Reservation, ReserveError,
};
use tollgate_fuzz::check::{self, decision, promise, Trace};
use tollgate_fuzz::model::{Algo, Booking, Lim, Params, Reserved};
use tollgate_fuzz::spec::{QuotaSpec, Step, SET_FROM};

#[derive(Arbitrary, Debug)]
enum Op {
    Advance(Step),
    Check,
    CheckN(u8),
    Peek,
    PeekN(u8),
    Reserve { n: u8, max_wait: Step },
    Cancel(u8),
    Keep(u8),
    SetQuota(QuotaSpec),
    CheckAll { n: u8, wall_first: bool },
    CheckAllAlone(u8),
}

#[derive(Arbitrary, Debug)]
struct Input {
    algo: u8,
    quota: QuotaSpec,
    ops: Vec<Op>,
}

fuzz_target!(|input: Input| run(input));

/// A limiter that denies everything: 255 per 100 years, spent.
fn wall(clock: &ManualClock) -> RateLimiter<ManualClock> {
    let years = Duration::from_secs(100 * 365 * 86_400);
    RateLimiter::builder(
        Algorithm::TokenBucket,
        Quota::new(255, years).with_burst(255),
    )
    .clock(clock.clone())
    .build()
    .expect("the wall's quota is valid")
}

fn spend(wall: &RateLimiter<ManualClock>) {
    while wall.peek().is_allowed() {
        let _ = wall.check();
    }
}

fn cost(x: u8) -> u32 {
    1 + u32::from(x % 9)
}

struct Run<'l> {
    algo: Algo,
    p: Params,
    built_limit: u32,
    t: u128,
    /// The newest reading so far: a reading older than it is a clock stepped back.
    newest: u128,
    m: Lim,
    l: &'l RateLimiter<ManualClock>,
    wall: &'l RateLimiter<ManualClock>,
    clock: ManualClock,
    held: Vec<(Reservation<'l>, Booking)>,
    trace: Trace,
}

fn run(input: Input) {
    let algo = Algo::from_byte(input.algo);
    let p = input.quota.params(algo, None);
    let clock = ManualClock::new();
    let l = RateLimiter::builder(algo.engine(), p.quota())
        .clock(clock.clone())
        .build()
        .unwrap_or_else(|e| panic!("{p:?} is a valid quota: {e}"));
    let w = wall(&clock);
    spend(&w);
    let mut r = Run {
        algo,
        p,
        built_limit: p.limit,
        t: 0,
        newest: 0,
        m: Lim::new(algo),
        l: &l,
        wall: &w,
        clock,
        held: Vec::new(),
        trace: Trace::default(),
    };
    r.trace.push(format!("build {algo:?} {p:?}"));
    check::start();
    for op in input.ops.iter().take(96) {
        if check::stopped() {
            break;
        }
        r.step(op);
    }
}

impl<'l> Run<'l> {
    /// A peek after an operation that must have left a given state: the state is compared
    /// at once, so a failure names the operation that broke it.
    fn verify(&mut self, ctx: &str, what: &str) {
        let e = self.m.decide(self.t, 1, &self.p);
        if let (Some(e), Ok(d)) = (e, self.l.peek_n(1)) {
            decision(self.algo, Some(ctx), what, &d, &e, &self.trace);
        }
    }

    fn step(&mut self, op: &Op) {
        let t = self.t;
        let p = self.p;
        match *op {
            Op::Advance(s) if s.unit >= SET_FROM => {
                self.t = s.moved(t, p.period);
                self.clock.set(Duration::from_nanos(self.t as u64));
                self.newest = self.newest.max(self.t);
                check::behind(self.t < self.newest);
                self.trace.push(format!("t={} clock set from {t}", self.t));
            }
            Op::Advance(s) => {
                let d = s.nanos();
                self.t += d;
                self.newest = self.newest.max(self.t);
                check::behind(self.t < self.newest);
                self.clock.advance(Duration::from_nanos(d as u64));
                self.trace.push(format!("t={} advance {d}", self.t));
            }
            Op::Check => {
                let e = self.m.check(t, 1, &p).expect("1 fits");
                let d = self.l.check();
                self.trace
                    .push(format!("t={t} check() -> {}", d.is_allowed()));
                decision(self.algo, None, "check()", &d, &e, &self.trace);
            }
            Op::CheckN(x) => {
                let n = cost(x);
                let e = self.m.check(t, n, &p);
                let d = self.l.check_n(n);
                self.trace.push(format!(
                    "t={t} check_n({n}) -> {:?}",
                    d.map(|d| d.is_allowed())
                ));
                match (e, d) {
                    (Some(e), Ok(d)) => decision(self.algo, None, "check_n", &d, &e, &self.trace),
                    (e, d) => promise(
                        e.is_none() && d.is_err(),
                        check::CANNOT_FIT,
                        format_args!("check_n({n}) gave {d:?}, cap {}", p.cap()),
                        &self.trace,
                    ),
                }
            }
            Op::Peek => {
                let e = self.m.decide(t, 1, &p).expect("1 fits");
                let d = self.l.peek();
                self.trace
                    .push(format!("t={t} peek() -> {}", d.is_allowed()));
                decision(self.algo, Some(check::PEEK), "peek()", &d, &e, &self.trace);
            }
            Op::PeekN(x) => {
                let n = u32::from(x % 10);
                let e = self.m.decide(t, n, &p);
                let d = self.l.peek_n(n);
                self.trace.push(format!(
                    "t={t} peek_n({n}) -> {:?}",
                    d.map(|d| d.remaining())
                ));
                match (e, d) {
                    (Some(e), Ok(d)) if n == 0 => {
                        let what = format!(
                            "peek_n(0): (remaining, reset_after) {:?}, model {:?}",
                            (d.remaining(), d.reset_after().as_nanos()),
                            (e.remaining, e.reset_after)
                        );
                        promise(
                            d.remaining() == e.remaining,
                            check::REMAINING,
                            format_args!("{what}"),
                            &self.trace,
                        );
                        promise(
                            d.reset_after().as_nanos() == e.reset_after,
                            check::RESET,
                            format_args!("{what}"),
                            &self.trace,
                        );
                    }
                    (Some(e), Ok(d)) => {
                        decision(self.algo, Some(check::PEEK), "peek_n", &d, &e, &self.trace)
                    }
                    (e, d) => promise(
                        e.is_none() && d.is_err(),
                        check::CANNOT_FIT,
                        format_args!("peek_n({n}) gave {d:?}, cap {}", p.cap()),
                        &self.trace,
                    ),
                }
            }
            Op::Reserve { n, max_wait } => {
                let n = cost(n);
                let mw = max_wait.nanos();
                let e = self.m.reserve(t, n, mw, &p);
                let got = self.l.reserve(n, Duration::from_nanos(mw as u64));
                self.trace.push(format!(
                    "t={t} reserve({n}, {mw}) -> {:?}",
                    got.as_ref().map(|r| r.wait_time().as_nanos())
                ));
                self.reserved(e, got, mw);
            }
            Op::Cancel(i) => {
                if self.held.is_empty() {
                    return;
                }
                let (res, b) = self.held.remove(usize::from(i) % self.held.len());
                res.cancel();
                self.m.cancel(t, &b, &p);
                self.trace.push(format!("t={t} cancel({b:?})"));
                self.verify(check::CANCEL, "peek_n(1) after cancel");
            }
            Op::Keep(i) => {
                if !self.held.is_empty() {
                    let (res, b) = self.held.remove(usize::from(i) % self.held.len());
                    drop(res);
                    self.trace.push(format!("t={t} drop reservation {}", b.id));
                }
            }
            Op::SetQuota(q) => self.set_quota(q),
            Op::CheckAll { n, wall_first } => self.check_all(cost(n), wall_first),
            Op::CheckAllAlone(x) => {
                let n = cost(x);
                let e = self.m.check(t, n, &p);
                let got = check_all(&[self.l as &dyn Limit], n);
                self.trace.push(format!(
                    "t={t} check_all([l], {n}) -> {:?}",
                    got.as_ref().map(|d| d.is_allowed())
                ));
                match (e, got) {
                    (Some(e), Ok(md)) => {
                        promise(
                            md.is_allowed() == e.allowed,
                            check::admit_quote(self.algo),
                            format_args!("check_all([l]) allowed {}", md.is_allowed()),
                            &self.trace,
                        );
                        decision(
                            self.algo,
                            None,
                            "check_all([l]).decisions()[0]",
                            &md.decisions()[0],
                            &e,
                            &self.trace,
                        );
                    }
                    (e, d) => promise(
                        e.is_none() && d.is_err(),
                        check::CANNOT_FIT,
                        format_args!("check_all({n}) gave {d:?}"),
                        &self.trace,
                    ),
                }
            }
        }
    }

    fn reserved(&mut self, e: Reserved, got: Result<Reservation<'l>, ReserveError>, mw: u128) {
        match (e, got) {
            (Reserved::Ok { wait, booking }, Ok(res)) => {
                promise(
                    res.wait_time().as_nanos() == wait,
                    check::RESERVE,
                    format_args!(
                        "wait_time {} ns, the model books at {wait} ns",
                        res.wait_time().as_nanos()
                    ),
                    &self.trace,
                );
                promise(
                    res.decision().is_allowed(),
                    check::RESERVE,
                    format_args!("a reservation's decision is allowed"),
                    &self.trace,
                );
                self.held.push((res, booking));
            }
            (Reserved::TooLong { wait }, Err(ReserveError::TooLong { wait: w, max_wait })) => {
                promise(
                    w.as_nanos() == wait,
                    check::RESERVE,
                    format_args!("TooLong wait {} ns, the model's {wait} ns", w.as_nanos()),
                    &self.trace,
                );
                promise(
                    max_wait.as_nanos() == mw.min(Reservation::MAX_WAIT.as_nanos()) && w > max_wait,
                    check::TOO_LONG,
                    format_args!("TooLong {{ wait: {w:?}, max_wait: {max_wait:?} }} for a max_wait of {mw} ns"),
                    &self.trace,
                );
            }
            (Reserved::Insufficient, Err(ReserveError::InsufficientCapacity(_))) => {}
            (e, got) => promise(
                false,
                check::RESERVE,
                format_args!(
                    "reserve gave {:?}, the model {e:?}",
                    got.map(|r| r.wait_time())
                ),
                &self.trace,
            ),
        }
    }

    fn set_quota(&mut self, q: QuotaSpec) {
        let t = self.t;
        let fixed_period = (!self.algo.is_bucket()).then_some(self.p.period);
        let np = q.params(self.algo, fixed_period);
        let got = self.l.set_quota(np.quota());
        self.trace
            .push(format!("t={t} set_quota({np:?}) -> {got:?}"));
        if self.algo == Algo::Log && np.limit > self.built_limit {
            let quote = "guide::promises (ring-fixed): \"A sliding log's rings keep the size they were built with (`ConfigError::LogBeyondRing` above it)\"";
            promise(
                got.is_err(),
                quote,
                format_args!("set_quota above the ring gave {got:?}"),
                &self.trace,
            );
            return;
        }
        let quote = if self.algo.is_bucket() {
            check::SET_QUOTA_BUCKET
        } else {
            check::SET_QUOTA_WINDOW
        };
        promise(
            got.is_ok(),
            quote,
            format_args!("set_quota({np:?}) gave {got:?}"),
            &self.trace,
        );
        // A single limiter converts at the change (guide: "a single limiter converts its
        // bucket while deciders wait (one compare-and-swap)").
        self.m.set_quota(t, &self.p, &np);
        self.p = np;
        self.verify(quote, "peek_n(1) after set_quota");
    }

    fn check_all(&mut self, n: u32, wall_first: bool) {
        let t = self.t;
        spend(self.wall);
        let e = self.m.decide(t, n, &self.p);
        let limits: [&dyn Limit; 2] = if wall_first {
            [self.wall, self.l]
        } else {
            [self.l, self.wall]
        };
        let (li, wi) = if wall_first { (1, 0) } else { (0, 1) };
        let got = check_all(&limits, n);
        self.trace.push(format!(
            "t={t} check_all([{}], {n}) -> {:?}",
            if wall_first { "wall, l" } else { "l, wall" },
            got.as_ref().map(|d| d.denied().collect::<Vec<_>>())
        ));
        let Some(e) = e else {
            promise(
                got.is_err(),
                check::CANNOT_FIT,
                format_args!("check_all({n}) above the cap gave {got:?}"),
                &self.trace,
            );
            return;
        };
        let md = match got {
            Ok(md) => md,
            Err(err) => {
                return promise(
                    false,
                    check::CANNOT_FIT,
                    format_args!("check_all({n}) gave {err:?}"),
                    &self.trace,
                )
            }
        };
        // Booked before the wall denied, then rolled back (a leaky bucket books after
        // every other limit, so the wall's denial leaves it only peeked).
        if e.allowed && !wall_first && self.algo != Algo::Leaky {
            self.m.touch(t, &self.p);
        }
        let mut want: Vec<usize> = vec![wi];
        if !e.allowed {
            want.push(li);
        }
        want.sort_unstable();
        let denied: Vec<usize> = md.denied().collect();
        promise(
            !md.is_allowed() && denied == want,
            check::DENIAL_NAMES,
            format_args!("denied {denied:?}, the model {want:?}"),
            &self.trace,
        );
        self.verify(check::DENIAL_NOTHING, "peek_n(1) after a denied check_all");
    }
}
