//! The shootout: tollgate's keyed limiter, all five algorithms, against governor, a
//! `Mutex<HashMap>` token bucket, dashmap with atomic GCRA words, and the floor (one
//! hash, one probe, one CAS), on one hot key, 1,000 and 1,000,000 uniform keys, at one
//! thread and at all cores, measured side by side in this one run.
//!
//! `cargo run --release --example shootout` (about a minute on 2 cores, plus the first
//! build). Prints progress on stderr and one table on stdout: median ns per decision per
//! thread, millions of decisions per second over all threads, time relative to governor
//! keyed (below 1.00 is faster), time relative to the two floors, and memory per key
//! (tollgate: `memory_bytes()` / max_keys; the peers: growth of resident memory while
//! they took in every key), then a legend and the total time. `SHOOTOUT=new-keys` runs
//! only the first-fill and flood workloads.

#[path = "../benches/support/harness.rs"]
mod harness;
#[path = "../benches/support/peers.rs"]
mod peers;
#[path = "../benches/support/workload.rs"]
mod workload;

use harness::{calibrate, fmt_ns, median_ns, one_shot_median_ns, pool, populate};
use peers::*;
use std::io::Write;
use std::time::{Duration, Instant};
use tollgate::{Algorithm, KeyedRateLimiter, OnFull};
use workload::{fresh_keys, Workload};

/// How long one timed run lasts; three runs make a median.
const RUN: Duration = Duration::from_millis(60);
const SAMPLES: usize = 3;

struct Row {
    workload: &'static str,
    threads: usize,
    limiter: String,
    ns: f64,
    bytes_per_key: Option<f64>,
}

struct Bench<'a> {
    pools: Vec<(usize, rayon::ThreadPool)>,
    rows: Vec<Row>,
    done: usize,
    total: usize,
    started: Instant,
    workload: &'a Workload,
}

impl Bench<'_> {
    fn measure<L: Limiter>(&mut self, limiter: L) {
        populate(&limiter, self.workload);
        let bytes_per_key = match limiter.memory_bytes() {
            Some(b) => Some(b as f64 / self.workload.distinct as f64),
            // Peers report nothing: measure their resident growth in a fresh process
            // (in this one, freed memory of earlier peers would be reused unseen).
            None if self.workload.distinct >= 1000 => rss_per_key(&limiter.name(), self.workload),
            None => None,
        };
        for (threads, pool) in &self.pools {
            let iters = calibrate(pool, &limiter, self.workload, RUN);
            let ns = median_ns(pool, &limiter, self.workload, iters, SAMPLES);
            self.done += 1;
            eprintln!(
                "[{:>2}/{}] {:>5.1}s  {:<11} {}t  {:<32} {:>10}",
                self.done,
                self.total,
                self.started.elapsed().as_secs_f64(),
                self.workload.name,
                threads,
                limiter.name(),
                fmt_ns(ns)
            );
            self.rows.push(Row {
                workload: self.workload.name,
                threads: *threads,
                limiter: limiter.name(),
                ns,
                bytes_per_key,
            });
        }
    }
}

/// Runs this program again as `--rss NAME KEYS` and reads back bytes per key.
fn rss_per_key(name: &str, w: &Workload) -> Option<f64> {
    let exe = std::env::current_exe().ok()?;
    let out = std::process::Command::new(exe)
        .args(["--rss", name, &w.distinct.to_string()])
        .output()
        .ok()?;
    String::from_utf8(out.stdout).ok()?.trim().parse().ok()
}

