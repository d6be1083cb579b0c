//! The `gossamer` command. See `cli/README.md`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use gossamer_cli::{daemon, hosts, proto, run, secret, top, CliError};

/// Run Gossamer programs over several hosts.
#[derive(Parser, Debug)]
#[command(name = "gossamer", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Serve one host: start the ranks that authenticated launchers ask for.
    Daemon(DaemonArgs),
    /// Start a program over several hosts through their daemons.
    Run(RunArgs),
    /// Show each host's cores, memory, UCX transports and devices.
    Hosts(HostsArgs),
    /// Show the hottest trusts and trustees of a running program (started
    /// with GOSSAMER_TOP=1), refreshed every second.
    Top(TopArgs),
}

#[derive(Args, Debug)]
struct TopArgs {
    /// The program's process id (its socket is found from it).
    #[arg(long, value_name = "PID", required_unless_present = "socket")]
    pid: Option<u32>,
    /// The program's socket, instead of --pid.
    #[arg(long, value_name = "PATH", conflicts_with = "pid")]
    socket: Option<PathBuf>,
    /// Seconds between refreshes.
    #[arg(long, value_name = "S", default_value_t = 1.0)]
    interval: f64,
    /// Print one table (after one interval) and exit.
    #[arg(long, conflicts_with = "iterations")]
    once: bool,
    /// Print this many tables and exit.
    #[arg(long, value_name = "N")]
    iterations: Option<u64>,
    /// Trusts shown.
    #[arg(long, value_name = "N", default_value_t = 20)]
    limit: usize,
    /// Also print the program's stuck dump (waiting fibers, backlogs).
    #[arg(long)]
    stuck: bool,
    /// Leave profiling on in the program when exiting.
    #[arg(long)]
    keep: bool,
    /// Set the program's number of dedicated trustees (a number, or `auto`
    /// for its controller), print its settings and exit.
    #[arg(long, value_name = "N|auto")]
    set_dedicated: Option<String>,
    /// Set trustee parameters (tight_polls, idle_spin_us, sleep_poll_us,
    /// fiber_yield), e.g. `--set idle_spin_us=50`; repeatable. Prints the
    /// program's settings and exits.
    #[arg(long, value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// The trustee that --set changes [default: all].
    #[arg(long, value_name = "N", requires = "set")]
    trustee: Option<usize>,
    /// Set the policy of an adaptive trust, by the id the table shows:
    /// `delegate`, `adaptive` or `lock`, e.g. `--set-policy 0x7f3a10=lock`;
    /// repeatable. Prints the program's settings and adaptive trusts and
    /// exits.
    #[arg(long, value_name = "TRUST_ID=POLICY")]
    set_policy: Vec<String>,
    /// Pause, resume or retune a property that follows its requests, by the
    /// id the FOLLOW table shows: `on`, `off` and KEY=NUMBER (window,
    /// window_ms, share_percent, return_percent, rest_windows), comma
    /// separated, e.g. `--set-follow 0x7f3a10=off` or
    /// `--set-follow 0x7f3a10=on,window=256`; repeatable. Prints the
    /// program's settings and properties that follow, and exits.
    #[arg(long, value_name = "TRUST_ID=CHANGES")]
    set_follow: Vec<String>,
}

#[derive(Args, Debug)]
struct DaemonArgs {
    /// Address and port to listen on, e.g. 0.0.0.0:7117.
    #[arg(long, value_name = "ADDR:PORT", required_unless_present = "status")]
    listen: Option<String>,
    /// File with the shared secret (mode 0600: refused if group or others may read or write it).
    #[arg(long, value_name = "PATH")]
    secret_file: PathBuf,
    /// Log level: error, warn, info, debug or trace.
    #[arg(long, value_name = "L", default_value = "info")]
    log_level: tracing::Level,
    /// Instead of serving: connect to the daemon at ADDR and print what it runs.
    #[arg(long, value_name = "ADDR", conflicts_with = "listen")]
    status: Option<String>,
    /// A binary the daemon may start, or a directory of them (repeatable).
    /// Without any, the daemon starts nothing.
    #[arg(long, value_name = "PATH")]
    allow: Vec<PathBuf>,
    /// Serve even as root (the ranks then run as root).
    #[arg(long)]
    allow_root: bool,
    /// Let launchers set the dynamic loader's variables (LD_*) for ranks.
    #[arg(long)]
    allow_loader_env: bool,
}

#[derive(Args, Debug, Clone)]
struct HostArgs {
    /// Hosts, comma-separated (`name[:port]`); with -n, each gets an equal share of the ranks.
    #[arg(long, value_name = "a,b,c", conflicts_with = "hostfile")]
    hosts: Option<String>,
    /// Host file: one `host [slots=N]` a line, `#` comments.
    #[arg(long, value_name = "F")]
    hostfile: Option<PathBuf>,
    /// The daemons' port, for hosts given without one.
    #[arg(long, value_name = "P", default_value_t = proto::DEFAULT_PORT)]
    daemon_port: u16,
    /// File with the shared secret (mode 0600).
    #[arg(long, value_name = "PATH")]
    secret_file: PathBuf,
}

