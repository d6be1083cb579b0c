//! The shared heap of a host, and [`SharedBytes`], the byte buffer that
//! lives in it: memory that every process of the host maps, so a buffer
//! crosses to another process of the same host as a handle of a few bytes
//! and is read and written there in place, never copied.
//!
//! **Layout.** The heap is the tail of the host's region (see
//! `fabric::shm::region`), which the runtime hands each worker at start:
//! one arena per thread of the host, in thread order. An arena starts with
//! one free ring per thread of the host, then the blocks carved from it.
//!
//! **Ownership.** A block belongs to the arena it was carved from, and only
//! that arena's thread allocates from it: its free lists (per power-of-two
//! size class, 64 bytes to 1 MiB) and its bump pointer live in that
//! thread's own memory. A block freed on its own thread goes back on a free
//! list. A block freed on another thread of the host goes back through the
//! ring of (that thread, the owner): one writer, one reader, a release
//! store of the tail and of the head, no atomic read-modify-write. The
//! owner drains its rings when a free list runs dry. A ring that is full
//! keeps the rest on the freeing thread, which tries again on its next
//! free. A block freed outside the runtime's workers (on a thread of the
//! user's, say) goes on a list of the process (`ORPHANS`), which the first
//! worker of the host whose free list runs dry takes in, handing each block
//! on to its owner as if it had freed it itself; a block dropped after its
//! runtime ended stays on that list until a runtime's heap is installed in
//! the process again, and is then forgotten. A buffer made outside the
//! runtime's workers never came from the heap.
//!
//! **Crossing.** A `SharedBytes` that gossamer sends on its own (the whole
//! argument or result of an `apply_with` or a `spawn_with`) to a thread of
//! a process of the same host crosses as a frame that names its block: the
//! value is gossamer's own then, and its block moves into the message.
//! Inside a larger value, serde serializes it by reference, and the value
//! keeps its bytes: they are copied into a fresh block of the sending
//! thread's arena, which the message owns, and written as a handle to that
//! block — the owning thread, the block, its size class, the length, and a
//! tag: SipHash-2-4 keyed by the program's secret key over those fields
//! and the nonce of the message, as for a `Trust` (see `trust::wire`). The
//! bytes are copied once, into memory the receiver reads in place; moving
//! the block itself would leave any borrow of the value that the sender
//! still holds (through a re-entrant lock, say) on a block another process
//! owns. A message whose encoding fails gives its copies back. A handle is
//! accepted only while gossamer decodes the message it was made for, once,
//! on a worker of the same host, for a block that lies inside the arena it
//! names. Everywhere else — another host, another serializer, a value
//! without a known destination, an arena that is full — a `SharedBytes` is
//! written as its bytes and read back into a new buffer of the receiver's
//! heap.
//!
//! The processes of one host trust each other (they authenticated at
//! start-up and map the same memory): a process that writes the region at
//! will can break any of them, with or without this heap.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::{Deref, DerefMut, Range};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};
use siphasher::sip::SipHasher24;

use super::transfer;
use crate::sync::ColdList;

/// The smallest block: 64 bytes (a cache line).
const MIN_SHIFT: u32 = 6;
/// Size classes: 64 bytes to 1 MiB.
const CLASSES: usize = 15;
/// Entries of a free ring.
const RING: u32 = 1024;

fn class_bytes(class: usize) -> usize {
    1 << (MIN_SHIFT as usize + class)
}

/// The class of the smallest block that holds `len` bytes, if any does.
fn class_for(len: usize) -> Option<usize> {
    let c = len.max(1).checked_next_power_of_two()?.trailing_zeros().saturating_sub(MIN_SHIFT) as usize;
    (c < CLASSES).then_some(c)
}

/// A ring entry: a block's offset (a multiple of 64) and its class.
fn entry(offset: usize, class: usize) -> u32 {
    (((offset >> MIN_SHIFT) << 4) | class) as u32
}

fn unentry(e: u32) -> (usize, usize) {
    (((e >> 4) as usize) << MIN_SHIFT, (e & 15) as usize)
}

#[repr(C, align(128))]
struct Cursor(AtomicU32);

/// The blocks one thread hands back to an arena's owner: the owner alone
/// stores `head`, the other thread alone `tail` and the entries.
#[repr(C)]
struct Ring {
    head: Cursor,
    tail: Cursor,
    entries: [AtomicU32; RING as usize],
}

/// Where the host's heap lies in this process.
#[derive(Clone)]
struct Area {
    base: NonNull<u8>,
    per_thread: usize,
    host: Range<usize>,
}

// SAFETY: an address range of the region's mapping, which outlives it;
// what lies there is reached through atomics (the rings) or by the one
// owner of a block.
unsafe impl Send for Area {}
// SAFETY: as above.
unsafe impl Sync for Area {}

impl Area {
    /// Where an arena's blocks begin: after its rings.
    fn first_block(&self) -> usize {
        (self.host.len() * size_of::<Ring>()).next_multiple_of(4096)
    }

    fn arena(&self, thread: usize) -> *mut u8 {
        debug_assert!(self.host.contains(&thread));
        // SAFETY: thread is of the host: its arena lies inside the heap.
        unsafe { self.base.as_ptr().add((thread - self.host.start) * self.per_thread) }
    }

    /// The ring through which `producer` hands blocks back to `owner`.
    fn ring(&self, owner: usize, producer: usize) -> &Ring {
        assert!(self.host.contains(&owner) && self.host.contains(&producer));
        // SAFETY: inside `owner`'s arena, before its first block; aligned
        // (arenas are whole pages, rings a multiple of 128 bytes); the heap
        // is zeroed when created, and zeroed atomics are a valid empty ring.
        unsafe { &*self.arena(owner).add((producer - self.host.start) * size_of::<Ring>()).cast::<Ring>() }
    }

