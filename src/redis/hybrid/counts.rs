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
    /// Our cumulative give-backs in this window (of anyone's admissions: a stateless
    /// caller gives back what it is told), a field of their own in Redis (`<id>:g`),
    /// subtracted from the sum. 32 bits, which keep a slot 16 bytes larger than without
    /// give-backs rather than 32: give-backs past `u32::MAX` in one window and instance
    /// are not made (see [`give`](Self::give)), which never counts less than the truth.
    pub(super) given: u32,
    /// Our cumulative give-backs as included in `global`.
    pub(super) given_synced: u32,
}

impl Win {
    /// The global count as this instance sees it: the last global count with our own
    /// admissions since then.
    pub(super) fn estimate(&self) -> u64 {
        // Everyone else's share of the last global count (ours in it was
        // `own_synced − given_synced`; theirs is below 0 when they gave back what we
        // admitted), then ours as it is now; never below 0. Without give-backs the
        // global count holds our field, so theirs is never below 0.
        let others =
            i128::from(self.global) - i128::from(self.own_synced) + i128::from(self.given_synced);
        (others + i128::from(self.own) - i128::from(self.given)).clamp(0, i128::from(u64::MAX))
            as u64
    }

    /// What a sync writes for this window: our count, or -1 when we never admitted
    /// anything in it (read only, so no empty hash is created).
    pub(super) fn to_send(self) -> i64 {
        Self::send(self.own)
    }

    /// What a sync writes for this window's give-backs: our cumulative count of them,
    /// or -1 when we never gave anything back in it.
    pub(super) fn given_to_send(self) -> i64 {
        Self::send(u64::from(self.given))
    }

    /// Gives back up to `n` of this window's count as this instance sees it (never
    /// below 0, and no more than the give-back count holds); returns how many.
    pub(super) fn give(&mut self, n: u64) -> u64 {
        let given = n.min(self.estimate()).min(u64::from(u32::MAX - self.given));
        // given <= u32::MAX - self.given.
        self.given += given as u32;
        given
    }

    fn send(count: u64) -> i64 {
        if count == 0 {
            -1
        } else {
            i64::try_from(count).unwrap_or(i64::MAX)
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
        self.touched
            || self
                .w
                .iter()
                .any(|w| w.own != w.own_synced || w.given != w.given_synced)
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
