//! Properties of the step functions that the keyed table relies on: an idle state
//! decides exactly as the fresh state `0`, and a state is never reported idle while it
//! still remembers an admission that would change a decision.

use super::*;
use crate::Quota;

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
            let cost = next(u64::from(params.capacity()) + 1) as u32;
            if params.is_idle(state, now) {
                idle_seen += 1;
                // Every later time and cost: same decision as a fresh key.
                for _ in 0..4 {
                    let later = now + next(3 * period);
                    let c = next(u64::from(params.capacity()) + 1) as u32;
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
            let cost = next(u64::from(params.capacity()) + 1) as u32;
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
            let cost = next(u64::from(params.capacity()) + 1) as u32;
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
                if let (Some(booked), Ok(_)) = params.reserve(state, now, cost.max(1), 3 * period) {
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
