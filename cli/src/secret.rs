//! The shared secret: a file only its owner may read or write (like ssh's keys).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::CliError;

/// Reads the secret from `path`: its bytes without a trailing newline.
/// Refuses a file that group or others may read or write, and an empty one.
pub fn load(path: &Path) -> Result<Vec<u8>, CliError> {
    let name = path.display().to_string();
    let err = |reason: String| CliError::Secret { path: name.clone(), reason };
    let meta = std::fs::metadata(path).map_err(|e| err(format!("cannot read it: {e}")))?;
    if !meta.is_file() {
        return Err(err("not a regular file".into()));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o066 != 0 {
        return Err(err(format!(
            "permissions {mode:04o} are too open: group or others may read or write it; \
             run `chmod 600 {name}`"
        )));
    }
    let mut bytes = std::fs::read(path).map_err(|e| err(format!("cannot read it: {e}")))?;
    while matches!(bytes.last(), Some(b'\n' | b'\r')) {
        bytes.pop();
    }
    if bytes.is_empty() {
        return Err(err("it is empty; put a long random string in it, e.g. `head -c 32 /dev/urandom | base64`".into()));
    }
    Ok(bytes)
}