#[derive(Args, Debug)]
struct RunArgs {
    #[command(flatten)]
    hosts: HostArgs,
    /// Number of ranks (processes), placed over the hosts in order, up to each host's slots.
    #[arg(short = 'n', long = "np", value_name = "N")]
    n: usize,
    /// The program's thread count, passed to every rank as GOSSAMER_THREADS.
    #[arg(long, value_name = "T")]
    threads: Option<usize>,
    /// Pass an environment variable to every rank: `NAME=VALUE`, or `NAME`
    /// for its value here (like `mpirun -x`); repeatable.
    #[arg(short = 'x', long = "env", value_name = "NAME[=VALUE]")]
    env: Vec<String>,
    /// Do not prefix output lines with `[rank]`.
    #[arg(long)]
    no_tag_output: bool,
    /// Log level of the launcher's own messages.
    #[arg(long, value_name = "L", default_value = "warn")]
    log_level: tracing::Level,
    /// The program (the same path on every host) and its arguments.
    #[arg(last = true, required = true, value_name = "PROGRAM ARGS")]
    program: Vec<String>,
}

#[derive(Args, Debug)]
struct HostsArgs {
    #[command(flatten)]
    hosts: HostArgs,
}

fn logs(level: tracing::Level) {
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

fn main() {
    let cli = Cli::parse();
    let code = match go(cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("gossamer: {e}");
            1
        }
    };
    std::process::exit(code);
}

fn go(cli: Cli) -> Result<i32, CliError> {
    match cli.command {
        Cmd::Daemon(a) => {
            logs(a.log_level);
            let secret = secret::load(&a.secret_file)?;
            if let Some(addr) = a.status {
                print!("{}", daemon::status(&addr, &secret)?);
                return Ok(0);
            }
            daemon::serve(daemon::Options {
                listen: a.listen.expect("clap requires --listen"),
                secret,
                allow: a.allow,
                allow_root: a.allow_root,
                allow_loader_env: a.allow_loader_env,
            })?;
            Ok(0)
        }
        Cmd::Run(a) => {
            logs(a.log_level);
            if a.n == 0 {
                return Err(CliError::Usage("-n must be at least 1".into()));
            }
            let secret = secret::load(&a.hosts.secret_file)?;
            let hosts = run::host_list(a.hosts.hosts.as_deref(), a.hosts.hostfile.as_deref(), Some(a.n))?;
            let mut env = vec![];
            for e in &a.env {
                match e.split_once('=') {
                    Some((k, v)) => env.push((k.to_string(), v.to_string())),
                    None => match std::env::var(e) {
                        Ok(v) => env.push((e.clone(), v)),
                        Err(_) => return Err(CliError::Usage(format!("-x {e}: {e} is not set here"))),
                    },
                }
            }
            let mut program = a.program.into_iter();
            let opts = run::RunOpts {
                hosts,
                n: a.n,
                threads: a.threads,
                daemon_port: a.hosts.daemon_port,
                secret,
                tag_output: !a.no_tag_output,
                env,
                program: program.next().expect("clap requires a program"),
                args: program.collect(),
            };
            run::run(opts)
        }
        Cmd::Top(a) => {
            logs(tracing::Level::WARN);
            if !(a.interval > 0.0 && a.interval < 3600.0) {
                return Err(CliError::Usage("--interval must be between 0 and 3600 seconds".into()));
            }
            let socket = match (a.socket, a.pid) {
                (Some(s), _) => s,
                (None, Some(pid)) => top::socket_path(pid),
                (None, None) => unreachable!("clap requires --pid or --socket"),
            };
            let opts = top::TopOpts {
                socket,
                interval: std::time::Duration::from_secs_f64(a.interval),
                iterations: if a.once { Some(1) } else { a.iterations },
                limit: a.limit,
                stuck: a.stuck,
                keep: a.keep,
                set: {
                    let mut set = Vec::new();
                    if let Some(d) = &a.set_dedicated {
                        set.push(top::dedicated_command(d)?);
                    }
                    if !a.set.is_empty() {
                        set.push(top::set_command(&a.set, a.trustee)?);
                    }
                    for p in &a.set_policy {
                        set.push(top::policy_command(p)?);
                    }
                    for f in &a.set_follow {
                        set.push(gossamer_cli::top_follow::follow_command(f)?);
                    }
                    set
                },
            };
            top::run(&opts, &mut std::io::stdout().lock())
        }
        Cmd::Hosts(a) => {
            logs(tracing::Level::WARN);
            let secret = secret::load(&a.hosts.secret_file)?;
            let list = run::host_list(a.hosts.hosts.as_deref(), a.hosts.hostfile.as_deref(), None)?;
            let (table, all) = hosts::table(&list, a.hosts.daemon_port, &secret);
            print!("{table}");
            Ok(if all { 0 } else { 1 })
        }
    }
}
