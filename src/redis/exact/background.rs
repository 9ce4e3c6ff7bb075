//! Charges that nobody waits for (the HTTP layer's budget policies charge at the end of
//! a response body, which cannot await): spawned on the runtime, and counted when
//! nothing counted them.

#[allow(clippy::wildcard_imports)]
use super::*;

impl RedisRateLimiter {
    /// Charges `n` to `key` (at most `max_owed` owed; one burst when `None`) on a task of
    /// its own on the current tokio runtime, without waiting for it. A charge that
    /// nothing counts (the call failed, a fallback answered without counting, no
    /// runtime to run it on) is counted in [`RedisStats::background_errors`], never
    /// dropped silently. A cost of 0 does nothing.
    #[cfg_attr(not(feature = "tower"), allow(dead_code))]
    pub(crate) fn charge_in_background(&self, key: String, n: u32, max_owed: Option<u32>) {
        if n == 0 {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.inner.background_errors.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let limiter = self.clone();
        runtime.spawn(async move {
            let charged = match max_owed {
                Some(max) => limiter.charge_owing(&key, n, max).await,
                None => limiter.charge(&key, n).await,
            };
            if !charged.is_ok_and(|c| c.tracked()) {
                limiter
                    .inner
                    .background_errors
                    .fetch_add(1, Ordering::Relaxed);
            }
        });
    }
}
