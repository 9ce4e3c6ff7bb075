//! `set_quota` at run time: the windows and the log keep their state exactly (after the
//! change they decide as the reference model given every earlier admission and the new
//! quota); the buckets never admit more after the change than a fresh bucket of the new
//! quota would; refused changes change nothing; concurrent deciders never see a mix.

mod common;

use common::{model_for, ns, quota, seed, with_seed};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tollgate::{Algorithm, ConfigError, KeyedRateLimiter, ManualClock, Quota, RateLimiter};

/// Pairs of quotas (before, after) that `set_quota` accepts for `a`.
fn changes(a: Algorithm) -> Vec<(Quota, Quota)> {
    let ms = 1_000_000;
    match a {
        Algorithm::TokenBucket | Algorithm::LeakyBucket => vec![
            (quota(10, 10 * ms, None), quota(3, 10 * ms, None)),
            (quota(3, 10 * ms, None), quota(20, 10 * ms, Some(5))),
            (quota(5, 10 * ms, Some(2)), quota(5, 40 * ms, Some(8))),
            (quota(7, 3 * ms, None), quota(2, 50 * ms, None)),
        ],
        Algorithm::FixedWindow => vec![
            (quota(10, 10 * ms, None), quota(3, 10 * ms, None)),
            (quota(3, 10 * ms, None), quota(20, 10 * ms, None)),
            // Far more than the limit built with: the layout depends on the period.
            (quota(2, 10 * ms, None), quota(100_000, 10 * ms, None)),
        ],
        Algorithm::SlidingWindow => vec![
            (quota(10, 10 * ms, None), quota(3, 10 * ms, None)),
            (quota(3, 10 * ms, None), quota(20, 10 * ms, None)),
            // 4,095 is the most two counts and a 10 ms window index leave room for.
            (quota(2, 10 * ms, None), quota(4_000, 10 * ms, None)),
        ],
        Algorithm::SlidingLog => vec![
            (quota(10, 10 * ms, None), quota(3, 10 * ms, None)),
            (quota(8, 10 * ms, None), quota(8, 30 * ms, None)),
            (quota(9, 20 * ms, None), quota(4, 5 * ms, None)),
        ],
    }
}

/// Windows and the log: before the change the engine decides as the model of the old
/// quota; after it, exactly as the model of the new quota that was given every earlier
/// admission.
#[test]
fn windows_and_log_keep_their_state_exactly() {
    for a in [
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
        Algorithm::SlidingLog,
    ] {
        for (i, (q1, q2)) in changes(a).into_iter().enumerate() {
            with_seed(
                &format!("set_quota {a:?} {q1:?} -> {q2:?}"),
                seed(0x5E7 + 8 * a as u64 + i as u64),
                |rng| {
                    let (l, clock) = common::manual(a, q1);
                    let mut model = model_for(a, q1);
                    let mut admitted: Vec<(u64, u32)> = Vec::new();
                    let p = ns(q1.period()).max(ns(q2.period()));
                    let mut now = 0;
                    let change_at = 40;
                    for step in 0..120 {
                        if step == change_at {
                            l.set_quota(q2).unwrap();
                            assert_eq!(l.quota(), q2);
                            model = model_for(a, q2);
                            for &(t, n) in &admitted {
                                model.admit(t, n);
                            }
                        }
                        now += rng.u64(0..=p / 4);
                        clock.set(Duration::from_nanos(now));
                        let n = rng.u32(1..=l.burst().min(3));
                        let d = l.check_n(n).unwrap();
                        assert_eq!(
                            d.is_allowed(),
                            model.fits(now, n),
                            "step {step} at {now}: {d:?}"
                        );
                        if d.is_allowed() {
                            model.admit(now, n);
                            admitted.push((now, n));
                        }
                    }
                },
            );
        }
    }
}

