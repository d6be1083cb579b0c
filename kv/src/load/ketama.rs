//! libmemcached's ketama consistent hashing (the `KETAMA_WEIGHTED`
//! continuum with equal weights), so that a client picks the same server
//! for a key as libmemcached would.
//!
//! Each server gets 160 points on a 32-bit circle: 40 MD5 digests of the
//! string `host:port-N` (`host-N` when the port is 11211, as libmemcached
//! writes it), N = 0..40, each digest giving 4 points (its bytes 4x..4x+4
//! read little-endian). A key hashes to the first 4 bytes of its MD5 digest,
//! little-endian, and goes to the server of the first point at or after
//! that value, wrapping around to the first point.

use md5::{Digest, Md5};

/// Points per server.
pub const POINTS_PER_SERVER: usize = 160;
/// Points taken from one MD5 digest.
const POINTS_PER_HASH: usize = 4;

/// A ketama continuum over a list of servers.
#[derive(Debug, Clone)]
pub struct Ketama {
    /// (point, server index), sorted by point.
    points: Vec<(u32, usize)>,
}

fn md5(data: &[u8]) -> [u8; 16] {
    Md5::digest(data).into()
}

/// The 32-bit hash libmemcached's MD5 hash gives a key.
pub fn key_hash(key: &[u8]) -> u32 {
    let d = md5(key);
    u32::from_le_bytes([d[0], d[1], d[2], d[3]])
}

impl Ketama {
    /// The continuum for servers named `host:port`, in this order.
    pub fn new<S: AsRef<str>>(servers: &[S]) -> Ketama {
        let mut points = Vec::with_capacity(servers.len() * POINTS_PER_SERVER);
        for (i, s) in servers.iter().enumerate() {
            let s = s.as_ref();
            let base = match s.rsplit_once(':') {
                Some((host, "11211")) => host.to_string(),
                _ => s.to_string(),
            };
            for n in 0..POINTS_PER_SERVER / POINTS_PER_HASH {
                let d = md5(format!("{base}-{n}").as_bytes());
                for x in 0..POINTS_PER_HASH {
                    let p = u32::from_le_bytes([d[4 * x], d[4 * x + 1], d[4 * x + 2], d[4 * x + 3]]);
                    points.push((p, i));
                }
            }
        }
        points.sort_unstable();
        Ketama { points }
    }

    /// The index of the server for `key`.
    pub fn server(&self, key: &[u8]) -> usize {
        self.server_for_hash(key_hash(key))
    }

    /// The index of the server for a key hashing to `h`.
    pub fn server_for_hash(&self, h: u32) -> usize {
        if self.points.is_empty() {
            return 0;
        }
        let i = self.points.partition_point(|&(p, _)| p < h);
        self.points[if i == self.points.len() { 0 } else { i }].1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md5_known_vector() {
        // RFC 1321: MD5("abc") = 900150983cd24fb0d6963f7d28e17f72.
        assert_eq!(key_hash(b"abc"), u32::from_le_bytes([0x90, 0x01, 0x50, 0x98]));
    }

    #[test]
    fn points_and_wraparound() {
        let k = Ketama::new(&["127.0.0.1:11211", "127.0.0.1:11212"]);
        assert_eq!(k.points.len(), 2 * POINTS_PER_SERVER);
        let last = k.points.last().unwrap().0;
        if last < u32::MAX {
            assert_eq!(k.server_for_hash(last + 1), k.points[0].1);
        }
        assert_eq!(k.server_for_hash(0), k.points[0].1);
    }
}
