//! A secret kept in a file, checked like an ssh key: only its owner may
//! read or write it. The launcher, the daemons and the ranks all read
//! their secrets this way.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Reads the secret in `path`: its bytes without trailing newlines.
/// Refuses a file that group or others may read or write, and an empty
/// one; the error says why and what to do.
pub fn read_secret_file(path: &Path) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read it: {e}"))?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o066 != 0 {
        return Err(format!(
            "permissions {mode:04o} are too open: group or others may read or write it; run `chmod 600 {}`",
            path.display()
        ));
    }
    let mut bytes = std::fs::read(path).map_err(|e| format!("cannot read it: {e}"))?;
    while matches!(bytes.last(), Some(b'\n' | b'\r')) {
        bytes.pop();
    }
    if bytes.is_empty() {
        return Err("it is empty; put a long random string in it, e.g. `head -c 32 /dev/urandom | base64`".into());
    }
    Ok(bytes)
}
