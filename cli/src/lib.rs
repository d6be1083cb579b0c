//! The `gossamer` command: `gossamer daemon` (one per host), `gossamer run`
//! (starts one program over several hosts through their daemons) and
//! `gossamer hosts` (what each host offers) and `gossamer top` (the hottest
//! trusts and trustees of a running program). See `cli/README.md`.

pub mod client;
pub mod daemon;
pub mod hosts;
pub mod output;
pub mod proto;
pub mod run;
pub mod secret;
pub mod top;
pub mod top_follow;

/// Errors of the command.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The secret file cannot be used.
    #[error("secret file {path}: {reason}")]
    Secret {
        /// The file.
        path: String,
        /// Why not.
        reason: String,
    },
    /// Something about one host.
    #[error("host {host}: {msg}")]
    Host {
        /// The host as given.
        host: String,
        /// What went wrong.
        msg: String,
    },
    /// A bad command line or input file.
    #[error("{0}")]
    Usage(String),
    /// `gossamer top` could not read a program's profile.
    #[error(transparent)]
    Top(#[from] top::TopError),
    /// An I/O error.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

impl CliError {
    /// An I/O error while doing `what`.
    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> CliError {
        let what = what.into();
        move |source| CliError::Io { what, source }
    }
}

/// This machine's name as Gossamer programs see it: `GOSSAMER_HOST` when
/// set, else the kernel's host name.
pub fn host_name() -> String {
    if let Ok(h) = std::env::var("GOSSAMER_HOST") {
        if !h.is_empty() {
            return h;
        }
    }
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is writable for its length; gethostname NUL-terminates within it on success.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    if ok && end > 0 {
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        "localhost".into()
    }
}
