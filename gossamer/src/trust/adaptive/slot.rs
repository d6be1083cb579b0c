//! The memory of an adaptive property: the [`Slot`] (the value and the
//! [`Gate`] that guards it), inside a [`Node`] that also holds the one
//! `Trust` to the trustee's [`Owner`] and counts the handles. A handle is a
//! pointer to its node (two words with its tag; a handle from another
//! process holds a boxed trust instead), and a call in place reads two
//! cache lines of the node when the value is small: the trust's routing
//! fields with the gate's mode, then the gate's lock with the value (see
//! `Gate` for why they are apart).
//!
//! Nodes are packed: a thread that makes adaptive properties cuts their
//! nodes, one after another, from chunks of about [`CHUNK_BYTES`] that
//! hold nodes alone (the trustee's own records and everything else
//! allocated beside them live elsewhere). Properties made together, as a
//! program makes an array of them, then lie on consecutive cache lines and
//! pages, as the elements of an array of locks do, instead of being spread
//! among other allocations: with many properties, a call in place misses
//! the cache and the TLB about as often as a lock array does. A chunk is
//! freed when its last node is freed and its thread has moved on to
//! another chunk (or exited); a freed node's place is not reused, so a
//! chunk in which one long-lived property remains stays allocated whole.
use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::cell::{RefCell, UnsafeCell};
use std::mem::{ManuallyDrop, MaybeUninit};
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, AtomicUsize, Ordering};

use super::gate::{Gate, Mode};
use super::registry;
use crate::runtime::context;
use crate::runtime::worker::Worker;
use crate::trust::Trust;

/// The gate and its value, the value right after the gate's lock and
/// counts (see `Gate` for why).
#[repr(C)]
pub(crate) struct Slot<T> {
    pub(crate) gate: Gate,
    /// Dropped by the owner (on the trustee, after the last handle), never
    /// by the slot itself.
    value: UnsafeCell<ManuallyDrop<T>>,
}

// SAFETY: the value is only reached while holding the gate's lock (see
// `Held`), one thread at a time; it moves between threads, hence `T: Send`.
unsafe impl<T: Send> Sync for Slot<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Slot<T> {}

impl<T> Slot<T> {
    pub(crate) fn new(value: T) -> Slot<T> {
        Slot { gate: Gate::new(), value: UnsafeCell::new(ManuallyDrop::new(value)) }
    }

    /// Drops the value, under the lock, ordered after every access.
    ///
    /// # Safety
    /// Once, when nothing can reach the value any more.
    unsafe fn drop_value(&self) {
        self.gate.lock_to_drop();
        self.gate.retire();
        // SAFETY: per the contract, this is the value's last access (a
        // caller in place that took the lock after this sees `retired`).
        unsafe { ManuallyDrop::drop(&mut *self.value.get()) };
        self.gate.unlock();
    }
}

/// Proof that the caller holds a slot's lock, or serves under its bias;
/// releases it when dropped (also when a closure panics), after counting
/// the access.
pub(crate) struct Held<'a, T> {
    slot: &'a Slot<T>,
    served: bool,
    contended: bool,
    /// Served under the bias, without the lock (see `Gate::enter_biased`).
    biased: bool,
    /// The trustee serving the request, and whether it keeps the lock for
    /// the rest of its batch (then it, not this guard, releases the lock).
    trustee: Option<(&'static Worker, bool)>,
    /// The property's trustee (its number), for a call in place.
    owner: usize,
}

