//! The verbs' promises under the schedules that broke them (issue 20): a booking made
//! before `reset` gives nothing to the state built after it; a roll-back gives back
//! exactly what its booking took whatever was admitted in between; a zero-cost
//! multi-limit check inserts nothing; a refusal reports the deciding tier's policy;
//! `reserve`'s bound on waits is reported as such; a stale reading is not denied a wait
//! that has already passed; a queued denial reports the state's reset time.
//!
//! Every test compares against a twin limiter fed the same calls without the step
//! under test, or against exact expected decisions.

mod common;

use common::Hooked;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tollgate::{
    check_all, Algorithm, Clock, KeyedRateLimiter, Limit, ManualClock, OnFull, Quota, RateLimiter,
    ReserveError,
};

const SEC: u64 = 1_000_000_000;

fn keyed(a: Algorithm, q: Quota, clock: &ManualClock) -> KeyedRateLimiter<u64, ManualClock> {
    KeyedRateLimiter::builder(a, q)
        .clock(clock.clone())
        .build()
        .expect("builds")
}

/// The decisions of `n` cost-1 checks of key 1 (each at the clock's time, then 100 ms
/// later), as a comparable trace.
fn trace(l: &KeyedRateLimiter<u64, ManualClock>, clock: &ManualClock, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            let d = l.check(&1);
            clock.advance(Duration::from_millis(100));
            format!("{:?}", d)
        })
        .collect()
}

/// Item 1: a reservation booked before `reset` is cancelled after the fresh state
/// booked the same thing by value; the cancel must change nothing. The twin runs the
/// same calls without the cancel.
#[test]
fn a_cancel_after_reset_gives_nothing_to_the_fresh_state() {
    for a in Algorithm::ALL {
        let run = |cancel: bool| {
            let clock = ManualClock::new();
            clock.set(Duration::from_secs(10));
            let l = keyed(a, Quota::per_second(4), &clock);
            assert!(l.check_n(&1, 4).unwrap().is_allowed(), "{a:?}");
            let r1 = l.reserve(&1, 1, Duration::from_secs(5)).expect("booked");
            assert!(r1.wait_time() > Duration::ZERO, "{a:?}");
            assert!(l.reset(&1));
            assert!(l.check_n(&1, 4).unwrap().is_allowed(), "{a:?} fresh quota");
            let r2 = l.reserve(&1, 1, Duration::from_secs(5)).expect("booked");
            assert_eq!(
                r1.wait_time(),
                r2.wait_time(),
                "{a:?}: the same booking by value"
            );
            if cancel {
                r1.cancel();
            } else {
                drop(r1);
            }
            let after = l
                .reserve(&1, 1, Duration::from_secs(5))
                .map(|r| r.wait_time());
            (format!("{after:?}"), trace(&l, &clock, 30))
        };
        assert_eq!(
            run(true),
            run(false),
            "{a:?}: a pre-reset cancel changed the state"
        );
    }
}

/// The same through `remove`, and for a `check_all` admission given back by the
/// middleware's path: a roll-back of a booking made before the key was reset.
#[test]
fn a_roll_back_after_reset_gives_nothing_to_the_fresh_state() {
    for a in Algorithm::ALL {
        let run = |roll_back: bool| {
            let clock = ManualClock::new();
            clock.set(Duration::from_secs(10));
            let l = Arc::new(keyed(a, Quota::per_second(4), &clock));
            let hook = Hooked::new(SEC * 10);
            let other = RateLimiter::builder(denier(a), Quota::per_hour(1))
                .clock(hook.clone())
                .build()
                .unwrap();
            assert!(other.check().is_allowed()); // spent: it denies the multi-check
            if roll_back {
                // While `other` decides (its clock is read), the key is removed and
                // its fresh quota spent; then `other` denies and the key's booking is
                // rolled back onto the fresh state.
                let l2 = Arc::clone(&l);
                hook.on_next_read(move || {
                    assert!(l2.remove(&1));
                    assert!(l2.check_n(&1, 4).unwrap().is_allowed());
                });
                let d = check_all(&[&l.limit(&1) as &dyn Limit, &other], 1).unwrap();
                assert!(!d.is_allowed(), "{a:?}");
                assert!(hook.ran());
            } else {
                assert!(l.check(&1).is_allowed());
                assert!(l.remove(&1));
                assert!(l.check_n(&1, 4).unwrap().is_allowed());
            }
            trace(&l, &clock, 30)
        };
        assert_eq!(run(true), run(false), "{a:?}: a pre-reset roll-back leaked");
    }
}

