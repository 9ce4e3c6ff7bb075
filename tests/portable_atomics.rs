//! The keyed table decides alike with and without its inline 16-byte atomics.
//!
//! On x86-64 CPUs with `cmpxchg16b` the table's hit path uses inline assembly
//! (`src/machine/`); elsewhere every decision takes the slow path through
//! portable-atomic. Which one runs is chosen once per process, so this test runs the
//! same deterministic workload (every verb, every algorithm, a full table under each
//! `OnFull`) in three child processes of its own binary, under `TOLLGATE_ATOMICS` unset,
//! `cmpxchg16b` (the load by `lock cmpxchg16b` where `vmovdqa` would run) and `portable`,
//! and compares every decision they printed. `scripts/test targets` runs it again with
//! portable-atomic built lock-based (`--cfg portable_atomic_no_outline_atomics`).

use std::process::Command;
use std::time::Duration;
use tollgate::{Algorithm, KeyedRateLimiter, ManualClock, OnFull, Quota};

const NAME: &str = "without_the_inline_atomics_every_verb_decides_alike";
const CHILD: &str = "TOLLGATE_TEST_PORTABLE_CHILD";

/// Every decision of the workload, one line each.
fn workload() -> Vec<String> {
    let mut out = Vec::new();
    let algorithms = [
        Algorithm::TokenBucket,
        Algorithm::LeakyBucket,
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
        Algorithm::SlidingLog,
    ];
    for algorithm in algorithms {
        for on_full in [OnFull::Evict, OnFull::Deny, OnFull::Allow] {
            let mut rng = fastrand::Rng::with_seed(7);
            let clock = ManualClock::new();
            let quota = Quota::new(5, Duration::from_millis(100));
            let keyed = KeyedRateLimiter::<u64, _>::builder(algorithm, quota)
                .max_keys(16)
                .on_full(on_full)
                .tiers([Quota::new(9, Duration::from_millis(100))])
                .clock(clock.clone())
                .hash_seed(3)
                .build()
                .unwrap();
            for op in 0..3_000 {
                // Sixty keys into a table of sixteen: claims, evictions, refusals.
                let key = rng.u64(0..60);
                let line = match rng.u8(0..12) {
                    0 => {
                        clock.advance(Duration::from_nanos(rng.u64(0..40_000_000)));
                        continue;
                    }
                    1 => format!("{:?}", keyed.peek(&key)),
                    2 => format!("{:?}", keyed.check_n(&key, rng.u32(0..7))),
                    3 => match keyed.reserve(&key, rng.u32(1..4), Duration::from_millis(50)) {
                        Ok(r) => {
                            let wait = r.wait_time();
                            if rng.bool() {
                                r.cancel();
                            }
                            format!("reserved {wait:?}")
                        }
                        Err(e) => format!("{e:?}"),
                    },
                    4 => format!("{:?}", keyed.charge(&key, rng.u32(0..8)).decision()),
                    5 => format!("gave {}", keyed.give_back(&key, rng.u32(0..3))),
                    6 => format!("reset {}", keyed.reset(&key)),
                    7 => format!("{:?}", keyed.tier(1).unwrap().check(&key)),
                    8 if op % 500 == 8 => {
                        let limit = rng.u32(3..9);
                        format!(
                            "{:?}",
                            keyed.set_quota(Quota::new(limit, Duration::from_millis(100)))
                        )
                    }
                    _ => format!("{:?}", keyed.check(&key)),
                };
                out.push(format!("{algorithm:?} {on_full:?} {op} {key}: {line}"));
            }
            out.push(format!(
                "{algorithm:?} {on_full:?} stats {:?}",
                keyed.stats()
            ));
        }
    }
    out
}

fn child(atomics: Option<&str>) -> Vec<String> {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", NAME, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1");
    match atomics {
        Some(a) => cmd.env("TOLLGATE_ATOMICS", a),
        None => cmd.env_remove("TOLLGATE_ATOMICS"),
    };
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "child failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("DECISION ").map(str::to_owned))
        .collect()
}

#[test]
fn without_the_inline_atomics_every_verb_decides_alike() {
    if std::env::var_os(CHILD).is_some() {
        for line in workload() {
            println!("DECISION {line}");
        }
        return;
    }
    let inline = child(None);
    assert!(inline.len() > 40_000, "the workload ran: {}", inline.len());
    for atomics in ["cmpxchg16b", "portable"] {
        let other = child(Some(atomics));
        assert_eq!(inline.len(), other.len(), "{atomics}");
        for (a, b) in inline.iter().zip(&other) {
            assert_eq!(a, b, "inline atomics vs {atomics}");
        }
    }
}
