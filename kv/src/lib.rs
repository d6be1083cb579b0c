//! # gossamer-kv
//!
//! A memcached-compatible key-value server built on the Gossamer runtime.
//! The table is split into shards, one per trustee thread; connection
//! workers parse requests in both memcached protocols and delegate each one
//! to the shard that owns its key with `apply_then`, so no lock guards the
//! table and many requests per connection are in flight at once. Replies
//! go back in request order, byte for byte as memcached 1.6 writes them.
//!
//! The crate also holds the load generator (`gossamer-kv-load`) used to
//! compare the server with stock memcached.

pub mod base64;
pub mod clock;
pub mod config;
pub mod error;
pub mod load;
pub mod numeric;
pub mod protocol;
pub mod server;
pub mod store;

pub use config::Config;
pub use error::Error;
pub use server::Server;
