//! Rejected at compile time, with the message users see. Where a trait of
//! the crate fails, the first line is the crate's own and names the fix
//! (`Delegable`, `Transferable`: see their rustdoc); lifetimes and `fn`
//! coercions fail in rustc's words, documented there too.
//! * closures that capture heap data, trusts or raw pointers
//!   (`captures_*`): "this closure cannot be delegated ... `apply_with`";
//!   closures that capture borrows (`captures_borrow`,
//!   `then_captures_borrow`): rustc's "does not live long enough", whose
//!   note shows the bound's comment naming `apply_with`;
//! * results that are references or types without serde's traits
//!   (`result_*`): "`X` cannot cross between trustees: send owned data
//!   ..., or mark your own type `#[gossamer::transferable]`"; Table II(b)
//!   of the thesis as printed (`table2b_as_printed`), whose `insert`
//!   returns `Option<&'static str>`: rustc's "not general enough";
//! * `#[gossamer::transferable]` given arguments (`transferable_arguments`);
//! * data that would cross into another process as an argument or a result
//!   but holds an address — `&'static str`, `&'static [u8]`, a `fn`
//!   pointer, `Option<&'static T>`, a struct holding a reference, a raw
//!   pointer (`crossing_*`);
//! * code that may cross into another process but is a closure that
//!   captures something — a number, or a zero-sized proof that something
//!   happened in this process (`crossing_*_captures*`): the forms that may
//!   cross (`apply_with`, `launch_with`, `spawn_with`, `spawn_to`, ...) take
//!   their code as a `fn`, which only a closure that captures nothing
//!   coerces to. Generic closures given to a trustee in another process
//!   (`apply`, `launch`, ...) are refused at run time in the caller instead
//!   (`tests/crossing.rs`, `tests/soundness_cross.rs`).

#[test]
fn capture_rules() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