/// Buckets: after the change, admissions never exceed what a fresh bucket of the new
/// quota, started at the change, would admit (and before it, the old quota holds).
#[test]
fn buckets_after_a_change_stay_within_the_new_quota() {
    for a in [Algorithm::TokenBucket, Algorithm::LeakyBucket] {
        for (i, (q1, q2)) in changes(a).into_iter().enumerate() {
            with_seed(
                &format!("set_quota {a:?} {q1:?} -> {q2:?}"),
                seed(0xB5E7 + 8 * a as u64 + i as u64),
                |rng| {
                    let (l, clock) = common::manual(a, q1);
                    let mut before = model_for(a, q1);
                    let mut after = model_for(a, q2);
                    let p = ns(q1.period()).max(ns(q2.period()));
                    let mut now = 0;
                    let mut admitted_after = 0;
                    for step in 0..600 {
                        if step == 300 {
                            l.set_quota(q2).unwrap();
                        }
                        now += rng.u64(0..=p / 20);
                        clock.set(Duration::from_nanos(now));
                        let n = rng.u32(1..=l.burst().min(2));
                        let d = l.check_n(n).unwrap();
                        if !d.is_allowed() {
                            continue;
                        }
                        // The shaper's admissions proceed after their delay.
                        let at = now + ns(d.delay());
                        let m = if step < 300 { &mut before } else { &mut after };
                        assert!(
                            m.fits(at, n),
                            "step {step}: cost {n} at {at} beyond the bound"
                        );
                        m.admit(at, n);
                        if step >= 300 {
                            admitted_after += 1;
                        }
                    }
                    assert!(admitted_after > 10, "degenerate: {admitted_after}");
                },
            );
        }
    }
}

/// A limiter built with one quota, a quota it must refuse, and the expected error.
type Refusal = (Algorithm, Quota, Quota, fn(&ConfigError) -> bool);

/// A change the limiter cannot make is an error, and nothing changes.
#[test]
fn refused_changes_change_nothing() {
    let cases: Vec<Refusal> = vec![
        (
            Algorithm::FixedWindow,
            Quota::per_second(5),
            Quota::per_minute(5),
            |e| matches!(e, ConfigError::PeriodChange { .. }),
        ),
        (
            Algorithm::SlidingWindow,
            Quota::per_second(5),
            Quota::per_hour(5),
            |e| matches!(e, ConfigError::PeriodChange { .. }),
        ),
        (
            Algorithm::SlidingLog,
            Quota::per_second(5),
            Quota::per_second(6),
            |e| matches!(e, ConfigError::LogBeyondRing { limit: 6, ring: 5 }),
        ),
        (
            Algorithm::TokenBucket,
            Quota::per_second(5),
            Quota::per_second(0),
            |e| matches!(e, ConfigError::ZeroLimit),
        ),
        (
            Algorithm::FixedWindow,
            Quota::per_second(5),
            Quota::per_second(5).with_burst(9),
            |e| matches!(e, ConfigError::BurstNotSupported { .. }),
        ),
        (
            Algorithm::FixedWindow,
            Quota::new(5, Duration::from_nanos(2_000)),
            Quota::new(u32::MAX, Duration::from_nanos(2_000)),
            |e| matches!(e, ConfigError::WindowTooFine { .. }),
        ),
    ];
    for (a, q1, q2, expected) in cases {
        let (l, _clock) = common::manual(a, q1);
        let _ = l.check();
        let peek = l.peek();
        let err = l.set_quota(q2).unwrap_err();
        assert!(expected(&err), "{a:?} {q1:?} -> {q2:?}: {err}");
        assert!(!err.to_string().is_empty());
        assert_eq!(
            (l.quota(), l.peek()),
            (q1, peek),
            "{a:?}: a refused change changed something"
        );
        let keyed = KeyedRateLimiter::<u8, _>::builder(a, q1)
            .clock(ManualClock::new())
            .build()
            .unwrap();
        assert!(expected(&keyed.set_quota(q2).unwrap_err()));
        assert_eq!(keyed.quota(), q1);
    }
}

/// The keyed limiter keeps every key's state across a change, as one limiter per key.
#[test]
fn keyed_changes_match_one_limiter_per_key() {
    for a in Algorithm::ALL {
        let (q1, q2) = changes(a)[0];
        let clock = ManualClock::new();
        let keyed = KeyedRateLimiter::<u8, _>::builder(a, q1)
            .clock(clock.clone())
            .build()
            .unwrap();
        let singles: Vec<_> = (0..4)
            .map(|_| {
                RateLimiter::builder(a, q1)
                    .clock(clock.clone())
                    .build()
                    .unwrap()
            })
            .collect();
        with_seed(
            &format!("keyed set_quota {a:?}"),
            seed(0xE5 + a as u64),
            |rng| {
                for step in 0..400 {
                    if step == 200 {
                        keyed.set_quota(q2).unwrap();
                        for s in &singles {
                            s.set_quota(q2).unwrap();
                        }
                    }
                    clock.advance(Duration::from_micros(rng.u64(0..2_000)));
                    let k = rng.u8(0..4);
                    assert_eq!(
                        keyed.check(&k),
                        singles[k as usize].check(),
                        "step {step} key {k}"
                    );
                }
            },
        );
    }
}

