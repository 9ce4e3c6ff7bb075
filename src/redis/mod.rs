//! Distributed rate limiting on Redis (feature `redis`).
//!
//! Two modes share one quota across every instance of a service:
//!
//! * [`RedisRateLimiter`], **exact**: every decision is one atomic Lua script, one
//!   `EVALSHA` round trip. All five algorithms, with the local engine's semantics in
//!   whole microseconds. Use it when the limit must hold exactly across instances.
//! * [`HybridRateLimiter`], **hybrid**: decisions are made locally at in-memory
//!   speed and the counts are shared through Redis by a background task, one pipelined
//!   round trip per sync interval for all keys that changed. The global total can
//!   overshoot the limit by a bounded amount (see [`HybridRateLimiter`]).
//!
//! Both have the token-budget verbs (`charge`, `charge_owing`, `give_back`: a cost known
//! only after the work, taken whatever is left): exact in one script per call on the
//! exact mode ([`RedisCharge`]), local within the overshoot bound on the hybrid mode.
//!
//! Key layout: `<prefix>:{<key>}` for the exact mode (one Redis key per limited key),
//! `<prefix>:{<key>}:<window index>` for the hybrid mode. The `{…}` hash tag puts all
//! of one key's data in one Redis Cluster slot, so every script touches one slot.
//! Every key carries a TTL equal to the time until it is idle, set in the same atomic
//! script that writes it, so Redis memory is bounded by the active keys.
//!
//! The [`redis`] crate is re-exported so that connections built by
//! the caller come from the matching version.
//!
//! # Example
//!
//! ```no_run
//! use tollgate::redis::RedisRateLimiter;
//! use tollgate::{Algorithm, Quota};
//!
//! # async fn run() -> Result<(), tollgate::redis::Error> {
//! let limiter = RedisRateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(100))
//!     .url("redis://127.0.0.1:6379")
//!     .build()
//!     .await?;
//! if limiter.check("user:42").await?.is_allowed() {
//!     // serve the request
//! }
//! # Ok(())
//! # }
//! ```

mod error;
mod exact;
mod hybrid;
mod key;
mod shared_settings;

pub use error::Error;
pub use exact::{
    check_all, Fallback, RedisCharge, RedisRateLimiter, RedisRateLimiterBuilder, RedisStats,
};
pub use hybrid::{HybridRateLimiter, HybridRateLimiterBuilder, HybridStats};
pub(crate) use key::KeyName;
pub use key::{RedisKey, KEY_BUF};
/// The `redis` crate this module is built against, re-exported so that connections
/// handed to the builders come from the matching version.
pub use redis;

use crate::clock::Clock;
use crate::sync::StdArc as Arc;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use std::time::Duration;

/// The default key prefix.
pub(crate) const DEFAULT_PREFIX: &str = "tollgate";

/// The default bound on every Redis call.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_millis(100);

/// Any async Redis connection that can be cloned to share (a `ConnectionManager`, a
/// `MultiplexedConnection`, a cluster connection when the `redis` crate's
/// `cluster-async` feature is on), type-erased.
trait DynConnection: ConnectionLike + Send + Sync {
    fn clone_box(&self) -> Box<dyn DynConnection>;
}

impl<T: ConnectionLike + Clone + Send + Sync + 'static> DynConnection for T {
    fn clone_box(&self) -> Box<dyn DynConnection> {
        Box::new(self.clone())
    }
}

/// A shared connection: clones share the underlying multiplexed connection.
pub(crate) struct Connection(Box<dyn DynConnection>, bool);

impl Connection {
    pub(crate) fn new<C: ConnectionLike + Clone + Send + Sync + 'static>(c: C) -> Self {
        let cluster = std::any::TypeId::of::<C>()
            == std::any::TypeId::of::<redis::cluster_async::ClusterConnection>();
        Connection(Box::new(c), cluster)
    }

    /// Whether this is a Redis Cluster connection: a pipeline must then stay within
    /// one hash slot, so the hybrid sync sends one pipeline per slot, concurrently.
    pub(crate) fn is_cluster(&self) -> bool {
        self.1
    }
}

