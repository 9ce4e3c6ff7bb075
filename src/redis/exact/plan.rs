//! The scripts, and the plan: a quota checked for what the Lua scripts compute exactly
//! (doubles, whole microseconds) and turned into their arguments.

#[allow(clippy::wildcard_imports)]
use super::*;

pub(super) const PRELUDE: &str = include_str!("../scripts/prelude.lua");
pub(super) const GCRA: &str = include_str!("../scripts/gcra.lua");
pub(super) const FIXED_WINDOW: &str = include_str!("../scripts/fixed_window.lua");
pub(super) const SLIDING_WINDOW: &str = include_str!("../scripts/sliding_window.lua");
pub(super) const SLIDING_LOG: &str = include_str!("../scripts/sliding_log.lua");
pub(super) const SINGLE: &str = include_str!("../scripts/single.lua");
pub(super) const MULTI: &str = include_str!("../scripts/multi.lua");
pub(super) const CHARGE: &str = include_str!("../scripts/charge.lua");

/// The largest span (µs) a quota may need: with times up to [`MAX_TIME_US`], every sum
/// the scripts form (at most a time plus three spans: a bucket's debt converted from
/// another interval is capped at two) stays below 2^53, where doubles stop being
/// exact. The conversion's product `(TAT − t)·T_b`, which may exceed 2^53, is never
/// formed: `scripts/gcra.lua` computes `⌈(TAT − t)·T_b / T_a⌉` exactly by quotient
/// and remainder modulo `T_a`.
pub(super) const MAX_SPAN_US: u64 = 1 << 50;

/// The latest time (µs since the clock's zero) the scripts decide at: 2^52 µs, about
/// 142 years (Redis `TIME` since 1970 is about 2^50.6 µs today).
pub(super) const MAX_TIME_US: u64 = 1 << 52;

/// How long the fallback answers alone after a Redis error before Redis is tried
/// again (only with a fallback other than [`Fallback::Error`]).
pub(super) const RETRY_AFTER_ERROR: Duration = Duration::from_millis(100);

/// Extra TTL (ms) on keys written with the caller's clock, whose time runs apart from
/// the Redis clock that expires keys.
pub(super) const CALLER_CLOCK_GRACE_MS: u64 = 1000;

/// The most keys the local fallback tracks at once (a fixed table: further keys take
/// the place of idle ones, then of the entry that has used least).
pub(super) const FALLBACK_MAX_KEYS: usize = 1 << 16;

/// One algorithm's script: the prelude, the algorithm's function (named `name`), and
/// the single-limit driver that runs it.
pub(super) fn script(body: &str, name: &str) -> Script {
    Script::new(&[PRELUDE, body, SINGLE, &format!("return single({name})\n")].concat())
}

/// The compiled scripts, one per algorithm family, hashed once per process.
pub(super) fn scripts() -> &'static [Script; 4] {
    static SCRIPTS: OnceLock<[Script; 4]> = OnceLock::new();
    SCRIPTS.get_or_init(|| {
        [
            script(GCRA, "gcra"),
            script(FIXED_WINDOW, "fixed_window"),
            script(SLIDING_WINDOW, "sliding_window"),
            script(SLIDING_LOG, "sliding_log"),
        ]
    })
}

/// The multi-limit script: the prelude, every algorithm's function, and the
/// all-or-nothing driver (`scripts/multi.lua`), hashed once per process.
pub(super) fn multi_script() -> &'static Script {
    static SCRIPT: OnceLock<Script> = OnceLock::new();
    SCRIPT.get_or_init(|| {
        Script::new(
            &[
                PRELUDE,
                GCRA,
                FIXED_WINDOW,
                SLIDING_WINDOW,
                SLIDING_LOG,
                MULTI,
            ]
            .concat(),
        )
    })
}

fn unrepresentable(reason: String) -> ConfigError {
    ConfigError::Unrepresentable { reason }
}

/// The script's parameters, in whole microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Plan {
    Gcra { t_us: u64, burst: u32, shaper: bool },
    Fixed { p_us: u64, limit: u32 },
    Sliding { p_us: u64, limit: u32 },
    Log { p_us: u64, limit: u32 },
}

