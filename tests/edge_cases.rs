//! Edge cases: every bad quota, impossible costs, extreme limits and spans, long idle
//! gaps, saturating clocks, clocks stepping backwards, and packed window indices near
//! their layout bound.

mod common;

use common::{manual, model_for, ns, seed, with_seed};
use std::time::Duration;
use tollgate::{
    Algorithm, Clock, ConfigError, Decision, InsufficientCapacity, KeyedRateLimiter, ManualClock,
    Quota, RateLimiter, ReserveError,
};

/// The engine's horizon, 2^62 ns (about 146 years).
const HORIZON_NS: u64 = 1 << 62;
const YEAR: Duration = Duration::from_secs(365 * 24 * 3600 + 6 * 3600);
const WINDOWS: [Algorithm; 3] = [
    Algorithm::FixedWindow,
    Algorithm::SlidingWindow,
    Algorithm::SlidingLog,
];
const BUCKETS: [Algorithm; 2] = [Algorithm::TokenBucket, Algorithm::LeakyBucket];

fn build_err(algorithm: Algorithm, q: Quota) -> ConfigError {
    match RateLimiter::builder(algorithm, q)
        .clock(ManualClock::new())
        .build()
    {
        Ok(l) => panic!("{algorithm:?} {q:?} should be refused, built {l:?}"),
        Err(e) => e,
    }
}

fn assert_msg(e: &ConfigError, needles: &[&str]) {
    let msg = e.to_string();
    for n in needles {
        assert!(msg.contains(n), "message {msg:?} should mention {n:?}");
    }
}

/// The capacity of `q` under `algorithm`: the burst for buckets, the limit otherwise.
fn capacity(algorithm: Algorithm, q: Quota) -> u32 {
    if BUCKETS.contains(&algorithm) {
        q.burst()
    } else {
        q.limit()
    }
}

// ------------------------------------------------------------------ configuration

#[test]
fn zero_limit_period_and_burst_are_refused() {
    for a in Algorithm::ALL {
        let e = build_err(a, Quota::new(0, Duration::from_secs(1)));
        assert_eq!(e, ConfigError::ZeroLimit, "{a:?}");
        assert_msg(&e, &["limit", "at least 1"]);

        let e = build_err(a, Quota::new(5, Duration::ZERO));
        assert_eq!(e, ConfigError::ZeroPeriod, "{a:?}");
        assert_msg(&e, &["period", "at least 1 ns"]);

        // A zero burst is refused for every algorithm (for windows it is also not the limit).
        let e = build_err(a, Quota::per_second(5).with_burst(0));
        assert_eq!(e, ConfigError::ZeroBurst, "{a:?}");
        assert_msg(&e, &["burst", "at least 1"]);
    }
}

#[test]
fn burst_on_a_window_algorithm_is_refused() {
    for a in WINDOWS {
        for burst in [1, 9, 11, u32::MAX] {
            let e = build_err(a, Quota::per_second(10).with_burst(burst));
            assert_eq!(
                e,
                ConfigError::BurstNotSupported {
                    algorithm: a,
                    burst,
                    limit: 10
                }
            );
            assert_msg(
                &e,
                &[&format!("{a:?}"), &format!("burst {burst}"), "limit 10"],
            );
        }
        // A burst equal to the limit is the window itself: accepted.
        let (l, _) = manual(a, Quota::per_second(10).with_burst(10));
        assert_eq!(l.burst(), 10);
    }
    for a in BUCKETS {
        let (l, _) = manual(a, Quota::per_second(10).with_burst(25));
        assert_eq!(l.burst(), 25);
    }
}

