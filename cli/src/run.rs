//! `gossamer run`: starts one program over several hosts through their daemons.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::client::{self, Conn, Sender};
use crate::output::Lines;
use crate::proto::{self, ClientMsg, DaemonMsg, ExitKind, RankSpec, Stream};
use crate::CliError;

/// A host and how many ranks it takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostSlots {
    /// The host as given (`name[:port]`).
    pub host: String,
    /// Its slots.
    pub slots: usize,
}

/// Parses a host file: lines `host [slots=N]`, `#` comments, blank lines.
pub fn parse_hostfile(text: &str) -> Result<Vec<HostSlots>, CliError> {
    let mut v = vec![];
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut f = line.split_whitespace();
        let host = f.next().unwrap_or_default().to_string();
        let mut slots = 1;
        for kv in f {
            match kv.split_once('=') {
                Some(("slots", n)) => {
                    slots = n
                        .parse()
                        .ok()
                        .filter(|&n: &usize| n > 0)
                        .ok_or_else(|| CliError::Usage(format!("host file line {}: bad slots {n:?}", i + 1)))?
                }
                _ => return Err(CliError::Usage(format!("host file line {}: unknown field {kv:?}", i + 1))),
            }
        }
        v.push(HostSlots { host, slots });
    }
    if v.is_empty() {
        return Err(CliError::Usage("the host file names no host".into()));
    }
    Ok(v)
}

/// The hosts of `--hosts a,b,c` (each gets an equal share of `n`) or of a host file.
pub fn host_list(hosts: Option<&str>, hostfile: Option<&Path>, n: Option<usize>) -> Result<Vec<HostSlots>, CliError> {
    match (hosts, hostfile) {
        (Some(h), None) => {
            let names: Vec<String> = h.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
            if names.is_empty() {
                return Err(CliError::Usage("--hosts names no host".into()));
            }
            let each = n.map_or(1, |n| n.div_ceil(names.len()).max(1));
            Ok(names.into_iter().map(|host| HostSlots { host, slots: each }).collect())
        }
        (None, Some(f)) => {
            let text = std::fs::read_to_string(f).map_err(CliError::io(format!("host file {}", f.display())))?;
            parse_hostfile(&text)
        }
        (None, None) => Ok(vec![HostSlots { host: "127.0.0.1".into(), slots: n.unwrap_or(1) }]),
        (Some(_), Some(_)) => Err(CliError::Usage("give --hosts or --hostfile, not both".into())),
    }
}

/// The host index of every rank: hosts filled in order, each up to its slots.
pub fn place(hosts: &[HostSlots], n: usize) -> Result<Vec<usize>, CliError> {
    let total: usize = hosts.iter().map(|h| h.slots).sum();
    if n > total {
        return Err(CliError::Usage(format!("{n} ranks asked for, but the hosts have {total} slots")));
    }
    Ok(hosts.iter().enumerate().flat_map(|(i, h)| std::iter::repeat_n(i, h.slots)).take(n).collect())
}

/// Resolves the program as the shell would: a path with `/` against the
/// current directory, a bare name through `PATH`.
pub fn resolve_program(program: &str) -> Result<PathBuf, CliError> {
    let found = if program.contains('/') {
        Some(PathBuf::from(program))
    } else {
        std::env::var_os("PATH").iter().flat_map(std::env::split_paths).map(|d| d.join(program)).find(|p| p.is_file())
    };
    let p = found.ok_or_else(|| CliError::Usage(format!("{program}: not found in PATH")))?;
    std::fs::canonicalize(&p).map_err(CliError::io(program))
}

/// What `gossamer run` was asked to do.
#[derive(Clone, Debug)]
pub struct RunOpts {
    /// Hosts and slots.
    pub hosts: Vec<HostSlots>,
    /// Ranks.
    pub n: usize,
    /// `GOSSAMER_THREADS` for the ranks.
    pub threads: Option<usize>,
    /// The daemons' port (unless a host names its own).
    pub daemon_port: u16,
    /// The shared secret.
    pub secret: Vec<u8>,
    /// Extra variables for every rank.
    pub env: Vec<(String, String)>,
    /// Whether to prefix lines with `[rank]`.
    pub tag_output: bool,
    /// The program and its arguments.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
}

