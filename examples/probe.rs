//! One limiter on one workload in a loop: the shootout's peers and workloads, one at a
//! time, for a profiler or for quick best-of-N timings.
//!
//! ```sh
//! cargo run --release --example probe -- LIMITER WORKLOAD N [--time]
//! ```
//!
//! - `LIMITER`: `tollgate` (keyed token bucket, `OnFull::Evict`), `tollgate-deny`,
//!   `tollgate-allow`, `tollgate-nostats` (`stats(false)`), `tollgate-coarse` (on the
//!   opt-in `CoarseClock`, refreshed every millisecond), `tollgate-changed` (the same
//!   quota after `set_quota` went to another rate and back: a table of several rates,
//!   whose hits check their rate class and whose inserts take the registered slow
//!   path), `tollgate-charge` (the keyed token bucket, each decision a `charge` of 1
//!   instead of a check: what a charge costs beside a check), `fixed-window`,
//!   `sliding-window`, `sliding-log` (the shootout's quotas), `governor`, `dashmap`,
//!   `floor16`.
//! - `WORKLOAD`: `hot`, `1k`, `1M` (every key inserted first, then N decisions on a
//!   random stream over them, as the shootout's), `zipf` (criterion's `keyed/1M zipf
//!   s=1` stream: 2^21 draws by Zipf's law over 1,000,000 keys, inserted by one pass
//!   over it, then N decisions walking it), `fill` (N never-seen keys into a
//!   table built for 1,000,000), `flood` (400,000 keys into a table built for 100,000
//!   at one request per hour, so its windows are full of live keys, then N never-seen
//!   keys).
//! - Without `--time` the N decisions run once: under `valgrind --tool=callgrind`,
//!   the difference of two runs' instruction totals divided by the difference of their
//!   N is the cost of one decision, set-up excluded. With `--time`: the best of 9 runs
//!   of the N decisions, in ns per decision (hits only; the new-key workloads run once).
//!
//! Tables are built with a fixed hash seed, so that runs place keys alike.

#[path = "../benches/support/peers.rs"]
mod peers;
#[path = "../benches/support/workload.rs"]
mod workload;

use peers::*;
use std::hint::black_box;
use std::time::Instant;
use tollgate::{Algorithm, CoarseClock, KeyedRateLimiter, OnFull};

/// The keyed limiters a workload needs, built for `keys` at `rate`.
fn build(name: &str, rate: Rate, keys: usize) -> Option<Box<dyn Limiter>> {
    let tollgate = |algorithm: Algorithm, on_full: OnFull, stats: bool| -> Box<dyn Limiter> {
        Box::new(TollgateKeyed(
            KeyedRateLimiter::<u64>::builder(algorithm, tollgate_quota(algorithm, rate))
                .max_keys(keys)
                .on_full(on_full)
                .stats(stats)
                .hash_seed(42)
                .build()
                .expect("probe quota is valid"),
            algorithm_name(algorithm),
        ))
    };
    Some(match name {
        "tollgate" => tollgate(Algorithm::TokenBucket, OnFull::Evict, true),
        "tollgate-deny" => tollgate(Algorithm::TokenBucket, OnFull::Deny, true),
        "tollgate-allow" => tollgate(Algorithm::TokenBucket, OnFull::Allow, true),
        "tollgate-nostats" => tollgate(Algorithm::TokenBucket, OnFull::Evict, false),
        // The same keyed token bucket on the opt-in coarse clock (1 ms refreshes).
        "tollgate-coarse" => Box::new(TollgateKeyed(
            KeyedRateLimiter::<u64, _>::builder(
                Algorithm::TokenBucket,
                tollgate_quota(Algorithm::TokenBucket, rate),
            )
            .max_keys(keys)
            .hash_seed(42)
            .clock(CoarseClock::new(std::time::Duration::from_millis(1)).expect("coarse clock"))
            .build()
            .expect("probe quota is valid"),
            "coarse clock",
        )),
        "tollgate-changed" => {
            let q = tollgate_quota(Algorithm::TokenBucket, rate);
            let l = KeyedRateLimiter::<u64>::builder(Algorithm::TokenBucket, q)
                .max_keys(keys)
                .hash_seed(42)
                .build()
                .expect("probe quota is valid");
            let other = tollgate::Quota::new(q.limit(), 2 * q.period());
            l.set_quota(other).expect("another rate");
            l.set_quota(q).expect("the probe's rate again");
            Box::new(TollgateKeyed(l, "token bucket, rate changed"))
        }
        "tollgate-charge" => Box::new(Charging(
            KeyedRateLimiter::<u64>::builder(
                Algorithm::TokenBucket,
                tollgate_quota(Algorithm::TokenBucket, rate),
            )
            .max_keys(keys)
            .hash_seed(42)
            .build()
            .expect("probe quota is valid"),
        )),
        "fixed-window" => tollgate(Algorithm::FixedWindow, OnFull::Evict, true),
        "sliding-window" => tollgate(Algorithm::SlidingWindow, OnFull::Evict, true),
        "sliding-log" => tollgate(Algorithm::SlidingLog, OnFull::Evict, true),
        "governor" => Box::new(GovernorKeyed::new(rate)),
        "dashmap" => Box::new(DashMapGcra::new(rate)),
        "floor16" => Box::new(Floor128::new(rate, keys)),
        _ => return None,
    })
}

