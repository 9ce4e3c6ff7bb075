//! What answers while Redis cannot: the policy, and the local keyed table it may use.

#[allow(clippy::wildcard_imports)]
use super::*;

/// What to do when Redis is down, slow, or answers garbage.
///
/// Every decision the fallback makes is counted in [`RedisStats::fallbacks`].
///
/// # Example
///
/// ```
/// use tollgate::redis::Fallback;
/// use tollgate::Quota;
///
/// // While Redis is away, each instance enforces a tenth of the quota on its own.
/// let f = Fallback::Local(Quota::per_second(10));
/// assert_ne!(f, Fallback::Error);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fallback {
    /// Return the error (the default).
    #[default]
    Error,
    /// Admit every request (fail open).
    Allow,
    /// Deny every request (fail closed), with `retry_after` equal to the timeout.
    Deny,
    /// Decide locally, one limit per key, running the same algorithm on this quota
    /// (typically the global quota divided by the number of instances) until Redis
    /// answers again: a [`KeyedRateLimiter`](crate::keyed::KeyedRateLimiter) of 65,536 keys,
    /// fixed memory, on the limiter's clock (the builder's
    /// [`clock`](RedisRateLimiterBuilder::clock) when given).
    Local(Quota),
}

pub(super) enum FallbackState {
    Error,
    Allow,
    Deny,
    /// One local limit per key (by the key's bytes, as in its Redis key), in a fixed
    /// table on the limiter's own clock.
    Local(Box<KeyedRateLimiter<[u8], FallbackClock>>),
}

/// The clock of the local fallback: the caller's clock when one was given (so tests and
/// callers with their own time see the fallback follow it), else the engine's default
/// (Redis `TIME` is what is unreachable).
#[derive(Clone)]
pub(crate) struct FallbackClock(Option<Arc<dyn Fn() -> u64 + Send + Sync>>, QuantaClock);

impl FallbackClock {
    pub(super) fn new(time: &TimeSource) -> Self {
        match time {
            TimeSource::Server => FallbackClock(None, QuantaClock::new()),
            TimeSource::Caller(f) => FallbackClock(Some(Arc::clone(f)), QuantaClock::new()),
        }
    }
}

impl Clock for FallbackClock {
    fn now(&self) -> u64 {
        match &self.0 {
            Some(f) => f(),
            None => self.1.now(),
        }
    }
}