    /// Whether a block of `class` at `offset` of `thread`'s arena could
    /// have been carved from it.
    fn holds(&self, thread: usize, offset: usize, class: usize) -> bool {
        self.host.contains(&thread)
            && class < CLASSES
            && offset % (1 << MIN_SHIFT) == 0
            && offset >= self.first_block()
            && offset.checked_add(class_bytes(class)).is_some_and(|end| end <= self.per_thread)
    }

    /// Whether `len` bytes in a block of `class` at `offset` of `thread`'s
    /// arena, as another process names it, could be one of its buffers.
    fn holds_buffer(&self, thread: u32, offset: u32, class: u8, len: u32) -> bool {
        self.holds(thread as usize, offset as usize, class as usize) && len as usize <= class_bytes(class as usize)
    }

    /// The addresses of the whole heap.
    fn span(&self) -> Range<usize> {
        let start = self.base.as_ptr() as usize;
        start..start + self.host.len() * self.per_thread
    }

    fn block(&self, thread: usize, offset: usize) -> NonNull<u8> {
        // SAFETY: callers checked `holds`: inside the arena.
        NonNull::new(unsafe { self.arena(thread).add(offset) }).expect("inside a mapping")
    }
}

/// This thread's side of the heap: the worker of the host it runs.
struct Local {
    area: Area,
    me: usize,
    key: [u64; 2],
    bump: usize,
    free: [Vec<u32>; CLASSES],
    /// Blocks of other arenas whose ring was full: (owner, entry).
    owed: Vec<(usize, u32)>,
    /// Blocks of this arena copied into the messages being encoded on this
    /// thread (entries; see [`lent_mark`]).
    lent: Vec<u32>,
}

thread_local! {
    static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
}

/// Set once any block was made or received in this process: the region's
/// mapping then stays until the process ends (see `Region`'s `Drop`).
static USED: AtomicBool = AtomicBool::new(false);

/// Set once a heap was installed on any thread of this process: until
/// then (in a program of one process, always) making a buffer does not
/// look for one.
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Blocks freed on threads with no heap installed: (address, owning
/// thread, offset, class). See the module documentation.
static ORPHANS: ColdList<(usize, u32, u32, u8)> = ColdList::new();

/// Notes that a block of the heap is alive in this process.
fn mark_used() {
    if !USED.load(Ordering::Relaxed) {
        USED.store(true, Ordering::Relaxed);
    }
}

pub(crate) fn ever_used() -> bool {
    USED.load(Ordering::Relaxed)
}

/// Keeps a host's heap installed on this thread (see [`install`]) until it
/// is dropped: a worker holds it for as long as it runs.
pub(crate) struct Installed(());

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = LOCAL.try_with(|l| l.borrow_mut().take());
    }
}

/// Installs a host's heap on this thread, the worker of thread `me`: at
/// `base`, one arena of `per_thread` bytes for each thread of `host`, in
/// memory that every process of the host maps, zeroed when created, and
/// mapped at least as long as any block made from it lives (the region
/// that holds it stays mapped once `ever_used`). `key` is the program's
/// secret key.
pub(crate) fn install(
    (base, per_thread, host): (NonNull<u8>, usize, Range<usize>),
    me: usize,
    key: [u64; 2],
) -> Option<Installed> {
    let area = Area { base, per_thread, host };
    if !area.host.contains(&me) || per_thread > u32::MAX as usize || area.first_block() >= per_thread {
        return None;
    }
    // Blocks of an earlier runtime's heap, freed after it ended, name
    // memory no worker takes back any more.
    let span = area.span();
    if ORPHANS.pending() {
        drop(ORPHANS.take(|o| !span.contains(&o.0)));
    }
    LOCAL.with(|l| *l.borrow_mut() = Some(Local::new(area, me, key)));
    INSTALLED.store(true, Ordering::Relaxed);
    Some(Installed(()))
}

/// Runs `f` on this thread's side of the heap, if it has one (and is not
/// in use further up this thread's stack).
fn with_local<R>(f: impl FnOnce(&mut Local) -> R) -> Option<R> {
    LOCAL.try_with(|l| l.try_borrow_mut().ok()?.as_mut().map(f)).ok().flatten()
}

impl Local {
    /// Thread `me`'s side of the heap in `area`, nothing carved yet.
    fn new(area: Area, me: usize, key: [u64; 2]) -> Local {
        let bump = area.first_block();
        Local { area, me, key, bump, free: Default::default(), owed: Vec::new(), lent: Vec::new() }
    }

    fn alloc(&mut self, len: usize) -> Option<(NonNull<u8>, Home)> {
        let class = class_for(len)?;
        if self.free[class].is_empty() {
            self.reclaim();
        }
        let offset = match self.free[class].pop() {
            Some(e) => unentry(e).0,
            None => {
                let end = self.bump + class_bytes(class);
                if end > self.area.per_thread {
                    return None;
                }
                std::mem::replace(&mut self.bump, end)
            }
        };
        mark_used();
        let home = Home::Arena { thread: self.me as u32, offset: offset as u32, class: class as u8 };
        Some((self.area.block(self.me, offset), home))
    }

    /// Takes back what the host's other threads handed back, and what
    /// threads outside the runtime freed.
    fn reclaim(&mut self) {
        if ORPHANS.pending() {
            let span = self.area.span();
            for (_, thread, offset, class) in ORPHANS.take(|o| span.contains(&o.0)) {
                self.free(thread as usize, offset as usize, class as usize);
            }
        }
        for producer in self.area.host.clone() {
            if producer == self.me {
                continue;
            }
            let ring = self.area.ring(self.me, producer);
            let mut head = ring.head.0.load(Ordering::Relaxed);
            let tail = ring.tail.0.load(Ordering::Acquire);
            // Another process wrote these: a count or entry that could not
            // have come from this arena is dropped, never trusted.
            if tail.wrapping_sub(head) > RING {
                continue;
            }
            while head != tail {
                let (offset, class) = unentry(ring.entries[(head % RING) as usize].load(Ordering::Relaxed));
                if self.area.holds(self.me, offset, class) && offset < self.bump {
                    self.free[class].push(entry(offset, class));
                }
                head = head.wrapping_add(1);
            }
            ring.head.0.store(head, Ordering::Release);
        }
    }