/// A keyed token bucket whose every decision is a charge of 1 (issue 30's cost).
struct Charging(KeyedRateLimiter<u64>);

impl Limiter for Charging {
    fn name(&self) -> String {
        "tollgate charge".into()
    }
    #[inline]
    fn check(&self, key: u64) -> bool {
        self.0.charge(&key, 1).fit()
    }
}

/// Decides every key of `keys` once.
fn each(limiter: &dyn Limiter, keys: &[u64]) {
    for &k in keys {
        black_box(limiter.check(black_box(k)));
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: probe LIMITER hot|1k|1M|zipf|fill|flood N [--time]";
    let (Some(name), Some(workload), Some(Ok(n))) = (
        args.get(1),
        args.get(2),
        args.get(3).map(|n| n.parse::<usize>()),
    ) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let time = args.get(4).is_some_and(|a| a == "--time");
    let (rate, keys) = match workload.as_str() {
        "hot" => (Rate::OPEN, 1),
        "1k" => (Rate::OPEN, 1_000),
        "1M" | "zipf" => (Rate::OPEN, 1_000_000),
        "fill" => (Rate::OPEN, 1_000_000),
        "flood" => (Rate::SHUT, 100_000),
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    let Some(limiter) = build(name, rate, keys.max(1_000)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let limiter = &*limiter;
    match workload.as_str() {
        "fill" | "flood" => {
            if workload == "flood" {
                // 100,000 live keys, then 300,000 more to fill every window.
                each(limiter, &workload::fresh_keys(100_000, 0, 8));
                each(limiter, &workload::fresh_keys(300_000, 1 << 50, 10));
            }
            let fresh = workload::fresh_keys(n, 1 << 40, 9);
            let started = Instant::now();
            each(limiter, &fresh);
            if time {
                println!("{:.2} ns", started.elapsed().as_nanos() as f64 / n as f64);
            }
        }
        _ => {
            let stream: Vec<u64> = if workload == "zipf" {
                // Criterion's `keyed/1M zipf s=1` stream (2^21 draws), its keys inserted
                // by one pass over it.
                let stream = workload::Workload::zipf("1M zipf", keys, 1.0, 3).keys;
                each(limiter, &stream);
                stream
            } else {
                let all = workload::fresh_keys(keys, 0, 7);
                each(limiter, &all);
                // A random stream over the keys, 2^20 long (as the shootout's).
                let mut rng = fastrand::Rng::with_seed(5);
                (0..1 << 20).map(|_| all[rng.usize(..all.len())]).collect()
            };
            let mask = stream.len() - 1;
            let run = || {
                for i in 0..n {
                    black_box(limiter.check(black_box(stream[i & mask])));
                }
            };
            if !time {
                run();
                return;
            }
            let mut best = f64::MAX;
            for _ in 0..9 {
                let started = Instant::now();
                run();
                best = best.min(started.elapsed().as_nanos() as f64 / n as f64);
            }
            println!("{best:.2} ns");
        }
    }
}
