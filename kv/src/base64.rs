//! The base64 coding of binary keys in meta commands (the `b` flag), with
//! memcached's exact decoding rules: characters outside the alphabet are
//! skipped, the number of alphabet characters must be a multiple of four,
//! and decoding stops at the first block with padding.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// The value of a base64 character (`=` counts as 0), or `None` for a
/// character decoding skips.
fn value(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        b'=' => Some(0),
        _ => None,
    }
}

/// Appends the base64 encoding of `src`, padded with `=`.
pub fn encode_into(src: &[u8], out: &mut Vec<u8>) {
    let sym = |i: u8| ALPHABET[usize::from(i & 0x3f)];
    let mut chunks = src.chunks_exact(3);
    for c in &mut chunks {
        out.extend_from_slice(&[
            sym(c[0] >> 2),
            sym((c[0] << 4) | (c[1] >> 4)),
            sym((c[1] << 2) | (c[2] >> 6)),
            sym(c[2]),
        ]);
    }
    match *chunks.remainder() {
        [a] => out.extend_from_slice(&[sym(a >> 2), sym(a << 4), b'=', b'=']),
        [a, b] => out.extend_from_slice(&[sym(a >> 2), sym((a << 4) | (b >> 4)), sym(b << 2), b'=']),
        _ => {}
    }
}

/// The base64 encoding of `src`.
pub fn encode(src: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(src.len().div_ceil(3) * 4);
    encode_into(src, &mut out);
    out
}

/// Decodes `src` as memcached does; `None` where memcached's decoder
/// returns 0 bytes (which it treats as failure).
pub fn decode(src: &[u8]) -> Option<Vec<u8>> {
    let count = src.iter().filter(|&&c| value(c).is_some()).count();
    if count == 0 || count % 4 != 0 {
        return None;
    }
    let mut out = Vec::with_capacity(count / 4 * 3);
    let mut block = [0u8; 4];
    let mut n = 0;
    let mut pad = 0;
    for &c in src {
        let Some(v) = value(c) else { continue };
        if c == b'=' {
            pad += 1;
        }
        block[n] = v;
        n += 1;
        if n == 4 {
            out.extend_from_slice(&[
                (block[0] << 2) | (block[1] >> 4),
                (block[1] << 4) | (block[2] >> 2),
                (block[2] << 6) | block[3],
            ]);
            n = 0;
            if pad > 0 {
                match pad {
                    1 => out.truncate(out.len() - 1),
                    2 => out.truncate(out.len() - 2),
                    _ => return None,
                }
                break;
            }
        }
    }
    if out.is_empty() {
        None
    } else {
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_values() {
        assert_eq!(encode(b"foo"), b"Zm9v");
        assert_eq!(encode(b"fo"), b"Zm8=");
        assert_eq!(encode(b"f"), b"Zg==");
        assert_eq!(encode(b""), b"");
        assert_eq!(decode(b"Zm9v").as_deref(), Some(&b"foo"[..]));
        assert_eq!(decode(b"Zm8=").as_deref(), Some(&b"fo"[..]));
        assert_eq!(decode(b"Zg==").as_deref(), Some(&b"f"[..]));
        // Characters outside the alphabet are skipped.
        assert_eq!(decode(b"Z.m9v").as_deref(), Some(&b"foo"[..]));
        // Not a multiple of four, nothing at all, too much padding.
        assert_eq!(decode(b"foo"), None);
        assert_eq!(decode(b"..."), None);
        assert_eq!(decode(b"Z==="), None);
        // Decoding stops after the first padded block.
        assert_eq!(decode(b"Zg==Zm9v").as_deref(), Some(&b"f"[..]));
    }

    proptest! {
        #[test]
        fn round_trips(bytes in proptest::collection::vec(any::<u8>(), 1..300)) {
            prop_assert_eq!(decode(&encode(&bytes)), Some(bytes));
        }

        #[test]
        fn arbitrary_input_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Some(d) = decode(&bytes) {
                prop_assert!(d.len() <= bytes.len());
            }
        }
    }
}
