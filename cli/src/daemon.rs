//! `gossamer daemon`: one per host. It authenticates launchers, starts the
//! ranks they ask for (only binaries already on this host, with the
//! expected hash), relays their output, reports their exits, and kills them
//! when the launcher is lost.

use std::collections::BTreeMap;
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::{debug, info, warn};

use gossamer_session::{Opener, Sealer};

use crate::proto::{self, ClientMsg, DaemonMsg, ExitKind, HostInfo, RankSpec, RunningRank, Stream};
use crate::CliError;

/// What every connection can see: the ranks running now, by pid.
#[derive(Default)]
struct Registry {
    running: Mutex<BTreeMap<u32, (RunningRank, Instant)>>,
}

/// Runs the daemon on `listen` until killed.
pub fn serve(listen: &str, secret: Vec<u8>) -> Result<(), CliError> {
    let listener = TcpListener::bind(listen).map_err(CliError::io(format!("cannot listen on {listen}")))?;
    let local = listener.local_addr().map_err(CliError::io("listener address"))?;
    let host = crate::host_name();
    info!(%local, %host, version = env!("CARGO_PKG_VERSION"), "gossamer daemon listening");
    let secret: Arc<[u8]> = secret.into();
    let registry = Arc::new(Registry::default());
    for conn in listener.incoming() {
        let stream = match conn {
            Ok(s) => s,
            Err(e) => {
                warn!("accept failed: {e}");
                continue;
            }
        };
        let (secret, registry, host) = (secret.clone(), registry.clone(), host.clone());
        std::thread::spawn(move || {
            let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".into());
            if let Err(e) = handle(stream, &peer, &secret, &registry, &host) {
                debug!(%peer, "connection ended: {e}");
            }
        });
    }
    Ok(())
}

/// The handshake, daemon side: the session once the peer proved the secret
/// and said hello.
fn authenticate(s: &mut TcpStream, secret: &[u8], host: &str) -> Result<(Sealer, Opener), String> {
    let deadline = Instant::now() + proto::HANDSHAKE;
    let (session, first) =
        gossamer_session::accept(s, &proto::psk(secret), proto::PROLOGUE, deadline, proto::FIRST_MAX)
            .map_err(|e| e.to_string())?;
    let (mut sealer, opener) = session.split();
    match proto::decode::<ClientMsg>(&first).map_err(|e| e.to_string())? {
        ClientMsg::Hello { protocol } if protocol == proto::PROTOCOL => {}
        ClientMsg::Hello { protocol } => {
            let reason = format!("protocol {protocol} is not {}", proto::PROTOCOL);
            let _ = proto::send(s, &mut sealer, &DaemonMsg::Refused { host: host.into(), reason: reason.clone() });
            return Err(reason);
        }
        _ => return Err("did not start with Hello".into()),
    }
    proto::send(s, &mut sealer, &DaemonMsg::Welcome { host: host.into(), version: env!("CARGO_PKG_VERSION").into() })
        .map_err(|e| e.to_string())?;
    Ok((sealer, opener))
}

enum Ev {
    Msg(ClientMsg),
    Lost(String),
    Exited(u32),
}

/// One rank this connection started.
struct Child {
    rank: u32,
    pid: u32,
    alive: bool,
}

type Writer = Arc<Mutex<(TcpStream, Sealer)>>;

fn send(w: &Writer, msg: &DaemonMsg) -> bool {
    let mut g = w.lock().unwrap_or_else(|p| p.into_inner());
    let (s, sealer) = &mut *g;
    proto::send(s, sealer, msg).is_ok()
}

