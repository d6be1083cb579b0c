//! The framing of a value serialized for another process, and the
//! per-message contexts that trusts in transit are bound to.
//!
//! A serialized value is its postcard bytes followed by a trailer: the byte
//! `0` when it carries no trust, or the message's 16-byte nonce and the byte
//! `1` when it does. While gossamer encodes a value, an *encoding* context is
//! open on the thread; a trust serialized inside it asks for the message's
//! nonce (created on first use) and binds its token to it. While gossamer
//! decodes a value it has received, a *decoding* context holds that nonce
//! and the ids of the tokens already taken from the message.
//!
//! Trusts accept to be serialized and deserialized only inside these
//! contexts (see `trust::wire`), so a token can only become a trust in the
//! one decoding of the one message it was made for, and only once there:
//! every serialized trust is a clone in transit that at most one receiver
//! owns. Outside them, serializing or deserializing a trust is an error.
//!
//! **A context belongs to one message, not to the thread.** The user's
//! `Serialize` and `Deserialize` code runs inside it, and could try to
//! suspend its fiber (`yield_now`, a blocking call) and let another fiber of
//! the thread run — which would then find the context open, mix its own
//! trusts into the other message, or close the contexts out of order and
//! leave one open for user code to serialize a trust with `postcard` or
//! `serde_json`. So
//! * while a context is open the thread is in delegated context: nothing
//!   suspends there (`yield_now` returns at once, a blocking call panics,
//!   and that panic fails this message alone), so one message is encoded or
//!   decoded from start to end before the thread runs anything else;
//! * each context records the fiber that opened it, and a trust serialized
//!   or deserialized by any other fiber is refused;
//! * a guard closes the context (and ends the delegated context) when the
//!   message is done, on unwind too, restoring exactly what was there
//!   before.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Identifies one serialized message program-wide (with overwhelming
/// probability: a random per-process salt, a thread stamp and a counter).
pub(crate) type Nonce = [u64; 2];

const NO_TRUST: u8 = 0;
const WITH_TRUST: u8 = 1;
const NONCE_BYTES: usize = 16;

/// The fiber that opened a context: its worker's fiber index, `None` when
/// not in a fiber (the worker loop, a thread outside the runtime).
type Owner = Option<u32>;

fn owner() -> Owner {
    super::hooks::current_fiber()
}

struct Encoding {
    owner: Owner,
    nonce: Option<Nonce>,
    /// The thread the message goes to, when its sender said (see [`toward`]).
    dest: Option<usize>,
}

struct Decoding {
    owner: Owner,
    nonce: Option<Nonce>,
    taken: Vec<u64>,
}

thread_local! {
    static ENCODING: RefCell<Option<Encoding>> = const { RefCell::new(None) };
    static DECODING: RefCell<Option<Decoding>> = const { RefCell::new(None) };
    static REFUSED: Cell<Option<&'static str>> = const { Cell::new(None) };
    static STAMP: Cell<u64> = const { Cell::new(0) };
    static COUNTER: Cell<u64> = const { Cell::new(0) };
    static DEST: Cell<Option<usize>> = const { Cell::new(None) };
}

static THREADS: AtomicU64 = AtomicU64::new(1);

fn salt() -> u64 {
    static SALT: OnceLock<u64> = OnceLock::new();
    *SALT.get_or_init(|| {
        let mut b = [0u8; 8];
        getrandom::getrandom(&mut b).expect("gossamer: the operating system gave no random bytes");
        u64::from_le_bytes(b)
    })
}

fn fresh_nonce() -> Nonce {
    let stamp = STAMP.with(|s| {
        if s.get() == 0 {
            // Once per thread, off every per-request path.
            s.set(THREADS.fetch_add(1, Ordering::Relaxed));
        }
        s.get()
    });
    let n = COUNTER.with(|c| {
        c.set(c.get() + 1);
        c.get()
    });
    [salt(), (stamp << 40) ^ n]
}

/// One open context: restores the previous context of its kind when
/// dropped (also on unwind), then lets the thread suspend again.
struct Restore<T: 'static> {
    key: &'static std::thread::LocalKey<RefCell<Option<T>>>,
    prev: Option<T>,
    _no_suspend: super::hooks::DelegatedGuard,
}

