//! The resolved configuration of a run: the command-line options with the
//! defaults of the chosen scale (full, quick or smoke) filled in.

use std::path::PathBuf;
use std::time::Duration;

use crate::cli::Common;

/// How long the sweeps are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// The documented full sweep.
    Full,
    /// The whole suite in under 3 minutes on 2 cores.
    Quick,
    /// A correctness check of a few seconds.
    Smoke,
}

impl Scale {
    /// Picks a value by scale.
    pub fn pick<T>(self, full: T, quick: T, smoke: T) -> T {
        match self {
            Scale::Full => full,
            Scale::Quick => quick,
            Scale::Smoke => smoke,
        }
    }

    pub fn name(self) -> &'static str {
        self.pick("full", "quick", "smoke")
    }
}

/// Everything a benchmark needs to know about the run.
#[derive(Clone, Debug)]
pub struct Settings {
    pub scale: Scale,
    /// Runtime workers, and OS threads of the lock baselines.
    pub threads: usize,
    /// Dedicated trustees in the `-ded` variants.
    pub dedicated: usize,
    /// Whether the `-ded` variants let the runtime's controller pick the count.
    pub dedicated_auto: bool,
    pub repeat: usize,
    pub duration: Duration,
    /// Length of each client's pre-generated key trace (a power of two).
    pub trace_len: usize,
    pub pin: bool,
    pub plots: bool,
    pub out: PathBuf,
    pub seed: u64,
    pub fibers: usize,
    pub window: usize,
    /// The policy of the `trust-adaptive` objects.
    pub policy: crate::cli::PolicyArg,
    pub fault: bool,
}

impl Settings {
    pub fn resolve(c: &Common) -> Result<Settings, String> {
        let scale = if c.smoke {
            Scale::Smoke
        } else if c.quick {
            Scale::Quick
        } else {
            Scale::Full
        };
        let cores = crate::machine::cores();
        let threads = c.threads.unwrap_or(cores);
        if threads < 2 {
            return Err("at least 2 threads are needed (one client and one trustee)".into());
        }
        let dedicated_auto = c.dedicated == Some(crate::cli::Dedicated::Auto);
        let dedicated = match c.dedicated {
            Some(crate::cli::Dedicated::Count(n)) => n,
            _ => (threads / 4).max(1),
        };
        if dedicated == 0 || dedicated >= threads {
            return Err(format!("--dedicated must be between 1 and threads-1 ({})", threads - 1));
        }
        if c.fibers == 0 || c.window == 0 {
            return Err("--fibers and --window must be positive".into());
        }
        let repeat = c.repeat.unwrap_or(scale.pick(3, 1, 1)).max(1);
        let duration = Duration::from_millis(c.duration_ms.unwrap_or(scale.pick(1000, 150, 20)).max(1));
        Ok(Settings {
            scale,
            threads,
            dedicated,
            dedicated_auto,
            repeat,
            duration,
            trace_len: scale.pick(1 << 20, 1 << 18, 1 << 12),
            pin: c.pin,
            plots: !c.no_plots,
            out: c.out.clone(),
            seed: c.seed,
            fibers: c.fibers,
            window: c.window,
            policy: c.policy,
            fault: c.fault,
        })
    }

    /// Where the `-ded` variants put their trustees.
    pub fn ded_placement(&self) -> crate::trust_env::Placement {
        if self.dedicated_auto {
            crate::trust_env::Placement::Auto
        } else {
            crate::trust_env::Placement::Dedicated(self.dedicated)
        }
    }

    /// One line describing the configuration, printed with every run.
    pub fn describe(&self) -> String {
        format!(
            "scale={} threads={} dedicated={} repeat={} duration={}ms fibers/thread={} window={} trace={} pin={} seed={}{}",
            self.scale.name(),
            self.threads,
            if self.dedicated_auto { "auto".to_string() } else { self.dedicated.to_string() },
            self.repeat,
            self.duration.as_millis(),
            self.fibers,
            self.window,
            self.trace_len,
            self.pin,
            self.seed,
            match self.policy {
                crate::cli::PolicyArg::Adaptive => String::new(),
                p => format!(" policy={} (trust-adaptive)", p.name()),
            }
        )
    }
}
