//! `gossamer-kv`: start the server with memcached's flags, serve until
//! SIGINT or SIGTERM, then shut down in order.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

use gossamer_kv::{Config, Server};

fn init_logging(verbose: u8) {
    let level = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let ansi = std::io::stderr().is_terminal();
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi).init();
}

/// Blocks SIGINT and SIGTERM in this thread and every thread started
/// after, so that `wait_for_signal` receives them.
fn block_signals() -> libc::sigset_t {
    // SAFETY: plain libc signal-set manipulation on a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

fn wait_for_signal(set: &libc::sigset_t) -> i32 {
    let mut sig = 0;
    // SAFETY: `set` is a valid signal set; sigwait writes the signal number.
    unsafe { libc::sigwait(set, &mut sig) };
    sig
}

/// The processes of the program: the launcher's count, or `--processes`.
fn processes(config: &Config) -> Result<usize, String> {
    if let Some(n) = config.processes {
        if std::env::var_os("GOSSAMER_PROCESSES").is_none() {
            // Read by gossamer::main when no launcher set the rank (the
            // ranks it starts have theirs and ignore this).
            std::env::set_var("GOSSAMER_PROCESSES", n.to_string());
        }
    }
    gossamer::rack::planned_processes().map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let config = Config::parse();
    init_logging(config.verbose);
    if let Err(e) = config.validate() {
        eprintln!("gossamer-kv: {e}");
        return ExitCode::FAILURE;
    }
    let processes = match processes(&config) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("gossamer-kv: {e}");
            return ExitCode::FAILURE;
        }
    };
    let signals = block_signals();
    if processes > 1 {
        return gossamer_kv::server::program::run(config, processes, move || wait_for_signal(&signals));
    }
    let server = match Server::start(config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("gossamer-kv: {e}");
            return ExitCode::FAILURE;
        }
    };
    {
        let mut out = std::io::stdout().lock();
        for a in server.local_addrs() {
            let _ = writeln!(out, "gossamer-kv listening on {a}");
        }
        let _ = out.flush();
    }
    let sig = wait_for_signal(&signals);
    tracing::info!("signal {sig}: shutting down");
    server.shutdown();
    ExitCode::SUCCESS
}
