//! Active messages that carry a send between hosts (the `am` path of
//! `hosts.rs`): the header that says where each piece goes, made by the
//! sender, and its checked reading and writing at the target, which runs
//! inside a progress of the target's receiver worker.
//!
//! Header: the count of pieces, then each piece's offset in the target
//! host's region and its length, all little-endian `u64`s; the top bit of
//! a length marks a *detached* piece, a whole payload that the target
//! keeps in a buffer of its own beside the region instead of copying it
//! there (`fabric::landed`: the reader then takes the buffer itself,
//! which saves the receiver one copy of each large payload). The data is
//! the pieces' bytes, one after the other.

use std::sync::atomic::{AtomicU64, Ordering};

use super::landed;
use super::{Piece, MAX_PIECES};

/// The active message that carries a send ([`land`]).
pub(crate) const AM_LAND: u32 = 7;

/// Bytes of an active message's header: the count of pieces, then each
/// piece's offset in the region and length (little-endian `u64`s).
pub(crate) const AM_HEADER_MAX: usize = 8 + 16 * MAX_PIECES;

// UCX 1.13 over TCP aborts the process on an active message whose header
// reaches 8 KiB (measured: 8,000 bytes pass, 8,192 do not); stay far below.
// `fabric::ucx::tests` sends a header of this size with the most pieces.
const _: () = assert!(AM_HEADER_MAX <= 4096, "an active message's header must stay far below UCX's 8 KiB");

/// The bit of a piece's length word that marks it detached.
const DETACHED: u64 = 1 << 63;

/// A piece the header names: its offset in the region, its length, and
/// whether it is detached.
type Named = (usize, usize, bool);

/// The header of a send of `pieces`: as long as it needs to be, so a send
/// of few pieces writes and keeps only what it uses.
pub(crate) fn header(pieces: &[Piece]) -> Vec<u8> {
    debug_assert!(!pieces.is_empty() && pieces.len() <= MAX_PIECES);
    let mut h = Vec::with_capacity(8 + 16 * pieces.len());
    h.extend_from_slice(&(pieces.len() as u64).to_le_bytes());
    for p in pieces {
        h.extend_from_slice(&(p.offset as u64).to_le_bytes());
        let len = p.len as u64 | if p.detached { DETACHED } else { 0 };
        h.extend_from_slice(&len.to_le_bytes());
    }
    h
}

/// Writes an active message of [`AM_LAND`] into this process's mapping of
/// its host's region (`base`, `len` bytes): each piece named by the
/// header, in order. The message comes from a process of this program (its
/// peers are authenticated before any endpoint is made), but is checked
/// all the same: a header that does not describe the data, or a piece
/// outside the region, is refused whole and logged. A detached piece is
/// kept beside the region, under its address there (see
/// `fabric::landed`); every other piece replaces what was kept over its
/// range.
///
/// # Safety
/// `base..base + len` must be memory mapped for the life of the process
/// that no Rust reference covers (a host's region, whose readers use raw
/// pointers and atomics).
pub(crate) unsafe fn land(base: usize, len: usize, header: &[u8], data: Option<&[u8]>) {
    match pieces_of(len, header, data) {
        Ok(pieces) => {
            let data = data.unwrap_or_default();
            let count = pieces.iter().flatten().count();
            let mut at = 0;
            for (i, (offset, n, detached)) in pieces.into_iter().flatten().enumerate() {
                let dst = (base + offset) as *mut u8;
                if detached {
                    landed::keep(base + offset, data[at..at + n].to_vec());
                    at += n;
                    continue;
                }
                landed::forget(base + offset, n);
                if i + 1 < count {
                    // SAFETY: `offset..offset + n` lies in the region
                    // (checked by `pieces_of`), which is the caller's to
                    // write. A piece before the last (a pair's bulk area)
                    // is read by nobody until the last piece (the slot that
                    // names it) has landed: the slot protocol gives the
                    // sender these bytes until the reader answers.
                    unsafe { std::ptr::copy_nonoverlapping(data[at..].as_ptr(), dst, n) };
                } else {
                    // SAFETY: in the region, as above; the last piece (a
                    // landing slot) may be read while it is written, and
                    // its readers take it only when its checksum matches.
                    unsafe { write_region(dst, &data[at..at + n]) };
                }
                at += n;
            }
        }
        Err(why) => tracing::error!("gossamer: a message from another host was refused: {why}"),
    }
}