impl<'a, T> Held<'a, T> {
    /// Takes the lock for a call in place on a property of trustee `owner`;
    /// `contended` records whether it was found held.
    ///
    /// # Panics
    /// If the value is gone: the runtime shut down (its trustee dropped
    /// the value) while this caller was on its way in.
    #[inline]
    pub(crate) fn in_place(slot: &'a Slot<T>, owner: usize) -> Held<'a, T> {
        let mut contended = !slot.gate.try_lock();
        if contended {
            slot.gate.lock_plain();
        }
        // A straggler (or a thread avoiding the trustee) takes the value
        // back from a trustee the lock is biased towards.
        contended |= slot.gate.revoke();
        if slot.gate.retired() {
            slot.gate.unlock();
            panic!("gossamer: the runtime that owns this adaptive property has shut down");
        }
        Held { slot, served: false, contended, biased: false, trustee: None, owner }
    }

    /// Takes the value for the trustee, to serve a delegated request:
    /// under the bias while the lock is biased towards it (no atomic
    /// read-modify-write), else under the lock. Inside the batch a worker
    /// serves, the worker keeps a lock it took until the batch ends (see
    /// `runtime::worker::batch_hold`): the next requests of the batch to
    /// this property reuse it instead of taking it again.
    ///
    /// # Panics
    /// If this thread serves the property under the bias already (a
    /// closure running on the value reached it again).
    #[inline]
    pub(crate) fn serving(slot: &'a Slot<T>) -> Held<'a, T> {
        if slot.gate.enter_biased() {
            return Held { slot, served: true, contended: false, biased: true, trustee: None, owner: 0 };
        }
        if slot.gate.serving_here() {
            panic!("gossamer: a closure running on an adaptive property reached that same property's value again");
        }
        let Some(w) = context::current() else {
            slot.gate.lock_plain();
            return Held { slot, served: true, contended: false, biased: false, trustee: None, owner: 0 };
        };
        // SAFETY: `Gate::lock` takes the lock for this thread and
        // `release_gate` releases it; the gate lives until the value is
        // dropped, which takes the lock first (`Gate::lock` takes a kept
        // lock over, removing it from the kept ones).
        let kept = unsafe { w.batch.serve(slot.gate.addr(), || slot.gate.lock_plain(), release_gate) };
        Held { slot, served: true, contended: false, biased: false, trustee: Some((w, kept)), owner: w.index }
    }

    /// The value, exclusively, for as long as the lock is held (or the
    /// bias serves).
    #[inline]
    pub(crate) fn value(&mut self) -> &mut T {
        // SAFETY: we hold the lock, or serve under the bias (taken in the
        // constructor, released in `drop`): every other access to the value
        // holds the lock with the bias revoked, which waits for the bias's
        // user to leave (`Gate::revoke`); the borrow of `self` keeps the
        // reference inside that span.
        unsafe { &mut *self.slot.value.get() }
    }
}

impl<T> Drop for Held<'_, T> {
    #[inline]
    fn drop(&mut self) {
        if self.biased {
            self.slot.gate.note_served(false);
            self.slot.gate.exit_biased();
            return;
        }
        if self.served {
            self.slot.gate.note_served(true);
        } else {
            self.slot.gate.note_in_place(self.contended, self.owner);
        }
        if let Some((w, kept)) = self.trustee {
            w.batch.done(self.slot.gate.addr());
            if kept {
                return;
            }
        }
        self.slot.gate.unlock();
    }
}

/// Releases a gate's lock kept by a trustee until its batch ended.
///
/// # Safety
/// `p` is a live `Gate` whose lock this thread holds.
unsafe fn release_gate(p: *const ()) {
    // SAFETY: per the contract.
    unsafe { &*(p as *const Gate) }.unlock();
}

/// Bytes of nodes per chunk (at least one node).
const CHUNK_BYTES: usize = 16 << 10;

/// The head of a chunk of node memory: how many users it has (its live
/// nodes, and the thread still cutting nodes from it), and its layout.
struct ChunkHead {
    users: AtomicUsize,
    layout: Layout,
}

/// The chunk a thread cuts nodes of one layout from.
struct Filling {
    node: Layout,
    head: NonNull<ChunkHead>,
    /// Offset of the first node from the head.
    first: usize,
    next: usize,
    cap: usize,
}

/// The chunks a thread is filling, one per node layout (few: one per
/// value type made adaptive on this thread). Their users count the thread
/// until it moves on or exits.
struct Fillings(Vec<Filling>);

impl Drop for Fillings {
    fn drop(&mut self) {
        for f in self.0.drain(..) {
            // SAFETY: the thread's own use of the chunk, counted when it
            // was made, is released once, here.
            unsafe { release_chunk(f.head) };
        }
    }
}

thread_local! {
    static FILLING: RefCell<Fillings> = const { RefCell::new(Fillings(Vec::new())) };
}

/// A new chunk for `cap` nodes of layout `node`, with `users` users
/// counted; returns the head and the offset of the first node.
fn new_chunk(node: Layout, cap: usize, users: usize) -> (NonNull<ChunkHead>, usize) {
    let nodes = Layout::from_size_align(node.size() * cap, node.align()).expect("adaptive node chunk too large");
    let (layout, first) = Layout::new::<ChunkHead>().extend(nodes).expect("adaptive node chunk too large");
    let layout = layout.pad_to_align();
    // SAFETY: the layout has a non-zero size (it holds the head).
    let p = unsafe { alloc(layout) }.cast::<ChunkHead>();
    let Some(head) = NonNull::new(p) else { handle_alloc_error(layout) };
    // SAFETY: freshly allocated for a `ChunkHead` at offset 0.
    unsafe { head.as_ptr().write(ChunkHead { users: AtomicUsize::new(users), layout }) };
    (head, first)
}

/// Memory for one node of layout `node`, and the chunk it is in (which
/// counts it as a user).
fn alloc_node(node: Layout) -> (NonNull<u8>, NonNull<ChunkHead>) {
    let cut = |f: &mut Filling| {
        // SAFETY: `next < cap`: the place lies inside the chunk.
        let p = unsafe { f.head.cast::<u8>().as_ptr().add(f.first + f.next * node.size()) };
        f.next += 1;
        // SAFETY: the chunk is live (this thread still uses it).
        unsafe { f.head.as_ref() }.users.fetch_add(1, Ordering::Relaxed);
        // SAFETY: derived from a non-null chunk pointer.
        (unsafe { NonNull::new_unchecked(p) }, f.head)
    };
    let from_thread = FILLING.try_with(|fl| {
        let mut fl = fl.borrow_mut();
        let i = match fl.0.iter().position(|f| f.node == node) {
            Some(i) if fl.0[i].next < fl.0[i].cap => i,
            found => {
                let cap = (CHUNK_BYTES / node.size()).max(1);
                let (head, first) = new_chunk(node, cap, 1);
                let fresh = Filling { node, head, first, next: 0, cap };
                match found {
                    Some(i) => {
                        let old = std::mem::replace(&mut fl.0[i], fresh);
                        // SAFETY: the thread's use of the full chunk ends.
                        unsafe { release_chunk(old.head) };
                        i
                    }
                    None => {
                        fl.0.push(fresh);
                        fl.0.len() - 1
                    }
                }
            }
        };
        cut(&mut fl.0[i])
    });
    from_thread.unwrap_or_else(|_| {
        // The thread is exiting: a chunk of one node, used by it alone.
        let (head, first) = new_chunk(node, 1, 0);
        cut(&mut Filling { node, head, first, next: 0, cap: 1 })
    })
}

/// Releases one use of a chunk; the last frees it.
///
/// # Safety
/// Once per counted use, after which that user does not touch the chunk.
unsafe fn release_chunk(head: NonNull<ChunkHead>) {
    // SAFETY: the caller's use keeps the chunk live until this decrement.
    let h = unsafe { head.as_ref() };
    if h.users.fetch_sub(1, Ordering::Release) == 1 {
        // Every other user's accesses happen before the free.
        fence(Ordering::Acquire);
        let layout = h.layout;
        // SAFETY: no user is left; allocated with this layout.
        unsafe { dealloc(head.as_ptr().cast(), layout) };
    }
}

/// Everything of one adaptive property that its handles share: the trust
/// to the owner (routing fields first), the slot, the counts, and its
/// chunk. Aligned to a cache line: the trust and the gate's mode share the
/// first, which callers read; the gate's lock and counts and the value
/// share the next, which the lock holder writes (see `Gate`).
#[repr(C, align(64))]
pub(crate) struct Node<T> {
    /// The one trust to the owner: written once, before the first handle
    /// exists; dropped by the last handle.
    trust: UnsafeCell<MaybeUninit<Trust<Owner<T>>>>,
    pub(crate) slot: Slot<T>,
    /// Live handles; the last one to go drops the trust.
    handles: AtomicU32,
    /// Users of the node's memory: the handles together (one, until the
    /// last goes) and the owner. The last one frees it.
    users: AtomicU32,
    chunk: NonNull<ChunkHead>,
}

/// A pointer to a node, valid while its holder's use is counted (the
/// handles together, or the owner).
pub(crate) struct NodeRef<T>(NonNull<Node<T>>);

// SAFETY: a node is shared by handles and owner on any threads: its value
// is reached under the lock only (see `Slot`), the trust is written before
// it is shared and dropped by the last handle, the counts are atomic.
// Values move between threads, hence `T: Send`.
unsafe impl<T: Send> Send for NodeRef<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for NodeRef<T> {}

impl<T> std::ops::Deref for NodeRef<T> {
    type Target = Node<T>;
    #[inline]
    fn deref(&self) -> &Node<T> {
        // SAFETY: the holder's use is counted, so the node is live.
        unsafe { self.0.as_ref() }
    }
}

impl<T> NodeRef<T> {
    /// The node's address.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn addr(&self) -> usize {
        self.0.as_ptr() as usize
    }

