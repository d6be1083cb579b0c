//! What changes when a request crosses into another process of the same
//! program (same binary, different load address):
//!
//! * **Code** is named by its offset from an anchor function of this crate,
//!   not by its address, so it stays valid under ASLR/PIE. A small
//!   direct-mapped cache per (client, trustee) pair, kept in step on both
//!   sides because both walk the requests in the same order, lets repeated
//!   closures send a 3-bit index inside the header instead of the offset
//!   word.
//! * **Values** that own memory (results, `apply_with` arguments) are
//!   serialized (postcard) instead of moved; those too large for the slot go
//!   to the pair's bulk area, and the record carries their offset.
//! * **Panics** travel as their message.

use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::panic::{catch_unwind, AssertUnwindSafe};

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::record::Shim;
use super::slot::Word;

/// Entries in the per-pair code cache.
pub(crate) const CODE_CACHE: usize = 8;

/// Header flag: the record names its code by offset (next word).
pub(crate) const FLAG_CODE_OFFSET: u64 = 1 << 32;
/// Header flag: the record names its code by cache index (no code word).
pub(crate) const FLAG_CODE_CACHED: u64 = 1 << 33;
/// Header flag: install the offset in the code cache at the index.
pub(crate) const FLAG_CODE_INSTALL: u64 = 1 << 34;
/// Header flag: the record's last two words describe a bulk payload.
pub(crate) const FLAG_BULK_TAIL: u64 = 1 << 35;
const INDEX_SHIFT: u32 = 40;

/// The anchor code offsets are measured from.
#[inline(never)]
fn anchor() {}

/// The offset of `shim` from the anchor: the same in every process running
/// this binary, whatever its load address.
#[inline]
pub(crate) fn code_offset(shim: Shim) -> i64 {
    (shim as usize as i64).wrapping_sub(anchor as fn() as usize as i64)
}

/// The shim at `offset` from this process's anchor.
///
/// # Safety
/// `offset` must come from `code_offset` in a process running this binary.
#[inline]
pub(crate) unsafe fn code_at(offset: i64) -> Shim {
    let addr = (anchor as fn() as usize as i64).wrapping_add(offset) as usize;
    // SAFETY: the same binary has a `Shim` at this offset from the anchor.
    unsafe { std::mem::transmute::<*const (), Shim>(std::ptr::with_exposed_provenance::<()>(addr)) }
}

/// The cache slot for a code offset.
#[inline]
pub(crate) fn cache_index(offset: i64) -> usize {
    ((offset as u64 >> 4) as usize) % CODE_CACHE
}

/// Header bits naming code through the cache, and whether the record
/// still needs the offset word. Updates the client's copy of the cache.
#[inline]
pub(crate) fn code_header(cache: &mut [i64; CODE_CACHE], offset: i64) -> (u64, bool) {
    let i = cache_index(offset);
    if cache[i] == offset {
        (FLAG_CODE_CACHED | ((i as u64) << INDEX_SHIFT), false)
    } else {
        cache[i] = offset;
        (FLAG_CODE_OFFSET | FLAG_CODE_INSTALL | ((i as u64) << INDEX_SHIFT), true)
    }
}

/// The trustee's side: the shim a remote record names, and where its
/// property word is. Updates the trustee's copy of the cache.
///
/// # Safety
/// `rec` must be a remote request record from this binary.
#[inline]
pub(crate) unsafe fn decode_code(rec: *const Word, cache: &mut [i64; CODE_CACHE]) -> (Shim, usize) {
    // SAFETY: records start with an initialised header word.
    let hdr = unsafe { (*rec).assume_init() };
    let i = ((hdr >> INDEX_SHIFT) & 0xff) as usize % CODE_CACHE;
    if hdr & FLAG_CODE_CACHED != 0 {
        // SAFETY: the client only sends an index it installed earlier on
        // this pair, and we processed that install in order.
        (unsafe { code_at(cache[i]) }, 1)
    } else {
        // SAFETY: the offset word follows the header.
        let off = unsafe { (*rec.add(1)).assume_init() } as i64;
        if hdr & FLAG_CODE_INSTALL != 0 {
            cache[i] = off;
        }
        // SAFETY: as for `code_at`.
        (unsafe { code_at(off) }, 2)
    }
}

