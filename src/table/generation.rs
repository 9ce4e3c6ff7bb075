//! The key word of a packed slot: the key's tag, the rate class that wrote its
//! state, and its state's generation.
//!
//! ```text
//!  63                            20 19     16 15             0
//! +--------------------------------+---------+----------------+
//! | tag: the hash's top 44 bits ≠0 |  class  |  generation    |
//! +--------------------------------+---------+----------------+
//! ```
//!
//! `0` is an empty slot (a stored generation is never 0). A lookup compares the tag
//! only: it ORs the low 20 bits to ones and compares with the key's *probe word*,
//! `hash | 0xF_FFFF` (one OR more than comparing whole words). Two keys share a state
//! only if their hashes agree in the top 44 bits and they share a group. The class
//! (`table::packed::rates`) says which bucket interval wrote the state. Every write that keeps
//! a key's state keeps its generation; a write that gives the key a new state (reset,
//! removal, an install after a reclaim or eviction) gives it a new generation.
//!
//! # Why a generation, and why this one cannot match a later state
//!
//! A booking (a reservation, a `check_all` admission) may be given back later. It must
//! act on the state it was made on, never on one rebuilt after the key was reset or
//! forgotten: such a state can hold the same values by chance (a window index, a
//! theoretical arrival time), and a refund matched by value would hand it capacity.
//!
//! Each shard keeps an epoch (`Shard::epoch`). An event that replaces a key's state
//! (reset, reclaim, eviction) takes the next epoch *after* loading the word it
//! replaces; an install into an empty slot reads the epoch after its scan. The new
//! state's generation is `epoch mod 65,535 + 1`. A booking records the generation of
//! the word its compare-and-swap replaced and the epoch `b` it read *before* loading
//! that word, or, when the booking itself installed the key (into an empty slot, or
//! over an idle or evicted entry: the first request of a key in a full table), the
//! larger of `b` and the install's epoch, whose generation the state carries. So every
//! event on the key after the booking has an epoch above `b` (its load saw the
//! booking, which follows the booking's read of `b` and its install's epoch).
//!
//! A refund loads the key's word, then the epoch `n`. It proceeds only if the word's
//! generation is the booking's and no epoch in `(b, n]` has that generation: with `e'`
//! the largest epoch `≤ b` of that generation, `n < e' + 65,535` ([`within`]). The
//! word's own event has an epoch `≤ n` of that generation, so it is `≤ e' ≤ b`: the
//! state predates the booking, and as every event after the booking is above `b`, it
//! is the state the booking was made on. A refund that cannot tell gives nothing:
//! conservative, never a gift. That happens when more than 65,535 events came in the
//! shard between the state's install and the refund, or when the booking raced an
//! event on its own key (a reset between the booking's epoch read and its load: the
//! booking then landed on the new state, whose epoch is above `b`). The compare-and-swap that applies it compares the whole
//! word, generation included.

/// The generation bits of a key word.
const GEN_BITS: u64 = 0xFFFF;

/// The rate class bits of a key word.
pub(crate) const CLASS_BITS: u64 = 0xF << 16;

/// The bits a lookup ignores: the class and the generation.
pub(crate) const MATCH_BITS: u64 = CLASS_BITS | GEN_BITS;

/// Distinct generations (1 to 65,535).
const PERIOD: u64 = GEN_BITS;

/// The probe word of the key hashed to `h`: its tag with every class and generation
/// bit set. The tag is never 0 (a hash whose top 44 bits are 0 takes the tag 1), so
/// no key word of this key is ever 0.
#[inline]
pub(crate) fn probe_word(h: u64) -> u64 {
    let p = h | MATCH_BITS;
    if p == MATCH_BITS {
        (1 << 20) | MATCH_BITS
    } else {
        p
    }
}

/// Whether the slot's key word `word` holds the key whose probe word is `probe`.
#[inline(always)]
pub(crate) fn holds(word: u64, probe: u64) -> bool {
    word | MATCH_BITS == probe
}

/// The generation of a key word (1 to 65,535; 0 only for an empty slot).
#[inline]
pub(crate) fn of(word: u64) -> u16 {
    (word & GEN_BITS) as u16
}

/// The rate class of a key word.
#[inline(always)]
pub(crate) fn class_of(word: u64) -> u8 {
    ((word & CLASS_BITS) >> 16) as u8
}

/// `word` with rate class `class`.
#[inline]
pub(crate) fn with_class(word: u64, class: u8) -> u64 {
    (word & !CLASS_BITS) | (u64::from(class) << 16 & CLASS_BITS)
}

/// The key word for `probe` of rate class `class`, with the generation of `epoch`.
#[inline]
pub(crate) fn word(probe: u64, epoch: u64, class: u8) -> u64 {
    with_class(probe & !MATCH_BITS, class) | (epoch % PERIOD + 1)
}

/// Whether a word of generation `gen`, loaded before the shard's epoch read `now`,
/// is the state a booking made at epoch `booked` (read before the booking) was made
/// on: no epoch in `(booked, now]` has that generation (see the module docs).
#[inline]
pub(crate) fn within(gen: u16, booked: u64, now: u64) -> bool {
    let residue = u64::from(gen).wrapping_sub(1) % PERIOD;
    // How far back from `booked` the latest epoch of this generation lies.
    let back = (booked % PERIOD + PERIOD - residue) % PERIOD;
    now.saturating_sub(booked) + back < PERIOD
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_words_never_match_an_empty_slot() {
        for h in [0, 1, 0xFFFF, 0x1_0000, u64::MAX, 0xABCD_0000_0000_0000] {
            let p = probe_word(h);
            assert!(!holds(0, p), "{h:#x}");
            for e in [0, 1, 65_534, 65_535, u64::MAX - 1] {
                let w = word(p, e, (e % 16) as u8);
                assert_eq!(class_of(w), (e % 16) as u8);
                assert_ne!(w, 0);
                assert!(holds(w, p));
                assert!((1..=65_535).contains(&of(w)));
            }
        }
    }

    /// `within` against a brute force over epochs: a generation's word is accepted
    /// exactly when no epoch in `(booked, now]` carries that generation.
    #[test]
    fn within_accepts_exactly_when_no_later_epoch_has_the_generation() {
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..500 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let booked = rng % 400_000;
            let now = booked + (rng >> 20) % 140_000;
            let state_epoch = booked.saturating_sub((rng >> 40) % 140_000);
            let gen = of(word(probe_word(1 << 40), state_epoch, 3));
            let clash = (booked + 1..=now.min(booked + PERIOD + 1))
                .any(|e| of(word(probe_word(1 << 40), e, 3)) == gen);
            assert_eq!(
                within(gen, booked, now),
                !clash,
                "{booked} {now} {state_epoch}"
            );
        }
    }
}
