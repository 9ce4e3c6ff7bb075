//! Raw configurations: limits near `u32::MAX`, periods from 1 ns to past the horizon,
//! bursts, costs that can never fit, clocks near their horizon. Never a panic; a
//! `ConfigError` exactly where the README says refused; then the first decisions against
//! the model (exactly while every time involved stays below the horizon, otherwise the
//! basic promises only).
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use std::time::Duration;
use tollgate::{Clock, ManualClock, Quota, RateLimiter, Reservation, ReserveError};
use tollgate_fuzz::check::{self, decision, promise, Trace};
use tollgate_fuzz::model::{Algo, Lim, Params, Reserved, HORIZON};

const BOUNDS: &str = "guide::promises (zero): \"A zero limit, period or burst is refused\"; (window-burst): \"A burst on a window algorithm is refused\"; (bucket-rate): \"A bucket rate of more than one request per nanosecond is refused\"; (span): \"`burst·T` or the period beyond 146 years is refused\"; (window-layout): \"the period must exceed `2^(c−1)` ns for `FixedWindow`, respectively `2^(2c−1)` ns for `SlidingWindow`\"; (log-limit): \"`SlidingLog` limit above 65,536 is refused\"";

#[derive(Arbitrary, Debug)]
enum Num {
    Small(u8),
    NearMax(u8),
    Pow2(u8),
    Any(u64),
}

impl Num {
    fn get(&self, max: u64) -> u64 {
        match *self {
            Num::Small(x) => u64::from(x),
            Num::NearMax(x) => max - u64::from(x).min(max),
            Num::Pow2(x) => {
                let p = 1u64 << (x % 64);
                if x & 64 == 0 {
                    p
                } else {
                    p.saturating_add(1)
                }
            }
            Num::Any(x) => x,
        }
        .min(max)
    }
}

#[derive(Arbitrary, Debug)]
enum Op {
    CheckN(Num),
    Reserve(Num, Num),
    Advance(Num),
    SetQuota(Num, Num, Option<Num>),
}

#[derive(Arbitrary, Debug)]
struct Input {
    algo: u8,
    limit: Num,
    period: Num,
    burst: Option<Num>,
    start: Num,
    ops: Vec<Op>,
}

fuzz_target!(|input: Input| run(input));

/// The README's refusals, in order.
fn refused(algo: Algo, limit: u64, period: u64, burst: Option<u64>) -> Option<&'static str> {
    let b = burst.unwrap_or(limit);
    if limit == 0 || period == 0 || b == 0 {
        return Some("zero limit, period or burst");
    }
    if !algo.is_bucket() && b != limit {
        return Some("a burst on a window algorithm");
    }
    if algo.is_bucket() && limit > period {
        return Some("a bucket rate of more than one request per nanosecond");
    }
    let t = u128::from(period).div_ceil(u128::from(limit));
    if u128::from(period) > HORIZON || (algo.is_bucket() && u128::from(b) * t > HORIZON) {
        return Some("`burst·T` or the period beyond 146 years");
    }
    let c = 64 - limit.leading_zeros();
    let p2 = u128::from(period) * 2;
    match algo {
        Algo::Fixed if p2 <= 1u128 << c => Some("FixedWindow: the period must exceed 2^(c−1) ns"),
        Algo::Sliding if p2 <= 1u128 << (2 * c) => {
            Some("SlidingWindow: the period must exceed 2^(2c−1) ns")
        }
        Algo::Log if limit > 65_536 => Some("a `SlidingLog` limit above 65,536"),
        _ => None,
    }
}