thread_local! {
    /// Reused buffer for serializing values (no allocation once warm).
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The bytes of a value that crosses as plain bytes: `Vec<u8>`, `String`
/// and `Box<[u8]>` are sent as their own bytes, copied once into the slot or
/// bulk area and once out, instead of through serde (which writes and reads
/// a `Vec<u8>` byte by byte, as a sequence). Both sides know the type, so
/// they agree on the format. A `SharedBytes` sent on its own is framed the
/// same way, by `heap::with_frame`.
fn plain_bytes<V: Any>(v: &V) -> Option<&[u8]> {
    let a = v as &dyn Any;
    if let Some(b) = a.downcast_ref::<Vec<u8>>() {
        return Some(b);
    }
    if let Some(s) = a.downcast_ref::<String>() {
        return Some(s.as_bytes());
    }
    a.downcast_ref::<Box<[u8]>>().map(|b| &b[..])
}

/// Rebuilds a value sent by [`plain_bytes`], or `None` when `V` is not one
/// of those types. The value is built as its own type and handed over
/// through an `Option` seen as `dyn Any`: no box, so the only allocation is
/// the value's own buffer.
fn from_plain_bytes<V: Any>(bytes: &[u8]) -> Option<Result<V, String>> {
    let t = TypeId::of::<V>();
    if t == TypeId::of::<Vec<u8>>() || t == TypeId::of::<String>() || t == TypeId::of::<Box<[u8]>>() {
        from_owned_bytes(bytes.to_vec()).ok()
    } else if t == TypeId::of::<super::heap::SharedBytes>() {
        match super::heap::from_frame(bytes) {
            Ok(b) => hand_over(b),
            Err(e) => Some(Err(e)),
        }
    } else {
        None
    }
}

/// `t` as a `V`, when `V` is `T`: through an `Option` seen as `dyn Any`, no
/// box.
fn hand_over<T: Any, V: Any>(t: T) -> Option<Result<V, String>> {
    let mut slot = Some(t);
    (&mut slot as &mut dyn Any).downcast_mut::<Option<V>>().and_then(Option::take).map(Ok)
}

/// As [`from_plain_bytes`], from bytes the receiver owns (a payload that
/// landed beside the region, see `fabric::landed`): a `Vec<u8>` is the buffer
/// itself, a `Box<[u8]>` or a `String` reuse it; other types give the
/// bytes back.
fn from_owned_bytes<V: Any>(bytes: Vec<u8>) -> Result<Result<V, String>, Vec<u8>> {
    let t = TypeId::of::<V>();
    let v = if t == TypeId::of::<Vec<u8>>() {
        hand_over(bytes)
    } else if t == TypeId::of::<Box<[u8]>>() {
        hand_over(bytes.into_boxed_slice())
    } else if t == TypeId::of::<String>() {
        match String::from_utf8(bytes) {
            Ok(s) => hand_over(s),
            Err(e) => Some(Err(format!("gossamer: malformed string from another process: {e}"))),
        }
    } else {
        return Err(bytes);
    };
    Ok(v.expect("gossamer: the type was checked"))
}

/// Serializes `v` into the thread's scratch buffer, framed for another
/// process (see [`transfer`](super::transfer)), and runs `f` on the bytes;
/// plain bytes go as they are (see [`plain_bytes`]).
///
/// `v` must be a value gossamer owns and sends once (an argument or a
/// result it drops after sending): a `SharedBytes` on its own, sent to a
/// thread of this host, moves its block into the message and is left empty
/// (see `heap::with_frame`).
///
/// # Panics
/// If `v` cannot be serialized (its `Serialize` fails or panics).
pub(crate) fn with_serialized<V: Serialize + 'static, R>(v: &V, f: impl FnOnce(&[u8]) -> R) -> R {
    match try_with_serialized(v, f) {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    }
}

