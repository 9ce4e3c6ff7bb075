//! [`check_all`]: several exact limits decided by one script, all or nothing.

#[allow(clippy::wildcard_imports)]
use super::*;
use crate::{keyed::KeyLimit, multi::Limit, multi::MultiDecision};

/// Decides one request of cost `n` against several exact limits at once (per user and
/// global, per second and per day), all or nothing, in one atomic script: one
/// `EVALSHA` round trip decides every limit on its state in Redis and writes only if
/// every limit admits, so a denial by any limit consumes nothing from the others. The
/// [`MultiDecision`] holds one [`Decision`] per limit, in order (a limit that would have
/// admitted a denied request reports `is_allowed()` there, but nothing was taken).
///
/// Each limit is `(limiter, key)`, the keys all of one [`RedisKey`] type (`&str` most
/// often), written into the command without building a `String` for their names: any
/// algorithms, quotas and clocks, but one Redis
/// deployment (limiters built on the same URL, or on one connection with
/// [`connection_of`](RedisRateLimiterBuilder::connection_of)); the call goes through
/// the first limiter's connection, bounded by the shortest of their timeouts. On Redis
/// Cluster every key of one call must hash to one slot. A limiter's Redis key is
/// `prefix:{key}`, hashed by `key`: the same key in every limit is one slot by itself;
/// different keys are one slot when they start with the same `{tag}` (`"{user:42}"`
/// and `"{user:42}:day"`; the prefix may not contain braces). A limiter whose quota is
/// changed by [`set_quota`](RedisRateLimiter::set_quota) meanwhile takes part with the
/// quota it had when the call started.
///
/// # Fallback
///
/// When Redis cannot decide (down, slow, a bad reply) and **every** limiter has a
/// [`Fallback`] other than `Error`, each limit is decided by its own fallback, again all
/// or nothing: `Allow` admits, `Deny` denies, and the `Local` tables decide together
/// (consumed only if every limit admits; when a `Deny` fallback denies, nothing is
/// consumed and the local limits report a peek). Each limiter then counts a fallback,
/// and answers alone for 100 ms as after its own failed call. If **any** limiter's
/// fallback is `Error`, the error is returned.
///
/// # Errors
///
/// Before anything is sent: [`Error::InsufficientCapacity`] when `n` exceeds some
/// limit's capacity (the smallest such); [`Error::MixedDeployments`];
/// [`Error::DuplicateKey`] when one Redis key is given twice; [`Error::CrossSlot`] on
/// Redis Cluster; [`Error::Unrepresentable`] for a caller's clock past 2^52 µs. Then the
/// Redis errors of [`RedisRateLimiter::check`] (see Fallback above), and
/// [`Error::ForeignState`].
///
/// # Example
///
/// ```no_run
/// use tollgate::redis::{check_all, RedisRateLimiter};
/// use tollgate::{Algorithm, Quota};
///
/// # async fn run() -> Result<(), tollgate::redis::Error> {
/// let url = "redis://127.0.0.1:6379";
/// let per_second = RedisRateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(10))
///     .url(url)
///     .prefix("rps")
///     .build()
///     .await?;
/// let per_day = RedisRateLimiter::builder(Algorithm::FixedWindow, Quota::per_hour(24 * 1000))
///     .url(url)
///     .prefix("daily")
///     .build()
///     .await?;
/// // Keys starting with one {tag}: one slot on Redis Cluster too.
/// let d = check_all(&[(&per_second, "{user:42}"), (&per_day, "{user:42}:day")], 1).await?;
/// if !d.is_allowed() {
///     println!("retry after {:?}; denied by {:?}", d.retry_after(), d.denied().collect::<Vec<_>>());
/// }
/// # Ok(())
/// # }
/// ```
pub async fn check_all<K: RedisKey + ?Sized>(
    limits: &[(&RedisRateLimiter, &K)],
    n: u32,
) -> Result<MultiDecision, Error> {
    let Some(&(first, _)) = limits.first() else {
        return Ok(MultiDecision::new(Vec::new()));
    };
    let actives: Vec<Active> = limits.iter().map(|(l, _)| l.inner.active.load()).collect();
    if let Some(most) = actives
        .iter()
        .map(|a| a.plan.capacity())
        .filter(|&c| n > c)
        .min()
    {
        return Err(Error::InsufficientCapacity(InsufficientCapacity {
            requested: n,
            capacity: most,
        }));
    }
    let deployment = &first.inner.deployment;
    if let Some(index) = limits
        .iter()
        .position(|(l, _)| l.inner.deployment != *deployment)
    {
        return Err(Error::MixedDeployments {
            index,
            first: deployment.to_string(),
            other: limits[index].0.inner.deployment.to_string(),
        });
    }
    // Each key's bytes (formatted into its buffer if it needs formatting), and its
    // Redis key name, written later straight into the script call.
    let mut bufs = vec![[0u8; KEY_BUF]; limits.len()];
    let bytes: Vec<&[u8]> = limits
        .iter()
        .zip(bufs.iter_mut())
        .map(|((_, k), buf)| k.key_bytes(buf))
        .collect();
    let names: Vec<KeyName<'_>> = limits
        .iter()
        .zip(&bytes)
        .map(|((l, _), k)| KeyName::exact(&l.inner.prefix, k))
        .collect();
    let same = |i: usize, j: usize| {
        limits[i].0.inner.prefix == limits[j].0.inner.prefix && bytes[i] == bytes[j]
    };
    if let Some(i) = (1..limits.len()).find(|&i| (0..i).any(|j| same(i, j))) {
        return Err(Error::DuplicateKey(names[i].to_lossy_string()));
    }
    if first.inner.conn.is_cluster() {
        let slot = names[0].slot();
        if names.iter().any(|k| k.slot() != slot) {
            let slots = names
                .iter()
                .map(|k| (k.to_lossy_string(), k.slot()))
                .collect();
            return Err(Error::CrossSlot { slots });
        }
    }
    let every_fallback = limits
        .iter()
        .all(|(l, _)| !matches!(l.inner.fallback, FallbackState::Error));
    if every_fallback && limits.iter().any(|(l, _)| l.inner.is_down()) {
        return Ok(fall_back_all(limits, &bytes, &actives, n));
    }
    match eval_all(limits, &actives, &names, n).await {
        Ok(d) => {
            for (l, _) in limits {
                l.inner.decisions.fetch_add(1, Ordering::Relaxed);
            }
            Ok(d)
        }
        Err(e) if !e.is_redis_unavailable() => Err(e),
        Err(e) => {
            for (l, _) in limits {
                l.inner.errors.fetch_add(1, Ordering::Relaxed);
            }
            if !every_fallback {
                return Err(e);
            }
            for (l, _) in limits {
                l.inner.mark_down();
            }
            Ok(fall_back_all(limits, &bytes, &actives, n))
        }
    }
}