#[test]
fn more_than_one_request_per_nanosecond_is_refused_by_the_buckets() {
    for a in BUCKETS {
        for (limit, period) in [
            (2, 1),
            (1_000_000_001, 1_000_000_000),
            (u32::MAX, 4_294_967_294),
        ] {
            let q = Quota::new(limit, Duration::from_nanos(period));
            let e = build_err(a, q);
            assert_eq!(
                e,
                ConfigError::RateTooHigh {
                    limit,
                    period: q.period()
                },
                "{a:?} {q:?}"
            );
            assert_msg(&e, &["1 request per nanosecond", &limit.to_string()]);
        }
        // Exactly one per nanosecond is the finest rate: accepted, and exact.
        let (l, clock) = manual(
            a,
            Quota::new(1_000_000_000, Duration::from_secs(1)).with_burst(1),
        );
        assert!(l.check().is_allowed());
        let d = l.check();
        assert_eq!(d.retry_after(), Some(Duration::from_nanos(1)));
        clock.advance(Duration::from_nanos(1));
        assert!(l.check().is_allowed());
    }
}

#[test]
fn spans_beyond_the_horizon_are_refused() {
    let max = Duration::from_nanos(HORIZON_NS);
    for a in Algorithm::ALL {
        for period in [
            Duration::from_nanos(HORIZON_NS + 1),
            200 * YEAR,
            Duration::MAX,
        ] {
            let e = build_err(a, Quota::new(1, period));
            assert_eq!(e, ConfigError::PeriodTooLong { span: period, max }, "{a:?}");
            assert_msg(&e, &["horizon", &format!("{max:?}")]);
        }
        // Exactly the horizon is representable.
        let (l, _) = manual(a, Quota::new(1, max));
        assert!(l.check().is_allowed());
    }
    // For the buckets the span is burst × T: a burst of 2 over 100 years is 200 years.
    for a in BUCKETS {
        let q = Quota::new(1, 100 * YEAR).with_burst(2);
        let e = build_err(a, q);
        assert_eq!(
            e,
            ConfigError::PeriodTooLong {
                span: 200 * YEAR,
                max
            },
            "{a:?}"
        );
        assert_msg(&e, &["horizon"]);
        // u32::MAX × 1 s is 136 years: inside the horizon.
        let (l, _) = manual(a, Quota::per_second(1).with_burst(u32::MAX));
        assert_eq!(l.burst(), u32::MAX);
        // u32::MAX × 2 s is not.
        let q = Quota::new(1, Duration::from_secs(2)).with_burst(u32::MAX);
        let e = build_err(a, q);
        assert_eq!(
            e,
            ConfigError::PeriodTooLong {
                span: Duration::from_secs(2 * u64::from(u32::MAX)),
                max
            }
        );
    }
}

/// The shortest period a window layout accepts for `limit`: the window index
/// `HORIZON / P` must fit in the bits the count field(s) and the booked-ahead mark
/// leave.
fn min_period(count_fields: u32, limit: u32) -> u64 {
    (HORIZON_NS >> index_bits(count_fields, limit)) + 1
}

/// The window index's bits for `limit`: `63 − c` for `FixedWindow` (one field and the
/// mark), `63 − 2c` for `SlidingWindow` (two fields and the mark).
fn index_bits(count_fields: u32, limit: u32) -> u32 {
    let c = 32 - limit.leading_zeros();
    63u32.saturating_sub(count_fields * c)
}

