//! The limited keys of the distributed limiters ([`RedisKey`]), and their Redis key
//! names, written straight into the command that carries them ([`KeyName`]): no
//! `String` is built per request.

use redis::{RedisWrite, ToRedisArgs};
use std::fmt;
use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The bytes a [`RedisKey`] may format itself into: every integer (at most 40
/// characters) and every IP address (at most 45) fits.
///
/// # Example
///
/// ```
/// use tollgate::redis::{RedisKey, KEY_BUF};
///
/// let mut buf = [0u8; KEY_BUF];
/// assert_eq!(i128::MIN.key_bytes(&mut buf).len(), 40);
/// ```
pub const KEY_BUF: usize = 64;

/// A key the distributed limiters limit: text (`str`, `String`), bytes (`[u8]`,
/// `Vec<u8>`), an IP address, or an integer, written into the Redis key
/// `<prefix>:{<key>}` as its bytes (text and bytes as they are, addresses and integers
/// in their usual decimal text: `10.0.0.1`, `::1`, `42`), without allocating.
///
/// The same key given as `&str`, `String` or its bytes is the same Redis key; the
/// address `10.0.0.1` and the text `"10.0.0.1"` are too. Implement it for your own key
/// types by returning their bytes, or by formatting them into `buf`.
///
/// # Example
///
/// ```
/// use std::net::{IpAddr, Ipv4Addr};
/// use tollgate::redis::{RedisKey, KEY_BUF};
///
/// let mut buf = [0u8; KEY_BUF];
/// assert_eq!("alice".key_bytes(&mut buf), b"alice");
/// let ip = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
/// assert_eq!(ip.key_bytes(&mut buf), b"10.0.0.1");
/// assert_eq!(42u64.key_bytes(&mut buf), b"42");
///
/// // A key type of your own.
/// struct Tenant(u32);
/// impl RedisKey for Tenant {
///     fn key_bytes<'a>(&'a self, buf: &'a mut [u8; KEY_BUF]) -> &'a [u8] {
///         let n = self.0.key_bytes(buf).len();
///         buf.copy_within(0..n, 2);
///         buf[..2].copy_from_slice(b"t-");
///         &buf[..n + 2]
///     }
/// }
/// assert_eq!(Tenant(7).key_bytes(&mut buf), b"t-7");
/// ```
pub trait RedisKey {
    /// The key's bytes: borrowed from the key itself, or formatted into `buf`.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::redis::{RedisKey, KEY_BUF};
    ///
    /// let mut buf = [0u8; KEY_BUF];
    /// let ip: std::net::Ipv6Addr = "2001:db8::1".parse().unwrap();
    /// assert_eq!(ip.key_bytes(&mut buf), b"2001:db8::1");
    /// assert_eq!(b"raw"[..].key_bytes(&mut buf), b"raw");
    /// ```
    fn key_bytes<'a>(&'a self, buf: &'a mut [u8; KEY_BUF]) -> &'a [u8];
}

impl RedisKey for str {
    fn key_bytes<'a>(&'a self, _: &'a mut [u8; KEY_BUF]) -> &'a [u8] {
        self.as_bytes()
    }
}

impl RedisKey for String {
    fn key_bytes<'a>(&'a self, _: &'a mut [u8; KEY_BUF]) -> &'a [u8] {
        self.as_bytes()
    }
}

impl RedisKey for [u8] {
    fn key_bytes<'a>(&'a self, _: &'a mut [u8; KEY_BUF]) -> &'a [u8] {
        self
    }
}

impl RedisKey for Vec<u8> {
    fn key_bytes<'a>(&'a self, _: &'a mut [u8; KEY_BUF]) -> &'a [u8] {
        self
    }
}

impl<T: RedisKey + ?Sized> RedisKey for &T {
    fn key_bytes<'a>(&'a self, buf: &'a mut [u8; KEY_BUF]) -> &'a [u8] {
        (**self).key_bytes(buf)
    }
}

/// `value`'s `Display` text in `buf` (no allocation: the formatter writes into it).
fn display_into(buf: &mut [u8; KEY_BUF], value: impl fmt::Display) -> &[u8] {
    let mut cursor = std::io::Cursor::new(&mut buf[..]);
    // Every type formatted here fits KEY_BUF, so the write cannot run out of room.
    let _ = write!(cursor, "{value}");
    let n = cursor.position() as usize;
    &buf[..n]
}

macro_rules! display_keys {
    ($($t:ty),*) => {$(
        impl RedisKey for $t {
            fn key_bytes<'a>(&'a self, buf: &'a mut [u8; KEY_BUF]) -> &'a [u8] {
                display_into(buf, self)
            }
        }
    )*};
}

display_keys!(
    IpAddr, Ipv4Addr, Ipv6Addr, u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize
);

/// A Redis key name, `<prefix>:{<key>}` (exact mode) or `<prefix>:{<key>}:<window>`
/// (hybrid mode), written piece by piece into the command's buffer.
#[derive(Clone, Copy)]
pub(crate) struct KeyName<'a> {
    prefix: &'a str,
    key: &'a [u8],
    window: Option<u64>,
}

