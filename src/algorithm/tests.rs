//! Properties of the step functions that the keyed table relies on: an idle state
//! decides exactly as the fresh state `0`, and a state is never reported idle while it
//! still remembers an admission that would change a decision.

use super::booking::Book;
use super::packed::Step;
use super::*;
use crate::quota::Quota;

fn packed(algorithm: Algorithm, quota: Quota) -> PackedParams {
    match Params::new(algorithm, quota).expect("valid quota") {
        Params::Packed(p) => p,
        Params::Log(_) => unreachable!("packed algorithms only"),
    }
}

/// A seeded xorshift generator: `next(n)` is uniform enough in `0..n` for schedules.
fn xorshift(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut rng = seed;
    move |n| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    }
}

/// Every packed algorithm under every quota of [`quotas`]: the algorithm, the quota,
/// its parameters and its period in ns.
fn packed_cases() -> impl Iterator<Item = (Algorithm, Quota, PackedParams, u64)> {
    [
        Algorithm::TokenBucket,
        Algorithm::LeakyBucket,
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
    ]
    .into_iter()
    .flat_map(|algorithm| {
        quotas().into_iter().map(move |quota| {
            let period = quota.period().as_nanos() as u64;
            (algorithm, quota, packed(algorithm, quota), period)
        })
    })
}

fn quotas() -> Vec<Quota> {
    vec![
        Quota::new(1, Duration::from_nanos(1000)),
        Quota::new(3, Duration::from_nanos(1000)),
        Quota::new(7, Duration::from_nanos(999)).with_burst(7),
        Quota::new(5, Duration::from_nanos(1_000_000)),
    ]
}

#[test]
fn idle_states_decide_like_fresh_ones() {
    let mut next = xorshift(0x2545_f491_4f6c_dd1d);
    for (algorithm, quota, params, period) in packed_cases() {
        let (mut state, mut now) = (0u64, 0u64);
        let mut idle_seen = 0;
        for _ in 0..20_000 {
            now += next(period * 3 / 2 + 1);
            let cost = next(u64::from(params.burst()) + 1) as u32;
            if params.is_idle(state, now) {
                idle_seen += 1;
                // Every later time and cost: same decision as a fresh key.
                for _ in 0..4 {
                    let later = now + next(3 * period);
                    let c = next(u64::from(params.burst()) + 1) as u32;
                    assert_eq!(
                            params.step(state, later, c),
                            params.step(0, later, c),
                            "{algorithm:?} {quota:?} state {state:#x} idle at {now}, differs at {later}"
                        );
                }
            }
            if let (Some(s), _) = params.step(state, now, cost) {
                state = s;
                assert!(
                    !params.is_idle(state, now) || cost == 0,
                    "{algorithm:?}: idle right after admitting {cost}"
                );
            }
        }
        assert!(
            idle_seen > 100,
            "{algorithm:?} {quota:?}: schedule never went idle"
        );
    }
}

#[test]
fn sliding_log_is_idle_once_the_newest_entry_left_the_window() {
    let quota = Quota::new(3, Duration::from_nanos(100));
    let Params::Log(log) = Params::new(Algorithm::SlidingLog, quota).expect("valid") else {
        unreachable!("sliding log")
    };
    let mut ring = sliding_log::Ring::new(&log);
    assert!(log.cursor_is_idle(ring.cursor(), 0));
    assert!(log.step(&mut ring, 10, 2).is_allowed());
    assert!(!log.cursor_is_idle(ring.cursor(), 109));
    assert!(log.cursor_is_idle(ring.cursor(), 110));
    ring.clear();
    assert!(log.cursor_is_idle(ring.cursor(), 0));
}

