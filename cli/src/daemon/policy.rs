//! What the daemon agrees to run: binaries under the `--allow` paths, with
//! the launcher's hash, and environments without the dynamic loader's
//! variables; and whether it may run as root at all.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::proto::{self, RankSpec};
use crate::CliError;

/// The paths and variables the daemon allows, fixed at start.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Canonical paths, and whether each is a directory: a file allows
    /// itself, a directory everything under it.
    allowed: Vec<(PathBuf, bool)>,
    /// Whether variables named `LD_*` may be set for ranks.
    allow_loader_env: bool,
}

impl Policy {
    /// Canonicalizes every `--allow` path (each must exist).
    pub fn new(allow: &[PathBuf], allow_loader_env: bool) -> Result<Policy, CliError> {
        let mut allowed = vec![];
        for p in allow {
            let c = std::fs::canonicalize(p).map_err(|e| {
                CliError::Usage(format!("--allow {}: {e} (give an existing file or directory)", p.display()))
            })?;
            let dir = c.is_dir();
            allowed.push((c, dir));
        }
        Ok(Policy { allowed, allow_loader_env })
    }

    /// Whether the daemon starts nothing (no `--allow`).
    pub fn starts_nothing(&self) -> bool {
        self.allowed.is_empty()
    }

    /// The allowed paths, for logs and messages.
    pub fn describe(&self) -> String {
        self.allowed.iter().map(|(a, _)| a.display().to_string()).collect::<Vec<_>>().join(", ")
    }

    /// The canonical path of `binary` if the policy allows it.
    pub fn permit(&self, binary: &str) -> Result<PathBuf, String> {
        check_length(binary)?;
        if self.starts_nothing() {
            return Err("this daemon starts nothing: it was started without --allow; restart it with \
                        `--allow PATH` naming the binaries or directories it may start"
                .into());
        }
        let path = Path::new(binary);
        if !path.is_absolute() {
            return Err(format!("{binary}: not an absolute path"));
        }
        let canonical = std::fs::canonicalize(path).map_err(|e| format!("{binary}: {e}"))?;
        if self.allowed.iter().any(|(a, dir)| canonical == *a || (*dir && canonical.starts_with(a))) {
            Ok(canonical)
        } else {
            Err(format!(
                "{binary} (that is {}) is not allowed: the daemon starts only binaries under its --allow paths ({})",
                canonical.display(),
                self.describe()
            ))
        }
    }

    /// Refuses variables that would change what an allowed binary runs.
    pub fn check_env(&self, ranks: &[RankSpec]) -> Result<(), String> {
        for (name, _) in ranks.iter().flat_map(|r| r.env.iter()) {
            if name.is_empty() || name.contains(['=', '\0']) {
                return Err(format!("{name:?} is not a variable name"));
            }
            if name.starts_with("LD_") && !self.allow_loader_env {
                return Err(format!(
                    "{name} is refused: the dynamic loader's variables (LD_*) make any binary run other code; \
                     start the daemon with --allow-loader-env to permit them"
                ));
            }
        }
        Ok(())
    }
}

/// The longest binary path accepted (Linux's `PATH_MAX`).
pub const PATH_MAX: usize = 4096;

/// Refuses a path too long to be one, without repeating it.
pub fn check_length(binary: &str) -> Result<(), String> {
    if binary.len() > PATH_MAX {
        return Err(format!("a binary path of {} bytes is longer than {PATH_MAX}", binary.len()));
    }
    Ok(())
}

/// Refuses to serve as root unless asked to: the ranks would run as root.
pub fn refuse_root(allow_root: bool) -> Result<(), CliError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 && !allow_root {
        return Err(CliError::Usage(
            "refusing to run the daemon as root: every rank it starts would run as root; \
             run it as an unprivileged user, or pass --allow-root"
                .into(),
        ));
    }
    Ok(())
}

/// Whether `binary` is an absolute path to an executable file with hash `sha256`.
pub fn check_binary(binary: &str, sha256: &[u8; 32]) -> Result<(), String> {
    let path = Path::new(binary);
    if !path.is_absolute() {
        return Err(format!("{binary}: not an absolute path"));
    }
    let meta = std::fs::metadata(path).map_err(|e| format!("{binary}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{binary}: not a regular file"));
    }
    let c = std::ffi::CString::new(binary).map_err(|_| format!("{binary}: contains a NUL byte"))?;
    // SAFETY: `c` is a NUL-terminated path.
    if meta.permissions().mode() & 0o111 == 0 || unsafe { libc::access(c.as_ptr(), libc::X_OK) } != 0 {
        return Err(format!("{binary}: not executable by the daemon's user"));
    }
    let found = proto::sha256_file(path).map_err(|e| format!("{binary}: cannot read it: {e}"))?;
    if &found != sha256 {
        return Err(format!(
            "{binary}: SHA-256 {} differs from the launcher's {} (a different binary at that path)",
            proto::hex(&found),
            proto::hex(sha256)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_directories_allow_what_they_name() {
        let p = Policy::new(&["/usr/bin/env".into(), "/usr/lib".into()], false).unwrap();
        assert!(p.permit("/usr/bin/env").is_ok());
        assert!(p.permit("/usr/bin/true").unwrap_err().contains("not allowed"));
        assert!(p.permit("usr/bin/env").unwrap_err().contains("absolute"));
        let none = Policy::new(&[], false).unwrap();
        assert!(none.permit("/usr/bin/env").unwrap_err().contains("--allow"));
    }

    #[test]
    fn loader_variables_need_their_flag() {
        let r = |k: &str| vec![RankSpec { rank: 0, env: vec![(k.into(), "x".into())] }];
        let p = Policy::new(&[], false).unwrap();
        assert!(p.check_env(&r("LD_PRELOAD")).unwrap_err().contains("--allow-loader-env"));
        assert!(p.check_env(&r("A=B")).is_err());
        assert!(p.check_env(&r("GOSSAMER_RANK")).is_ok());
        assert!(Policy::new(&[], true).unwrap().check_env(&r("LD_PRELOAD")).is_ok());
    }
}
