//! The capture rule for delegated closures (documented on [`Delegable`]),
//! and the bound on what crosses the channel as an argument or a result
//! ([`Transferable`]), with the compile errors that teach them: each trait's
//! `on_unimplemented` text names the fix, and its blanket impl is marked
//! `do_not_recommend` so that rustc reports the trait itself, not the
//! unmet bound deep inside (`String: Copy`, `&u64: Deserialize<'de>`).

/// Closures (and captured values) that may be delegated to a trustee.
/// Implemented automatically.
///
/// What a closure may capture depends on where its trustee is:
///
/// * **Within one process** a delegated closure runs on another thread of
///   the same address space. Its captured environment is copied byte for
///   byte into the slot, so on stable Rust it must be `Send + Copy +
///   'static`: a captured borrow of a local is not `'static`, a raw pointer
///   is not `Send`, and anything owning heap memory (`String`, `Vec`, `Box`,
///   a `Trust`) is not `Copy`. Each fails to compile (see "Compile errors"
///   below). `&'static` data and `fn` pointers pass, and are sound here:
///   they are valid in every thread of the process.
/// * **Into another process** only code given as a `fn` travels, as its
///   offset in the binary; no byte of a closure does. A generic closure
///   (what `apply`, `apply_then`, `try_apply_then`, `apply_async`, `launch`
///   and `launch_then` take) is refused for a trustee in another process,
///   in the caller, before any byte is sent, with a panic that names this
///   rule and the fix — whatever it captures, even nothing. The reason: on
///   stable Rust no bound can see what a closure captured. A captured `u64`
///   looks like a captured `&'static str`, `fn` pointer or `Copy` struct
///   holding a reference, which are addresses that mean nothing, or
///   something else, in another address space; and a closure that captures
///   a zero-sized `Copy + Send` value (a library's proof that its
///   initialisation ran in *this* process, say) is zero-sized like one that
///   captures nothing, yet would conjure that proof, false, over there. The
///   one proof the compiler gives is the coercion of a closure to a `fn`
///   pointer, which only a closure that captures nothing passes (else error
///   E0308, "closures can only be coerced to `fn` types if they do not
///   capture any variables"). So the forms that may cross take their code
///   as a `fn` and their data as an argument:
///   [`apply_with`](crate::Trust::apply_with) (and `apply_with_then`,
///   `try_apply_with_then`, `apply_with_async`), `launch_with`,
///   `launch_with_then`, [`spawn_with`](crate::spawn_with),
///   [`spawn_to`](crate::spawn_to) and `spawn_to_with`. (A `fn` of a shared
///   library, whose place differs between processes, is refused in the
///   caller: wrap it in a closure, which is code of the program.) The
///   argument is a [`Transferable`] type that serde writes in the sender and
///   rebuilds in the receiver (a copy: see [`Transferable`]); `&'static
///   str`, `fn` pointers and raw pointers are not `Transferable`, so they
///   are compile errors there. Results cross the same way.
///
/// Trusts travel as `Transferable` values too: a serialized trust is an
/// authenticated, single-use token for a clone in transit (see
/// `trust::wire`), so bytes can never be turned into a trust that gossamer
/// did not send.
///
/// The `nightly` feature replaces `Copy` with the thesis's auto trait
/// `NoRef`, which rejects every captured reference and raw pointer at
/// compile time (`'static` or not) and accepts captured trusts. `NoRef`
/// cannot see `fn` pointers or zero-sized proofs (auto traits hold for
/// them), so the process boundary keeps the same rule under `nightly`: only
/// a `fn` crosses. Everything either rule accepts is sound.
///
/// **Compile errors, and their fix.** A closure that captures heap data,
/// a trust, a raw pointer or another non-`Copy` value fails with "this
/// closure cannot be delegated: ...; pass it as the argument of
/// `apply_with` instead". Two cases come in rustc's words, because what
/// fails there is a lifetime or a coercion, which no trait of this crate
/// can be asked about:
/// * "`x` does not live long enough ... argument requires that `x` is
///   borrowed for `'static`" (or "closure may outlive the current
///   function"): the closure captures a borrow of a local. The note under
///   it points at the call's `F: Delegable` bound; pass the data (cloned if
///   need be) through `apply_with`.
/// * "mismatched types: expected fn pointer, found closure ... closures can
///   only be coerced to `fn` types if they do not capture any variables",
///   from `apply_with`, `launch_with`, `spawn_with` or `spawn_to`: their
///   code is a `fn` and may capture nothing; move the captured value into
///   the argument: `spawn_with(t, |(n, step)| n + step, (n, step))`.
///
/// ```
/// # gossamer::Runtime::builder().workers(2).build().unwrap().block_on(|| {
/// // Works wherever the trustee is: the code is a `fn` (a closure that
/// // captures nothing), the data is an argument.
/// let counter = gossamer::entrust_on(1, 0u64);
/// let (step, label) = (5u64, String::from("five"));
/// let n = counter.apply_with(|c, (step, label): (u64, String)| { *c += step + label.len() as u64; *c }, (step, label));
/// assert_eq!(n, 9);
/// assert_eq!(counter.apply_with(|c, ()| *c, ()), 9);
/// // Captures `step`: fine within this process, refused (a panic in this
/// // caller) if thread 1 were in another process.
/// counter.apply(move |c| *c += step);
/// # });
/// ```
#[cfg_attr(
    not(feature = "nightly"),
    diagnostic::on_unimplemented(
        message = "this closure cannot be delegated: it captures a value that is not plain `Copy` data; pass it as the argument of `apply_with` instead",
        label = "captures heap data (`String`, `Vec`, `Box`), a `Trust`, a raw pointer or another non-`Copy` value",
        note = "write `trust.apply_with(|v, (a, b)| .., (a, b))`: the code is a `fn` (a closure that captures nothing) and the data an argument, moved here and copied into another process (likewise `apply_with_then`, `launch_with`, `gossamer::spawn_with`)",
        note = "a delegated closure runs on another thread, and its captures are copied into a request slot: they must be `Copy + Send + 'static`"
    )
)]
#[cfg_attr(
    feature = "nightly",
    diagnostic::on_unimplemented(
        message = "this closure cannot be delegated: it captures a reference or a raw pointer; pass the data as the argument of `apply_with` instead",
        label = "captures a reference or a raw pointer (`NoRef` is not implemented)",
        note = "write `trust.apply_with(|v, (a, b)| .., (a, b))`: the code is a `fn` (a closure that captures nothing) and the data an argument, moved here and copied into another process"
    )
)]
pub trait Delegable: Send + 'static {}

