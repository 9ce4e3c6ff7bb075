//! The promises the targets check (quoted word for word from `tollgate::guide::promises`, `src/guide/promises.rs`), and the comparison of a `Decision` with the
//! model's `Expect` that quotes them.

use crate::model::{Algo, Expect};
use tollgate::Decision;

pub const ADMIT_TOKEN: &str = "guide::promises (token-bucket): \"a request of cost `n` at `t` is admitted iff `max(TAT, t) + n·T − t ≤ burst·T`\"";
pub const ADMIT_LEAKY: &str =
    "guide::promises (leaky-bucket): \"admits exactly what `TokenBucket` admits\"";
pub const ADMIT_FIXED: &str = "guide::promises (fixed-window): \"at most `limit` per window `[k·P, (k+1)·P)`, aligned to the clock's zero\"";
pub const ADMIT_SLIDING: &str = "guide::promises (sliding-window): \"admitted iff `prev·(P − e) + (curr + n)·P ≤ limit·P`, exact integers\"";
pub const ADMIT_LOG: &str = "guide::promises (sliding-log): \"exact: at most `limit` admitted in every interval `(t − P, t]`\"";
pub const REMAINING: &str = "guide::promises (remaining): \"how many more requests of cost 1 would be admitted right now, after this one\"";
pub const RESET: &str = "guide::promises (reset-after): \"`reset_after()` is the duration until the full quota is available again\"";
pub const RETRY: &str = "guide::promises (retry-after): \"`retry_after()` is the exact wait until the same request would fit; never too early\"";
pub const DELAY: &str = "guide::promises (delay): \"`Decision::delay()` says how long to hold each admitted request so releases are spaced by `T`: `max(TAT, t) − t` for the leaky bucket, zero for the others\"";
pub const LIMIT: &str = "guide::promises (limit-burst): \"`limit()` is the quota's limit (not the burst), `burst()` the most admitted at once\"";
pub const CANNOT_FIT: &str =
    "guide::promises (cannot-fit): \"A cost that can never fit is an error, not a denial.\"";
pub const DENIAL_NOTHING: &str =
    "guide::promises (denial-nothing): \"A denial takes nothing from any limit\"";
pub const DENIAL_NAMES: &str = "guide::promises (denial-nothing): \"A denial takes nothing from any limit\"; (denial-names): \"A denial names every limit that denied and reports the longest wait.\"";
pub const CANCEL: &str = "guide::promises (cancel): \"`cancel()` gives back what no later booking depends on, by Go x/time/rate's `CancelAt` rule\"; (cancel-due): \"A reservation cancelled once it is due gives nothing back\"";
pub const PENDING: &str = "guide::promises (pending): \"While a booking is pending, `check` denies what would overtake it.\"; (pending-sliding): \"The sliding window denies what would come before the booking's window.\"";
pub const RESERVE: &str = "guide::promises (reserve): \"for the buckets GCRA virtual scheduling; the fixed window books into the earliest window where the request fits, the sliding window at the earliest time its weighted count admits the request, the sliding log at the time its `n`-th oldest entry leaves the window.\"";
pub const TOO_LONG: &str = "ReserveError::TooLong::max_wait: \"The longest wait allowed: the caller's `max_wait`, or `Reservation::MAX_WAIT` when that is smaller ..., or the time left until the engine's horizon ... when the booking would end past it. Always less than `wait`.\" (guide::promises (max-wait): \"beyond it, `ReserveError::TooLong` reports that bound as its `max_wait`\")";
pub const SET_QUOTA_BUCKET: &str = "guide::promises (carry-over): \"a bucket's debt at the change `c` is converted into the new quota's requests, `TAT' = c + ⌈(TAT − c)·T_new / T_old⌉`, rounded up so the limit is never exceeded\"";
pub const SET_QUOTA_WINDOW: &str = "guide::promises (windows-keep): \"The windows keep their counts and apply the new limit at once\"; (windows-keep): \"The sliding log keeps its timestamps\"";
pub const CONVERTED_NOTHING: &str = "guide::promises (converted): \"gives nothing back after a `set_quota` or tier change that converted a bucket's state to another rate, even once converted back: the booking was converted with the rest\"";
pub const CLOCK: &str = "guide::promises (clock-back): \"A clock reading older than the state never re-earns capacity\"; (clock-back-bucket): \"The buckets decide a reading older than the state at the state's time.\"; (clock-back-window): \"A window decides a reading older than its state's window in the state's window, with its counts (waits measured from the reading)\"; (retry-after): \"never too early, even measured from a stale reading\"";
pub const PEEK: &str = "guide::promises (peek): \"`peek()` and `peek_n(n)` return the decision a request would get now without consuming anything or inserting the key\"";

pub fn admit_quote(a: Algo) -> &'static str {
    match a {
        Algo::Token => ADMIT_TOKEN,
        Algo::Leaky => ADMIT_LEAKY,
        Algo::Fixed => ADMIT_FIXED,
        Algo::Sliding => ADMIT_SLIDING,
        Algo::Log => ADMIT_LOG,
    }
}

/// A short log of the operations so far, printed with a failure.
#[derive(Default)]
pub struct Trace {
    lines: Vec<String>,
}

impl Trace {
    pub fn push(&mut self, line: String) {
        // TOLLGATE_FUZZ_TRACE=1 prints every operation as it runs (to read what an input
        // does, or which inputs step the clock back).
        thread_local! {
            static PRINT: bool = std::env::var_os("TOLLGATE_FUZZ_TRACE").is_some();
        }
        if PRINT.with(|p| *p) {
            eprintln!("  {line}");
        }
        self.lines.push(line);
    }