#[test]
fn window_layouts_too_fine_are_refused() {
    for (a, fields) in [(Algorithm::FixedWindow, 1), (Algorithm::SlidingWindow, 2)] {
        for limit in [1, 2, 10, 1_000, 65_535, 1 << 20, (1 << 31) - 1] {
            let min = min_period(fields, limit);
            if min > HORIZON_NS {
                continue;
            }
            // The minimum itself is accepted ...
            let (l, _) = manual(a, Quota::new(limit, Duration::from_nanos(min)));
            assert_eq!(l.burst(), limit);
            // ... one nanosecond less is not, and the message names the minimum.
            if min > 1 {
                let q = Quota::new(limit, Duration::from_nanos(min - 1));
                let e = build_err(a, q);
                assert_eq!(
                    e,
                    ConfigError::WindowTooFine {
                        algorithm: a,
                        limit,
                        period: q.period(),
                        min_period: Duration::from_nanos(min)
                    },
                    "{a:?} limit {limit}"
                );
                assert_msg(
                    &e,
                    &[&format!("{:?}", Duration::from_nanos(min)), "at least"],
                );
            }
        }
    }
    // u32::MAX on FixedWindow needs 32 count bits and the mark, leaving 31 for the
    // index.
    assert_eq!(min_period(1, u32::MAX), (1 << 31) + 1);
    let e = build_err(
        Algorithm::FixedWindow,
        Quota::new(u32::MAX, Duration::from_secs(2)),
    );
    assert!(matches!(e, ConfigError::WindowTooFine { .. }), "{e:?}");
    // SlidingWindow cannot hold two 32-bit counts and any index at all.
    for limit in [1 << 31, u32::MAX] {
        let e = build_err(Algorithm::SlidingWindow, Quota::new(limit, 100 * YEAR));
        assert!(matches!(e, ConfigError::WindowTooFine { .. }), "{e:?}");
        // The message must not suggest a longer period: none would do.
        assert_msg(&e, &["at any period", "smaller limit"]);
        assert!(!e.to_string().contains("longer period"), "{e}");
    }
}

#[test]
fn sliding_log_too_large_is_refused() {
    let e = build_err(Algorithm::SlidingLog, Quota::per_second(65_537));
    assert_eq!(
        e,
        ConfigError::LogTooLarge {
            limit: 65_537,
            max: 65_536
        }
    );
    assert_msg(&e, &["65537", "65536"]);
    let e = build_err(Algorithm::SlidingLog, Quota::per_second(u32::MAX));
    assert!(matches!(e, ConfigError::LogTooLarge { .. }));
    let (l, _) = manual(Algorithm::SlidingLog, Quota::per_second(65_536));
    assert!(l.check_n(65_536).unwrap().is_allowed());
    assert!(!l.check().is_allowed());
}

// ------------------------------------------------------------------ costs

#[test]
fn costs_beyond_capacity_are_errors_not_denials() {
    for a in Algorithm::ALL {
        for q in [
            Quota::per_second(1),
            Quota::per_second(10),
            Quota::per_minute(7),
        ] {
            let q = if BUCKETS.contains(&a) {
                q.with_burst(q.limit() + 2)
            } else {
                q
            };
            let cap = capacity(a, q);
            let (l, _) = manual(a, q);
            assert_eq!(l.burst(), cap);
            for n in [cap + 1, cap * 2, u32::MAX] {
                assert_eq!(
                    l.check_n(n),
                    Err(InsufficientCapacity {
                        requested: n,
                        capacity: cap
                    }),
                    "{a:?} {q:?}"
                );
            }
            let e = l.check_n(cap + 1).unwrap_err();
            assert!(e.to_string().contains(&format!("at most {cap}")), "{e}");
            // The errors changed nothing: the whole capacity is still there.
            assert_eq!(l.check_n(0).unwrap().remaining(), cap);
            assert!(l.check_n(cap).unwrap().is_allowed());
            // A cost-0 peek never changes anything, even when empty.
            for _ in 0..3 {
                let d = l.check_n(0).unwrap();
                assert!(d.is_allowed());
                assert_eq!(d.remaining(), 0);
            }
            assert!(!l.check().is_allowed());
        }
    }
}

// ------------------------------------------------------------------ extremes

/// Fills `l` to its capacity, checks that one more is denied with a positive wait.
fn fill(l: &RateLimiter<ManualClock>) {
    let cap = l.burst();
    let d = l.check_n(cap).unwrap();
    assert!(
        d.is_allowed(),
        "{:?}: capacity {cap} at once: {d:?}",
        l.algorithm()
    );
    assert_eq!(d.remaining(), 0);
    let d = l.check();
    assert!(
        !d.is_allowed(),
        "{:?}: one past capacity: {d:?}",
        l.algorithm()
    );
    assert!(d.retry_after().unwrap() > Duration::ZERO);
}

