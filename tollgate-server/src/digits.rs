//! Decimal integers appended to strings on the hot path, without `format!`.

/// Appends `n` in decimal: a fraction of `format!`'s cost (no formatter, no intermediate
/// string), for what every call builds (counting keys, response headers).
pub fn push_int(out: &mut String, n: i64) {
    if n < 0 {
        out.push('-');
    }
    let mut n = n.unsigned_abs();
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &digits[at..] {
        out.push(char::from(d));
    }
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
