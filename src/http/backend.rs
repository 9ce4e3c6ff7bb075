//! The one trait every limiter implements to sit behind a [`Policy`](super::Policy).

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::sync::StdArc as Arc;
use crate::{
    clock::Clock, decision::Decision, error::InsufficientCapacity, keyed::KeyedRateLimiter,
    limiter::RateLimiter, quota::Quota,
};

/// Why a [`Backend`] could not decide.
///
/// # Example
///
/// ```
/// use tollgate::http::BackendError;
///
/// let e = BackendError::unavailable(std::io::Error::other("connection refused"));
/// assert!(e.to_string().contains("connection refused"));
/// ```
#[derive(Debug)]
pub enum BackendError {
    /// The cost can never fit (it exceeds the bucket or window capacity): waiting does not
    /// help. The layer answers with a denial that carries no `Retry-After`.
    Capacity(InsufficientCapacity),
    /// The backend could not be reached or answered nonsense (a Redis error without a
    /// fallback). The layer answers 503 unless told otherwise
    /// ([`RateLimitLayer::on_backend_error`](super::RateLimitLayer::on_backend_error)).
    Unavailable(Box<dyn StdError + Send + Sync>),
}

impl BackendError {
    /// Wraps any error as [`BackendError::Unavailable`].
    ///
    /// # Example
    ///
    /// ```
    /// let e = tollgate::http::BackendError::unavailable("timed out");
    /// assert_eq!(e.to_string(), "rate-limit backend unavailable: timed out");
    /// ```
    pub fn unavailable(error: impl Into<Box<dyn StdError + Send + Sync>>) -> Self {
        BackendError::Unavailable(error.into())
    }
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendError::Capacity(e) => write!(f, "{e}"),
            BackendError::Unavailable(e) => write!(f, "rate-limit backend unavailable: {e}"),
        }
    }
}

impl StdError for BackendError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            BackendError::Capacity(e) => Some(e),
            BackendError::Unavailable(e) => Some(&**e),
        }
    }
}

impl From<InsufficientCapacity> for BackendError {
    fn from(e: InsufficientCapacity) -> Self {
        BackendError::Capacity(e)
    }
}

type BoxFuture = Pin<Box<dyn Future<Output = Result<Decision, BackendError>> + Send>>;

/// The answer of a [`Backend`]: ready at once (in-process limiters, no allocation) or a
/// future (network backends such as Redis).
///
/// # Example
///
/// ```
/// use tollgate::http::Acquire;
/// use tollgate::{Algorithm, Quota, RateLimiter};
///
/// let limiter = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(1)).build()?;
/// let ready = Acquire::ready(Ok(limiter.check()));
/// let d = limiter.check();
/// let later = Acquire::pending(async move { Ok::<_, tollgate::http::BackendError>(d) });
/// # let _ = (ready, later);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[must_use = "an Acquire does nothing until it is awaited"]
pub struct Acquire(Repr);

enum Repr {
    Ready(Option<Result<Decision, BackendError>>),
    Pending(BoxFuture),
}

impl Acquire {
    /// An answer that is already known.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, Quota, RateLimiter};
    /// # let limiter = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(1)).build()?;
    /// let a = tollgate::http::Acquire::ready(Ok(limiter.check()));
    /// # let _ = a;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn ready(result: Result<Decision, BackendError>) -> Self {
        Acquire(Repr::Ready(Some(result)))
    }

    /// An answer that a future will give (boxed once).
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, Quota, RateLimiter};
    /// # let limiter = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(1)).build()?;
    /// let d = limiter.check();
    /// let a = tollgate::http::Acquire::pending(async move { Ok(d) });
    /// # let _ = a;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn pending<F>(future: F) -> Self
    where
        F: Future<Output = Result<Decision, BackendError>> + Send + 'static,
    {
        Acquire(Repr::Pending(Box::pin(future)))
    }

    /// The answer, when it is already known.
    pub(crate) fn now(&mut self) -> Option<Result<Decision, BackendError>> {
        match &mut self.0 {
            Repr::Ready(r) => r.take(),
            Repr::Pending(_) => None,
        }
    }
}

impl fmt::Debug for Acquire {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Ready(r) => f.debug_tuple("Acquire::Ready").field(r).finish(),
            Repr::Pending(_) => f.write_str("Acquire::Pending"),
        }
    }
}

impl Future for Acquire {
    type Output = Result<Decision, BackendError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.get_mut().0 {
            Repr::Ready(r) => Poll::Ready(r.take().unwrap_or_else(|| {
                Err(BackendError::unavailable("Acquire polled after completion"))
            })),
            Repr::Pending(f) => f.as_mut().poll(cx),
        }
    }
}

/// What a backend took for one admission, so that exactly that can be given back with
/// [`Backend::undo`]; made by the built-in limiters' [`Backend::acquire_undoable`].
///
/// # Example
///
/// ```
/// use tollgate::http::{Backend, Undo};
/// use tollgate::{Algorithm, Quota, RateLimiter};
///
/// let l = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_hour(1)).build()?;
/// let (_, undo): (_, Option<Undo>) = Backend::<()>::acquire_undoable(&l, &(), 1);
/// assert!(undo.is_some());
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Debug)]
pub struct Undo(pub(crate) crate::reservation::Undo);