/// The pieces (offset, length) an active message's header names, checked
/// against the data and a region of `len` bytes.
fn pieces_of(len: usize, header: &[u8], data: Option<&[u8]>) -> Result<[Option<Named>; MAX_PIECES], String> {
    let data = data.ok_or("it came by rendezvous, not eagerly")?;
    let word = |i: usize| u64::from_le_bytes(header[8 * i..8 * i + 8].try_into().expect("8 bytes"));
    if header.len() < 8 || header.len() % 8 != 0 {
        return Err(format!("a header of {} bytes", header.len()));
    }
    let n = word(0);
    if n == 0 || n > MAX_PIECES as u64 || header.len() != 8 + 16 * n as usize {
        return Err(format!("{n} pieces in a header of {} bytes", header.len()));
    }
    let mut out = [None; MAX_PIECES];
    let mut total = 0usize;
    let count = n as usize;
    for (i, o) in out.iter_mut().enumerate().take(count) {
        let (offset, n) = (word(1 + 2 * i), word(2 + 2 * i));
        let detached = n & DETACHED != 0;
        let n = n & !DETACHED;
        if detached && i + 1 == count {
            return Err("a detached slot".into());
        }
        let end = offset.checked_add(n).filter(|&e| e <= len as u64);
        if end.is_none() {
            return Err(format!("a piece of {n} bytes at {offset}, past the region's {len}"));
        }
        total = total.checked_add(n as usize).ok_or("pieces too long")?;
        *o = Some((offset as usize, n as usize, detached));
    }
    if total != data.len() {
        return Err(format!("pieces of {total} bytes in all with {} bytes of data", data.len()));
    }
    Ok(out)
}

