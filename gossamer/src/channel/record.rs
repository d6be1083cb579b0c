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
//! its response and no size ever panics. That rests on one rule: every
//! request record, within a process or to another one, is at least
//! [`FALLBACK_WORDS`] long, so a batch's fallback responses fit wherever
//! its requests did.
//!
//! Records from another process are decoded only after their lengths and
//! offsets are checked against the record, the batch and the pair's bulk
//! area ([`serve_remote`], [`tail_bytes`], [`take_remote_response`]): a bad
//! one is refused with an error naming the peer, never read out of bounds.

use std::any::Any;
use std::mem::{align_of, size_of, MaybeUninit};
use std::ptr;
use std::thread;

use super::remote::Tail;
use super::slot::{BatchReader, BatchWriter, Word};

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
/// `[header]`: the request's batch was malformed and refused (the trustee
/// logged why).
const TAG_REFUSED: u64 = 9;
/// `[header][token]`: the property moved; its first cell relayed the
/// request, and the result follows in a message with the token.
const TAG_RELAYED: u64 = 10;

/// The answer of a moved property's first cell to a request it relayed to
/// wherever the value is: the result follows in a message that carries the
/// same token (see `trust::migrate`). Tokens are trust ids, unique in the
/// whole program.
pub(crate) struct Relayed(pub(crate) u64);

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
/// The record's length has been checked against its batch (see
/// [`BatchReader::try_next`]); here its words are checked against what it
/// claims to hold before any is read — the code word, the property word —
/// and the shim then reads its environment and tail only inside the record
/// ([`take_env`], [`tail_bytes`]). A record too short for what it claims is
/// refused with an error to its client.
///
/// # Safety
/// As for [`dispatch`], for a record written by `Worker::enqueue_remote`
/// (its length checked), with `cache` this pair's trustee-side code cache.
#[inline(always)]
pub(crate) unsafe fn dispatch_remote(
    rec: *const Word,
    out: &mut Responder<'_>,
    cache: &mut [i64; super::remote::CODE_CACHE],
) {
    let words = record_words(rec);
    // SAFETY: the header word is initialised (the record has at least one word).
    let hdr = unsafe { (*rec).assume_init() };
    let skip = if hdr & super::remote::FLAG_CODE_CACHED != 0 { 1 } else { 2 };
    if words < skip + 1 {
        let client = out.far.map_or(usize::MAX, |f| f.client);
        return out.put_any::<()>(Err(Box::new(malformed(client, "it is too short for its code and property words"))));
    }
    // SAFETY: `rec + words` is the end of the record, inside its batch.
    out.record_end = unsafe { rec.add(words) };
    // SAFETY: the record's layout per `enqueue_remote`, its words checked
    // above; the property word is an address in this process, carried as
    // an integer.
    unsafe {
        let (shim, skip) = super::remote::decode_code(rec, cache);
        let prop = std::ptr::with_exposed_provenance_mut::<u8>((*rec.add(skip)).assume_init() as usize);
        shim(prop, rec.add(skip + 1) as *mut u8, out)
    }
    out.record_end = ptr::null();
}

/// Serves a batch of requests from another process: each record is run
/// with [`dispatch_remote`]. A batch whose lengths are wrong (a record
/// past its block, more records than words) is refused from that record
/// on: the rest cannot be found, so each request left gets a refusal,
/// logged here with the client's name, and nothing past a record's bounds
/// is read.
///
/// # Safety
/// As for [`dispatch_remote`], for the batch that `r` reads.
pub(crate) unsafe fn serve_remote(
    r: &mut BatchReader,
    out: &mut Responder<'_>,
    cache: &mut [i64; super::remote::CODE_CACHE],
) {
    loop {
        match r.try_next(record_words) {
            Ok(Some(rec)) => {
                // SAFETY: per the contract; the record lies inside its block.
                unsafe { dispatch_remote(rec, out, cache) }
            }
            Ok(None) => return,
            Err(why) => {
                let client = out.far.map_or(usize::MAX, |f| f.client);
                tracing::error!("{}", malformed_batch(client, why));
                out.refuse_rest();
                return;
            }
        }
    }
}

