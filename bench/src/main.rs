//! `gossamer-bench`: Trust<T> against locks and concurrent maps.
//!
//! Subcommands: `demo` (the short side-by-side run the README shows),
//! `faa` (fetch-and-add throughput against object count),
//! `latency` (latency against offered load), `map` (concurrent map
//! throughput against table size and write ratio), `micro` (fiber switch,
//! round trip, one trustee's throughput, local shortcut, idle CPU, wake-up
//! latency), `tokio` (counters updated by tokio tasks: std and tokio
//! mutexes against `apply_async`), `compare` (the same figures at two
//! commits, interleaved) and `all`. Each prints the machine and
//! configuration, a table of medians with Trust-over-best-lock ratios, and
//! writes CSV files and PNG plots to the results folder. Each verifies its
//! final counts or map contents: exit status 2 on a mismatch, 1 on any
//! other error.

mod adaptive_env;
mod cli;
mod compare;
mod control;
mod demo;
mod error;
mod faa;
mod keys;
mod latency;
mod locks;
mod machine;
mod map;
mod micro;
mod migrate;
mod progress;
mod report;
mod settings;
mod tally;
mod tokio_faa;
mod trust_env;
mod work;

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;

use cli::{Cli, Cmd};
use error::{BenchError, Result};
use settings::Settings;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e @ BenchError::Mismatch(_)) => {
            eprintln!("gossamer-bench: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("gossamer-bench: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: &Cli) -> Result<()> {
    if let Cmd::Compare(a) = &cli.cmd {
        if a.rounds == 0 {
            return Err(BenchError::Other("--rounds must be at least 1".into()));
        }
        println!("{}", machine::header("compare"));
        return compare::run(&cli.common, a);
    }
    let mut s = Settings::resolve(&cli.common).map_err(BenchError::Other)?;
    if let Cmd::Demo = cli.cmd {
        s = demo::settings(s, &cli.common);
    }
    let header = machine::header(&s.describe());
    println!("{header}");
    std::fs::create_dir_all(&s.out)?;
    let started = Instant::now();
    match &cli.cmd {
        Cmd::Demo => demo::run(&s)?,
        Cmd::Faa(a) => faa::run(&s, a)?,
        Cmd::Latency(a) => latency::run(&s, a)?,
        Cmd::Map(a) => map::run(&s, a)?,
        Cmd::Migrate(a) => migrate::run(&s, a)?,
        Cmd::Micro(a) => micro::run(&s, a)?,
        Cmd::Compare(_) => unreachable!("handled above"),
        Cmd::Tokio(a) => tokio_faa::run(&s, a)?,
        Cmd::All => {
            faa::run(&s, &Default::default())?;
            latency::run(&s, &Default::default())?;
            map::run(&s, &Default::default())?;
            micro::run(&s, &Default::default())?;
            tokio_faa::run(&s, &Default::default())?;
        }
    }
    let name = match &cli.cmd {
        Cmd::Demo => "demo",
        Cmd::Faa(_) => "faa",
        Cmd::Latency(_) => "latency",
        Cmd::Map(_) => "map",
        Cmd::Migrate(_) => "migrate",
        Cmd::Micro(_) => "micro",
        Cmd::Compare(_) => "compare",
        Cmd::Tokio(_) => "tokio",
        Cmd::All => "all",
    };
    let elapsed = started.elapsed();
    std::fs::write(
        s.out.join(format!("{name}_run.txt")),
        format!(
            "{header}elapsed: {:.1} s\nload average at the end: {}\nverification: passed\n",
            elapsed.as_secs_f64(),
            machine::load_average()
        ),
    )?;
    println!("all results verified; {:.1} s; results in {}", elapsed.as_secs_f64(), s.out.display());
    Ok(())
}
