//! The capture rule for delegated closures.
//!
//! A closure sent to a trustee runs on another thread and, in a multi-process
//! program, in another address space: it must not capture references or raw
//! pointers. Data behind a pointer (a `String`, a `Vec`, a borrowed slice)
//! goes through [`apply_with`](crate::Trust::apply_with) instead, which
//! carries it as an explicit, serializable argument.
//!
//! On stable Rust the rule is enforced through `Send + 'static`: a captured
//! raw pointer is not `Send`, and a captured borrow of a local is not
//! `'static`; both fail to compile, and the error points at the bound below,
//! whose comment says what to do. A `&'static` reference to `Sync` data is
//! harmless inside one process and passes. With the `nightly` feature the
//! thesis's auto trait `NoRef` is added, which rejects every reference and
//! raw pointer, `'static` or not.

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
impl<F: Send + 'static> Delegable for F {} // delegated closures may not capture references or raw pointers: pass such data through `apply_with`

#[cfg(feature = "nightly")]
#[path = "no_ref.rs"]
mod no_ref;
#[cfg(feature = "nightly")]
pub use no_ref::NoRef;

#[cfg(feature = "nightly")]
impl<F: Send + 'static + NoRef> Delegable for F {} // delegated closures may not capture references or raw pointers: pass such data through `apply_with`