// Not recommended: an unmet bound of this impl is reported as the closure
// failing `Delegable` (whose message names the fix), not as rustc's "`String:
// Copy` is not satisfied in {closure}".
#[cfg(not(feature = "nightly"))]
#[diagnostic::do_not_recommend]
impl<F: Send + Copy + 'static> Delegable for F {} // delegated closures capture plain values only: pass references, heap data and trusts through `apply_with`

/// Values that cross the channel as arguments (`apply_with`, `launch_with`,
/// `spawn_with`), entrusted values (`entrust_on`) and results: moved as they
/// are within a process, **copied** into another.
///
/// Into another process a value is serialized, the original is dropped in
/// the sender right after (before the call waits for the other side), and
/// the receiver gets a copy that serde rebuilds. A type whose `Drop` has
/// effects beyond its own memory (a file, a counter, a connection) thus sees
/// one drop in each process, as a clone would: send plain data, and keep
/// such a resource in a property made in its own process, sending a
/// [`Trust`](crate::Trust) to it. A trust crosses as a true move: the copy
/// owns a clone in transit, and dropping the original releases only the
/// original's own share.
///
/// Between processes, `Vec<u8>`, `String` and `Box<[u8]>` (as the whole
/// argument or result) cross as their own bytes: copied once into the
/// channel and once out. A `Vec<u8>` argument is not even copied in: it
/// moves into the request (from 1 KiB on it waits in its own buffer), and
/// to another host it is sent from that buffer, as is a `Vec<u8>` result
/// of 4 KiB or more. Byte buffers inside your own types go through
/// serde, which handles a `Vec<u8>` element by element; mark such fields
/// `#[serde(with = "serde_bytes")]` to have them copied as byte strings.
///
/// Your own types become transferable with
/// [`#[gossamer::transferable]`](crate::transferable), which derives serde's
/// traits through [`gossamer::serde`](crate::serde) (no serde dependency of
/// your own needed); with serde in your own manifest,
/// `#[derive(Serialize, Deserialize)]` does the same.
///
/// **Compile errors, and their fix.** A value that is not transferable
/// fails with "`X` cannot cross between trustees: send owned data ..., or
/// mark your own type `#[gossamer::transferable]`". Two cases come in
/// rustc's words instead, because what fails there is a lifetime, which no
/// trait of this crate can be asked about:
/// * "implementation of `Deserialize` is not general enough" means the type
///   holds a `&'static str`, a `&'static [T]` or another `'static`
///   reference (a `HashMap<&str, &str>` property, whose `insert` returns
///   `Option<&str>`, for one): use `String` / `Vec<T>` / an owned value;
/// * "the trait bound `S: Serialize` is not satisfied" inside the
///   expansion of `#[gossamer::transferable]` means a field's type `S` is
///   not transferable: mark `S` too, or make the field owned data.
///
/// ```
/// #[gossamer::transferable]
/// #[derive(Debug, PartialEq)]
/// struct Stats {
///     hits: u64,
///     name: String,
/// }
///
/// # gossamer::Runtime::builder().workers(2).build().unwrap().block_on(|| {
/// let t = gossamer::entrust_on(1, Stats { hits: 0, name: "cache".into() });
/// let s = t.apply_with(|s, n: u64| { s.hits += n; Stats { hits: s.hits, name: s.name.clone() } }, 3);
/// assert_eq!(s, Stats { hits: 3, name: "cache".into() });
/// # });
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot cross between trustees: send owned data (`String` for `&str`, a clone of a borrow), or mark your own type `#[gossamer::transferable]`",
    label = "not `gossamer::Transferable`: a reference, a pointer, or a type without serde's traits",
    note = "for a type of your own, put `#[gossamer::transferable]` above it (it derives serde's traits through `gossamer::serde`)",
    note = "for a reference, return or pass an owned value instead (`.clone()`, `.to_owned()`, `String` for `&str`)"
)]
pub trait Transferable: serde::Serialize + serde::de::DeserializeOwned + Send + 'static {}

// Not recommended: an unmet bound is reported as the whole type failing
// `Transferable` (whose message names the fix), not as rustc's
// "`&u64: Deserialize<'de>` is not satisfied" deep inside it.
#[diagnostic::do_not_recommend]
impl<V: serde::Serialize + serde::de::DeserializeOwned + Send + 'static> Transferable for V {}

#[cfg(feature = "nightly")]
#[path = "no_ref.rs"]
mod no_ref;
#[cfg(feature = "nightly")]
pub use no_ref::NoRef;

#[cfg(feature = "nightly")]
#[diagnostic::do_not_recommend]
impl<F: Send + 'static + NoRef> Delegable for F {} // delegated closures capture plain values only: pass references and heap data through `apply_with`