/// An in-process admission of `cost` through `book`: the decision (or the error of a
/// cost that can never fit), and when admitted the token that gives it back.
fn booked<'a>(
    booked: Result<
        (Decision, Option<crate::reservation::Reservation<'a>>),
        crate::error::InsufficientCapacity,
    >,
) -> (Acquire, Option<Undo>) {
    match booked {
        Ok((d, reservation)) => {
            let undo = reservation
                .and_then(crate::reservation::Reservation::into_undo)
                .map(Undo);
            (Acquire::ready(Ok(d)), undo)
        }
        Err(e) => (Acquire::ready(Err(e.into())), None),
    }
}

/// A limiter the HTTP layer can ask, keyed by `K`.
///
/// Implemented for [`RateLimiter`] (key `()`), [`KeyedRateLimiter<K>`] and, with the
/// `redis` feature, the Redis exact and hybrid limiters (key `String`); each by value or
/// in an [`Arc`] (share one limiter between a layer and the rest of the program).
///
/// `peek` reports the key's state without consuming anything; the layer uses it to make
/// several policies all-or-nothing: it peeks every policy first, so that a request denied
/// by one consumes nothing from the others.
///
/// # Example
///
/// A backend of your own (here: an allow-list in front of a limiter):
///
/// ```
/// use tollgate::http::{Acquire, Backend};
/// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
///
/// struct VipOrLimited(KeyedRateLimiter<String>);
///
/// impl Backend<String> for VipOrLimited {
///     fn quota(&self) -> Quota {
///         self.0.quota()
///     }
///     fn acquire(&self, key: &String, cost: u32) -> Acquire {
///         let cost = if key == "vip" { 0 } else { cost };
///         Acquire::ready(self.0.check_n(key, cost).map_err(Into::into))
///     }
///     fn peek(&self, key: &String) -> Acquire {
///         Acquire::ready(self.0.check_n(key, 0).map_err(Into::into))
///     }
/// }
/// # let _ = VipOrLimited(KeyedRateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(1)).build()?);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
pub trait Backend<K: ?Sized>: Send + Sync + 'static {
    /// The quota, for the `RateLimit-Policy` header (`q` is its limit, `w` its period).
    fn quota(&self) -> Quota;

    /// Decides a request of `cost` for `key`, consuming capacity when admitted. A denial
    /// consumes nothing.
    fn acquire(&self, key: &K, cost: u32) -> Acquire;

    /// The key's current state, consuming nothing: a request of cost `n` fits when
    /// `remaining() >= n`.
    fn peek(&self, key: &K) -> Acquire;

    /// Gives back `cost` that an earlier `acquire` took, for backends that cannot make
    /// an [`Undo`] token; returns whether it could. The default cannot (returns
    /// `false`): a request admitted by such a policy and then denied by another policy
    /// that changed between the layer's peek and its acquire keeps what it took. The
    /// built-in in-process limiters give back exactly through
    /// [`acquire_undoable`](Self::acquire_undoable) instead.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::http::Backend;
    /// use tollgate::{Algorithm, Quota, RateLimiter};
    ///
    /// let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(1)).build()?;
    /// assert!(!Backend::<()>::release(&l, &(), 1));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    fn release(&self, key: &K, cost: u32) -> bool {
        let _ = (key, cost);
        false
    }

    /// [`acquire`](Self::acquire), and when admitted a token that gives back exactly
    /// this admission through [`undo`](Self::undo). The layer uses it to keep several
    /// policies all-or-nothing when a policy denies after others admitted. The default
    /// returns no token (the layer then falls back to [`release`](Self::release)); the
    /// built-in in-process limiters return one.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::http::Backend;
    /// use tollgate::{Algorithm, Quota, RateLimiter};
    ///
    /// let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_hour(1)).build()?;
    /// let (_admitted, undo) = Backend::<()>::acquire_undoable(&l, &(), 1);
    /// assert!(!l.check().is_allowed()); // the acquire took the only one
    /// assert!(Backend::<()>::undo(&l, &(), undo.unwrap())); // given back
    /// assert!(l.check().is_allowed());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    fn acquire_undoable(&self, key: &K, cost: u32) -> (Acquire, Option<Undo>) {
        (self.acquire(key, cost), None)
    }

    /// Gives back exactly the admission `undo` stands for (see
    /// [`acquire_undoable`](Self::acquire_undoable)); returns whether it could. The
    /// default cannot.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::http::Backend;
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    ///
    /// let l = KeyedRateLimiter::<u64>::builder(Algorithm::SlidingLog, Quota::per_hour(1)).build()?;
    /// let (_, undo) = Backend::acquire_undoable(&l, &7, 1);
    /// assert!(Backend::undo(&l, &7, undo.unwrap()));
    /// assert!(l.check(&7).is_allowed());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    fn undo(&self, key: &K, undo: Undo) -> bool {
        let _ = (key, undo);
        false
    }

    /// Whether `acquire` and `peek` may return [`Acquire::pending`] (default `false`).
    /// When every policy's backend answers at once, the layer decides inside `call` with
    /// no allocation; otherwise it boxes one future per request. A backend that returns a
    /// pending answer while claiming `false` gets its requests answered as a backend error.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::http::Backend;
    /// use tollgate::{Algorithm, Quota, RateLimiter};
    ///
    /// let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(1)).build()?;
    /// assert!(!Backend::<()>::is_async(&l));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    fn is_async(&self) -> bool {
        false
    }
}