fn handle(
    mut stream: TcpStream,
    peer: &str,
    secret: &[u8],
    registry: &Arc<Registry>,
    host: &str,
) -> Result<(), String> {
    let _ = stream.set_nodelay(true);
    let (sealer, mut opener) = match authenticate(&mut stream, secret, host) {
        Ok(s) => s,
        Err(e) => {
            warn!(%peer, "authentication failed: {e}; connection closed, nothing started");
            return Err(e);
        }
    };
    info!(%peer, "launcher authenticated");
    let writer: Writer = Arc::new(Mutex::new((stream.try_clone().map_err(|e| e.to_string())?, sealer)));
    let local = stream.local_addr().map(|a| a.ip().to_string()).unwrap_or_default();
    let (tx, rx) = mpsc::channel::<Ev>();
    // The reader: frames from the launcher.
    {
        let tx = tx.clone();
        let mut r = stream;
        std::thread::spawn(move || loop {
            match proto::recv::<ClientMsg>(&mut r, &mut opener, None) {
                Ok(m) => {
                    if tx.send(Ev::Msg(m)).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    let _ = tx.send(Ev::Lost(e.to_string()));
                    return;
                }
            }
        });
    }
    // Heartbeats to the launcher.
    let stop = Arc::new(AtomicBool::new(false));
    {
        let (w, stop) = (writer.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if !send(&w, &DaemonMsg::Heartbeat) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(proto::HEARTBEAT_MS));
            }
        });
    }
    let mut children: Vec<Child> = vec![];
    let mut last_seen = Instant::now();
    let silence = Duration::from_millis(proto::SILENCE_MS);
    let why = loop {
        let ev = match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(ev) => ev,
            Err(RecvTimeoutError::Timeout) => {
                if last_seen.elapsed() > silence {
                    break format!("no heartbeat from the launcher for {} ms", proto::SILENCE_MS);
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break "internal channel closed".into(),
        };
        match ev {
            Ev::Lost(e) => break format!("launcher connection lost ({e})"),
            Ev::Exited(rank) => {
                for c in children.iter_mut().filter(|c| c.rank == rank) {
                    c.alive = false;
                }
            }
            Ev::Msg(m) => {
                last_seen = Instant::now();
                match m {
                    ClientMsg::Heartbeat => {}
                    ClientMsg::Hello { .. } => {
                        send(
                            &writer,
                            &DaemonMsg::Refused { host: host.into(), reason: "already authenticated".into() },
                        );
                    }
                    ClientMsg::FreePort => match TcpListener::bind(("0.0.0.0", 0)).and_then(|l| l.local_addr()) {
                        Ok(a) => {
                            send(&writer, &DaemonMsg::Port { port: a.port(), addr: local.clone() });
                        }
                        Err(e) => {
                            send(
                                &writer,
                                &DaemonMsg::Refused { host: host.into(), reason: format!("no free port: {e}") },
                            );
                        }
                    },
                    ClientMsg::Check { binary, sha256 } => {
                        let answer = match check_binary(&binary, &sha256) {
                            Ok(()) => DaemonMsg::Checked,
                            Err(reason) => DaemonMsg::Refused { host: host.into(), reason },
                        };
                        send(&writer, &answer);
                    }
                    ClientMsg::Start { binary, sha256, args, ranks } => {
                        let answer = if !children.is_empty() {
                            DaemonMsg::Refused {
                                host: host.into(),
                                reason: "this connection already started ranks".into(),
                            }
                        } else {
                            match check_binary(&binary, &sha256).and_then(|()| {
                                start(&binary, &args, &ranks, &writer, &tx, registry, peer, &mut children)
                            }) {
                                Ok(pids) => {
                                    info!(%peer, %binary, ?pids, "started ranks");
                                    DaemonMsg::Started { pids }
                                }
                                Err(reason) => {
                                    warn!(%peer, %binary, "refused to start: {reason}");
                                    DaemonMsg::Refused { host: host.into(), reason }
                                }
                            }
                        };
                        send(&writer, &answer);
                    }
                    ClientMsg::Signal(sig) => {
                        info!(%peer, sig, "forwarding signal to the ranks");
                        signal_all(&children, sig);
                    }
                    ClientMsg::Kill => {
                        info!(%peer, "killing the ranks on request");
                        signal_all(&children, libc::SIGKILL);
                    }
                    ClientMsg::Query => {
                        send(&writer, &DaemonMsg::Info(host_info(host)));
                    }
                    ClientMsg::Status => {
                        let ranks = registry
                            .running
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .values()
                            .map(|(r, t)| RunningRank { seconds: t.elapsed().as_secs(), ..r.clone() })
                            .collect();
                        send(&writer, &DaemonMsg::Running { host: host.into(), ranks });
                    }
                }
            }
        }
    };
    stop.store(true, Ordering::Relaxed);
    let alive = children.iter().filter(|c| c.alive).count();
    if alive > 0 {
        warn!(%peer, "{why}: killing {alive} rank(s)");
        signal_all(&children, libc::SIGKILL);
    } else {
        debug!(%peer, "{why}");
    }
    // Stay until the children are reaped (they die with this thread otherwise).
    let deadline = Instant::now() + Duration::from_secs(5);
    while children.iter().any(|c| c.alive) && Instant::now() < deadline {
        if let Ok(Ev::Exited(rank)) = rx.recv_timeout(Duration::from_millis(50)) {
            for c in children.iter_mut().filter(|c| c.rank == rank) {
                c.alive = false;
            }
        }
    }
    let _ = writer.lock().map(|s| s.0.shutdown(std::net::Shutdown::Both));
    Err(why)
}

