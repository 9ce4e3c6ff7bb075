//! Charges and give-backs (token budgets: check before, charge after) in one atomic
//! script per call, `scripts/charge.lua`, on the state the decision scripts keep.

#[allow(clippy::wildcard_imports)]
use super::*;

/// The charge script: the prelude, every algorithm's decision function (which reports
/// the state after the call) and `scripts/charge.lua`, hashed once per process.
fn charge_script() -> &'static Script {
    static SCRIPT: OnceLock<Script> = OnceLock::new();
    SCRIPT.get_or_init(|| {
        Script::new(
            &[
                PRELUDE,
                GCRA,
                FIXED_WINDOW,
                SLIDING_WINDOW,
                SLIDING_LOG,
                CHARGE,
            ]
            .concat(),
        )
    })
}

/// What a charge did, as the script or the fallback counted it: made by
/// [`RedisRateLimiter::charge`] and [`charge_owing`](RedisRateLimiter::charge_owing),
/// and by the hybrid mode's [`HybridRateLimiter::charge`](crate::redis::HybridRateLimiter::charge),
/// which counts locally.
///
/// The same numbers as the in-process [`Charge`](crate::charge::Charge): a charge is never
/// denied; it takes its cost whatever is left, and the key then owes what went past its
/// quota ([`owed`](Self::owed)), at most `max_owed` requests (one burst by default):
/// the part past that bound is not counted ([`dropped`](Self::dropped)). It holds no
/// ticket to give back with: Redis keeps no record of which requests a charge took, so
/// a give-back is [`RedisRateLimiter::give_back`], by key.
///
/// # Example
///
/// ```no_run
/// # async fn run(budget: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::Error> {
/// // 1,000 tokens a minute per user: check before the work, charge what it used.
/// if budget.peek_n("user:7", 0).await?.remaining() > 0 {
///     let used = 1_200; // known only once the answer is written
///     let c = budget.charge("user:7", used).await?;
///     println!("fit: {}, owed: {}, dropped: {}", c.fit(), c.owed(), c.dropped());
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RedisCharge {
    decision: Decision,
    taken: u32,
    owed: u32,
    dropped: u32,
    tracked: bool,
}

impl RedisCharge {
    /// A charge's numbers (the hybrid mode counts its own).
    pub(in crate::redis) fn new(
        decision: Decision,
        taken: u32,
        owed: u32,
        dropped: u32,
        tracked: bool,
    ) -> Self {
        RedisCharge {
            decision,
            taken,
            owed,
            dropped,
            tracked,
        }
    }

    /// The key's state after the charge, as a request of cost 1 would be decided then
    /// (nothing is counted for it): whether it would be admitted, what remains, when
    /// the key is whole again, and, while it owes, when the next request fits.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn run(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// let c = limiter.charge("user:7", 12).await?;
    /// if let Some(wait) = c.decision().retry_after() {
    ///     println!("the next request of user:7 fits in {wait:?}");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn decision(&self) -> Decision {
        self.decision
    }

    /// Whether the cost fit in what was left: the key owes nothing after it (and the
    /// charge was counted, see [`tracked`](Self::tracked)).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn run(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// // A fresh key of a limit of 5: 5 fit, one more does not.
    /// assert!(limiter.charge("fresh", 5).await?.fit());
    /// assert!(!limiter.charge("fresh", 1).await?.fit());
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn fit(&self) -> bool {
        self.tracked && self.owed == 0
    }

    /// How many requests the key owes past its quota after the charge (0 when it fit;
    /// `u32::MAX` for a debt of `u32::MAX` requests or more): a bucket's debt in
    /// requests, rounded up; a window's count past the limit (the
    /// sliding window's weighted count, rounded up); the log's active entries past the
    /// limit.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn run(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// // A fresh key of a sliding log of 5 per minute.
    /// assert_eq!(limiter.charge("fresh", 7).await?.owed(), 2);
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn owed(&self) -> u32 {
        self.owed
    }

    /// How many requests of the cost were counted (`taken + dropped` is the cost).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn run(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// // A fresh key of a token bucket of 5 per minute: 5 left, then 10 owed at most.
    /// assert_eq!(limiter.charge_owing("fresh", 20, 10).await?.taken(), 15);
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn taken(&self) -> u32 {
        self.taken
    }

    /// How many requests of the cost were not counted: past the most the key may owe,
    /// or all of them when the fallback answered without counting
    /// ([`tracked`](Self::tracked) is then `false`).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn run(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// // A fresh key of a token bucket of 5 per minute: 5 left, one burst (5) owed at most.
    /// let c = limiter.charge("fresh", 30).await?;
    /// assert_eq!((c.taken(), c.owed(), c.dropped()), (10, 5, 20));
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn dropped(&self) -> u32 {
        self.dropped
    }

    /// Whether the charge was counted: by Redis, or by a [`Fallback::Local`] table that
    /// had room for the key. `false` when a [`Fallback::Allow`] or [`Fallback::Deny`]
    /// answered while Redis was down (nothing was counted anywhere; the decision is the
    /// fallback's), or when the local fallback's table was full.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn run(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// let c = limiter.charge("user:7", 3).await?;
    /// if !c.tracked() {
    ///     eprintln!("redis was down: 3 tokens went uncounted");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn tracked(&self) -> bool {
        self.tracked
    }
}

