//! Token budgets (`budget: true`) and give-backs (`is_negative_hits`), on every backend.
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
//!
//! In process the library's `KeyedRateLimiter`, on Redis its `RedisRateLimiter` (one
//! atomic script per charge or give-back) and `HybridRateLimiter` (this instance's view,
//! synced like its admissions) do the counting, with the same numbers.

use crate::backend::Limiter;
use crate::decide::{limiter, redis_error, DecideError, Item, Outcome};

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

/// The outcome of a charge (of 0 hits: a check, which reads what the key owes) that
/// left the key owing `owed`, counted or not (`tracked`), with `decision` as a request of
/// 1 would see the key after it.
fn charged(decision: tollgate::Decision, owed: u32, tracked: bool) -> Outcome {
    let fit = if tracked {
        owed == 0
    } else {
        // Nothing counted it: a new key a full table had no room for (`on_full`), or
        // Redis away under the `open`/`closed` failure policy. The answer is the table's
        // or the policy's.
        decision.is_allowed()
    };
    Outcome::Charged {
        decision,
        fit,
        left: left_after(&decision),
    }
}

/// Charges each budget limit `idx` its descriptor's hits (0 hits: checks it, taking
/// nothing), on the limit's backend. A limit of 0 requests is over.
///
/// # Errors
///
/// Redis could not charge under the `error` failure policy.
pub async fn charge_all(
    items: &[Item],
    idx: &[usize],
    out: &mut [Outcome],
) -> Result<(), DecideError> {
    for &i in idx {
        let Some(l) = limiter(&items[i]) else {
            continue;
        };
        let key = items[i].key.as_str();
        let n = n32(items[i].hits);
        out[i] = match l {
            Limiter::Local(k) => {
                let c = k.charge(key, n);
                charged(c.decision(), c.owed(), c.tracked())
            }
            Limiter::Exact(r) => {
                // Boxed: the Redis call's future is large (see decide_enforced).
                let c = Box::pin(r.charge(key, n))
                    .await
                    .map_err(|e| redis_error(&e))?;
                charged(c.decision(), c.owed(), c.tracked())
            }
            Limiter::Hybrid(h) => {
                let c = h.charge(key, n);
                charged(c.decision(), c.owed(), c.tracked())
            }
            Limiter::Zero => Outcome::Over,
        };
    }
    Ok(())
}

/// Gives each limit `idx` its descriptor's hits back; the outcome is the key's state
/// after (on Redis, read with a check of 0 hits, when Redis answers).
///
/// # Errors
///
/// Redis could not give back under the `error` failure policy.
pub async fn give_back_all(
    items: &[Item],
    idx: &[usize],
    out: &mut [Outcome],
) -> Result<(), DecideError> {
    for &i in idx {
        let Some(l) = limiter(&items[i]) else {
            continue;
        };
        let key = items[i].key.as_str();
        let n = n32(items[i].hits);
        out[i] = match l {
            Limiter::Local(k) => {
                k.give_back(key, n);
                Outcome::GivenBack(k.peek_n(key, 0).ok())
            }
            Limiter::Exact(r) => {
                Box::pin(r.give_back(key, n))
                    .await
                    .map_err(|e| redis_error(&e))?;
                Outcome::GivenBack(Box::pin(r.peek_n(key, 0)).await.ok())
            }
            Limiter::Hybrid(h) => {
                h.give_back(key, n);
                Outcome::GivenBack(h.peek_n(key, 0).ok())
            }
            Limiter::Zero => Outcome::GivenBack(None),
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tollgate::{Algorithm, KeyedRateLimiter, ManualClock, Quota};

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
