//! Compile-time checks of the macros: every mistake is an error that points at
//! it and says what to write (`tests/ui`), and every key works (`tests/ui-pass`).

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.pass("tests/ui-pass/*.rs");
}
