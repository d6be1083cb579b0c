//! The errors of the UCX fabric: a missing library, a failing UCX call
//! (with its status code and UCX's text for it), and misuse or timeouts
//! caught by the safe wrapper.

use std::time::Duration;

/// Why a UCX operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum UcxError {
    /// The UCX library could not be loaded.
    #[error("UCX not found ({library}): apt-get install libucx0 ({reason})")]
    NotFound {
        /// The library asked for.
        library: String,
        /// The dynamic loader's error.
        reason: String,
    },
    /// The library loaded but lacks a function the fabric needs.
    #[error("UCX library {library} has no {symbol}: {reason} (UCX 1.13 or newer is needed)")]
    MissingSymbol {
        /// The library loaded.
        library: String,
        /// The missing function.
        symbol: &'static str,
        /// The dynamic loader's error.
        reason: String,
    },
    /// The library's major version is not the one this module is written for.
    #[error("UCX {found} is not supported: the fabric needs UCX 1.x, 1.13 or newer")]
    Version {
        /// The version found.
        found: String,
    },
    /// A UCX call returned an error status.
    #[error("{function} failed: {text} (ucs_status_t {status})")]
    Call {
        /// The UCX function.
        function: &'static str,
        /// Its `ucs_status_t`.
        status: i8,
        /// `ucs_status_string(status)`.
        text: String,
    },
    /// A blocking wait gave up.
    #[error("{what} did not complete within {after:?} (does the peer's worker progress?)")]
    Timeout {
        /// What was waited for.
        what: &'static str,
        /// How long.
        after: Duration,
    },
    /// An object was used with a worker, endpoint or key it does not belong to.
    #[error("{0}")]
    Misuse(&'static str),
    /// A put would write outside the remote region its key was unpacked for.
    #[error(
        "put of {len} bytes at {addr:#x} is outside the remote region [{base:#x}, {base:#x} + {region_len}) of its key"
    )]
    OutOfRange {
        /// Remote address of the put.
        addr: u64,
        /// Its length.
        len: usize,
        /// Base of the remote region.
        base: u64,
        /// Length of the remote region.
        region_len: usize,
    },
    /// The endpoint failed or was closed; the text says why.
    #[error("UCX endpoint unusable: {0}")]
    EndpointFailed(String),
}
