//! gossamer-kv as one Gossamer program over several processes (and hosts):
//! every process listens for clients, the table's shards are entrusted over
//! the threads of all processes, and a request arriving anywhere is
//! delegated to the shard that owns its key, wherever it lives.
//!
//! [`run`] starts the program with `gossamer::main`. Rank 0 then
//! 1. entrusts the shards, each on its own thread ([`super::placement`]),
//! 2. has every process adopt rank 0's start as its clock's origin (one
//!    clock for the program: see [`crate::clock`]), bind its sockets, make
//!    its pollers and entrust its agent ([`super::agent`]) — a process
//!    that cannot bind fails the program before anyone is served — and
//!    prints every address,
//! 3. starts every process's connection workers with the same placement,
//! 4. waits until its own process stops (a signal, or the agent's `Stop`),
//!    stops the others and waits for them; then the program ends.
//!
//! A signal to any other process stops that process and tells rank 0,
//! which stops the rest. A process that dies takes the program down with it
//! (Gossamer's fate sharing): every socket closes, and no client gets an
//! answer from a program that lost part of its table.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use gossamer::{JoinHandle, Trust};

use super::agent::{Agent, AgentOp};
use super::placement::Placement;
use super::process::{self, Prepared};
use super::shared::Shared;
use super::{shard_config, shard_threads};
use crate::clock;
use crate::config::Config;
use crate::store::Shard;

/// This process's settings (every process parses the same arguments).
static CONFIG: OnceLock<Config> = OnceLock::new();
/// This process, bound and not yet serving.
static PREPARED: Mutex<Option<Prepared>> = Mutex::new(None);
/// This process while it serves, for the signal thread.
static SERVING: Mutex<Option<Arc<Shared>>> = Mutex::new(None);
/// A signal arrived here.
static SIGNALLED: AtomicBool = AtomicBool::new(false);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn config() -> &'static Config {
    CONFIG.get().expect("the configuration is set before the program starts")
}

/// Runs the server as one program of `processes` processes, each with
/// `config.threads` threads; `wait_signal` blocks until SIGINT or SIGTERM
/// and is run on a thread of its own. Rank 0 returns when the program
/// ends; the other ranks never return.
pub fn run<W>(config: Config, processes: usize, wait_signal: W) -> ExitCode
where
    W: FnOnce() -> i32 + Send + 'static,
{
    clock::init();
    let threads = config.threads * processes;
    if CONFIG.set(config).is_err() {
        eprintln!("gossamer-kv: the program is already running in this process");
        return ExitCode::FAILURE;
    }
    let watcher = std::thread::Builder::new().name("gossamer-kv-signals".into()).spawn(move || {
        let sig = wait_signal();
        SIGNALLED.store(true, Ordering::SeqCst);
        match lock(&SERVING).clone() {
            Some(shared) => {
                tracing::info!("signal {sig}: stopping");
                shared.request_stop();
            }
            None => {
                eprintln!("gossamer-kv: signal {sig} while starting");
                gossamer::rack::exit_now(1);
            }
        }
    });
    if let Err(e) = watcher {
        eprintln!("gossamer-kv: cannot start the signal thread: {e}");
        return ExitCode::FAILURE;
    }
    gossamer::main(gsm_main, threads);
    ExitCode::SUCCESS
}

fn gsm_main() {
    if let Err(e) = program() {
        eprintln!("gossamer-kv: {e}");
        // Fate sharing takes the other processes down too.
        gossamer::rack::exit_now(1);
    }
}

fn joined<R>(h: JoinHandle<R>, what: &str) -> Result<R, String> {
    h.join().map_err(|e| format!("{what}: {}", e.message()))
}