#[test]
fn u32_max_limits_do_not_overflow() {
    let quotas = [
        (
            Algorithm::TokenBucket,
            Quota::new(u32::MAX, Duration::from_secs(5)),
        ),
        (
            Algorithm::LeakyBucket,
            Quota::new(u32::MAX, Duration::from_secs(5)),
        ),
        (
            Algorithm::TokenBucket,
            Quota::per_second(1).with_burst(u32::MAX),
        ),
        (
            Algorithm::LeakyBucket,
            Quota::per_second(1).with_burst(u32::MAX),
        ),
        (
            Algorithm::FixedWindow,
            Quota::new(u32::MAX, Duration::from_secs(3)),
        ),
        (Algorithm::FixedWindow, Quota::new(u32::MAX, 100 * YEAR)),
        (
            Algorithm::SlidingWindow,
            // The largest limit whose key is fresh again two periods later within the
            // horizon (2^31 − 1 needs a period past 2^61 ns, with the mark).
            Quota::new((1 << 30) - 1, Duration::from_nanos((1 << 59) + 1)),
        ),
        (
            Algorithm::SlidingWindow,
            Quota::new(65_535, Duration::from_secs(3)),
        ),
    ];
    for (a, q) in quotas {
        let (l, clock) = manual(a, q);
        let cap = l.burst();
        assert_eq!(l.check_n(0).unwrap().remaining(), cap, "{a:?} {q:?}");
        assert!(l.check_n(cap - 1).unwrap().is_allowed(), "{a:?} {q:?}");
        let d = l.check_n(0).unwrap();
        assert_eq!(d.remaining(), 1, "{a:?} {q:?}");
        assert!(l.check().is_allowed(), "{a:?} {q:?}");
        for n in [1, 2, cap / 2, cap] {
            let d = l.check_n(n).unwrap();
            assert!(
                !d.is_allowed(),
                "{a:?} {q:?}: cost {n} on a full key: {d:?}"
            );
            assert_eq!(d.remaining(), 0);
        }
        // After a whole period everything is back.
        clock.advance(q.period() * 2);
        if BUCKETS.contains(&a) {
            clock.advance(q.period() / q.limit() * cap);
        }
        fill(&l);
    }
}

#[test]
fn century_long_periods_work() {
    let century = 100 * YEAR;
    for a in Algorithm::ALL {
        let (l, clock) = manual(a, Quota::new(1, century));
        assert!(l.check().is_allowed(), "{a:?}");
        let d = l.check();
        assert!(!d.is_allowed(), "{a:?}");
        if a == Algorithm::SlidingWindow {
            // With limit 1 the previous window weighs something until its very end, so
            // the next admission is two periods away: past the horizon. The key reports
            // that honestly and stays full for the rest of the horizon.
            assert_eq!(d.retry_after(), Some(2 * century), "{a:?}");
            assert_eq!(d.reset_after(), 2 * century, "{a:?}");
            clock.advance(century);
            let d = l.check();
            assert!(!d.is_allowed(), "{a:?}");
            assert_eq!(d.retry_after(), Some(century), "{a:?}");
            continue;
        }
        assert_eq!(d.retry_after(), Some(century), "{a:?}");
        assert_eq!(d.reset_after(), century, "{a:?}");
        clock.advance(century - Duration::from_nanos(1));
        assert!(!l.check().is_allowed(), "{a:?}");
        clock.advance(Duration::from_nanos(1));
        assert!(l.check().is_allowed(), "{a:?} after a century");
        assert!(!l.check().is_allowed(), "{a:?}");
    }
}

/// Runs the same decisions on `old` and on a brand-new limiter whose clock reads the
/// same time, and requires identical answers: `old` has forgotten everything.
fn assert_fresh(old: &RateLimiter<ManualClock>, now: Duration, what: &str) {
    let clock = ManualClock::new();
    clock.set(now);
    let fresh = RateLimiter::builder(old.algorithm(), old.quota())
        .clock(clock)
        .build()
        .unwrap();
    let cap = old.burst();
    for n in [0, cap, 1, 0] {
        let a = old.check_n(n).unwrap();
        let b = fresh.check_n(n).unwrap();
        assert_eq!(a, b, "{:?} {what}: cost {n}", old.algorithm());
    }
}

