//! The load generator behind `gossamer-kv-load`: a closed-loop memcached
//! client (threads × connections × pipeline depth) with uniform or Zipf
//! keys, a get/set mix, latency percentiles and CSV output, a side-by-side
//! comparison with stock memcached, and the YCSB core workloads C and D
//! (with libmemcached's ketama routing over several servers).

pub mod compare;
pub mod driver;
pub mod ketama;
pub mod report;
pub mod sweep;
pub mod workload;
pub mod ycsb;

pub use compare::{compare, CompareArgs};
pub use driver::{prefill, run};
pub use report::RunResult;
pub use workload::{Dist, Workload};
pub use ycsb::YcsbArgs;
