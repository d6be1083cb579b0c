//! Closures that capture references or raw pointers are rejected at compile
//! time, with an error that points to `apply_with`.

#[test]
fn capture_rules() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