/// Rank 0's program.
fn program() -> Result<(), String> {
    let config = config();
    let topo = gossamer::topology();
    let processes = topo.processes.len();
    let first: Vec<usize> = topo.processes.iter().map(|r| r.start).collect();

    // 1. The shards, process by process.
    let per_rank: Vec<Vec<usize>> = topo.processes.iter().map(|r| shard_threads(config, r.clone())).collect();
    let per_process = per_rank[0].len();
    if per_rank.iter().any(|s| s.len() != per_process) {
        return Err("the processes have different thread counts".into());
    }
    let shard_threads: Vec<usize> = per_rank.concat();
    let shard_ranks: Vec<usize> = shard_threads.iter().map(|&t| topo.rank_of(t)).collect();
    let count = shard_threads.len();
    let making: Vec<_> = shard_threads
        .iter()
        .enumerate()
        .map(|(index, &t)| gossamer::spawn_with(t, make_shard, (index, count, per_process)))
        .collect();
    let shards = making.into_iter().map(|h| joined(h, "making a shard")).collect::<Result<Vec<_>, _>>()?;

    // 2. Every process adopts rank 0's clock, binds and makes its agent.
    let origin = clock::origin_unix_ns();
    let preparing: Vec<_> =
        (0..processes).map(|r| gossamer::spawn_with(first[r], prepare_here, (r, processes, origin))).collect();
    let mut agents = Vec::with_capacity(processes);
    let mut addrs = Vec::with_capacity(processes);
    for (r, h) in preparing.into_iter().enumerate() {
        let (a, agent) = joined(h, "starting a process")?.map_err(|e| format!("process {r}: {e}"))?;
        addrs.push(a);
        agents.push(agent);
    }
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        for (r, a) in addrs.iter().enumerate() {
            for a in a {
                let _ = writeln!(out, "gossamer-kv rank {r} listening on {a}");
            }
        }
        let _ = out.flush();
    }

    // 3. Every process serves.
    let placement = Placement { shards, shard_threads, shard_ranks, agents, agent_threads: first.clone() };
    placement.check()?;
    let mut serving: Vec<_> =
        (0..processes).map(|r| gossamer::spawn_with(first[r], serve_here, (placement.clone(), first[r]))).collect();

    // 4. Until rank 0 stops; then the others.
    let rest = serving.split_off(1);
    let mut result = joined(serving.pop().expect("rank 0 serves"), "rank 0").and_then(|r| r);
    for agent in placement.agents.iter().skip(1) {
        agent.apply_with(|a: &mut Agent, (op, origin): (AgentOp, usize)| a.run(op, origin), (AgentOp::Stop, first[0]));
    }
    for (r, h) in rest.into_iter().enumerate() {
        let res = joined(h, "serving").and_then(|x| x).map_err(|e| format!("process {}: {e}", r + 1));
        result = result.and(res);
    }
    result
}

/// On a shard's thread: entrusts shard `index` of `count` to it.
fn make_shard((index, count, per_process): (usize, usize, usize)) -> Trust<Shard> {
    gossamer::local_trustee().entrust(Shard::new(shard_config(config(), index, count, per_process)))
}

/// On a process's first thread: sets the process's clock to the
/// program's `origin` (so that relative times and expiry agree across
/// processes), binds the process's sockets and entrusts its agent to this
/// thread.
fn prepare_here((rank, processes, origin): (usize, usize, i64)) -> Result<(Vec<SocketAddr>, Trust<Agent>), String> {
    clock::adopt_origin(origin);
    if config().dedicated_trustees == crate::config::DedicatedTrustees::Auto {
        // Each process's controller picks among its own threads.
        gossamer::set_dedicated_policy(gossamer::DedicatedPolicy::Auto).map_err(|e| e.to_string())?;
    }
    let prepared = process::prepare(config().clone(), rank, processes).map_err(|e| e.to_string())?;
    let agent = gossamer::local_trustee().entrust(Agent::new(prepared.shared.clone()));
    let addrs = prepared.addrs().to_vec();
    *lock(&SERVING) = Some(prepared.shared.clone());
    *lock(&PREPARED) = Some(prepared);
    Ok((addrs, agent))
}

/// On a process's first thread (`base`): serves until the process stops.
fn serve_here((placement, base): (Placement, usize)) -> Result<(), String> {
    let prepared = lock(&PREPARED).take().ok_or("this process was not prepared")?;
    let rank = prepared.shared.rank;
    let workers = process::start(prepared, &placement, base, gossamer::spawn_on);
    let mut result = Ok(());
    for w in workers {
        if let Err(e) = w.join() {
            result = Err(format!("a connection worker panicked: {}", e.message()));
        }
    }
    *lock(&SERVING) = None;
    if rank != 0 && SIGNALLED.load(Ordering::SeqCst) {
        // Stopped here by a signal: rank 0 stops the rest of the program.
        placement.agents[0]
            .apply_with(|a: &mut Agent, (op, origin): (AgentOp, usize)| a.run(op, origin), (AgentOp::Stop, base));
    }
    result
}