/// Child mode: build the peer called `name`, feed it every key of a `keys`-key uniform
/// stream, print the growth of resident memory per key.
fn rss_child(name: &str, keys: usize) {
    let w = Workload::uniform("rss", keys, 2);
    let rate = Rate::OPEN;
    let before = resident_bytes().unwrap_or(0);
    let grow = |l: &dyn Fn()| {
        l();
        resident_bytes().unwrap_or(0).saturating_sub(before) as f64 / keys as f64
    };
    let per_key = match name {
        "governor keyed" => {
            let l = GovernorKeyed::new(rate);
            grow(&|| populate(&l, &w))
        }
        "Mutex<HashMap> bucket" => {
            let l = MutexHashMap::new(rate);
            grow(&|| populate(&l, &w))
        }
        "dashmap + atomic GCRA" => {
            let l = DashMapGcra::new(rate);
            grow(&|| populate(&l, &w))
        }
        _ => return,
    };
    println!("{per_key:.1}");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 4 && args[1] == "--rss" {
        rss_child(&args[2], args[3].parse().unwrap_or(1_000_000));
        return;
    }
    let started = Instant::now();
    let load_before = load_average();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut thread_counts = vec![1, cores];
    thread_counts.dedup();
    eprintln!(
        "tollgate shootout: {cores} cores, threads {thread_counts:?}; generating key streams..."
    );
    // `SHOOTOUT=new-keys` runs only the new-key workloads (first fill, flood).
    let only_new_keys = std::env::var("SHOOTOUT").as_deref() == Ok("new-keys");
    let workloads = if only_new_keys {
        Vec::new()
    } else {
        vec![
            Workload::hot(),
            Workload::uniform("1k keys", 1_000, 1),
            Workload::uniform("1M keys", 1_000_000, 2),
        ]
    };
    let per_workload = (Algorithm::ALL.len() + 5) * thread_counts.len();
    let mut rows = Vec::new();
    let mut done = 0;
    for w in &workloads {
        let mut bench = Bench {
            pools: thread_counts.iter().map(|&t| (t, pool(t))).collect(),
            rows: Vec::new(),
            done,
            total: per_workload * workloads.len(),
            started,
            workload: w,
        };
        let rate = Rate::OPEN;
        for algorithm in Algorithm::ALL {
            let limiter =
                KeyedRateLimiter::<u64>::builder(algorithm, tollgate_quota(algorithm, rate))
                    .max_keys(w.distinct)
                    .build()
                    .expect("benchmark quota is valid");
            bench.measure(TollgateKeyed(limiter, algorithm_name(algorithm)));
        }
        bench.measure(GovernorKeyed::new(rate));
        bench.measure(MutexHashMap::new(rate));
        bench.measure(DashMapGcra::new(rate));
        bench.measure(Floor::new(rate, w.distinct));
        bench.measure(Floor128::new(rate, w.distinct));
        done = bench.done;
        rows.extend(bench.rows);
    }
    rows.extend(new_keys(&thread_counts, started));
    print_table(&rows);
    print_verdicts(&rows);
    print_load(load_before, load_average(), cores);
    print_legend(cores);
    println!(
        "\nTotal time {:.1} s. BENCHMARKS.md explains these figures and records quiet runs.",
        started.elapsed().as_secs_f64()
    );
}

