//! Command-line configuration, with memcached's flag names.

pub mod options;

use clap::Parser;

use crate::error::Error;
pub use options::{Extended, OptionError};

/// The `--dedicated-trustees` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DedicatedTrustees {
    /// This many of the last threads own the shards and serve no connections.
    Count(usize),
    /// The runtime's controller picks the count while the server runs.
    Auto,
}

impl DedicatedTrustees {
    /// The count fixed at start (0 under `Auto`, which starts from none).
    pub fn count(self) -> usize {
        match self {
            DedicatedTrustees::Count(n) => n,
            DedicatedTrustees::Auto => 0,
        }
    }
}

impl std::fmt::Display for DedicatedTrustees {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DedicatedTrustees::Count(n) => write!(f, "{n}"),
            DedicatedTrustees::Auto => f.write_str("auto"),
        }
    }
}

impl std::str::FromStr for DedicatedTrustees {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(DedicatedTrustees::Auto),
            n => n.parse().map(DedicatedTrustees::Count).map_err(|_| format!("{n:?} is neither a number nor `auto`")),
        }
    }
}

/// A memcached-compatible server whose table lives in Gossamer trustees.
#[derive(Parser, Debug, Clone)]
#[command(name = "gossamer-kv", version, about)]
pub struct Config {
    /// TCP port to listen on (0: any free port, printed at start-up).
    #[arg(short = 'p', long = "port", default_value_t = 11211)]
    pub port: u16,

    /// Interfaces to listen on, comma-separated (memcached listens on all
    /// interfaces by default; this server on loopback unless told).
    #[arg(short = 'l', long = "listen", default_value = "127.0.0.1")]
    pub listen: String,

    /// Worker threads (each serves connections and owns one shard).
    #[arg(short = 't', long = "threads", default_value_t = 4)]
    pub threads: usize,

    /// Maximum simultaneous connections.
    #[arg(short = 'c', long = "conn-limit", default_value_t = 1024)]
    pub max_connections: usize,

    /// Listen backlog: connections the kernel queues until accepted
    /// (capped by net.core.somaxconn).
    #[arg(short = 'b', long = "listen-backlog", default_value_t = 1024, allow_negative_numbers = true)]
    pub backlog: i32,

    /// Item memory in megabytes.
    #[arg(short = 'm', long = "memory-limit", default_value_t = 64)]
    pub memory_mb: u64,

    /// Largest item, e.g. 1m, 512k (at least 1024 bytes, at most 1 GiB and
    /// half the memory limit).
    #[arg(short = 'I', long = "max-item-size", default_value = "1m", value_parser = parse_size)]
    pub item_size_max: usize,

    /// UDP port; UDP is not supported, so only 0 (off) is accepted.
    #[arg(short = 'U', long = "udp-port", default_value_t = 0)]
    pub udp_port: u16,

    /// Verbose logging (-v: info, -vv: debug, -vvv: trace).
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// Of the worker threads, this many only own shards and serve no
    /// connections (Gossamer's dedicated trustees); `auto`: every thread
    /// starts with a shard and connections, and the runtime's controller
    /// dedicates trustees while the server runs (see
    /// `gossamer::Builder::dedicated_trustees_auto`).
    #[arg(long = "dedicated-trustees", default_value_t = DedicatedTrustees::Count(0), value_name = "N|auto")]
    pub dedicated_trustees: DedicatedTrustees,

    /// Prefix delimiter for per-prefix stats (`stats detail`); giving it
    /// also turns per-prefix counting on, as in memcached.
    #[arg(short = 'D', value_name = "CHAR")]
    pub prefix_delimiter: Option<String>,

    /// Enable the `shutdown` command.
    #[arg(short = 'A', long = "enable-shutdown")]
    pub enable_shutdown: bool,

    /// memcached's extended options, comma-separated (may be repeated).
    #[arg(short = 'o', long = "extended", value_name = "OPTIONS")]
    pub extended: Vec<String>,

    /// Pin worker threads to cores.
    #[arg(long = "pin")]
    pub pin: bool,

    /// Microseconds a connection worker with nothing to do keeps polling
    /// before it blocks.
    #[arg(long = "idle-spin-us", default_value_t = 50)]
    pub idle_spin_us: u64,

