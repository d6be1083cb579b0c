//! The byte layout of one request and one response inside a slot.
//!
//! A request is `[header][shim][property][environment…]`: the header word
//! holds the record's length in words, `shim` is the monomorphised function
//! that knows the closure's and the property's types, `property` is the
//! property's address (null for messages to a thread rather than to a
//! property), and the closure's captured environment follows, copied by
//! value. The smallest request is 24 bytes, as in the thesis. A response is
//! `[header][value…]`, the header carrying the length and a tag.
//!
//! Values that are large (over [`MAX_INLINE`] bytes) or over-aligned travel
//! as a `Box` instead of inline; the trustee also boxes results once the
//! response slot runs short, so that every request of a batch always gets
//! its response and no size ever panics.

use std::any::Any;
use std::mem::{align_of, size_of, MaybeUninit};
use std::ptr;
use std::thread;

use super::slot::{BatchWriter, Word};

/// What the trustee calls for one request: `prop` and the environment at
/// `env`, answering through the [`Responder`].
pub(crate) type Shim = unsafe fn(prop: *mut u8, env: *mut u8, out: &mut Responder<'_>);

/// Largest closure environment or result copied into a slot by value.
pub const MAX_INLINE: usize = 512;
/// Words of a request before its environment.
pub(crate) const REQUEST_HEADER_WORDS: usize = 3;
/// The largest fallback response (a panic payload): header plus a fat box.
pub(crate) const FALLBACK_WORDS: usize = 3;

const TAG_INLINE: u64 = 0;
const TAG_BOXED: u64 = 1;
const TAG_PANIC: u64 = 2;
// Responses to another process: serialized values and panic messages,
// inline (`[header][len][bytes…]`) or in the bulk area (`[header][len][offset]`).
const TAG_SER: u64 = 3;
const TAG_SER_BULK: u64 = 4;
const TAG_PANIC_MSG: u64 = 5;
const TAG_PANIC_MSG_BULK: u64 = 6;
const TAG_TOO_LARGE: u64 = 7;
/// `[header][len][id]`: the result waits in the trustee's outbox.
const TAG_LARGE: u64 = 8;

/// Where a batch from another process keeps its large payloads.
#[derive(Clone, Copy)]
pub(crate) struct Far {
    /// The client that sent the batch.
    pub(crate) client: usize,
    /// The client's bulk area for this pair's requests.
    pub(crate) req_bulk: *const u8,
    /// Our bulk area for this pair's responses, and its size.
    pub(crate) resp_bulk: *mut u8,
    pub(crate) bulk_bytes: usize,
}

/// Whether a `V` travels inline (else boxed).
#[inline(always)]
pub(crate) const fn inline_ok<V>() -> bool {
    size_of::<V>() <= MAX_INLINE && align_of::<V>() <= 8
}

/// Words a `V` takes in a record.
#[inline(always)]
pub(crate) const fn value_words<V>() -> usize {
    if inline_ok::<V>() {
        size_of::<V>().div_ceil(8)
    } else {
        1
    }
}

/// Words of a request whose closure is an `F`.
#[inline(always)]
pub(crate) const fn request_words<F>() -> usize {
    REQUEST_HEADER_WORDS + value_words::<F>()
}

/// Length in words of the record starting at `rec`.
#[inline(always)]
pub(crate) fn record_words(rec: *const Word) -> usize {
    // SAFETY: every record starts with an initialised header word.
    (unsafe { (*rec).assume_init() } & 0xffff_ffff) as usize
}

#[inline(always)]
fn record_tag(rec: *const Word) -> u64 {
    // SAFETY: every record starts with an initialised header word.
    unsafe { (*rec).assume_init() >> 32 }
}

/// Moves `v` to `dst`, inline or boxed.
///
/// # Safety
/// `dst` must have room for `value_words::<V>()` words.
#[inline(always)]
pub(crate) unsafe fn put_value<V>(dst: *mut Word, v: V) {
    if inline_ok::<V>() {
        // SAFETY: room and 8-byte alignment guaranteed by the caller and by
        // `inline_ok` (align <= 8).
        unsafe { ptr::write(dst.cast::<V>(), v) }
    } else {
        // SAFETY: one word of room.
        unsafe { ptr::write(dst.cast::<*mut V>(), Box::into_raw(Box::new(v))) }
    }
}

/// Moves a `V` out of `src`, as written by [`put_value`].
///
/// # Safety
/// `src` must hold a `V` written by `put_value` and not yet taken.
#[inline(always)]
pub(crate) unsafe fn take_value<V>(src: *const Word) -> V {
    if inline_ok::<V>() {
        // SAFETY: per the caller, a live `V` is stored here.
        unsafe { ptr::read(src.cast::<V>()) }
    } else {
        // SAFETY: per the caller, a pointer from `Box::into_raw` is stored here.
        unsafe { *Box::from_raw(ptr::read(src.cast::<*mut V>())) }
    }
}

/// Writes a request for closure `f` at `dst`.
///
/// # Safety
/// `dst` must have room for `request_words::<F>()` words, and `shim` must be
/// the shim for this `F` and the property behind `prop`.
#[inline(always)]
pub(crate) unsafe fn encode_request<F>(dst: *mut Word, shim: Shim, prop: *mut u8, f: F) {
    let words = request_words::<F>() as u64;
    // SAFETY: room for the header words per the caller's contract.
    unsafe {
        *dst = MaybeUninit::new(words);
        // Stored with their pointer types so that they keep provenance.
        ptr::write(dst.add(1).cast::<Shim>(), shim);
        ptr::write(dst.add(2).cast::<*mut u8>(), prop);
        put_value(dst.add(REQUEST_HEADER_WORDS), f);
    }
}

/// Runs the request at `rec`, answering through `out`.
///
/// # Safety
/// `rec` must be a request written by [`encode_request`] whose closure has
/// not run yet; it runs (and is moved out) exactly once here.
#[inline(always)]
pub(crate) unsafe fn dispatch(rec: *const Word, out: &mut Responder<'_>) {
    // SAFETY: the header words are initialised by `encode_request`, which
    // wrote a `Shim` and a `*mut u8` there.
    unsafe {
        let shim: Shim = ptr::read(rec.add(1).cast::<Shim>());
        let prop: *mut u8 = ptr::read(rec.add(2).cast::<*mut u8>());
        shim(prop, rec.add(REQUEST_HEADER_WORDS) as *mut u8, out)
    }
}

/// Runs a request that came from another process (see `remote`).
///
/// # Safety
/// As for [`dispatch`], for a record written by `Worker::enqueue_remote`,
/// with `cache` this pair's trustee-side code cache.
#[inline(always)]
pub(crate) unsafe fn dispatch_remote(
    rec: *const Word,
    out: &mut Responder<'_>,
    cache: &mut [i64; super::remote::CODE_CACHE],
) {
    // SAFETY: the record's layout per `enqueue_remote`; the property word is
    // an address in this process, carried as an integer.
    unsafe {
        let (shim, skip) = super::remote::decode_code(rec, cache);
        let prop = std::ptr::with_exposed_provenance_mut::<u8>((*rec.add(skip)).assume_init() as usize);
        shim(prop, rec.add(skip + 1) as *mut u8, out)
    }
}

/// Bit of a tail's length word: the bytes are in the bulk area.
pub(crate) const TAIL_IN_BULK: u64 = 1 << 63;
/// Largest tail kept inline in a record; longer ones go to the pair's bulk
/// area. Kept small: a slot holds one batch of records, so inline tails of
/// a few hundred bytes leave room for only a few requests per batch, where
/// the bulk area takes many (2-process echo, 2 cores: 512-byte requests 3.3
/// Mops/s inline up to 640 bytes, 12 Mops/s through the bulk area; 64-byte
/// requests 0.68 of one process's rate inline, 0.80 through the bulk area).
pub(crate) const MAX_INLINE_TAIL: usize = 32;

/// The bytes of the tail (serialized argument) at `tail`, which follows a
/// remote record's environment.
///
/// # Safety
/// `tail` must point at a tail written by `enqueue_remote`, in a batch
/// answered through `out`.
pub(crate) unsafe fn tail_bytes<'b>(tail: *const Word, out: &Responder<'_>) -> &'b [u8] {
    // SAFETY: the tail's layout per `enqueue_remote` and `Worker::flush`.
    unsafe {
        let w = (*tail).assume_init();
        let len = (w & !(TAIL_IN_BULK | super::large::TAIL_ASSEMBLED)) as usize;
        if w & super::large::TAIL_ASSEMBLED != 0 {
            let far = out.remote().expect("an assembled tail from a local client");
            super::large::assembled(far.client, len)
        } else if w & TAIL_IN_BULK != 0 {
            let at = (*tail.add(1)).assume_init() as usize;
            let far = out.remote().expect("bulk tail from a local client");
            std::slice::from_raw_parts(far.req_bulk.add(at), len)
        } else {
            super::remote::bytes_at(tail.add(1), len)
        }
    }
}