/// The error for a request record from another process that is refused.
fn malformed(client: usize, why: &str) -> String {
    format!("gossamer: a malformed request from thread {client} (another process) was refused: {why}")
}

fn malformed_batch(client: usize, why: &str) -> String {
    format!("gossamer: a malformed batch from thread {client} (another process) was refused: {why}")
}

/// Moves the environment of a remote request's shim out of `env`, once
/// it is checked to lie inside the request's record.
///
/// # Safety
/// `env` must be where [`dispatch_remote`] put this request's environment,
/// for a shim whose closure is an `F`, taken once.
pub(crate) unsafe fn take_env<F>(env: *const Word, out: &Responder<'_>) -> Result<F, String> {
    if !out.record_end.is_null() && words_left(env, out.record_end) < value_words::<F>() {
        let client = out.far.map_or(usize::MAX, |f| f.client);
        return Err(malformed(client, "it is too short for its closure"));
    }
    // SAFETY: per the contract, and inside the record (checked above).
    Ok(unsafe { take_value::<F>(env) })
}

/// Words from `at` to `end` (0 if `at` is past it).
fn words_left(at: *const Word, end: *const Word) -> usize {
    (end as usize).saturating_sub(at as usize) / size_of::<Word>()
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
/// The same between hosts, where a batch whose tails are all inline costs
/// one put instead of two and a fence: over TCP each put is a system call
/// on the way out and a message the target must take in, and the second
/// lies on a blocking request's path (2 simulated hosts, 64-byte echo: a
/// round trip of 55–60 µs through the bulk area, 40–45 µs inline).
pub(crate) const MAX_FAR_INLINE_TAIL: usize = 128;

/// The bytes of the tail (serialized argument) at `tail`, which follows a
/// remote record's environment: borrowed from the record, the bulk area or
/// the assembly buffer, or owned when the argument landed beside the
/// region (see `fabric::landed`).
///
/// Its length word and offset come from the client's process: the tail is
/// refused (an error naming the client) unless its length word lies inside
/// the record, its inline bytes inside the record too, its bulk bytes
/// inside the pair's request bulk area, and an assembled argument has the
/// length it claims.
///
/// # Safety
/// `tail` must point where a tail written by `enqueue_remote` starts, in a
/// request being served by [`dispatch_remote`] through `out`.
pub(crate) unsafe fn tail_bytes<'b>(tail: *const Word, out: &Responder<'_>) -> Result<Tail<'b>, String> {
    let Some(far) = out.remote() else {
        return Err("gossamer: a request with a serialized argument from this process".into());
    };
    let refuse = |why: &str| Err(malformed(far.client, why));
    let room = words_left(tail, out.record_end);
    if room < 1 {
        return refuse("its argument's length lies past the record");
    }
    // SAFETY: the length word lies inside the record (checked above).
    let w = unsafe { (*tail).assume_init() };
    let len = w & !(TAIL_IN_BULK | super::large::TAIL_ASSEMBLED);
    let Ok(len) = usize::try_from(len) else { return refuse("its argument's length is out of range") };
    if w & super::large::TAIL_ASSEMBLED != 0 {
        // SAFETY: used only within this request, per `assembled`.
        return unsafe { super::large::assembled(far.client, len) }
            .map(Tail::Borrowed)
            .map_err(|why| malformed(far.client, why));
    }
    if w & TAIL_IN_BULK != 0 {
        if room < 2 {
            return refuse("its argument's bulk offset lies past the record");
        }
        // SAFETY: the offset word lies inside the record (checked above).
        let at = unsafe { (*tail.add(1)).assume_init() };
        match usize::try_from(at).ok().and_then(|at| at.checked_add(len).map(|end| (at, end))) {
            Some((at, end)) if end <= far.bulk_bytes && !far.req_bulk.is_null() => {
                match super::hooks::take_landed(far.req_bulk as usize + at, len) {
                    Ok(Some(bytes)) => Ok(Tail::Owned(bytes)),
                    // SAFETY: `at..end` lies inside the pair's request bulk
                    // area (checked above), which the client wrote before
                    // it published the batch and leaves alone until
                    // answered.
                    Ok(None) => Ok(Tail::Borrowed(unsafe { std::slice::from_raw_parts(far.req_bulk.add(at), len) })),
                    Err(why) => refuse(&format!("its argument {why}")),
                }
            }
            _ => refuse("its argument lies past the bulk area"),
        }
    } else if super::remote::byte_words(len) > room - 1 {
        refuse("its argument runs past the record")
    } else {
        // SAFETY: the `len` bytes after the length word lie inside the
        // record (checked above), initialised by the client.
        Ok(Tail::Borrowed(unsafe { super::remote::bytes_at(tail.add(1), len) }))
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
    /// The end of the remote request being served (null otherwise): what
    /// its shim reads must lie before it.
    record_end: *const Word,
    /// To another host, over a fabric that gathers: results that are a
    /// `Vec<u8>` of `GATHER_RESULT` bytes or more go here (their offset in
    /// the response bulk area, their bytes) instead of being copied there,
    /// for the send to take them from where they are.
    gather: Option<&'a mut Vec<(usize, Vec<u8>)>>,
    /// Whether `gather`, holding this many results, takes another of this
    /// many bytes.
    gather_more: fn(usize, usize) -> bool,
}