/// Deciders racing a thread that flips the quota: no panic, every decision comes from
/// one quota or the other (its limit is one of the two), and the requests admitted
/// never exceed the larger quota's capacity (no refill: the clock is frozen), through
/// every verb that takes capacity (`check`, `check_n`, `reserve`, `check_all`).
///
/// A bucket's state is converted to the new interval at each change: a decision that
/// priced its request in the old interval on a converted state (or in the new one on
/// a state then converted again) undercounts, which this catches within a few rounds
/// (up to 75 of 60 admitted before the conversion waited for its deciders).
#[test]
fn deciders_racing_changes_see_one_quota_or_the_other() {
    for a in Algorithm::ALL {
        let buckets = matches!(a, Algorithm::TokenBucket | Algorithm::LeakyBucket);
        for round in 0..if buckets { 40 } else { 4 } {
            let n = admitted_while_flipping(a);
            assert!((40..=60).contains(&n), "{a:?} round {round}: {n} admitted");
        }
    }
}

/// Requests admitted by two deciders (5,000 calls each, rotating through the verbs)
/// while a third thread flips the quota between 40 and 60 an hour.
fn admitted_while_flipping(a: Algorithm) -> u64 {
    let (q1, q2) = (Quota::per_hour(40), Quota::per_hour(60));
    let l = RateLimiter::builder(a, q2) // the larger: the sliding log's rings hold 60
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let change = |i: usize| l.set_quota(if i % 2 == 1 { q1 } else { q2 }).unwrap();
    admitted_racing(change, |i| {
        let (cost, d) = match i % 4 {
            0 => (1, l.check()),
            1 => (2, l.check_n(2).unwrap()),
            // Dropped, a reservation keeps its booking.
            2 => (1, l.reserve(1, Duration::ZERO).ok()?.decision()),
            _ => {
                let m = tollgate::check_all(&[&l as &dyn tollgate::Limit], 1).unwrap();
                (1, *m.decisions().first().unwrap())
            }
        };
        assert!(d.limit() == 40 || d.limit() == 60, "{a:?}: {d:?}");
        Some((cost, d))
    })
}

/// The costs admitted by two deciders, each calling `decide(i)` for `i` in 0..5,000
/// (`None`: nothing was asked), while a third thread calls `change(0)`, `change(1)`,
/// ... until both are done.
fn admitted_racing(
    change: impl Fn(usize) + Sync,
    decide: impl Fn(u32) -> Option<(u64, tollgate::Decision)> + Sync,
) -> u64 {
    let done = AtomicBool::new(false);
    let admitted = AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0.. {
                if done.load(Ordering::Relaxed) {
                    break;
                }
                change(i);
            }
        });
        let deciders: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    for i in 0..5_000u32 {
                        if let Some((cost, d)) = decide(i) {
                            if d.is_allowed() {
                                admitted.fetch_add(cost, Ordering::Relaxed);
                            }
                        }
                    }
                })
            })
            .collect();
        for d in deciders {
            d.join().unwrap();
        }
        done.store(true, Ordering::Relaxed);
    });
    admitted.load(Ordering::Relaxed)
}

/// A keyed bucket's deciders racing a thread that cycles through 20 rates, more than
/// the 16 rate classes a table tags its states with, so that `set_quota` keeps
/// retiring classes and giving them to other rates: the requests admitted on one key
/// never exceed the largest quota's capacity (60; the clock is frozen). A request
/// that read a quota whose class was retired and given to another rate meanwhile
/// must start over (its class now stands for another rate), and no write of a
/// retiring class may outlive the pass that converts them (up to 76 of 60 admitted
/// before).
#[test]
fn keyed_deciders_racing_more_rates_than_classes_never_exceed_the_largest() {
    for round in 0..30 {
        let quotas: Vec<Quota> = (41..=60).map(Quota::per_hour).collect();
        let l = KeyedRateLimiter::<u8, _>::builder(Algorithm::TokenBucket, quotas[19])
            .max_keys(64)
            .clock(ManualClock::new())
            .build()
            .unwrap();
        let change = |i: usize| l.set_quota(quotas[i * 7 % quotas.len()]).unwrap();
        let n = admitted_racing(change, |i| {
            Some(match i % 3 {
                0 => (1, l.check(&7)),
                1 => (2, l.check_n(&7, 2).unwrap()),
                _ => (1, l.reserve(&7, 1, Duration::ZERO).ok()?.decision()),
            })
        });
        assert!(n <= 60, "round {round}: {n} admitted");
    }
}

