//! Rejected at compile time, with the message users see:
//! * closures that capture borrows, raw pointers or heap data
//!   (`captures_*`, `then_captures_*`), pointing to `apply_with`;
//! * data that would cross into another process as an argument or a result
//!   but holds an address — `&'static str`, `&'static [u8]`, a `fn`
//!   pointer, `Option<&'static T>`, a struct holding a reference, a raw
//!   pointer (`crossing_*`). Closures that capture such data are refused at
//!   run time at the process boundary instead (`tests/crossing.rs`).

#[test]
fn capture_rules() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
