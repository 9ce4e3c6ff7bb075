//! The builder settings both Redis limiters share, written once: where Redis is
//! (`url`, `connection`), the key prefix and the call timeout. [`shared_settings!`]
//! writes them into a builder that has the fields `target: Target`, `prefix: String`
//! and `timeout: Duration`; each builder keeps its own settings beside them.

/// Writes `url`, `connection`, `prefix` and `timeout` into `$builder`, whose limiter is
/// `$limiter` (named in the examples) running `$algorithm`; `$connection_doc` says
/// what the limiter does with a Cluster connection.
macro_rules! shared_settings {
    ($builder:ident, $limiter:literal, $algorithm:literal, $connection_doc:literal) => {
        impl $builder {
            /// Connects to the Redis at `url` (`redis://host:port/db`) when built.
            ///
            /// # Example
            ///
            /// ```
            #[doc = concat!("# use tollgate::{redis::", $limiter, ", Algorithm, Quota};")]
            #[doc = concat!("let b = ", $limiter, "::builder(Algorithm::", $algorithm, ", Quota::per_second(5))")]
            ///     .url("redis://127.0.0.1:6379/0");
            /// # let _ = b;
            /// ```
            pub fn url(mut self, url: impl Into<String>) -> Self {
                self.target = Target::Url(url.into());
                self
            }

            /// Uses an existing connection, shared with the caller's other Redis
            /// traffic: a `ConnectionManager` (reconnects by itself; what
            /// [`url`](Self::url) builds), a `MultiplexedConnection`, or a Redis
            /// Cluster connection (enable the `redis` crate's `cluster-async` feature
            /// in your own dependency on the same version).
            #[doc = $connection_doc]
            ///
            /// # Example
            ///
            /// ```no_run
            #[doc = concat!("# use tollgate::{redis::", $limiter, ", Algorithm, Quota};")]
            /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
            /// let client = tollgate::redis::redis::Client::open("redis://127.0.0.1:6379")?;
            #[doc = concat!("let b = ", $limiter, "::builder(Algorithm::", $algorithm, ", Quota::per_second(5))")]
            ///     .connection(client.get_connection_manager().await?);
            /// # let _ = b;
            /// # Ok(())
            /// # }
            /// ```
            pub fn connection<C>(mut self, connection: C) -> Self
            where
                C: ConnectionLike + Clone + Send + Sync + 'static,
            {
                self.target = Target::Connection(Connection::new(connection));
                self
            }

            /// Prefixes every Redis key (default `tollgate`). Give each limiter (each
            /// algorithm and quota) its own prefix: limiters sharing a prefix share
            /// state.
            ///
            /// # Example
            ///
            /// ```
            #[doc = concat!("# use tollgate::{redis::", $limiter, ", Algorithm, Quota};")]
            #[doc = concat!("let b = ", $limiter, "::builder(Algorithm::", $algorithm, ", Quota::per_second(5))")]
            ///     .prefix("rl:search");
            /// # let _ = b;
            /// ```
            pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
                self.prefix = prefix.into();
                self
            }

            /// Bounds every Redis call, and connecting (default 100 ms).
            ///
            /// # Example
            ///
            /// ```
            /// # use std::time::Duration;
            #[doc = concat!("# use tollgate::{redis::", $limiter, ", Algorithm, Quota};")]
            #[doc = concat!("let b = ", $limiter, "::builder(Algorithm::", $algorithm, ", Quota::per_second(5))")]
            ///     .timeout(Duration::from_millis(25));
            /// # let _ = b;
            /// ```
            pub fn timeout(mut self, timeout: Duration) -> Self {
                self.timeout = timeout;
                self
            }
        }
    };
}
pub(crate) use shared_settings;