impl<C: Clock> Backend<()> for RateLimiter<C> {
    fn quota(&self) -> Quota {
        RateLimiter::quota(self)
    }

    fn acquire(&self, _key: &(), cost: u32) -> Acquire {
        Acquire::ready(self.check_n(cost).map_err(Into::into))
    }

    fn acquire_undoable(&self, _key: &(), cost: u32) -> (Acquire, Option<Undo>) {
        booked(crate::reservation::sealed::Bookable::book(self, cost))
    }

    fn undo(&self, _key: &(), undo: Undo) -> bool {
        self.undo(undo.0);
        true
    }

    fn peek(&self, _key: &()) -> Acquire {
        Acquire::ready(self.check_n(0).map_err(Into::into))
    }
}

impl<K, C> Backend<K> for KeyedRateLimiter<K, C>
where
    K: Hash + Send + Sync + 'static,
    C: Clock,
{
    fn quota(&self) -> Quota {
        KeyedRateLimiter::quota(self)
    }

    fn acquire(&self, key: &K, cost: u32) -> Acquire {
        Acquire::ready(self.check_n(key, cost).map_err(Into::into))
    }

    fn acquire_undoable(&self, key: &K, cost: u32) -> (Acquire, Option<Undo>) {
        booked(crate::reservation::sealed::Bookable::book(
            &self.limit(key),
            cost,
        ))
    }

    fn undo(&self, _key: &K, undo: Undo) -> bool {
        self.undo(undo.0);
        true
    }

    fn peek(&self, key: &K) -> Acquire {
        Acquire::ready(self.check_n(key, 0).map_err(Into::into))
    }
}

impl<K: ?Sized, B: Backend<K>> Backend<K> for Arc<B> {
    fn quota(&self) -> Quota {
        (**self).quota()
    }

    fn acquire(&self, key: &K, cost: u32) -> Acquire {
        (**self).acquire(key, cost)
    }

    fn peek(&self, key: &K) -> Acquire {
        (**self).peek(key)
    }

    fn release(&self, key: &K, cost: u32) -> bool {
        (**self).release(key, cost)
    }

    fn acquire_undoable(&self, key: &K, cost: u32) -> (Acquire, Option<Undo>) {
        (**self).acquire_undoable(key, cost)
    }

    fn undo(&self, key: &K, undo: Undo) -> bool {
        (**self).undo(key, undo)
    }

    fn is_async(&self) -> bool {
        (**self).is_async()
    }
}

#[cfg(feature = "redis")]
pub(super) mod redis_backends {
    use super::{Acquire, Backend, BackendError};
    use crate::quota::Quota;
    use crate::redis::{Error, HybridRateLimiter, RedisRateLimiter};

    pub(in crate::http) fn convert(e: Error) -> BackendError {
        match e {
            Error::InsufficientCapacity(c) => BackendError::Capacity(c),
            other => BackendError::unavailable(other),
        }
    }

    /// Redis errors reach the layer only when the limiter has no
    /// [`Fallback`](crate::redis::Fallback); with one, the fallback decides.
    impl Backend<String> for RedisRateLimiter {
        fn quota(&self) -> Quota {
            RedisRateLimiter::quota(self)
        }

        fn acquire(&self, key: &String, cost: u32) -> Acquire {
            let (limiter, key) = (self.clone(), key.clone());
            Acquire::pending(async move { limiter.check_n(&key, cost).await.map_err(convert) })
        }

        fn peek(&self, key: &String) -> Acquire {
            let (limiter, key) = (self.clone(), key.clone());
            Acquire::pending(async move { limiter.peek_n(&key, 0).await.map_err(convert) })
        }

        fn is_async(&self) -> bool {
            true
        }
    }

    impl Backend<String> for HybridRateLimiter {
        fn quota(&self) -> Quota {
            HybridRateLimiter::quota(self)
        }

        fn acquire(&self, key: &String, cost: u32) -> Acquire {
            Acquire::ready(self.check_n(key, cost).map_err(Into::into))
        }

        // A peek inserts nothing into the key table (a check of 0 would).
        fn peek(&self, key: &String) -> Acquire {
            Acquire::ready(self.peek_n(key, 0).map_err(Into::into))
        }
    }
}