/// Results to another host this large or larger are sent from their own
/// buffer when they can be (see `Responder::gathering`): past what a slot
/// holds inline, so they would go to the bulk area anyway.
const GATHER_RESULT: usize = 4096;

/// A responder that gathers nothing.
fn no_more(_: usize, _: usize) -> bool {
    false
}

impl<'a> Responder<'a> {
    pub(crate) fn new(writer: &'a mut BatchWriter, count: usize) -> Self {
        Responder {
            writer,
            left: count,
            far: None,
            bulk_used: 0,
            record_end: ptr::null(),
            gather: None,
            gather_more: no_more,
        }
    }

    /// For a batch from another process.
    pub(crate) fn far(writer: &'a mut BatchWriter, count: usize, far: Far) -> Self {
        Responder {
            writer,
            left: count,
            far: Some(far),
            bulk_used: 0,
            record_end: ptr::null(),
            gather: None,
            gather_more: no_more,
        }
    }

    /// Sends large `Vec<u8>` results from their own buffers, as many as
    /// `more` allows (given how many it took and the next one's length):
    /// each is moved into `gather` with its offset in the response bulk
    /// area, whose bytes there are left as they were (see `GATHER_RESULT`).
    pub(crate) fn gathering(
        mut self,
        gather: Option<&'a mut Vec<(usize, Vec<u8>)>>,
        more: fn(usize, usize) -> bool,
    ) -> Self {
        self.gather = gather;
        self.gather_more = more;
        self
    }