fn sample_quotas(a: Algorithm) -> Vec<Quota> {
    let mut qs = vec![
        Quota::per_second(10),
        Quota::new(3, Duration::from_millis(1_500)),
        Quota::per_hour(1),
        Quota::new(7, Duration::from_nanos(1_009)),
    ];
    if BUCKETS.contains(&a) {
        qs.push(Quota::per_second(10).with_burst(30));
        qs.push(Quota::per_minute(100).with_burst(1));
    }
    qs
}

#[test]
fn fifty_year_idle_gaps_read_as_fresh() {
    for a in Algorithm::ALL {
        for q in sample_quotas(a) {
            let (l, clock) = manual(a, q);
            clock.advance(Duration::from_millis(1_234));
            fill(&l);
            // assert_fresh admits the whole capacity, leaving the key full again.
            for _ in 0..2 {
                clock.advance(50 * YEAR);
                assert_fresh(&l, Duration::from_nanos(clock.now()), "after 50 idle years");
            }
            // The third 50 years crosses the horizon: time stops there, the key is
            // still fresh once, then stays full (nothing can refill it).
            clock.advance(50 * YEAR);
            assert_fresh(&l, Duration::from_nanos(clock.now()), "past the horizon");
            clock.advance(50 * YEAR);
            assert!(
                !l.check().is_allowed(),
                "{a:?}: time stands still at the horizon"
            );
        }
    }
}

#[test]
fn duration_max_advances_saturate() {
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(1));
    clock.advance(Duration::MAX);
    assert_eq!(clock.now(), u64::MAX);
    clock.advance(Duration::MAX);
    assert_eq!(clock.now(), u64::MAX);
    clock.set(Duration::MAX);
    assert_eq!(clock.now(), u64::MAX);

    for a in Algorithm::ALL {
        for q in sample_quotas(a) {
            let (l, clock) = manual(a, q);
            fill(&l);
            clock.advance(Duration::MAX);
            // u64::MAX is read as the horizon: the key is fresh there.
            let d = l.check_n(0).unwrap();
            assert_eq!(d.remaining(), l.burst(), "{a:?} {q:?}");
            fill(&l);
            clock.advance(Duration::MAX);
            let d = l.check();
            assert!(!d.is_allowed(), "{a:?} {q:?}");
            let longest = 2 * q.period().max(q.period() / q.limit() * q.burst());
            assert!(d.retry_after().unwrap() <= longest, "{a:?} {q:?}: {d:?}");
        }
    }
}

// ------------------------------------------------------------------ clocks stepping back

#[test]
fn stepping_back_never_re_earns_capacity() {
    for a in Algorithm::ALL {
        for q in sample_quotas(a) {
            let p = q.period();
            let (l, clock) = manual(a, q);
            clock.set(p * 10 + p / 2);
            fill(&l);
            for back in [
                p * 10 + p / 2 - Duration::from_nanos(1),
                p / 2,
                p * 3,
                p * 9,
                p * 10,
                Duration::ZERO,
            ] {
                clock.set(back);
                let d = l.check();
                assert!(
                    !d.is_allowed(),
                    "{a:?} {q:?}: stepped back to {back:?}: {d:?}"
                );
                let peek = l.check_n(0).unwrap();
                assert!(
                    peek.is_allowed(),
                    "{a:?} {q:?}: a peek is never denied: {peek:?}"
                );
                assert_eq!(peek.remaining(), 0, "{a:?} {q:?} at {back:?}");
                assert!(!l.check_n(l.burst()).unwrap().is_allowed());
            }
        }
    }
}

