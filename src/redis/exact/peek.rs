//! Peeks: what a request would get now, with the decision script in its peek mode,
//! which writes nothing at all.

#[allow(clippy::wildcard_imports)]
use super::*;

impl RedisRateLimiter {
    /// The decision a request of cost 1 for `key` would get now, taking nothing: the
    /// decision script in its peek mode, which reads the key and writes nothing at all
    /// (no count, no TTL refresh, no clean-up of a log's expired entries, no bucket
    /// state converted after [`set_quota`](Self::set_quota)). A key Redis does not hold
    /// is reported whole and is not created. Another caller may take the capacity
    /// between a peek and a check.
    ///
    /// Its [`remaining`](Decision::remaining) is, as for every decision, what would be
    /// left *after* that request; what is left now is
    /// [`peek_n(key, 0)`](Self::peek_n)'s. One script call, one round trip, counted in
    /// [`RedisStats::decisions`] as a check is; while Redis cannot be used, the
    /// [`Fallback`] answers as it would for a check (a [`Fallback::Local`] peeks its own
    /// table, taking nothing there either).
    ///
    /// # Errors
    ///
    /// The Redis errors of [`check`](Self::check).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn run(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// if limiter.peek("user:7").await?.is_allowed() {
    ///     // a check now would be admitted (nothing was taken by asking)
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn peek<K: RedisKey + ?Sized>(&self, key: &K) -> Result<Decision, Error> {
        self.peek_n(key, 1).await
    }

    /// What a request of cost `n` for `key` would get now, taking nothing: the decision
    /// [`check_n`](Self::check_n) of `n` would give, on every algorithm, with nothing
    /// written (see [`peek`](Self::peek)). `peek_n(key, 0)` reports the key's state
    /// without asking for anything: [`remaining`](Decision::remaining) is what is left
    /// now (0 while the key owes after a [`charge`](Self::charge)).
    ///
    /// # Errors
    ///
    /// [`Error::InsufficientCapacity`] when `n` exceeds the capacity (the burst for the
    /// buckets, the limit for the others); the Redis errors of [`check`](Self::check).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn run(tokens: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// // Check a token budget before the work, charge what it used after.
    /// if tokens.peek_n("user:7", 0).await?.remaining() > 0 {
    ///     let c = tokens.charge("user:7", 1_200).await?;
    ///     println!("owed: {}", c.owed());
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn peek_n<K: RedisKey + ?Sized>(&self, key: &K, n: u32) -> Result<Decision, Error> {
        let mut buf = [0; KEY_BUF];
        self.inner.decide(key.key_bytes(&mut buf), n, true).await
    }
}