fn signal_all(children: &[Child], sig: i32) {
    for c in children.iter().filter(|c| c.alive) {
        // SAFETY: plain kill(2) on the child's process group (it called setpgid(0, 0)).
        unsafe {
            libc::kill(-(c.pid as i32), sig);
        }
    }
}

/// Whether `binary` is an absolute path to an executable file with hash `sha256`.
pub fn check_binary(binary: &str, sha256: &[u8; 32]) -> Result<(), String> {
    let path = Path::new(binary);
    if !path.is_absolute() {
        return Err(format!("{binary}: not an absolute path"));
    }
    let meta = std::fs::metadata(path).map_err(|e| format!("{binary}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{binary}: not a regular file"));
    }
    let c = std::ffi::CString::new(binary).map_err(|_| format!("{binary}: contains a NUL byte"))?;
    // SAFETY: `c` is a NUL-terminated path.
    if meta.permissions().mode() & 0o111 == 0 || unsafe { libc::access(c.as_ptr(), libc::X_OK) } != 0 {
        return Err(format!("{binary}: not executable by the daemon's user"));
    }
    let found = proto::sha256_file(path).map_err(|e| format!("{binary}: cannot read it: {e}"))?;
    if &found != sha256 {
        return Err(format!(
            "{binary}: SHA-256 {} differs from the launcher's {} (a different binary at that path)",
            proto::hex(&found),
            proto::hex(sha256)
        ));
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn start(
    binary: &str,
    args: &[String],
    ranks: &[RankSpec],
    writer: &Writer,
    tx: &Sender<Ev>,
    registry: &Arc<Registry>,
    peer: &str,
    children: &mut Vec<Child>,
) -> Result<Vec<(u32, u32)>, String> {
    let mut pids = vec![];
    for spec in ranks {
        let mut cmd = Command::new(binary);
        cmd.args(args).envs(spec.env.iter().map(|(k, v)| (k, v))).stdin(Stdio::null());
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::setpgid(0, 0);
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
                Ok(())
            });
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                signal_all(children, libc::SIGKILL);
                return Err(format!("cannot start rank {} ({binary}): {e}", spec.rank));
            }
        };
        let (rank, pid) = (spec.rank, child.id());
        pids.push((rank, pid));
        children.push(Child { rank, pid, alive: true });
        registry.running.lock().unwrap_or_else(|p| p.into_inner()).insert(
            pid,
            (RunningRank { launcher: peer.into(), rank, pid, binary: binary.into(), seconds: 0 }, Instant::now()),
        );
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let relay = |r: Box<dyn Read + Send>, stream: Stream| {
            let (w, done) = (writer.clone(), done_tx.clone());
            std::thread::spawn(move || {
                let mut r = r;
                let mut buf = vec![0u8; proto::OUTPUT_CHUNK];
                loop {
                    match r.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            send(&w, &DaemonMsg::Output { rank, stream, bytes: buf[..n].to_vec() });
                        }
                    }
                }
                let _ = done.send(());
            });
        };
        if let Some(o) = child.stdout.take() {
            relay(Box::new(o), Stream::Stdout);
        }
        if let Some(e) = child.stderr.take() {
            relay(Box::new(e), Stream::Stderr);
        }
        drop(done_tx);
        let (w, tx, registry) = (writer.clone(), tx.clone(), registry.clone());
        std::thread::spawn(move || {
            let status = child.wait();
            // Let the relays finish the rank's last lines first (bounded).
            let until = Instant::now() + Duration::from_secs(1);
            for _ in 0..2 {
                let left = until.saturating_duration_since(Instant::now());
                if done_rx.recv_timeout(left).is_err() {
                    break;
                }
            }
            registry.running.lock().unwrap_or_else(|p| p.into_inner()).remove(&pid);
            let how = match status {
                Ok(s) => match (s.code(), s.signal()) {
                    (Some(c), _) => ExitKind::Code(c),
                    (None, Some(sig)) => ExitKind::Signal(sig),
                    _ => ExitKind::Code(-1),
                },
                Err(_) => ExitKind::Code(-1),
            };
            info!(rank, pid, "rank {how}");
            send(&w, &DaemonMsg::Exited { rank, how });
            let _ = tx.send(Ev::Exited(rank));
        });
    }
    Ok(pids)
}

