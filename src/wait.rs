//! Waiting for capacity: built on reservations, never on a re-check loop.
//!
//! A waiter books its place first (one [`reserve`](crate::limiter::RateLimiter::reserve)), then
//! sleeps exactly the booked wait: waiters are served in the order they booked, none
//! can lose a race to a later one, and nobody polls. A future dropped before its
//! reservation is due cancels the reservation (giving back what no later booking
//! depends on).

use crate::{
    clock::Clock, keyed::KeyedRateLimiter, limiter::RateLimiter, reservation::Reservation,
    reservation::ReserveError,
};
use std::hash::Hash;
use std::time::Duration;

/// The longest wait `until_ready` books: effectively unbounded (about 36 years).
const FOREVER: Duration = Duration::MAX;

/// A uniformly spread extra delay in `[0, jitter)`, from a per-call hash of the time
/// and a counter (no shared generator on the hot path).
fn spread(jitter: Duration) -> Duration {
    use crate::sync::{Ordering, PlainAtomicU64};
    use std::hash::{BuildHasher, Hasher};
    static CALLS: PlainAtomicU64 = PlainAtomicU64::new(0);
    let nanos = u64::try_from(jitter.as_nanos()).unwrap_or(u64::MAX);
    if nanos == 0 {
        return Duration::ZERO;
    }
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(CALLS.fetch_add(1, Ordering::Relaxed));
    Duration::from_nanos(h.finish() % nanos)
}

/// Cancels its reservation if dropped before the wait completed.
#[cfg(feature = "tokio")]
struct CancelOnDrop<'a>(Option<Reservation<'a>>);

#[cfg(feature = "tokio")]
impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(r) = self.0.take() {
            r.cancel();
        }
    }
}

/// Sleeps the reservation's wait (plus jitter) on tokio's timer; cancels it if the
/// future is dropped first.
#[cfg(feature = "tokio")]
async fn sleep_through(r: Reservation<'_>, jitter: Duration) {
    let wait = r.wait_time() + spread(jitter);
    let mut guard = CancelOnDrop(Some(r));
    if !wait.is_zero() {
        tokio::time::sleep(wait).await;
    }
    // Due: the capacity is used; nothing to give back any more.
    guard.0 = None;
}

/// Blocks the thread for the reservation's wait (plus jitter).
fn block_through(r: Reservation<'_>, jitter: Duration) {
    let wait = r.wait_time() + spread(jitter);
    if !wait.is_zero() {
        std::thread::sleep(wait);
    }
}

impl<C: Clock> RateLimiter<C> {
    /// Waits until a request of cost 1 may proceed. Waiters
    /// are served in the order they called (each books its place with
    /// [`reserve`](Self::reserve) and sleeps exactly its wait); dropping the future
    /// before then cancels its booking. The wait is measured on tokio's timer, so use a
    /// clock that runs at real speed.
    ///
    /// # Errors
    ///
    /// Only what [`reserve`](Self::reserve) returns for a cost of 1 with no bound on
    /// the wait: [`ReserveError::TooLong`](crate::reservation::ReserveError::TooLong) when the wait
    /// would exceed [`Reservation::MAX_WAIT`](crate::reservation::Reservation::MAX_WAIT) (about 36
    /// years: only a quota slower than one request per 36 years can get there).
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use tollgate::{Algorithm, Quota, RateLimiter};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(50).with_burst(1)).build()?;
    /// let start = Instant::now();
    /// for _ in 0..3 {
    ///     l.until_ready().await?;
    /// }
    /// assert!(start.elapsed() >= Duration::from_millis(39)); // two waits of 20 ms
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub async fn until_ready(&self) -> Result<(), ReserveError> {
        self.until_n_ready(1).await
    }

    /// Waits until a request of cost `n` may proceed; see
    /// [`until_ready`](Self::until_ready).
    ///
    /// # Errors
    ///
    /// [`ReserveError::InsufficientCapacity`] when `n` can never fit.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, Quota, RateLimiter, ReserveError};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let l = RateLimiter::builder(Algorithm::SlidingLog, Quota::per_second(10)).build()?;
    /// l.until_n_ready(4).await?;
    /// assert_eq!(l.peek().remaining(), 5);
    /// assert!(matches!(l.until_n_ready(11).await, Err(ReserveError::InsufficientCapacity(_))));
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub async fn until_n_ready(&self, n: u32) -> Result<(), ReserveError> {
        self.until_n_ready_with_jitter(n, Duration::ZERO).await
    }

    /// [`until_n_ready`](Self::until_n_ready), then a further random delay below
    /// `jitter`, so that waiters released together do not hit the next stage at once.
    /// The booking is made first, so jitter never costs a waiter its place.
    ///
    /// # Errors
    ///
    /// As [`until_n_ready`](Self::until_n_ready).
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Algorithm, Quota, RateLimiter};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let l = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_second(10)).build()?;
    /// l.until_n_ready_with_jitter(1, Duration::from_millis(5)).await?;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub async fn until_n_ready_with_jitter(
        &self,
        n: u32,
        jitter: Duration,
    ) -> Result<(), ReserveError> {
        let r = self.reserve(n, FOREVER)?;
        sleep_through(r, jitter).await;
        Ok(())
    }

    /// Blocks the calling thread until a request of cost `n` may proceed (booked
    /// first, as `until_ready` does with the `tokio` feature), plus a random delay below
    /// `jitter`.
    ///
    /// # Errors
    ///
    /// [`ReserveError::InsufficientCapacity`] when `n` can never fit.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use tollgate::{Algorithm, Quota, RateLimiter};
    ///
    /// let l = RateLimiter::builder(Algorithm::LeakyBucket, Quota::per_second(100)).build()?;
    /// let start = Instant::now();
    /// for _ in 0..3 {
    ///     l.wait_blocking(1, Duration::ZERO)?;
    /// }
    /// assert!(start.elapsed() >= Duration::from_millis(19)); // spaced by 10 ms
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_blocking(&self, n: u32, jitter: Duration) -> Result<(), ReserveError> {
        let r = self.reserve(n, FOREVER)?;
        block_through(r, jitter);
        Ok(())
    }
}