/// A random walk of the clock with frequent backward steps. Each admitted request is
/// given its effective time: its reading, or the previous admission's effective time
/// when the reading is older (what DESIGN calls "treated as the state's time"). The
/// admissions at those times must all be admissible by the reference model: a stale
/// reading can never buy anything the quota would not allow at the state's time.
#[test]
fn backward_steps_admit_nothing_beyond_the_quota() {
    for a in Algorithm::ALL {
        for (i, q) in sample_quotas(a).into_iter().enumerate() {
            let s = seed(0xBAC0 + 16 * a as u64 + i as u64);
            with_seed(&format!("backward {a:?} {q:?}"), s, |rng| {
                let (l, clock) = manual(a, q);
                let mut model = model_for(a, q);
                let p = ns(q.period());
                let cap = l.burst();
                let mut max_seen = 0u64;
                let mut effective = 0u64;
                let mut admitted = 0u64;
                let mut probes = 0u32;
                // After a denial at reading r with wait w, sometimes probe it right away:
                // (r + w − 1, must deny), then (r + w, must admit).
                let mut probe: Option<(u64, u32, bool)> = None;
                for step in 0..5_000 {
                    let (reading, n, expect) = match probe.take() {
                        Some((at, n, false)) => {
                            probe = Some((at + 1, n, true));
                            (at, n, Some(false))
                        }
                        Some((at, n, true)) => (at, n, Some(true)),
                        None => {
                            let reading = match rng.u32(0..6) {
                                // Back by up to two periods.
                                0 | 1 => max_seen.saturating_sub(rng.u64(0..=2 * p)),
                                // Forward a little from the newest reading.
                                2..=4 => max_seen + rng.u64(0..=p / u64::from(q.limit()) + 1),
                                _ => max_seen + rng.u64(0..=p),
                            };
                            (reading, if rng.bool() { 1 } else { rng.u32(1..=cap) }, None)
                        }
                    };
                    max_seen = max_seen.max(reading);
                    clock.set(Duration::from_nanos(reading));
                    let d = l.check_n(n).unwrap();
                    if let Some(admit) = expect {
                        probes += 1;
                        assert_eq!(
                            d.is_allowed(),
                            admit,
                            "step {step}: probe of retry_after{} at {reading}: {d:?}",
                            if admit { "" } else { " - 1ns" }
                        );
                    } else if let Some(w) = d.retry_after() {
                        if rng.u32(0..3) == 0 {
                            probe = Some((reading + ns(w) - 1, n, false));
                        }
                    }
                    if d.is_allowed() {
                        admitted += u64::from(n);
                        effective = effective.max(reading);
                        assert!(
                            model.fits(effective, n),
                            "step {step}: admitted cost {n} at reading {reading} (effective \
                             {effective}) that the quota does not allow: {d:?}"
                        );
                        model.admit(effective, n);
                    }
                }
                assert!(
                    admitted > 100 && probes > 100,
                    "{a:?} {q:?}: degenerate walk"
                );
            });
        }
    }
}

// ------------------------------------------------------------------ window indices

#[test]
fn window_index_beyond_32_bits_does_not_wrap() {
    // Limit 1 leaves 63 (fixed) or 62 (sliding) index bits. With P = 2^29 ns,
    // 2^32 windows are 2^61 ns (73 years), inside the horizon: a 32-bit index would
    // wrap back to window 0 and read the old count as current.
    let p = 1u64 << 29;
    for a in [Algorithm::FixedWindow, Algorithm::SlidingWindow] {
        let q = Quota::new(1, Duration::from_nanos(p));
        let (l, clock) = manual(a, q);
        fill(&l);
        for windows in [1u64 << 32, (1 << 32) + 2, 3 << 32] {
            let t = Duration::from_nanos(windows * p);
            clock.set(t);
            assert_fresh(&l, t, &format!("{windows} windows later"));
        }
    }
}

