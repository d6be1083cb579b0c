//! `slabs reassign`: memcached's replies, for its default slab classes
//! (see [`crate::store::classes`]).

use crate::store::classes;

/// memcached's reply to `slabs reassign <src> <dst>` when no class has a
/// page to spare (always so here: nothing is allocated by class).
pub fn reassign_reply(src: i32, dst: i32) -> &'static [u8] {
    let largest = classes::largest() as i32;
    if src == dst {
        b"SAME src and dst class are identical\r\n"
    } else if !(0..=largest).contains(&src) || !(0..=largest).contains(&dst) {
        // memcached picks a source for -1 and finds none.
        b"BADCLASS invalid src or dst class id\r\n"
    } else {
        b"NOSPARE source class has no spare pages\r\n"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies() {
        assert_eq!(reassign_reply(1, 1), b"SAME src and dst class are identical\r\n");
        assert_eq!(reassign_reply(40, 1), b"BADCLASS invalid src or dst class id\r\n");
        assert_eq!(reassign_reply(-1, 1), b"BADCLASS invalid src or dst class id\r\n");
        assert_eq!(reassign_reply(0, 39), b"NOSPARE source class has no spare pages\r\n");
    }
}