/// As [`with_serialized`], returning a failure to serialize (an error or a
/// panic in `v`'s `Serialize`) instead of panicking.
pub(crate) fn try_with_serialized<V: Serialize + 'static, R>(v: &V, f: impl FnOnce(&[u8]) -> R) -> Result<R, String> {
    if let Some(bytes) = plain_bytes(v) {
        return Ok(f(bytes));
    }
    if let Some(b) = (v as &dyn Any).downcast_ref::<super::heap::SharedBytes>() {
        return Ok(super::heap::with_frame(b, f));
    }
    let lent = super::heap::lent_mark();
    let encoded = SCRATCH.with(|s| {
        let mut buf = s.take();
        buf.clear();
        let _ = super::transfer::take_refusal();
        let mut failed = None;
        let out = catch_unwind(AssertUnwindSafe(|| {
            super::transfer::encode(buf, |buf| match postcard::to_extend(v, buf) {
                Ok(b) => b,
                Err(e) => {
                    failed = Some(e.to_string());
                    Vec::new()
                }
            })
        }));
        match (out, failed) {
            (Ok(b), None) => Ok(b),
            (Ok(_), Some(e)) => Err(format!(
                "gossamer: cannot serialize a value for another process: {}",
                super::transfer::take_refusal().map_or(e, str::to_string)
            )),
            (Err(p), _) => Err(format!(
                "gossamer: serializing a value for another process panicked: {}",
                crate::error::panic_message(&*p)
            )),
        }
    });
    // Shared buffers copied into the message belong to it once it is
    // encoded; a failed encoding gives them back.
    super::heap::lent_settle(lent, encoded.is_ok());
    let encoded = encoded?;
    let r = f(&encoded);
    SCRATCH.with(|s| s.replace(encoded));
    Ok(r)
}

/// The bytes a request carries to another process after its record (its
/// *tail*): borrowed (a serialized value, copied when the request is
/// queued) or owned (a `Vec<u8>` argument, which is its own bytes and is
/// queued as it is, without a copy). Read at the receiver, a tail or a
/// result is borrowed from the region, or owned when it landed beside it
/// (see `fabric::landed`).
pub(crate) enum Tail<'a> {
    Borrowed(&'a [u8]),
    Owned(Vec<u8>),
}

impl Tail<'_> {
    /// The bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Tail::Borrowed(b) => b,
            Tail::Owned(v) => v,
        }
    }
}

/// Runs `f` on the tail that carries `v` to another process: a `Vec<u8>`
/// moves into it whole (see [`plain_bytes`]: its bytes are its format),
/// any other value is serialized as by [`with_serialized`]. Also returns
/// the original when it was not moved, for the caller to drop once the
/// request is in place (see [`drop_original`]).
///
/// # Panics
/// As [`with_serialized`].
pub(crate) fn with_tail<V: Serialize + 'static, R>(v: V, f: impl FnOnce(Tail<'_>) -> R) -> (R, Option<V>) {
    match into_byte_vec(v) {
        Ok(bytes) => (f(Tail::Owned(bytes)), None),
        Err(v) => {
            let r = with_serialized(&v, |b| f(Tail::Borrowed(b)));
            (r, Some(v))
        }
    }
}

/// `v` itself if it is a `Vec<u8>` (moved, not copied), else `v` back.
pub(crate) fn into_byte_vec<V: Any>(v: V) -> Result<Vec<u8>, V> {
    let mut slot = Some(v);
    match (&mut slot as &mut dyn Any).downcast_mut::<Option<Vec<u8>>>() {
        Some(bytes) => Ok(bytes.take().expect("just made")),
        None => Err(slot.expect("not taken")),
    }
}

/// Deserializes a value written by `with_serialized`.
///
/// # Panics
/// If the bytes do not hold a `V` (or its `Deserialize` refuses them).
pub(crate) fn deserialize<V: DeserializeOwned + 'static>(bytes: &[u8]) -> V {
    try_deserialize(bytes).unwrap_or_else(|e| panic!("{e}"))
}

