//! The shootout: tollgate's keyed limiter, all five algorithms, against governor, a
//! `Mutex<HashMap>` token bucket, dashmap with atomic GCRA words, and the floor (one
//! hash, one probe, one CAS), on one hot key, 1,000 and 1,000,000 uniform keys, at one
//! thread and at all cores, measured side by side in this one run.
//!
//! `cargo run --release --example shootout` (about a minute on 2 cores, plus the first
//! build). Prints progress on stderr; on stdout the CPU and the load, one table (median ns
//! per decision per thread, millions of decisions per second over all threads, time
//! relative to governor keyed (below 1.00 is faster), time relative to the two floors,
//! and memory per key: tollgate's `memory_bytes()` / max_keys, the peers' growth of
//! resident memory while they took in every key), one verdict line per workload and
//! thread count (tollgate's keyed token bucket divided by each peer of this run), a legend
//! and the total time.
//!
//! Options (after `--`): `--format tsv` prints the CPU, the load and the rows as
//! tab-separated lines instead (what `scripts/bench-table` reads); `--quick` shrinks the
//! workloads (100,000 keys instead of 1,000,000, a 100,000-key fill, a 10,000-key table
//! flooded, shorter timed runs) to test the harness in seconds: its figures are not
//! comparable with a full run's. `SHOOTOUT=new-keys` runs only the first-fill and flood
//! workloads.

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

/// How long one timed run lasts (`--quick`: [`QUICK_RUN`]); three runs make a median.
const RUN: Duration = Duration::from_millis(60);
const QUICK_RUN: Duration = Duration::from_millis(6);
const SAMPLES: usize = 3;

/// What the command line asked for.
struct Options {
    tsv: bool,
    quick: bool,
    only_new_keys: bool,
}

impl Options {
    fn parse(args: &[String]) -> Result<Options, String> {
        let mut o = Options {
            tsv: false,
            quick: false,
            only_new_keys: std::env::var("SHOOTOUT").as_deref() == Ok("new-keys"),
        };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--quick" => o.quick = true,
                "--format" => match it.next().map(String::as_str) {
                    Some("tsv") => o.tsv = true,
                    Some("text") => o.tsv = false,
                    other => return Err(format!("--format takes tsv or text, not {other:?}")),
                },
                "--format=tsv" => o.tsv = true,
                "--format=text" => o.tsv = false,
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        Ok(o)
    }

    fn run(&self) -> Duration {
        if self.quick {
            QUICK_RUN
        } else {
            RUN
        }
    }
}

/// The sizes of the new-key workloads, and their names in the table.
struct NewKeys {
    fill: usize,
    full: usize,
    fill_name: &'static str,
    flood_name: &'static str,
}

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
    run: Duration,
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
            let iters = calibrate(pool, &limiter, self.workload, self.run);
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
    let options = match Options::parse(&args[1..]) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("shootout: {e}\nusage: shootout [--format text|tsv] [--quick]");
            std::process::exit(2);
        }
    };
    let started = Instant::now();
    let unix_time = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let load_before = load_average();
    let cpu = Cpu::read();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut thread_counts = vec![1, cores];
    thread_counts.dedup();
    eprintln!(
        "tollgate shootout{}: {}, {cores} cores, threads {thread_counts:?}; generating key streams...",
        if options.quick { " (quick)" } else { "" },
        cpu.describe()
    );
    if !options.tsv {
        print_header(&cpu, cores, unix_time, load_before, options.quick);
    }
    let big = if options.quick {
        Workload::uniform("100k keys", 100_000, 2)
    } else {
        Workload::uniform("1M keys", 1_000_000, 2)
    };
    let workloads = if options.only_new_keys {
        Vec::new()
    } else {
        vec![Workload::hot(), Workload::uniform("1k keys", 1_000, 1), big]
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
            run: options.run(),
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
    let sizes = if options.quick {
        NewKeys {
            fill: 100_000,
            full: 10_000,
            fill_name: "first fill 100k",
            flood_name: "flood, full 10k",
        }
    } else {
        NewKeys {
            fill: 1_000_000,
            full: 100_000,
            fill_name: "first fill 1M",
            flood_name: "flood, full 100k",
        }
    };
    rows.extend(new_keys(&thread_counts, started, &sizes));
    let load_after = load_average();
    let seconds = started.elapsed().as_secs_f64();
    if options.tsv {
        let meta = [
            ("format", "tollgate-shootout-tsv 1".to_string()),
            ("unix_time", unix_time.to_string()),
            ("vendor", cpu.vendor.clone()),
            ("model_name", cpu.model_name.clone()),
            ("family", cpu.family.clone()),
            ("model", cpu.model.clone()),
            ("stepping", cpu.stepping.clone()),
            ("flags", cpu.flags()),
            ("arch", std::env::consts::ARCH.to_string()),
            ("cores", cores.to_string()),
            ("quick", u8::from(options.quick).to_string()),
            ("load_before", fmt_load(load_before)),
            ("load_after", fmt_load(load_after)),
            ("seconds", format!("{seconds:.1}")),
            (
                "tollgate_atomics",
                std::env::var("TOLLGATE_ATOMICS").unwrap_or_default(),
            ),
        ];
        print_tsv(&meta, &rows);
        return;
    }
    print_table(&rows);
    print_verdicts(&rows);
    print_load(load_before, load_after, cores);
    print_legend(cores, &sizes);
    println!(
        "\nTotal time {seconds:.1} s. BENCHMARKS.md explains these figures; scripts/bench-table \
         writes a CPU's table there from several runs of this program."
    );
}