/// A charge (with its bound) or a give-back, as the script's ARGV[8] and ARGV[9].
#[derive(Clone, Copy)]
enum Mode {
    Charge { max_owed: u32 },
    GiveBack,
}

impl Plan {
    /// A charge's bound for the script (ARGV[9]), from the most the key may owe after it:
    /// a bucket's debt in µs (at most [`MAX_SPAN_US`], about 35 years, which keeps every
    /// sum exact); the most a window's count may reach, as the local engine's count
    /// field bounds it (and, for the sliding window, at most `2^52 / P` µs, so that a
    /// count times the period, and the sum of two such, stays exact: the lower bound
    /// for periods past about half an hour); 0 for the log, which needs none.
    fn charge_bound(&self, max_owed: u32) -> u64 {
        let field = |shift: u32| (1u64 << shift.min(32)) - 1;
        match *self {
            Plan::Gcra { t_us, .. } => {
                (u128::from(max_owed) * u128::from(t_us)).min(u128::from(MAX_SPAN_US)) as u64
            }
            Plan::Fixed { p_us, limit } => {
                let bits = crate::algorithm::fixed_window::count_field_bits(p_us * 1000);
                (u64::from(limit) + u64::from(max_owed)).min(field(bits))
            }
            Plan::Sliding { p_us, limit } => {
                let shift = crate::algorithm::sliding_window::count_field_bits(p_us * 1000);
                (u64::from(limit) + u64::from(max_owed))
                    .min(field(shift))
                    .min((4 * MAX_SPAN_US) / p_us)
            }
            Plan::Log { .. } => 0,
        }
    }
}

impl RedisRateLimiter {
    /// Charges `n` to `key` whatever is left, never denied: for a cost known only once
    /// the work is done (tokens of an answer, bytes served). The key then owes what went
    /// past its quota, at most one burst (the part past that is not counted, see
    /// [`RedisCharge::dropped`]), and its next requests wait until the debt is paid at
    /// the quota's rate (the buckets), or until the charged window or period has passed
    /// (the windows, the log), exactly as the in-process
    /// [`RateLimiter::charge`](crate::limiter::RateLimiter::charge) decides, in one atomic
    /// script on Redis's clock. Check before the work with [`peek_n`](Self::peek_n)
    /// (`peek_n(key, 0)` reports what is left, writing nothing); give back with
    /// [`give_back`](Self::give_back).
    ///
    /// A cost of 0 changes nothing and reports the state. Any `n` up to `u32::MAX` is
    /// accepted (a charge fits no burst: it is not [`Error::InsufficientCapacity`]).
    ///
    /// The key's TTL covers its debt: a bucket's key lives until its debt is paid, a
    /// window's until its window stops counting, a log's until its newest entry leaves
    /// the period.
    ///
    /// # Errors
    ///
    /// The Redis errors of [`check`](Self::check). While Redis cannot be used, a
    /// [`Fallback::Local`] charges its local table (see [`RedisCharge::tracked`]);
    /// `Allow` and `Deny` answer with their decision and count nothing.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use tollgate::redis::RedisRateLimiter;
    /// use tollgate::{Algorithm, Quota};
    ///
    /// # async fn run() -> Result<(), tollgate::redis::Error> {
    /// // 10,000 tokens a minute per user, refilled smoothly.
    /// let tokens = RedisRateLimiter::builder(Algorithm::TokenBucket, Quota::per_minute(10_000))
    ///     .url("redis://127.0.0.1:6379")
    ///     .prefix("tokens")
    ///     .build()
    ///     .await?;
    /// if tokens.peek_n("user:7", 0).await?.remaining() > 0 {
    ///     // ... stream the answer, counting its tokens ...
    ///     let c = tokens.charge("user:7", 12_500).await?;
    ///     assert_eq!((c.fit(), c.owed()), (false, 2_500)); // on a fresh key
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn charge<K: RedisKey + ?Sized>(
        &self,
        key: &K,
        n: u32,
    ) -> Result<RedisCharge, Error> {
        let max_owed = self.burst();
        self.charge_owing(key, n, max_owed).await
    }

