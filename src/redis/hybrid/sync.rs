//! The hybrid sync protocol: collect the keys used or changed since the last sync,
//! send their cumulative counts in chunks (per hash slot on a cluster), take the global
//! counts back; and the background task that runs it every interval.

use super::counts::Entry;
use super::decide::Inner;
use super::{bounded, Error, KeyName};
use crate::sync::{OnceLock, PlainOrdering as Ordering, StdArc as Arc, StdWeak as Weak};
use redis::Script;
use std::collections::HashMap;
use std::time::Duration;

const SYNC_SCRIPT: &str = include_str!("../scripts/hybrid_sync.lua");

/// The most keys one sync sends in one go (one pipeline, or on a cluster one batch of
/// per-slot pipelines): small enough that one chunk's Redis time stays well within the
/// default 100 ms timeout. Larger syncs send chunks in sequence.
const SYNC_CHUNK: usize = 2_000;

/// The most keys one sync script call handles: a call is atomic, so this bounds how
/// long a sync holds Redis at once, while amortizing the per-call overhead over many
/// keys.
const SCRIPT_BATCH: usize = 100;

/// Extra TTL on the window counters, for clock skew between instances.
const TTL_GRACE_MS: u64 = 1000;

fn sync_script() -> &'static Script {
    static SCRIPT: OnceLock<Script> = OnceLock::new();
    SCRIPT.get_or_init(|| Script::new(SYNC_SCRIPT))
}

/// One key's share of a sync: the cumulative counts sent, for which window.
struct Sent {
    /// The key's slot in the table, where its reply is applied.
    slot: usize,
    key: Arc<[u8]>,
    k: u64,
    /// The period `k` counts in.
    period_ns: u64,
    own: [u64; 2],
    send: [i64; 2],
    /// The cumulative give-backs sent, and what is sent for them.
    given: [u32; 2],
    send_given: [i64; 2],
}

impl Inner {
    /// One sync: sends the cumulative counts of every key that changed or was used
    /// since the last sync, and reads back their global counts, in one pipelined round
    /// trip per chunk of keys. Keys neither used nor changed cost nothing. Slot locks
    /// are held only to collect and to apply, one at a time (no network I/O, and no
    /// allocation but an `Arc` clone of the key, under them).
    pub(super) async fn sync(&self) -> Result<usize, Error> {
        let _one_at_a_time = self.sync_lock.lock().await;
        let t = self.now_ns();
        let mut sent: Vec<Sent> = Vec::new();
        // Idle entries leave the table (each in its own period: set_quota may have
        // changed it); dirty ones are copied out.
        self.table.collect(t, |slot, key, e| {
            sent.push(Sent {
                slot,
                key,
                k: e.k,
                period_ns: e.period_ns,
                own: [e.w[0].own, e.w[1].own],
                send: [e.w[0].to_send(), e.w[1].to_send()],
                given: [e.w[0].given, e.w[1].given],
                send_given: [e.w[0].given_to_send(), e.w[1].given_to_send()],
            });
        });
        if sent.is_empty() {
            self.note_sync();
            return Ok(0);
        }
        // Chunks go one after another, each within the timeout, so that a large sync
        // makes progress instead of timing out whole (and again at every later sync);
        // after a failed chunk the rest wait for the next sync (still dirty) rather
        // than each costing a timeout.
        let mut first_error = None;
        for start in (0..sent.len()).step_by(SYNC_CHUNK) {
            let chunk = start..(start + SYNC_CHUNK).min(sent.len());
            if first_error.is_some() {
                self.retouch(&sent[chunk]);
                continue;
            }
            if let Err(err) = self.sync_chunk(t, &sent, chunk).await {
                first_error.get_or_insert(err);
            }
        }
        match first_error {
            None => {
                self.note_sync();
                Ok(sent.len())
            }
            Some(err) => {
                self.sync_errors.fetch_add(1, Ordering::Relaxed);
                Err(err)
            }
        }
    }