impl<'a> KeyName<'a> {
    /// The exact mode's key: `<prefix>:{<key>}`.
    pub(crate) fn exact(prefix: &'a str, key: &'a [u8]) -> Self {
        KeyName {
            prefix,
            key,
            window: None,
        }
    }

    /// The hybrid mode's key of window `window`: `<prefix>:{<key>}:<window>`.
    pub(crate) fn hybrid(prefix: &'a str, key: &'a [u8], window: u64) -> Self {
        KeyName {
            prefix,
            key,
            window: Some(window),
        }
    }

    /// Writes the name to `w`.
    fn write_to(&self, w: &mut impl std::io::Write) -> std::io::Result<()> {
        w.write_all(self.prefix.as_bytes())?;
        w.write_all(b":{")?;
        w.write_all(self.key)?;
        w.write_all(b"}")?;
        if let Some(k) = self.window {
            write!(w, ":{k}")?;
        }
        Ok(())
    }

    /// The name as text (for errors and the public `redis_key`; bytes that are not
    /// UTF-8 appear as U+FFFD).
    pub(crate) fn to_lossy_string(self) -> String {
        let mut bytes = Vec::new();
        // Writing to a Vec cannot fail.
        let _ = self.write_to(&mut bytes);
        String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into())
    }

    /// The name's Redis Cluster hash slot, computed without building the name. The
    /// prefix holds no brace (see `check_prefix`), so the first `{` is the one before
    /// the key: the hash tag is the key up to its first `}`, or the whole name when
    /// that is empty.
    pub(crate) fn slot(&self) -> u16 {
        let tag = match self.key.iter().position(|&b| b == b'}') {
            Some(close) => &self.key[..close],
            None => self.key,
        };
        if !tag.is_empty() {
            return super::crc16_slot(&[tag]);
        }
        let mut digits = [0u8; KEY_BUF];
        let window: &[u8] = match self.window {
            Some(k) => {
                let mut cursor = std::io::Cursor::new(&mut digits[..]);
                // ":" and at most 20 digits.
                let _ = write!(cursor, ":{k}");
                let n = cursor.position() as usize;
                &digits[..n]
            }
            None => b"",
        };
        super::crc16_slot(&[self.prefix.as_bytes(), b":{", self.key, b"}", window])
    }
}

impl ToRedisArgs for KeyName<'_> {
    fn write_redis_args<W>(&self, out: &mut W)
    where
        W: ?Sized + RedisWrite,
    {
        let mut w = out.writer_for_next_arg();
        // Writing into a command's buffer cannot fail.
        let _ = self.write_to(&mut w);
    }
}

impl fmt::Debug for KeyName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_lossy_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The name written into a command is the name the old `format!` built, and its
    /// slot is the slot of that name.
    #[test]
    fn names_and_slots_match_the_formatted_names() {
        for key in ["alice", "", "}", "a}b", "{x}", "{}", "user:{42}", "é"] {
            let exact = KeyName::exact("tg", key.as_bytes());
            let expected = format!("tg:{{{key}}}");
            assert_eq!(exact.to_lossy_string(), expected);
            assert_eq!(exact.to_redis_args(), vec![expected.clone().into_bytes()]);
            assert_eq!(
                exact.slot(),
                crate::redis::hash_slot(expected.as_bytes()),
                "{key:?}"
            );
            for window in [0, 7, 720, u64::MAX] {
                let hybrid = KeyName::hybrid("h", key.as_bytes(), window);
                let expected = format!("h:{{{key}}}:{window}");
                assert_eq!(hybrid.to_redis_args(), vec![expected.clone().into_bytes()]);
                assert_eq!(
                    hybrid.slot(),
                    crate::redis::hash_slot(expected.as_bytes()),
                    "{key:?} {window}"
                );
            }
        }
    }

    #[test]
    fn keys_of_every_type_write_their_text() {
        let mut buf = [0u8; KEY_BUF];
        assert_eq!(String::from("bob").key_bytes(&mut buf), b"bob");
        assert_eq!((&"bob").key_bytes(&mut buf), b"bob");
        assert_eq!(b"raw\xff"[..].key_bytes(&mut buf), b"raw\xff");
        assert_eq!(vec![1u8, 2].key_bytes(&mut buf), &[1, 2]);
        assert_eq!(
            u128::MAX.key_bytes(&mut buf),
            u128::MAX.to_string().as_bytes()
        );
        assert_eq!(
            i128::MIN.key_bytes(&mut buf),
            i128::MIN.to_string().as_bytes()
        );
        let v6: Ipv6Addr = "1111:2222:3333:4444:5555:6666:255.255.255.255"
            .parse()
            .unwrap();
        assert_eq!(v6.key_bytes(&mut buf), v6.to_string().as_bytes());
        assert_eq!(IpAddr::V6(Ipv6Addr::LOCALHOST).key_bytes(&mut buf), b"::1");
    }
}