#[test]
fn window_index_at_the_layout_bound_does_not_wrap() {
    // Quotas at the exact minimum period: at the horizon the window index is the
    // largest the `63 − c` (or `63 − 2c`) index bits hold. The key filled at window 0
    // must read as fresh in the last windows, and once filled there it must stay full
    // up to and past the horizon (a truncated index would read the next call as a new
    // window and admit again).
    for (a, fields) in [(Algorithm::FixedWindow, 1), (Algorithm::SlidingWindow, 2)] {
        for limit in [1u32, 3, 255, 65_535, 1 << 20, (1 << 31) - 1, u32::MAX] {
            let min = min_period(fields, limit);
            if min > HORIZON_NS {
                continue;
            }
            let q = Quota::new(limit, Duration::from_nanos(min));
            let (l, clock) = manual(a, q);
            fill(&l);
            let last_index = HORIZON_NS / min;
            assert!(
                last_index < 1u64 << index_bits(fields, limit),
                "layout bound"
            );
            if a == Algorithm::SlidingWindow && last_index < 2 {
                // The last window is window 1, where window 0's fill still weighs: no
                // window is far enough from it to read as fresh.
                continue;
            }
            let mut times = vec![last_index * min];
            if last_index >= 2 && a == Algorithm::FixedWindow {
                // The window before the last one, then the last one.
                times.insert(0, last_index * min - 1);
            }
            for t in times {
                clock.set(Duration::from_nanos(t));
                assert_fresh(
                    &l,
                    Duration::from_nanos(t),
                    &format!("limit {limit} at {t} ns"),
                );
            }
            // assert_fresh admitted the capacity: the last window is full, up to and
            // past the horizon.
            for t in [HORIZON_NS, u64::MAX] {
                clock.set(Duration::from_nanos(t));
                let d = l.check();
                assert!(!d.is_allowed(), "{a:?} limit {limit} at {t}: {d:?}");
                assert_eq!(l.check_n(0).unwrap().remaining(), 0, "{a:?} limit {limit}");
            }
        }
    }
}

/// A clock that is not a `ManualClock`: any user `Clock` works, including one that
/// reads `u64::MAX`.
#[derive(Clone)]
struct Frozen(u64);

impl Clock for Frozen {
    fn now(&self) -> u64 {
        self.0
    }
}

#[test]
fn a_clock_reading_u64_max_is_the_horizon() {
    for a in Algorithm::ALL {
        let l = RateLimiter::builder(a, Quota::per_second(3))
            .clock(Frozen(u64::MAX))
            .build()
            .unwrap();
        let d: Decision = l.check_n(3).unwrap();
        assert!(d.is_allowed(), "{a:?}");
        assert!(!l.check().is_allowed(), "{a:?}");
    }
}

/// `retry_after` is never too early, even when measured from a stale reading: from a
/// clock stepped back to `r`, the request is denied at `r + retry_after − 1 ns` and
/// admitted at `r + retry_after` (if nothing else arrives).
#[test]
fn retry_after_from_a_stale_reading_is_not_too_early() {
    for a in Algorithm::ALL {
        for q in sample_quotas(a) {
            let p = q.period();
            let fill_at = p * 10 + p / 2;
            for back in [
                fill_at - Duration::from_nanos(1),
                p * 10,
                p * 9,
                p / 2,
                Duration::ZERO,
            ] {
                for cost in [1, capacity(a, q)] {
                    let (l, clock) = manual(a, q);
                    clock.set(fill_at);
                    fill(&l);
                    clock.set(back);
                    let d = l.check_n(cost).unwrap();
                    assert!(!d.is_allowed(), "{a:?} {q:?} at {back:?}");
                    let retry = d.retry_after().unwrap();
                    let ctx = format!(
                        "{a:?} {q:?}: filled at {fill_at:?}, back to {back:?}, cost {cost}, {d:?}"
                    );
                    assert!(
                        d.reset_after() >= retry,
                        "reset_after before retry_after: {ctx}"
                    );
                    clock.set(back + retry - Duration::from_nanos(1));
                    assert!(
                        !l.check_n(cost).unwrap().is_allowed(),
                        "1 ns early admitted: {ctx}"
                    );
                    clock.set(back + retry);
                    assert!(
                        l.check_n(cost).unwrap().is_allowed(),
                        "retry_after too early: {ctx}"
                    );
                }
            }
        }
    }
}