/// Item 2: a multi-check denied by a second limit, while another request is admitted
/// on the first between the booking and the roll-back, takes nothing from the first.
#[test]
fn a_roll_back_gives_back_exactly_what_it_took_whatever_came_between() {
    for a in Algorithm::ALL {
        for q in [Quota::per_hour(10), Quota::per_second(10).with_burst(10)] {
            let q =
                if a.is_packed() && !matches!(a, Algorithm::TokenBucket | Algorithm::LeakyBucket) {
                    Quota::new(q.limit(), q.period())
                } else {
                    q
                };
            let run = |multi: bool| {
                let clock = ManualClock::new();
                clock.set(Duration::from_secs(100));
                let global = Arc::new(
                    RateLimiter::builder(a, q)
                        .clock(clock.clone())
                        .build()
                        .unwrap(),
                );
                assert!(global.check_n(2).unwrap().is_allowed());
                let hook = Hooked::new(SEC * 100);
                let other = RateLimiter::builder(denier(a), Quota::per_hour(1))
                    .clock(hook.clone())
                    .build()
                    .unwrap();
                assert!(other.check().is_allowed());
                if multi {
                    let g = Arc::clone(&global);
                    hook.on_next_read(move || assert!(g.check().is_allowed()));
                    let d = check_all(&[&*global as &dyn Limit, &other], 1).unwrap();
                    assert!(!d.is_allowed());
                    assert!(hook.ran());
                } else {
                    assert!(global.check().is_allowed());
                }
                let mut out = vec![format!("{:?}", global.peek())];
                for _ in 0..12 {
                    out.push(format!("{:?}", global.check()));
                }
                out
            };
            if a == Algorithm::LeakyBucket {
                // The shaper keeps its releases spaced: a slot with a later slot booked
                // behind it is not given back (see the README); it never gains.
                continue;
            }
            assert_eq!(
                run(true),
                run(false),
                "{a:?} {q:?}: the roll-back lost or made capacity"
            );
        }
    }
}

/// Item 2 with time moving between the booking and the roll-back: a roll-back never
/// gives more than the twin that never booked has.
#[test]
fn a_late_roll_back_never_makes_capacity() {
    let q = Quota::per_second(10).with_burst(10);
    for (a, gap_ms) in [Algorithm::TokenBucket, Algorithm::LeakyBucket]
        .into_iter()
        .flat_map(|a| [0u64, 10, 50, 100, 250, 1_000, 5_000].map(|g| (a, g)))
    {
        for used in [0u32, 3, 10] {
            let run = |multi: bool| {
                let clock = ManualClock::new();
                clock.set(Duration::from_secs(100));
                let global = Arc::new(
                    RateLimiter::builder(a, q)
                        .clock(clock.clone())
                        .build()
                        .unwrap(),
                );
                if used > 0 {
                    assert!(global.check_n(used).unwrap().is_allowed());
                }
                let hook = Hooked::new(SEC * 100);
                let other = RateLimiter::builder(denier(a), Quota::per_hour(1))
                    .clock(hook.clone())
                    .build()
                    .unwrap();
                assert!(other.check().is_allowed());
                let (g, c) = (Arc::clone(&global), clock.clone());
                let between = move || {
                    c.advance(Duration::from_millis(gap_ms));
                    let _ = g.check();
                };
                if multi {
                    hook.on_next_read(between);
                    let _ = check_all(&[&*global as &dyn Limit, &other], 1).unwrap();
                    assert!(hook.ran());
                } else {
                    between();
                }
                (0..30).filter(|_| global.check().is_allowed()).count()
            };
            let (with, without) = (run(true), run(false));
            assert!(
                with <= without,
                "{a:?} gap {gap_ms} ms, used {used}: {with} > {without}"
            );
            if gap_ms == 0 {
                assert_eq!(
                    with, without,
                    "{a:?} used {used}: an immediate roll-back is exact"
                );
            }
        }
    }
}

