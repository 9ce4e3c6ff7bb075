//! Decimal integers appended to strings on the hot path, without `format!`.

/// Appends `n` in decimal: a fraction of `format!`'s cost (no formatter, no intermediate
/// string), for what every call builds (counting keys, response headers). The digits
/// come from `itoa` (two at a time, into a stack buffer) and are appended in one copy.
///
/// ```
/// let mut s = String::from("q=");
/// tollgate_server::digits::push_int(&mut s, 1_000_000);
/// assert_eq!(s, "q=1000000");
/// ```
pub fn push_int(out: &mut String, n: i64) {
    out.push_str(itoa::Buffer::new().format(n));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers() {
        for n in [0, 7, 10, 42, 4_294_967_295, i64::MAX, -1, i64::MIN] {
            let mut s = String::new();
            push_int(&mut s, n);
            assert_eq!(s, n.to_string());
        }
    }
}