impl<K: Hash + ?Sized, C: Clock> KeyedRateLimiter<K, C> {
    /// Waits until `key`'s request of cost 1 may proceed; waiters of one key are
    /// served in the order they called, and dropping the future cancels its booking.
    /// See [`RateLimiter::until_ready`].
    ///
    /// # Errors
    ///
    /// [`ReserveError::Refused`] when the table is full under
    /// [`OnFull::Deny`](crate::table::claim::OnFull::Deny).
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let l = KeyedRateLimiter::<str>::builder(Algorithm::TokenBucket, Quota::per_second(100)).build()?;
    /// l.until_ready("alice").await?;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub async fn until_ready(&self, key: &K) -> Result<(), ReserveError> {
        self.until_n_ready(key, 1).await
    }

    /// Waits until `key`'s request of cost `n` may proceed; see
    /// [`until_ready`](Self::until_ready).
    ///
    /// # Errors
    ///
    /// [`ReserveError::InsufficientCapacity`] when `n` can never fit;
    /// [`ReserveError::Refused`] when the table is full under
    /// [`OnFull::Deny`](crate::table::claim::OnFull::Deny).
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let l = KeyedRateLimiter::<u64>::builder(Algorithm::SlidingWindow, Quota::per_second(10)).build()?;
    /// l.until_n_ready(&7, 10).await?;
    /// assert!(!l.peek(&7).is_allowed());
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub async fn until_n_ready(&self, key: &K, n: u32) -> Result<(), ReserveError> {
        self.until_n_ready_with_jitter(key, n, Duration::ZERO).await
    }

    /// [`until_n_ready`](Self::until_n_ready) plus a random delay below `jitter`
    /// (booked first, so jitter never costs a waiter its place).
    ///
    /// # Errors
    ///
    /// As [`until_n_ready`](Self::until_n_ready).
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let l = KeyedRateLimiter::<str>::builder(Algorithm::FixedWindow, Quota::per_second(5)).build()?;
    /// l.until_n_ready_with_jitter("bob", 1, Duration::from_millis(2)).await?;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub async fn until_n_ready_with_jitter(
        &self,
        key: &K,
        n: u32,
        jitter: Duration,
    ) -> Result<(), ReserveError> {
        let r = self.reserve(key, n, FOREVER)?;
        sleep_through(r, jitter).await;
        Ok(())
    }

    /// Blocks the calling thread until `key`'s request of cost `n` may proceed (booked
    /// first), plus a random delay below `jitter`.
    ///
    /// # Errors
    ///
    /// [`ReserveError::InsufficientCapacity`] when `n` can never fit.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    ///
    /// let l = KeyedRateLimiter::<str>::builder(Algorithm::TokenBucket, Quota::per_second(1_000)).build()?;
    /// l.wait_blocking("alice", 1, Duration::ZERO)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_blocking(&self, key: &K, n: u32, jitter: Duration) -> Result<(), ReserveError> {
        let r = self.reserve(key, n, FOREVER)?;
        block_through(r, jitter);
        Ok(())
    }
}
