//! Progress bars for long sweeps (drawn on stderr, hidden when it is not a
//! terminal).

use indicatif::{ProgressBar, ProgressStyle};

/// A bar over `len` measurements.
pub fn bar(name: &str, len: u64) -> ProgressBar {
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template("{prefix:>8} [{bar:30}] {pos}/{len} {elapsed_precise} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    pb.set_prefix(name.to_string());
    pb
}
