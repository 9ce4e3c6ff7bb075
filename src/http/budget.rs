//! Token budgets: the handle a handler records the real cost in ([`Budget`]), and what
//! the layer charges when the response body ends or is dropped ([`Settlement`]).

use std::fmt;

use super::backend::Acquire;
use super::budget_backend::BudgetBackend;
use crate::sync::{PlainAtomicU64 as AtomicU64, PlainOrdering as Ordering, StdArc as Arc};

/// What `remaining` holds before any budget policy admitted the request.
const NONE_LEFT: u64 = u64::MAX;

#[derive(Debug)]
struct Shared {
    /// The cost recorded so far (a u64: `charge` cannot overflow it in practice; the
    /// layer charges at most `u32::MAX`).
    cost: AtomicU64,
    /// The fewest left among the budget policies that admitted the request, at
    /// admission; [`NONE_LEFT`] when none did.
    remaining: AtomicU64,
}

/// The cost of one request under a budget policy ([`Policy::budget`](super::Policy::budget)),
/// recorded by the handler and charged by the layer when the response is done.
///
/// # Protocol
///
/// 1. **Admission.** A budget policy admits a request when its key has anything left (at
///    least the policy's [`cost`](super::Policy::cost), 1 by default). It *peeks*: nothing
///    is taken, so a request is never counted twice. A key that owes (an earlier charge
///    went past its quota) is refused with `429`, `Retry-After` and `RateLimit` fields
///    that say when it will have something left again.
/// 2. **Recording.** The layer inserts a `Budget` into the request's extensions. The
///    handler takes it (`Extension<Budget>`, or `budget: Budget` directly in axum,
///    `req.extensions().get::<Budget>()` elsewhere) and records what the request really
///    cost with [`charge`](Self::charge) (adds; call it as often as you like, e.g. once
///    per streamed chunk) or [`set_cost`](Self::set_cost) (replaces). Clones share the
///    count: move one into the task or stream that produces the body.
/// 3. **Charging.** The layer charges the recorded total to every budget policy that
///    admitted the request, exactly once: when the response body ends (before its last
///    frame is handed to the server, so a client's next request on the connection sees
///    the charge), or when it is dropped before the end (the client went away: what was
///    recorded so far is charged), or when the response never came (the handler failed
///    or the request was cancelled). A charge is never denied: past the key's quota the
///    key owes the excess (at most one burst, or
///    [`Policy::budget_owing`](super::Policy::budget_owing)'s bound) and its next
///    requests wait it out. What is recorded after that is not charged; for work that
///    outlives the response, charge the limiter itself (`KeyedRateLimiter::charge`).
///
/// The `RateLimit` fields of an admitted response report the state at admission: `r` is
/// what the key had left before this request (nothing is taken yet), `t` when the quota
/// is whole again. The charge shows in the fields of the key's next response.
///
/// Several budget policies in one layer share the one handle and are charged the same
/// total (tokens per minute and tokens per day, say). Layers stacked on one route share
/// it too: an inner layer finds the outer one's handle in the extensions and uses it, so
/// one recorded cost reaches both.
///
/// # Example
///
/// ```
/// # #[cfg(feature = "axum")]
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use axum::routing::get;
/// use tollgate::http::{Budget, HeaderKey, Policy, RateLimitLayer};
/// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
///
/// // 10,000 tokens a minute per API key.
/// let tokens = KeyedRateLimiter::<String>::builder(Algorithm::TokenBucket, Quota::per_minute(10_000)).build()?;
/// let layer = RateLimitLayer::new(Policy::budget("tokens", tokens, HeaderKey::new("x-api-key")?));
/// let app: axum::Router = axum::Router::new()
///     .route("/complete", get(|budget: Budget| async move {
///         let answer = "a completion of four tokens";
///         budget.charge(4); // charged when the response body ends
///         answer
///     }))
///     .layer(layer);
/// # let _ = app;
/// # Ok(())
/// # }
/// # #[cfg(not(feature = "axum"))]
/// # fn main() {}
/// ```
#[derive(Clone)]
pub struct Budget {
    shared: Arc<Shared>,
}

