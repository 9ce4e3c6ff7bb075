//! The trait a budget policy's limiter implements ([`BudgetBackend`]), and its
//! implementations for the built-in limiters.

use std::hash::Hash;

use super::backend::{Acquire, Backend};
use crate::sync::StdArc as Arc;
use crate::{clock::Clock, keyed::KeyedRateLimiter, limiter::RateLimiter};

/// A [`Backend`] that can also be charged after the fact: what a budget policy
/// ([`Policy::budget`](super::Policy::budget)) needs.
///
/// The layer asks a budget policy's backend [`budget_peek`](Self::budget_peek) when the
/// request arrives (consuming nothing) and, once the response body has ended or been
/// dropped, [`budget_charge`](Self::budget_charge) with the cost the handler recorded in the request's
/// [`Budget`](super::Budget).
///
/// Implemented for [`RateLimiter`] (key `()`) and [`KeyedRateLimiter<K>`], and with the
/// `redis` feature for both Redis limiters (key `String`), each by value or in an
/// [`Arc`]:
///
/// * `RedisRateLimiter` (exact mode) peeks with its script's peek mode
///   (`RedisRateLimiter::peek_n`: one round trip, nothing written) and charges on a task
///   spawned on the current tokio runtime, since `budget_charge` must not block: the
///   charge lands one round trip after the body ends, so a request the same key sends in
///   that moment is judged without it. A charge that nothing counted (Redis failed, a
///   `Fallback::Allow` or `Deny` answered, no runtime) is counted in
///   `RedisStats::background_errors`, never lost silently.
/// * `HybridRateLimiter` peeks and charges locally, at once (`peek_n`, `charge_owing`),
///   within the hybrid mode's overshoot bound; the charge goes to Redis with the next
///   sync.
///
/// # Example
///
/// The built-in limiters:
///
/// ```
/// use tollgate::http::BudgetBackend;
/// use tollgate::{Algorithm, KeyedRateLimiter, ManualClock, Quota};
///
/// let tokens = KeyedRateLimiter::<String, _>::builder(Algorithm::TokenBucket, Quota::per_minute(100))
///     .clock(ManualClock::new())
///     .build()?;
/// let key = "k1".to_owned();
/// tokens.budget_charge(&key, 130, None); // never denied: 30 owed
/// assert_eq!(tokens.peek_n(&key, 0)?.remaining(), 0);
/// assert!(!tokens.peek(&key).is_allowed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A backend of your own charges in its own way; one over the network must not block in
/// `budget_charge` (the layer calls it from the response body's `poll_frame` or `Drop`), so it
/// hands the call to a task of its own:
///
/// ```
/// use tollgate::http::{Acquire, Backend, BudgetBackend};
/// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
///
/// /// Keys on an internal allow-list are never charged.
/// struct Internal(KeyedRateLimiter<String>);
///
/// impl Backend<String> for Internal {
///     fn quota(&self) -> Quota {
///         self.0.quota()
///     }
///     fn acquire(&self, key: &String, cost: u32) -> Acquire {
///         Acquire::ready(self.0.check_n(key, cost).map_err(Into::into))
///     }
///     fn peek(&self, key: &String) -> Acquire {
///         Acquire::ready(self.0.peek_n(key, 0).map_err(Into::into))
///     }
/// }
///
/// impl BudgetBackend<String> for Internal {
///     fn budget_peek(&self, key: &String, n: u32) -> Acquire {
///         Acquire::ready(self.0.peek_n(key, n).map_err(Into::into))
///     }
///     fn budget_charge(&self, key: &String, n: u32, max_owed: Option<u32>) {
///         if key.starts_with("internal-") {
///             return;
///         }
///         let _ = match max_owed {
///             Some(max) => self.0.charge_owing(key, n, max),
///             None => self.0.charge(key, n),
///         };
///     }
/// }
/// # let _ = Internal(KeyedRateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(1)).build()?);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
///
/// A Redis limiter behind a budget policy (feature `redis`):
///
#[cfg_attr(feature = "redis", doc = "```no_run")]
#[cfg_attr(not(feature = "redis"), doc = "```ignore")]
/// use tollgate::http::{HeaderKey, Policy, RateLimitLayer};
/// use tollgate::redis::RedisRateLimiter;
/// use tollgate::{Algorithm, Quota};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let tokens = RedisRateLimiter::builder(Algorithm::TokenBucket, Quota::per_minute(10_000))
///     .url("redis://127.0.0.1:6379")
///     .prefix("tokens")
///     .build()
///     .await?;
/// let layer = RateLimitLayer::new(Policy::budget("tokens", tokens, HeaderKey::new("x-api-key")?));
/// # let _ = layer;
/// # Ok(())
/// # }
/// ```
pub trait BudgetBackend<K: ?Sized>: Backend<K> {
    /// What a request of cost `n` would get now, consuming nothing; `n = 0` reports the
    /// state without asking for anything (`remaining()` is what is left now). A key the
    /// backend does not hold is whole. `Err(BackendError::Capacity)` when `n` can never
    /// fit.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::http::BudgetBackend;
    /// use tollgate::{Algorithm, Quota, RateLimiter};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
    /// let l = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(5)).build()?;
    /// let _ = l.check();
    /// let now = l.budget_peek(&(), 0).await?;
    /// assert_eq!(now.remaining(), 4); // left now
    /// let five = l.budget_peek(&(), 5).await?;
    /// assert!(!five.is_allowed()); // would not fit: consumed nothing
    /// assert!(five.retry_after().is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })
    /// # }
    /// ```
    fn budget_peek(&self, key: &K, n: u32) -> Acquire;