/// Copies `src` to `dst` in shared memory that other threads may read at
/// the same time (a landing slot, the last piece of a send): in whole
/// words with atomic stores when both are word-aligned, which a landing
/// slot's range is.
///
/// # Safety
/// `dst..dst + src.len()` must be writable and not be Rust memory that
/// anything holds a reference to.
unsafe fn write_region(dst: *mut u8, src: &[u8]) {
    if (dst as usize) % 8 == 0 && src.len() % 8 == 0 {
        for (i, w) in src.chunks_exact(8).enumerate() {
            let v = u64::from_ne_bytes(w.try_into().expect("8 bytes"));
            // SAFETY: aligned and inside the range, per the caller.
            unsafe { (*dst.add(8 * i).cast::<AtomicU64>()).store(v, Ordering::Release) };
        }
    } else {
        // SAFETY: per the caller; `src` is not in the region.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(offset: usize, len: usize) -> Piece {
        Piece { src: std::ptr::null(), len, offset, detached: false }
    }

    #[test]
    fn a_header_names_its_pieces() {
        let h = header(&[piece(64, 24), piece(4096, 8)]);
        assert_eq!(h.len(), 40);
        let named =
            |r: [Option<Named>; MAX_PIECES]| r.into_iter().flatten().map(|(o, n, _)| (o, n)).collect::<Vec<_>>();
        assert_eq!(pieces_of(8192, &h[..], Some(&[0; 32])).map(named), Ok(vec![(64, 24), (4096, 8)]));
        let h = header(&[piece(0, 0)]);
        assert_eq!(pieces_of(8, &h[..], Some(&[])).map(named), Ok(vec![(0, 0)]));
        let all: Vec<Piece> = (0..MAX_PIECES).map(|i| piece(100 * i, 10)).collect();
        let h = header(&all);
        let want: Vec<(usize, usize)> = (0..MAX_PIECES).map(|i| (100 * i, 10)).collect();
        assert_eq!(pieces_of(100 * MAX_PIECES, &h[..], Some(&[0; 10 * MAX_PIECES])).map(named), Ok(want));
    }

    #[test]
    fn a_header_that_does_not_fit_is_refused() {
        let h = header(&[piece(64, 24), piece(4096, 8)]);
        // Past the region, wrong data length, rendezvous, a torn header.
        assert!(pieces_of(4100, &h[..], Some(&[0; 32])).unwrap_err().contains("past the region"));
        assert!(pieces_of(8192, &h[..], Some(&[0; 31])).unwrap_err().contains("bytes of data"));
        assert!(pieces_of(8192, &h[..], None).unwrap_err().contains("rendezvous"));
        assert!(pieces_of(8192, &h[..h.len() - 8], Some(&[0; 32])).is_err());
        assert!(pieces_of(8192, &h[..7], Some(&[])).is_err());
        // A count of 0, or more than a send has.
        let mut z = h;
        z[..8].copy_from_slice(&0u64.to_le_bytes());
        assert!(pieces_of(8192, &z[..8], Some(&[])).is_err());
        let mut m = [0u8; 8 + 16 * (MAX_PIECES + 1)];
        m[..8].copy_from_slice(&((MAX_PIECES + 1) as u64).to_le_bytes());
        assert!(pieces_of(8192, &m, Some(&[])).is_err());
        // An offset whose end overflows.
        let mut o = header(&[piece(0, 16)]);
        o[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(pieces_of(8192, &o[..], Some(&[0; 16])).is_err());
    }

    #[test]
    fn landing_writes_each_piece_where_the_header_says() {
        let mut region = vec![0u64; 64];
        let base = region.as_mut_ptr() as usize;
        let data: Vec<u8> = (1..=29).collect();
        // 5 bytes, unaligned, then 24 bytes as words.
        let h = header(&[piece(3, 5), piece(64, 24)]);
        // SAFETY: `region` is 512 bytes, not borrowed during the call.
        unsafe { land(base, 512, &h[..], Some(&data)) };
        let bytes: Vec<u8> = region.iter().flat_map(|w| w.to_ne_bytes()).collect();
        assert_eq!(&bytes[3..8], &data[..5]);
        assert_eq!(&bytes[64..88], &data[5..]);
        assert!(bytes[..3].iter().chain(&bytes[8..64]).chain(&bytes[88..]).all(|&b| b == 0));
        // Refused whole: nothing written.
        let h = header(&[piece(16, 8), piece(510, 8)]);
        // SAFETY: as above.
        unsafe { land(base, 512, &h[..], Some(&[9; 16])) };
        assert_eq!(region[2], 0);
    }

    #[test]
    fn a_detached_piece_is_kept_beside_the_region() {
        let mut region = vec![0u64; 64];
        let base = region.as_mut_ptr() as usize;
        let data: Vec<u8> = (1..=40).collect();
        let payload = Piece { detached: true, ..piece(64, 32) };
        let h = header(&[payload, piece(256, 8)]);
        let named = pieces_of(512, &h[..], Some(&data)).unwrap();
        assert_eq!(named[..2], [Some((64, 32, true)), Some((256, 8, false))]);
        // SAFETY: `region` is 512 bytes, not borrowed during the call.
        unsafe { land(base, 512, &h[..], Some(&data)) };
        assert!(region[8..12].iter().all(|&w| w == 0), "not written into the region");
        assert_eq!(region[32].to_ne_bytes()[..], data[32..]);
        assert_eq!(landed::take(base + 64, 32), Ok(Some(data[..32].to_vec())));
        // Kept, then replaced by bytes landing in the region over it.
        // SAFETY: as above.
        unsafe { land(base, 512, &h[..], Some(&data)) };
        let h2 = header(&[piece(64, 8), piece(256, 8)]);
        // SAFETY: as above.
        unsafe { land(base, 512, &h2[..], Some(&[3; 16])) };
        assert_eq!(landed::take(base + 64, 32), Ok(None));
        assert_eq!(region[8], u64::from_ne_bytes([3; 8]));
        // A slot (the last piece) cannot be detached.
        let h3 = header(&[Piece { detached: true, ..piece(0, 8) }]);
        assert!(pieces_of(512, &h3[..], Some(&[0; 8])).unwrap_err().contains("detached slot"));
    }

    #[cfg(not(miri))]
    proptest::proptest! {
        /// Any header and data: no panic, and what is accepted lies in the
        /// region and accounts for every byte of the data.
        #[test]
        fn any_header_is_checked(
            header in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
            count in 0u64..4,
            words in proptest::collection::vec((0u64..10_000, proptest::prelude::any::<bool>()), 0..6),
            data_len in 0usize..20_000,
            len in 0usize..20_000,
        ) {
            let data = vec![0u8; data_len];
            let _ = pieces_of(len, &header, Some(&data));
            let mut h = count.to_le_bytes().to_vec();
            for (i, &(w, flag)) in words.iter().enumerate() {
                // Lengths (odd words) may carry the detached bit.
                let w = if i % 2 == 1 && flag { w | DETACHED } else { w };
                h.extend_from_slice(&w.to_le_bytes());
            }
            if let Ok(ps) = pieces_of(len, &h, Some(&data)) {
                let named: Vec<Named> = ps.into_iter().flatten().collect();
                let mut total = 0;
                for &(o, n, _) in &named {
                    proptest::prop_assert!(o + n <= len);
                    total += n;
                }
                proptest::prop_assert_eq!(total, data_len);
                proptest::prop_assert!(!named.last().is_some_and(|p| p.2), "a detached slot was accepted");
            }
        }
    }
}