    /// Microseconds a connection worker that only waits for answers from
    /// other workers keeps polling before it blocks.
    #[arg(long = "wait-spin-us", default_value_t = 1000)]
    pub wait_spin_us: u64,

    /// Run as one program of this many processes of this host, each with
    /// `-t` threads and `-m` megabytes, process `r` listening on port
    /// `-p` + `r`. Under `mpirun`, `srun` or `gossamer run` the launcher's
    /// process count applies instead.
    #[arg(long = "processes", value_name = "N")]
    pub processes: Option<usize>,

    /// Serve a request whose shard is the connection worker's own at once,
    /// in the worker, instead of through the reply callbacks.
    #[arg(long = "local-first")]
    pub local_first: bool,
}

/// Parses a size with an optional k/m/g suffix (powers of 1024).
pub fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, 'k' | 'K')) => (&s[..i], 1usize << 10),
        Some((i, 'm' | 'M')) => (&s[..i], 1 << 20),
        Some((i, 'g' | 'G')) => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    let n: usize = num.parse().map_err(|_| format!("not a size: {s:?}"))?;
    n.checked_mul(mult).ok_or_else(|| format!("size too large: {s:?}"))
}

impl Config {
    /// Item memory in bytes.
    pub fn memory_bytes(&self) -> u64 {
        self.memory_mb.saturating_mul(1 << 20)
    }

    /// Workers that serve connections.
    pub fn connection_workers(&self) -> usize {
        self.threads - self.dedicated_trustees.count()
    }

    /// Shards: one per dedicated trustee, or one per worker without them.
    pub fn shard_count(&self) -> usize {
        if self.dedicated_trustees.count() > 0 {
            self.dedicated_trustees.count()
        } else {
            self.threads
        }
    }

    /// The `-o` options.
    pub fn extended_options(&self) -> Result<Extended, OptionError> {
        Extended::parse(&self.extended)
    }

    /// The prefix delimiter (`-D`; `:` by default).
    pub fn delimiter(&self) -> u8 {
        self.prefix_delimiter.as_deref().and_then(|d| d.bytes().next()).unwrap_or(b':')
    }

    /// Checks the combination of settings, as memcached does at start-up.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |m: String| Err(Error::Config(m));
        if self.prefix_delimiter.as_deref() == Some("") {
            return bad("No delimiter specified".into());
        }
        if let Err(e) = self.extended_options() {
            return bad(e.to_string());
        }
        if self.udp_port != 0 {
            return bad("UDP is not supported; use -U 0".into());
        }
        if self.threads == 0 {
            return bad("number of threads must be greater than 0".into());
        }
        if self.dedicated_trustees.count() >= self.threads {
            return bad(format!(
                "{} dedicated trustees leave none of the {} threads to serve connections",
                self.dedicated_trustees, self.threads
            ));
        }
        if self.processes == Some(0) {
            return bad("--processes must be at least 1".into());
        }
        if self.max_connections == 0 {
            return bad("the connection limit must be at least 1".into());
        }
        if self.item_size_max < 1024 {
            return bad("item max size cannot be less than 1024 bytes".into());
        }
        if self.item_size_max > 1 << 30 {
            return bad("cannot set item size limit higher than 1 gigabyte".into());
        }
        if self.item_size_max as u64 > self.memory_bytes() / 2 {
            return bad("cannot set item size limit higher than 1/2 of memory max".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert_eq!(parse_size("512k"), Ok(512 << 10));
        assert_eq!(parse_size("2048"), Ok(2048));
        assert!(parse_size("x").is_err());
    }

    #[test]
    fn memcached_flags() {
        let c = Config::try_parse_from([
            "gossamer-kv",
            "-p",
            "0",
            "-t",
            "2",
            "-m",
            "16",
            "-I",
            "2m",
            "-c",
            "10",
            "-U",
            "0",
            "-vv",
        ])
        .unwrap();
        assert_eq!(
            (c.port, c.threads, c.memory_mb, c.item_size_max, c.max_connections, c.verbose),
            (0, 2, 16, 2 << 20, 10, 2)
        );
        assert!(c.validate().is_ok());
        let c = Config::try_parse_from(["gossamer-kv", "-U", "11211"]).unwrap();
        assert!(c.validate().is_err());
        let c = Config::try_parse_from(["gossamer-kv", "-m", "1", "-I", "1m"]).unwrap();
        assert!(c.validate().is_err());
    }
}