/// Item 3: a zero-cost multi-check of a sliding-log key inserts nothing, and in a full
/// `Deny` table it is admitted as `check_n(&k, 0)` is.
#[test]
fn a_zero_cost_multi_check_inserts_nothing() {
    for a in Algorithm::ALL {
        for on_full in [OnFull::Evict, OnFull::Deny, OnFull::Allow] {
            let l = KeyedRateLimiter::<u64, _>::builder(a, Quota::per_hour(5))
                .max_keys(16)
                .on_full(on_full)
                .clock(ManualClock::new())
                .build()
                .unwrap();
            let d = check_all(&[&l.limit(&7) as &dyn Limit], 0).unwrap();
            assert!(d.is_allowed(), "{a:?}");
            assert_eq!(l.stats().occupied, 0, "{a:?} {on_full:?}: inserted");
            let mut k = 1_000;
            while l.stats().occupied < l.stats().slots && k < 200_000 {
                let _ = l.check(&k);
                k += 1;
            }
            let single = l.check_n(&7, 0).unwrap();
            let multi = check_all(&[&l.limit(&7) as &dyn Limit], 0).unwrap();
            assert!(single.is_allowed(), "{a:?} {on_full:?}");
            assert_eq!(multi.decisions()[0], single, "{a:?} {on_full:?}");
        }
    }
}

/// Item 4: a full `Deny` table refuses a new key of tier 1 with tier 1's limit and
/// burst, through every verb.
#[test]
fn a_refusal_reports_the_deciding_tiers_policy() {
    for a in Algorithm::ALL {
        let (free, pro) = if matches!(a, Algorithm::TokenBucket | Algorithm::LeakyBucket) {
            (
                Quota::per_hour(10).with_burst(2),
                Quota::per_hour(1_000).with_burst(50),
            )
        } else {
            (Quota::per_hour(10), Quota::per_hour(1_000))
        };
        let l = KeyedRateLimiter::<u64, _>::builder(a, free)
            .tiers([pro])
            .max_keys(16)
            .on_full(OnFull::Deny)
            .clock(ManualClock::new())
            .build()
            .unwrap();
        let mut k = 1_000;
        loop {
            let d = l.check(&k);
            k += 1;
            if !d.is_allowed() {
                break;
            }
            assert!(k < 100_000, "the table never filled");
        }
        let t1 = l.tier(1).unwrap();
        let new = 5u64;
        let denials = [
            t1.check(&new),
            t1.check_n(&new, 1).unwrap(),
            check_all(&[&t1.limit(&new) as &dyn Limit], 1)
                .unwrap()
                .decisions()[0],
        ];
        for d in denials {
            assert!(!d.is_allowed(), "{a:?}");
            assert_eq!(d.limit(), pro.limit(), "{a:?}: {d:?}");
            assert_eq!(d.burst(), pro.burst(), "{a:?}: {d:?}");
        }
        // Tier 0's refusal still reports tier 0.
        let d = l.check(&new);
        assert_eq!(
            (d.limit(), d.burst()),
            (free.limit(), free.burst()),
            "{a:?}"
        );
    }
}

/// Item 5: a wait longer than the engine books is refused with that bound as
/// `max_wait`, never with a `max_wait` the wait does not exceed.
#[test]
fn a_too_long_wait_reports_a_bound_it_exceeds() {
    let forty_years = Duration::from_secs(40 * 365 * 86_400);
    for a in Algorithm::ALL {
        let l = RateLimiter::builder(a, Quota::new(1, forty_years))
            .clock(ManualClock::new())
            .build()
            .unwrap();
        assert!(l.check().is_allowed());
        match l.reserve(1, Duration::MAX) {
            Ok(r) => assert!(
                r.wait_time() >= Duration::from_secs(39 * 365 * 86_400),
                "{a:?}"
            ),
            Err(ReserveError::TooLong { wait, max_wait }) => {
                assert!(wait > max_wait, "{a:?}: {wait:?} <= {max_wait:?}");
                assert_eq!(max_wait, tollgate::Reservation::MAX_WAIT, "{a:?}");
            }
            Err(e) => panic!("{a:?}: {e}"),
        }
        let k = KeyedRateLimiter::<u64, _>::builder(a, Quota::new(1, forty_years))
            .clock(ManualClock::new())
            .build()
            .unwrap();
        assert!(k.check(&1).is_allowed());
        if let Err(ReserveError::TooLong { wait, max_wait }) = k.reserve(&1, 1, Duration::MAX) {
            assert!(wait > max_wait, "{a:?} keyed");
        }
    }
}