/// The one script call: every limit's key, and six arguments per limit (see
/// `scripts/multi.lua`).
async fn eval_all<K: ?Sized>(
    limits: &[(&RedisRateLimiter, &K)],
    actives: &[Active],
    names: &[KeyName<'_>],
    n: u32,
) -> Result<MultiDecision, Error> {
    let mut inv = multi_script().prepare_invoke();
    for &k in names {
        inv.key(k);
    }
    inv.arg(n);
    for ((l, _), a) in limits.iter().zip(actives) {
        let [x, y, z] = a.plan.args();
        inv.arg(a.plan.algorithm_id())
            .arg(l.inner.now_us()?)
            .arg(l.inner.grace_ms)
            .arg(x)
            .arg(y)
            .arg(z);
    }
    let timeout = limits
        .iter()
        .map(|(l, _)| l.inner.timeout)
        .min()
        .unwrap_or(DEFAULT_TIMEOUT);
    let mut conn = limits[0].0.inner.conn.clone();
    let reply: Vec<i64> = bounded(timeout, inv.invoke_async(&mut conn)).await?;
    if reply.len() != 5 * limits.len() {
        return Err(Error::BadReply(format!(
            "{} numbers for {} limits",
            reply.len(),
            limits.len()
        )));
    }
    let decisions = reply
        .chunks_exact(5)
        .zip(actives)
        .map(|(r, a)| parse(a, r))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(MultiDecision::new(decisions))
}

/// Every limit decided by its own fallback, all or nothing (see [`check_all`]).
fn fall_back_all<K: ?Sized>(
    limits: &[(&RedisRateLimiter, &K)],
    keys: &[&[u8]],
    actives: &[Active],
    n: u32,
) -> MultiDecision {
    let deny = |l: &Inner, a: &Active| {
        Decision::deny(a.plan.capacity(), 0, 0, l.timeout.as_nanos() as u64)
            .with_limit(a.quota.limit())
    };
    let any_deny = limits
        .iter()
        .any(|(l, _)| matches!(l.inner.fallback, FallbackState::Deny));
    let mut decisions = Vec::with_capacity(limits.len());
    // The local limits, decided together below unless a Deny fallback denies anyway.
    let mut local: Vec<(usize, KeyLimit<'_, [u8], FallbackClock>)> = Vec::new();
    for (i, (((l, _), &key), a)) in limits.iter().zip(keys).zip(actives).enumerate() {
        l.inner.fallbacks.fetch_add(1, Ordering::Relaxed);
        decisions.push(match &l.inner.fallback {
            FallbackState::Allow | FallbackState::Error => {
                Decision::allow(a.plan.capacity(), 0, 0, 0).with_limit(a.quota.limit())
            }
            FallbackState::Deny => deny(&l.inner, a),
            FallbackState::Local(table) if any_deny => table.peek(key),
            FallbackState::Local(table) => {
                local.push((i, table.limit(key)));
                deny(&l.inner, a)
            }
        });
    }
    if !local.is_empty() {
        let refs: Vec<&dyn Limit> = local.iter().map(|(_, l)| l as &dyn Limit).collect();
        // A cost past some local quota's capacity never fits locally: those stay denied
        // (and nothing is consumed).
        if let Ok(outcome) = crate::multi::check_all(&refs, n) {
            for ((i, _), d) in local.iter().zip(outcome.decisions()) {
                decisions[*i] = *d;
            }
        }
    }
    MultiDecision::new(decisions)
}