    pub fn dump(&self) -> String {
        // FUZZ_DUMP_ALL=1 prints every operation (a long input's whole story).
        let keep = if std::env::var_os("FUZZ_DUMP_ALL").is_some() {
            usize::MAX
        } else {
            24
        };
        let from = self.lines.len().saturating_sub(keep).max(1);
        let mut s = String::new();
        if let Some(first) = self.lines.first() {
            s.push_str("  ");
            s.push_str(first);
            s.push('\n');
        }
        if from > 1 {
            s.push_str(&format!("  ... {} earlier operations\n", from - 1));
        }
        for l in &self.lines[from..] {
            s.push_str("  ");
            s.push_str(l);
            s.push('\n');
        }
        s
    }
}

thread_local! {
    static STOPPED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static BEHIND: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static SKIP: Vec<String> = patterns("TOLLGATE_FUZZ_SKIP");
    static ONLY: Vec<String> = patterns("TOLLGATE_FUZZ_ONLY");
}

fn patterns(var: &str) -> Vec<String> {
    std::env::var(var)
        .map(|v| {
            v.split('|')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn matches(pats: &[String], msg: &str) -> bool {
    pats.iter()
        .any(|k| k.split('&').all(|part| msg.contains(part)))
}

/// Whether a known violation (`TOLLGATE_FUZZ_SKIP`) stopped this run: the targets then end
/// the run quietly, so that a long run looks past bugs already reported.
pub fn stopped() -> bool {
    STOPPED.with(|s| s.get())
}

/// Starts a run.
pub fn start() {
    STOPPED.with(|s| s.set(false));
    BEHIND.with(|s| s.set(false));
}

/// Whether the clock now reads older than its newest reading of the run (it was stepped
/// back): every violation then quotes the clock's promise too ([`CLOCK`]).
pub fn behind(b: bool) {
    BEHIND.with(|s| s.set(b));
}

/// Panics with the quoted promise when `cond` fails; with `TOLLGATE_FUZZ_SKIP` set to
/// `|`-separated alternatives (each `&`-separated substrings that must all occur), a
/// violation whose message matches one ends the run
/// quietly instead (for looking past known bugs); `TOLLGATE_FUZZ_ONLY`, the same syntax,
/// quietly ends a run at every violation it does not match (for hunting one bug).
#[track_caller]
pub fn promise(cond: bool, quote: &str, detail: std::fmt::Arguments<'_>, trace: &Trace) {
    if stopped() {
        return;
    }
    if !cond {
        let quote = if BEHIND.with(|b| b.get()) {
            format!("{quote}\n(the clock stepped back: {CLOCK})")
        } else {
            quote.to_string()
        };
        let msg = format!("{quote}\n  violated: {detail}\n{}", trace.dump());
        let only = ONLY.with(|o| o.is_empty() || matches(o, &msg));
        if !only || SKIP.with(|k| matches(k, &msg)) {
            STOPPED.with(|s| s.set(true));
            return;
        }
        panic!(
            "\n{quote}\n  violated: {detail}\n  operations (t in ns):\n{}",
            trace.dump()
        );
    }
}

/// Compares every field of `d` with the model's `e`. `full`: also the fields beyond
/// `is_allowed` (a peek of cost 0 has no admission to compare).
#[track_caller]
pub fn decision(
    algo: Algo,
    ctx: Option<&str>,
    what: &str,
    d: &Decision,
    e: &Expect,
    trace: &Trace,
) {
    let q = |field: &str| match ctx {
        Some(c) => format!("{c}\n(and {field})"),
        None => field.to_string(),
    };
    // README: "a debt reaching past the clock's horizon, 146 years, ends there": a model
    // state that reaches that far is named, so that a run can look past it (issue 37,
    // item 4, settles what the engine keeps of such a debt).
    let far = 1u128 << 61;
    let past = if e.reset_after >= far || e.retry_after.is_some_and(|r| r >= far) {
        " (the model's debt reaches past the clock's horizon)"
    } else {
        ""
    };
    let det =
        |f: &str, a: String, m: String| format!("{what}: {f} is {a}, the model says {m}{past}");
    promise(
        d.is_allowed() == e.allowed,
        &q(admit_quote(algo)),
        format_args!(
            "{}",
            det(
                "is_allowed",
                d.is_allowed().to_string(),
                e.allowed.to_string()
            )
        ),
        trace,
    );
    let ra = d.retry_after().map(|r| r.as_nanos());
    promise(
        ra == e.retry_after,
        &q(RETRY),
        format_args!(
            "{}",
            det(
                "retry_after (ns)",
                format!("{ra:?}"),
                format!("{:?}", e.retry_after)
            )
        ),
        trace,
    );
    promise(
        d.remaining() == e.remaining,
        &q(REMAINING),
        format_args!(
            "{}",
            det(
                "remaining",
                d.remaining().to_string(),
                e.remaining.to_string()
            )
        ),
        trace,
    );
    promise(
        d.reset_after().as_nanos() == e.reset_after,
        &q(RESET),
        format_args!(
            "{}",
            det(
                "reset_after (ns)",
                d.reset_after().as_nanos().to_string(),
                e.reset_after.to_string()
            )
        ),
        trace,
    );
    promise(
        d.delay().as_nanos() == e.delay,
        &q(DELAY),
        format_args!(
            "{}",
            det(
                "delay (ns)",
                d.delay().as_nanos().to_string(),
                e.delay.to_string()
            )
        ),
        trace,
    );
    promise(
        d.limit() == e.limit && d.burst() == e.burst,
        &q(LIMIT),
        format_args!(
            "{}",
            det(
                "(limit, burst)",
                format!("{:?}", (d.limit(), d.burst())),
                format!("{:?}", (e.limit, e.burst))
            )
        ),
        trace,
    );
}
