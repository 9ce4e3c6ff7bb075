//! A key's quota must not come back when its slot is reclaimed while one of its own
//! requests is in flight (issue 13.1).
//!
//! The in-flight request is modelled by the clock stepping back: key A's request reads
//! 10.5 s *after* key C, reading 11 s, has found A idle and taken its slot. This is
//! exactly what a thread that read 10.5 s and was descheduled, or a core whose clock
//! lags another's, presents to the table. A request must then never be decided at a
//! reading older than the reclaim: a `RateLimiter` fed the same readings in the order
//! they happened is the reference.

use std::time::Duration;
use tollgate::{Algorithm, KeyedRateLimiter, ManualClock, OnFull, Quota, RateLimiter};

const A: u64 = 1;
const B: u64 = 2;
const C: u64 = 3;

fn at(clock: &ManualClock, ms: u64) {
    clock.set(Duration::from_millis(ms));
}

/// Admissions of key A over the race: `cost` at 10 s and at 10.5 s (the request in
/// flight), then cost-1 requests at 11 s until one is denied.
fn keyed_admissions(algorithm: Algorithm, cost: u32) -> u32 {
    let clock = ManualClock::new();
    let l = KeyedRateLimiter::<u64, _>::builder(algorithm, Quota::per_second(2))
        .max_keys(1)
        .on_full(OnFull::Deny)
        .hash_seed(1)
        .clock(clock.clone())
        .build()
        .unwrap();
    let mut admitted = 0;
    at(&clock, 0);
    assert!(l.check(&A).is_allowed());
    at(&clock, 5_000);
    assert!(l.check(&B).is_allowed());
    at(&clock, 10_000);
    admitted += cost * u32::from(l.check_n(&A, cost).unwrap().is_allowed());
    at(&clock, 11_000);
    // A is idle at 11 s: C takes its slot (B's, idle too, may go instead for some
    // seeds; the race needs A's to go, which the assertion below checks).
    assert!(l.check(&C).is_allowed());
    assert_eq!(l.stats().idle_reclaims, 1);
    at(&clock, 10_500); // A's request that read the clock before C's reclaim
    admitted += cost * u32::from(l.check_n(&A, cost).unwrap().is_allowed());
    at(&clock, 11_000);
    admitted + drain(|| l.check(&A).is_allowed())
}

/// Requests of cost 1 until one is denied: how many were admitted.
fn drain(mut check: impl FnMut() -> bool) -> u32 {
    let mut n = 0;
    while n < 100 && check() {
        n += 1;
    }
    n
}

/// The same requests of key A on a single limiter, in the order their readings were
/// taken: 10 s, 10.5 s, then cost-1 requests at 11 s until one is denied.
fn reference_admissions(algorithm: Algorithm, cost: u32) -> u32 {
    let clock = ManualClock::new();
    let l = RateLimiter::builder(algorithm, Quota::per_second(2))
        .clock(clock.clone())
        .build()
        .unwrap();
    let mut admitted = 0;
    at(&clock, 0);
    assert!(l.check().is_allowed());
    for ms in [10_000, 10_500] {
        at(&clock, ms);
        admitted += cost * u32::from(l.check_n(cost).unwrap().is_allowed());
    }
    at(&clock, 11_000);
    admitted + drain(|| l.check().is_allowed())
}