    /// [`charge`](Self::charge) with the most the key may owe after it set to
    /// `max_owed` requests past its quota (any `u32`; a bucket owes at most 2^50 µs,
    /// about 35 years, of its rate whatever is asked, a window what the in-process
    /// engine's count field holds).
    ///
    /// # Errors
    ///
    /// As [`charge`](Self::charge).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn run(tokens: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// // 1,000 a minute: a long answer of 5,000 owes 4,000, four minutes of the rate.
    /// let c = tokens.charge_owing("user:7", 5_000, 10_000).await?;
    /// assert_eq!((c.owed(), c.dropped()), (4_000, 0)); // on a fresh key
    /// # Ok(())
    /// # }
    /// ```
    pub async fn charge_owing<K: RedisKey + ?Sized>(
        &self,
        key: &K,
        n: u32,
        max_owed: u32,
    ) -> Result<RedisCharge, Error> {
        let mut buf = [0; KEY_BUF];
        let key = key.key_bytes(&mut buf);
        let reply = self
            .inner
            .account(key, n, Mode::Charge { max_owed })
            .await?;
        Ok(match reply {
            Accounted::Redis(d, [taken, owed, dropped, _]) => RedisCharge {
                decision: d,
                taken,
                owed,
                dropped,
                tracked: true,
            },
            Accounted::Local(local) => {
                let c = local.charge_owing(key, n, max_owed);
                RedisCharge {
                    decision: c.decision(),
                    taken: c.taken(),
                    owed: c.owed(),
                    dropped: c.dropped(),
                    tracked: c.tracked(),
                }
            }
            Accounted::Policy(d) => RedisCharge {
                decision: d,
                taken: 0,
                owed: 0,
                dropped: n,
                tracked: false,
            },
        })
    }

    /// Gives `n` back to `key`, never below an empty state; returns how many requests
    /// were given back. For a caller that keeps no record of what it charged (a
    /// stateless service told to give hits back), with the in-process
    /// [`RateLimiter::give_back`](crate::limiter::RateLimiter::give_back)'s rules: a bucket gives
    /// back `min(n, ⌈(TAT − now)/T⌉)` requests of its debt (never below a full bucket);
    /// a window from its counts that still weigh, the current window's first (the
    /// fixed window's while it lasts; the sliding window's previous one next); a log
    /// from its newest entries still in the period, and nothing while all of its newest
    /// `limit` entries are in the period (it cannot tell an overdraft it could not log
    /// from its admissions) or while its newest entry is later than the reading. A key
    /// Redis does not hold gives nothing back. A give-back of 0 changes nothing.
    ///
    /// # Errors
    ///
    /// The Redis errors of [`check`](Self::check). While Redis cannot be used, a
    /// [`Fallback::Local`] gives back to its local table; `Allow` and `Deny` give back
    /// nothing (0).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn run(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// // A sliding window of 5 per minute on a fresh key.
    /// assert!(limiter.check_n("user:7", 5).await?.is_allowed());
    /// assert_eq!(limiter.give_back("user:7", 7).await?, 5); // never below empty
    /// assert_eq!(limiter.peek_n("user:7", 0).await?.remaining(), 5);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn give_back<K: RedisKey + ?Sized>(&self, key: &K, n: u32) -> Result<u32, Error> {
        let mut buf = [0; KEY_BUF];
        let key = key.key_bytes(&mut buf);
        Ok(match self.inner.account(key, n, Mode::GiveBack).await? {
            Accounted::Redis(_, [.., given]) => given,
            Accounted::Local(local) => local.give_back(key, n),
            Accounted::Policy(_) => 0,
        })
    }
}