/// Item 8: a request whose reading is older than the window another request already
/// moved the state into, and which would be denied only for that, is decided again
/// at a fresh reading: no denial with a wait that has passed when it returns.
#[test]
fn a_stale_reading_at_a_window_boundary_is_not_falsely_denied() {
    for a in [Algorithm::FixedWindow, Algorithm::SlidingWindow] {
        let boundary = 11 * SEC;
        // Readings: the other request's (in window 11), ours (stale, in window 10),
        // then whatever the engine reads again (window 11).
        let clock = Scripted::new(&[boundary, boundary - 1_000], boundary);
        let l = RateLimiter::builder(a, Quota::per_second(4))
            .clock(clock.clone())
            .build()
            .unwrap();
        assert!(l.check().is_allowed()); // at 11 s: the state moves to window 11
        let d = l.check(); // read at 11 s − 1 µs
        assert!(d.is_allowed(), "{a:?}: {d:?}");

        let clock = Scripted::new(&[boundary, boundary, boundary - 1_000], boundary);
        let k = KeyedRateLimiter::<u64, _>::builder(a, Quota::per_second(4))
            .clock(clock.clone())
            .build()
            .unwrap();
        assert!(k.check(&1).is_allowed());
        assert!(k.check(&1).is_allowed());
        let d = k.check(&1);
        assert!(d.is_allowed(), "{a:?} keyed: {d:?}");
    }
}

/// A stale reading that is denied for good (the quota is spent in the state's window
/// too) is still denied, and its wait is measured from a fresh reading.
#[test]
fn a_stale_reading_of_a_spent_window_is_still_denied() {
    for a in [Algorithm::FixedWindow, Algorithm::SlidingWindow] {
        let boundary = 11 * SEC;
        let clock = Scripted::new(&[boundary, boundary - 1_000], boundary);
        let l = RateLimiter::builder(a, Quota::per_second(4))
            .clock(clock.clone())
            .build()
            .unwrap();
        assert!(l.check_n(4).unwrap().is_allowed());
        let d = l.check();
        assert!(!d.is_allowed(), "{a:?}");
        assert!(
            d.retry_after().unwrap() > Duration::from_millis(1),
            "{a:?}: {d:?}"
        );
    }
}

/// Item 9: after a cancelled booking left the state in a later window, a denial of a
/// request read before that window reports the reset time the state says (what a
/// zero-cost check at the same reading reports), not one that counts the request.
#[test]
fn a_queued_denial_reports_the_states_reset_time() {
    let clock = ManualClock::new();
    clock.set(Duration::from_secs(10));
    let l = RateLimiter::builder(Algorithm::SlidingWindow, Quota::per_second(4))
        .clock(clock.clone())
        .build()
        .unwrap();
    assert!(l.check_n(4).unwrap().is_allowed());
    clock.set(Duration::from_millis(10_600));
    let r = l
        .reserve(4, Duration::from_secs(5))
        .expect("booked into a later window");
    assert!(r.wait_time() > Duration::from_millis(400));
    r.cancel();
    let d = l.check();
    let now = l.check_n(0).unwrap();
    assert!(!d.is_allowed(), "{d:?}");
    assert_eq!(d.reset_after(), now.reset_after(), "{d:?} vs {now:?}");
}

/// Issue 37 item 1: a fixed window's state that a newer reading wrote (nothing booked)
/// decides an older reading at the state's time, in its window with its count: the
/// clock stepped back into window 0 after a request in window 1 leaves 4 of 5, and a
/// check is admitted (counted in window 1), on a single limiter, a keyed one and a
/// tier. Waits stay measured from the reading.
#[test]
fn a_fixed_window_read_behind_an_unbooked_state_decides_at_the_states_time() {
    let q = Quota::new(5, Duration::from_millis(100));
    let clock = ManualClock::new();
    let one = RateLimiter::builder(Algorithm::FixedWindow, q)
        .clock(clock.clone())
        .build()
        .unwrap();
    let keyed = keyed(Algorithm::FixedWindow, q, &clock);
    let tiered = KeyedRateLimiter::<u64, _>::builder(
        Algorithm::FixedWindow,
        Quota::new(50, Duration::from_millis(100)),
    )
    .tiers([q])
    .clock(clock.clone())
    .build()
    .unwrap();
    let tier = tiered.tier(1).unwrap();
    clock.set(Duration::from_millis(150));
    assert!(one.check().is_allowed());
    assert!(keyed.check(&1).is_allowed());
    assert!(tier.check_n(&1, 1).unwrap().is_allowed());
    clock.set(Duration::from_millis(50));
    let peeks = [
        one.check_n(0).unwrap(),
        keyed.check_n(&1, 0).unwrap(),
        tier.check_n(&1, 0).unwrap(),
    ];
    for (who, d) in ["single", "keyed", "tier"].iter().zip(peeks) {
        assert!(d.is_allowed(), "{who}: {d:?}");
        assert_eq!(d.remaining(), 4, "{who}: {d:?}");
        // Window 1 ends 150 ms after the reading.
        assert_eq!(d.reset_after(), Duration::from_millis(150), "{who}: {d:?}");
    }
    let checks = [one.check(), keyed.check(&1), tier.check_n(&1, 1).unwrap()];
    for (who, d) in ["single", "keyed", "tier"].iter().zip(checks) {
        assert!(d.is_allowed(), "{who}: {d:?}");
        assert_eq!(d.remaining(), 3, "{who}: {d:?}");
    }
    // Counted in window 1: three more fit, then a denial whose wait is measured from
    // the reading to window 1's end.
    assert!(one.check_n(3).unwrap().is_allowed());
    let d = one.check();
    assert!(!d.is_allowed(), "{d:?}");
    assert_eq!(d.retry_after(), Some(Duration::from_millis(150)));
    // A reservation read behind the state books at the state's time: no wait.
    assert_eq!(
        keyed.reserve(&1, 2, Duration::ZERO).unwrap().wait_time(),
        Duration::ZERO
    );
    // Window 2 starts fresh at its own reading.
    clock.set(Duration::from_millis(200));
    assert_eq!(one.check_n(0).unwrap().remaining(), 5);
}

