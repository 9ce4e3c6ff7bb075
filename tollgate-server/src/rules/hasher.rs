//! The hash of the compiled configuration's maps (domains, descriptor keys, exact
//! values): FNV-1a, a fraction of the standard library's SipHash on the short strings
//! every request looks up (its domain, then one key and perhaps one value per entry).
//!
//! SipHash's keyed hashing guards a map against keys chosen to collide; these maps hold
//! only what the operator's configuration files name, and a request only looks names up
//! in them (an unknown domain or value is never inserted), so a request cannot build the
//! long probe sequences a collision attack needs.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A map of the compiled configuration, by name.
///
/// ```
/// use tollgate_server::rules::hasher::ConfigMap;
///
/// let mut domains: ConfigMap<u32> = ConfigMap::default();
/// domains.insert("bench".to_string(), 1);
/// assert_eq!(domains.get("bench"), Some(&1));
/// ```
pub type ConfigMap<V> = HashMap<String, V, BuildHasherDefault<Fnv1a>>;

/// 64-bit FNV-1a.
///
/// ```
/// use std::hash::{BuildHasher, BuildHasherDefault};
/// use tollgate_server::rules::hasher::Fnv1a;
///
/// let h = BuildHasherDefault::<Fnv1a>::default();
/// assert_eq!(h.hash_one("bench"), h.hash_one(String::from("bench")));
/// assert_ne!(h.hash_one("bench"), h.hash_one("bench2"));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv1a {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The published FNV-1a 64 test vectors (the bytes alone, as `write` sees them).
    #[test]
    fn fnv1a_test_vectors() {
        let h = |s: &[u8]| {
            let mut f = Fnv1a::default();
            f.write(s);
            f.finish()
        };
        assert_eq!(h(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(h(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(h(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn a_config_map_finds_what_it_holds() {
        let mut m: ConfigMap<u32> = ConfigMap::default();
        for i in 0..1_000 {
            m.insert(format!("value_{i}"), i);
        }
        assert!((0..1_000).all(|i| m.get(&format!("value_{i}")) == Some(&i)));
        assert_eq!(m.get("value_1000"), None);
    }
}
