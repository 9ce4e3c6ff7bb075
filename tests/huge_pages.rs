//! Large keyed tables are advised onto transparent huge pages (Linux), and the advice
//! takes: the kernel backs the table with 2 MiB pages. Elsewhere, or when switched off,
//! nothing changes.

use std::sync::Mutex;
use tollgate::{Algorithm, KeyedRateLimiter, Quota};

/// The tests read process-wide counters and set an environment variable: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// The kernel's transparent huge page mode (`always`, `madvise`, `never`), if it says.
fn thp_mode() -> Option<String> {
    let s = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    let start = s.find('[')? + 1;
    let end = s[start..].find(']')? + start;
    Some(s[start..end].to_owned())
}

/// Kilobytes of this process's anonymous memory on transparent huge pages.
fn anon_huge_kb() -> u64 {
    let s = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("AnonHugePages:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn table(algorithm: Algorithm, keys: usize) -> KeyedRateLimiter<u64> {
    KeyedRateLimiter::<u64>::builder(algorithm, Quota::per_second(10))
        .max_keys(keys)
        .build()
        .unwrap()
}

#[test]
fn a_large_table_lives_on_huge_pages_where_the_kernel_offers_them() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Small tables are left alone everywhere.
    assert!(!table(Algorithm::TokenBucket, 1_000).huge_pages());
    let offered =
        cfg!(target_os = "linux") && matches!(thp_mode().as_deref(), Some("madvise" | "always"));
    let before = anon_huge_kb();
    // 1,000,000 keys: about 24 MiB of slots.
    let big = table(Algorithm::TokenBucket, 1_000_000);
    let after = anon_huge_kb();
    assert_eq!(big.huge_pages(), offered, "THP mode {:?}", thp_mode());
    if offered && thp_mode().as_deref() == Some("madvise") {
        // Without the advice a `madvise`-mode kernel gives this table none; with it, the
        // whole 2 MiB pages inside it (at least 20 of its 24 MiB when memory is not too
        // fragmented to find them; at least half, to leave room for that).
        assert!(
            after >= before + 12 * 1024,
            "AnonHugePages {before} kB -> {after} kB for a {} byte table",
            big.memory_bytes()
        );
    }
    // And it decides as any table does: a burst of 10, then a denial.
    for _ in 0..10 {
        assert!(big.check(&7).is_allowed());
    }
    assert!(!big.check(&7).is_allowed());
    // The sliding log's rings (10 timestamps a key here: about 80 MiB).
    assert_eq!(
        table(Algorithm::SlidingLog, 1_000_000).huge_pages(),
        offered
    );
    // Switched off: ordinary pages, silently.
    std::env::set_var("TOLLGATE_HUGE_PAGES", "0");
    assert!(!table(Algorithm::TokenBucket, 1_000_000).huge_pages());
    std::env::remove_var("TOLLGATE_HUGE_PAGES");
}

#[test]
fn a_large_sliding_logs_slots_live_on_huge_pages_too() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let offered =
        cfg!(target_os = "linux") && matches!(thp_mode().as_deref(), Some("madvise" | "always"));
    if !(offered && thp_mode().as_deref() == Some("madvise")) {
        return;
    }
    // One timestamp a key: about 12 MiB of rings beside about 72 MiB of locked slots
    // (48 bytes each, 1.5 a key). Advising the rings alone would put at most their
    // 12 MiB on huge pages; the slots' advice puts most of the rest there too (at least
    // half of it, to leave room for fragmented memory).
    let before = anon_huge_kb();
    let log = KeyedRateLimiter::<u64>::builder(Algorithm::SlidingLog, Quota::per_second(1))
        .max_keys(1_000_000)
        .build()
        .unwrap();
    let after = anon_huge_kb();
    assert!(log.huge_pages());
    assert!(
        after >= before + 36 * 1024,
        "AnonHugePages {before} kB -> {after} kB for a {} byte table",
        log.memory_bytes()
    );
    assert!(log.check(&7).is_allowed());
    assert!(!log.check(&7).is_allowed());
}