/// What this host offers.
pub fn host_info(host: &str) -> HostInfo {
    // SAFETY: sysconf has no preconditions.
    let cores = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u32;
    let memory_bytes = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.split_whitespace().next().and_then(|k| k.parse::<u64>().ok()))
        })
        .map_or(0, |kib| kib * 1024);
    let (transports, devices) = match ucx_info() {
        Ok(text) => {
            let mut ts: Vec<String> = vec![];
            let mut ds: Vec<String> = vec![];
            let mut current = String::new();
            for line in text.lines() {
                let l = line.trim_start_matches(['#', ' ', '\t']);
                if let Some(t) = l.strip_prefix("Transport:") {
                    current = t.trim().to_string();
                    if !ts.contains(&current) {
                        ts.push(current.clone());
                    }
                } else if let Some(d) = l.strip_prefix("Device:") {
                    let d = format!("{current}/{}", d.trim());
                    if !ds.contains(&d) {
                        ds.push(d);
                    }
                }
            }
            (Ok(ts), ds)
        }
        Err(e) => (Err(e), vec![]),
    };
    HostInfo { host: host.into(), cores, memory_bytes, transports, devices, version: env!("CARGO_PKG_VERSION").into() }
}

/// The output of `ucx_info -d` (bounded to 10 s), or why there is none.
fn ucx_info() -> Result<String, String> {
    let mut child = Command::new("ucx_info")
        .arg("-d")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("not available (ucx_info: {e})"))?;
    let mut out = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() > Duration::from_secs(10) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("not available (ucx_info -d took over 10 s)".into());
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("not available ({e})")),
        }
    }
    reader.join().map_err(|_| "not available".to_string())
}

/// `gossamer daemon --status ADDR`: what the daemon at `addr` runs.
pub fn status(addr: &str, secret: &[u8]) -> Result<String, CliError> {
    let mut conn = crate::client::connect(addr, proto::DEFAULT_PORT, secret)?;
    match crate::client::request(&mut conn, &ClientMsg::Status, Duration::from_secs(5))? {
        DaemonMsg::Running { host, ranks } => {
            let mut s =
                format!("daemon on {host} ({}), version {}: {} rank(s)\n", conn.addr, conn.version, ranks.len());
            if !ranks.is_empty() {
                s += &format!("{:>6} {:>8} {:>8}  {:<22} {}\n", "RANK", "PID", "SECONDS", "LAUNCHER", "BINARY");
            }
            for r in ranks {
                s += &format!("{:>6} {:>8} {:>8}  {:<22} {}\n", r.rank, r.pid, r.seconds, r.launcher, r.binary);
            }
            Ok(s)
        }
        other => Err(CliError::Host { host: addr.into(), msg: format!("unexpected answer {other:?}") }),
    }
}