/// The lines above the table: when, on what CPU, at what load.
fn print_header(cpu: &Cpu, cores: usize, unix_time: u64, load: Option<f64>, quick: bool) {
    println!("tollgate shootout, {} UTC", utc(unix_time));
    println!("CPU: {}, {cores} cores", cpu.describe());
    if let Ok(forced) = std::env::var("TOLLGATE_ATOMICS") {
        println!("TOLLGATE_ATOMICS={forced}: tollgate's 16-byte atomics forced to that path");
    }
    if let Some(load) = load {
        println!("Load average (1 min) before the run: {load:.2}");
    }
    if quick {
        println!("QUICK RUN (--quick): workloads shrunk; not comparable with a full run.");
    }
}

/// The run as tab-separated lines: `meta KEY VALUE`, then `row WORKLOAD THREADS
/// LIMITER NS BYTES_PER_KEY` (`-` where there is no figure). Names never hold a tab.
fn print_tsv(meta: &[(&str, String)], rows: &[Row]) {
    let mut out = std::io::stdout().lock();
    for (key, value) in meta {
        let _ = writeln!(out, "meta\t{key}\t{}", value.replace(['\t', '\n'], " "));
    }
    for r in rows {
        let bytes = r.bytes_per_key.map_or("-".into(), |b| format!("{b:.1}"));
        let _ = writeln!(
            out,
            "row\t{}\t{}\t{}\t{:.3}\t{bytes}",
            r.workload, r.threads, r.limiter, r.ns
        );
    }
}

fn fmt_load(load: Option<f64>) -> String {
    load.map_or("-".into(), |l| format!("{l:.2}"))
}

/// The CPU the run measured, as `/proc/cpuinfo` names it (first processor), and the
/// features that choose tollgate's code paths, as the running process detects them.
struct Cpu {
    vendor: String,
    model_name: String,
    family: String,
    model: String,
    stepping: String,
}

impl Cpu {
    fn read() -> Cpu {
        let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let field = |name: &str| {
            info.lines()
                .take_while(|l| !l.trim().is_empty())
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    (k.trim() == name).then(|| v.trim().to_string())
                })
                .unwrap_or_else(|| "?".into())
        };
        Cpu {
            vendor: field("vendor_id"),
            model_name: field("model name"),
            family: field("cpu family"),
            model: field("model"),
            stepping: field("stepping"),
        }
    }

    /// The features that matter to tollgate, in `/proc/cpuinfo`'s names, each present
    /// one named and each absent one as `no-NAME`: AVX (16-byte atomic loads as one
    /// `vmovdqa`), cmpxchg16b (16-byte compare-and-swap inline; without it the slow
    /// path), and AVX2 / AVX-512F, which name the CPU's generation.
    fn flags(&self) -> String {
        #[cfg(target_arch = "x86_64")]
        {
            let f = [
                ("avx", std::arch::is_x86_feature_detected!("avx")),
                ("avx2", std::arch::is_x86_feature_detected!("avx2")),
                ("avx512f", std::arch::is_x86_feature_detected!("avx512f")),
                ("cx16", std::arch::is_x86_feature_detected!("cmpxchg16b")),
            ];
            f.iter()
                .map(|(name, on)| {
                    if *on {
                        (*name).to_string()
                    } else {
                        format!("no-{name}")
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            format!("{} (no x86-64 features)", std::env::consts::ARCH)
        }
    }

    fn describe(&self) -> String {
        format!(
            "{} ({}, family {}, model {}, stepping {}; {})",
            self.model_name,
            self.vendor,
            self.family,
            self.model,
            self.stepping,
            self.flags()
        )
    }
}

/// `YYYY-MM-DD HH:MM` for seconds since the Unix epoch (days to a civil date as in
/// Howard Hinnant's `civil_from_days`).
fn utc(unix: u64) -> String {
    let days = (unix / 86_400) as i64;
    let secs = unix % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}",
        secs / 3_600,
        secs % 3_600 / 60
    )
}