/// Deserializes a value written by `with_serialized`, or says why not. A
/// panic in `V`'s `Deserialize` becomes an error too.
pub(crate) fn try_deserialize<V: DeserializeOwned + 'static>(bytes: &[u8]) -> Result<V, String> {
    if let Some(v) = from_plain_bytes(bytes) {
        return v;
    }
    let _ = super::transfer::take_refusal();
    match catch_unwind(AssertUnwindSafe(|| super::transfer::decode(bytes, |b| postcard::from_bytes::<V>(b)))) {
        Ok(Ok(Ok(v))) => Ok(v),
        Ok(Ok(Err(e))) => Err(match super::transfer::take_refusal() {
            Some(why) => format!("gossamer: a value from another process was refused: {why}"),
            None => format!("gossamer: malformed value from another process: {e}"),
        }),
        Ok(Err(e)) => Err(format!("gossamer: malformed value from another process: {e}")),
        Err(p) => Err(format!(
            "gossamer: deserializing a value from another process panicked: {}",
            crate::error::panic_message(&*p)
        )),
    }
}

/// Deserializes a value from the tail it came in: as [`try_deserialize`],
/// except that a byte vector that owns its bytes already (a payload that
/// landed beside the region) becomes the value without a copy.
pub(crate) fn try_deserialize_tail<V: DeserializeOwned + 'static>(tail: Tail<'_>) -> Result<V, String> {
    match tail {
        Tail::Borrowed(b) => try_deserialize(b),
        Tail::Owned(bytes) => from_owned_bytes(bytes).unwrap_or_else(|bytes| try_deserialize(&bytes)),
    }
}

/// Drops the sender's original of a value that was just sent to another
/// process as a copy (see [`Transferable`](crate::Transferable)), keeping a
/// panic of its `Drop` for the caller to resume once the call is complete:
/// a request already queued may point at the caller's stack (the waiter of
/// a blocking call) or expect its callback to be stored next, so nothing
/// may unwind between queueing it and finishing the call.
pub(crate) fn drop_original<V>(v: V) -> Option<Box<dyn Any + Send>> {
    catch_unwind(AssertUnwindSafe(|| drop(v))).err()
}

/// The offset of the code of a `fn` pointer from the anchor, as it crosses
/// into another process (see [`fn_at`]).
///
/// # Panics
/// If the code is not in the binary (see `image`): its offset would differ
/// in the other process.
#[inline]
pub(crate) fn fn_offset(addr: usize) -> i64 {
    if !super::image::in_binary(addr) {
        refuse_foreign_code(addr);
    }
    (addr as i64).wrapping_sub(anchor as fn() as usize as i64)
}

#[cold]
#[inline(never)]
fn refuse_foreign_code(addr: usize) -> ! {
    panic!(
        "gossamer: the fn at {addr:#x}, given to cross into another process, is not code of this program's binary \
         (it is in a shared library, whose place differs from process to process), so it cannot be named there; \
         wrap it in a closure written in the program, e.g. trust.apply_with(|v, a| f(v, a), a)"
    )
}

/// The `fn` pointer of type `P` at `offset` from this process's anchor.
///
/// # Safety
/// `P` must be a `fn` pointer type, and `offset` must come from
/// [`fn_offset`] of a `P` in a process running this binary.
#[inline]
pub(crate) unsafe fn fn_at<P: Copy>(offset: i64) -> P {
    const { assert!(std::mem::size_of::<P>() == std::mem::size_of::<*const ()>()) };
    let code = std::ptr::with_exposed_provenance::<()>((anchor as fn() as usize as i64).wrapping_add(offset) as usize);
    // SAFETY: per the contract, a `P` is at this address (same binary, same
    // offset from the anchor), and `P` is a pointer-sized `fn` pointer.
    unsafe { std::mem::transmute_copy::<*const (), P>(&code) }
}

