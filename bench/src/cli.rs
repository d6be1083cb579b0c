//! Command-line interface: the subcommands and the options they share.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::keys::Dist;

/// Trust<T> against locks and concurrent maps.
///
/// Every run prints the machine's core count and its exact configuration,
/// writes CSV files and PNG plots to the results folder, verifies its final
/// counts or map contents, and exits with status 2 on a mismatch.
#[derive(Parser, Debug)]
#[command(name = "gossamer-bench", version, about, long_about = None)]
pub struct Cli {
    #[command(flatten)]
    pub common: Common,
    #[command(subcommand)]
    pub cmd: Cmd,
}

/// Options shared by every subcommand.
#[derive(Args, Debug, Clone)]
pub struct Common {
    /// Short sweeps: the whole suite (`all`) finishes in under 3 minutes on 2 cores.
    #[arg(long, global = true, conflicts_with = "smoke")]
    pub quick: bool,
    /// Tiny sweeps that only check correctness (a few seconds per subcommand).
    #[arg(long, global = true)]
    pub smoke: bool,
    /// Folder for CSV files and plots.
    #[arg(long, global = true, default_value = "results")]
    pub out: PathBuf,
    /// Worker threads of the runtime, and OS threads for the lock baselines
    /// [default: available cores].
    #[arg(long, global = true)]
    pub threads: Option<usize>,
    /// Dedicated trustee threads in the `-ded` variants: a number, or `auto`
    /// (all threads start as clients and trustees, and the runtime's
    /// controller picks the count while the run goes on; its choices are
    /// printed on stderr) [default: threads/4, at least 1].
    #[arg(long, global = true, value_name = "N|auto")]
    pub dedicated: Option<Dedicated>,
    /// Repetitions of every measurement; tables report medians [default: 3, quick and smoke: 1; demo: 3].
    #[arg(long, global = true)]
    pub repeat: Option<usize>,
    /// Length of one measurement in milliseconds [default: 1000, quick: 150, smoke: 20; demo: 250].
    #[arg(long, global = true)]
    pub duration_ms: Option<u64>,
    /// Pin runtime workers and lock threads to cores.
    #[arg(long, global = true)]
    pub pin: bool,
    /// Skip the PNG plots.
    #[arg(long, global = true)]
    pub no_plots: bool,
    /// Seed of the key generators.
    #[arg(long, global = true, default_value_t = 1)]
    pub seed: u64,
    /// Fibers per client thread for the blocking `apply` variants.
    #[arg(long, global = true, default_value_t = 128)]
    pub fibers: usize,
    /// Requests in flight per client thread for the `apply_then` variants.
    #[arg(long, global = true, default_value_t = 512)]
    pub window: usize,
    /// The policy of every object in the `trust-adaptive` variants:
    /// `adaptive` switches between lock and delegation as it measures,
    /// `delegate` and `lock` fix the mode (to see what each mode costs on
    /// this machine, beside the other variants).
    #[arg(long, global = true, value_enum, default_value_t = PolicyArg::Adaptive)]
    pub policy: PolicyArg,
    /// Deliberately miscount, to check that verification fails (for tests).
    #[arg(long, global = true, hide = true)]
    pub fault: bool,
}

/// The `--policy` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PolicyArg {
    Adaptive,
    Delegate,
    Lock,
}

impl PolicyArg {
    pub fn policy(self) -> gossamer::Policy {
        match self {
            PolicyArg::Adaptive => gossamer::Policy::Adaptive,
            PolicyArg::Delegate => gossamer::Policy::Delegate,
            PolicyArg::Lock => gossamer::Policy::Lock,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            PolicyArg::Adaptive => "adaptive",
            PolicyArg::Delegate => "delegate",
            PolicyArg::Lock => "lock",
        }
    }
}

/// The `--dedicated` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dedicated {
    /// A fixed count.
    Count(usize),
    /// The runtime's controller picks it.
    Auto,
}

impl std::str::FromStr for Dedicated {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Dedicated::Auto),
            n => n.parse().map(Dedicated::Count).map_err(|_| format!("{n:?} is neither a number nor `auto`")),
        }
    }
}

/// The benchmarks.
#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// The case in under 30 seconds: one hot counter, many counters and a
    /// shared map, with Trust<T> beside `std::sync::Mutex` and
    /// `parking_lot::Mutex`, at threads = cores and at 4 threads per core;
    /// a table with ratios and a verdict per row.
    Demo,
    /// Fetch-and-add throughput against the number of objects (thesis §2.6.1).
    Faa(FaaArgs),
    /// Latency (mean, p50, p99, p99.9) against offered load (thesis §2.6.2).
    Latency(LatencyArgs),
    /// Concurrent map throughput against table size and write ratio (thesis §2.6.3).
    Map(MapArgs),
    /// Micro-figures: fiber switch, round trip, one trustee's throughput,
    /// local shortcut, idle CPU and wake-up latency.
    Micro(MicroArgs),
    /// The effect of a change: builds this program at BASE and at HEAD (default:
    /// the working tree), runs `micro` and a slice of `faa` of both,
    /// interleaved, and prints the gain per figure.
    Compare(CompareArgs),
    /// Counters updated by tokio tasks: std and tokio mutexes against
    /// `apply_async`, against the number of counters.
    Tokio(TokioArgs),
    /// One hot counter before, during and after moving it between trustees
    /// (`Trust::migrate_to`), beside a mutex.
    Migrate(MigrateArgs),
    /// Everything above but `migrate`, in order.
    All,
}