fn run(input: Input) {
    let algo = Algo::from_byte(input.algo);
    // TOLLGATE_FUZZ_ALGOS=Token,Leaky: only these algorithms (for hunting one bug while
    // another one's engine panic would win every minimization).
    if let Ok(only) = std::env::var("TOLLGATE_FUZZ_ALGOS") {
        if !only.split(',').any(|a| a == format!("{algo:?}")) {
            return;
        }
    }
    let limit = input.limit.get(u64::from(u32::MAX));
    let period = input.period.get(u64::MAX);
    let burst = input.burst.as_ref().map(|b| b.get(u64::from(u32::MAX)));
    let mut q = Quota::new(limit as u32, Duration::from_nanos(period));
    if let Some(b) = burst {
        q = q.with_burst(b as u32);
    }
    let clock = ManualClock::new();
    let start = input.start.get(u64::MAX);
    clock.set(Duration::from_nanos(start));
    let mut trace = Trace::default();
    trace.push(format!(
        "build {algo:?} limit {limit} period {period} ns burst {burst:?}, clock at {start} ns"
    ));
    let built = RateLimiter::builder(algo.engine(), q)
        .clock(clock.clone())
        .build();
    let why = refused(algo, limit, period, burst);
    promise(
        built.is_err() == why.is_some(),
        BOUNDS,
        format_args!(
            "build gave {:?}; the README: {}",
            built.as_ref().err(),
            why.unwrap_or("accepted")
        ),
        &trace,
    );
    let Ok(l) = built else { return };
    let mut p = Params {
        algo,
        limit: limit as u32,
        period: u128::from(period),
        burst: burst.unwrap_or(limit) as u32,
    };
    let mut m = Lim::new(algo);
    let mut t = u128::from(start).min(HORIZON);
    let mut held = Vec::new();
    let mut newest_t = t;
    check::start();
    for op in input.ops.iter().take(8) {
        if check::stopped() {
            break;
        }
        // Exact while every time the model forms stays below the horizon.
        let exact = m.below_horizon() && t + 4 * p.period + u128::from(p.cap()) * p.t() < HORIZON;
        match op {
            Op::SetQuota(nl, np, nb) => {
                let (nl, np, nb) = (
                    nl.get(u64::from(u32::MAX)),
                    np.get(u64::MAX),
                    nb.as_ref().map(|b| b.get(u64::from(u32::MAX))),
                );
                let mut nq = Quota::new(nl as u32, Duration::from_nanos(np));
                if let Some(b) = nb {
                    nq = nq.with_burst(b as u32);
                }
                let got = l.set_quota(nq);
                trace.push(format!(
                    "t={t} set_quota(limit {nl}, period {np} ns, burst {nb:?}) -> {got:?}"
                ));
                let why = refused(algo, nl, np, nb).or_else(|| match algo {
                    Algo::Fixed | Algo::Sliding if u128::from(np) != p.period => Some("README: \"the period itself is fixed at build (`ConfigError::PeriodChange`)\""),
                    Algo::Log if nl > limit => Some("README: \"its rings keep the size they were built with (`ConfigError::LogBeyondRing` above it)\""),
                    _ => None,
                });
                if algo == Algo::Log && u128::from(np) != p.period && why.is_none() {
                    break; // a log's period change is not stated: stop here whatever the answer
                }
                promise(
                    got.is_err() == why.is_some(),
                    BOUNDS,
                    format_args!(
                        "set_quota gave {got:?}; the README: {}",
                        why.unwrap_or("accepted")
                    ),
                    &trace,
                );
                if got.is_err() {
                    continue;
                }
                let np = Params {
                    algo,
                    limit: nl as u32,
                    period: u128::from(np),
                    burst: nb.unwrap_or(nl) as u32,
                };
                m.set_quota(t, &p, &np);
                p = np;
            }
            Op::Advance(Num::Pow2(x)) if x & 128 != 0 => {
                // A step back (bit 7 of a power of two, unused before): by 2^k ns, a
                // skew to a reset (DESIGN: "a clock reading older than the state is
                // treated as the state's time").
                let back = (1u64 << (x % 64)) + u64::from(x & 64 != 0);
                let now = clock.now().saturating_sub(back);
                clock.set(Duration::from_nanos(now));
                t = u128::from(now).min(HORIZON);
                newest_t = newest_t.max(t);
                check::behind(t < newest_t);
                trace.push(format!("t={t} clock set back by {back}"));
            }
            Op::Advance(d) => {
                let d = d.get(1 << 62);
                clock.advance(Duration::from_nanos(d));
                t = (t + u128::from(d)).min(HORIZON);
                newest_t = newest_t.max(t);
                check::behind(t < newest_t);
                trace.push(format!("t={t} advance {d}"));
            }
            Op::CheckN(n) => {
                let n = n.get(u64::from(u32::MAX)) as u32;
                let got = l.check_n(n);
                trace.push(format!("t={t} check_n({n}) -> {got:?}"));
                let e = m.check(t, n, &p);
                match (e, got) {
                    (Some(e), Ok(d)) if exact && n > 0 => {
                        decision(algo, None, "check_n", &d, &e, &trace)
                    }
                    (Some(_), Ok(_)) => {}
                    (e, got) => promise(
                        e.is_none() && got.is_err(),
                        check::CANNOT_FIT,
                        format_args!("check_n({n}) gave {got:?}, cap {}", p.cap()),
                        &trace,
                    ),
                }
            }
            Op::Reserve(n, mw) => {
                let n = n.get(u64::from(u32::MAX)) as u32;
                let mw = mw.get(u64::MAX);
                if n == 0 {
                    // Not stated: `reserve(0, _)` answers `InsufficientCapacity { requested: 0 }`
                    // (reported as a discrepancy; a cost of 0 can always fit).
                    continue;
                }
                let got = l.reserve(n, Duration::from_nanos(mw));
                trace.push(format!(
                    "t={t} reserve({n}, {mw}) -> {:?}",
                    got.as_ref().map(|r| r.wait_time())
                ));
                if let Err(ReserveError::TooLong { wait, max_wait }) = &got {
                    let bound = Duration::from_nanos(mw).min(Reservation::MAX_WAIT);
                    // "or the time left until the engine's horizon when the booking
                    // would end past it".
                    let left = u64::try_from(HORIZON.saturating_sub(t)).unwrap_or(u64::MAX);
                    let at_horizon = bound.min(Duration::from_nanos(left));
                    promise(wait > max_wait && (*max_wait == bound || *max_wait == at_horizon), check::TOO_LONG, format_args!("TooLong {{ wait: {wait:?}, max_wait: {max_wait:?} }} for max_wait {mw} ns"), &trace);
                }
                let e = m.reserve(
                    t,
                    n,
                    u128::from(mw).min(Reservation::MAX_WAIT.as_nanos()),
                    &p,
                );
                match (e, got) {
                    (Reserved::Insufficient, Err(ReserveError::InsufficientCapacity(_))) => {}
                    (Reserved::Insufficient, got)
                    | (_, got @ Err(ReserveError::InsufficientCapacity(_))) => promise(
                        false,
                        check::CANNOT_FIT,
                        format_args!(
                            "reserve({n}) gave {:?}, cap {}",
                            got.map(|r| r.wait_time()),
                            p.cap()
                        ),
                        &trace,
                    ),
                    (Reserved::Ok { wait, .. }, Ok(r)) if exact => {
                        promise(
                            r.wait_time().as_nanos() == wait,
                            check::RESERVE,
                            format_args!("wait_time {:?}, the model's {wait} ns", r.wait_time()),
                            &trace,
                        );
                        held.push(r);
                    }
                    (Reserved::TooLong { wait }, Err(ReserveError::TooLong { wait: w, .. }))
                        if exact =>
                    {
                        promise(
                            w.as_nanos() == wait,
                            check::RESERVE,
                            format_args!("TooLong wait {w:?}, the model's {wait} ns"),
                            &trace,
                        );
                    }
                    (e, got) if exact => promise(
                        false,
                        check::RESERVE,
                        format_args!(
                            "reserve gave {:?}, the model {e:?}",
                            got.map(|r| r.wait_time())
                        ),
                        &trace,
                    ),
                    (_, got) => {
                        // Past the horizon the model stops; resynchronise by stopping.
                        drop(got);
                        break;
                    }
                }
            }
        }
    }
    drop(held);
}