/// The capture rule at the process boundary: only code given as a `fn`
/// crosses into another process; a generic closure is refused there, in the
/// caller, before anything is serialized or queued.
///
/// A generic closure's captured environment cannot be proven process
/// independent on stable Rust: its bytes may hold addresses (a `&'static
/// str`, a `fn` pointer, a reference inside a `Copy` struct), and even a
/// zero-sized capture may be a proof that something happened in *this*
/// process (a library's "initialised" token) which would be conjured, false,
/// in the other. The one proof the compiler gives is the coercion of a
/// closure to a `fn` pointer, which only a closure that captures nothing
/// passes; so the forms that cross (`apply_with`, `apply_with_then`,
/// `try_apply_with_then`, `apply_with_async`, `launch_with`, `spawn_with`,
/// `spawn_to`, `spawn_to_with`) take their code as a `fn`, and a capturing
/// closure there is a compile error.
#[cold]
#[inline(never)]
pub(crate) fn refuse_closure<F>(call: &str, thread: usize) -> ! {
    let name = std::any::type_name::<F>();
    let size = std::mem::size_of::<F>();
    panic!(
        "gossamer: the closure `{name}` ({size} bytes of captures) was given to `{call}`, and its trustee (thread \
         {thread}) is in another process; only code given as a `fn` may cross processes. A generic closure may \
         capture values that mean nothing there (an address, or a zero-sized proof that something happened in this \
         process), and on stable Rust only the coercion to `fn` proves that a closure captures nothing. Write it \
         in the `_with` form, whose code is a `fn` and whose data is an argument, serialized and rebuilt in the \
         other process: trust.apply_with(|v, (a, b)| .., (a, b)), or trust.apply_with(|v, ()| .., ()) with no \
         data (likewise apply_with_then, launch_with, gossamer::spawn_with(thread, |(a, b)| .., (a, b)))"
    )
}

/// Words needed for `len` bytes.
#[inline]
pub(crate) fn byte_words(len: usize) -> usize {
    len.div_ceil(8)
}

/// Copies `bytes` into words at `dst`, the rest of the last word zeroed.
///
/// Every byte of the words written is initialised: records that go to
/// another process are read back as whole `u64` words (the checksum of a
/// batch staged for another host, the fabric's copy), and reading a byte
/// that was never written as part of an integer is undefined behaviour. The
/// zeroing is one store of the last word, before the copy.
///
/// # Safety
/// `dst` must have room for `byte_words(bytes.len())` words.
#[inline]
pub(crate) unsafe fn put_bytes(dst: *mut Word, bytes: &[u8]) {
    let n = byte_words(bytes.len());
    // SAFETY: room per the contract; bytes may be copied into MaybeUninit
    // words, and `n - 1` is the last of them when `n > 0`.
    unsafe {
        if n > 0 {
            *dst.add(n - 1) = word(0);
        }
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst.cast::<u8>(), bytes.len())
    }
}

/// Moves the environment `f` of a request for another process to `dst`,
/// with the words it takes zeroed first, so that the bytes of its last word
/// past `f`'s size are initialised (see [`put_bytes`]). The closures that
/// cross processes capture nothing (user closures) or whole integers and
/// addresses (the runtime's own messages): they have no padding inside,
/// which a typed write would leave uninitialised.
///
/// # Safety
/// `dst` must have room for `value_words::<F>()` words.
#[inline]
pub(crate) unsafe fn put_env<F>(dst: *mut Word, f: F) {
    let n = super::record::value_words::<F>();
    // SAFETY: room for `n` words per the contract.
    unsafe {
        for i in 0..n {
            *dst.add(i) = word(0);
        }
        super::record::put_value(dst, f)
    }
}

/// The `len` bytes at `src`.
///
/// # Safety
/// `src` must hold `len` initialised bytes that live for `'a`.
#[inline]
pub(crate) unsafe fn bytes_at<'a>(src: *const Word, len: usize) -> &'a [u8] {
    // SAFETY: per the contract.
    unsafe { std::slice::from_raw_parts(src.cast::<u8>(), len) }
}

/// A word holding `v`.
#[inline]
pub(crate) fn word(v: u64) -> Word {
    MaybeUninit::new(v)
}

