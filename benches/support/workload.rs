//! Key streams for the benchmarks, generated before anything is timed.

#![allow(dead_code)]

/// A workload: a name and a precomputed stream of keys (length a power of two).
pub(crate) struct Workload {
    pub(crate) name: &'static str,
    pub(crate) distinct: usize,
    pub(crate) keys: Vec<u64>,
}

/// Length of every key stream: large enough that 1M-key streams touch most keys.
pub(crate) const STREAM: usize = 1 << 21;

impl Workload {
    /// One key, every decision on it.
    pub(crate) fn hot() -> Self {
        Workload {
            name: "hot key",
            distinct: 1,
            keys: vec![42; 1024],
        }
    }

    /// `n` keys drawn uniformly; the stream opens with every key once, in random
    /// order, so that populating from it inserts all `n`.
    pub(crate) fn uniform(name: &'static str, n: usize, seed: u64) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut all: Vec<u64> = (0..n as u64).collect();
        rng.shuffle(&mut all);
        all.truncate(STREAM);
        let rest = STREAM - all.len();
        let mut keys: Vec<u64> = all.into_iter().map(mix).collect();
        keys.extend((0..rest).map(|_| mix(rng.u64(0..n as u64))));
        Workload {
            name,
            distinct: n,
            keys,
        }
    }

    /// `n` keys drawn from a Zipf distribution with exponent `s` (rank 1 most often).
    pub(crate) fn zipf(name: &'static str, n: usize, s: f64, seed: u64) -> Self {
        let mut cdf = Vec::with_capacity(n);
        let mut acc = 0.0;
        for rank in 1..=n {
            acc += 1.0 / (rank as f64).powf(s);
            cdf.push(acc);
        }
        let total = acc;
        let mut rng = fastrand::Rng::with_seed(seed);
        let keys = (0..STREAM)
            .map(|_| {
                let u = rng.f64() * total;
                let rank = cdf.partition_point(|&c| c < u).min(n - 1);
                mix(rank as u64)
            })
            .collect();
        Workload {
            name,
            distinct: n,
            keys,
        }
    }

    /// The key stream's index mask.
    pub(crate) fn mask(&self) -> usize {
        self.keys.len() - 1
    }
}

/// Spreads small integers over u64 like real ids (so no limiter gets sequential keys).
pub(crate) fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `n` distinct keys, each once, in random order, none of them among the keys of
/// [`Workload::uniform`] (whose keys are `mix(0..n)`) when `offset` is at least 2^40:
/// a stream of keys the limiter has never seen.
pub(crate) fn fresh_keys(n: usize, offset: u64, seed: u64) -> Vec<u64> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut keys: Vec<u64> = (0..n as u64).map(|i| mix(offset + i)).collect();
    rng.shuffle(&mut keys);
    keys
}
