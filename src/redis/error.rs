//! Errors of the distributed mode.

use crate::{error::ConfigError, error::InsufficientCapacity};
use std::fmt;
use std::time::Duration;

/// Why a distributed decision (or building a distributed limiter) failed.
///
/// Errors are values, never hangs: every Redis call is bounded by the limiter's
/// timeout. With a [`Fallback`](super::Fallback) other than `Error`, the Redis
/// variants are turned into decisions instead of being returned.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use tollgate::redis::Error;
///
/// let err = Error::Timeout(Duration::from_millis(50));
/// assert!(err.to_string().contains("50ms"));
/// assert!(err.is_redis_unavailable());
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Redis answered with an error, or the connection failed.
    Redis(redis::RedisError),
    /// Redis did not answer within the limiter's timeout.
    Timeout(Duration),
    /// Redis answered something the script cannot have returned.
    BadReply(String),
    /// The quota cannot work at all (the same checks as the local engine).
    Config(ConfigError),
    /// The quota works locally but cannot be computed exactly by the Lua scripts,
    /// whose numbers are doubles in whole microseconds.
    Unrepresentable(String),
    /// The request's cost exceeds the capacity: it can never be admitted.
    InsufficientCapacity(InsufficientCapacity),
    /// The builder was given neither a URL nor a connection.
    NoTarget,
    /// The mode does not support this algorithm or option.
    Unsupported(String),
    /// A key under this limiter's prefix holds state the script cannot read: another
    /// algorithm's (the prefix was reused after changing the algorithm) or a value
    /// something else wrote. Never a fallback decision: Redis is up and the state is
    /// wrong, so admitting or denying on a guess would be a silent wrong answer. Use
    /// one prefix per algorithm and quota, or delete the key.
    ForeignState(String),
    /// [`check_all`](super::check_all) was given limiters that do not share one Redis
    /// deployment: one script must decide every limit where their state lives. Build
    /// them on one URL, or on one connection with
    /// [`connection_of`](super::RedisRateLimiterBuilder::connection_of).
    MixedDeployments {
        /// The position of the first limit not on the first limit's deployment.
        index: usize,
        /// The first limit's deployment (an address, or a connection given to a builder).
        first: String,
        /// That limit's.
        other: String,
    },
    /// [`check_all`](super::check_all) on Redis Cluster with keys in more than one hash
    /// slot: one script can only touch one slot. Co-locate the keys of one call with a
    /// hash tag in the key (`"{user:42}:api"` and `"{user:42}:upload"`), which the
    /// limiters' `prefix:{key}` layout keeps as the slot's key. Nothing was sent.
    CrossSlot {
        /// Every Redis key of the call with its slot, in the order of the limits.
        slots: Vec<(String, u16)>,
    },
    /// [`check_all`](super::check_all) was given one Redis key twice (one limiter and
    /// key, or two limiters sharing a prefix): both would be decided on the same state
    /// before either is counted. Nothing was sent.
    DuplicateKey(String),
}

impl Error {
    /// Whether Redis refused the connection (nothing listening, or a firewall's
    /// reset): told apart from [`Error::Timeout`] (no answer in time) and
    /// [`Error::BadReply`] (an answer that makes no sense).
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::redis::Error;
    ///
    /// assert!(!Error::Timeout(Duration::from_millis(50)).is_connection_refused());
    /// ```
    #[must_use]
    pub fn is_connection_refused(&self) -> bool {
        matches!(self, Error::Redis(e) if e.is_connection_refusal())
    }

    /// Whether this error means Redis could not be used (down, slow, or answering
    /// garbage), as opposed to a mistake in the quota or the request: the errors a
    /// [`Fallback`](super::Fallback) turns into decisions.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::redis::Error;
    /// use tollgate::InsufficientCapacity;
    ///
    /// let e = Error::InsufficientCapacity(InsufficientCapacity { requested: 9, capacity: 5 });
    /// assert!(!e.is_redis_unavailable());
    /// assert!(Error::BadReply("nil".into()).is_redis_unavailable());
    /// ```
    #[must_use]
    pub fn is_redis_unavailable(&self) -> bool {
        matches!(
            self,
            Error::Redis(_) | Error::Timeout(_) | Error::BadReply(_)
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Redis(e) => write!(f, "redis error: {e}"),
            Error::Timeout(t) => write!(f, "redis did not answer within {t:?}"),
            Error::BadReply(what) => write!(f, "unexpected reply from redis: {what}"),
            Error::Config(e) => write!(f, "invalid quota: {e}"),
            Error::Unrepresentable(why) => {
                write!(f, "quota not representable by the redis scripts: {why}")
            }
            Error::InsufficientCapacity(e) => write!(f, "{e}"),
            Error::Unsupported(what) => write!(f, "unsupported: {what}"),
            Error::ForeignState(what) => write!(
                f,
                "a key under this prefix holds state this limiter cannot read (another algorithm's, or a foreign value): {what}"
            ),
            Error::MixedDeployments { index, first, other } => write!(
                f,
                "check_all needs every limiter on one redis deployment: limit {index} is on {other}, limit 0 on {first}"
            ),
            Error::CrossSlot { slots } => {
                write!(f, "check_all on redis cluster needs every key in one hash slot, got")?;
                for (i, (key, slot)) in slots.iter().enumerate() {
                    let sep = if i == 0 { " " } else { ", " };
                    write!(f, "{sep}{key} in slot {slot}")?;
                }
                write!(f, " (co-locate them with a {{hash tag}} in the keys)")
            }
            Error::DuplicateKey(key) => write!(
                f,
                "check_all was given the redis key {key} twice (one limit per key and limiter)"
            ),
            Error::NoTarget => write!(
                f,
                "no redis target: call .url(..) or .connection(..) on the builder"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Redis(e) => Some(e),
            Error::Config(e) => Some(e),
            Error::InsufficientCapacity(e) => Some(e),
            _ => None,
        }
    }
}

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        Error::Redis(e)
    }
}

impl From<ConfigError> for Error {
    /// The quota errors the local engine gives are [`Error::Config`]; the distributed
    /// limiters' own bound ([`ConfigError::Unrepresentable`]) is [`Error::Unrepresentable`].
    fn from(e: ConfigError) -> Self {
        match e {
            ConfigError::Unrepresentable { reason } => Error::Unrepresentable(reason),
            e => Error::Config(e),
        }
    }
}

impl From<InsufficientCapacity> for Error {
    fn from(e: InsufficientCapacity) -> Self {
        Error::InsufficientCapacity(e)
    }
}