/// Who counted a charge or a give-back: Redis (the decision after it, and `taken`,
/// `owed`, `dropped`, `given`), the local fallback (to be asked), or a fallback policy
/// that counts nothing (its decision).
enum Accounted<'a> {
    Redis(Decision, [u32; 4]),
    Local(&'a KeyedRateLimiter<[u8], FallbackClock>),
    Policy(Decision),
}

impl Inner {
    /// One charge or give-back script call for `key`, or the fallback while Redis
    /// cannot be used (as [`RedisRateLimiter::check_n`] falls back).
    async fn account(&self, key: &[u8], n: u32, mode: Mode) -> Result<Accounted<'_>, Error> {
        let active = self.active.load();
        self.under_policy(self.eval_account(&active, key, n, mode), || {
            self.account_locally(&active)
        })
        .await
    }

    fn account_locally(&self, active: &Active) -> Accounted<'_> {
        self.fallbacks.fetch_add(1, Ordering::Relaxed);
        let limit = active.plan.capacity();
        match &self.fallback {
            FallbackState::Local(local) => Accounted::Local(local.as_ref()),
            FallbackState::Allow | FallbackState::Error => {
                Accounted::Policy(Decision::allow(limit, 0, 0, 0).with_limit(active.quota.limit()))
            }
            FallbackState::Deny => Accounted::Policy(
                Decision::deny(limit, 0, 0, self.timeout.as_nanos() as u64)
                    .with_limit(active.quota.limit()),
            ),
        }
    }

    async fn eval_account(
        &self,
        active: &Active,
        key: &[u8],
        n: u32,
        mode: Mode,
    ) -> Result<Accounted<'_>, Error> {
        let now_us = self.now_us()?;
        let [a, b, c] = active.plan.args();
        let (op, bound) = match mode {
            Mode::Charge { max_owed } => (1, active.plan.charge_bound(max_owed)),
            Mode::GiveBack => (2, 0),
        };
        let mut inv = charge_script().prepare_invoke();
        inv.key(KeyName::exact(&self.prefix, key))
            .arg(now_us)
            .arg(n)
            .arg(self.grace_ms)
            .arg(a)
            .arg(b)
            .arg(c)
            .arg(active.plan.algorithm_id())
            .arg(op)
            .arg(bound);
        let mut conn = self.conn.clone();
        let reply: Vec<i64> = bounded(self.timeout, inv.invoke_async(&mut conn)).await?;
        parse_accounted(active, &reply, n)
    }
}

/// The charge script's reply: a decision, then `taken, owed, dropped, given` (each at
/// most `n`, but `owed`, at most `u32::MAX`: the script saturates it, as the engine
/// does, so a larger value is not a reply of ours; `taken + dropped` is `n` for a
/// charge).
fn parse_accounted<'a>(active: &Active, reply: &[i64], n: u32) -> Result<Accounted<'a>, Error> {
    let bad = || Error::BadReply(format!("{reply:?} is not a charge's reply"));
    if reply.len() != 9 {
        return Err(bad());
    }
    let (decision, counts) = reply.split_at(5);
    let d = parse(active, decision)?;
    let counts: [u32; 4] = match counts {
        &[taken, owed, dropped, given] => {
            let c = [taken, owed, dropped, given].map(|v| u32::try_from(v).ok());
            match c {
                [Some(t), Some(o), Some(dr), Some(g)]
                    if t <= n
                        && g <= n
                        && (u64::from(t) + u64::from(dr) == u64::from(n) || (t, dr) == (0, 0)) =>
                {
                    [t, o, dr, g]
                }
                _ => return Err(bad()),
            }
        }
        _ => return Err(bad()),
    };
    Ok(Accounted::Redis(d, counts))
}
