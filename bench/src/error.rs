//! Why a benchmark run failed: a verification mismatch (exit status 2) or
//! anything else (exit status 1).

use std::fmt;

#[derive(Debug)]
pub enum BenchError {
    /// Final counts or map contents are not what the run did.
    Mismatch(String),
    /// Bad options, a runtime that would not start, a failed write.
    Other(String),
}

pub type Result<T> = std::result::Result<T, BenchError>;

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BenchError::Mismatch(m) => write!(f, "verification failed: {m}"),
            BenchError::Other(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for BenchError {}

impl From<std::io::Error> for BenchError {
    fn from(e: std::io::Error) -> Self {
        BenchError::Other(format!("i/o error: {e}"))
    }
}

impl From<gossamer::Error> for BenchError {
    fn from(e: gossamer::Error) -> Self {
        BenchError::Other(format!("runtime: {e}"))
    }
}

/// Fails with a mismatch unless `got == want`.
pub fn expect_eq(what: &str, got: u64, want: u64) -> Result<()> {
    if got == want {
        Ok(())
    } else {
        Err(BenchError::Mismatch(format!("{what}: found {got}, expected {want}")))
    }
}