impl Plan {
    /// The plan for `quota`, or why the scripts cannot run it: the local engine's
    /// [`ConfigError`], or [`ConfigError::Unrepresentable`] (which the builder reports
    /// as [`Error::Unrepresentable`]).
    pub(super) fn new(algorithm: Algorithm, quota: Quota) -> Result<Self, ConfigError> {
        // The local engine's checks first: the same ConfigError for the same quota.
        Params::new(algorithm, quota)?;
        let period_ns = quota.period().as_nanos();
        if period_ns % 1000 != 0 {
            return Err(unrepresentable(format!(
                "period {:?} is not a whole number of microseconds",
                quota.period()
            )));
        }
        // Params::new bounds the period by the 2^62 ns horizon.
        let p_us = (period_ns / 1000) as u64;
        let limit = quota.limit();
        let too_big = |what: &str, v: u128| {
            unrepresentable(format!(
                "{what} = {v} exceeds 2^50, the largest span the scripts compute exactly"
            ))
        };
        if u128::from(p_us) > u128::from(MAX_SPAN_US) {
            return Err(too_big("period in µs", u128::from(p_us)));
        }
        Ok(match algorithm {
            Algorithm::TokenBucket | Algorithm::LeakyBucket => {
                // More than one request per µs cannot be represented; the interval is
                // rounded up, as the local engine rounds its nanoseconds: never more
                // than the quota.
                if p_us < u64::from(limit) {
                    return Err(unrepresentable(format!(
                        "{limit} per {:?} is more than one request per microsecond",
                        quota.period()
                    )));
                }
                let t_us = p_us.div_ceil(u64::from(limit));
                let burst = quota.burst();
                let tau = u128::from(t_us) * u128::from(burst);
                if tau > u128::from(MAX_SPAN_US) {
                    return Err(too_big("burst × interval in µs", tau));
                }
                Plan::Gcra {
                    t_us,
                    burst,
                    shaper: algorithm == Algorithm::LeakyBucket,
                }
            }
            // The fixed window's script never multiplies the limit by the period (its
            // largest number is the window's end, `(k + 1)·P`): billing quotas such as
            // 20,000 per day or 1,000 per 30 days fit.
            Algorithm::FixedWindow => Plan::Fixed { p_us, limit },
            Algorithm::SlidingWindow => {
                let product = u128::from(limit) * u128::from(p_us);
                if product > u128::from(MAX_SPAN_US) {
                    return Err(too_big("limit × period in µs", product));
                }
                Plan::Sliding { p_us, limit }
            }
            Algorithm::SlidingLog => {
                debug_assert!(limit <= SLIDING_LOG_MAX_LIMIT);
                Plan::Log { p_us, limit }
            }
        })
    }

    pub(super) fn capacity(&self) -> u32 {
        match *self {
            Plan::Gcra { burst, .. } => burst,
            Plan::Fixed { limit, .. } | Plan::Sliding { limit, .. } | Plan::Log { limit, .. } => {
                limit
            }
        }
    }

    /// The algorithm's number in `scripts/multi.lua`.
    pub(super) fn algorithm_id(&self) -> u8 {
        match self {
            Plan::Gcra { .. } => 1,
            Plan::Fixed { .. } => 2,
            Plan::Sliding { .. } => 3,
            Plan::Log { .. } => 4,
        }
    }

    pub(super) fn script(&self) -> &'static Script {
        let s = scripts();
        match self {
            Plan::Gcra { .. } => &s[0],
            Plan::Fixed { .. } => &s[1],
            Plan::Sliding { .. } => &s[2],
            Plan::Log { .. } => &s[3],
        }
    }

    /// ARGV[4..]: the algorithm's parameters.
    pub(super) fn args(&self) -> [u64; 3] {
        match *self {
            Plan::Gcra {
                t_us,
                burst,
                shaper,
            } => [t_us, u64::from(burst), u64::from(shaper)],
            Plan::Fixed { p_us, limit }
            | Plan::Sliding { p_us, limit }
            | Plan::Log { p_us, limit } => [p_us, u64::from(limit), 0],
        }
    }
}
