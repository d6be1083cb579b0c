//! Rejected at compile time, with the message users see:
//! * closures that capture borrows, raw pointers or heap data
//!   (`captures_*`, `then_captures_*`), pointing to `apply_with`;
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