/// Writes the responses of one batch, keeping room so that every request
/// of the batch gets one.
pub(crate) struct Responder<'a> {
    writer: &'a mut BatchWriter,
    /// Requests of the batch not yet answered, this one included.
    left: usize,
    /// Set when the batch came from another process.
    far: Option<Far>,
    bulk_used: usize,
}

impl<'a> Responder<'a> {
    pub(crate) fn new(writer: &'a mut BatchWriter, count: usize) -> Self {
        Responder { writer, left: count, far: None, bulk_used: 0 }
    }

    /// For a batch from another process.
    pub(crate) fn far(writer: &'a mut BatchWriter, count: usize, far: Far) -> Self {
        Responder { writer, left: count, far: Some(far), bulk_used: 0 }
    }

    /// Bytes of the response bulk area used so far.
    pub(crate) fn bulk_used(&self) -> usize {
        self.bulk_used
    }

    /// The other process's side of this batch, if it came from one.
    pub(crate) fn remote(&self) -> Option<Far> {
        self.far
    }

    /// Answers with `r`, serializing it when the client is in another process.
    #[inline(always)]
    pub(crate) fn put_any<U: serde::Serialize + 'static>(&mut self, r: thread::Result<U>) {
        if self.far.is_some() {
            self.put_remote(r)
        } else {
            self.put(r)
        }
    }

    /// Answers a client in another process: the value serialized, or the
    /// panic's message.
    pub(crate) fn put_remote<U: serde::Serialize + 'static>(&mut self, r: thread::Result<U>) {
        match r {
            Ok(v) => {
                let sent = super::remote::try_with_serialized(&v, |b| self.put_bytes(b, TAG_SER, TAG_SER_BULK));
                // Sent as a copy (or not at all): the original ends here. Its
                // `Drop` is user code inside the trustee's loop: a panic there
                // is reported, and the batch is answered all the same.
                let dropped = super::remote::drop_original(v);
                if let Err(msg) = sent {
                    // The result cannot travel: the caller gets the reason.
                    self.put_bytes(msg.as_bytes(), TAG_PANIC_MSG, TAG_PANIC_MSG_BULK)
                }
                if let (Some(p), Some(w)) = (dropped, crate::runtime::context::current()) {
                    w.report_panic("drop of a result sent to another process", p);
                }
            }
            Err(p) => {
                let msg = crate::error::panic_message(&*p);
                drop(p);
                self.put_bytes(msg.as_bytes(), TAG_PANIC_MSG, TAG_PANIC_MSG_BULK)
            }
        }
    }

    fn put_bytes(&mut self, bytes: &[u8], inline_tag: u64, bulk_tag: u64) {
        use super::remote::{byte_words, put_bytes, word};
        debug_assert!(self.left > 0, "more responses than requests");
        self.left -= 1;
        let keep = self.left;
        let words = 2 + byte_words(bytes.len());
        if let Some(dst) = self.writer.reserve(words, keep) {
            Self::header(dst, words, inline_tag);
            // SAFETY: `words` words reserved: header, length, bytes.
            unsafe {
                *dst.add(1) = word(bytes.len() as u64);
                put_bytes(dst.add(2), bytes);
            }
            return;
        }
        let far = self.far.expect("bulk answer to a local client");
        let dst = self.writer.reserve(FALLBACK_WORDS, keep).expect("gossamer: response slot invariant broken");
        if self.bulk_used + bytes.len() > far.bulk_bytes && inline_tag == TAG_SER {
            // Too large for what is left of the bulk area: the client pulls it.
            let id = super::large::stash(bytes);
            Self::header(dst, FALLBACK_WORDS, TAG_LARGE);
            // SAFETY: three words reserved.
            unsafe {
                *dst.add(1) = word(bytes.len() as u64);
                *dst.add(2) = word(id);
            }
            return;
        }
        if self.bulk_used + bytes.len() > far.bulk_bytes {
            Self::header(dst, FALLBACK_WORDS, TAG_TOO_LARGE);
            // SAFETY: three words reserved.
            unsafe {
                *dst.add(1) = word(bytes.len() as u64);
                *dst.add(2) = word(far.bulk_bytes as u64);
            }
            return;
        }
        let at = self.bulk_used;
        // SAFETY: the response bulk area is ours until the client publishes
        // its next batch, and `at + len` fits, checked above.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), far.resp_bulk.add(at), bytes.len()) };
        self.bulk_used = (at + bytes.len()).next_multiple_of(8);
        Self::header(dst, FALLBACK_WORDS, bulk_tag);
        // SAFETY: three words reserved.
        unsafe {
            *dst.add(1) = word(bytes.len() as u64);
            *dst.add(2) = word(at as u64);
        }
    }

    fn header(dst: *mut Word, words: usize, tag: u64) {
        // SAFETY: `dst` is a freshly reserved record of at least one word.
        unsafe { *dst = MaybeUninit::new(words as u64 | (tag << 32)) }
    }

    /// Answers the current request with `r`.
    #[inline(always)]
    pub(crate) fn put<U>(&mut self, r: thread::Result<U>) {
        debug_assert!(self.left > 0, "more responses than requests");
        self.left -= 1;
        let keep = self.left;
        match r {
            Ok(v) => {
                if inline_ok::<U>() {
                    let words = 1 + value_words::<U>();
                    if let Some(dst) = self.writer.reserve(words, keep) {
                        Self::header(dst, words, TAG_INLINE);
                        // SAFETY: the record has room for the value.
                        unsafe { put_value(dst.add(1), v) };
                        return;
                    }
                }
                let dst = self.writer.reserve(2, keep).expect("gossamer: response slot invariant broken");
                Self::header(dst, 2, TAG_BOXED);
                // SAFETY: two words reserved; one holds the box pointer.
                unsafe { ptr::write(dst.add(1).cast::<*mut U>(), Box::into_raw(Box::new(v))) };
            }
            Err(payload) => {
                let dst = self.writer.reserve(FALLBACK_WORDS, keep).expect("gossamer: response slot invariant broken");
                Self::header(dst, FALLBACK_WORDS, TAG_PANIC);
                // SAFETY: three words reserved; two hold the fat box pointer.
                unsafe { ptr::write(dst.add(1).cast::<Box<dyn Any + Send>>(), payload) };
            }
        }
    }
}

