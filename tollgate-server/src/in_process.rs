//! The enforced limits of one request decided in this process, all or nothing.
//!
//! A request that books one limit (the usual Envoy request: one descriptor, one limit) is
//! decided by that limit's own `check_n`: one limit is all or nothing by itself, and
//! `check_n` is the step `check_all_costs` books with, without the `Limit` handle, the
//! booking kept for a roll-back that cannot happen, and the vectors around them. Several
//! are decided by the library's `check_all_costs`, each with its own hits. The tests below
//! run both ways on twin limiters over the same sequences and compare every answer (the
//! caller turns either into the same statuses: [`Decided::decisions`] and
//! [`Decided::is_allowed`] are all it reads).

use tollgate::{check_all_costs, Clock, Decision, InsufficientCapacity, KeyedRateLimiter, Limit};

/// One limit's part of a request: the limiter, the key, the hits (> 0).
pub(crate) type Booking<'a, C> = (&'a KeyedRateLimiter<str, C>, &'a str, u32);

/// What the limits of a request said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decided {
    /// The one limit's decision.
    One(Decision),
    /// Several limits' decisions, all or nothing.
    All(tollgate::MultiDecision),
}

impl Decided {
    /// Whether every limit admitted the request (and so it was taken from each).
    pub(crate) fn is_allowed(&self) -> bool {
        match self {
            Decided::One(d) => d.is_allowed(),
            Decided::All(md) => md.is_allowed(),
        }
    }

    /// One decision per limit, in the order given. When the request is denied, a limit
    /// that would have admitted reports `is_allowed()`, but nothing was taken from it.
    pub(crate) fn decisions(&self) -> &[Decision] {
        match self {
            Decided::One(d) => std::slice::from_ref(d),
            Decided::All(md) => md.decisions(),
        }
    }
}

/// Decides `limits` all or nothing: one by its own `check_n`, several by
/// [`all_or_nothing`].
///
/// # Errors
///
/// [`InsufficientCapacity`] when some hits exceed their limit's burst (the caller denies
/// those before asking, so only a quota lowered meanwhile gets here).
pub(crate) fn decide<C: Clock>(limits: &[Booking<'_, C>]) -> Result<Decided, InsufficientCapacity> {
    match limits {
        [(k, key, n)] => k.check_n(key, *n).map(Decided::One),
        _ => all_or_nothing(limits),
    }
}

/// Decides `limits` by the library's `check_all_costs`: admitted, and taken from each,
/// only if every limit admits its hits; otherwise nothing is taken from any.
///
/// # Errors
///
/// As [`decide`].
pub(crate) fn all_or_nothing<C: Clock>(
    limits: &[Booking<'_, C>],
) -> Result<Decided, InsufficientCapacity> {
    let keyed: Vec<_> = limits.iter().map(|&(k, key, _)| k.limit(key)).collect();
    let costs: Vec<(&dyn Limit, u32)> = limits
        .iter()
        .zip(&keyed)
        .map(|(&(_, _, n), k)| (k as &dyn Limit, n))
        .collect();
    check_all_costs(&costs).map(Decided::All)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tollgate::{Algorithm, ManualClock, OnFull, Quota};

    type Limiter = KeyedRateLimiter<str, ManualClock>;

    fn limiter(a: Algorithm, on_full: OnFull, clock: &ManualClock) -> Limiter {
        let quota = match a {
            Algorithm::TokenBucket | Algorithm::LeakyBucket => Quota::per_second(4).with_burst(6),
            _ => Quota::per_second(5),
        };
        KeyedRateLimiter::builder(a, quota)
            .max_keys(4)
            .on_full(on_full)
            .clock(clock.clone())
            .build()
            .expect("a valid limit")
    }

    /// Every request of a long pseudo-random sequence (keys, hits, pauses) gets the same
    /// answer from `decide` on one limit (its `check_n`) as from `all_or_nothing` on a
    /// twin limit fed the same requests at the same times, for every algorithm and every
    /// `OnFull` on a table smaller than the keys (so claims, evictions, refusals and
    /// untracked admissions are compared too); so does each limiter's count.
    #[test]
    fn one_limit_decides_as_check_all_costs_does() {
        let algorithms = [
            Algorithm::TokenBucket,
            Algorithm::LeakyBucket,
            Algorithm::FixedWindow,
            Algorithm::SlidingWindow,
            Algorithm::SlidingLog,
        ];
        let keys: Vec<String> = (0..64).map(|k| format!("user_{k}")).collect();
        for a in algorithms {
            for on_full in [OnFull::Evict, OnFull::Deny, OnFull::Allow] {
                let clock = ManualClock::new();
                let (one, all) = (limiter(a, on_full, &clock), limiter(a, on_full, &clock));
                let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
                let (mut admitted, mut denied) = (0, 0);
                for step in 0..4_000 {
                    seed = seed
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1_442_695_040_888_963_407);
                    let r = seed >> 33;
                    let key = keys[(r % 64) as usize].as_str();
                    let n = 1 + ((r >> 8) % 3) as u32;
                    clock.advance(Duration::from_millis((r >> 16) % 4));
                    let one_way = decide(&[(&one, key, n)]).unwrap();
                    let all_way = all_or_nothing(&[(&all, key, n)]).unwrap();
                    assert!(matches!(one_way, Decided::One(_)));
                    assert_eq!(
                        (one_way.is_allowed(), one_way.decisions()),
                        (all_way.is_allowed(), all_way.decisions()),
                        "{a:?} {on_full:?}, step {step}: {key} asks {n}"
                    );
                    let ok_one = one_way.is_allowed();
                    if ok_one {
                        admitted += 1;
                    } else {
                        denied += 1;
                    }
                }
                // The sequence exercises both answers.
                assert!(
                    admitted > 100 && denied > 100,
                    "{a:?} {on_full:?}: {admitted} admitted, {denied} denied"
                );
                let stats = one.stats();
                assert_eq!(stats, all.stats(), "{a:?} {on_full:?}");
                // And the full table's paths: more keys than slots.
                let full = match on_full {
                    OnFull::Evict => stats.evictions,
                    OnFull::Deny => stats.refused,
                    _ => stats.untracked,
                };
                assert!(full > 0, "{a:?} {on_full:?}: {stats:?}");
            }
        }
    }

    /// Several limits: denied by one, nothing taken from the other; admitted by all,
    /// taken from each.
    #[test]
    fn several_limits_all_or_nothing() {
        let clock = ManualClock::new();
        let a = limiter(Algorithm::FixedWindow, OnFull::Evict, &clock);
        let b = limiter(Algorithm::FixedWindow, OnFull::Evict, &clock);
        let d = decide(&[(&a, "k", 2), (&b, "k", 4)]).unwrap();
        assert!(d.is_allowed());
        let left: Vec<u32> = d.decisions().iter().map(Decision::remaining).collect();
        assert_eq!(left, [3, 1]);
        let d = decide(&[(&a, "k", 2), (&b, "k", 2)]).unwrap();
        assert!(!d.is_allowed());
        assert!(d.decisions()[0].is_allowed() && !d.decisions()[1].is_allowed());
        assert_eq!(a.peek_n("k", 0).unwrap().remaining(), 3);
    }

    #[test]
    fn hits_past_the_burst_are_an_error() {
        let clock = ManualClock::new();
        let a = limiter(Algorithm::FixedWindow, OnFull::Evict, &clock);
        let e = decide(&[(&a, "k", 6)]).unwrap_err();
        assert_eq!((e.requested, e.capacity), (6, 5));
    }
}