    fn free(&mut self, thread: usize, offset: usize, class: usize) {
        if thread == self.me {
            self.free[class].push(entry(offset, class));
            return;
        }
        if !self.owed.is_empty() {
            let owed = std::mem::take(&mut self.owed);
            for (owner, e) in owed {
                if !self.hand_back(owner, e) {
                    self.owed.push((owner, e));
                }
            }
        }
        if !self.hand_back(thread, entry(offset, class)) {
            self.owed.push((thread, entry(offset, class)));
        }
    }

    fn hand_back(&self, owner: usize, e: u32) -> bool {
        let ring = self.area.ring(owner, self.me);
        let tail = ring.tail.0.load(Ordering::Relaxed);
        let head = ring.head.0.load(Ordering::Acquire);
        if tail.wrapping_sub(head) >= RING {
            return false;
        }
        ring.entries[(tail % RING) as usize].store(e, Ordering::Relaxed);
        ring.tail.0.store(tail.wrapping_add(1), Ordering::Release);
        true
    }

    /// The buffer of `len` bytes in a block another process sent, once
    /// checked by [`Area::holds_buffer`].
    fn adopt(&self, thread: u32, offset: u32, class: u8, len: u32) -> SharedBytes {
        mark_used();
        let ptr = self.area.block(thread as usize, offset as usize);
        let home = Home::Arena { thread, offset, class };
        SharedBytes { ptr: Cell::new(ptr), len: Cell::new(len as usize), home: Packed::new(home) }
    }

    fn contains(&self, p: NonNull<u8>) -> bool {
        self.area.span().contains(&(p.as_ptr() as usize))
    }
}

/// Where a buffer's memory came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Home {
    /// This process's allocator: a `Box<[u8]>` of exactly the length.
    Boxed,
    /// A block of the host's heap.
    Arena { thread: u32, offset: u32, class: u8 },
}

/// A [`Home`] in one word, so that a `SharedBytes` is as small as a
/// `Vec<u8>`: the thread in the high half, the block's ring entry (see
/// [`entry`]) in the low half; all ones when boxed.
struct Packed(Cell<u64>);

impl Packed {
    const BOXED: u64 = u64::MAX;

    fn pack(h: Home) -> u64 {
        match h {
            Home::Boxed => Self::BOXED,
            Home::Arena { thread, offset, class } => {
                (u64::from(thread) << 32) | u64::from(entry(offset as usize, class as usize))
            }
        }
    }

    fn new(h: Home) -> Packed {
        Packed(Cell::new(Self::pack(h)))
    }

    fn get(&self) -> Home {
        match self.0.get() {
            Self::BOXED => Home::Boxed,
            w => {
                let (offset, class) = unentry(w as u32);
                Home::Arena { thread: (w >> 32) as u32, offset: offset as u32, class: class as u8 }
            }
        }
    }

    fn set(&self, h: Home) {
        self.0.set(Self::pack(h))
    }
}

/// A byte buffer that crosses to other processes of the same host by
/// reference: made on a worker thread of a program of several processes,
/// it lives in memory every process of the host maps, and an `apply_with`
/// or `spawn_with` that carries it to a thread of such a process sends a
/// handle of a few bytes instead of the bytes. Read and written there in
/// place, it can come back the same way. To another host, or made where
/// there is no shared heap (one process, a thread outside the runtime, a
/// buffer over 1 MiB, a heap that is full), it travels as a copy, like a
/// `Vec<u8>`.
///
/// It is a fixed-length buffer, like a `Box<[u8]>`: it dereferences to
/// `[u8]`, and owns its bytes exclusively. Sent on its own, its block
/// itself crosses; inside a larger value (a tuple, a `Vec<SharedBytes>`, a
/// struct), which serde serializes by reference, its bytes are copied once
/// into a fresh block that crosses instead, and the value keeps its own.
///
/// It may be dropped anywhere: on any thread of the host, in any of its
/// processes, its block goes back to the arena it came from, and one
/// dropped on a thread outside the runtime is taken back by a worker of the
/// process when that worker's arena runs short.
///
/// ```
/// use gossamer::SharedBytes;
///
/// fn program() {
///     // Thread 1 may be in this process or in another of the host: the
///     // buffer goes there and back without its bytes being copied.
///     let counter = gossamer::entrust_on(1, 0u64);
///     let page = SharedBytes::from(&[7u8; 4096][..]);
///     let page = counter.apply_with(
///         |served, mut p: SharedBytes| {
///             *served += 1;
///             p[0] = 8;
///             p
///         },
///         page,
///     );
///     assert_eq!((page[0], page[1], page.len()), (8, 7, 4096));
/// }
/// gossamer::main(program, 2);
/// ```
pub struct SharedBytes {
    ptr: Cell<NonNull<u8>>,
    len: Cell<usize>,
    home: Packed,
}

// SAFETY: a `SharedBytes` owns its block (or box) exclusively, like a
// `Box<[u8]>`; the cells make it `!Sync`, so only its owner touches them.
unsafe impl Send for SharedBytes {}

impl SharedBytes {
    /// An empty buffer.
    pub const fn new() -> SharedBytes {
        SharedBytes { ptr: Cell::new(NonNull::dangling()), len: Cell::new(0), home: Packed(Cell::new(Packed::BOXED)) }
    }