#[test]
fn idle_at_is_exactly_when_a_state_turns_idle() {
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
    for (algorithm, quota, params, period) in packed_cases() {
        let (mut state, mut now) = (0u64, 0u64);
        for _ in 0..20_000 {
            now += next(period / 2 + 1);
            let cost = next(u64::from(params.burst()) + 1) as u32;
            if let (Some(s), _) = params.step(state, now, cost) {
                state = s;
            }
            let at = params.idle_at(state);
            for probe in [
                now,
                at.saturating_sub(1),
                at,
                at + 1,
                now + next(3 * period),
            ] {
                if probe < now {
                    continue; // readings before the state's own time say nothing
                }
                assert_eq!(
                    params.is_idle(state, probe),
                    probe >= at,
                    "{algorithm:?} {quota:?} state {state:#x} idle_at {at}, probe {probe}"
                );
            }
        }
    }
}

/// The keyed table's fast path computes the new state with `next_state` and the
/// decision with `Step::decision`: together they must be exactly `step`, for every
/// packed algorithm, on states reached by real schedules (including states in a later
/// window than the reading, which a reservation leaves) and on arbitrary bit patterns.
#[test]
fn next_state_and_decision_are_exactly_step() {
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
    for (algorithm, quota, params, period) in packed_cases() {
        let (mut state, mut now) = (0u64, 0u64);
        for i in 0..20_000 {
            now += next(period / 3 + 1);
            let cost = next(u64::from(params.burst()) + 1) as u32;
            // Now and then a reading older than the state's window.
            let reading = if i % 7 == 0 {
                now.saturating_sub(next(period))
            } else {
                now
            };
            let (s, d) = params.step(state, reading, cost);
            assert_eq!(
                params.next_state(state, reading, cost),
                s,
                "{algorithm:?} {quota:?}"
            );
            let via = match params {
                PackedParams::Gcra(p) => (
                    p.next_state(state, reading, cost),
                    p.decision(state, reading, cost),
                ),
                PackedParams::Fixed(p) => (
                    p.next_state(state, reading, cost),
                    p.decision(state, reading, cost),
                ),
                PackedParams::Sliding(p) => (
                    Step::next_state(&p, state, reading, cost),
                    p.decision(state, reading, cost),
                ),
            };
            assert_eq!(
                via,
                (s, d),
                "{algorithm:?} {quota:?} state {state:#x} at {reading}"
            );
            if i % 5 == 0 {
                // A reservation can move the state to a later window.
                if let (Some(booked), Ok(_)) =
                    params.book(state, now, cost.max(1), Book::Wait(3 * period))
                {
                    state = booked;
                    continue;
                }
            }
            if let Some(s) = s {
                state = s;
            }
        }
    }
}

/// The keyed table evicts the live entry of lowest rank (`Ranking::of`), ordered as
/// (what it has used, its idle stamp). On states reached by real schedules: the rank
/// orders the states as the quota they have left does, reversed (a state that ranks
/// higher never has more left), so no state with quota left ranks above one that has
/// none; and `Ranking::of` reads the idle stamp as `idle_at` does.
#[test]
fn rank_orders_live_states_by_the_quota_they_have_left() {
    let mut next = xorshift(0x5851_f42d_4c95_7f2d);
    for (algorithm, quota, params, period) in packed_cases() {
        let mut states = [0u64; 6];
        let mut now = 0u64;
        for _ in 0..5_000 {
            now += next(period / 4 + 1);
            let key = next(states.len() as u64) as usize;
            let cost = next(u64::from(params.burst()) + 1) as u32;
            if let (Some(s), _) = params.step(states[key], now, cost) {
                states[key] = s;
            }
            let ranking = params.ranking(now);
            let live: Vec<(u128, u32)> = states
                .iter()
                .filter(|&&s| params.idle_at(s) > now)
                .map(|&s| {
                    let (idle_at, rank) = ranking.of(s);
                    assert_eq!(idle_at, params.idle_at(s));
                    (rank, params.step(s, now, 0).1.remaining())
                })
                .collect();
            for &(rank_a, left_a) in &live {
                for &(rank_b, left_b) in &live {
                    assert!(
                        rank_a >= rank_b || left_a >= left_b,
                        "{algorithm:?} {quota:?} at {now}: rank {rank_a} < {rank_b} but {left_a} < {left_b} left"
                    );
                }
            }
        }
    }
}