/// What the table's columns and rows mean, printed under it so it reads on its own.
fn print_legend(cores: usize) {
    println!(
        "
How to read this table
- ns/decision/thread: median of {SAMPLES} timed runs, wall time of the slowest thread
  divided by its decisions. Lower is faster. M decisions/s: over all threads.
- vs governor: this row's time divided by governor keyed's time in the same workload
  and thread count. Below 1.00x is faster than governor.
- vs floor 8B / 16B: time relative to the floors, which are not rate limiters but the
  least a keyed lookup can cost: one hash, one probe, one compare-and-swap of an 8-byte
  state (no protection against two keys sharing a slot) or of the 16-byte (key
  fingerprint, state) word tollgate's slots hold. 1.00x would mean no overhead at all.
- bytes/key: tollgate reports memory_bytes() / max_keys (fixed at build, so the hot-key
  rows show a one-key table's fixed overhead); peers: resident memory growth while
  taking in every key, measured in a child process.
- threads: 1, and {cores} (all cores), each thread walking the key stream from its own
  offset.
Workloads and quotas
- hot key, 1k keys, 1M keys: every key is inserted before timing. Quota 10^9/s with a
  burst of 10^9, so nothing is denied, except: fixed window 2^20 per 1 ms (never
  denies here), sliding window 1,023 per 1 ms (its largest per-millisecond limit: on
  the hot key most decisions are DENIALS, which write nothing, so that row is cheaper),
  sliding log 64 per 64 ns.
- first fill 1M: a table built for 1,000,000 keys, timed while 1,000,000 keys it has
  never seen arrive (every decision inserts). Fresh limiter per sample.
- flood, full 100k: a table full of 100,000 live keys (quota 1 per hour, so none goes
  idle), timed while 1,000,000 never-seen keys arrive. tollgate applies its OnFull
  policy to each (Evict forgets the entry going idle soonest, Deny refuses the new
  key, Allow admits it untracked); governor and dashmap grow their maps instead; the
  floors overwrite whatever the slot held."
    );
}

/// Keys the limiters have never seen: the first fill of a table built for 1,000,000
/// keys (every decision inserts a key), and a flood of 1,000,000 new keys into a table
/// full of 100,000 live keys (quota one per hour, so no entry goes idle: tollgate's
/// `OnFull` policy decides every new key; the peers just grow). Each sample runs on a
/// fresh limiter; the table gives the median of three.
fn new_keys(thread_counts: &[usize], started: Instant) -> Vec<Row> {
    const FILL: usize = 1_000_000;
    const FULL: usize = 100_000;
    let fill_stream = fresh_keys(FILL, 0, 7);
    let live = fresh_keys(FULL, 0, 8);
    let flood_stream = fresh_keys(FILL, 1 << 40, 9);
    let mut rows = Vec::new();
    for &threads in thread_counts {
        let pool = pool(threads);
        let mut measure = |workload: &'static str, name: String, ns: f64| {
            eprintln!(
                "[new keys] {:>5.1}s  {:<15} {}t  {:<32} {:>10}",
                started.elapsed().as_secs_f64(),
                workload,
                threads,
                name,
                fmt_ns(ns)
            );
            rows.push(Row {
                workload,
                threads,
                limiter: name,
                ns,
                bytes_per_key: None,
            });
        };
        let open = Rate::OPEN;
        let tollgate = |rate: Rate, keys: usize, policy: OnFull, label: &'static str| {
            move || TollgateKeyed::token_bucket(rate, keys, policy, label)
        };
        let w = "first fill 1M";
        let (pre, run): (&[u64], &[u64]) = (&[], &fill_stream);
        let make = tollgate(open, FILL, OnFull::Evict, "token bucket");
        measure(
            w,
            make().name(),
            one_shot_median_ns(&pool, &make, pre, run, SAMPLES),
        );
        let make = || GovernorKeyed::new(open);
        measure(
            w,
            make().name(),
            one_shot_median_ns(&pool, &make, pre, run, SAMPLES),
        );
        let make = || DashMapGcra::new(open);
        measure(
            w,
            make().name(),
            one_shot_median_ns(&pool, &make, pre, run, SAMPLES),
        );
        let make = || Floor::new(open, FILL);
        measure(
            w,
            make().name(),
            one_shot_median_ns(&pool, &make, pre, run, SAMPLES),
        );
        let make = || Floor128::new(open, FILL);
        measure(
            w,
            make().name(),
            one_shot_median_ns(&pool, &make, pre, run, SAMPLES),
        );

        let w = "flood, full 100k";
        let shut = Rate::SHUT;
        let (pre, run): (&[u64], &[u64]) = (&live, &flood_stream);
        for (policy, label) in [
            (OnFull::Evict, "token bucket, Evict"),
            (OnFull::Deny, "token bucket, Deny"),
            (OnFull::Allow, "token bucket, Allow"),
        ] {
            let make = tollgate(shut, FULL, policy, label);
            measure(
                w,
                make().name(),
                one_shot_median_ns(&pool, &make, pre, run, SAMPLES),
            );
        }
        let make = || GovernorKeyed::new(shut);
        measure(
            w,
            make().name(),
            one_shot_median_ns(&pool, &make, pre, run, SAMPLES),
        );
        let make = || DashMapGcra::new(shut);
        measure(
            w,
            make().name(),
            one_shot_median_ns(&pool, &make, pre, run, SAMPLES),
        );
        let make = || Floor::new(shut, FULL);
        measure(
            w,
            make().name(),
            one_shot_median_ns(&pool, &make, pre, run, SAMPLES),
        );
        let make = || Floor128::new(shut, FULL);
        measure(
            w,
            make().name(),
            one_shot_median_ns(&pool, &make, pre, run, SAMPLES),
        );
    }
    rows
}