impl<T: 'static> Restore<T> {
    /// Opens `ctx` on this thread, in delegated context (see the module
    /// documentation).
    fn open(key: &'static std::thread::LocalKey<RefCell<Option<T>>>, ctx: T) -> Self {
        let no_suspend = super::hooks::enter_delegated();
        let prev = key.with(|c| c.borrow_mut().replace(ctx));
        Restore { key, prev, _no_suspend: no_suspend }
    }
}

impl<T: 'static> Drop for Restore<T> {
    fn drop(&mut self) {
        let prev = self.prev.take();
        self.key.with(|c| *c.borrow_mut() = prev);
    }
}

/// Runs `f`, during which the messages this thread encodes go to thread
/// `dest` of the program: values that cross differently within a host
/// (`SharedBytes`, by reference) ask for it. Only the first message
/// encoded in `f` takes it; messages encoded elsewhere have no known
/// destination, and such values cross as copies.
pub(crate) fn toward<R>(dest: usize, f: impl FnOnce() -> R) -> R {
    struct Back(Option<usize>);
    impl Drop for Back {
        fn drop(&mut self) {
            DEST.with(|d| d.set(self.0));
        }
    }
    let _back = Back(DEST.with(|d| d.replace(Some(dest))));
    f()
}

/// Takes the destination named by [`toward`] for a message that is sent
/// without being encoded in a context (a value framed on its own).
pub(crate) fn take_dest() -> Option<usize> {
    DEST.with(Cell::take)
}

/// The destination of the message being encoded on this thread, if its
/// sender named one (see [`toward`]).
pub(crate) fn encoding_dest() -> Result<Option<usize>, Refusal> {
    ENCODING.with(|c| match c.borrow().as_ref() {
        None => Err(Refusal::Outside),
        Some(e) if e.owner != owner() => Err(Refusal::OtherFiber),
        Some(e) => Ok(e.dest),
    })
}

/// Runs `encode` (which appends the value's bytes to a buffer) inside an
/// encoding context for one message, then appends the trailer.
pub(crate) fn encode(buf: Vec<u8>, encode: impl FnOnce(Vec<u8>) -> Vec<u8>) -> Vec<u8> {
    // The destination names one message: the first encoded in its scope.
    let dest = DEST.with(Cell::take);
    let restore = Restore::open(&ENCODING, Encoding { owner: owner(), nonce: None, dest });
    let mut out = encode(buf);
    let nonce = ENCODING.with(|c| c.borrow_mut().take().and_then(|e| e.nonce));
    drop(restore);
    put_trailer(&mut out, nonce);
    out
}

fn put_trailer(out: &mut Vec<u8>, nonce: Option<Nonce>) {
    match nonce {
        None => out.push(NO_TRUST),
        Some([a, b]) => {
            out.extend_from_slice(&a.to_le_bytes());
            out.extend_from_slice(&b.to_le_bytes());
            out.push(WITH_TRUST);
        }
    }
}

/// The value bytes and the nonce of a framed message.
pub(crate) fn split(bytes: &[u8]) -> Result<(&[u8], Option<Nonce>), &'static str> {
    match bytes.split_last() {
        Some((&NO_TRUST, body)) => Ok((body, None)),
        Some((&WITH_TRUST, rest)) if rest.len() >= NONCE_BYTES => {
            let (body, n) = rest.split_at(rest.len() - NONCE_BYTES);
            let a = u64::from_le_bytes(n[..8].try_into().expect("8 bytes"));
            let b = u64::from_le_bytes(n[8..].try_into().expect("8 bytes"));
            Ok((body, Some([a, b])))
        }
        Some(_) => Err("bad trailer"),
        None => Err("empty message"),
    }
}

/// Runs `decode` on the value bytes of `bytes` inside a decoding context.
pub(crate) fn decode<V>(bytes: &[u8], decode: impl FnOnce(&[u8]) -> V) -> Result<V, &'static str> {
    let (body, nonce) = split(bytes)?;
    let _restore = Restore::open(&DECODING, Decoding { owner: owner(), nonce, taken: Vec::new() });
    Ok(decode(body))
}

/// Records why a value was refused, for the error message: serde formats
/// such as postcard keep only that a custom error happened, not its text.
pub(crate) fn note_refusal(why: &'static str) {
    REFUSED.with(|r| r.set(Some(why)));
}

/// Takes the reason recorded by `note_refusal`, if any.
pub(crate) fn take_refusal() -> Option<&'static str> {
    REFUSED.with(|r| r.take())
}