impl Clone for Connection {
    fn clone(&self) -> Self {
        Connection(self.0.clone_box(), self.1)
    }
}

/// The Redis Cluster hash slot of `key`: CRC16 (XMODEM) of its hash tag (the part
/// between the first `{` and the next `}`, when not empty) or of the whole key,
/// modulo 16,384.
#[cfg(test)]
pub(crate) fn hash_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16_slot(&[tagged.unwrap_or(key)])
}

/// CRC16 (XMODEM) of `parts` concatenated, modulo 16,384: the slot of bytes already
/// known to be the hash tag (or the whole key when it has none).
pub(crate) fn crc16_slot(parts: &[&[u8]]) -> u16 {
    let mut crc: u16 = 0;
    for &b in parts.iter().flat_map(|p| p.iter()) {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16_384
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a redis::Cmd,
    ) -> redis::RedisFuture<'a, redis::Value> {
        self.0.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        self.0.req_packed_commands(cmd, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.0.get_db()
    }
}

/// A connection to a URL that connects on first use when Redis was down at build (a
/// limiter with a fallback must start without Redis): each call while disconnected
/// tries once, within the caller's timeout, and fails like any call to a down Redis.
#[derive(Clone)]
struct Lazy {
    client: redis::Client,
    config: ConnectionManagerConfig,
    cell: Arc<tokio::sync::OnceCell<ConnectionManager>>,
}

impl Lazy {
    async fn get(&self) -> redis::RedisResult<ConnectionManager> {
        self.cell
            .get_or_try_init(|| {
                ConnectionManager::new_with_config(self.client.clone(), self.config.clone())
            })
            .await
            .cloned()
    }
}

impl ConnectionLike for Lazy {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a redis::Cmd,
    ) -> redis::RedisFuture<'a, redis::Value> {
        Box::pin(async move { self.get().await?.req_packed_command(cmd).await })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        Box::pin(async move {
            self.get()
                .await?
                .req_packed_commands(cmd, offset, count)
                .await
        })
    }

    fn get_db(&self) -> i64 {
        self.client.get_connection_info().redis_settings().db()
    }
}

/// Where a limiter gets its Redis connection from.
pub(crate) enum Target {
    None,
    Url(String),
    Connection(Connection),
}

impl Target {
    /// Connects (or reuses the given connection), within `timeout`. With `lazy`, a
    /// Redis that cannot be reached now is not an error: the connection is made on
    /// first use instead (for limiters whose fallback answers meanwhile).
    pub(crate) async fn connect(self, timeout: Duration, lazy: bool) -> Result<Connection, Error> {
        match self {
            Target::None => Err(Error::NoTarget),
            Target::Connection(c) => Ok(c),
            Target::Url(url) => {
                let client = redis::Client::open(url.as_str())?;
                // No retries inside one attempt: a refused connection is reported as
                // refused, not as the timeout that retries would run into.
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(timeout))
                    .set_response_timeout(Some(timeout))
                    .set_number_of_retries(0);
                let lazy_conn = Lazy {
                    client,
                    config,
                    cell: Arc::new(tokio::sync::OnceCell::new()),
                };
                match bounded(timeout, lazy_conn.get()).await {
                    Ok(_) => Ok(Connection::new(lazy_conn)),
                    Err(e) if lazy && e.is_redis_unavailable() => Ok(Connection::new(lazy_conn)),
                    Err(e) => Err(e),
                }
            }
        }
    }
}

/// Which Redis deployment a limiter talks to: [`check_all`] decides several limits in
/// one script, so they must all live where that script runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Deployment {
    /// A URL's address and database (limiters built on the same URL share it).
    Url(String),
    /// A connection given to a builder, by a number of its own (limiters built with
    /// `connection_of` share it).
    Connection(u64),
}

impl std::fmt::Display for Deployment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Deployment::Url(addr) => write!(f, "redis at {addr}"),
            Deployment::Connection(id) => write!(f, "the connection given to builder #{id}"),
        }
    }
}