/// Item 1's other half: a reading behind a state that a reservation moved into a later
/// window still queues behind the booking (nothing overtakes it), with the clock
/// stepped back or not.
#[test]
fn a_fixed_window_read_behind_a_booking_still_queues() {
    let q = Quota::new(5, Duration::from_millis(100));
    let clock = ManualClock::new();
    let one = RateLimiter::builder(Algorithm::FixedWindow, q)
        .clock(clock.clone())
        .build()
        .unwrap();
    let keyed = keyed(Algorithm::FixedWindow, q, &clock);
    clock.set(Duration::from_millis(20));
    assert!(one.check_n(4).unwrap().is_allowed());
    assert!(keyed.check_n(&1, 4).unwrap().is_allowed());
    let r = one.reserve(2, Duration::from_secs(1)).unwrap();
    let s = keyed.reserve(&1, 2, Duration::from_secs(1)).unwrap();
    assert_eq!(r.wait_time(), Duration::from_millis(80));
    assert_eq!(s.wait_time(), Duration::from_millis(80));
    for at in [30, 10] {
        clock.set(Duration::from_millis(at));
        for (who, d) in [("single", one.check()), ("keyed", keyed.check(&1))] {
            assert!(!d.is_allowed(), "{who} at {at} ms: {d:?}");
            assert_eq!(
                d.retry_after(),
                Some(Duration::from_millis(100 - at)),
                "{who} at {at} ms"
            );
        }
        assert_eq!(one.check_n(0).unwrap().remaining(), 0);
        assert_eq!(keyed.check_n(&1, 0).unwrap().remaining(), 0);
    }
    // Once a reading in the booked window writes the state, readings behind it are
    // decided at its time again.
    clock.set(Duration::from_millis(110));
    assert!(one.check().is_allowed());
    clock.set(Duration::from_millis(90));
    let d = one.check_n(0).unwrap();
    assert_eq!(d.remaining(), 2, "{d:?}");
}

