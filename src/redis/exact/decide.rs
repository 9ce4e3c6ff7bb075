//! The decision path: one script call with its time and arguments, the reply parsed
//! into a [`Decision`], and what happens while Redis is down (the outage window and the
//! [`Fallback`]).

#[allow(clippy::wildcard_imports)]
use super::*;

impl Inner {
    fn elapsed_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Whether the fallback answers alone now (a Redis call failed less than
    /// [`RETRY_AFTER_ERROR`] ago).
    pub(super) fn is_down(&self) -> bool {
        self.elapsed_ns() < self.down_until.load(Ordering::Relaxed)
    }

    /// After a failed Redis call: the fallback answers alone for [`RETRY_AFTER_ERROR`].
    pub(super) fn mark_down(&self) {
        let until = self.elapsed_ns() + RETRY_AFTER_ERROR.as_nanos() as u64;
        self.down_until.fetch_max(until, Ordering::Relaxed);
    }

    /// A Redis call under the failure policy: `local()` while Redis is marked down and
    /// a fallback is set; otherwise `eval`, counted as a decision; when it finds Redis
    /// unavailable, counted as an error, then Redis is marked down and `local()`
    /// answers, or, with no fallback, the error is returned. Other errors are returned
    /// as they are.
    pub(super) async fn under_policy<T>(
        &self,
        eval: impl std::future::Future<Output = Result<T, Error>>,
        local: impl FnOnce() -> T,
    ) -> Result<T, Error> {
        let has_fallback = !matches!(self.fallback, FallbackState::Error);
        if has_fallback && self.is_down() {
            return Ok(local());
        }
        match eval.await {
            Ok(r) => {
                self.decisions.fetch_add(1, Ordering::Relaxed);
                Ok(r)
            }
            Err(e) if !e.is_redis_unavailable() => Err(e),
            Err(e) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                if !has_fallback {
                    return Err(e);
                }
                self.mark_down();
                Ok(local())
            }
        }
    }

    /// The time the script decides at (ARGV): the caller's clock in µs, or -1 for
    /// Redis `TIME`.
    pub(super) fn now_us(&self) -> Result<i64, Error> {
        match &self.time {
            TimeSource::Server => Ok(-1),
            TimeSource::Caller(f) => {
                let us = f() / 1000;
                if us > MAX_TIME_US {
                    return Err(Error::Unrepresentable(format!(
                        "caller clock reading of {us} µs is past 2^52 µs (about 142 years), \
                         the latest time the scripts compute exactly"
                    )));
                }
                // us <= 2^52: fits an i64.
                Ok(us as i64)
            }
        }
    }

    /// A decision of cost `n` for `key`: by Redis, or by the fallback while Redis cannot
    /// be used. With `peek`, nothing is written to Redis (the script's peek mode) nor
    /// taken from the local fallback: the decision a check of `n` would get now.
    pub(super) async fn decide(&self, key: &[u8], n: u32, peek: bool) -> Result<Decision, Error> {
        let active = self.active.load();
        let capacity = active.plan.capacity();
        if n > capacity {
            return Err(Error::InsufficientCapacity(InsufficientCapacity {
                requested: n,
                capacity,
            }));
        }
        self.under_policy(self.eval(&active, key, n, peek), || {
            self.fall_back(&active, key, n, peek)
        })
        .await
    }

    /// One call of the decision script: ARGV[7] is 1 for a peek, which writes nothing.
    pub(super) async fn eval(
        &self,
        active: &Active,
        key: &[u8],
        n: u32,
        peek: bool,
    ) -> Result<Decision, Error> {
        let now_us = self.now_us()?;
        let [a, b, c] = active.plan.args();
        let mut inv = active.plan.script().prepare_invoke();
        // The key's name written straight into the invocation: no String per request.
        inv.key(KeyName::exact(&self.prefix, key))
            .arg(now_us)
            .arg(n)
            .arg(self.grace_ms)
            .arg(a)
            .arg(b)
            .arg(c)
            .arg(u8::from(peek));
        let mut conn = self.conn.clone();
        let reply: Vec<i64> = bounded(self.timeout, inv.invoke_async(&mut conn)).await?;
        parse(active, &reply)
    }

    /// The fallback's decision of `n` for `key`; a `peek` takes nothing from the local
    /// fallback's table (nor inserts the key).
    pub(super) fn fall_back(&self, active: &Active, key: &[u8], n: u32, peek: bool) -> Decision {
        self.fallbacks.fetch_add(1, Ordering::Relaxed);
        let limit = active.plan.capacity();
        match &self.fallback {
            FallbackState::Allow | FallbackState::Error => {
                Decision::allow(limit, 0, 0, 0).with_limit(active.quota.limit())
            }
            FallbackState::Deny => Decision::deny(limit, 0, 0, self.timeout.as_nanos() as u64)
                .with_limit(active.quota.limit()),
            // A cost past the local quota's capacity never fits locally: deny it.
            FallbackState::Local(local) => if peek {
                local.peek_n(key, n)
            } else {
                local.check_n(key, n)
            }
            .unwrap_or_else(|_| Decision::deny(limit, 0, 0, self.timeout.as_nanos() as u64)),
        }
    }
}

/// A script's reply `{allowed, remaining, reset_us, retry_us, delay_us}` as a decision
/// under `active`, or [`Error::BadReply`] for anything else.
pub(super) fn parse(active: &Active, reply: &[i64]) -> Result<Decision, Error> {
    let bad = || Error::BadReply(format!("{reply:?} is not a decision"));
    let &[allowed, remaining, reset, retry, delay] = reply else {
        return Err(bad());
    };
    let limit = active.plan.capacity();
    let remaining = u32::try_from(remaining)
        .ok()
        .filter(|r| *r <= limit)
        .ok_or_else(bad)?;
    let ns = |us: i64| -> Result<u64, Error> {
        u64::try_from(us)
            .ok()
            .filter(|us| *us <= MAX_TIME_US)
            .map(|us| us * 1000)
            .ok_or_else(bad)
    };
    let (reset, retry, delay) = (ns(reset)?, ns(retry)?, ns(delay)?);
    match allowed {
        1 => Ok(Decision::allow(limit, remaining, reset, delay).with_limit(active.quota.limit())),
        0 => Ok(Decision::deny(limit, remaining, reset, retry).with_limit(active.quota.limit())),
        _ => Err(bad()),
    }
}
