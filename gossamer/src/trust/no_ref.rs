//! The thesis's `NoRef` auto trait (nightly only).

/// Types that contain no reference and no raw pointer (nightly only).
#[diagnostic::on_unimplemented(
    message = "`{Self}` captures a reference or raw pointer and cannot be delegated",
    note = "pass such data by value through `apply_with`"
)]
pub auto trait NoRef {}
impl<T: ?Sized> !NoRef for &T {}
impl<T: ?Sized> !NoRef for &mut T {}
impl<T: ?Sized> !NoRef for *const T {}
impl<T: ?Sized> !NoRef for *mut T {}
impl<T> NoRef for crate::Trust<T> {}