impl Target {
    /// The deployment this target names: for a URL its address and database.
    pub(crate) fn deployment(&self) -> Deployment {
        use crate::sync::{Ordering, PlainAtomicU64};
        use redis::IntoConnectionInfo;
        static NEXT: PlainAtomicU64 = PlainAtomicU64::new(1);
        match self {
            Target::Url(url) => match url.as_str().into_connection_info() {
                Ok(info) => {
                    Deployment::Url(format!("{}/{}", info.addr(), info.redis_settings().db()))
                }
                // Unparsable: building fails on it anyway.
                Err(_) => Deployment::Url(url.clone()),
            },
            Target::None | Target::Connection(_) => {
                Deployment::Connection(NEXT.fetch_add(1, Ordering::Relaxed))
            }
        }
    }
}

/// The time the scripts decide at.
#[derive(Clone)]
pub(crate) enum TimeSource {
    /// Redis `TIME`, read inside the script (or the system clock for the hybrid mode).
    Server,
    /// The caller's clock, nanoseconds since its zero.
    Caller(Arc<dyn Fn() -> u64 + Send + Sync>),
}

impl TimeSource {
    pub(crate) fn from_clock<C: Clock>(clock: C) -> Self {
        TimeSource::Caller(Arc::new(move || clock.now()))
    }
}

// Locks a std mutex, recovering the guard if a previous holder panicked (the redis
// mode's maps stay valid after any partial update). The redis mode is outside the loom
// models, so it locks std's mutexes, not `crate::sync`'s modelled ones.
pub(crate) use crate::sync::lock_std as lock;

/// Refuses a prefix with braces: every key is `prefix:{key}:…`, and Redis Cluster
/// hashes a key by its first `{…}`, so braces in the prefix would put every key of the
/// limiter in one slot, on one node.
pub(crate) fn check_prefix(prefix: &str) -> Result<(), Error> {
    if prefix.contains(['{', '}']) {
        return Err(Error::Unsupported(format!(
            "prefix {prefix:?} contains a brace: on Redis Cluster every key would hash to one slot (the key's own name is the hash tag); use a prefix without braces"
        )));
    }
    Ok(())
}

/// Runs `fut` within `timeout`.
pub(crate) async fn bounded<T>(
    timeout: Duration,
    fut: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> Result<T, Error> {
    match tokio::time::timeout(timeout, fut).await {
        Err(_) => Err(Error::Timeout(timeout)),
        // The connection's own response timeout (same duration) may fire first.
        Ok(Err(e)) if e.is_timeout() => Err(Error::Timeout(timeout)),
        Ok(Err(e))
            if matches!(
                e.kind(),
                redis::ErrorKind::Parse | redis::ErrorKind::UnexpectedReturnType
            ) =>
        {
            Err(Error::BadReply(e.to_string()))
        }
        // A key of the wrong type (another algorithm's state under this prefix), or a
        // script that failed on a value it cannot read: Redis is up, the state is not
        // ours. Not an outage, so never a fallback decision.
        Ok(Err(e)) if e.code() == Some("WRONGTYPE") || e.to_string().contains("user_script") => {
            Err(Error::ForeignState(e.to_string()))
        }
        Ok(r) => Ok(r?),
    }
}

#[cfg(test)]
mod tests {
    use super::hash_slot;

    /// Values `CLUSTER KEYSLOT` gives (Redis's own documentation and a real cluster).
    #[test]
    fn hash_slots_match_redis() {
        assert_eq!(hash_slot(b"foo"), 12_182);
        assert_eq!(hash_slot(b"somekey"), 11_058);
        assert_eq!(hash_slot(b"{user1000}.following"), hash_slot(b"user1000"));
        assert_eq!(hash_slot(b"foo{}{bar}"), hash_slot(b"foo{}{bar}"));
        assert_ne!(hash_slot(b"foo{}{bar}"), hash_slot(b"bar"));
        assert_eq!(hash_slot(b"foo{{bar}}zap"), hash_slot(b"{bar"));
    }
}
