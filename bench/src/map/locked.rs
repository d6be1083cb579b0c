//! The lock-based maps behind one trait: `dashmap`, `scc`, and 512 shards
//! of `std::sync::Mutex<HashMap>`, `parking_lot::Mutex<HashMap>` or
//! `std::sync::RwLock<HashMap>`. All use
//! the standard library's default hasher, as does the Trust<T> map.

use std::collections::HashMap;
use std::sync::{Mutex, RwLock};
use std::thread;

use super::entry::{bump, initial, shard_of, Audit, Value};
use crate::locks::{Lock, Padded};

/// Shards of the lock-sharded maps.
pub const SHARDS: usize = 512;

/// A concurrent map from `u64` to [`Value`].
pub trait SharedMap: Send + Sync + Sized {
    fn with_capacity(n: usize) -> Self;
    fn insert(&self, k: u64, v: Value);
    fn get(&self, k: u64) -> Option<Value>;
    /// Updates `k`'s value in place; false if missing.
    fn bump(&self, k: u64) -> bool;
    fn audit(&self) -> Audit;

    /// A map holding keys `0..size`, filled by `threads` threads.
    fn prefilled(size: u64, threads: usize) -> Self {
        let m = Self::with_capacity(size as usize);
        thread::scope(|s| {
            for t in 0..threads as u64 {
                let m = &m;
                s.spawn(move || {
                    for k in (t..size).step_by(threads) {
                        m.insert(k, initial(k));
                    }
                });
            }
        });
        m
    }
}

/// 512 shards of a `HashMap`, each behind its own lock `L`.
pub struct LockShards<L>(Vec<Padded<L>>);

/// Shards behind `std::sync::Mutex`.
pub type MutexShards = LockShards<Mutex<HashMap<u64, Value>>>;
/// Shards behind `parking_lot::Mutex`.
pub type ParkingLotShards = LockShards<parking_lot::Mutex<HashMap<u64, Value>>>;

impl<L: Lock<HashMap<u64, Value>>> SharedMap for LockShards<L> {
    fn with_capacity(n: usize) -> Self {
        LockShards((0..SHARDS).map(|_| Padded(L::new(HashMap::with_capacity(n / SHARDS + 1)))).collect())
    }
    fn insert(&self, k: u64, v: Value) {
        self.0[shard_of(k, SHARDS)].0.with(|m| m.insert(k, v));
    }
    #[inline]
    fn get(&self, k: u64) -> Option<Value> {
        self.0[shard_of(k, SHARDS)].0.with(|m| m.get(&k).copied())
    }
    #[inline]
    fn bump(&self, k: u64) -> bool {
        self.0[shard_of(k, SHARDS)].0.with(|m| bump(m.get_mut(&k)))
    }
    fn audit(&self) -> Audit {
        self.0.iter().fold(Audit::default(), |a, s| a + s.0.with(|m| Audit::of(m)))
    }
}

pub struct RwLockShards(Vec<Padded<RwLock<HashMap<u64, Value>>>>);

impl SharedMap for RwLockShards {
    fn with_capacity(n: usize) -> Self {
        RwLockShards((0..SHARDS).map(|_| Padded(RwLock::new(HashMap::with_capacity(n / SHARDS + 1)))).collect())
    }
    fn insert(&self, k: u64, v: Value) {
        self.0[shard_of(k, SHARDS)].0.write().unwrap_or_else(|e| e.into_inner()).insert(k, v);
    }
    #[inline]
    fn get(&self, k: u64) -> Option<Value> {
        self.0[shard_of(k, SHARDS)].0.read().unwrap_or_else(|e| e.into_inner()).get(&k).copied()
    }
    #[inline]
    fn bump(&self, k: u64) -> bool {
        bump(self.0[shard_of(k, SHARDS)].0.write().unwrap_or_else(|e| e.into_inner()).get_mut(&k))
    }
    fn audit(&self) -> Audit {
        self.0.iter().fold(Audit::default(), |a, s| a + Audit::of(&s.0.read().unwrap_or_else(|e| e.into_inner())))
    }
}

impl SharedMap for dashmap::DashMap<u64, Value> {
    fn with_capacity(n: usize) -> Self {
        dashmap::DashMap::with_capacity(n)
    }
    fn insert(&self, k: u64, v: Value) {
        dashmap::DashMap::insert(self, k, v);
    }
    #[inline]
    fn get(&self, k: u64) -> Option<Value> {
        dashmap::DashMap::get(self, &k).map(|r| *r)
    }
    #[inline]
    fn bump(&self, k: u64) -> bool {
        bump(self.get_mut(&k).as_deref_mut())
    }
    fn audit(&self) -> Audit {
        self.iter().fold(Audit::default(), |a, r| a + Audit::entry(*r.key(), r.value()))
    }
}

impl SharedMap for scc::HashMap<u64, Value> {
    fn with_capacity(n: usize) -> Self {
        scc::HashMap::with_capacity(n)
    }
    fn insert(&self, k: u64, v: Value) {
        let _ = self.insert_sync(k, v);
    }
    #[inline]
    fn get(&self, k: u64) -> Option<Value> {
        self.read_sync(&k, |_, v| *v)
    }
    #[inline]
    fn bump(&self, k: u64) -> bool {
        self.update_sync(&k, |_, v| bump(Some(v))).unwrap_or(false)
    }
    fn audit(&self) -> Audit {
        let mut a = Audit::default();
        self.iter_sync(|k, v| {
            a = a + Audit::entry(*k, v);
            true
        });
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::map::entry::read_ok;

    fn exercise<M: SharedMap>() {
        let m = M::prefilled(1000, 3);
        assert!(read_ok(7, m.get(7)));
        assert!(m.get(1000).is_none());
        assert!(m.bump(7) && m.bump(7) && m.bump(999));
        assert!(!m.bump(5000));
        assert_eq!(m.audit(), Audit { len: 1000, bad: 0, writes: 3 });
    }

    #[test]
    fn every_map_works() {
        exercise::<MutexShards>();
        exercise::<ParkingLotShards>();
        exercise::<RwLockShards>();
        exercise::<dashmap::DashMap<u64, Value>>();
        exercise::<scc::HashMap<u64, Value>>();
    }
}
