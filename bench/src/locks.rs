//! The lock baselines behind one trait: `std::sync::Mutex`,
//! `parking_lot::Mutex`, a spinlock (`spin`), and an MCS queue lock
//! (`mcslock`, spinning waiters), plus cache-line padding for lock arrays.

use std::fmt;

/// A lock protecting a `T`.
pub trait Lock<T>: Send + Sync {
    fn new(value: T) -> Self;
    /// Runs `f` on the value while holding the lock.
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R;
}

impl<T: Send> Lock<T> for std::sync::Mutex<T> {
    fn new(value: T) -> Self {
        std::sync::Mutex::new(value)
    }
    #[inline]
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl<T: Send> Lock<T> for parking_lot::Mutex<T> {
    fn new(value: T) -> Self {
        parking_lot::Mutex::new(value)
    }
    #[inline]
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.lock())
    }
}

impl<T: Send> Lock<T> for spin::Mutex<T> {
    fn new(value: T) -> Self {
        spin::Mutex::new(value)
    }
    #[inline]
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.lock())
    }
}

impl<T: Send> Lock<T> for mcslock::raw::spins::Mutex<T> {
    fn new(value: T) -> Self {
        mcslock::raw::spins::Mutex::new(value)
    }
    #[inline]
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.lock_then(f)
    }
}

/// The lock baselines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    Std,
    ParkingLot,
    Spin,
    Mcs,
}

impl LockKind {
    #[cfg(test)]
    pub const ALL: [LockKind; 4] = [LockKind::Std, LockKind::ParkingLot, LockKind::Spin, LockKind::Mcs];

    pub fn name(self) -> &'static str {
        match self {
            LockKind::Std => "std-mutex",
            LockKind::ParkingLot => "parking-lot",
            LockKind::Spin => "spin",
            LockKind::Mcs => "mcs",
        }
    }
}

impl fmt::Display for LockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Runs `$body` with `$L` bound to the lock type of `$kind` over `$T`.
#[macro_export]
macro_rules! with_lock_type {
    ($kind:expr, $T:ty, $L:ident => $body:expr) => {
        match $kind {
            $crate::locks::LockKind::Std => {
                type $L = std::sync::Mutex<$T>;
                $body
            }
            $crate::locks::LockKind::ParkingLot => {
                type $L = parking_lot::Mutex<$T>;
                $body
            }
            $crate::locks::LockKind::Spin => {
                type $L = spin::Mutex<$T>;
                $body
            }
            $crate::locks::LockKind::Mcs => {
                type $L = mcslock::raw::spins::Mutex<$T>;
                $body
            }
        }
    };
}

/// A value alone on its cache line, so that neighbouring locks in an array
/// do not share lines.
#[repr(align(64))]
pub struct Padded<T>(pub T);

#[cfg(test)]
mod tests {
    use super::*;

    fn bump<L: Lock<u64>>() -> u64 {
        let l = L::new(1);
        l.with(|v| *v += 1);
        l.with(|v| *v)
    }

    #[test]
    fn every_lock_works() {
        for k in LockKind::ALL {
            assert_eq!(with_lock_type!(k, u64, L => bump::<L>()), 2, "{k}");
        }
    }
}