/// Issue 37 item 1 for the sliding window: a state that a newer reading wrote (nothing
/// booked) decides an older reading at the state's time, the start of its window, where
/// the previous window weighs the most: 2 in window 0 and 1 in window 1 leave 2 of 5
/// when the clock steps back into window 0 (not 0, as a pending booking would), and
/// checks are admitted into window 1, on a single limiter, a keyed one and a tier. Waits
/// stay measured from the reading.
#[test]
fn a_sliding_window_read_behind_an_unbooked_state_decides_at_the_states_time() {
    let q = Quota::new(5, Duration::from_millis(100));
    let clock = ManualClock::new();
    let one = RateLimiter::builder(Algorithm::SlidingWindow, q)
        .clock(clock.clone())
        .build()
        .unwrap();
    let keyed = keyed(Algorithm::SlidingWindow, q, &clock);
    let tiered = KeyedRateLimiter::<u64, _>::builder(
        Algorithm::SlidingWindow,
        Quota::new(50, Duration::from_millis(100)),
    )
    .tiers([q])
    .clock(clock.clone())
    .build()
    .unwrap();
    let tier = tiered.tier(1).unwrap();
    clock.set(Duration::from_millis(50));
    assert!(one.check_n(2).unwrap().is_allowed());
    assert!(keyed.check_n(&1, 2).unwrap().is_allowed());
    assert!(tier.check_n(&1, 2).unwrap().is_allowed());
    clock.set(Duration::from_millis(150));
    assert!(one.check().is_allowed());
    assert!(keyed.check(&1).is_allowed());
    assert!(tier.check_n(&1, 1).unwrap().is_allowed());
    clock.set(Duration::from_millis(50));
    let peeks = [
        one.check_n(0).unwrap(),
        keyed.check_n(&1, 0).unwrap(),
        tier.check_n(&1, 0).unwrap(),
    ];
    for (who, d) in ["single", "keyed", "tier"].iter().zip(peeks) {
        assert!(d.is_allowed(), "{who}: {d:?}");
        // At 100 ms: 2 weigh in full, 1 counts, 2 are left.
        assert_eq!(d.remaining(), 2, "{who}: {d:?}");
        // Window 1's count weighs until window 2 ends, 250 ms after the reading.
        assert_eq!(d.reset_after(), Duration::from_millis(250), "{who}: {d:?}");
    }
    let checks = [one.check(), keyed.check(&1), tier.check_n(&1, 1).unwrap()];
    for (who, d) in ["single", "keyed", "tier"].iter().zip(checks) {
        assert!(d.is_allowed(), "{who}: {d:?}");
        assert_eq!(d.remaining(), 1, "{who}: {d:?}");
    }
    // A reservation read behind the state books at the state's time: no wait.
    assert_eq!(
        keyed.reserve(&1, 1, Duration::ZERO).unwrap().wait_time(),
        Duration::ZERO
    );
    // Counted in window 1: one more fits, then a denial whose wait is measured from the
    // reading: at 150 ms window 0's 2 weigh half, and a fourth request of window 1 fits.
    assert!(one.check().is_allowed());
    let d = one.check();
    assert!(!d.is_allowed(), "{d:?}");
    assert_eq!(d.retry_after(), Some(Duration::from_millis(100)));
    // Window 3 starts fresh at its own reading.
    clock.set(Duration::from_millis(300));
    assert_eq!(one.check_n(0).unwrap().remaining(), 5);
}

/// The sliding window's other half: a reading behind a state that a reservation moved
/// into a later window still queues behind the booking (nothing overtakes it), with the
/// clock stepped back or not; once a later reading wrote the state, an older one is
/// decided at its time again.
#[test]
fn a_sliding_window_read_behind_a_booking_still_queues() {
    let q = Quota::new(10, Duration::from_millis(100));
    let clock = ManualClock::new();
    let one = RateLimiter::builder(Algorithm::SlidingWindow, q)
        .clock(clock.clone())
        .build()
        .unwrap();
    let keyed = keyed(Algorithm::SlidingWindow, q, &clock);
    clock.set(Duration::from_millis(20));
    assert!(one.check_n(4).unwrap().is_allowed());
    assert!(keyed.check_n(&1, 4).unwrap().is_allowed());
    // 7 do not fit beside 4 in window 0: booked at 125 ms, where 4·75/100 + 7 = 10.
    let r = one.reserve(7, Duration::from_secs(1)).unwrap();
    let s = keyed.reserve(&1, 7, Duration::from_secs(1)).unwrap();
    assert_eq!(r.wait_time(), Duration::from_millis(105));
    assert_eq!(s.wait_time(), Duration::from_millis(105));
    for at in [30, 10] {
        clock.set(Duration::from_millis(at));
        for (who, d) in [("single", one.check()), ("keyed", keyed.check(&1))] {
            assert!(!d.is_allowed(), "{who} at {at} ms: {d:?}");
            // Window 1 starts, then 4·50/100 + 8 = 10 at 150 ms.
            assert_eq!(
                d.retry_after(),
                Some(Duration::from_millis(150 - at)),
                "{who} at {at} ms"
            );
        }
        assert_eq!(one.check_n(0).unwrap().remaining(), 0);
        assert_eq!(keyed.check_n(&1, 0).unwrap().remaining(), 0);
    }
    // A reading in window 2 writes the state (7 of window 1 weigh, 1 counts): readings
    // behind it are decided at its time again, its window's start.
    clock.set(Duration::from_millis(210));
    assert!(one.check().is_allowed());
    assert!(keyed.check(&1).is_allowed());
    clock.set(Duration::from_millis(190));
    for (who, d) in [
        ("single", one.check_n(0).unwrap()),
        ("keyed", keyed.check_n(&1, 0).unwrap()),
    ] {
        assert!(d.is_allowed(), "{who}: {d:?}");
        assert_eq!(d.remaining(), 2, "{who}: {d:?}");
    }
    assert!(one.check().is_allowed());
}