    /// Answers every request of the batch still unanswered with a refusal
    /// (one word each, while the slot has room: a batch whose count is
    /// wrong cannot be answered in full anyway).
    fn refuse_rest(&mut self) {
        while self.left > 0 {
            self.left -= 1;
            let Some(dst) = self.writer.reserve(1, 0) else { return };
            Self::header(dst, 1, TAG_REFUSED);
        }
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
                let Err(v) = self.put_gathered(v) else { return };
                let client = self.far.map_or(usize::MAX, |f| f.client);
                let sent = super::transfer::toward(client, || {
                    super::remote::try_with_serialized(&v, |b| self.put_bytes(b, TAG_SER, TAG_SER_BULK))
                });
                // Sent as a copy (or not at all): the original ends here. Its
                // `Drop` is user code inside the trustee's loop: a panic there
                // is reported, and the batch is answered all the same.
                let dropped = super::remote::drop_original(v);
                if let Err(msg) = sent {
                    // The result cannot travel: the caller gets the reason.
                    self.put_bytes(msg.as_bytes(), TAG_PANIC_MSG, TAG_PANIC_MSG_BULK)
                }
                if let Some(p) = dropped {
                    super::hooks::report_panic("drop of a result sent to another process", p);
                }
            }
            Err(p) => {
                if let Some(&Relayed(token)) = p.downcast_ref::<Relayed>() {
                    return self.put_relayed(token);
                }
                let msg = crate::error::panic_message(&*p);
                drop(p);
                self.put_bytes(msg.as_bytes(), TAG_PANIC_MSG, TAG_PANIC_MSG_BULK)
            }
        }
    }

    /// Answers with `v` without copying it, if it is a `Vec<u8>` to be
    /// sent from its own buffer (see [`gathering`](Self::gathering)) and
    /// the response bulk area has room for it; else gives it back.
    fn put_gathered<U: 'static>(&mut self, v: U) -> Result<(), U> {
        use super::remote::word;
        let (Some(far), Some(g)) = (self.far, self.gather.as_ref()) else { return Err(v) };
        let fits = (&v as &dyn Any).downcast_ref::<Vec<u8>>().is_some_and(|b| {
            b.len() >= GATHER_RESULT
                && self.bulk_used + b.len() <= far.bulk_bytes
                && (self.gather_more)(g.len(), b.len())
        });
        if !fits {
            return Err(v);
        }
        let Ok(bytes) = super::remote::into_byte_vec(v) else { unreachable!("a Vec<u8>, checked above") };
        debug_assert!(self.left > 0, "more responses than requests");
        self.left -= 1;
        let keep = self.left;
        let dst = self.writer.reserve(FALLBACK_WORDS, keep).expect("gossamer: response slot invariant broken");
        let (at, len) = (self.bulk_used, bytes.len());
        self.bulk_used = (at + len).next_multiple_of(8);
        self.gather.as_mut().expect("checked above").push((at, bytes));
        Self::header(dst, FALLBACK_WORDS, TAG_SER_BULK);
        // SAFETY: three words reserved.
        unsafe {
            *dst.add(1) = word(len as u64);
            *dst.add(2) = word(at as u64);
        }
        Ok(())
    }

    /// Answers a client in another process that the request was relayed
    /// under `token`.
    fn put_relayed(&mut self, token: u64) {
        use super::remote::word;
        debug_assert!(self.left > 0, "more responses than requests");
        self.left -= 1;
        let keep = self.left;
        // A fallback record: there is always room for one.
        let dst = self.writer.reserve(FALLBACK_WORDS, keep).expect("gossamer: response slot invariant broken");
        Self::header(dst, FALLBACK_WORDS, TAG_RELAYED);
        // SAFETY: three words reserved.
        unsafe {
            *dst.add(1) = word(token);
            *dst.add(2) = word(0);
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

/// Takes a response from another process: `bulk`/`bulk_bytes` is the
/// pair's response bulk area, `trustee` the thread that answered.
///
/// Its lengths and offsets come from the trustee's process: each is
/// checked against the record and the bulk area before it is used, and a
/// response that fails is an error for the waiting fiber, naming the
/// trustee, as is a result that does not decode as a `U` (naming `U`). Only
/// the remote forms are accepted: a local form (a box pointer) from another
/// process would be an address from there.
///
/// # Safety
/// `rec` must be a response record from `trustee` (its length checked
/// against its batch), to a request whose result is a `U`, taken once,
/// with the bulk area unchanged since the trustee wrote it.
pub(crate) unsafe fn take_remote_response<U: serde::de::DeserializeOwned + 'static>(
    rec: *const Word,
    bulk: *const u8,
    bulk_bytes: usize,
    trustee: usize,
) -> thread::Result<U> {
    use super::remote::{byte_words, bytes_at, try_deserialize, try_deserialize_tail};
    let fail = |m: String| -> Box<dyn std::any::Any + Send> { Box::new(m) };
    let refuse = |why: &str| -> thread::Result<U> {
        Err(fail(format!("gossamer: a malformed response from thread {trustee} (another process) was refused: {why}")))
    };
    let undecodable = |e: String| {
        fail(format!(
            "gossamer: the result of type `{}` from thread {trustee} (another process) does not decode: {}",
            std::any::type_name::<U>(),
            e.strip_prefix("gossamer: ").unwrap_or(&e)
        ))
    };
    let words = record_words(rec);
    let tag = record_tag(rec);
    if tag == TAG_REFUSED {
        return Err(fail(format!(
            "gossamer: thread {trustee} (another process) refused this thread's batch as malformed (its log says why)"
        )));
    }
    if words < 3 && !(words == 2 && matches!(tag, TAG_SER | TAG_PANIC_MSG | TAG_RELAYED)) {
        return refuse("the record is too short");
    }
    // SAFETY: the record has at least two words (checked above).
    let len = unsafe { (*rec.add(1)).assume_init() };
    let Ok(len) = usize::try_from(len) else { return refuse("a length out of range") };
    // The bytes of an inline answer: inside the record.
    // SAFETY: `2 + byte_words(len)` words lie inside the record (checked).
    let inline = || (byte_words(len) <= words - 2).then(|| unsafe { bytes_at(rec.add(2), len) });
    // The bytes of a bulk answer: inside the bulk area, or beside the
    // region when they landed there (see `fabric::landed`).
    let in_bulk = || -> Result<Tail<'_>, &'static str> {
        const PAST: &str = "lies past the bulk area";
        // SAFETY: the record has three words (checked above for these tags).
        let at = usize::try_from(unsafe { (*rec.add(2)).assume_init() }).map_err(|_| PAST)?;
        let end = at.checked_add(len).ok_or(PAST)?;
        if end > bulk_bytes || bulk.is_null() {
            return Err(PAST);
        }
        match super::hooks::take_landed(bulk as usize + at, len)? {
            Some(bytes) => Ok(Tail::Owned(bytes)),
            // SAFETY: `at..end` lies inside the pair's response bulk area.
            None => Ok(Tail::Borrowed(unsafe { std::slice::from_raw_parts(bulk.add(at), len) })),
        }
    };
    match tag {
        TAG_RELAYED => Err(Box::new(Relayed(len as u64))),
        TAG_SER => match inline() {
            Some(b) => try_deserialize(b).map_err(undecodable),
            None => refuse("its result runs past the record"),
        },
        TAG_SER_BULK => match in_bulk() {
            Ok(t) => try_deserialize_tail(t).map_err(undecodable),
            Err(why) => refuse(&format!("its result {why}")),
        },
        TAG_PANIC_MSG => match inline() {
            Some(b) => Err(Box::new(String::from_utf8_lossy(b).into_owned())),
            None => refuse("its panic message runs past the record"),
        },
        TAG_PANIC_MSG_BULK => match in_bulk() {
            Ok(t) => Err(Box::new(String::from_utf8_lossy(t.bytes()).into_owned())),
            Err(why) => refuse(&format!("its panic message {why}")),
        },
        TAG_LARGE if len > isize::MAX as usize => refuse("its result's length is out of range"),
        TAG_LARGE => {
            // SAFETY: the record has three words (checked above).
            let id = unsafe { (*rec.add(2)).assume_init() };
            Err(Box::new(super::large::LargeResult { trustee, id, len }))
        }
        TAG_TOO_LARGE => Err(Box::new(format!(
            "gossamer: a result of {len} bytes does not fit the bulk area of {} bytes between these threads \
             (set GOSSAMER_BULK_BYTES, or GOSSAMER_FAR_BULK_BYTES between hosts, higher)",
            // SAFETY: the record has three words (checked above).
            unsafe { (*rec.add(2)).assume_init() }
        ))),
        t => refuse(&format!("an unknown response tag {t}")),
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

    /// Fills a batch with as many argument-less requests to `shim` as fit,
    /// serves it, and hands each response to `check`; the count.
    fn full_batch(shim: Shim, check: impl Fn(*const Word)) -> usize {
        let (rp, ro, sp, so) = (Primary::default(), Overflow::default(), Primary::default(), Overflow::default());
        let req = Slot { primary: &rp, overflow: &ro };
        let resp = Slot { primary: &sp, overflow: &so };
        // SAFETY: single-threaded test; each record read once.
        unsafe {
            let n = req.write(0, |w| {
                while let Some(d) = w.reserve(request_words::<()>(), 0) {
                    encode_request(d, shim, ptr::null_mut(), ());
                }
                w.count() as usize
            });
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
                    check(rec);
                }
            });
            n
        }
    }

    #[test]
    fn a_full_batch_of_minimal_requests_gets_all_its_responses_even_when_large() {
        unsafe fn fat(_p: *mut u8, _e: *mut u8, out: &mut Responder<'_>) {
            out.put::<[u64; 60]>(Ok([9; 60]));
        }
        // SAFETY: `fat` answers a `[u64; 60]`.
        let n = full_batch(fat, |rec| assert_eq!(unsafe { take_response::<[u64; 60]>(rec) }.unwrap(), [9; 60]));
        assert_eq!(n, 46);
    }

    #[test]
    fn large_byte_results_to_another_host_are_gathered_up_to_the_limit_and_read_back_whole() {
        const BULK: usize = 1 << 16;
        let (sp, so) = (Primary::default(), Overflow::default());
        let resp = Slot { primary: &sp, overflow: &so };
        let mut bulk = vec![0u8; BULK];
        let far = Far { client: 3, req_bulk: ptr::null(), resp_bulk: bulk.as_mut_ptr(), bulk_bytes: BULK };
        let results: Vec<Vec<u8>> = vec![
            (0..5000).map(|i| i as u8).collect(),                  // gathered
            (0..6000).map(|i| (i * 7) as u8).collect(),            // past the limit of one: copied
            vec![0x42; 100],                                       // small: inline
            (0..(BULK - 11_000)).map(|i| (i * 3) as u8).collect(), // the rest of the bulk area: copied
        ];
        let mut gathered = Vec::new();
        // SAFETY: single-threaded test; each record read once.
        unsafe {
            resp.write(FALLBACK_WORDS, |w| {
                let mut out = Responder::far(w, results.len(), far).gathering(Some(&mut gathered), |n, _| n < 1);
                for r in &results {
                    out.put_remote::<Vec<u8>>(Ok(r.clone()));
                }
            });
        }
        assert_eq!(gathered.len(), 1, "one result gathered, at the start of the bulk area");
        assert_eq!((gathered[0].0, &gathered[0].1), (0, &results[0]));
        // What the send would carry: the gathered bytes where they belong.
        bulk[..5000].copy_from_slice(&gathered[0].1);
        // SAFETY: as above.
        unsafe {
            resp.read(|r| {
                for want in &results {
                    let rec = r.next(record_words).expect("a response per result");
                    let got = take_remote_response::<Vec<u8>>(rec, bulk.as_ptr(), BULK, 3);
                    assert_eq!(&got.unwrap(), want);
                }
            });
        }
    }

    #[test]
    fn a_relayed_answer_to_another_process_carries_its_token() {
        unsafe fn relayed(_p: *mut u8, _e: *mut u8, out: &mut Responder<'_>) {
            out.put_remote::<u64>(Err(Box::new(Relayed(0xfeed_0001))));
        }
        full_batch(relayed, |rec| {
            // SAFETY: a response record of the batch, read once.
            let p = unsafe { take_remote_response::<u64>(rec, ptr::null(), 0, 3) }.unwrap_err();
            assert_eq!(p.downcast_ref::<Relayed>().map(|t| t.0), Some(0xfeed_0001));
        });
    }
}

