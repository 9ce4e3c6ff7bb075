//! A budget policy ([`Policy::budget`]): its constructors and its type-erased charging
//! side, beside the request-count policy of `policy`.

use http::request::Parts;

use super::budget::{BoundBudget, KeyBudget};
use super::budget_backend::BudgetBackend;
use super::key::KeyExtractor;
use super::policy::{Bound, Policy};
use crate::sync::StdArc as Arc;

/// The type-erased budget side of a budget policy ([`Policy::budget`]).
pub(crate) trait KeyedBudget: Send + Sync {
    /// This request's key bound to the limiter, to peek now and charge later; `None`
    /// when the request has no key.
    fn bind(&self, parts: &Parts, max_owed: Option<u32>) -> Option<Box<dyn BoundBudget>>;
}

impl<L, E> KeyedBudget for Bound<Arc<L>, E>
where
    E: KeyExtractor,
    L: BudgetBackend<E::Key>,
{
    fn bind(&self, parts: &Parts, max_owed: Option<u32>) -> Option<Box<dyn BoundBudget>> {
        let key = self.key.extract(parts)?;
        Some(Box::new(KeyBudget {
            limiter: Arc::clone(&self.limiter),
            key,
            max_owed,
        }))
    }
}

/// A budget policy's charging side and the most a key may owe after a charge.
#[derive(Clone)]
pub(crate) struct BudgetSide {
    pub(crate) backend: Arc<dyn KeyedBudget>,
    pub(crate) max_owed: Option<u32>,
}

impl Policy {
    /// A budget policy: a cost known only once the response is done (tokens an LLM
    /// generated, bytes streamed, rows scanned), checked before and charged after.
    ///
    /// A request is admitted when its key has anything left (at least the policy's
    /// [`cost`](Self::cost), 1 by default), by a peek that takes nothing. The layer then
    /// inserts a [`Budget`](super::Budget) handle into the request's extensions, the
    /// handler records the real cost in it, and the layer charges that total to the
    /// limiter when the response body ends or is dropped, exactly once (see
    /// [`Budget`](super::Budget) for the whole protocol). The charge is never denied:
    /// past the quota the key owes the excess, at most one burst (see
    /// [`budget_owing`](Self::budget_owing)), and its next requests are refused until it
    /// is paid off, with a `Retry-After` that says when.
    ///
    /// The limiter must be a [`BudgetBackend`]: [`RateLimiter`](crate::RateLimiter)
    /// (key [`Global`](super::Global)), [`KeyedRateLimiter`](crate::KeyedRateLimiter), or
    /// with the `redis` feature either Redis limiter (key `String`; see
    /// [`BudgetBackend`] for how each peeks and charges), by value or in an `Arc`.
    ///
    /// Other policies of the same layer are unchanged, and still all-or-nothing with
    /// it: a budget policy is asked first, and a request it refuses takes nothing from
    /// the others.
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::http::{HeaderKey, Policy};
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    ///
    /// // 100,000 tokens an hour per API key, refilled smoothly.
    /// let tokens = Arc::new(
    ///     KeyedRateLimiter::<String>::builder(Algorithm::TokenBucket, Quota::per_hour(100_000)).build()?,
    /// );
    /// let policy = Policy::budget("tokens", Arc::clone(&tokens), HeaderKey::new("x-api-key")?);
    /// assert!(policy.is_budget());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn budget<L, E>(name: impl Into<String>, limiter: L, key: E) -> Self
    where
        E: KeyExtractor,
        L: BudgetBackend<E::Key>,
    {
        Policy::budget_with(name.into(), limiter, key, None)
    }

    /// [`budget`](Self::budget), with the most a key may owe past its quota after a
    /// charge set to `max_owed` (the default is one burst): the part of a cost past it
    /// is not counted. A larger bound makes one very expensive request wait longer; a
    /// smaller one forgives more.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::http::{HeaderKey, Policy};
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    ///
    /// // 1,000 tokens a minute; one answer may put a key up to 10 minutes in debt.
    /// let tokens = KeyedRateLimiter::<String>::builder(Algorithm::TokenBucket, Quota::per_minute(1_000)).build()?;
    /// let policy = Policy::budget_owing("tokens", tokens, HeaderKey::new("x-api-key")?, 10_000);
    /// assert!(policy.is_budget());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn budget_owing<L, E>(name: impl Into<String>, limiter: L, key: E, max_owed: u32) -> Self
    where
        E: KeyExtractor,
        L: BudgetBackend<E::Key>,
    {
        Policy::budget_with(name.into(), limiter, key, Some(max_owed))
    }

    fn budget_with<L, E>(name: String, limiter: L, key: E, max_owed: Option<u32>) -> Self
    where
        E: KeyExtractor,
        L: BudgetBackend<E::Key>,
    {
        let bound = Arc::new(Bound {
            limiter: Arc::new(limiter),
            key,
        });
        let side = BudgetSide {
            backend: Arc::clone(&bound) as Arc<dyn KeyedBudget>,
            max_owed,
        };
        Policy::with(name, bound, Some(side))
    }

    /// Whether this is a budget policy ([`budget`](Self::budget)).
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::http::{Global, Policy};
    /// # use tollgate::{Algorithm, Quota, RateLimiter};
    /// # let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(1)).build()?;
    /// assert!(!Policy::new("g", l, Global).is_budget());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn is_budget(&self) -> bool {
        self.budget.is_some()
    }
}