    /// Another pointer to the same node, for a new handle that the caller
    /// counts with `add_handle`.
    pub(crate) fn share(&self) -> NodeRef<T> {
        NodeRef(self.0)
    }

    /// Releases one use of the node; the last frees its memory.
    ///
    /// # Safety
    /// Once per counted use, after which that user does not touch the node.
    unsafe fn release(&self) {
        let n = &**self;
        if n.users.fetch_sub(1, Ordering::Release) == 1 {
            fence(Ordering::Acquire);
            let chunk = n.chunk;
            // Nothing to drop in place: the trust went with the last
            // handle, the value with the owner (both held by hand).
            // SAFETY: no user is left; the chunk counted this node.
            unsafe { release_chunk(chunk) };
        }
    }
}

impl<T: Send + 'static> Node<T> {
    /// Makes a node around `value`, entrusts its owner with `entrust`, and
    /// returns the pointer of the handles, one handle counted.
    pub(crate) fn make(value: T, entrust: impl FnOnce(Owner<T>) -> Trust<Owner<T>>) -> NodeRef<T> {
        let (mem, chunk) = alloc_node(Layout::new::<Node<T>>());
        let p = mem.cast::<Node<T>>();
        // SAFETY: fresh memory with the node's layout, cut for it alone.
        unsafe {
            p.as_ptr().write(Node {
                trust: UnsafeCell::new(MaybeUninit::uninit()),
                slot: Slot::new(value),
                handles: AtomicU32::new(1),
                users: AtomicU32::new(2),
                chunk,
            })
        };
        /// Releases the handles' use if `entrust` panics (the owner, if
        /// it was dropped, released its own).
        struct Unwind<T>(NodeRef<T>);
        impl<T> Drop for Unwind<T> {
            fn drop(&mut self) {
                // SAFETY: the handles' use, never handed out.
                unsafe { self.0.release() };
            }
        }
        let guard = Unwind(NodeRef(p));
        let trust = entrust(Owner(NodeRef(p)));
        std::mem::forget(guard);
        let node = NodeRef(p);
        registry::register(
            trust.profile_id().0 as usize,
            trust.runtime,
            trust.trustee as usize,
            GateRef(NonNull::from(&node.slot.gate)),
        );
        // SAFETY: no handle exists yet and the owner never reads the trust:
        // this write is alone.
        unsafe { (*node.trust.get()).write(trust) };
        node
    }

    /// The trust to the owner.
    #[inline]
    pub(crate) fn trust(&self) -> &Trust<Owner<T>> {
        // SAFETY: written in `make` before any handle existed, dropped only
        // by the last handle, and the caller's handle is live.
        unsafe { (*self.trust.get()).assume_init_ref() }
    }
}