#[test]
fn a_reclaim_while_a_request_is_in_flight_never_gives_the_quota_back() {
    let mut failures = Vec::new();
    for algorithm in Algorithm::ALL {
        for cost in [1, 2] {
            let keyed = keyed_admissions(algorithm, cost);
            let reference = reference_admissions(algorithm, cost);
            // The keyed request at 10.5 s may be decided at 11 s (the reclaim's
            // reading), which can only admit less than the reference, never more;
            // and never more than the quota allows over [10 s, 11 s]: 2 per window or
            // burst, plus 2 by 11 s.
            if keyed > reference || keyed > 4 {
                failures.push(format!(
                    "{algorithm:?} cost {cost}: keyed admitted {keyed}, a single limiter {reference}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A table of room for one key under `on_full` where key A's slot was reclaimed at 11 s
/// (by C; B is live then, A the only idle entry) and the clock then set back to
/// 10.5 s: A's next request reads 10.5 s, finds A missing and is decided at 11 s.
fn reclaimed_at_11s_read_at_10_5s(
    algorithm: Algorithm,
    on_full: OnFull,
) -> KeyedRateLimiter<u64, ManualClock> {
    let clock = ManualClock::new();
    let l = KeyedRateLimiter::<u64, _>::builder(algorithm, Quota::per_second(2))
        .max_keys(1)
        .on_full(on_full)
        .hash_seed(1)
        .clock(clock.clone())
        .build()
        .unwrap();
    at(&clock, 0);
    assert!(l.check(&A).is_allowed());
    at(&clock, 5_000);
    assert!(l.check(&B).is_allowed());
    at(&clock, 11_000);
    assert!(l.check(&B).is_allowed());
    assert!(l.check(&C).is_allowed());
    let stats = l.stats();
    assert_eq!(
        (stats.idle_reclaims, stats.evictions),
        (1, 0),
        "{algorithm:?}"
    );
    at(&clock, 10_500);
    l
}

/// What a fresh single limiter decides at the reclaim's reading, 11 s.
fn fresh_at_11s(algorithm: Algorithm) -> RateLimiter<ManualClock> {
    let clock = ManualClock::new();
    at(&clock, 11_000);
    RateLimiter::builder(algorithm, Quota::per_second(2))
        .clock(clock)
        .build()
        .unwrap()
}

const LAG: Duration = Duration::from_millis(500);

#[test]
fn a_key_asked_for_behind_its_reclaim_gets_its_waits_from_its_reading() {
    let mut failures = Vec::new();
    for algorithm in Algorithm::ALL {
        // A check: decided at 11 s, its reset half a second later from 10.5 s.
        let l = reclaimed_at_11s_read_at_10_5s(algorithm, OnFull::Evict);
        let d = l.check(&A);
        let truth = fresh_at_11s(algorithm).check();
        if d.is_allowed() != truth.is_allowed() || d.reset_after() < truth.reset_after() + LAG {
            failures.push(format!(
                "{algorithm:?} check: {d:?}, decided at 11 s it is {truth:?}, from 10.5 s its reset is {:?} later",
                LAG
            ));
        }
        // A reservation: admitted at once at 11 s (no wait), its decision's reset
        // from 10.5 s.
        let l = reclaimed_at_11s_read_at_10_5s(algorithm, OnFull::Evict);
        let r = l.reserve(&A, 2, Duration::ZERO).unwrap();
        let single = fresh_at_11s(algorithm);
        let truth = single.reserve(2, Duration::ZERO).unwrap();
        if r.wait_time() != truth.wait_time()
            || r.decision().reset_after() < truth.decision().reset_after() + LAG
        {
            failures.push(format!(
                "{algorithm:?} reserve: waits {:?} with {:?}; decided at 11 s it waits {:?} with {:?}",
                r.wait_time(),
                r.decision(),
                truth.wait_time(),
                truth.decision()
            ));
        }
        // A charge of the whole burst: its decision (the next request denied) with
        // its reset and its retry from 10.5 s.
        let l = reclaimed_at_11s_read_at_10_5s(algorithm, OnFull::Evict);
        let c = l.charge(&A, 2);
        let single = fresh_at_11s(algorithm);
        let truth = single.charge(2);
        let early = |got: Option<Duration>, truth: Option<Duration>| match (got, truth) {
            (Some(got), Some(truth)) => got < truth + LAG,
            (got, truth) => got != truth,
        };
        if c.decision().reset_after() < truth.decision().reset_after() + LAG
            || early(c.decision().retry_after(), truth.decision().retry_after())
        {
            failures.push(format!(
                "{algorithm:?} charge: {:?}; decided at 11 s {:?}",
                c.decision(),
                truth.decision()
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn a_refusal_behind_a_reclaim_says_when_the_soonest_entry_frees_up_from_the_reading() {
    // B and C were admitted at 11 s: a bucket's entries go idle at 11.5 s, the log's
    // at 12 s; from the reading, 10.5 s, that is 1 s and 1.5 s.
    let mut failures = Vec::new();
    for (algorithm, soonest) in [
        (Algorithm::TokenBucket, Duration::from_millis(1_000)),
        (Algorithm::SlidingLog, Duration::from_millis(1_500)),
    ] {
        let l = reclaimed_at_11s_read_at_10_5s(algorithm, OnFull::Deny);
        let d = l.check(&A);
        assert_eq!(l.stats().refused, 1, "{algorithm:?}: {d:?}");
        if d.retry_after() != Some(soonest) {
            failures.push(format!(
                "{algorithm:?} check: {d:?}, the soonest entry frees up in {soonest:?}"
            ));
        }
        match l.reserve(&A, 1, Duration::from_secs(10)) {
            Err(tollgate::ReserveError::Refused { retry_after }) if retry_after == soonest => {}
            other => failures.push(format!(
                "{algorithm:?} reserve: {other:?}, the soonest entry frees up in {soonest:?}"
            )),
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
