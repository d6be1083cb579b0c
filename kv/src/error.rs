//! Errors that stop the server from starting or running.

use std::io;

/// A server error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting or combination of settings is not allowed.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The listen address does not resolve.
    #[error("cannot resolve listen address {addr:?}: {source}")]
    Resolve {
        /// The address as given.
        addr: String,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Listening failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The Gossamer runtime did not start.
    #[error("cannot start the runtime: {0}")]
    Runtime(#[from] gossamer::Error),
    /// Another I/O failure.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
}