/// A single limiter, a keyed one and a tier of a keyed one, sliding logs of `q` on
/// `clock` (the tier's limiter allows ten times more, so that the tier decides).
fn logs(
    q: Quota,
    clock: &ManualClock,
) -> (
    RateLimiter<ManualClock>,
    KeyedRateLimiter<u64, ManualClock>,
    KeyedRateLimiter<u64, ManualClock>,
) {
    let one = RateLimiter::builder(Algorithm::SlidingLog, q)
        .clock(clock.clone())
        .build()
        .unwrap();
    let tiered = KeyedRateLimiter::<u64, _>::builder(
        Algorithm::SlidingLog,
        Quota::new(q.limit() * 10, q.period()),
    )
    .tiers([q])
    .clock(clock.clone())
    .build()
    .unwrap();
    (one, keyed(Algorithm::SlidingLog, q, clock), tiered)
}

/// Issue 37 (the sliding log read behind, found by the backward clock steps of item 9):
/// a reservation read behind the log's newest entry, with no booking pending, is
/// decided at the state's time as `check` decides it: booked there with no wait, not
/// made to wait for the reading to catch up. A booking for a later time still waits
/// from the reading, on a single limiter, a keyed one and a tier.
#[test]
fn a_sliding_log_reservation_read_behind_books_at_the_states_time() {
    let q = Quota::new(8, Duration::from_millis(100));
    let clock = ManualClock::new();
    let (one, keyed, tiered) = logs(q, &clock);
    let tier = tiered.tier(1).unwrap();
    clock.set(Duration::from_millis(50));
    assert!(one.check_n(6).unwrap().is_allowed());
    assert!(keyed.check_n(&1, 6).unwrap().is_allowed());
    assert!(tier.check_n(&1, 6).unwrap().is_allowed());
    clock.set(Duration::from_millis(40));
    let at_once = [
        one.reserve(1, Duration::ZERO),
        keyed.reserve(&1, 1, Duration::ZERO),
        tier.reserve(&1, 1, Duration::ZERO),
    ];
    for (who, r) in ["single", "keyed", "tier"].iter().zip(at_once) {
        let r = r.unwrap_or_else(|e| panic!("{who}: {e:?}"));
        assert_eq!(r.wait_time(), Duration::ZERO, "{who}");
        assert_eq!(r.decision().remaining(), 1, "{who}: {:?}", r.decision());
    }
    // Booked at 50 ms, not ahead: a check at the same reading is admitted.
    assert!(one.check().is_allowed());
    assert!(keyed.check(&1).is_allowed());
    assert!(tier.check_n(&1, 1).unwrap().is_allowed());
    // Full: the next fits when the entries of 50 ms leave, 110 ms after the reading.
    let later = [
        one.reserve(1, Duration::from_secs(1)),
        keyed.reserve(&1, 1, Duration::from_secs(1)),
        tier.reserve(&1, 1, Duration::from_secs(1)),
    ];
    for (who, r) in ["single", "keyed", "tier"].iter().zip(later) {
        let r = r.unwrap_or_else(|e| panic!("{who}: {e:?}"));
        assert_eq!(r.wait_time(), Duration::from_millis(110), "{who}");
    }
    // That booking is pending: a reading behind it queues until it is due.
    for (who, d) in [
        ("single", one.check()),
        ("keyed", keyed.check(&1)),
        ("tier", tier.check_n(&1, 1).unwrap()),
    ] {
        assert!(!d.is_allowed(), "{who}: {d:?}");
        assert_eq!(d.retry_after(), Some(Duration::from_millis(110)), "{who}");
    }
}

