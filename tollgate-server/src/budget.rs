//! Token budgets (`budget: true`) and give-backs (`is_negative_hits`), in process.
//!
//! A budget is charged after the work, when its cost is known (Envoy's
//! `apply_on_stream_done`): a descriptor's hits on a budget are taken with the library's
//! `charge`, whatever is left, never denied; the key then owes what went past its quota
//! (at most one burst; the rest of a larger cost is not counted), and the status says
//! `OVER_LIMIT` when it did. A check of 0 hits before the work (`hits_addend: 0`) is
//! denied while the key owes, so the next request waits the debt out: at the quota's
//! rate for a bucket, until the window ends for a fixed window. That is
//! envoyproxy/ratelimit's token-quota flow, where the after-the-fact `INCRBY` pushes the
//! count past the limit and a check of 0 is over while the count is past it.
//!
//! A give-back returns a descriptor's hits to its limit with the library's `give_back`
//! (never below an empty state), on any limit, budget or not.

use crate::backend::Limiter;
use crate::decide::{limiter, Item, Outcome};
use tollgate::{Algorithm, Charge, OnFull};

/// Whether `it`'s limit is a budget.
pub fn is_budget(it: &Item) -> bool {
    it.rule.as_ref().is_some_and(|r| r.spec.budget)
}

/// Hits as the engine takes them (a larger count is past any quota anyway).
fn n32(hits: u64) -> u32 {
    u32::try_from(hits).unwrap_or(u32::MAX)
}

/// What a key has left after a charge, from the charge's decision (a request of 1 as it
/// would be decided then): that request's remaining count and itself when it would be
/// admitted, nothing when it would not.
pub fn left_after(d: &tollgate::Decision) -> u32 {
    if d.is_allowed() {
        d.remaining().saturating_add(1).min(d.burst())
    } else {
        0
    }
}

/// The outcome of the charge `c` of `n` hits (0: a check) on a table whose full policy
/// is `on_full`.
fn charged(c: &Charge<'_>, n: u32, on_full: OnFull) -> Outcome {
    let fit = if n == 0 || c.tracked() {
        // A charge of 0 counts nothing: it reads what the key owes (a key the table does
        // not hold owes nothing).
        c.owed() == 0
    } else {
        // A new key a full table did not count: admitted untracked under `allow`,
        // refused under `deny` (the table's own answer for a new key).
        on_full == OnFull::Allow
    };
    let decision = c.decision();
    Outcome::Charged {
        decision,
        fit,
        left: left_after(&decision),
    }
}

/// Charges each budget limit `idx` its descriptor's hits (0 hits: checks it, taking
/// nothing), in process. A limit of 0 requests is over.
pub fn charge_all(items: &[Item], idx: &[usize], out: &mut [Outcome]) {
    for &i in idx {
        let (Some(l), Some(rule)) = (limiter(&items[i]), items[i].rule.as_ref()) else {
            continue;
        };
        let n = n32(items[i].hits);
        out[i] = match l {
            Limiter::Local(k) => charged(&k.charge(&items[i].key, n), n, rule.params.on_full),
            Limiter::Zero => Outcome::Over,
            Limiter::Exact(_) | Limiter::Hybrid(_) => {
                unreachable!("budgets are refused on Redis before deciding")
            }
        };
    }
}

/// Gives each limit `idx` its descriptor's hits back, in process; the outcome is the
/// key's state after.
pub fn give_back_all(items: &[Item], idx: &[usize], out: &mut [Outcome]) {
    for &i in idx {
        let Some(l) = limiter(&items[i]) else {
            continue;
        };
        out[i] = match l {
            Limiter::Local(k) => {
                let key = items[i].key.as_str();
                let mut n = n32(items[i].hits);
                if k.algorithm() == Algorithm::SlidingLog {
                    // Only a log's newest `limit` entries count, so giving back more
                    // changes nothing; and the library's log overflows on a give-back of
                    // more than its limit to a key it does not hold.
                    n = n.min(k.quota().limit());
                }
                if n > 0 {
                    k.give_back(key, n);
                }
                Outcome::GivenBack(k.peek_n(key, 0).ok())
            }
            Limiter::Zero => Outcome::GivenBack(None),
            Limiter::Exact(_) | Limiter::Hybrid(_) => {
                unreachable!("give-backs are refused on Redis before deciding")
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tollgate::{KeyedRateLimiter, ManualClock, Quota};

    #[test]
    fn what_is_left_after_a_charge() {
        for alg in [
            Algorithm::TokenBucket,
            Algorithm::LeakyBucket,
            Algorithm::FixedWindow,
            Algorithm::SlidingWindow,
        ] {
            let clock = ManualClock::new();
            clock.advance(Duration::from_secs(3_600));
            let l = KeyedRateLimiter::<str, _>::builder(alg, Quota::per_hour(5))
                .clock(clock)
                .build()
                .unwrap();
            let left = |n| {
                let c = l.charge("k", n);
                (left_after(&c.decision()), c.owed())
            };
            assert_eq!(left(2), (3, 0), "{alg:?}");
            assert_eq!(left(0), (3, 0), "{alg:?}: a charge of 0 takes nothing");
            assert_eq!(left(3), (0, 0), "{alg:?}: exactly used up");
            assert_eq!(left(2), (0, 2), "{alg:?}: owes");
            assert_eq!(left(0), (0, 2), "{alg:?}: a check reads the debt");
        }
    }
}
