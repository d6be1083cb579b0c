//! The two programs being compared: a commit's sources exported with `git
//! archive` into a cache folder (or the working tree as it is), built in
//! release mode with one shared target folder (so that dependencies build
//! once), and the resulting `gossamer-bench` copied aside under the
//! commit's hash, so that later comparisons against the same commit do not
//! build it again.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{BenchError, Result};

/// What to build.
pub enum Source {
    /// A commit, by its full hash and the name it was asked by.
    Commit { repo: PathBuf, hash: String, name: String },
    /// The working tree of the repository, uncommitted changes included.
    WorkTree(PathBuf),
}

impl Source {
    /// Resolves `name` (any revision git understands) to a commit.
    pub fn commit(repo: &Path, name: &str) -> Result<Source> {
        let hash = git(repo, &["rev-parse", "--verify", "--quiet", &format!("{name}^{{commit}}")])
            .map_err(|_| BenchError::Other(format!("`{name}` is not a commit of {}", repo.display())))?;
        Ok(Source::Commit { repo: repo.to_path_buf(), hash, name: name.to_string() })
    }

    pub fn describe(&self) -> String {
        match self {
            Source::Commit { hash, name, .. } if name.starts_with(hash.as_str()) => hash[..12].to_string(),
            Source::Commit { hash, name, .. } => format!("{name} ({})", &hash[..12]),
            Source::WorkTree(p) => format!("the working tree at {}", p.display()),
        }
    }
}

/// The repository holding the current directory.
pub fn repo_root() -> Result<PathBuf> {
    let here = std::env::current_dir()?;
    git(&here, &["rev-parse", "--show-toplevel"])
        .map(PathBuf::from)
        .map_err(|e| BenchError::Other(format!("compare must run inside the gossamer repository: {e}")))
}

/// `$XDG_CACHE_HOME/gossamer/compare`, else `~/.cache/gossamer/compare`.
pub fn default_cache() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("gossamer").join("compare")
}

/// The `gossamer-bench` program built from `src`, building it if needed.
pub fn binary(src: &Source, cache: &Path) -> Result<PathBuf> {
    let bins = cache.join("bin");
    std::fs::create_dir_all(&bins)?;
    let target = cache.join("target");
    match src {
        Source::Commit { repo, hash, .. } => {
            let bin = bins.join(format!("gossamer-bench-{hash}"));
            if bin.exists() {
                println!("{}: built before, {}", src.describe(), bin.display());
                return Ok(bin);
            }
            let tree = cache.join("src").join(hash);
            if !tree.join("Cargo.toml").exists() {
                export(repo, hash, &tree)?;
            }
            cargo_build(&tree, &target, src)?;
            copy_out(&target, &bin)?;
            // The sources are not needed once the program exists.
            let _ = std::fs::remove_dir_all(&tree);
            Ok(bin)
        }
        Source::WorkTree(repo) => {
            let bin = bins.join("gossamer-bench-worktree");
            cargo_build(repo, &target, src)?;
            copy_out(&target, &bin)?;
            Ok(bin)
        }
    }
}

/// `git archive HASH | tar -x -C tree`.
fn export(repo: &Path, hash: &str, tree: &Path) -> Result<()> {
    std::fs::create_dir_all(tree)?;
    let mut archive = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["archive", "--format=tar", hash])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| BenchError::Other(format!("cannot run git: {e}")))?;
    let stdout = archive.stdout.take().expect("piped");
    let tar = Command::new("tar")
        .arg("-x")
        .arg("-C")
        .arg(tree)
        .stdin(stdout)
        .status()
        .map_err(|e| BenchError::Other(format!("cannot run tar: {e}")))?;
    let git_ok = archive.wait()?.success();
    if !git_ok || !tar.success() || !tree.join("bench").join("Cargo.toml").exists() {
        let _ = std::fs::remove_dir_all(tree);
        return Err(BenchError::Other(format!("cannot export commit {hash} (does it have the bench crate?)")));
    }
    Ok(())
}

fn cargo_build(tree: &Path, target: &Path, src: &Source) -> Result<()> {
    println!("building {} ...", src.describe());
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(tree)
        .args(["build", "--release", "--quiet", "-p", "gossamer-bench"])
        .env("CARGO_TARGET_DIR", target)
        .status()
        .map_err(|e| BenchError::Other(format!("cannot run cargo: {e}")))?;
    if status.success() {
        Ok(())
    } else {
        Err(BenchError::Other(format!("building {} failed ({status})", src.describe())))
    }
}

fn copy_out(target: &Path, bin: &Path) -> Result<()> {
    let built = target.join("release").join("gossamer-bench");
    // Copy to a temporary name first: an interrupted copy must not look
    // like a finished program next time.
    let tmp = bin.with_extension("partial");
    std::fs::copy(&built, &tmp)?;
    std::fs::rename(&tmp, bin)?;
    Ok(())
}

fn git(dir: &Path, args: &[&str]) -> std::result::Result<String, String> {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}
