//! What the daemon agrees to run: binaries under the `--allow` paths, with
//! the launcher's hash, and environments without the dynamic loader's
//! variables; and whether it may run as root at all.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
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

/// A binary that passed [`check_binary`], held open: the ranks are started
/// from this open file, not from its path, so a file put at the path after
/// the check (a rename over it) is not what runs.
#[derive(Debug)]
pub struct Checked {
    /// The path the launcher named, canonical.
    pub path: PathBuf,
    file: File,
    /// Whether it starts with `#!`: an interpreter reads a script again by
    /// its path, so a script is started by path.
    script: bool,
}

impl Checked {
    /// What to hand `execve`: the open file itself (`/proc/self/fd/N`, the
    /// descriptor inherited across `fork`, which `execve` resolves before it
    /// closes the descriptors marked close-on-exec), or the path for a script.
    pub fn exec_path(&self) -> PathBuf {
        if self.script {
            self.path.clone()
        } else {
            PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()))
        }
    }
}

/// Whether `binary` is an absolute path to an executable file with hash
/// `sha256` that only its owner (the daemon's user or root) can change; the
/// file is opened once, and checked and hashed through that descriptor.
pub fn check_binary(binary: &str, sha256: &[u8; 32]) -> Result<Checked, String> {
    let path = Path::new(binary);
    if !path.is_absolute() {
        return Err(format!("{binary}: not an absolute path"));
    }
    let mut file = File::open(path).map_err(|e| format!("{binary}: {e}"))?;
    // What was opened is the file at the canonical path the policy allowed,
    // not something a directory swapped in between made it reach.
    match std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) {
        Ok(opened) if opened == path => {}
        _ => return Err(format!("{binary}: moved or replaced while it was being checked; try again")),
    }
    let meta = file.metadata().map_err(|e| format!("{binary}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{binary}: not a regular file"));
    }
    let c = std::ffi::CString::new(binary).map_err(|_| format!("{binary}: contains a NUL byte"))?;
    // SAFETY: `c` is a NUL-terminated path.
    if meta.permissions().mode() & 0o111 == 0 || unsafe { libc::access(c.as_ptr(), libc::X_OK) } != 0 {
        return Err(format!("{binary}: not executable by the daemon's user"));
    }
    if meta.permissions().mode() & 0o022 != 0 {
        return Err(format!(
            "{binary}: writable by its group or by others, who could change it between the check and the start; \
             `chmod go-w {binary}`"
        ));
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me && meta.uid() != 0 {
        return Err(format!(
            "{binary}: owned by user {}, who could change it between the check and the start; \
             the daemon starts files owned by its own user ({me}) or by root",
            meta.uid()
        ));
    }
    let found = proto::sha256_reader(&mut file).map_err(|e| format!("{binary}: cannot read it: {e}"))?;
    if &found != sha256 {
        return Err(format!(
            "{binary}: SHA-256 {} differs from the launcher's {} (a different binary at that path)",
            proto::hex(&found),
            proto::hex(sha256)
        ));
    }
    let mut head = [0u8; 2];
    let script = file.read_exact_at(&mut head, 0).is_ok() && &head == b"#!";
    Ok(Checked { path: path.to_path_buf(), file, script })
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

    /// A copy of `from` at `to`, mode 0755.
    fn copy_exe(from: &str, to: &Path) {
        std::fs::copy(from, to).unwrap();
        std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn a_checked_binary_runs_even_if_another_file_is_put_at_its_path() {
        let dir = std::env::temp_dir().join(format!("gossamer-policy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dir = dir.canonicalize().unwrap();
        let prog = dir.join("prog");
        copy_exe("/bin/true", &prog);
        let want = proto::sha256_file(&prog).unwrap();
        let checked = check_binary(prog.to_str().unwrap(), &want).unwrap();
        // Renamed over the checked path after the check: what runs is still
        // the file that was checked (`true`), not the new one (`false`).
        let other = dir.join("other");
        copy_exe("/bin/false", &other);
        std::fs::rename(&other, &prog).unwrap();
        let status = std::process::Command::new(checked.exec_path()).status().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(status.success(), "the replaced file ran: {status}");
    }

    #[test]
    fn binaries_others_could_change_are_refused() {
        let dir = std::env::temp_dir().join(format!("gossamer-policy-w-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dir = dir.canonicalize().unwrap();
        let prog = dir.join("prog");
        copy_exe("/bin/true", &prog);
        let want = proto::sha256_file(&prog).unwrap();
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o775)).unwrap();
        let err = check_binary(prog.to_str().unwrap(), &want).unwrap_err();
        assert!(err.contains("chmod go-w"), "{err}");
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(check_binary(prog.to_str().unwrap(), &[0; 32]).unwrap_err().contains("differs"));
        std::fs::remove_dir_all(&dir).unwrap();
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