impl<T: Send + 'static> NodeRef<T> {
    /// Counts a new handle.
    pub(crate) fn add_handle(&self) {
        let n = self.handles.fetch_add(1, Ordering::Relaxed);
        if n > u32::MAX / 2 {
            // Far more clones than any program holds: a leak of handles.
            std::process::abort();
        }
    }

    /// Uncounts a handle; the last one takes the property out of the
    /// profile's view, drops the trust, so the owner (and with it the
    /// value) goes on the trustee, and releases the handles' use.
    pub(crate) fn drop_handle(&self) {
        if self.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            registry::unregister(self.trust().profile_id().0 as usize);
            // SAFETY: the last handle: nobody reads the trust any more, and
            // it is dropped once; then the handles' use ends, once.
            unsafe {
                (*self.trust.get()).assume_init_drop();
                self.release();
            }
        }
    }
}

/// The gate of a live node, as the profile's registry sees it: registered
/// when the node is made and removed by its last handle, before the node
/// can be freed (the owner alone cannot free it while it is registered).
pub(crate) struct GateRef(NonNull<Gate>);

// SAFETY: the gate is reached through it from any thread while the node
// is live (see the type's rule) and only through its atomics and its lock,
// which are made for sharing.
unsafe impl Send for GateRef {}

impl GateRef {
    /// The node's gate. Only while it is registered, under the registry's
    /// lock.
    pub(crate) fn gate(&self) -> &Gate {
        // SAFETY: registered, hence live (see the type's rule); the
        // registry's lock, held by the caller, orders this use before the
        // removal.
        unsafe { self.0.as_ref() }
    }