/// Issue 37, the sliding log read behind: a booking rolled back or cancelled at a
/// reading behind the log's newest entry leaves the log as the bookings left it, not
/// marked booked ahead (which queued every request until the clock passed the newest
/// entry): a `check_all` denied by another limit, a cancelled reservation (due at the
/// time it is logged at), on a single limiter, a keyed one and a tier; a reservation
/// that was pending is again after its successor is cancelled.
#[test]
fn a_sliding_log_given_back_behind_its_newest_entry_is_not_marked_booked() {
    let q = Quota::new(8, Duration::from_secs(3_600));
    let clock = ManualClock::new();
    let (one, keyed, tiered) = logs(q, &clock);
    let tier = tiered.tier(1).unwrap();
    let wall = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_hour(1))
        .clock(clock.clone())
        .build()
        .unwrap();
    clock.set(Duration::from_millis(50));
    assert!(wall.check().is_allowed());
    assert!(one.check().is_allowed());
    assert!(keyed.check(&1).is_allowed());
    assert!(tier.check_n(&1, 1).unwrap().is_allowed());
    clock.set(Duration::ZERO);
    let (k, t) = (keyed.limit(&1), tier.limit(&1));
    for (who, l) in [
        ("single", &one as &dyn Limit),
        ("keyed", &k as &dyn Limit),
        ("tier", &t as &dyn Limit),
    ] {
        let d = check_all(&[l, &wall], 1).unwrap();
        assert!(!d.is_allowed(), "{who}: {d:?}");
    }
    let peeks = [one.peek(), keyed.peek(&1), tier.peek(&1)];
    for (who, d) in ["single", "keyed", "tier"].iter().zip(peeks) {
        assert!(d.is_allowed(), "{who} after a roll-back: {d:?}");
        assert_eq!(d.remaining(), 6, "{who} after a roll-back: {d:?}");
    }
    let bookings = [
        one.reserve(2, Duration::from_secs(1)).unwrap(),
        keyed.reserve(&1, 2, Duration::from_secs(1)).unwrap(),
        tier.reserve(&1, 2, Duration::from_secs(1)).unwrap(),
    ];
    // Booked at once at the state's time, 50 ms: due then, so a cancel read before
    // it gives back.
    clock.set(Duration::from_millis(20));
    for r in bookings {
        assert_eq!(r.wait_time(), Duration::ZERO);
        r.cancel();
    }
    let peeks = [one.peek(), keyed.peek(&1), tier.peek(&1)];
    for (who, d) in ["single", "keyed", "tier"].iter().zip(peeks) {
        assert!(d.is_allowed(), "{who} after a cancel: {d:?}");
        assert_eq!(d.remaining(), 6, "{who} after a cancel: {d:?}");
    }
    assert!(one.check().is_allowed());
    assert!(keyed.check(&1).is_allowed());
    assert!(tier.check_n(&1, 1).unwrap().is_allowed());
    // A pending booking stays pending when the one booked behind it is cancelled.
    let q = Quota::new(2, Duration::from_millis(100));
    let (one, keyed, _) = logs(q, &clock);
    clock.set(Duration::from_millis(10));
    assert!(one.check_n(2).unwrap().is_allowed());
    assert!(keyed.check_n(&1, 2).unwrap().is_allowed());
    let first = [
        one.reserve(1, Duration::from_secs(1)).unwrap(),
        keyed.reserve(&1, 1, Duration::from_secs(1)).unwrap(),
    ];
    let second = [
        one.reserve(1, Duration::from_secs(1)).unwrap(),
        keyed.reserve(&1, 1, Duration::from_secs(1)).unwrap(),
    ];
    for (f, s) in first.iter().zip(&second) {
        assert_eq!(f.wait_time(), Duration::from_millis(100));
        assert_eq!(s.wait_time(), Duration::from_millis(100));
    }
    for s in second {
        s.cancel();
    }
    for (who, d) in [("single", one.check()), ("keyed", keyed.check(&1))] {
        assert!(!d.is_allowed(), "{who}: {d:?}");
        assert_eq!(d.retry_after(), Some(Duration::from_millis(100)), "{who}");
    }
    drop(first);
}

// ---------------------------------------------------------------------------------
// Clocks for the schedules above.

/// A clock that returns the scripted readings in order, then `after` forever.
#[derive(Clone)]
struct Scripted {
    readings: Arc<Mutex<VecDeque<u64>>>,
    after: Arc<AtomicU64>,
}

impl Scripted {
    fn new(readings: &[u64], after: u64) -> Self {
        Scripted {
            readings: Arc::new(Mutex::new(readings.iter().copied().collect())),
            after: Arc::new(AtomicU64::new(after)),
        }
    }
}

impl Clock for Scripted {
    fn now(&self) -> u64 {
        self.readings
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| self.after.load(Ordering::Relaxed))
    }
}

/// The kind of a spent limit that denies a `check_all` after the limit under test has
/// booked: leaky buckets book after every other kind, so a leaky bucket is denied
/// after its booking only by another leaky bucket.
fn denier(a: Algorithm) -> Algorithm {
    match a {
        Algorithm::LeakyBucket => Algorithm::LeakyBucket,
        _ => Algorithm::FixedWindow,
    }
}
