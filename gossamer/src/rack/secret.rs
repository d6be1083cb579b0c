//! The program's secret: what every rank must prove it knows before rank 0
//! tells it anything at the rendezvous.
//!
//! A rank reads it from `GOSSAMER_SECRET_FILE` (the path of a file that only
//! its owner may read or write; trailing CR/LF are not part of the secret)
//! or, when that is unset, from `GOSSAMER_SECRET` (the secret's text).
//! `gossamer run` sets `GOSSAMER_SECRET` to a fresh random value for each
//! program; the embedded launcher makes one itself ([`fresh`]) and hands it
//! to the copies it starts, in their environment, never on a command line.

use std::path::Path;

use super::RackError;

/// The variable naming a secret file.
pub(crate) const FILE_VAR: &str = "GOSSAMER_SECRET_FILE";
/// The variable holding the secret itself.
pub(crate) const TEXT_VAR: &str = "GOSSAMER_SECRET";

/// A fresh secret for one program: 32 random bytes, as hex text.
pub(crate) fn fresh() -> Result<String, RackError> {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes)
        .map_err(|e| RackError::Launch(format!("cannot make a secret for the program: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The secret this rank was given, if any: `GOSSAMER_SECRET_FILE`, else
/// `GOSSAMER_SECRET`. A file that cannot be used is an error, not "unset".
pub(crate) fn from_env() -> Result<Option<Vec<u8>>, RackError> {
    if let Some(path) = std::env::var_os(FILE_VAR).filter(|p| !p.is_empty()) {
        return load(Path::new(&path)).map(Some);
    }
    match std::env::var_os(TEXT_VAR) {
        Some(v) if !v.is_empty() => Ok(Some(std::os::unix::ffi::OsStrExt::as_bytes(v.as_os_str()).to_vec())),
        _ => Ok(None),
    }
}

/// Removes `GOSSAMER_SECRET` from this process's environment, once the
/// rank has read it, so that the processes it starts (a shell command, a
/// tool, another Gossamer program) do not inherit the secret. (A secret
/// file's path may stay: the file is readable by its owner only.)
///
/// Called by [`main`](super::main) as it starts, before the runtime starts
/// any thread. The standard library's environment functions take a lock,
/// so Rust code of other threads is safe beside it; C code that reads the
/// environment on another thread at that moment would not be, which is why
/// this is done here and nowhere later.
pub(crate) fn forget_text() {
    std::env::remove_var(TEXT_VAR);
}

/// The error for a rank of a program of several processes, started by a
/// launcher of its own (`rank_var`/`size_var` say which), without a secret.
pub(crate) fn missing(rank_var: &str, size_var: &str) -> RackError {
    RackError::Config(format!(
        "{rank_var}/{size_var} start this process as a rank of a program of several processes, but neither \
         {FILE_VAR} nor {TEXT_VAR} is set: every rank must prove that it knows the program's secret before rank 0 \
         accepts it. Make a secret file that only you can read, `head -c 32 /dev/urandom | base64 > FILE; chmod 600 \
         FILE`, and `export {FILE_VAR}=FILE` for every rank (with mpirun, also pass `-x {FILE_VAR}`); or set \
         {TEXT_VAR} to the secret itself (`gossamer run` does this for you)"
    ))
}

/// Reads a secret file: its bytes without trailing CR/LF. Refuses a file
/// that group or others may read or write, and an empty one.
fn load(path: &Path) -> Result<Vec<u8>, RackError> {
    gossamer_session::read_secret_file(path)
        .map_err(|reason| RackError::Config(format!("secret file {} ({FILE_VAR}): {reason}", path.display())))
}

#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn secret_files_are_checked_like_ssh_keys() {
        let dir = std::env::temp_dir().join(format!("gossamer-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("s");
        std::fs::write(&f, "abc\r\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(load(&f).unwrap(), b"abc");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(load(&f).unwrap_err().to_string().contains("chmod 600"));
        std::fs::write(&f, "\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(load(&f).unwrap_err().to_string().contains("empty"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn fresh_secrets_are_long_and_differ() {
        let (a, b) = (fresh().unwrap(), fresh().unwrap());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }
}