/// A state booked into a later window admits nothing before it starts: it ranks above
/// every state of the current window, even one that used the whole quota.
#[test]
fn rank_puts_a_booking_into_a_later_window_above_a_full_window() {
    let quota = Quota::new(4, Duration::from_nanos(1_000));
    for algorithm in [Algorithm::FixedWindow, Algorithm::SlidingWindow] {
        let params = packed(algorithm, quota);
        let full = params.step(0, 100, 4).0.expect("admitted");
        let (booked, reserved) = params.book(full, 100, 1, Book::Wait(10_000));
        let booked = booked.expect("booked");
        assert!(reserved.is_ok_and(|b| b.wait > 0), "{algorithm:?}");
        let ranking = params.ranking(100);
        assert!(ranking.of(booked).1 > ranking.of(full).1, "{algorithm:?}");
        let half = params.step(0, 100, 2).0.expect("admitted");
        assert!(ranking.of(half).1 < ranking.of(full).1, "{algorithm:?}");
    }
}

/// The sliding window ranks by its weighted count (twice it, plus 1 for a current
/// count, which goes idle a window later): at mid-window, a previous window's 4 weigh
/// as 2, under a current 3 and over a current 1. A bucket ranks by its debt, `TAT`.
#[test]
fn sliding_window_ranks_by_the_weighted_count() {
    let params = packed(
        Algorithm::SlidingWindow,
        Quota::new(4, Duration::from_nanos(1_000)),
    );
    let previous = params.step(0, 500, 4).0.expect("admitted");
    let three = params.step(0, 1_500, 3).0.expect("admitted");
    let one = params.step(0, 1_500, 1).0.expect("admitted");
    let ranking = params.ranking(1_500);
    assert_eq!(ranking.of(previous), (2_000, 2 * 2 * 1_000));
    assert_eq!(ranking.of(three), (3_000, 2 * 3 * 1_000 + 1));
    assert_eq!(ranking.of(one), (3_000, 2 * 1_000 + 1));
    let bucket = packed(
        Algorithm::TokenBucket,
        Quota::new(4, Duration::from_nanos(1_000)),
    );
    let tat = bucket.step(0, 100, 3).0.expect("admitted");
    assert_eq!(bucket.ranking(200).of(tat), (tat, u128::from(tat)));
}

/// The log ranks by its entries in `(now − P, now]`, then its idle stamp; a booking
/// after `now` ranks above every log without one.
#[test]
fn sliding_log_ranks_by_the_entries_in_the_period() {
    let quota = Quota::new(4, Duration::from_nanos(100));
    let Params::Log(log) = Params::new(Algorithm::SlidingLog, quota).expect("valid") else {
        unreachable!("sliding log")
    };
    let rank = |ring: &sliding_log::Ring, now| {
        log.evict_rank(ring, now, log.cursor_idle_at(ring.cursor()))
    };
    let used = |ring: &sliding_log::Ring, now| rank(ring, now) >> 64;
    let mut ring = sliding_log::Ring::new(&log);
    assert!(log.step(&mut ring, 10, 1).is_allowed());
    assert!(log.step(&mut ring, 50, 2).is_allowed());
    assert_eq!(used(&ring, 60), 3);
    assert_eq!(used(&ring, 109), 3);
    assert_eq!(used(&ring, 110), 2);
    assert_eq!(rank(&ring, 110), (2 << 64) | 150);
    let mut full = sliding_log::Ring::new(&log);
    assert!(log.step(&mut full, 50, 4).is_allowed());
    assert!(rank(&full, 60) > rank(&ring, 60));
    let mut booked = sliding_log::Ring::new(&log);
    assert!(log.step(&mut booked, 50, 4).is_allowed());
    assert!(log.reserve(&mut booked, 60, 1, 1_000).is_ok());
    assert!(rank(&booked, 60) > rank(&full, 60));
    // The cursor's bounds hold the rank.
    for (r, now) in [
        (&ring, 60),
        (&ring, 110),
        (&full, 60),
        (&booked, 60),
        (&booked, 200),
    ] {
        let [floor, ceiling] =
            log.evict_rank_bounds(r.cursor(), now, log.cursor_idle_at(r.cursor()));
        assert!(floor <= rank(r, now) && rank(r, now) <= ceiling, "{now}");
    }
}

