//! Errors of the distributed mode.

use crate::{ConfigError, InsufficientCapacity};
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