/// Why a trust cannot be serialized or deserialized here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Not inside gossamer's own encoding or decoding of a message.
    Outside,
    /// The message being decoded was sent without any trust in it.
    NoTrustSent,
    /// This token was already turned into a trust in this message.
    Twice,
    /// The open context belongs to a message of another fiber.
    OtherFiber,
}

impl Refusal {
    pub(crate) fn message(self) -> &'static str {
        match self {
            Refusal::Outside => {
                "a Trust is serialized and deserialized only by gossamer itself, when it carries a value to another \
                 process (apply_with arguments, results, spawn_with, entrust_on); it cannot be stored or sent with \
                 another serializer"
            }
            Refusal::NoTrustSent => "this message was sent without a Trust in it: the token is forged",
            Refusal::Twice => {
                "the same Trust token was deserialized twice from one message; each serialized Trust is one clone \
                 in transit and becomes at most one Trust"
            }
            Refusal::OtherFiber => {
                "a Trust was serialized or deserialized by another fiber than the one whose message is being \
                 encoded or decoded on this thread; a Trust crosses only inside its own message"
            }
        }
    }
}

/// The nonce of the message being encoded on this thread, created on first
/// use.
pub(crate) fn encoding_nonce() -> Result<Nonce, Refusal> {
    ENCODING.with(|c| match c.borrow_mut().as_mut() {
        None => Err(Refusal::Outside),
        Some(e) if e.owner != owner() => Err(Refusal::OtherFiber),
        Some(e) => Ok(*e.nonce.get_or_insert_with(fresh_nonce)),
    })
}

/// The nonce of the message being decoded on this thread.
pub(crate) fn decoding_nonce() -> Result<Nonce, Refusal> {
    DECODING.with(|c| match c.borrow().as_ref() {
        None => Err(Refusal::Outside),
        Some(d) if d.owner != owner() => Err(Refusal::OtherFiber),
        Some(d) => d.nonce.ok_or(Refusal::NoTrustSent),
    })
}

/// Records that the token with `id` became a trust in the message being
/// decoded; refuses a second time.
pub(crate) fn take_token(id: u64) -> Result<(), Refusal> {
    DECODING.with(|c| match c.borrow_mut().as_mut() {
        None => Err(Refusal::Outside),
        Some(d) if d.owner != owner() => Err(Refusal::OtherFiber),
        Some(d) if d.taken.contains(&id) => Err(Refusal::Twice),
        Some(d) => {
            d.taken.push(id);
            Ok(())
        }
    })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_with_and_without_a_nonce() {
        let plain = encode(Vec::new(), |mut b| {
            b.extend_from_slice(b"abc");
            b
        });
        assert_eq!(split(&plain), Ok((&b"abc"[..], None)));
        let mut seen = None;
        let framed = encode(Vec::new(), |mut b| {
            seen = Some(encoding_nonce().unwrap());
            assert_eq!(encoding_nonce().unwrap(), seen.unwrap(), "one nonce per message");
            b.extend_from_slice(b"xy");
            b
        });
        assert_eq!(split(&framed), Ok((&b"xy"[..], seen)));
        assert_eq!(encoding_nonce(), Err(Refusal::Outside), "the context ends with the message");
    }

    #[test]
    fn tokens_are_taken_once_per_decoding_and_only_inside_one() {
        assert_eq!(take_token(1), Err(Refusal::Outside));
        let framed = encode(Vec::new(), |b| {
            encoding_nonce().unwrap();
            b
        });
        decode(&framed, |_| {
            assert!(decoding_nonce().is_ok());
            assert_eq!(take_token(7), Ok(()));
            assert_eq!(take_token(8), Ok(()));
            assert_eq!(take_token(7), Err(Refusal::Twice));
        })
        .unwrap();
        let plain = encode(Vec::new(), |b| b);
        decode(&plain, |_| assert_eq!(decoding_nonce(), Err(Refusal::NoTrustSent))).unwrap();
        assert_eq!(decoding_nonce(), Err(Refusal::Outside));
    }

    #[test]
    fn nonces_differ_between_messages() {
        let a = encode(Vec::new(), |b| {
            encoding_nonce().unwrap();
            b
        });
        let b = encode(Vec::new(), |b| {
            encoding_nonce().unwrap();
            b
        });
        assert_ne!(split(&a).unwrap().1, split(&b).unwrap().1);
    }

    #[cfg(not(miri))]
    proptest::proptest! {
        /// Arbitrary bytes from another process split or fail, never panic.
        #[test]
        fn splitting_arbitrary_bytes_never_panics(body in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let _ = split(&body);
        }
    }
}