/// Options of `migrate`.
#[derive(Args, Debug, Clone, Default)]
pub struct MigrateArgs {
    /// Pause between two moves while moving, in microseconds [default: 1000].
    #[arg(long)]
    pub interval_us: Option<u64>,
}

/// Options of `faa`.
#[derive(Args, Debug, Clone, Default)]
pub struct FaaArgs {
    /// Object counts to sweep (comma separated) [default: depends on the scale].
    #[arg(long, value_delimiter = ',')]
    pub objects: Vec<u64>,
    /// Key distributions [default: uniform,zipf].
    #[arg(long, value_delimiter = ',')]
    pub dist: Vec<Dist>,
    /// Variants to run (comma separated names) [default: all].
    #[arg(long, value_delimiter = ',')]
    pub variants: Vec<String>,
}

/// Options of `latency`.
#[derive(Args, Debug, Clone, Default)]
pub struct LatencyArgs {
    /// Offered loads in million operations per second [default: depends on the scale].
    #[arg(long, value_delimiter = ',')]
    pub loads: Vec<f64>,
    /// Variants to run (comma separated names) [default: all].
    #[arg(long, value_delimiter = ',')]
    pub variants: Vec<String>,
}

/// Options of `map`.
#[derive(Args, Debug, Clone, Default)]
pub struct MapArgs {
    /// Table sizes for the size sweep (5% writes) [default: depends on the scale].
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<u64>,
    /// Write percentages for the write sweep [default: depends on the scale].
    #[arg(long, value_delimiter = ',')]
    pub writes: Vec<u32>,
    /// Table size of the write sweep under uniform keys [default: 1000].
    #[arg(long)]
    pub uniform_size: Option<u64>,
    /// Table size of the write sweep under Zipf keys [default: 10^7, quick: 10^5].
    #[arg(long)]
    pub zipf_size: Option<u64>,
    /// Key distributions [default: uniform,zipf].
    #[arg(long, value_delimiter = ',')]
    pub dist: Vec<Dist>,
    /// Variants to run (comma separated names) [default: all].
    #[arg(long, value_delimiter = ',')]
    pub variants: Vec<String>,
}

/// Options of `tokio`.
#[derive(Args, Debug, Clone, Default)]
pub struct TokioArgs {
    /// Object counts to sweep (comma separated) [default: 1,10,...,10^6; quick: 1,1000,10^6].
    #[arg(long, value_delimiter = ',')]
    pub objects: Vec<u64>,
    /// tokio tasks updating the counters [default: 256].
    #[arg(long)]
    pub tasks: Option<usize>,
    /// Worker threads of the tokio runtime [default: --threads].
    #[arg(long)]
    pub tokio_threads: Option<usize>,
    /// Worker threads (trustees) of the gossamer runtime, beside tokio's [default: threads/2, at least 1].
    #[arg(long)]
    pub trustees: Option<usize>,
    /// Requests each task keeps in flight in `apply-async-window` [default: 16].
    #[arg(long)]
    pub task_window: Option<usize>,
    /// Variants to run (comma separated names) [default: all].
    #[arg(long, value_delimiter = ',')]
    pub variants: Vec<String>,
}

/// Options of `micro`.
#[derive(Args, Debug, Clone, Default)]
pub struct MicroArgs {
    /// Operations per micro-figure [default: depends on the scale].
    #[arg(long)]
    pub ops: Option<u64>,
    /// Only these figures, by name (comma-separated) [default: all].
    #[arg(long, value_delimiter = ',')]
    pub figures: Vec<String>,
}

/// Options of `compare`.
#[derive(Args, Debug, Clone)]
pub struct CompareArgs {
    /// The commit to compare against (any revision: a hash, a tag, `main~3`).
    pub base: String,
    /// The commit to compare [default: the working tree, uncommitted changes included].
    #[arg(long)]
    pub head: Option<String>,
    /// Interleaved rounds; each runs `micro` and the `faa` slice of both sides.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Object counts of the `faa` slice (uniform keys).
    #[arg(long, value_delimiter = ',', default_values_t = [16u64, 1_000_000])]
    pub objects: Vec<u64>,
    /// `faa` variants of the slice [default: all].
    #[arg(long, value_delimiter = ',')]
    pub variants: Vec<String>,
    /// Where built programs are kept [default: ~/.cache/gossamer/compare].
    #[arg(long)]
    pub cache: Option<PathBuf>,
}
