//! The capture rule for delegated closures, and the bound on what crosses
//! the channel as an argument or a result.
//!
//! A closure sent to a trustee runs on another thread and, in a multi-process
//! program, in another address space: its captured environment is copied
//! byte for byte, so it must hold plain values only — no reference, no raw
//! pointer, nothing that owns heap memory through one (`String`, `Vec`,
//! `Box`, a `Trust`). Such data goes through
//! [`apply_with`](crate::Trust::apply_with) instead, as an explicit argument
//! that is moved within a process and serialized between processes.
//!
//! On stable Rust the rule is `Send + Copy + 'static`: a captured raw pointer
//! is not `Send`, a captured borrow of a local is not `'static`, and anything
//! owning heap memory is not `Copy`. Each fails to compile with an error that
//! points at the bound below, whose comment says what to do. One hole
//! remains: a captured `&'static` reference is `Copy` and passes. The
//! `nightly` feature replaces `Copy` with the thesis's auto trait `NoRef`,
//! which rejects every reference and raw pointer, `'static` or not, and
//! accepts captured trusts.

/// Closures (and captured values) that may be delegated to a trustee.
///
/// Implemented automatically; see the module documentation.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be delegated to a trustee: it captures a reference, a raw pointer or other data that cannot leave this thread",
    label = "captures a reference or raw pointer",
    note = "delegated closures must own their captures; pass borrowed or heap data by value through `apply_with` (it is serialized across processes)"
)]
pub trait Delegable: Send + 'static {}

#[cfg(not(feature = "nightly"))]
impl<F: Send + Copy + 'static> Delegable for F {} // delegated closures capture plain values only: pass references, heap data and trusts through `apply_with`

/// Values that cross the channel as arguments (`apply_with`) or results:
/// moved as they are within a process, serialized between processes.
pub trait Transferable: serde::Serialize + serde::de::DeserializeOwned + Send + 'static {}

impl<V: serde::Serialize + serde::de::DeserializeOwned + Send + 'static> Transferable for V {}

#[cfg(feature = "nightly")]
#[path = "no_ref.rs"]
mod no_ref;
#[cfg(feature = "nightly")]
pub use no_ref::NoRef;

#[cfg(feature = "nightly")]
impl<F: Send + 'static + NoRef> Delegable for F {} // delegated closures capture plain values only: pass references and heap data through `apply_with`