    /// Charges `n` to `key` whatever is left, never denied: the key then owes what went
    /// past its quota, at most `max_owed` (one burst when `None`; see
    /// [`KeyedRateLimiter::charge_owing`]), and its next requests wait the debt out.
    /// Called once per request and policy, from the response body's `poll_frame` (when
    /// it ends) or its `Drop` (when it is dropped early): it must not block.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::http::BudgetBackend;
    /// use tollgate::{Algorithm, Quota, RateLimiter};
    ///
    /// let l = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(5)).build()?;
    /// l.budget_charge(&(), 3, None);
    /// assert_eq!(l.peek_n(0)?.remaining(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn budget_charge(&self, key: &K, n: u32, max_owed: Option<u32>);
}

impl<C: Clock> BudgetBackend<()> for RateLimiter<C> {
    fn budget_peek(&self, _key: &(), n: u32) -> Acquire {
        Acquire::ready(self.peek_n(n).map_err(Into::into))
    }

    fn budget_charge(&self, _key: &(), n: u32, max_owed: Option<u32>) {
        // What the charge took stays taken: its `Charge` is not needed after this.
        let _ = match max_owed {
            Some(max) => self.charge_owing(n, max),
            None => self.charge(n),
        };
    }
}

impl<K, C> BudgetBackend<K> for KeyedRateLimiter<K, C>
where
    K: Hash + Send + Sync + 'static,
    C: Clock,
{
    fn budget_peek(&self, key: &K, n: u32) -> Acquire {
        Acquire::ready(self.peek_n(key, n).map_err(Into::into))
    }

    fn budget_charge(&self, key: &K, n: u32, max_owed: Option<u32>) {
        let _ = match max_owed {
            Some(max) => self.charge_owing(key, n, max),
            None => self.charge(key, n),
        };
    }
}

impl<K: ?Sized, B: BudgetBackend<K>> BudgetBackend<K> for Arc<B> {
    fn budget_peek(&self, key: &K, n: u32) -> Acquire {
        (**self).budget_peek(key, n)
    }

    fn budget_charge(&self, key: &K, n: u32, max_owed: Option<u32>) {
        (**self).budget_charge(key, n, max_owed);
    }
}

#[cfg(feature = "redis")]
mod redis_budgets {
    use super::super::backend::redis_backends::convert;
    use super::{Acquire, BudgetBackend};
    use crate::redis::{HybridRateLimiter, RedisRateLimiter};

    /// Peeks by the script's peek mode (nothing written); charges on a spawned task,
    /// a charge nothing counted going to `RedisStats::background_errors`.
    impl BudgetBackend<String> for RedisRateLimiter {
        fn budget_peek(&self, key: &String, n: u32) -> Acquire {
            let (limiter, key) = (self.clone(), key.clone());
            Acquire::pending(async move { limiter.peek_n(&key, n).await.map_err(convert) })
        }

        fn budget_charge(&self, key: &String, n: u32, max_owed: Option<u32>) {
            self.charge_in_background(key.clone(), n, max_owed);
        }
    }

    /// Peeks and charges locally, at once; the charge is shared with the next sync.
    impl BudgetBackend<String> for HybridRateLimiter {
        fn budget_peek(&self, key: &String, n: u32) -> Acquire {
            Acquire::ready(self.peek_n(key, n).map_err(Into::into))
        }

        fn budget_charge(&self, key: &String, n: u32, max_owed: Option<u32>) {
            // Never denied. A new key while the key table is full is not counted
            // (`RedisCharge::tracked`); the table counts it in `HybridStats::untracked`.
            let _ = match max_owed {
                Some(max) => self.charge_owing(key, n, max),
                None => self.charge(key, n),
            };
        }
    }
}