impl Default for Budget {
    fn default() -> Self {
        Budget::new()
    }
}

impl fmt::Debug for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Budget")
            .field("cost", &self.cost())
            .field("remaining", &self.remaining())
            .finish()
    }
}

impl Budget {
    /// A handle no layer charges, with nothing recorded: for testing a handler without
    /// the layer (the layer makes the handles it charges itself).
    ///
    /// # Example
    ///
    /// ```
    /// let budget = tollgate::http::Budget::new();
    /// budget.charge(3);
    /// assert_eq!(budget.cost(), 3);
    /// assert_eq!(budget.remaining(), None);
    /// ```
    #[must_use]
    pub fn new() -> Self {
        Budget {
            shared: Arc::new(Shared {
                cost: AtomicU64::new(0),
                remaining: AtomicU64::new(NONE_LEFT),
            }),
        }
    }

    /// Adds `n` to the cost the layer will charge.
    ///
    /// # Example
    ///
    /// ```
    /// let budget = tollgate::http::Budget::new();
    /// for _chunk in 0..3 {
    ///     budget.charge(10); // tokens of this chunk
    /// }
    /// assert_eq!(budget.cost(), 30);
    /// ```
    pub fn charge(&self, n: u32) {
        self.shared.cost.fetch_add(u64::from(n), Ordering::Relaxed);
    }

    /// Sets the cost the layer will charge to `n`, replacing what was recorded (for a
    /// total known at the end, such as a model provider's usage report).
    ///
    /// # Example
    ///
    /// ```
    /// let budget = tollgate::http::Budget::new();
    /// budget.charge(100); // an estimate while streaming
    /// budget.set_cost(93); // the provider's count at the end
    /// assert_eq!(budget.cost(), 93);
    /// ```
    pub fn set_cost(&self, n: u32) {
        self.shared.cost.store(u64::from(n), Ordering::Relaxed);
    }

    /// The cost recorded so far (at most `u32::MAX`: what the layer charges).
    ///
    /// # Example
    ///
    /// ```
    /// let budget = tollgate::http::Budget::new();
    /// budget.charge(u32::MAX);
    /// budget.charge(1);
    /// assert_eq!(budget.cost(), u32::MAX);
    /// ```
    #[must_use]
    pub fn cost(&self) -> u32 {
        let cost = self.shared.cost.load(Ordering::Relaxed);
        u32::try_from(cost).unwrap_or(u32::MAX)
    }

    /// What the key had left when the request was admitted: the fewest among the budget
    /// policies that admitted it (so a handler can bound its work, e.g. a model's
    /// `max_tokens`). `None` when no budget policy counted the request (a handle made
    /// with [`new`](Self::new), a policy that skipped a request without a key, or a
    /// backend error answered with `OnBackendError::Allow`). Not updated by later
    /// charges of other requests.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::http::Budget;
    ///
    /// async fn complete(budget: Budget) -> String {
    ///     let max_tokens = budget.remaining().unwrap_or(4096).min(4096);
    ///     format!("at most {max_tokens} tokens")
    /// }
    /// # let _ = complete;
    /// ```
    #[must_use]
    pub fn remaining(&self) -> Option<u32> {
        match self.shared.remaining.load(Ordering::Relaxed) {
            NONE_LEFT => None,
            n => Some(u32::try_from(n).unwrap_or(u32::MAX)),
        }
    }

    /// Records that a budget policy admitted the request with `left` remaining.
    fn admitted_with(&self, left: u32) {
        self.shared
            .remaining
            .fetch_min(u64::from(left), Ordering::Relaxed);
    }

    /// The handle of this request: the one an outer layer inserted, or a new one,
    /// inserted now.
    pub(crate) fn of(extensions: &mut http::Extensions) -> Budget {
        if let Some(b) = extensions.get::<Budget>() {
            return b.clone();
        }
        let b = Budget::new();
        extensions.insert(b.clone());
        b
    }
}

/// A request's key bound to a budget policy's limiter: peeked at admission, charged
/// once at the end.
pub(crate) trait BoundBudget: Send + Sync {
    fn peek_n(&self, n: u32) -> Acquire;
    fn charge(&self, n: u32);
}

