//! The load generator behind `gossamer-kv-load`: a closed-loop memcached
//! client (threads × connections × pipeline depth) with uniform or Zipf
//! keys, a get/set mix, latency percentiles and CSV output, and a
//! side-by-side comparison with stock memcached.

pub mod compare;
pub mod driver;
pub mod report;
pub mod workload;

pub use compare::{compare, CompareArgs};
pub use driver::{prefill, run};
pub use report::RunResult;
pub use workload::{Dist, Workload};
