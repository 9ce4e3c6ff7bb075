//! One key's counts as this instance sees them: its two windows, each with the global
//! count read back at the last sync and this instance's own cumulative admissions.

/// One window's counts as this instance sees them.
///
/// Redis keeps, per key and window, one field per instance holding that instance's
/// *cumulative* admissions in the window. A sync sets our field to `own` (never adds),
/// so a sync retried after a lost reply counts nothing twice.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Win {
    /// The global count read back at the last sync: every instance's field summed,
    /// ours as `own_synced`.
    pub(super) global: u64,
    /// Our cumulative admissions in this window.
    pub(super) own: u64,
    /// Our cumulative count as included in `global`.
    pub(super) own_synced: u64,
}

impl Win {
    /// The global count as this instance sees it: the last global count with our own
    /// admissions since then.
    pub(super) fn estimate(&self) -> u64 {
        self.global.saturating_sub(self.own_synced) + self.own
    }

    /// What a sync writes for this window: our count, or -1 when we never admitted
    /// anything in it (read only, so no empty hash is created).
    pub(super) fn to_send(self) -> i64 {
        if self.own == 0 {
            -1
        } else {
            i64::try_from(self.own).unwrap_or(i64::MAX)
        }
    }
}

/// A key's windows `k − 1` and `k`.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Entry {
    pub(super) k: u64,
    pub(super) w: [Win; 2],
    /// Decided since the last sync collected it: its global counts are worth reading.
    pub(super) touched: bool,
    /// The period (ns) `k` counts in: after `set_quota` changes it, the entry's
    /// windows mean nothing and restart at its next decision.
    pub(super) period_ns: u64,
}

impl Entry {
    /// Whether the next sync must include this key: it has admissions Redis has not
    /// confirmed, or it was used since the last sync (so others' counts matter).
    pub(super) fn dirty(&self) -> bool {
        self.touched || self.w.iter().any(|w| w.own != w.own_synced)
    }

    /// Whether the entry says nothing any more at `now`: its window `k` (in its own
    /// period) and, when `keep` is 2 (`SlidingWindow`, where the previous window
    /// counts), the next one have passed.
    pub(super) fn idle(&self, now: u64, keep: u64) -> bool {
        self.k + keep <= now / self.period_ns
    }

    /// The reading from which the entry is [`idle`](Self::idle).
    pub(super) fn idle_at(&self, keep: u64) -> u64 {
        (self.k + keep).saturating_mul(self.period_ns)
    }

    /// Whether a new key may take the entry's slot at `now`: idle, and nothing left
    /// for a sync to send or read.
    pub(super) fn reclaimable(&self, now: u64, keep: u64) -> bool {
        self.idle(now, keep) && !self.dirty()
    }
}

impl Entry {
    /// A key first seen in window `k` of a period of `period_ns`.
    pub(super) fn new(k: u64, period_ns: u64) -> Self {
        Entry {
            k,
            w: [Win::default(); 2],
            touched: false,
            period_ns,
        }
    }

    /// Moves the entry to window `k_now` (never backwards); returns the window decided in.
    pub(super) fn roll(&mut self, k_now: u64) -> u64 {
        if k_now > self.k {
            if k_now == self.k + 1 {
                self.w = [self.w[1], Win::default()];
            } else {
                self.w = [Win::default(); 2];
            }
            self.k = k_now;
        }
        self.k
    }
}
