//! Skipping a test that this machine cannot run (a missing tool, library or
//! privilege) or that the default run leaves out (a heavy suite), so that
//! the skip is seen: one line on the terminal, even while the test harness
//! captures the test's output, naming what is missing and the variable that
//! turns the skip into a failure (or, for heavy tests, runs them).

use std::io::Write;

/// The variable that runs the heavy tests (multi-host programs, large
/// payloads, long comparisons); CI sets it.
pub const FULL_VAR: &str = "GOSSAMER_FULL_TESTS";

/// The running test's name, as the harness names its thread.
fn test_name() -> String {
    let thread = std::thread::current();
    let name = thread.name().filter(|n| *n != "main").unwrap_or("?");
    format!("{}::{name}", env!("CARGO_CRATE_NAME"))
}

/// Writes one line straight to the process's stderr: the harness captures
/// what `eprintln!` prints, not what is written to the handle itself.
fn say(line: &str) {
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}

/// Skips the running test, which needs `needs` (what it is, and how to get
/// it, e.g. "UCX (apt install libucx0)"); or fails it when `require_var` is
/// `1`. The caller returns after it.
pub fn skip(needs: &str, require_var: &str) {
    let test = test_name();
    if std::env::var(require_var).as_deref() == Ok("1") {
        panic!("{test} needs {needs}, and {require_var}=1 forbids skipping it");
    }
    say(&format!("SKIPPED {test}: needs {needs}; set {require_var}=1 to fail instead"));
}

/// Skips the running test for `reason`, a deliberate skip that no variable
/// turns into a failure. The caller returns after it.
pub fn skipped(reason: &str) {
    say(&format!("SKIPPED {}: {reason}", test_name()));
}

/// Whether the heavy tests run (`GOSSAMER_FULL_TESTS=1`); if not, the
/// running test, which is `what`, says SKIPPED and the caller returns.
pub fn full(what: &str) -> bool {
    if std::env::var(FULL_VAR).as_deref() == Ok("1") {
        return true;
    }
    say(&format!("SKIPPED {}: {what}, a heavy test; set {FULL_VAR}=1 to run it", test_name()));
    false
}