    /// The node's mode. Only while it is registered.
    pub(crate) fn mode(&self) -> Mode {
        self.gate().mode()
    }
}

/// The trustee's share of an adaptive property, entrusted as an ordinary
/// `Trust` property: it drops the value when the last trust to it goes.
pub(crate) struct Owner<T>(pub(crate) NodeRef<T>);

impl<T> Drop for Owner<T> {
    fn drop(&mut self) {
        // SAFETY: the owner is dropped once, with the property, after the
        // last trust to it; the last handle dropped that trust, so no
        // handle is left to reach the value. Then the owner's use ends.
        unsafe {
            self.0.slot.drop_value();
            self.0.release();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::Node;
    use crate::trust::adaptive::gate::Gate;

    /// The line callers read (the trust, the gate's mode and policy) is not
    /// the line every call writes (the gate's lock and counts, and a small
    /// value), so that delegated requests do not move a line between the
    /// callers' cores and the trustee's.
    #[test]
    fn callers_read_one_cache_line_and_calls_write_another() {
        type N = Node<u64>;
        let line = |off: usize| off / 64;
        let gate = std::mem::offset_of!(N, slot) + std::mem::offset_of!(super::Slot<u64>, gate);
        let value = std::mem::offset_of!(N, slot) + std::mem::offset_of!(super::Slot<u64>, value);
        let [mode, policy, lock, served] = Gate::OFFSETS.map(|o| gate + o);
        let trust = std::mem::offset_of!(N, trust);
        assert_eq!(std::mem::align_of::<N>(), 64);
        assert_eq!(line(trust), 0);
        assert_eq!((line(trust + 23), line(mode), line(policy + 3)), (0, 0, 0), "the read line");
        assert_eq!((line(lock), line(served + 3), line(value + 7)), (1, 1, 1), "the written line");
    }

    /// A handle is two words (the rare handle from another process is
    /// boxed): an array of many properties' handles stays small.
    #[test]
    fn a_handle_is_two_words() {
        assert_eq!(std::mem::size_of::<crate::Adaptive<u64>>(), 2 * std::mem::size_of::<usize>());
    }

    /// Properties made one after another on a thread get nodes on
    /// consecutive places of one chunk (at most one chunk boundary in a
    /// short run), although their trustee records are allocated between
    /// them.
    #[test]
    fn nodes_made_together_lie_side_by_side() {
        let rt = crate::Runtime::builder().workers(2).build().expect("runtime");
        let gaps = rt.block_on(|| {
            let me = crate::local_trustee();
            let props: Vec<_> = (0..32u64).map(|i| me.entrust_adaptive(i)).collect();
            let addrs: Vec<usize> = props.iter().map(|p| p.node_for_tests().addr()).collect();
            addrs.windows(2).map(|w| w[1].wrapping_sub(w[0])).collect::<Vec<_>>()
        });
        let size = std::mem::size_of::<Node<u64>>();
        let apart = gaps.iter().filter(|&&g| g != size).count();
        assert!(apart <= 1, "nodes of {size} bytes not packed: gaps {gaps:?}");
    }

    /// Every node's memory is given back: a chunk's users return to the
    /// thread's own use once its properties are gone, and the values are
    /// dropped once.
    #[test]
    fn dropping_every_handle_frees_the_nodes_and_drops_each_value_once() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        struct Counted(Arc<AtomicUsize>);
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        let drops = Arc::new(AtomicUsize::new(0));
        let rt = crate::Runtime::builder().workers(2).build().expect("runtime");
        let d = drops.clone();
        rt.block_on(move || {
            let me = crate::local_trustee();
            let props: Vec<_> = (0..100).map(|_| me.entrust_adaptive(Counted(d.clone()))).collect();
            let chunk = props[0].node_for_tests().chunk;
            // SAFETY: the chunk is live while this thread fills it.
            let users = || unsafe { chunk.as_ref() }.users.load(Ordering::Relaxed);
            assert!(users() > 1);
            let clones = props.to_vec();
            drop(props);
            drop(clones);
            // The owners go on the trustee (this thread) when it serves.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while users() > 1 && std::time::Instant::now() < deadline {
                crate::yield_now();
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            assert_eq!(users(), 1, "nodes of dropped properties still hold their chunk");
        });
        assert_eq!(drops.load(Ordering::Relaxed), 100);
    }
}