/// What the table's columns and rows mean, printed under it so it reads on its own.
fn print_legend(cores: usize, sizes: &NewKeys) {
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
  floors overwrite whatever the slot held.
- Verdict: the keyed token bucket's time divided by each peer's in the same workload,
  thread count and run (below 1.00x tollgate is faster), fastest peer first, and by the
  16-byte floor's; \"even\" is within 3 % of the fastest peer."
    );
    if sizes.fill != 1_000_000 {
        println!(
            "- --quick: 100k keys instead of 1M, {} and {}: the same workloads at a tenth of the size.",
            sizes.fill_name, sizes.flood_name
        );
    }
}

/// Keys the limiters have never seen: the first fill of a table built for 1,000,000
/// keys (every decision inserts a key), and a flood of 1,000,000 new keys into a table
/// full of 100,000 live keys (quota one per hour, so no entry goes idle: tollgate's
/// `OnFull` policy decides every new key; the peers just grow). Each sample runs on a
/// fresh limiter; the table gives the median of three.
fn new_keys(thread_counts: &[usize], started: Instant, sizes: &NewKeys) -> Vec<Row> {
    let (fill, full) = (sizes.fill, sizes.full);
    let fill_stream = fresh_keys(fill, 0, 7);
    let live = fresh_keys(full, 0, 8);
    let flood_stream = fresh_keys(fill, 1 << 40, 9);
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
        let w = sizes.fill_name;
        let (pre, run): (&[u64], &[u64]) = (&[], &fill_stream);
        let make = tollgate(open, fill, OnFull::Evict, "token bucket");
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
        let make = || Floor::new(open, fill);
        measure(
            w,
            make().name(),
            one_shot_median_ns(&pool, &make, pre, run, SAMPLES),
        );
        let make = || Floor128::new(open, fill);
        measure(
            w,
            make().name(),
            one_shot_median_ns(&pool, &make, pre, run, SAMPLES),
        );

        let w = sizes.flood_name;
        let shut = Rate::SHUT;
        let (pre, run): (&[u64], &[u64]) = (&live, &flood_stream);
        for (policy, label) in [
            (OnFull::Evict, "token bucket, Evict"),
            (OnFull::Deny, "token bucket, Deny"),
            (OnFull::Allow, "token bucket, Allow"),
        ] {
            let make = tollgate(shut, full, policy, label);
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
        let make = || Floor::new(shut, full);
        measure(
            w,
            make().name(),
            one_shot_median_ns(&pool, &make, pre, run, SAMPLES),
        );
        let make = || Floor128::new(shut, full);
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
/// policy on the flood) divided by every peer of the same run, fastest peer first, and by
/// the 16-byte floor; then how it stands against the fastest peer.
fn print_verdicts(rows: &[Row]) {
    println!(
        "\nVerdict: tollgate's keyed token bucket ÷ each peer, same workload, threads and run \
         (below 1.00× tollgate is faster):"
    );
    for r in rows
        .iter()
        .filter(|r| r.limiter.starts_with("tollgate token bucket"))
    {
        let same = |p: &&Row| p.workload == r.workload && p.threads == r.threads;
        let mut peers: Vec<&Row> = rows.iter().filter(same).filter(|p| is_peer(p)).collect();
        peers.sort_by(|a, b| a.ns.total_cmp(&b.ns));
        let Some(best) = peers.first() else { continue };
        let ratios: Vec<String> = peers
            .iter()
            .map(|p| format!("{:.2}× {}", r.ns / p.ns, p.limiter))
            .collect();
        let floor = rows
            .iter()
            .filter(same)
            .find(|f| f.limiter == "floor, 16-byte CAS")
            .map_or(String::new(), |f| {
                format!("; {:.2}× the 16-byte floor", r.ns / f.ns)
            });
        let ratio = r.ns / best.ns;
        let verdict = if ratio < 0.97 {
            "faster than every peer".to_string()
        } else if ratio > 1.03 {
            format!("slower than {}", best.limiter)
        } else {
            format!("even with {} (within 3 %)", best.limiter)
        };
        let policy = r
            .limiter
            .strip_prefix("tollgate token bucket")
            .unwrap_or_default();
        println!(
            "- {}{policy}, {} thread{}: {}; {}{floor}: {verdict}",
            r.workload,
            r.threads,
            if r.threads == 1 { "" } else { "s" },
            fmt_ns(r.ns),
            ratios.join(", "),
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
