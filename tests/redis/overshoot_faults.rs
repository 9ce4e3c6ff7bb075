//! The hybrid overshoot bound holds through failed syncs: N = 4 instances in synchronous
//! rounds (each makes up to `m` requests for one key, then each syncs), two of every
//! three rounds' syncs failing (Redis paused past the timeout; the paused scripts still
//! run when the pause ends, as when a reply is lost).
//!
//! With `f` failed syncs in a row, an instance's view misses at most the others'
//! admissions of the `f + 2` rounds since the round of its last successful read, so the
//! excess over the limit is at most `N·m·(f + 2)`: the documented `3·N·r·(I + d)` with
//! `I` widened to the `f + 1` rounds between successful syncs. Afterwards Redis holds
//! exactly the admitted total: no count lost, none counted twice.

use crate::server::RedisServer;
use std::time::Duration;
use tollgate::redis::{redis, HybridRateLimiter};
use tollgate::{Algorithm, ManualClock, Quota};

const N: usize = 4;
const M: u64 = 5;
const LIMIT: u64 = 100;
/// Failed syncs in a row (rounds 3j + 1 and 3j + 2 fail).
const F: u64 = 2;

#[tokio::test]
async fn overshoot_stays_within_the_bound_through_failed_syncs() {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(7_200) + Duration::from_millis(10));
    let mut instances = Vec::new();
    for _ in 0..N {
        let l = HybridRateLimiter::builder(Algorithm::FixedWindow, Quota::per_hour(LIMIT as u32))
            .url(server.url())
            .prefix("faults")
            .timeout(Duration::from_millis(50))
            .sync_interval(Duration::MAX)
            .clock(clock.clone())
            .build()
            .await
            .expect("build");
        instances.push(l);
    }
    let mut admin = server.conn().await;
    let mut total = 0u64;
    let mut failed = 0u64;
    for round in 0..60u64 {
        let mut admitted = 0;
        for l in &instances {
            for _ in 0..M {
                admitted += u64::from(l.check("k").is_allowed());
            }
        }
        total += admitted;
        let fail = round % 3 != 0;
        if fail {
            let _: () = redis::cmd("CLIENT")
                .arg("PAUSE")
                .arg(400)
                .query_async(&mut admin)
                .await
                .expect("pause");
        }
        for l in &instances {
            let r = l.sync().await;
            assert_eq!(r.is_err(), fail, "round {round}: {r:?}");
        }
        if fail {
            failed += N as u64;
            tokio::time::sleep(Duration::from_millis(450)).await;
        }
        if admitted == 0 && !fail {
            break;
        }
    }
    for l in &instances {
        l.sync().await.expect("a sync after the faults");
        assert_eq!(l.stats().sync_errors * N as u64, failed);
    }
    let fields: Vec<u64> = redis::cmd("HVALS")
        .arg("faults:{k}:2")
        .query_async(&mut admin)
        .await
        .expect("hvals");
    let global: u64 = fields.iter().sum();
    println!(
        "hybrid with failed syncs: {N} instances, {M} requests each per round, {F} failed \
         syncs in a row: {total} admitted for a limit of {LIMIT} (bound {})",
        LIMIT + N as u64 * M * (F + 2)
    );
    assert_eq!(global, total, "Redis holds exactly what was admitted");
    assert!(total >= LIMIT, "under-admitted: {total}");
    assert!(
        total - LIMIT <= N as u64 * M * (F + 2),
        "excess {} past N·m·(f + 2) = {}",
        total - LIMIT,
        N as u64 * M * (F + 2)
    );
}
