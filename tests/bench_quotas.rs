//! Every quota the benchmarks and the shootout build is one the builder accepts: the
//! shootout is the README's first command, and a bound tightened in the engine (a window's
//! layout) must not turn it into a panic that only a release run would show.

#[path = "../benches/support/peers.rs"]
mod peers;

use peers::{tollgate_quota, Rate};
use tollgate::{Algorithm, KeyedRateLimiter, RateLimiter};

#[test]
fn every_benchmark_quota_builds() {
    for rate in [Rate::OPEN, Rate::SHUT] {
        for algorithm in Algorithm::ALL {
            let quota = tollgate_quota(algorithm, rate);
            RateLimiter::builder(algorithm, quota)
                .build()
                .unwrap_or_else(|e| panic!("{algorithm:?} {quota:?}: {e}"));
            KeyedRateLimiter::<u64>::builder(algorithm, quota)
                .max_keys(1_000)
                .build()
                .unwrap_or_else(|e| panic!("keyed {algorithm:?} {quota:?}: {e}"));
        }
    }
}
