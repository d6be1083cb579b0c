//! Number parsing with memcached's exact acceptance rules.
//!
//! memcached parses numbers with C's `strtoull`/`strtol` followed by a check
//! on the character after the digits (its `safe_strto*` helpers). That
//! accepts leading whitespace and a sign, rejects overflow, and then stores
//! the result in a narrower type without a range check (so a 64-bit parse
//! is truncated to 32 bits). Clients depend on these quirks only by
//! accident, but replies must match, so they are reproduced here.

/// C's `isspace` in the "C" locale.
pub fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// The part of a token C code sees: up to the first NUL byte.
pub fn c_str(token: &[u8]) -> &[u8] {
    match memchr::memchr(0, token) {
        Some(i) => &token[..i],
        None => token,
    }
}

/// What `strtoull`/`strtol` read from the start of `s`: the magnitude (or
/// `None` on overflow), whether a minus sign was seen, and where the digits
/// end. `None` when no digits were found.
struct Scan {
    magnitude: Option<u64>,
    negative: bool,
    end: usize,
}

fn scan(s: &[u8]) -> Option<Scan> {
    let mut i = 0;
    while i < s.len() && is_c_space(s[i]) {
        i += 1;
    }
    let mut negative = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        negative = s[i] == b'-';
        i += 1;
    }
    let start = i;
    let mut magnitude = Some(0u64);
    while i < s.len() && s[i].is_ascii_digit() {
        magnitude = magnitude.and_then(|m| m.checked_mul(10)).and_then(|m| m.checked_add(u64::from(s[i] - b'0')));
        i += 1;
    }
    if i == start {
        return None;
    }
    Some(Scan { magnitude, negative, end: i })
}

/// The trailing check shared by all `safe_strto*` helpers: the digits must
/// be followed by the end of the string or by whitespace.
fn ends_well(s: &[u8], end: usize) -> bool {
    end == s.len() || is_c_space(s[end])
}

/// memcached's `safe_strtoull`: an unsigned 64-bit number.
pub fn safe_strtoull(s: &[u8]) -> Option<u64> {
    let s = c_str(s);
    let sc = scan(s)?;
    let m = sc.magnitude?;
    if !ends_well(s, sc.end) {
        return None;
    }
    let v = if sc.negative { m.wrapping_neg() } else { m };
    if (v as i64) < 0 && memchr::memchr(b'-', &s[..sc.end]).is_some() {
        return None;
    }
    Some(v)
}

/// memcached's `safe_strtoul` on a 64-bit system: parsed as 64 bits, then
/// truncated to 32.
pub fn safe_strtoul(s: &[u8]) -> Option<u32> {
    safe_strtoull(s).map(|v| v as u32)
}

/// memcached's `safe_strtol`: C `strtol` (64-bit `long`), then truncated to
/// a 32-bit `int`.
pub fn safe_strtol(s: &[u8]) -> Option<i32> {
    let s = c_str(s);
    let sc = scan(s)?;
    let m = sc.magnitude?;
    let v: i64 = if sc.negative {
        if m > 1u64 << 63 {
            return None;
        }
        (m as i64).wrapping_neg()
    } else {
        i64::try_from(m).ok()?
    };
    if !ends_well(s, sc.end) {
        return None;
    }
    Some(v as i32)
}

/// The numeric value of an item's data for incr/decr: the data as memcached
/// stores it, followed by `\r\n`.
pub fn item_value(data: &[u8]) -> Option<u64> {
    // Leading whitespace that runs into the terminating "\r\n" finds no digit.
    let sc = scan(data)?;
    let m = sc.magnitude?;
    // The byte after the data is '\r', which counts as whitespace.
    if !ends_well(data, sc.end) {
        return None;
    }
    let v = if sc.negative { m.wrapping_neg() } else { m };
    if (v as i64) < 0 && memchr::memchr(b'-', &data[..sc.end]).is_some() {
        return None;
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn strtoull_like_memcached() {
        assert_eq!(safe_strtoull(b"0"), Some(0));
        assert_eq!(safe_strtoull(b"+5"), Some(5));
        assert_eq!(safe_strtoull(b"\t7"), Some(7));
        assert_eq!(safe_strtoull(b"00001"), Some(1));
        assert_eq!(safe_strtoull(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(safe_strtoull(b"18446744073709551616"), None);
        assert_eq!(safe_strtoull(b"-1"), None);
        assert_eq!(safe_strtoull(b"-0"), Some(0));
        assert_eq!(safe_strtoull(b"abc"), None);
        assert_eq!(safe_strtoull(b""), None);
        assert_eq!(safe_strtoull(b"12a"), None);
        assert_eq!(safe_strtoull(b"12\0garbage"), Some(12));
    }

    #[test]
    fn strtol_truncates_like_memcached() {
        assert_eq!(safe_strtol(b"4294967297"), Some(1));
        assert_eq!(safe_strtol(b"4294967296"), Some(0));
        assert_eq!(safe_strtol(b"2147483648"), Some(i32::MIN));
        assert_eq!(safe_strtol(b"-1"), Some(-1));
        assert_eq!(safe_strtol(b"99999999999999999999"), None);
        assert_eq!(safe_strtol(b"-9223372036854775808"), Some(0));
        assert_eq!(safe_strtol(b"x"), None);
    }

    #[test]
    fn flags_truncate() {
        assert_eq!(safe_strtoul(b"4294967296"), Some(0));
        assert_eq!(safe_strtoul(b"4294967295"), Some(u32::MAX));
        assert_eq!(safe_strtoul(b"-1"), None);
    }

    #[test]
    fn item_values() {
        assert_eq!(item_value(b"10"), Some(10));
        assert_eq!(item_value(b" 12"), Some(12));
        assert_eq!(item_value(b"9 "), Some(9));
        assert_eq!(item_value(b"12 abc"), Some(12));
        assert_eq!(item_value(b"12a"), None);
        assert_eq!(item_value(b"-1"), None);
        assert_eq!(item_value(b""), None);
        assert_eq!(item_value(b"123456789012345678901"), None);
    }

    proptest! {
        #[test]
        fn decimal_roundtrip(v: u64) {
            prop_assert_eq!(safe_strtoull(v.to_string().as_bytes()), Some(v));
            prop_assert_eq!(item_value(v.to_string().as_bytes()), Some(v));
        }

        #[test]
        fn never_panics(s in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = safe_strtoull(&s);
            let _ = safe_strtol(&s);
            let _ = item_value(&s);
        }
    }
}