/// [`BoundBudget`] over any [`BudgetBackend`].
pub(crate) struct KeyBudget<L, K> {
    pub(crate) limiter: Arc<L>,
    pub(crate) key: K,
    pub(crate) max_owed: Option<u32>,
}

impl<L, K> BoundBudget for KeyBudget<L, K>
where
    L: BudgetBackend<K>,
    K: Send + Sync + 'static,
{
    fn peek_n(&self, n: u32) -> Acquire {
        self.limiter.budget_peek(&self.key, n)
    }

    fn charge(&self, n: u32) {
        // A cost of 0 changes nothing: it does not even insert the key.
        if n > 0 {
            self.limiter.budget_charge(&self.key, n, self.max_owed);
        }
    }
}

/// The budget policies that admitted one request (each with what it had left), before
/// the handle exists.
#[derive(Default)]
pub(crate) struct Admitted {
    pub(crate) charges: Vec<Box<dyn BoundBudget>>,
    /// The fewest left among them.
    pub(crate) remaining: Option<u32>,
}

impl Admitted {
    /// Adds a policy's charge; `left` (what it had left) bounds the handle's
    /// [`Budget::remaining`] unless `None` (a shadow policy).
    pub(crate) fn push(&mut self, charge: Box<dyn BoundBudget>, left: Option<u32>) {
        self.charges.push(charge);
        if let Some(left) = left {
            self.remaining = Some(self.remaining.map_or(left, |r| r.min(left)));
        }
    }
}

impl fmt::Debug for Admitted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admitted")
            .field("charges", &self.charges.len())
            .field("remaining", &self.remaining)
            .finish()
    }
}

/// What the layer owes its budget policies for one forwarded request: dropping it
/// charges them the handle's recorded cost, so it is charged exactly once whichever way
/// the request ends (the body's end, the body or the response future dropped).
pub(crate) struct Settlement {
    budget: Budget,
    charges: Vec<Box<dyn BoundBudget>>,
}

impl Settlement {
    /// The settlement of `admitted` through the request's handle (inserted into
    /// `extensions` unless an outer layer did).
    pub(crate) fn new(admitted: Admitted, extensions: &mut http::Extensions) -> Box<Settlement> {
        let budget = Budget::of(extensions);
        if let Some(left) = admitted.remaining {
            budget.admitted_with(left);
        }
        Box::new(Settlement {
            budget,
            charges: admitted.charges,
        })
    }
}

impl Drop for Settlement {
    fn drop(&mut self) {
        let cost = self.budget.cost();
        for c in &self.charges {
            c.charge(cost);
        }
    }
}

impl fmt::Debug for Settlement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settlement")
            .field("budget", &self.budget)
            .field("charges", &self.charges.len())
            .finish()
    }
}

#[cfg(feature = "axum")]
mod extract {
    use std::convert::Infallible;

    use axum::extract::{FromRequestParts, OptionalFromRequestParts};
    use http::request::Parts;
    use http::StatusCode;

    use super::Budget;

    /// The request's [`Budget`] as an axum extractor (feature `axum`). A route that no
    /// layer with a budget policy covers has none: the request is answered
    /// `500 Internal Server Error` saying so (take `Option<Budget>` where that is
    /// expected).
    impl<S: Send + Sync> FromRequestParts<S> for Budget {
        type Rejection = (StatusCode, &'static str);

        async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
            parts.extensions.get::<Budget>().cloned().ok_or((
                StatusCode::INTERNAL_SERVER_ERROR,
                "tollgate::http::Budget: no RateLimitLayer with a Policy::budget covers this \
                 route, so nothing would charge what the handler records",
            ))
        }
    }

    /// `Option<Budget>`: `None` on a route no budget policy covers.
    impl<S: Send + Sync> OptionalFromRequestParts<S> for Budget {
        type Rejection = Infallible;

        async fn from_request_parts(
            parts: &mut Parts,
            _: &S,
        ) -> Result<Option<Self>, Self::Rejection> {
            Ok(parts.extensions.get::<Budget>().cloned())
        }
    }
}