    /// A buffer of `len` zero bytes.
    pub fn zeroed(len: usize) -> SharedBytes {
        match Self::alloc(len) {
            Some(b) => {
                // SAFETY: a fresh block of at least `len` bytes that only
                // `b` refers to.
                unsafe { b.ptr.get().as_ptr().write_bytes(0, len) };
                b
            }
            None => Self::boxed(vec![0; len].into_boxed_slice()),
        }
    }

    /// A buffer holding a copy of `bytes`.
    #[inline]
    pub fn copy_from_slice(bytes: &[u8]) -> SharedBytes {
        match Self::alloc(bytes.len()) {
            Some(b) => {
                // SAFETY: a fresh block of at least `bytes.len()` bytes that
                // nothing else refers to; `bytes` is not in it.
                unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), b.ptr.get().as_ptr(), bytes.len()) };
                b
            }
            None => Self::boxed(bytes.into()),
        }
    }

    /// Whether the bytes live in the host's shared heap (and so cross to
    /// the host's other processes by reference).
    pub fn is_shared(&self) -> bool {
        matches!(self.home.get(), Home::Arena { .. })
    }

    /// The thread of the program whose arena of the shared heap holds the
    /// bytes, if they are in it: the thread that made them, wherever they
    /// have travelled within the host since.
    pub fn home_thread(&self) -> Option<usize> {
        match self.home.get() {
            Home::Arena { thread, .. } => Some(thread as usize),
            Home::Boxed => None,
        }
    }

    /// The bytes, as a `Vec<u8>` (copied out of the shared heap).
    pub fn into_vec(self) -> Vec<u8> {
        if self.home.get() == Home::Boxed {
            let this = std::mem::ManuallyDrop::new(self);
            // SAFETY: a boxed buffer's pointer and length are those of the
            // `Box<[u8]>` it was made from; `this` is never dropped.
            let b =
                unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(this.ptr.get().as_ptr(), this.len.get())) };
            return b.into_vec();
        }
        self.to_vec()
    }

    /// A block of at least `len` bytes of this thread's arena, with its
    /// length set to `len`, if this thread has one with room.
    #[inline]
    fn alloc(len: usize) -> Option<SharedBytes> {
        if !INSTALLED.load(Ordering::Relaxed) {
            return None;
        }
        let (ptr, home) = with_local(|l| l.alloc(len)).flatten()?;
        Some(SharedBytes { ptr: Cell::new(ptr), len: Cell::new(len), home: Packed::new(home) })
    }

    fn boxed(b: Box<[u8]>) -> SharedBytes {
        let len = b.len();
        let ptr = NonNull::new(Box::into_raw(b).cast::<u8>()).expect("a box is not null");
        SharedBytes { ptr: Cell::new(ptr), len: Cell::new(len), home: Packed::new(Home::Boxed) }
    }

    /// Leaves this value empty without freeing what it held (its bytes
    /// have moved into a message).
    fn forget(&self) {
        self.ptr.set(NonNull::dangling());
        self.len.set(0);
        self.home.set(Home::Boxed);
    }
}

impl Drop for SharedBytes {
    #[inline]
    fn drop(&mut self) {
        match self.home.get() {
            Home::Boxed => {
                // SAFETY: a boxed buffer's pointer and length are those of
                // the `Box<[u8]>` it was made from (or dangling and 0, which
                // is an empty box).
                drop(unsafe {
                    Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr.get().as_ptr(), self.len.get()))
                })
            }
            Home::Arena { thread, offset, class } => release(self.ptr.get(), thread, offset, class),
        }
    }
}

/// Hands a block back: to this thread's free lists, or towards its owner.
/// Off the host's workers it goes on the process's list of orphans, which
/// a worker takes in (see the module documentation); on a worker whose heap
/// is another (a later runtime's), it is forgotten.
#[inline(never)]
fn release(p: NonNull<u8>, thread: u32, offset: u32, class: u8) {
    let on_worker = with_local(|l| {
        if l.contains(p) {
            l.free(thread as usize, offset as usize, class as usize)
        }
    });
    if on_worker.is_none() {
        ORPHANS.push((p.as_ptr() as usize, thread, offset, class));
    }
}

impl Deref for SharedBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `len` bytes at `ptr` are this value's own (its box or its
        // block), initialised when made, alive until it is dropped; `&self`
        // keeps it from being serialized away (that needs `&self` too, but
        // leaves the bytes in place until the message is delivered, after
        // every borrow taken inside `serialize` has ended).
        unsafe { std::slice::from_raw_parts(self.ptr.get().as_ptr(), self.len.get()) }
    }
}

impl DerefMut for SharedBytes {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for `deref`, and `&mut self` is the only access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.get().as_ptr(), self.len.get()) }
    }
}

impl AsRef<[u8]> for SharedBytes {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl AsMut<[u8]> for SharedBytes {
    fn as_mut(&mut self) -> &mut [u8] {
        self
    }
}

impl Default for SharedBytes {
    fn default() -> Self {
        SharedBytes::new()
    }
}

impl Clone for SharedBytes {
    fn clone(&self) -> Self {
        SharedBytes::copy_from_slice(self)
    }
}

impl fmt::Debug for SharedBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedBytes").field("len", &self.len()).field("shared", &self.is_shared()).finish()
    }
}

impl PartialEq for SharedBytes {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for SharedBytes {}

impl Hash for SharedBytes {
    fn hash<H: Hasher>(&self, h: &mut H) {
        (**self).hash(h)
    }
}

impl From<&[u8]> for SharedBytes {
    fn from(bytes: &[u8]) -> Self {
        SharedBytes::copy_from_slice(bytes)
    }
}

impl From<Vec<u8>> for SharedBytes {
    /// Copies the bytes into the shared heap when this thread has one;
    /// elsewhere keeps the vector's memory.
    fn from(v: Vec<u8>) -> Self {
        match Self::alloc(v.len()) {
            Some(b) => {
                // SAFETY: a fresh block of at least `v.len()` bytes.
                unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), b.ptr.get().as_ptr(), v.len()) };
                b
            }
            None => SharedBytes::boxed(v.into_boxed_slice()),
        }
    }
}

