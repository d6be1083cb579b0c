//! Visible skips for gossamer-kv's tests: the workspace's skip helper
//! (`gossamer/tests/common/skip.rs`), and what the comparison tests need.

#[allow(unused_imports)] // each test binary uses a different part
pub use super::shared_skip::*;

/// What the comparison tests need, and the variable that requires it.
pub const MEMCACHED: &str = "memcached to compare with (apt install memcached)";
pub const MEMCACHED_VAR: &str = "GOSSAMER_KV_REQUIRE_MEMCACHED";