static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::SeqCst);
}

fn install_signal_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores into an atomic.
        unsafe {
            libc::signal(sig, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
        }
    }
}

enum Ev {
    Msg(usize, DaemonMsg),
    Lost(usize, String),
}

fn say(msg: &str) {
    let _ = writeln!(std::io::stderr(), "gossamer run: {msg}");
}

/// Runs the program; returns the exit status for the command.
pub fn run(opts: RunOpts) -> Result<i32, CliError> {
    let t0 = Instant::now();
    let binary = resolve_program(&opts.program)?;
    let binary_s =
        binary.to_str().ok_or_else(|| CliError::Usage(format!("{}: not UTF-8", binary.display())))?.to_string();
    let sha256 = proto::sha256_file(&binary).map_err(CliError::io(format!("reading {binary_s}")))?;
    let placement = place(&opts.hosts, opts.n)?;
    let used: Vec<usize> = {
        let mut u: Vec<usize> = placement.clone();
        u.dedup();
        u
    };
    install_signal_handlers();
    // Connect to and authenticate with every daemon, in parallel.
    let conns: Vec<Result<Conn, CliError>> = std::thread::scope(|s| {
        let hs: Vec<_> = used
            .iter()
            .map(|&h| {
                let (host, port, secret) = (&opts.hosts[h].host, opts.daemon_port, &opts.secret);
                s.spawn(move || client::connect(host, port, secret))
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("connect thread")).collect()
    });
    let conns: Vec<Conn> = conns.into_iter().collect::<Result<_, _>>()?;
    tracing::debug!(took = ?t0.elapsed(), "authenticated with {} daemon(s)", conns.len());
    let names: Vec<String> = conns.iter().map(|c| c.host.clone()).collect();
    let daemon_ips: Vec<std::net::IpAddr> = conns.iter().map(|c| c.addr.ip()).collect();
    // From here on, every write goes through these (heartbeats run meanwhile).
    let (writers, mut readers): (Vec<Arc<Mutex<Sender>>>, Vec<client::Receiver>) =
        conns.into_iter().map(|c| (Arc::new(Mutex::new(c.tx)), c.rx)).unzip();
    let send_to = |i: usize, m: &ClientMsg| -> bool {
        let mut s = writers[i].lock().unwrap_or_else(|p| p.into_inner());
        s.send(m).is_ok()
    };
    let stop_beats = Arc::new(AtomicBool::new(false));
    {
        let (writers, stop) = (writers.clone(), stop_beats.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                for w in &writers {
                    let mut s = w.lock().unwrap_or_else(|p| p.into_inner());
                    let _ = s.send(&ClientMsg::Heartbeat);
                }
                std::thread::sleep(Duration::from_millis(proto::HEARTBEAT_MS));
            }
        });
    }
    let refused = |i: usize, m: DaemonMsg| match m {
        DaemonMsg::Refused { host, reason } => {
            CliError::Host { host: names[i].clone(), msg: format!("the daemon on {host} refused: {reason}") }
        }
        other => CliError::Host { host: names[i].clone(), msg: format!("unexpected answer {other:?}") },
    };
    let answer = |i: usize, r: &mut client::Receiver, t: Duration| {
        r.answer(t)
            .map_err(|e| CliError::Host { host: names[i].clone(), msg: format!("no answer from the daemon: {e}") })
    };
    // Every host has the binary, with the hash we have; nothing starts otherwise.
    let check = ClientMsg::Check { binary: binary_s.clone(), sha256 };
    for i in 0..names.len() {
        send_to(i, &check);
    }
    send_to(0, &ClientMsg::FreePort);
    let mut rendezvous = String::new();
    for (i, r) in readers.iter_mut().enumerate() {
        match answer(i, r, Duration::from_secs(60))? {
            DaemonMsg::Checked => {}
            other => return Err(refused(i, other)),
        }
        if i == 0 {
            // The rendezvous: a free port on rank 0's host, at the address we reached it by.
            match answer(i, r, Duration::from_secs(10))? {
                DaemonMsg::Port { port, addr } => {
                    let ip: std::net::IpAddr = addr.parse().unwrap_or(daemon_ips[i]);
                    rendezvous = std::net::SocketAddr::new(ip, port).to_string();
                }
                other => return Err(refused(i, other)),
            }
        }
    }
    tracing::debug!(%rendezvous, took = ?t0.elapsed(), "binaries checked");
    let (tx, rx) = mpsc::channel::<Ev>();
    for (i, mut r) in readers.into_iter().enumerate() {
        let tx = tx.clone();
        std::thread::spawn(move || loop {
            match r.recv() {
                Ok(m) => {
                    if tx.send(Ev::Msg(i, m)).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    let _ = tx.send(Ev::Lost(i, e.to_string()));
                    return;
                }
            }
        });
    }
    drop(tx);
    // Start the ranks. They prove this program's own secret to each other at
    // the rendezvous (a fresh one per program, sent only inside the sessions).
    let program_secret = proto::program_secret();
    let host_of_rank: Vec<usize> = placement.iter().map(|h| used.iter().position(|u| u == h).unwrap()).collect();
    for (i, name) in names.iter().enumerate() {
        let ranks: Vec<RankSpec> = (0..opts.n)
            .filter(|&r| host_of_rank[r] == i)
            .map(|r| {
                let mut env = opts.env.clone();
                env.extend([
                    ("GOSSAMER_RANK".to_string(), r.to_string()),
                    ("GOSSAMER_SIZE".to_string(), opts.n.to_string()),
                    ("GOSSAMER_RENDEZVOUS".to_string(), rendezvous.clone()),
                    ("GOSSAMER_HOST".to_string(), client::split_host(name, opts.daemon_port).0),
                    ("GOSSAMER_SECRET".to_string(), program_secret.clone()),
                ]);
                if let Some(t) = opts.threads {
                    env.push(("GOSSAMER_THREADS".to_string(), t.to_string()));
                }
                RankSpec { rank: r as u32, env }
            })
            .collect();
        send_to(i, &ClientMsg::Start { binary: binary_s.clone(), sha256, args: opts.args.clone(), ranks });
    }
    // Relay until every rank has ended.
    let mut exits: Vec<Option<ExitKind>> = vec![None; opts.n];
    let mut started = vec![false; names.len()];
    let mut lost = vec![false; names.len()];
    let mut last_seen = vec![Instant::now(); names.len()];
    let mut lines = Lines::new(opts.tag_output);
    let mut failure: Option<String> = None;
    let mut interrupted: Option<i32> = None;
    let mut kill_at: Option<Instant> = None;
    let mut killed_at: Option<Instant> = None;
    let mut first_line = vec![false; opts.n];
    let kill_all = |lost: &[bool]| {
        for (i, _) in lost.iter().enumerate().filter(|(_, l)| !**l) {
            send_to(i, &ClientMsg::Kill);
        }
    };
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    loop {
        let running = (0..opts.n).any(|r| exits[r].is_none() && !lost[host_of_rank[r]]);
        if !running {
            break;
        }
        if let Some(k) = killed_at {
            if k.elapsed() > Duration::from_secs(3) {
                say("some ranks did not report their end after being killed; giving up on them");
                break;
            }
        }
        let sig = SIGNAL.swap(0, Ordering::SeqCst);
        if sig != 0 {
            if interrupted.is_some() || killed_at.is_some() {
                kill_all(&lost);
                killed_at.get_or_insert_with(Instant::now);
            } else {
                say(&format!("{} received: forwarding it to every rank", proto::signal_name(sig)));
                interrupted = Some(sig);
                for (i, _) in lost.iter().enumerate().filter(|(_, l)| !**l) {
                    send_to(i, &ClientMsg::Signal(sig));
                }
                kill_at.get_or_insert(Instant::now() + Duration::from_millis(1500));
            }
        }
        if let Some(k) = kill_at {
            if Instant::now() >= k && killed_at.is_none() {
                kill_all(&lost);
                killed_at = Some(Instant::now());
            }
        }
        for i in 0..names.len() {
            if !lost[i] && last_seen[i].elapsed() > Duration::from_millis(proto::SILENCE_MS) {
                lost[i] = true;
                let m = format!("lost the daemon on host {} (no heartbeat for {} ms)", names[i], proto::SILENCE_MS);
                say(&format!("{m}; stopping every rank"));
                failure.get_or_insert(m);
                kill_all(&lost);
                killed_at.get_or_insert_with(Instant::now);
            }
        }
        let ev = match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(ev) => ev,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        match ev {
            Ev::Lost(i, e) => {
                if !lost[i] {
                    lost[i] = true;
                    let on: Vec<String> = (0..opts.n)
                        .filter(|&r| host_of_rank[r] == i && exits[r].is_none())
                        .map(|r| r.to_string())
                        .collect();
                    if !on.is_empty() {
                        let m = format!(
                            "lost the daemon on host {} ({e}) with rank(s) {} still running",
                            names[i],
                            on.join(",")
                        );
                        say(&format!("{m}; stopping every rank"));
                        failure.get_or_insert(m);
                        kill_all(&lost);
                        killed_at.get_or_insert_with(Instant::now);
                    }
                }
            }
            Ev::Msg(i, m) => {
                last_seen[i] = Instant::now();
                match m {
                    DaemonMsg::Heartbeat => {}
                    DaemonMsg::Started { pids } => {
                        started[i] = true;
                        tracing::debug!(host = %names[i], ?pids, took = ?t0.elapsed(), "ranks started");
                    }
                    DaemonMsg::Refused { host, reason } => {
                        let m = format!("the daemon on host {} ({host}) refused to start ranks: {reason}", names[i]);
                        say(&m);
                        failure.get_or_insert(m);
                        lost[i] = true;
                        kill_all(&lost);
                        killed_at.get_or_insert_with(Instant::now);
                    }
                    DaemonMsg::Output { rank, stream, bytes } => {
                        if let Some(f) = first_line.get_mut(rank as usize) {
                            if !*f {
                                *f = true;
                                tracing::debug!(rank, took = ?t0.elapsed(), "first output");
                            }
                        }
                        let _ = match stream {
                            Stream::Stdout => lines.push(rank, stream, &bytes, &mut stdout.lock()),
                            Stream::Stderr => lines.push(rank, stream, &bytes, &mut stderr.lock()),
                        };
                    }
                    DaemonMsg::Exited { rank, how } => {
                        let _ = lines.finish(rank, Stream::Stdout, &mut stdout.lock());
                        let _ = lines.finish(rank, Stream::Stderr, &mut stderr.lock());
                        let r = rank as usize;
                        if r < opts.n {
                            exits[r] = Some(how);
                        }
                        if !how.success() && killed_at.is_none() && interrupted.is_none() {
                            let m = format!("rank {rank} on host {} {how}", names[i]);
                            if failure.is_none() {
                                say(&format!("{m}; stopping the program"));
                                failure = Some(m);
                                // The program stops itself (fate sharing); kill what is left soon.
                                kill_at.get_or_insert(Instant::now() + Duration::from_millis(1000));
                            } else {
                                say(&m);
                            }
                        } else if r == 0 && how.success() {
                            // The program is done; the other ranks follow on their own.
                            kill_at.get_or_insert(Instant::now() + Duration::from_secs(2));
                        }
                    }
                    other => tracing::debug!("unexpected message from {}: {other:?}", names[i]),
                }
            }
        }
    }
    stop_beats.store(true, Ordering::Relaxed);
    for (rank, stream) in lines.unfinished() {
        let _ = match stream {
            Stream::Stdout => lines.finish(rank, stream, &mut stdout.lock()),
            Stream::Stderr => lines.finish(rank, stream, &mut stderr.lock()),
        };
    }
    for w in &writers {
        w.lock().unwrap_or_else(|p| p.into_inner()).shutdown();
    }
    let _ = std::io::stdout().flush();
    let rank0 = exits[0];
    if let Some(f) = failure {
        say(&format!("the program failed: {f}"));
        return Ok(match rank0 {
            Some(k) if !k.success() => k.shell_status(),
            _ => 1,
        });
    }
    if let Some(sig) = interrupted {
        say(&format!("stopped by {}", proto::signal_name(sig)));
        return Ok(match rank0 {
            Some(k) if !k.success() => k.shell_status(),
            _ => 128 + sig,
        });
    }
    Ok(match rank0 {
        Some(k) => k.shell_status(),
        None => {
            say("rank 0 did not report its end");
            1
        }
    })
}