/// A block as it crosses within a host.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
struct Handle {
    thread: u32,
    offset: u32,
    class: u8,
    len: u32,
    tag: u64,
}

impl Handle {
    /// The id under which the decoding of one message takes it (apart
    /// from trust tokens' ids, which are below 2^63).
    fn id(&self) -> u64 {
        (1 << 63) | (u64::from(self.thread) << 32) | u64::from(self.offset)
    }
}

fn tag(key: [u64; 2], nonce: transfer::Nonce, thread: u32, offset: u32, class: u8, len: u32) -> u64 {
    let mut h = SipHasher24::new_with_keys(key[0], key[1]);
    b"gossamer shared bytes".hash(&mut h);
    nonce.hash(&mut h);
    (thread, offset, class, len).hash(&mut h);
    h.finish()
}

/// When the message being encoded on this thread goes to a thread of this
/// host: a copy of `b`'s bytes in a fresh block of this thread's arena,
/// which the message owns from then on, and the handle that names it.
///
/// A copy, not `b`'s own block: serde serializes by reference, and `b`
/// may be reachable elsewhere while the message is on its way (behind a
/// re-entrant lock whose guard this thread still holds, say), so the block
/// another process then owns must be one no borrow of `b` can reach.
fn lend(b: &SharedBytes) -> Option<Handle> {
    let dest = transfer::encoding_dest().ok()??;
    let len = u32::try_from(b.len()).ok()?;
    with_local(|l| {
        if !l.area.host.contains(&dest) {
            return None;
        }
        let nonce = transfer::encoding_nonce().ok()?;
        let (ptr, Home::Arena { thread, offset, class }) = l.alloc(b.len())? else { return None };
        // SAFETY: a fresh block of at least `len` bytes that nothing else
        // reaches, apart from `b`'s own memory.
        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), ptr.as_ptr(), b.len()) };
        l.lent.push(entry(offset as usize, class as usize));
        Some(Handle { thread, offset, class, len, tag: tag(l.key, nonce, thread, offset, class, len) })
    })
    .flatten()
}

/// Where the blocks lent to the message about to be encoded on this thread
/// begin in its list of lent blocks; for [`lent_settle`].
pub(crate) fn lent_mark() -> usize {
    if !INSTALLED.load(Ordering::Relaxed) {
        return 0;
    }
    with_local(|l| l.lent.len()).unwrap_or(0)
}

/// Ends the encoding of a message that began at `mark`: the blocks lent to
/// it belong to it if it is sent, and come back if it failed.
pub(crate) fn lent_settle(mark: usize, sent: bool) {
    if !INSTALLED.load(Ordering::Relaxed) {
        return;
    }
    let _ = with_local(|l| {
        if sent {
            l.lent.truncate(mark);
            return;
        }
        for e in l.lent.split_off(mark.min(l.lent.len())) {
            let (offset, class) = unentry(e);
            l.free(l.me, offset, class);
        }
    });
}

/// The buffer a handle read from the message being decoded stands for,
/// after checking it (see the module documentation).
fn accept(h: &Handle) -> Result<SharedBytes, &'static str> {
    let outside =
        "SharedBytes handles are accepted only while gossamer decodes a message from a process of the same host";
    let nonce = transfer::decoding_nonce().map_err(|_| outside)?;
    with_local(|l| {
        if tag(l.key, nonce, h.thread, h.offset, h.class, h.len) != h.tag {
            return Err("a SharedBytes handle that this program did not send in this message (forged or copied)");
        }
        if !l.area.holds_buffer(h.thread, h.offset, h.class, h.len) {
            return Err("a SharedBytes handle names a block outside this host's shared heap");
        }
        transfer::take_token(h.id()).map_err(|_| "a SharedBytes handle deserialized twice from one message")?;
        Ok(l.adopt(h.thread, h.offset, h.class, h.len))
    })
    .unwrap_or(Err(outside))
}

/// A frame that holds a buffer's bytes.
const FRAME_BYTES: u8 = 0;
/// A frame that holds a handle: thread, offset, length (`u32`s, little
/// endian) and class.
const FRAME_HANDLE: u8 = 1;
const HANDLE_FRAME_BYTES: usize = 1 + 4 + 4 + 4 + 1;

/// Runs `f` on the frame of `b` sent as a value of its own (an argument or
/// a result that is a `SharedBytes` and nothing else): a handle when the
/// message goes to a thread of this host (see `transfer::toward`) and the
/// block is of this thread's heap, which moves the bytes out of `b` (a
/// value gossamer owns and drops once it is sent); else the bytes.
/// Gossamer writes the frame straight into the request or the response,
/// with no serializer in between: no user code can put a handle there, so
/// it carries no tag. It is read by [`from_frame`].
pub(crate) fn with_frame<R>(b: &SharedBytes, f: impl FnOnce(&[u8]) -> R) -> R {
    let dest = transfer::take_dest();
    if let (Some(dest), Home::Arena { thread, offset, class }) = (dest, b.home.get()) {
        let near = with_local(|l| l.area.host.contains(&dest) && l.contains(b.ptr.get())).unwrap_or(false);
        if let (true, Ok(len)) = (near, u32::try_from(b.len())) {
            let mut frame = [0u8; HANDLE_FRAME_BYTES];
            frame[0] = FRAME_HANDLE;
            frame[1..5].copy_from_slice(&thread.to_le_bytes());
            frame[5..9].copy_from_slice(&offset.to_le_bytes());
            frame[9..13].copy_from_slice(&len.to_le_bytes());
            frame[13] = class;
            b.forget();
            return f(&frame);
        }
    }
    let mut frame = Vec::with_capacity(1 + b.len());
    frame.push(FRAME_BYTES);
    frame.extend_from_slice(b);
    f(&frame)
}

