//! Data-affine spawn: start a fiber on the trustee thread of a trust, so
//! that the fiber's `apply` calls on it take the local shortcut (run
//! directly, no message), wherever in the program that thread is.

use crate::{spawn_with, JoinHandle, Transferable, Trust};

/// Starts `f` as a fiber on the thread that owns `trust`'s property, giving
/// it a clone of the trust, and returns a handle to its result.
///
/// Inside the fiber, [`Trust::is_local`] holds and every `apply` on the
/// trust runs directly on its property. The trustee may be in another
/// process: as for [`spawn_with`], `f` is a `fn` (a closure that captures
/// nothing; data goes through [`spawn_to_with`]), and the trust travels as
/// a token.
///
/// ```
/// # gossamer::Runtime::builder().workers(2).build().unwrap().block_on(|| {
/// let counter = gossamer::trustee(1).entrust(0u64);
/// let fiber = gossamer::spawn_to(&counter, |c| {
///     assert!(c.is_local()); // running on thread 1, where the counter lives
///     for _ in 0..1000 {
///         c.apply(|v| *v += 1); // the local shortcut: no message
///     }
///     gossamer::current_thread()
/// });
/// assert_eq!(fiber.join().unwrap(), Some(1));
/// assert_eq!(counter.apply(|v| *v), 1000);
/// # });
/// ```
///
/// # Panics
/// Outside the runtime's threads.
pub fn spawn_to<T, R>(trust: &Trust<T>, f: fn(Trust<T>) -> R) -> JoinHandle<R>
where
    T: Send + 'static,
    R: Transferable,
{
    spawn_with(trust.trustee().index(), f, trust.clone())
}

/// Like [`spawn_to`], with an argument that is moved within a process and
/// serialized to another (trusts included); `f` gets the trust and the
/// argument as one pair, as [`spawn_with`] passes its argument.
///
/// ```
/// # #![allow(deprecated)]
/// # gossamer::Runtime::builder().workers(2).build().unwrap().block_on(|| {
/// let log = gossamer::trustee(1).entrust(Vec::<String>::new());
/// let f = gossamer::spawn_to_with(&log, |(log, words): (gossamer::Trust<Vec<String>>, Vec<String>)| {
///     for w in words {
///         log.apply_with(|l, w| l.push(w), w);
///     }
///     log.apply(|l| l.len())
/// }, vec!["a".to_string(), "b".to_string()]);
/// assert_eq!(f.join().unwrap(), 2);
/// # });
/// ```
///
/// # Panics
/// As [`spawn_to`].
#[deprecated(
    since = "0.2.0",
    note = "use gossamer::spawn_with(trust.trustee().index(), f, (trust.clone(), arg)), which is what this does"
)]
pub fn spawn_to_with<T, A, R>(trust: &Trust<T>, f: fn((Trust<T>, A)) -> R, arg: A) -> JoinHandle<R>
where
    T: Send + 'static,
    A: Transferable,
    R: Transferable,
{
    spawn_with(trust.trustee().index(), f, (trust.clone(), arg))
}