/// What another process may write into a request or response record: any
/// lengths, offsets and tags. Decoding reads only inside the record and the
/// pair's bulk area, or refuses with an error naming the peer (run under
/// Miri too, which would report any read out of bounds).
#[cfg(all(test, not(loom)))]
mod malformed_tests {
    use super::super::large::TAIL_ASSEMBLED;
    use super::super::remote::{word, FLAG_CODE_OFFSET};
    use super::super::slot::{Overflow, Primary, Slot};
    use super::*;
    use proptest::prelude::*;

    fn config() -> ProptestConfig {
        ProptestConfig {
            cases: if cfg!(miri) { 16 } else { 512 },
            failure_persistence: None,
            ..ProptestConfig::default()
        }
    }

    const BULK: usize = 64;

    /// Runs `f` with a responder for a batch of `count` requests from
    /// thread 3 in another process, whose request bulk area is `bulk`.
    fn with_far<R>(bulk: &[u8; BULK], count: usize, f: impl FnOnce(&mut Responder<'_>) -> R) -> R {
        let (p, o) = (Primary::default(), Overflow::default());
        let resp = Slot { primary: &p, overflow: &o };
        let far = Far { client: 3, req_bulk: bulk.as_ptr(), resp_bulk: ptr::null_mut(), bulk_bytes: BULK };
        // SAFETY: the test owns the slot.
        unsafe { resp.write(FALLBACK_WORDS, |w| f(&mut Responder::far(w, count, far))) }
    }

    fn inside(b: &[u8], lo: usize, len: usize) -> bool {
        let at = b.as_ptr() as usize;
        b.is_empty() || (at >= lo && at + b.len() <= lo + len)
    }

    fn lengths() -> impl Strategy<Value = u64> {
        prop_oneof![0u64..100, any::<u64>()]
    }

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn any_argument_tail_is_read_inside_its_record_or_bulk_area_or_refused(
            len in lengths(),
            flags in 0u64..4,
            at in lengths(),
            room in 0usize..6,
            fill in any::<u64>(),
        ) {
            let bulk = [0x5au8; BULK];
            let mut rec = [word(fill); 6];
            let bits = if flags & 1 != 0 { TAIL_IN_BULK } else { 0 } | if flags & 2 != 0 { TAIL_ASSEMBLED } else { 0 };
            rec[0] = word(len | bits);
            rec[1] = word(at);
            let got = with_far(&bulk, 1, |out| {
                // SAFETY: the record's end lies inside `rec`.
                out.record_end = unsafe { rec.as_ptr().add(room) };
                // SAFETY: a tail at the start of the record, as dispatched.
                match unsafe { tail_bytes(rec.as_ptr(), out) } {
                    Ok(t) => {
                        let b = t.bytes();
                        let ok = inside(b, rec.as_ptr() as usize + 8, room.saturating_sub(1) * 8)
                            || inside(b, bulk.as_ptr() as usize, BULK);
                        Ok((ok, b.iter().map(|&x| x as u64).sum::<u64>()))
                    }
                    Err(m) => Err(m),
                }
            });
            match got {
                Ok((ok, _)) => prop_assert!(ok, "a tail read outside its record and the bulk area"),
                Err(m) => prop_assert!(m.contains("thread 3"), "the refusal names the client: {}", m),
            }
        }

        #[test]
        fn any_response_record_is_read_inside_it_and_the_bulk_area_or_refused(
            tag in 0u64..12,
            words in 1usize..=6,
            len in lengths(),
            at in lengths(),
            fill in any::<u64>(),
        ) {
            let bulk = [b'x'; BULK];
            let mut rec = [word(fill); 6];
            rec[0] = word(words as u64 | (tag << 32));
            rec[1] = word(len);
            rec[2] = word(at);
            // SAFETY: the record's `words` words lie inside `rec`; the bulk
            // area is `BULK` bytes.
            let r = unsafe { take_remote_response::<Vec<u8>>(rec.as_ptr(), bulk.as_ptr(), BULK, 5) };
            match r {
                Ok(v) => prop_assert!(v.len() <= BULK.max(words * 8)),
                Err(p) => {
                    if let Some(lr) = p.downcast_ref::<super::super::large::LargeResult>() {
                        prop_assert_eq!(lr.trustee, 5);
                    } else {
                        // A panic message may be anything, even empty; a
                        // refusal names the trustee.
                        let m = crate::error::panic_message(&*p);
                        prop_assert!(!m.contains("malformed") || m.contains("thread 5"), "{}", m);
                    }
                }
            }
        }
    }