    /// Sends the keys `sent[chunk]` and takes in their global counts: one pipeline on a
    /// single Redis; on a cluster, where a pipeline must stay within one hash slot, one
    /// per slot, all sent concurrently. Keys of a failed pipeline stay dirty.
    async fn sync_chunk(
        &self,
        t: u64,
        sent: &[Sent],
        chunk: std::ops::Range<usize>,
    ) -> Result<(), Error> {
        let groups: Vec<Vec<usize>> = if self.conn.is_cluster() {
            let mut by_slot: HashMap<u16, Vec<usize>> = HashMap::new();
            for i in chunk {
                let s = &sent[i];
                let slot = KeyName::hybrid(&self.prefix, &s.key, s.k).slot();
                by_slot.entry(slot).or_default().push(i);
            }
            by_slot.into_values().collect()
        } else {
            vec![chunk.collect()]
        };
        let mut first_error = None;
        let mut calls = tokio::task::JoinSet::new();
        for (g, members) in groups.iter().enumerate() {
            let batch: Vec<&Sent> = members.iter().map(|&i| &sent[i]).collect();
            let pipe = self.sync_pipeline(t, &batch);
            let mut conn = self.conn.clone();
            let timeout = self.timeout;
            calls.spawn(async move {
                // One flat reply per script call: both windows' counts of each key.
                let reply: Result<Vec<Vec<u64>>, Error> =
                    bounded(timeout, pipe.query_async(&mut conn)).await;
                (g, reply.map(|r| r.concat()))
            });
        }
        self.round_trips
            .fetch_add(groups.len() as u64, Ordering::Relaxed);
        while let Some(joined) = calls.join_next().await {
            let (g, reply) = match joined {
                Ok(r) => r,
                Err(e) => {
                    // A panicked or cancelled call: its keys stay dirty (below).
                    first_error.get_or_insert(Error::BadReply(e.to_string()));
                    continue;
                }
            };
            let members = &groups[g];
            let reply = reply.and_then(|r| {
                if r.len() == 2 * members.len() {
                    Ok(r)
                } else {
                    Err(Error::BadReply(format!(
                        "{} counts for {} keys",
                        r.len(),
                        members.len()
                    )))
                }
            });
            match reply {
                Ok(globals) => {
                    for (&i, g) in members.iter().zip(globals.chunks_exact(2)) {
                        self.apply(&sent[i], g[0], g[1]);
                    }
                }
                Err(err) => {
                    // Nothing to give back: the next sync sends the cumulative counts
                    // again (still unconfirmed, so still dirty) and reads these keys.
                    for &i in members {
                        self.retouch(std::slice::from_ref(&sent[i]));
                    }
                    first_error.get_or_insert(err);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Marks keys whose sync failed as used, so that the next sync reads them again.
    fn retouch(&self, sent: &[Sent]) {
        for s in sent {
            self.table.with_slot(s.slot, &s.key, |e| e.touched = true);
        }
    }

    /// The pipeline for some keys of a sync taken at `t`: the script loaded first (so
    /// every `EVALSHA` succeeds, even right after a restart), then one call per key.
    fn sync_pipeline(&self, t: u64, keys: &[&Sent]) -> redis::Pipeline {
        let script = sync_script();
        let mut pipe = redis::pipe();
        pipe.cmd("SCRIPT").arg("LOAD").arg(SYNC_SCRIPT).ignore();
        // The idle time of window j ends at (j + 2)·P (it is still "previous" in j + 1).
        let ttl = |j: u64, period_ns: u64| {
            let end = (j + 2).saturating_mul(period_ns);
            end.saturating_sub(t).div_ceil(1_000_000).max(1) + TTL_GRACE_MS
        };
        for batch in keys.chunks(SCRIPT_BATCH) {
            let call = pipe
                .cmd("EVALSHA")
                .arg(script.get_hash())
                .arg(2 * batch.len());
            for s in batch {
                // The names written straight into the pipeline: no String per key.
                call.arg(KeyName::hybrid(&self.prefix, &s.key, s.k.saturating_sub(1)))
                    .arg(KeyName::hybrid(&self.prefix, &s.key, s.k));
            }
            call.arg(&self.instance);
            for s in batch {
                // Window k − 1 does not exist before window 1.
                let first = |v: i64| if s.k == 0 { -1 } else { v };
                call.arg(first(s.send[0]))
                    .arg(s.send[1])
                    .arg(first(s.send_given[0]))
                    .arg(s.send_given[1])
                    .arg(ttl(s.k.saturating_sub(1), s.period_ns))
                    .arg(ttl(s.k, s.period_ns));
            }
        }
        pipe
    }

    /// Takes in one key's global counts read back by a sync.
    fn apply(&self, s: &Sent, g_prev: u64, g_curr: u64) {
        self.table
            .with_slot(s.slot, &s.key, |e| Self::apply_entry(e, s, g_prev, g_curr));
    }

    /// [`apply`](Self::apply) on the key's entry, under its slot's lock.
    fn apply_entry(e: &mut Entry, s: &Sent, g_prev: u64, g_curr: u64) {
        if e.period_ns != s.period_ns {
            // The windows restarted under a new period meanwhile: these counts are
            // of windows that mean nothing now.
            return;
        }
        if e.k == s.k {
            if s.k > 0 {
                e.w[0].global = g_prev;
                e.w[0].own_synced = s.own[0];
                e.w[0].given_synced = s.given[0];
            }
            e.w[1].global = g_curr;
            e.w[1].own_synced = s.own[1];
            e.w[1].given_synced = s.given[1];
        } else if e.k == s.k + 1 {
            e.w[0].global = g_curr;
            e.w[0].own_synced = s.own[1];
            e.w[0].given_synced = s.given[1];
        }
    }

    fn note_sync(&self) {
        let now = self.epoch.elapsed().as_nanos() as u64;
        let last = self.last_sync.swap(now, Ordering::Relaxed);
        if last != 0 {
            self.max_gap
                .fetch_max(now - last.min(now), Ordering::Relaxed);
        }
    }
}

/// The sync task: holds the limiter weakly, so dropping the last handle stops it.
pub(super) async fn run(weak: Weak<Inner>, interval: Duration) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(inner) = weak.upgrade() else {
            return;
        };
        // Failures are counted in the stats and the counts retried next time.
        let _ = inner.sync().await;
    }
}
