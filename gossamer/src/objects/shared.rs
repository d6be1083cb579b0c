//! `Shared<T>`: a large read-only value published once and read from every
//! thread of the program without copying it in the process that holds it.
//!
//! The value lives in an `Arc` owned by a property (its *home*) on the
//! publishing thread. A handle is a trust to that home plus, once read, the
//! process's replica:
//!
//! * in the publishing process every handle holds the home's own `Arc`:
//!   reading is a pointer dereference, and no byte is copied;
//! * a handle that arrives in another process (it travels as the home's
//!   trust token) fetches the value on its first read — one request to the
//!   home, the value serialized once — and keeps it in an `Arc` that every
//!   other handle of that process then finds in the process's replica
//!   table, so a process holds one copy however many handles reach it;
//! * a replica is dropped with the last handle of its process that read
//!   it, and the home (with the original) with the last handle anywhere,
//!   by the trust's own reference counting across processes.
//!
//! A first read never suspends while holding anything another fiber of its
//! thread could wait for: the fetch runs outside the handle's `OnceLock`.
//!
//! Reading is free of locks and of atomic read-modify-write once a handle
//! has its replica; the replica table (a mutex) is touched only on a
//! handle's first read in a process that did not publish the value.

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, LazyLock, Mutex, OnceLock, Weak};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{Transferable, Trust};

/// The property on the publishing thread: the original value.
struct Home<T> {
    value: Arc<T>,
}

/// Identity of a home (see [`Trust::identity`]) → this process's replica.
type Replicas = HashMap<(u64, u32, usize), Weak<dyn Any + Send + Sync>>;

static REPLICAS: LazyLock<Mutex<Replicas>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// A read-only value shared by every thread of the program; see the module
/// documentation.
///
/// ```
/// # gossamer::Runtime::builder().workers(2).build().unwrap().block_on(|| {
/// use gossamer::objects::Shared;
/// let table = Shared::new((0..100_000u64).collect::<Vec<_>>());
/// let other = table.clone();
/// let sum = gossamer::spawn_on(1, move || other.get().iter().sum::<u64>()).join().unwrap();
/// assert_eq!(sum, 4_999_950_000);
/// // Within the publishing process, every handle reads the same memory.
/// let again = table.clone();
/// assert!(std::ptr::eq(table.get(), again.get()));
/// # });
/// ```
pub struct Shared<T: Send + Sync + 'static> {
    home: Trust<Home<T>>,
    replica: OnceLock<Arc<T>>,
}

impl<T> Shared<T>
where
    T: Transferable + Sync,
{
    /// Publishes `value`, with its home on the calling thread.
    ///
    /// # Panics
    /// Outside the runtime's threads.
    pub fn new(value: T) -> Shared<T> {
        let value = Arc::new(value);
        let home = crate::local_trustee().entrust(Home { value: value.clone() });
        Shared { home, replica: OnceLock::from(value) }
    }

    /// The value. In the publishing process, and after a handle's first
    /// read elsewhere, a plain dereference. A handle's first read in
    /// another process takes the process's replica, fetching it from the
    /// home if the process has none yet; that fetch suspends the calling
    /// fiber like an `apply`.
    ///
    /// # Panics
    /// On a first read in another process from delegated context (inside a
    /// delegated closure, where nothing may suspend) or outside the
    /// runtime's threads.
    pub fn get(&self) -> &T {
        if let Some(v) = self.replica.get() {
            return v;
        }
        // Fetched outside the `OnceLock`: its initialisation must never
        // suspend, or a second fiber of this thread reading the same handle
        // would block the OS thread in the lock's wait while the fiber it
        // waits for can only run on that thread. Two fibers may both fetch;
        // both get the process's one replica, and the first `set` wins.
        let fetched = self.fetch();
        let _ = self.replica.set(fetched);
        self.replica.get().expect("set above")
    }

    /// Whether this handle has its replica (reads will not suspend).
    pub fn is_ready(&self) -> bool {
        self.replica.get().is_some()
    }

    /// The thread holding the original.
    pub fn home_thread(&self) -> usize {
        self.home.trustee().index()
    }

    /// The process's replica, from the table or fetched from the home.
    fn fetch(&self) -> Arc<T> {
        let key = self.home.identity();
        if let Some(r) = lookup::<T>(key) {
            return r;
        }
        // The home's `Arc` itself within its process; serialized (its value,
        // once) from another.
        let fetched: Arc<T> = self.home.apply_with(|h, ()| h.value.clone(), ());
        let mut table = REPLICAS.lock().unwrap_or_else(|e| e.into_inner());
        // Another thread of this process may have fetched it meanwhile:
        // keep one replica per process.
        if let Some(r) = table.get(&key).and_then(Weak::upgrade).and_then(|a| a.downcast::<T>().ok()) {
            return r;
        }
        table.retain(|_, w| w.strong_count() > 0);
        let any: Arc<dyn Any + Send + Sync> = fetched.clone();
        table.insert(key, Arc::downgrade(&any));
        fetched
    }
}

fn lookup<T: Send + Sync + 'static>(key: (u64, u32, usize)) -> Option<Arc<T>> {
    let table = REPLICAS.lock().unwrap_or_else(|e| e.into_inner());
    table.get(&key).and_then(Weak::upgrade).and_then(|a| a.downcast::<T>().ok())
}

impl<T: Send + Sync + 'static> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared { home: self.home.clone(), replica: self.replica.clone() }
    }
}

impl<T: Send + Sync + 'static> fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("home_thread", &self.home.trustee().index())
            .field("ready", &self.replica.get().is_some())
            .finish()
    }
}

/// A handle travels as its home's trust token: never the value.
impl<T: Send + Sync + 'static> Serialize for Shared<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.home.serialize(s)
    }
}

impl<'de, T: Send + Sync + 'static> Deserialize<'de> for Shared<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Shared { home: Trust::deserialize(d)?, replica: OnceLock::new() })
    }
}