    #[test]
    fn a_request_too_short_for_its_words_is_refused_naming_the_client() {
        let bulk = [0u8; BULK];
        let rec = [word(1 | FLAG_CODE_OFFSET)];
        let mut cache = [0i64; super::super::remote::CODE_CACHE];
        let (p, o) = (Primary::default(), Overflow::default());
        let resp = Slot { primary: &p, overflow: &o };
        let far = Far { client: 3, req_bulk: bulk.as_ptr(), resp_bulk: ptr::null_mut(), bulk_bytes: BULK };
        // SAFETY: the test owns the slot; the record is one word long.
        unsafe {
            resp.write(FALLBACK_WORDS, |w| dispatch_remote(rec.as_ptr(), &mut Responder::far(w, 1, far), &mut cache))
        };
        // SAFETY: published by the write above; read once.
        let m = unsafe {
            resp.read(|r| {
                let rec = r.next(record_words).expect("one response");
                take_remote_response::<()>(rec, ptr::null(), 0, 2).unwrap_err()
            })
        };
        let m = crate::error::panic_message(&*m);
        assert!(m.contains("malformed request from thread 3"), "{m}");
    }

    #[test]
    fn a_batch_with_a_record_past_its_end_is_refused_whole() {
        let bulk = [0u8; BULK];
        // Three records claimed in four words; the first claims ten.
        let words = [word(10 | FLAG_CODE_OFFSET), word(0), word(0), word(0)];
        let mut cache = [0i64; super::super::remote::CODE_CACHE];
        let (p, o) = (Primary::default(), Overflow::default());
        let resp = Slot { primary: &p, overflow: &o };
        let far = Far { client: 3, req_bulk: bulk.as_ptr(), resp_bulk: ptr::null_mut(), bulk_bytes: BULK };
        // SAFETY: the reader covers the four words of `words`.
        let mut r = unsafe { BatchReader::contiguous(words.as_ptr(), 3, 4) };
        // SAFETY: the test owns the slot.
        unsafe { resp.write(FALLBACK_WORDS, |w| serve_remote(&mut r, &mut Responder::far(w, 3, far), &mut cache)) };
        // SAFETY: written above; each response read once.
        unsafe {
            resp.read(|r| {
                assert_eq!(r.count(), 3, "every request is answered");
                while let Some(rec) = r.next(record_words) {
                    let m =
                        crate::error::panic_message(&*take_remote_response::<()>(rec, ptr::null(), 0, 2).unwrap_err());
                    assert!(m.contains("thread 2") && m.contains("refused"), "{m}");
                }
            })
        };
    }