/// Issue 27, item 3: a fixed window's booking sums its count in 64 bits: with a limit
/// above 2^31 a booking after a full window goes to the next window, and the full
/// window admits nothing more (it admitted twice its limit when the sum wrapped).
#[test]
fn a_fixed_window_booking_never_overflows_its_count() {
    let clock = ManualClock::new();
    let l = RateLimiter::builder(
        Algorithm::FixedWindow,
        Quota::new(u32::MAX, Duration::from_secs(3)),
    )
    .clock(clock.clone())
    .build()
    .unwrap();
    assert!(l.check_n(u32::MAX).unwrap().is_allowed());
    let r = l.reserve(1, Duration::ZERO);
    assert!(r.is_err(), "README: at most `limit` per window: {r:?}");
    assert!(!l.check_n(u32::MAX).unwrap().is_allowed());
    let r = l.reserve(1, Duration::from_secs(3)).unwrap();
    assert_eq!(r.wait_time(), Duration::from_secs(3));
}

/// Issue 27, item 11: a wait refused at the clock's horizon reports a `max_wait` below
/// the wait, as `ReserveError::TooLong` documents.
#[test]
fn too_long_at_the_horizon_reports_a_max_wait_below_the_wait() {
    for a in Algorithm::ALL {
        let clock = ManualClock::new();
        // 146 years less half a second: a one-second booking would end past the horizon.
        clock.set(Duration::from_nanos((1u64 << 62) - 500_000_000));
        let l = RateLimiter::builder(a, Quota::per_second(1))
            .clock(clock.clone())
            .build()
            .unwrap();
        assert!(l.check().is_allowed());
        match l.reserve(1, Duration::from_secs(2)) {
            Err(ReserveError::TooLong { wait, max_wait }) => {
                assert!(
                    max_wait < wait,
                    "{a:?}: max_wait {max_wait:?} wait {wait:?}"
                )
            }
            Ok(r) => assert!(r.wait_time() <= Duration::from_secs(2), "{a:?}"),
            other => panic!("{a:?}: {other:?}"),
        }
    }
}

/// Issue 27, item 11: "a bucket rate of more than one request per nanosecond" is
/// refused (README, Bounds); the windows and the log count a limit per period, so such
/// a quota builds for them when its layout fits, and admits at most the limit in a
/// window (or in any interval of the period, for the log).
#[test]
fn more_than_one_request_per_nanosecond_is_refused_by_the_buckets_only() {
    for a in Algorithm::ALL {
        for (limit, ns) in [(5, 3), (2, 1), (4, 3)] {
            let q = Quota::new(limit, Duration::from_nanos(ns));
            let clock = ManualClock::new();
            let built = RateLimiter::builder(a, q).clock(clock.clone()).build();
            let keyed = KeyedRateLimiter::<u64, _>::builder(a, q)
                .clock(clock.clone())
                .build();
            if matches!(a, Algorithm::TokenBucket | Algorithm::LeakyBucket) {
                assert!(
                    matches!(built, Err(ConfigError::RateTooHigh { .. })),
                    "{a:?} {limit}/{ns}"
                );
                assert!(
                    matches!(keyed, Err(ConfigError::RateTooHigh { .. })),
                    "{a:?} keyed"
                );
                continue;
            }
            let (Ok(l), Ok(k)) = (built, keyed) else {
                // Too fine for the window's layout: refused as such.
                continue;
            };
            assert!(l.check_n(limit).unwrap().is_allowed(), "{a:?}");
            assert!(
                !l.check().is_allowed(),
                "{a:?} {limit}/{ns}: at most the limit at once"
            );
            assert!(k.check_n(&1, limit).unwrap().is_allowed(), "{a:?}");
            assert!(!k.check(&1).is_allowed(), "{a:?} keyed");
            clock.advance(Duration::from_nanos(2 * ns));
            assert!(
                l.check().is_allowed(),
                "{a:?}: the next period admits again"
            );
        }
    }
}