/// Issue 37 item 4. README (Run-time quotas): "a converted debt ends at the clock's
/// horizon at the latest (2^62 ns after its zero, about 146 years)". 1,000 per second,
/// burst 10, all 10 used at `c`; converted to 1 per 100 years, the key is whole again
/// at the horizon: `reset_after` is `2^62 ns − c` (it was nearly twice that at `c = 0`,
/// the cap being the engine's largest state); converted back to 1,000 per second, what is left of that,
/// `⌈(2^62 − c)·1 ms / 100 years⌉` (1.46 ms at `c = 0`, where 2.83 ms were left: 7
/// remained), is used. On one limiter, a keyed table, and a keyed table whose two tiers
/// are the two rates.
#[test]
fn a_debt_converted_past_the_horizon_ends_there() {
    const HORIZON: u64 = 1 << 62;
    let fast = Quota::per_second(1_000).with_burst(10);
    let slow = Quota::new(1, Duration::from_secs(100 * 365 * 86_400));
    let t_slow = 100 * 365 * 86_400 * 1_000_000_000u128;
    for c in [0, 1_000_000_000, 1 << 61] {
        // The debt back at 1 ms a request, ns, and what it leaves of the burst.
        let owed = (u128::from(HORIZON - c) * 1_000_000).div_ceil(t_slow);
        let left = ((10_000_000 - owed) / 1_000_000) as u32;
        assert_eq!((c, left), (c, if c < 1 << 61 { 8 } else { 9 }));
        for a in [Algorithm::TokenBucket, Algorithm::LeakyBucket] {
            let what = format!("{a:?} at {c} ns");
            let clock = ManualClock::new();
            clock.set(Duration::from_nanos(c));
            let one = RateLimiter::builder(a, fast)
                .clock(clock.clone())
                .build()
                .unwrap();
            assert!(one.check_n(10).unwrap().is_allowed());
            one.set_quota(slow).unwrap();
            let d = one.peek_n(0).unwrap();
            assert_eq!(
                d.reset_after(),
                Duration::from_nanos(HORIZON - c),
                "{what}: one"
            );
            one.set_quota(fast).unwrap();
            assert_eq!(
                one.peek_n(0).unwrap().remaining(),
                left,
                "{what}: one, back"
            );

            let keyed = KeyedRateLimiter::<u64, _>::builder(a, fast)
                .clock(clock.clone())
                .build()
                .unwrap();
            assert!(keyed.check_n(&7, 10).unwrap().is_allowed());
            keyed.set_quota(slow).unwrap();
            let d = keyed.peek_n(&7, 0).unwrap();
            assert_eq!(
                d.reset_after(),
                Duration::from_nanos(HORIZON - c),
                "{what}: keyed"
            );
            keyed.set_quota(fast).unwrap();
            let got = keyed.peek_n(&7, 0).unwrap().remaining();
            assert_eq!(got, left, "{what}: keyed, back");

            let tiers = KeyedRateLimiter::<u64, _>::builder(a, fast)
                .tiers([slow])
                .clock(clock.clone())
                .build()
                .unwrap();
            let (f, s) = (tiers.tier(0).unwrap(), tiers.tier(1).unwrap());
            assert!(f.check_n(&7, 10).unwrap().is_allowed());
            let _ = s.check(&7); // denied: it writes the key at the slow rate
            let d = s.peek_n(&7, 0).unwrap();
            assert_eq!(
                d.reset_after(),
                Duration::from_nanos(HORIZON - c),
                "{what}: tier"
            );
            assert_eq!(
                f.peek_n(&7, 0).unwrap().remaining(),
                left,
                "{what}: tier, back"
            );
        }
    }
}
