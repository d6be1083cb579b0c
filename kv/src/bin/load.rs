//! `gossamer-kv-load`: load a memcached-compatible server, or compare
//! gossamer-kv with stock memcached side by side. Exit status: 0 verified,
//! 2 a run failed verification (an error reply, or a get that missed a
//! stored key), 1 any other error.

use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use gossamer_kv::load::{self, report, CompareArgs, Workload, YcsbArgs};

/// Load generator for memcached-compatible servers.
#[derive(Parser)]
#[command(name = "gossamer-kv-load", version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Load one running server and report throughput and latency.
    Run(RunArgs),
    /// Start memcached and gossamer-kv, load both side by side, report medians.
    Compare(CompareArgs),
    /// YCSB core workload C or D: load records, then read (and insert).
    Ycsb(YcsbArgs),
    /// Medians (a Markdown table) and a plot of the YCSB runs in a CSV.
    YcsbReport(ReportArgs),
}

#[derive(Args)]
struct ReportArgs {
    /// The CSV that `ycsb --csv` appended to.
    #[arg(long)]
    csv: PathBuf,
    /// Throughput ratios are against this label.
    #[arg(long, default_value = "memcached")]
    baseline: String,
    /// Draw throughput against server processes into this PNG.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// The plot's title.
    #[arg(long, default_value = "YCSB throughput against server processes")]
    title: String,
}

fn ycsb_report(a: &ReportArgs) -> std::io::Result<bool> {
    let points = load::sweep::medians(&a.csv).map_err(std::io::Error::other)?;
    print!("{}", load::sweep::table(&points, &a.baseline));
    if let Some(out) = &a.plot {
        load::sweep::plot(&points, out, &a.title).map_err(std::io::Error::other)?;
        println!("plot: {}", out.display());
    }
    Ok(true)
}

#[derive(Args)]
struct RunArgs {
    /// Server address.
    #[arg(long, default_value = "127.0.0.1:11211")]
    server: String,
    /// The load.
    #[command(flatten)]
    workload: Workload,
    /// Do not store every key before the run.
    #[arg(long)]
    no_prefill: bool,
    /// Append the result to this CSV file.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Label for the CSV row.
    #[arg(long, default_value = "run")]
    label: String,
}

fn run(a: &RunArgs) -> std::io::Result<bool> {
    let addr = a
        .server
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other(format!("{} does not resolve", a.server)))?;
    if !a.no_prefill {
        load::prefill(addr, a.workload.keys, a.workload.value_size)?;
    }
    let r = load::run(addr, &a.workload)?;
    println!("{}", report::machine());
    println!("{}", report::summary(&r));
    let row = report::csv_row(&a.label, &a.server, 0, &a.workload, &r);
    match &a.csv {
        Some(path) => report::append_csv(path, &[row])?,
        None => println!("{}\n{row}", report::CSV_HEADER),
    }
    // Without a prefill, misses are expected; errors never are.
    let problem =
        if a.no_prefill { (r.errors > 0).then(|| format!("{} error replies", r.errors)) } else { report::verify(&r) };
    if let Some(p) = &problem {
        eprintln!("verification failed: {p}");
    }
    Ok(problem.is_none())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let res = match &cli.cmd {
        Cmd::Run(a) => run(a),
        Cmd::Compare(a) => load::compare(a),
        Cmd::Ycsb(a) => load::ycsb::main(a),
        Cmd::YcsbReport(a) => ycsb_report(a),
    };
    match res {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(2),
        Err(e) => {
            eprintln!("gossamer-kv-load: {e}");
            ExitCode::FAILURE
        }
    }
}