/// Moves the result out of the response record at `rec`.
///
/// # Safety
/// `rec` must be a response written by [`Responder::put::<U>`], taken once.
#[inline(always)]
pub(crate) unsafe fn take_response<U>(rec: *const Word) -> thread::Result<U> {
    // SAFETY: the tag says which form `put` wrote; each is read once.
    unsafe {
        match record_tag(rec) {
            TAG_INLINE => Ok(take_value::<U>(rec.add(1))),
            TAG_BOXED => Ok(*Box::from_raw(ptr::read(rec.add(1).cast::<*mut U>()))),
            TAG_PANIC => Err(ptr::read(rec.add(1).cast::<Box<dyn Any + Send>>())),
            t => panic!("gossamer: malformed response tag {t}"),
        }
    }
}

/// True when the response at `rec` came from another process.
#[inline(always)]
pub(crate) fn is_remote_response(rec: *const Word) -> bool {
    record_tag(rec) >= TAG_SER
}

/// Takes a response from another process: `resp_bulk` is the pair's
/// response bulk area.
///
/// # Safety
/// `rec` must be a response written by `Responder::put_remote::<U>`, taken
/// once, with the bulk area still unchanged.
pub(crate) unsafe fn take_remote_response<U: serde::de::DeserializeOwned + 'static>(
    rec: *const Word,
    resp_bulk: *const u8,
) -> thread::Result<U> {
    use super::remote::{bytes_at, try_deserialize};
    let fail = |m: String| -> Box<dyn std::any::Any + Send> { Box::new(m) };
    // SAFETY: the layouts written by `put_bytes`.
    unsafe {
        let len = (*rec.add(1)).assume_init() as usize;
        let bulk = || std::slice::from_raw_parts(resp_bulk.add((*rec.add(2)).assume_init() as usize), len);
        match record_tag(rec) {
            TAG_SER => try_deserialize(bytes_at(rec.add(2), len)).map_err(fail),
            TAG_SER_BULK => try_deserialize(bulk()).map_err(fail),
            TAG_PANIC_MSG => Err(Box::new(String::from_utf8_lossy(bytes_at(rec.add(2), len)).into_owned())),
            TAG_PANIC_MSG_BULK => Err(Box::new(String::from_utf8_lossy(bulk()).into_owned())),
            TAG_LARGE => {
                Err(Box::new(super::large::LargeResult { trustee: usize::MAX, id: (*rec.add(2)).assume_init(), len }))
            }
            TAG_TOO_LARGE => Err(Box::new(format!(
                "gossamer: a result of {len} bytes does not fit the bulk area of {} bytes between these threads \
                 (set GOSSAMER_BULK_BYTES, or GOSSAMER_FAR_BULK_BYTES between hosts, higher)",
                (*rec.add(2)).assume_init()
            ))),
            t => panic!("gossamer: malformed response tag {t}"),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::slot::{Overflow, Primary, Slot};
    use super::*;

    unsafe fn add_shim(prop: *mut u8, env: *mut u8, out: &mut Responder<'_>) {
        // SAFETY: the test encodes `(u64, Vec<u8>)` closures' data below.
        let (a, v): (u64, Vec<u8>) = unsafe { take_value(env as *const Word) };
        let base = prop as usize as u64;
        out.put::<(u64, Vec<u8>)>(Ok((a + base, v)));
    }

    unsafe fn big_shim(_prop: *mut u8, env: *mut u8, out: &mut Responder<'_>) {
        // SAFETY: encoded as `[u8; 4096]` below.
        let b: [u8; 4096] = unsafe { take_value(env as *const Word) };
        out.put::<[u8; 4096]>(Ok(b));
    }

    unsafe fn panic_shim(_prop: *mut u8, _env: *mut u8, out: &mut Responder<'_>) {
        out.put::<u8>(Err(Box::new("boom")));
    }

    #[test]
    fn requests_and_responses_round_trip_inline_boxed_and_panicking() {
        let (rp, ro, sp, so) = (Primary::default(), Overflow::default(), Primary::default(), Overflow::default());
        let req = Slot { primary: &rp, overflow: &ro };
        let resp = Slot { primary: &sp, overflow: &so };
        let mut kinds = Vec::new();
        // SAFETY: single-threaded; the slot is ours.
        unsafe {
            req.write(0, |w| {
                for i in 0..40u64 {
                    let (words, shim): (usize, Shim) = match i % 3 {
                        0 => (request_words::<(u64, Vec<u8>)>(), add_shim),
                        1 => (request_words::<[u8; 4096]>(), big_shim),
                        _ => (request_words::<()>(), panic_shim),
                    };
                    let Some(dst) = w.reserve(words, 0) else { break };
                    match i % 3 {
                        0 => encode_request(dst, shim, ptr::without_provenance_mut(7), (i, vec![i as u8; 3])),
                        1 => encode_request(dst, shim, ptr::null_mut(), [i as u8; 4096]),
                        _ => encode_request(dst, shim, ptr::null_mut(), ()),
                    }
                    kinds.push(i);
                }
            });
        }
        assert!(kinds.len() > 20);
        req.publish(1);
        // SAFETY: published above; responses written to a separate slot.
        unsafe {
            req.read(|r| {
                let n = r.count() as usize;
                resp.write(FALLBACK_WORDS, |w| {
                    let mut out = Responder::new(w, n);
                    while let Some(rec) = r.next(record_words) {
                        dispatch(rec, &mut out);
                    }
                });
            });
        }
        resp.publish(1);
        // SAFETY: published above; each response taken once with its type.
        unsafe {
            resp.read(|r| {
                for &i in &kinds {
                    let rec = r.next(record_words).expect("a response per request");
                    match i % 3 {
                        0 => {
                            let (a, v) = take_response::<(u64, Vec<u8>)>(rec).unwrap();
                            assert_eq!(a, i + 7);
                            assert_eq!(v, vec![i as u8; 3]);
                        }
                        1 => assert_eq!(take_response::<[u8; 4096]>(rec).unwrap(), [i as u8; 4096]),
                        _ => {
                            let p = take_response::<u8>(rec).unwrap_err();
                            assert_eq!(*p.downcast::<&str>().unwrap(), "boom");
                        }
                    }
                }
                assert!(r.next(record_words).is_none());
            });
        }
    }

    #[test]
    fn a_full_batch_of_minimal_requests_gets_all_its_responses_even_when_large() {
        unsafe fn fat(_p: *mut u8, _e: *mut u8, out: &mut Responder<'_>) {
            out.put::<[u64; 60]>(Ok([9; 60]));
        }
        let (rp, ro, sp, so) = (Primary::default(), Overflow::default(), Primary::default(), Overflow::default());
        let req = Slot { primary: &rp, overflow: &ro };
        let resp = Slot { primary: &sp, overflow: &so };
        // SAFETY: single-threaded test.
        let n = unsafe {
            req.write(0, |w| {
                while let Some(d) = w.reserve(request_words::<()>(), 0) {
                    encode_request(d, fat, ptr::null_mut(), ());
                }
                w.count() as usize
            })
        };
        assert_eq!(n, 46);
        // SAFETY: as above.
        unsafe {
            req.read(|r| {
                resp.write(FALLBACK_WORDS, |w| {
                    let mut out = Responder::new(w, n);
                    while let Some(rec) = r.next(record_words) {
                        dispatch(rec, &mut out);
                    }
                })
            });
            resp.read(|r| {
                assert_eq!(r.count() as usize, n);
                while let Some(rec) = r.next(record_words) {
                    assert_eq!(take_response::<[u64; 60]>(rec).unwrap(), [9; 60]);
                }
            });
        }
    }
}