    /// Chunks of a large argument with offsets and totals from a faulty
    /// peer are refused (an error to the client), never an abort or an
    /// assembly of the wrong bytes.
    #[test]
    fn chunks_out_of_order_or_past_their_total_are_refused() {
        use super::super::large::append_shim;
        let bulk = [0u8; BULK];
        // (offset, total, chunk) in order; the answer expected.
        let steps: [(u64, u64, &[u8], bool); 5] = [
            (0, u64::MAX, b"ab", false),
            (0, 4, b"ab", true),
            (5, 4, b"cd", false),
            (0, 4, b"abcdef", false),
            (0, 4, b"abcd", true),
        ];
        for (offset, total, chunk, ok) in steps {
            let mut rec = [word(0); 8];
            rec[0] = word(offset);
            rec[1] = word(total);
            rec[2] = word(chunk.len() as u64);
            // SAFETY: room for the chunk's words in `rec`.
            unsafe { super::super::remote::put_bytes(rec.as_mut_ptr().add(3), chunk) };
            let (p, o) = (Primary::default(), Overflow::default());
            let resp = Slot { primary: &p, overflow: &o };
            let far = Far { client: 3, req_bulk: bulk.as_ptr(), resp_bulk: ptr::null_mut(), bulk_bytes: BULK };
            // SAFETY: the test owns the slot; the record ends with `rec`.
            unsafe {
                resp.write(FALLBACK_WORDS, |w| {
                    let mut out = Responder::far(w, 1, far);
                    out.record_end = rec.as_ptr().add(rec.len());
                    append_shim(ptr::null_mut(), rec.as_mut_ptr().cast(), &mut out)
                })
            };
            // SAFETY: written above; read once.
            let r = unsafe {
                resp.read(|r| take_remote_response::<()>(r.next(record_words).expect("an answer"), ptr::null(), 0, 2))
            };
            match r {
                Ok(()) => assert!(ok, "chunk at {offset} of {total} accepted"),
                Err(p) => {
                    let m = crate::error::panic_message(&*p);
                    assert!(!ok && m.contains("thread 3") && m.contains("refused"), "{m}");
                }
            }
        }
    }

    #[test]
    fn an_undecodable_result_names_its_type_and_the_trustee() {
        let mut rec = [word(0); 4];
        rec[0] = word(3 | (TAG_SER << 32));
        rec[1] = word(2);
        // SAFETY: two bytes in the third word.
        unsafe { super::super::remote::put_bytes(rec.as_mut_ptr().add(2), &[0xff, 0]) };
        // SAFETY: a three-word response record.
        let p = unsafe { take_remote_response::<(u64, String)>(rec.as_ptr(), ptr::null(), 0, 4) }.unwrap_err();
        let m = crate::error::panic_message(&*p);
        assert!(m.contains("(u64, alloc::string::String)") && m.contains("thread 4") && m.contains("decode"), "{m}");
    }
}
