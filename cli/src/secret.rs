//! The shared secret: a file only its owner may read or write (like ssh's keys).

use std::path::Path;

use crate::CliError;

/// Reads the secret from `path`: its bytes without a trailing newline.
/// Refuses a file that group or others may read or write, and an empty one.
pub fn load(path: &Path) -> Result<Vec<u8>, CliError> {
    gossamer_session::read_secret_file(path)
        .map_err(|reason| CliError::Secret { path: path.display().to_string(), reason })
}