/// A booking decided at `t`, `lag` after the caller's reading (a keyed table's missing
/// key, raised to the reclaim floor), as that caller sees it: a wait `lag` longer, due
/// when it would be had it been decided at `t`, the bound applied to the wait from the
/// reading; a booking admitted at once waits nothing and its decision's reset is `lag`
/// longer. (A fresh state, all a missing key has, never waits: these are the cases the
/// keyed tests cannot reach.)
#[test]
fn a_booking_decided_behind_the_reading_waits_from_the_reading() {
    let lag = 37;
    for (algorithm, quota, params, period) in packed_cases() {
        let t = 5 * period + 3;
        let full = params
            .next_state(0, t, params.burst())
            .expect("the burst fits a fresh state");
        let how = |max_wait| Book::Wait(max_wait);
        let (_, at_t) = params.book(full, t, 1, how(u64::MAX >> 8));
        let w = at_t.expect("no bound").wait;
        assert!(w > 0, "{algorithm:?} {quota:?}: a full state waits");
        let case = format!("{algorithm:?} {quota:?}, waiting {w} from {t}");
        // Fits the bound from the reading exactly.
        let bound = how(w + lag);
        let (_, r) = params.book(full, t, 1, bound.behind(lag));
        let (b, from) = bound.seen_behind(r, t, lag).expect(&case);
        assert_eq!((b.wait, from + b.wait), (w + lag, t + w), "{case}");
        // One ns short of it: too long, reported from the reading.
        let bound = how(w + lag - 1);
        let (next, r) = params.book(full, t, 1, bound.behind(lag));
        assert_eq!(next, None, "{case}: a refused reservation writes nothing");
        let late = bound.seen_behind(r, t, lag).expect_err(&case);
        assert_eq!((late.wait, late.allowed), (w + lag, w + lag - 1), "{case}");
        // A lag longer than the bound refuses every wait.
        let bound = how(lag - 1);
        let (_, r) = params.book(full, t, 1, bound.behind(lag));
        let late = bound.seen_behind(r, t, lag).expect_err(&case);
        assert_eq!((late.wait, late.allowed), (w + lag, lag - 1), "{case}");
        // Admitted at once (a fresh state): no wait, due at `t`, the reset `lag` longer.
        let bound = how(0);
        let (_, r) = params.book(0, t, 1, bound.behind(lag));
        let truth = params.book(0, t, 1, bound).1.expect(&case).decision;
        let (b, from) = bound.seen_behind(r, t, lag).expect(&case);
        assert_eq!((b.wait, from), (0, t), "{case}");
        assert_eq!(
            b.decision.reset_after().as_nanos(),
            truth.reset_after().as_nanos() + u128::from(lag),
            "{case}"
        );
    }
}

#[test]
fn a_decision_behind_the_reading_shifts_every_wait_but_a_zero() {
    use crate::decision::Decision;
    let allowed = Decision::allow(5, 2, 100, 40).lagged(7);
    assert_eq!(
        (
            allowed.reset_after().as_nanos(),
            allowed.delay().as_nanos(),
            allowed.retry_after()
        ),
        (107, 47, None)
    );
    let nothing_held = Decision::allow(5, 5, 0, 0).lagged(7);
    assert_eq!(nothing_held, Decision::allow(5, 5, 0, 0));
    let denied = Decision::deny(5, 0, 100, 60).lagged(7);
    assert_eq!(
        (denied.reset_after().as_nanos(), denied.retry_after()),
        (107, Some(Duration::from_nanos(67)))
    );
    let far = Decision::deny(5, 0, u64::MAX, u64::MAX - 1).lagged(7);
    assert_eq!(far.retry_after(), Some(Duration::from_nanos(u64::MAX)));
}