/// The buffer a frame written by [`with_frame`] stands for.
pub(crate) fn from_frame(frame: &[u8]) -> Result<SharedBytes, String> {
    match frame.split_first() {
        Some((&FRAME_BYTES, bytes)) => Ok(SharedBytes::copy_from_slice(bytes)),
        Some((&FRAME_HANDLE, h)) if h.len() == HANDLE_FRAME_BYTES - 1 => {
            let word = |at: usize| u32::from_le_bytes(h[at..at + 4].try_into().expect("four bytes"));
            let (thread, offset, len, class) = (word(0), word(4), word(8), h[12]);
            with_local(|l| {
                if !l.area.holds_buffer(thread, offset, class, len) {
                    return Err(
                        "gossamer: a SharedBytes frame names a block outside this host's shared heap".to_string()
                    );
                }
                Ok(l.adopt(thread, offset, class, len))
            })
            .unwrap_or_else(|| {
                Err("gossamer: a SharedBytes handle reached a thread without the host's shared heap".into())
            })
        }
        _ => Err("gossamer: malformed SharedBytes frame from another process".into()),
    }
}

/// The bytes of a buffer, written as bytes.
struct Inline<'a>(&'a [u8]);

impl Serialize for Inline<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

/// Bytes read into a new buffer (of this thread's heap when it has one).
struct Received(SharedBytes);

impl<'de> Deserialize<'de> for Received {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Bytes;
        impl<'de> Visitor<'de> for Bytes {
            type Value = SharedBytes;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<SharedBytes, E> {
                Ok(SharedBytes::copy_from_slice(v))
            }
            fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<SharedBytes, E> {
                Ok(SharedBytes::from(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<SharedBytes, A::Error> {
                let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
                while let Some(b) = seq.next_element::<u8>()? {
                    v.push(b);
                }
                Ok(SharedBytes::from(v))
            }
        }
        d.deserialize_bytes(Bytes).map(Received)
    }
}

#[derive(Serialize)]
enum WireOut<'a> {
    Bytes(Inline<'a>),
    Handle(Handle),
}

#[derive(Deserialize)]
enum WireIn {
    Bytes(Received),
    Handle(Handle),
}

impl Serialize for SharedBytes {
    /// Writes a handle to a copy of the bytes in the shared heap for a
    /// process of the same host, else the bytes; this value keeps its own.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if !s.is_human_readable() {
            if let Some(h) = lend(self) {
                return WireOut::Handle(h).serialize(s);
            }
        }
        WireOut::Bytes(Inline(self)).serialize(s)
    }
}

impl<'de> Deserialize<'de> for SharedBytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match WireIn::deserialize(d)? {
            WireIn::Bytes(Received(b)) => Ok(b),
            WireIn::Handle(h) => accept(&h).map_err(|why| {
                transfer::note_refusal(why);
                de::Error::custom(why)
            }),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn classes_cover_64_bytes_to_1_mib() {
        assert_eq!(class_for(0), Some(0));
        assert_eq!(class_for(64), Some(0));
        assert_eq!(class_for(65), Some(1));
        assert_eq!(class_for(1 << 20), Some(CLASSES - 1));
        assert_eq!(class_for((1 << 20) + 1), None);
        assert_eq!(class_for(usize::MAX), None);
        for len in [1, 63, 64, 100, 1000, 4096, 70_000, 1 << 20] {
            let c = class_for(len).unwrap();
            assert!(class_bytes(c) >= len && (c == 0 || class_bytes(c - 1) < len));
        }
    }