/// A `fn(&mut T, V) -> U` carried inside a serialized argument: written as
/// its offset from the anchor ([`fn_offset`]) and read back as the same
/// function in the receiving process. It lets code that wraps a user's
/// `fn` (an adaptive property's trustee takes its lock around it) ship that
/// `fn` beside the argument. Only the runtime makes and reads one, as part
/// of an argument whose type, like a request's shim, both sides name from
/// the same monomorphized code.
pub(crate) struct FnCode<T, V, U>(pub(crate) fn(&mut T, V) -> U);

impl<T, V, U> Serialize for FnCode<T, V, U> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        fn_offset(self.0 as usize).serialize(s)
    }
}

impl<'de, T, V, U> serde::Deserialize<'de> for FnCode<T, V, U> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let offset = i64::deserialize(d)?;
        // SAFETY: a `FnCode<T, V, U>` is only decoded from the argument of a
        // request that the program's own code encoded with this same type
        // (the request's shim, named by offset in the same binary, decodes
        // exactly the type its sender encoded), so the offset is that of a
        // `fn(&mut T, V) -> U` of this binary, from `fn_offset`.
        Ok(FnCode(unsafe { fn_at::<fn(&mut T, V) -> U>(offset) }))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "Miri does not lay functions out in one address range")]
    fn code_offsets_round_trip_and_the_cache_stays_in_step() {
        unsafe fn a(_: *mut u8, _: *mut u8, _: &mut super::super::record::Responder<'_>) {}
        unsafe fn b(_: *mut u8, _: *mut u8, _: &mut super::super::record::Responder<'_>) {}
        let (oa, ob) = (code_offset(a), code_offset(b));
        // SAFETY: offsets from this binary.
        unsafe {
            assert_eq!(code_at(oa) as *const () as usize, a as *const () as usize);
            assert_eq!(code_at(ob) as *const () as usize, b as *const () as usize);
        }
        let mut client = [0i64; CODE_CACHE];
        let mut trustee = [0i64; CODE_CACHE];
        for &off in &[oa, ob, oa, oa, ob, oa] {
            let (flags, full) = code_header(&mut client, off);
            let rec = [word(3 | flags), word(off as u64), word(0)];
            // SAFETY: a well-formed remote record.
            let (shim, skip) = unsafe { decode_code(rec.as_ptr(), &mut trustee) };
            assert_eq!(skip, if full { 2 } else { 1 });
            // SAFETY: as above.
            assert_eq!(shim as *const () as usize, unsafe { code_at(off) } as *const () as usize);
        }
    }

    #[test]
    fn a_byte_vector_moves_into_its_tail_and_other_values_are_serialized() {
        let v = vec![7u8; 5000];
        let at = v.as_ptr();
        let (kind, original) = with_tail(v, |t| match t {
            Tail::Owned(b) => {
                assert_eq!(b.as_ptr(), at, "the vector's own buffer, not a copy");
                "owned"
            }
            Tail::Borrowed(_) => "borrowed",
        });
        assert_eq!((kind, original), ("owned", None));
        let pair = (vec![1u8, 2, 3], 9u64);
        let (bytes, original) = with_tail(pair.clone(), |t| match t {
            Tail::Borrowed(b) => b.to_vec(),
            Tail::Owned(_) => panic!("a tuple was moved as bytes"),
        });
        assert_eq!(original, Some(pair.clone()));
        assert_eq!(deserialize::<(Vec<u8>, u64)>(&bytes), pair);
        let (bytes, original) = with_tail(String::from("plain"), |t| t.bytes().to_vec());
        assert_eq!((bytes.as_slice(), original.as_deref()), (&b"plain"[..], Some("plain")));
    }

    #[cfg(not(miri))]
    proptest::proptest! {
        /// Trust tokens and values from another process: arbitrary bytes
        /// decode or fail, and never panic inside the decoder.
        #[test]
        fn decoding_arbitrary_value_bytes_never_panics(body in proptest::collection::vec(proptest::num::u8::ANY, 0..128)) {
            let _ = postcard::from_bytes::<(u64, String, Vec<u32>)>(&body);
            let _ = postcard::from_bytes::<Result<Vec<u8>, String>>(&body);
        }
    }

    #[test]
    fn plain_bytes_cross_as_themselves() {
        let v: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
        // No framing: the bytes sent are the vector's own.
        assert_eq!(with_serialized(&v, <[u8]>::to_vec), v);
        assert_eq!(with_serialized(&v, deserialize::<Vec<u8>>), v);
        let s = String::from("grüße, 世界");
        assert_eq!(with_serialized(&s, <[u8]>::to_vec), s.as_bytes());
        assert_eq!(with_serialized(&s, deserialize::<String>), s);
        let b: Box<[u8]> = vec![9u8; 77].into_boxed_slice();
        assert_eq!(with_serialized(&b, deserialize::<Box<[u8]>>), b);
        assert_eq!(with_serialized(&Vec::<u8>::new(), deserialize::<Vec<u8>>), Vec::<u8>::new());
        // A string that is not UTF-8 is refused, not trusted.
        let e = try_deserialize::<String>(&[0xff, 0xfe]).unwrap_err();
        assert!(e.contains("malformed string"), "{e}");
        // Other types still go through serde (with the framing trailer).
        let framed = with_serialized(&vec![1u16, 2], <[u8]>::to_vec);
        assert_ne!(framed, [1, 0, 2, 0]);
        assert_eq!(deserialize::<Vec<u16>>(&framed), [1, 2]);
    }

    #[test]
    fn an_owned_tail_becomes_a_byte_value_without_a_copy() {
        let v: Vec<u8> = (0..=255u8).cycle().take(20_000).collect();
        let at = v.as_ptr();
        let back: Vec<u8> = try_deserialize_tail(Tail::Owned(v.clone())).unwrap();
        assert_eq!(back, v);
        let back: Vec<u8> = try_deserialize_tail(Tail::Owned(v)).unwrap();
        assert_eq!(back.as_ptr(), at, "the same buffer");
        let s = String::from("grüße, 世界");
        assert_eq!(try_deserialize_tail::<String>(Tail::Owned(s.clone().into_bytes())).unwrap(), s);
        let e = try_deserialize_tail::<String>(Tail::Owned(vec![0xff, 0xfe])).unwrap_err();
        assert!(e.contains("malformed string"), "{e}");
        let b: Box<[u8]> = try_deserialize_tail(Tail::Owned(vec![9u8; 77])).unwrap();
        assert_eq!(&b[..], &[9u8; 77][..]);
        // Other types are decoded from the owned bytes as from borrowed ones.
        let framed = with_serialized(&(7u32, String::from("x")), <[u8]>::to_vec);
        assert_eq!(try_deserialize_tail::<(u32, String)>(Tail::Owned(framed.clone())).unwrap(), (7, "x".into()));
        assert_eq!(try_deserialize_tail::<(u32, String)>(Tail::Borrowed(&framed)).unwrap(), (7, "x".into()));
        assert!(try_deserialize_tail::<(u32, String)>(Tail::Owned(vec![1])).is_err());
    }

    #[cfg(not(miri))]
    proptest::proptest! {
        /// Any bytes, as any of the plain types: exact, or refused.
        #[test]
        fn plain_bytes_round_trip_or_are_refused(body in proptest::collection::vec(proptest::num::u8::ANY, 0..3000)) {
            proptest::prop_assert_eq!(try_deserialize::<Vec<u8>>(&body).unwrap(), body.clone());
            proptest::prop_assert_eq!(&*try_deserialize::<Box<[u8]>>(&body).unwrap(), &body[..]);
            match try_deserialize::<String>(&body) {
                Ok(s) => proptest::prop_assert_eq!(s.as_bytes(), &body[..]),
                Err(_) => proptest::prop_assert!(std::str::from_utf8(&body).is_err()),
            }
        }
    }

    #[test]
    fn serialized_values_round_trip() {
        let v = (7u32, String::from("x"), vec![1u8, 2, 3]);
        let back: (u32, String, Vec<u8>) = with_serialized(&v, deserialize);
        assert_eq!(back, v);
    }
}