fn print_table(rows: &[Row]) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "\n| keys | threads | limiter | ns/decision/thread | M decisions/s | vs governor | vs floor 8B / 16B | bytes/key |"
    );
    let _ = writeln!(out, "|---|---:|---|---:|---:|---:|---:|---:|");
    for r in rows {
        let governor = rows
            .iter()
            .find(|g| {
                g.workload == r.workload && g.threads == r.threads && g.limiter == "governor keyed"
            })
            .map(|g| g.ns);
        let ratio = governor.map_or("-".into(), |g| format!("{:.2}×", r.ns / g));
        let floor = |name: &str| {
            rows.iter()
                .find(|f| f.workload == r.workload && f.threads == r.threads && f.limiter == name)
                .map_or("-".to_string(), |f| format!("{:.2}×", r.ns / f.ns))
        };
        let floors = format!(
            "{} / {}",
            floor("floor, 8-byte CAS"),
            floor("floor, 16-byte CAS")
        );
        let mops = r.threads as f64 * 1e3 / r.ns;
        let mem = r.bytes_per_key.map_or("-".into(), |b| format!("{b:.0}"));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.1} | {} | {} | {} |",
            r.workload,
            r.threads,
            r.limiter,
            fmt_ns(r.ns),
            mops,
            ratio,
            floors,
            mem
        );
    }
}

/// Whether a row is a peer (not tollgate, not a floor).
fn is_peer(r: &Row) -> bool {
    !r.limiter.starts_with("tollgate") && !r.limiter.starts_with("floor")
}

/// One line per workload and thread count: tollgate's keyed token bucket (each `OnFull`
/// policy on the flood) against the fastest peer of the same run, as a ratio of times.
fn print_verdicts(rows: &[Row]) {
    println!("\nVerdict (tollgate's keyed token bucket against the fastest peer in this run):");
    for r in rows
        .iter()
        .filter(|r| r.limiter.starts_with("tollgate token bucket"))
    {
        let best = rows
            .iter()
            .filter(|p| p.workload == r.workload && p.threads == r.threads && is_peer(p))
            .min_by(|a, b| a.ns.total_cmp(&b.ns));
        let Some(best) = best else { continue };
        let ratio = r.ns / best.ns;
        let verdict = if ratio < 0.97 {
            "tollgate faster"
        } else if ratio > 1.03 {
            "tollgate slower"
        } else {
            "even (within 3 %)"
        };
        println!(
            "- {}, {} thread{}: {} {} vs {} {}: {:.2}× ({verdict})",
            r.workload,
            r.threads,
            if r.threads == 1 { "" } else { "s" },
            r.limiter,
            fmt_ns(r.ns),
            best.limiter,
            fmt_ns(best.ns),
            ratio,
        );
    }
}

/// The 1-minute load average (`/proc/loadavg`), where the OS offers it.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The load before and after the run, and a warning when other work shared the
/// machine (before: above half a core's worth; after: above what the run's own threads
/// account for), since then absolute times and even the ratios move.
fn print_load(before: Option<f64>, after: Option<f64>, cores: usize) {
    let (Some(before), Some(after)) = (before, after) else {
        return;
    };
    println!(
        "\nLoad average (1 min): {before:.2} before the run, {after:.2} after it, {cores} cores."
    );
    if before > 0.5 || after > cores as f64 + 0.5 {
        println!(
            "WARNING: the machine was busy with other work: times are inflated and ratios \
             can flip between runs. Compare ratios within one run, and run again on a quiet \
             machine for figures to quote."
        );
    }
}