    #[test]
    fn off_the_runtime_a_buffer_is_boxed_and_crosses_as_bytes() {
        let b = SharedBytes::from(&b"delegation"[..]);
        assert!(!b.is_shared());
        assert_eq!(&*b, b"delegation");
        let bytes = postcard::to_allocvec(&b).unwrap();
        let back: SharedBytes = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back, b);
        let json = serde_json::to_string(&b).unwrap();
        assert_eq!(serde_json::from_str::<SharedBytes>(&json).unwrap(), b);
        assert_eq!(b.clone().into_vec(), b"delegation");
        assert_eq!(SharedBytes::zeroed(3).into_vec(), [0, 0, 0]);
        assert!(SharedBytes::new().is_empty());
        assert_eq!(&*SharedBytes::from(vec![1, 2]), [1, 2]);
    }

    #[test]
    fn a_handle_outside_gossamer_s_decoding_is_refused() {
        let h = Handle { thread: 0, offset: 4096, class: 0, len: 8, tag: 0 };
        let bytes = postcard::to_allocvec(&WireOut::Handle(h)).unwrap();
        assert!(postcard::from_bytes::<SharedBytes>(&bytes).is_err());
    }

    #[test]
    fn a_buffer_is_as_small_as_a_vector_and_its_home_packs_exactly() {
        assert_eq!(size_of::<SharedBytes>(), size_of::<Vec<u8>>());
        for h in [
            Home::Boxed,
            Home::Arena { thread: 0, offset: 0, class: 0 },
            Home::Arena { thread: 7, offset: 4096, class: 3 },
            Home::Arena { thread: u32::MAX - 1, offset: u32::MAX - 63, class: (CLASSES - 1) as u8 },
        ] {
            assert_eq!(Packed::new(h).get(), h);
        }
    }

    #[test]
    fn frames_round_trip_as_bytes_without_a_destination() {
        let b = SharedBytes::from(&b"framed"[..]);
        let back = with_frame(&b, from_frame).unwrap();
        assert_eq!(back, b);
        assert!(from_frame(&[]).is_err());
        assert!(from_frame(&[7, 1, 2]).is_err());
        // A handle off the runtime's threads is refused.
        let mut h = [0u8; HANDLE_FRAME_BYTES];
        h[0] = FRAME_HANDLE;
        assert!(from_frame(&h).is_err());
        assert!(from_frame(&h[..5]).is_err());
    }

    /// A heap of `threads` arenas of `per_thread` bytes in this process's
    /// memory, installed on this thread as thread `me`.
    struct TestHeap {
        mem: Vec<u128>,
    }

    impl TestHeap {
        fn new(threads: usize, per_thread: usize) -> TestHeap {
            TestHeap { mem: vec![0u128; threads * per_thread / 16 + 256] }
        }

        fn area(&mut self, threads: usize, per_thread: usize) -> Area {
            let start = self.mem.as_mut_ptr().cast::<u8>();
            let skip = start.align_offset(4096);
            assert!(skip + threads * per_thread <= self.mem.len() * 16);
            // SAFETY: within the vector, as just checked.
            let base = unsafe { start.add(skip) };
            Area { base: NonNull::new(base).unwrap(), per_thread, host: 0..threads }
        }
    }

    fn install_as(area: &Area, me: usize) -> Installed {
        // Orphans of a test heap freed earlier at these addresses.
        let span = area.span();
        drop(ORPHANS.take(|o| span.contains(&o.0)));
        LOCAL.with(|c| *c.borrow_mut() = Some(Local::new(area.clone(), me, [1, 2])));
        INSTALLED.store(true, Ordering::Relaxed);
        Installed(())
    }

    /// Takes this thread's side of the heap off it, to put back later.
    fn park() -> Local {
        LOCAL.with(|c| c.borrow_mut().take()).expect("installed")
    }

    fn resume(l: Local) -> Installed {
        LOCAL.with(|c| *c.borrow_mut() = Some(l));
        Installed(())
    }

    #[test]
    fn blocks_are_reused_by_their_owner_and_handed_back_through_the_ring() {
        let (threads, per) = (2, 1 << 16);
        let mut heap = TestHeap::new(threads, per);
        let area = heap.area(threads, per);
        let _g = install_as(&area, 0);
        let a = SharedBytes::from(&[1u8; 100][..]);
        assert!(a.is_shared());
        let at = a.as_ptr();
        drop(a);
        let b = SharedBytes::zeroed(128);
        assert_eq!(b.as_ptr(), at, "a freed block of the class is reused first");
        assert!(b.iter().all(|&x| x == 0));
        // Another one, so that the next fresh block would be elsewhere.
        let other = SharedBytes::zeroed(128);
        assert_ne!(other.as_ptr(), at);
        // Keep one alive for thread 1 to free.
        let mine = std::mem::ManuallyDrop::new(b);
        let l = park();
        let at = mine.as_ptr();
        // Thread 1 frees thread 0's block: it goes through the ring.
        std::thread::scope(|s| {
            s.spawn(|| {
                let _g = install_as(&area, 1);
                drop(std::mem::ManuallyDrop::into_inner(mine));
            });
        });
        let _g = resume(l);
        let again = SharedBytes::zeroed(100);
        assert_eq!(again.as_ptr(), at, "the block came back through the ring");
        let fresh = SharedBytes::zeroed(100);
        assert!(fresh.is_shared() && fresh.as_ptr() != at && fresh.as_ptr() != other.as_ptr());
    }

    /// The tests that use the process's list of orphans, one at a time.
    static ORPHAN_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn a_block_freed_off_the_runtime_is_taken_in_by_a_worker_of_its_heap() {
        let _one = ORPHAN_TESTS.lock().unwrap_or_else(|e| e.into_inner());
        let (threads, per) = (2, 1 << 16);
        let mut heap = TestHeap::new(threads, per);
        let area = heap.area(threads, per);
        let span = area.span();
        let _g = install_as(&area, 0);
        let mine = SharedBytes::zeroed(100);
        let kept = SharedBytes::zeroed(100);
        let mine_at = mine.as_ptr();
        // A block of thread 1's arena, to be freed off the runtime as well.
        let theirs = std::thread::scope(|s| {
            s.spawn(|| {
                let _g = install_as(&area, 1);
                std::mem::ManuallyDrop::new(SharedBytes::zeroed(100))
            })
            .join()
            .unwrap()
        });
        let Home::Arena { offset: their_offset, class: their_class, .. } = theirs.home.get() else {
            panic!("made on a thread with a heap")
        };
        // Both are dropped on a thread with no heap installed.
        std::thread::scope(|s| {
            s.spawn(|| {
                drop(mine);
                drop(std::mem::ManuallyDrop::into_inner(theirs));
            });
        });
        let waiting = ORPHANS.take(|o| span.contains(&o.0));
        assert_eq!(waiting.len(), 2, "both blocks wait on the process's list");
        for o in waiting {
            ORPHANS.push(o);
        }
        // The owner of the first takes it back when its free list runs dry;
        // the second goes on to its owner's ring.
        let again = SharedBytes::zeroed(100);
        assert_eq!(again.as_ptr(), mine_at, "the orphan was taken back and reused first");
        assert!(ORPHANS.take(|o| span.contains(&o.0)).is_empty());
        let ring = area.ring(1, 0);
        assert_eq!(ring.tail.0.load(Ordering::Acquire), 1);
        assert_eq!(ring.entries[0].load(Ordering::Relaxed), entry(their_offset as usize, their_class as usize));
        drop((again, kept));
    }

    #[test]
    fn orphans_of_another_heap_are_left_alone_then_forgotten_by_the_next_install() {
        let _one = ORPHAN_TESTS.lock().unwrap_or_else(|e| e.into_inner());
        let (threads, per) = (1, 1 << 16);
        let (mut old, mut new) = (TestHeap::new(threads, per), TestHeap::new(threads, per));
        let (old, new) = (old.area(threads, per), new.area(threads, per));
        let g = install_as(&old, 0);
        let b = SharedBytes::zeroed(64);
        drop(g);
        drop(b);
        assert_eq!(ORPHANS.take(|o| old.span().contains(&o.0)).len(), 1);
        ORPHANS.push((old.block(0, old.first_block()).as_ptr() as usize, 0, old.first_block() as u32, 0));
        // A worker of another heap neither takes it nor frees it.
        let _g = install_as(&new, 0);
        with_local(|l| l.reclaim());
        assert!(with_local(|l| l.free.iter().all(Vec::is_empty)).unwrap());
        assert!(ORPHANS.pending());
        // The next heap installed for a runtime forgets it.
        let _g = install((new.base, per, 0..threads), 0, [1, 2]);
        assert!(ORPHANS.take(|o| old.span().contains(&o.0)).is_empty());
    }

    #[test]
    fn a_full_arena_falls_back_to_the_process_heap() {
        let (threads, per) = (1, 3 * 4096);
        let mut heap = TestHeap::new(threads, per);
        let area = heap.area(threads, per);
        let _g = install_as(&area, 0);
        let a = SharedBytes::zeroed(4096);
        let b = SharedBytes::zeroed(4096);
        assert!(a.is_shared() && !b.is_shared(), "one 4 KiB block fits after the rings' page, not two");
        let big = SharedBytes::zeroed((1 << 20) + 1);
        assert!(!big.is_shared());
    }

    #[test]
    fn a_full_ring_keeps_the_rest_until_there_is_room() {
        let (threads, per) = (2, 1 << 20);
        let mut heap = TestHeap::new(threads, per);
        let area = heap.area(threads, per);
        let n = RING as usize + 10;
        let _g = install_as(&area, 0);
        let blocks: Vec<_> = (0..n).map(|_| std::mem::ManuallyDrop::new(SharedBytes::zeroed(64))).collect();
        let l = park();
        std::thread::scope(|s| {
            s.spawn(|| {
                let _g = install_as(&area, 1);
                for b in blocks {
                    drop(std::mem::ManuallyDrop::into_inner(b));
                }
                let owed = with_local(|l| l.owed.len()).unwrap();
                assert_eq!(owed, 10, "what the ring cannot hold stays with the freeing thread");
            });
        });
        let _g = resume(l);
        with_local(|l| l.reclaim());
        assert_eq!(with_local(|l| l.free[0].len()).unwrap(), RING as usize);
    }

    #[test]
    fn entries_from_another_process_that_no_block_could_have_are_dropped() {
        let (threads, per) = (2, 1 << 16);
        let mut heap = TestHeap::new(threads, per);
        let area = heap.area(threads, per);
        let _g = install_as(&area, 0);
        let first = area.first_block();
        let carved = std::mem::ManuallyDrop::new(SharedBytes::zeroed(64));
        assert_eq!(carved.as_ptr(), area.block(0, first).as_ptr());
        let ring = area.ring(0, 1);
        let sent = [
            entry(first, 0),        // the block carved: taken
            entry(per, 0),          // past the arena
            entry(0, 0),            // the rings
            entry(first + 4096, 0), // never carved (past the bump)
            15,                     // no such class
            u32::MAX,
        ];
        for (k, e) in sent.into_iter().enumerate() {
            ring.entries[k].store(e, Ordering::Relaxed);
        }
        ring.tail.0.store(sent.len() as u32, Ordering::Release);
        with_local(|l| l.reclaim());
        let free: Vec<_> = with_local(|l| l.free.iter().map(Vec::len).collect()).unwrap();
        assert_eq!(free.iter().sum::<usize>(), 1);
        assert_eq!(free[0], 1);
        // A tail too far ahead of the head is not believed at all.
        ring.tail.0.store(ring.head.0.load(Ordering::Relaxed).wrapping_add(RING + 1), Ordering::Release);
        with_local(|l| l.reclaim());
        assert_eq!(with_local(|l| l.free[0].len()).unwrap(), 1);
    }

    #[cfg(not(miri))]
    proptest::proptest! {
        #[test]
        fn any_ring_contents_are_taken_safely(entries in proptest::collection::vec(proptest::num::u32::ANY, 0..64), tail in proptest::num::u32::ANY) {
            let (threads, per) = (2, 1 << 16);
            let mut heap = TestHeap::new(threads, per);
            let area = heap.area(threads, per);
            let _g = install_as(&area, 0);
            // Carve some blocks so that the bump is past a few.
            let live: Vec<_> = (0..8).map(|_| SharedBytes::zeroed(200)).collect();
            let ring = area.ring(0, 1);
            for (k, e) in entries.iter().enumerate() {
                ring.entries[k].store(*e, Ordering::Relaxed);
            }
            ring.tail.0.store(tail, Ordering::Release);
            with_local(|l| l.reclaim());
            with_local(|l| {
                for (class, list) in l.free.iter().enumerate() {
                    for &e in list {
                        let (offset, c) = unentry(e);
                        assert!(c == class && l.area.holds(0, offset, c) && offset < l.bump);
                    }
                }
            });
            drop(live);
        }

        #[test]
        fn frames_of_any_bytes_name_only_blocks_of_the_heap(frame in proptest::collection::vec(proptest::num::u8::ANY, 0..20)) {
            let (threads, per) = (2, 1 << 16);
            let mut heap = TestHeap::new(threads, per);
            let area = heap.area(threads, per);
            let _g = install_as(&area, 0);
            if let Ok(b) = from_frame(&frame) {
                if let Home::Arena { thread, offset, class } = b.home.get() {
                    proptest::prop_assert!(area.holds(thread as usize, offset as usize, class as usize));
                    proptest::prop_assert!(b.len() <= class_bytes(class as usize));
                }
                // Not ours to free.
                b.forget();
            }
        }

        #[test]
        fn handles_of_any_bytes_decode_or_fail_without_panicking(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..40)) {
            let _ = postcard::from_bytes::<SharedBytes>(&bytes);
        }
    }
}
