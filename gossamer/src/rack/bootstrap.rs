//! Starting a multi-process program: rank 0 gathers every process over the
//! control socket, checks that all run the identical binary with the same
//! thread count, creates the shared region and tells everyone where it is;
//! then each process starts its workers over the region. At the end rank 0
//! shuts the whole program down and waits for every process to leave.

use std::io;
use std::process::Child;
use std::time::{Duration, Instant};

use super::control::{self, Conn, Msg};
use super::gate::{self, Gate};
use super::launch::{self, Role};
use super::monitor::Monitor;
use super::RackError;
use crate::fabric::shm::map as shm;
use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::fabric::shm::region::{bulk_bytes_for, far_bulk_for, Region, Shape};
use crate::fabric::{hosts, Fabric};
use crate::runtime::shared::{new_program_key, Placement, Shared};
use crate::runtime::{Builder, Runtime};

/// How long processes wait for each other while starting.
const STARTUP: Duration = Duration::from_secs(60);

pub(super) fn run(gsm_main: fn(), threads: usize) -> Result<(), RackError> {
    let role = launch::detect()?;
    // The role holds the secret now; what this rank starts must not inherit it.
    super::secret::forget_text();
    if role.size == 1 {
        let rt = Builder::default().workers(threads).build().map_err(|e| RackError::Launch(e.to_string()))?;
        rt.block_on(gsm_main);
        return Ok(());
    }
    // What programs killed while starting left on this host goes first.
    super::stale::sweep(4 * STARTUP);
    if threads < role.size {
        return Err(RackError::Config(format!(
            "{threads} threads cannot be spread over {size} processes: each process needs at least one. Pass \
             gossamer::main at least {size} threads (`gossamer::rack::planned_processes()` is the process count, \
             known before main), or start at most {threads} processes",
            size = role.size
        )));
    }
    if role.rank == 0 {
        leader(role, gsm_main, threads)
    } else {
        follower(role, threads)
    }
}

/// Global thread ids of each rank: `threads` spread evenly.
fn ranges(threads: usize, size: usize) -> Vec<std::ops::Range<usize>> {
    let (base, extra) = (threads / size, threads % size);
    let mut at = 0;
    (0..size)
        .map(|r| {
            let k = base + usize::from(r < extra);
            at += k;
            at - k..at
        })
        .collect()
}

/// A hash of our own executable, to check all processes run the same one.
fn exe_hash() -> Result<u64, RackError> {
    let path = std::env::current_exe().map_err(|e| RackError::Bootstrap(format!("cannot find our executable: {e}")))?;
    let bytes =
        std::fs::read(&path).map_err(|e| RackError::Bootstrap(format!("cannot read {}: {e}", path.display())))?;
    // FNV-1a, 64 bits.
    Ok(bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)))
}

fn io_err(what: &str) -> impl FnOnce(io::Error) -> RackError + '_ {
    move |e| RackError::Bootstrap(format!("{what}: {e}"))
}

fn start_runtime(
    role: &Role,
    layout: &Layout,
    region: Region,
    key: [u64; 2],
    fabric: Option<Arc<dyn Fabric>>,
) -> Result<Runtime, RackError> {
    let placement = layout.placement(role.rank, key);
    let config = Builder::default().workers(placement.local().len()).config();
    let rt =
        Runtime::start_with(config, placement, region, fabric.clone()).map_err(|e| RackError::Launch(e.to_string()))?;
    if let Some(f) = fabric {
        let shared = rt.shared();
        f.start(Box::new(move || shared.wake_local()));
    }
    Ok(rt)
}

/// Kills the children if the leader gives up before the monitor owns them.
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Where the program's threads and processes sit: threads are laid out
/// host by host (hosts in the order of their first rank), so that each
/// host's threads are one range; within a host, rank by rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Layout {
    pub(super) ranks: Vec<Range<usize>>,
    pub(super) hosts: Vec<Range<usize>>,
    pub(super) host_names: Vec<String>,
    /// The host index of each rank.
    pub(super) host_of_rank: Vec<usize>,
}

impl Layout {
    pub(super) fn new(threads: usize, rank_hosts: &[String]) -> Layout {
        let counts: Vec<usize> = ranges(threads, rank_hosts.len()).iter().map(|r| r.len()).collect();
        let mut host_names: Vec<String> = Vec::new();
        let mut host_of_rank = Vec::with_capacity(rank_hosts.len());
        for h in rank_hosts {
            let i = host_names.iter().position(|x| x == h).unwrap_or_else(|| {
                host_names.push(h.clone());
                host_names.len() - 1
            });
            host_of_rank.push(i);
        }
        let mut ranks = vec![0..0; rank_hosts.len()];
        let mut hosts = Vec::with_capacity(host_names.len());
        let mut at = 0;
        for h in 0..host_names.len() {
            let start = at;
            for r in (0..rank_hosts.len()).filter(|&r| host_of_rank[r] == h) {
                ranks[r] = at..at + counts[r];
                at += counts[r];
            }
            hosts.push(start..at);
        }
        Layout { ranks, hosts, host_names, host_of_rank }
    }

    fn placement(&self, rank: usize, key: [u64; 2]) -> Placement {
        Placement {
            rank,
            ranks: self.ranks.clone(),
            hosts: self.hosts.clone(),
            host_names: self.host_names.clone(),
            key,
        }
    }

    fn multi_host(&self) -> bool {
        self.hosts.len() > 1
    }

    fn shape(&self, rank: usize, threads: usize, bulk: usize) -> Shape {
        let widest = self.hosts.iter().map(|h| h.len()).max().unwrap_or(1);
        let far_bulk = if self.multi_host() { far_bulk_for(threads, widest) } else { 0 };
        Shape { n: threads, host: self.hosts[self.host_of_rank[rank]].clone(), bulk_bytes: bulk, far_bulk }
    }

    fn to_msg(&self) -> LayoutMsg {
        let pairs = |v: &[Range<usize>]| v.iter().map(|r| (r.start as u32, r.end as u32)).collect::<Vec<_>>();
        (
            pairs(&self.ranks),
            pairs(&self.hosts),
            self.host_names.clone(),
            self.host_of_rank.iter().map(|&h| h as u32).collect(),
        )
    }

    fn from_msg(ranks: &[(u32, u32)], hosts: &[(u32, u32)], names: Vec<String>, of: &[u32]) -> Layout {
        let ranges = |v: &[(u32, u32)]| v.iter().map(|&(a, b)| a as usize..b as usize).collect::<Vec<_>>();
        Layout {
            ranks: ranges(ranks),
            hosts: ranges(hosts),
            host_names: names,
            host_of_rank: of.iter().map(|&h| h as usize).collect(),
        }
    }

    /// The ranks on each host.
    fn host_ranks(&self) -> Vec<Vec<usize>> {
        (0..self.hosts.len()).map(|h| (0..self.ranks.len()).filter(|&r| self.host_of_rank[r] == h).collect()).collect()
    }
}

/// A layout as the welcome message carries it: rank ranges, host ranges,
/// host names, the host of each rank.
type LayoutMsg = (Vec<(u32, u32)>, Vec<(u32, u32)>, Vec<String>, Vec<u32>);

/// A layout that a follower received: consistent with what it knows.
fn check_layout(l: &Layout, role: &Role, threads: usize) -> Result<(), String> {
    let ok = l.ranks.len() == role.size
        && l.host_of_rank.len() == role.size
        && l.hosts.len() == l.host_names.len()
        && l.hosts.last().map(|h| h.end) == Some(threads)
        && l.ranks.iter().enumerate().all(|(r, range)| {
            !range.is_empty()
                && l.host_of_rank[r] < l.hosts.len()
                && l.hosts[l.host_of_rank[r]].start <= range.start
                && range.end <= l.hosts[l.host_of_rank[r]].end
        });
    if ok {
        Ok(())
    } else {
        Err(format!("rank 0 sent an inconsistent layout: {l:?}"))
    }
}

fn shm_name(host: usize) -> String {
    let nonce = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("/gossamer-{}-{nonce:08x}-h{host}", std::process::id())
}

/// Maps (or, as the host's first process, creates) this host's region.
fn map_region(name: &str, shape: Shape, create: bool) -> Result<Region, RackError> {
    let len = Region::size_for(&shape);
    let what = if create { "cannot create the shared region" } else { "cannot map the shared region" };
    let base = shm::map(name, len, create).map_err(io_err(what))?;
    // SAFETY: a mapping of `len` bytes of the host's region, zeroed when
    // created here, initialised by its creator otherwise.
    Ok(unsafe { Region::from_mapping(base, shape, create) })
}

fn expect_msg(s: &mut Conn, rank: usize, what: &str, timeout: Duration) -> Result<Msg, RackError> {
    control::recv_timeout(s, timeout)
        .map_err(|e| RackError::Failed { rank, cause: format!("did not send {what}: {e}") })
}

fn leader(role: Role, gsm_main: fn(), threads: usize) -> Result<(), RackError> {
    let listen_at = std::env::var("GOSSAMER_RENDEZVOUS_LISTEN").ok().filter(|v| !v.is_empty());
    let listener = role.rendezvous.listen(listen_at.as_deref()).map_err(io_err("cannot listen at the rendezvous"))?;
    let socket_path = role.rendezvous.path().map(|p| p.to_path_buf());
    let unlink = socket_path.clone();
    let _remove_socket = scopeguard(move || {
        if let Some(p) = unlink {
            let _ = std::fs::remove_file(p);
        }
    });
    let secret = role
        .secret
        .as_deref()
        .ok_or_else(|| RackError::Config("a program of several processes needs a secret".into()))?;
    let gate = Gate::new(gate::psk(secret));
    let mut children = Children(if role.embedded { launch::spawn_children(&role)? } else { Vec::new() });
    let hash = exe_hash()?;

    // Gather every other rank. Connections are authenticated by the gate,
    // each on its own thread; only ranks that know the secret come out.
    listener.set_nonblocking(true).map_err(io_err("rendezvous socket"))?;
    let mut conns: Vec<Option<Conn>> = (0..role.size).map(|_| None).collect();
    let mut hellos = vec![None; role.size];
    let deadline = Instant::now() + STARTUP;
    while conns.iter().skip(1).any(Option::is_none) {
        let mut busy = false;
        match listener.accept() {
            Ok(s) => {
                busy = true;
                gate.admit(s);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            // A connection that failed before we took it, or too many
            // open files: nothing to stop for.
            Err(e) => tracing::warn!("rendezvous: accepting a connection: {e}"),
        }
        while let Some((conn, hello)) = gate.next() {
            busy = true;
            // The gate passes only hellos.
            let Msg::Hello { rank, size, pid, exe_hash, threads: t, host } = hello else { continue };
            let rank = rank as usize;
            // It knows the secret: a duplicate is a misconfiguration.
            if rank == 0 || rank >= role.size || conns[rank].is_some() {
                return Err(RackError::Bootstrap(format!(
                    "unexpected hello from rank {rank} (pid {pid}, {})",
                    conn.peer()
                )));
            }
            hellos[rank] = Some((size as usize, pid, exe_hash, t as usize, host));
            conns[rank] = Some(conn);
        }
        for (i, c) in children.0.iter_mut().enumerate() {
            if let Ok(Some(status)) = c.try_wait() {
                return Err(RackError::Failed { rank: i + 1, cause: format!("exited during start-up ({status})") });
            }
        }
        if Instant::now() > deadline {
            let missing: Vec<_> = (1..role.size).filter(|r| conns[*r].is_none()).collect();
            return Err(RackError::Bootstrap(format!(
                "ranks {missing:?} did not connect within {STARTUP:?}: check that they were started, that they \
                 reach rank 0 at GOSSAMER_RENDEZVOUS={} (rank 0's host name or address and port, the same for \
                 every rank), and that they have the program's secret (a rank without it says so itself; one \
                 with another secret is logged here as dropped)",
                role.rendezvous.as_env().to_string_lossy()
            )));
        }
        if !busy {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    // Handshakes still in progress end on their own; what they admit now
    // is dropped with the gate.
    drop(gate);

    // Everyone is here: the rendezvous has served. Remove its socket now,
    // not only on return, since a program may end with `exit` (fate
    // sharing, or `main` ending the process) without unwinding to here.
    drop(listener);
    if let Some(p) = &socket_path {
        let _ = std::fs::remove_file(p);
    }

    // Everyone must run this very binary, with the same shape.
    let mut refusal = None;
    for (rank, h) in hellos.iter().enumerate().skip(1) {
        let (size, pid, h_hash, t, host) = h.clone().expect("every rank said hello");
        if h_hash != hash {
            refusal = Some(format!(
                "rank {rank} (pid {pid}, host {host}) runs a different binary than rank 0 (executable hash \
                 {h_hash:016x}, rank 0 has {hash:016x}); every process of a program must run the identical binary"
            ));
        } else if size != role.size || t != threads {
            refusal = Some(format!(
                "rank {rank} (pid {pid}) expects {size} processes and {t} threads, rank 0 {} and {threads}",
                role.size
            ));
        }
        if refusal.is_some() {
            break;
        }
    }
    if let Some(reason) = refusal {
        for s in conns.iter_mut().flatten() {
            let _ = control::send(s, &Msg::Refuse { reason: reason.clone() });
        }
        return Err(RackError::Bootstrap(reason));
    }

    // Lay the threads out host by host; one region per host.
    let mut rank_hosts = vec![super::host_name()];
    rank_hosts.extend(hellos.iter().skip(1).map(|h| h.as_ref().expect("hello").4.clone()));
    let layout = Layout::new(threads, &rank_hosts);
    let bulk = bulk_bytes_for(threads);
    let key = new_program_key();
    let names: Vec<String> = (0..layout.hosts.len()).map(shm_name).collect();
    let region = map_region(&names[0], layout.shape(0, threads, bulk), true)?;
    let unlink0 = names[0].clone();
    let _unlink = scopeguard(move || shm::unlink(&unlink0));
    let host_ranks = layout.host_ranks();
    let creators: Vec<usize> = host_ranks.iter().skip(1).map(|r| r[0]).collect();
    let (ranks_msg, hosts_msg, names_msg, of_msg) = layout.to_msg();
    let welcome = |rank: usize| Msg::Welcome {
        shm_name: names[layout.host_of_rank[rank]].clone(),
        bulk_bytes: bulk as u64,
        ranks: ranks_msg.clone(),
        hosts: hosts_msg.clone(),
        host_names: names_msg.clone(),
        host_of_rank: of_msg.clone(),
        create: creators.contains(&rank),
        key,
    };
    // The hosts' first processes create their regions, then the others map.
    for phase in [true, false] {
        let group: Vec<usize> = (1..role.size).filter(|r| creators.contains(r) == phase).collect();
        for &rank in &group {
            let s = conns[rank].as_mut().expect("connected");
            control::send(s, &welcome(rank)).map_err(io_err("sending the welcome"))?;
        }
        for &rank in &group {
            match expect_msg(conns[rank].as_mut().expect("connected"), rank, "mapped", STARTUP)? {
                Msg::Mapped => {}
                Msg::Refuse { reason } => return Err(RackError::Failed { rank, cause: reason }),
                m => return Err(RackError::Bootstrap(format!("rank {rank}: expected mapped, got {m:?}"))),
            }
        }
    }
    drop(_unlink); // every process of our host has mapped it

    // Between hosts: every process registers its region with the fabric
    // and tells the others where to put.
    let fabric = if layout.multi_host() {
        let local = hosts::LocalEnd::new(region.bytes()).map_err(|e| RackError::Bootstrap(e.to_string()))?;
        let mut peers = vec![local.info()];
        for (rank, conn) in conns.iter_mut().enumerate().skip(1) {
            match expect_msg(conn.as_mut().expect("connected"), rank, "its fabric address", STARTUP)? {
                Msg::FabricInfo(info) => peers.push(info),
                Msg::Refuse { reason } => return Err(RackError::Failed { rank, cause: reason }),
                m => return Err(RackError::Bootstrap(format!("rank {rank}: expected a fabric address, got {m:?}"))),
            }
        }
        for s in conns.iter_mut().flatten() {
            control::send(s, &Msg::Peers(peers.clone())).map_err(io_err("sending the peers"))?;
        }
        Some(local.connect(0, peers, host_ranks.clone()).map_err(|e| RackError::Bootstrap(e.to_string()))?)
    } else {
        None
    };

    let rt = start_runtime(&role, &layout, region, key, fabric.clone())?;
    for (rank, s) in conns.iter_mut().enumerate().skip(1) {
        let s = s.as_mut().expect("connected");
        match control::recv_timeout(s, STARTUP) {
            Ok(Msg::Ready) => {}
            Ok(Msg::Refuse { reason }) => return Err(RackError::Failed { rank, cause: reason }),
            Ok(m) => return Err(RackError::Bootstrap(format!("rank {rank}: expected ready, got {m:?}"))),
            Err(e) => return Err(RackError::Failed { rank, cause: format!("did not get ready: {e}") }),
        }
    }
    let streams: Vec<Conn> = conns.into_iter().skip(1).map(|s| s.expect("connected")).collect();
    let remote: Vec<bool> = (1..role.size).map(|r| layout.host_of_rank[r] != 0).collect();
    let host_names: Vec<String> = (1..role.size).map(|r| layout.host_names[layout.host_of_rank[r]].clone()).collect();
    let monitor = Monitor::start(rt.shared(), streams, remote, host_names, std::mem::take(&mut children.0));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rt.block_on(gsm_main)));
    if let Err(p) = r {
        main_panicked(&rt.shared(), &monitor, &*p);
    }
    monitor.finishing();
    let report = rt.shutdown();
    if !report.clean {
        tracing::warn!("the program did not wind down cleanly: {report:?}");
    }
    let done = monitor.finish(Duration::from_secs(30));
    if let Some(f) = fabric {
        f.close();
    }
    done
}

fn follower(role: Role, threads: usize) -> Result<(), RackError> {
    let deadline = Instant::now() + STARTUP;
    let hello = Msg::Hello {
        rank: role.rank as u32,
        size: role.size as u32,
        pid: std::process::id(),
        exe_hash: exe_hash()?,
        threads: threads as u32,
        host: super::host_name(),
    };
    let secret = role
        .secret
        .as_deref()
        .ok_or_else(|| RackError::Config("a program of several processes needs a secret".into()))?;
    let mut s = gate::join(&role.rendezvous, &gate::psk(secret), &hello, deadline)?;
    let (name, bulk, layout, create, key) = match control::recv_timeout(&mut s, STARTUP)
        .map_err(io_err("waiting for rank 0"))?
    {
        Msg::Welcome { shm_name, bulk_bytes, ranks, hosts, host_names, host_of_rank, create, key } => {
            let layout = Layout::from_msg(&ranks, &hosts, host_names, &host_of_rank);
            check_layout(&layout, &role, threads).map_err(RackError::Bootstrap)?;
            (shm_name, bulk_bytes as usize, layout, create, key)
        }
        Msg::Refuse { reason } => return Err(RackError::Bootstrap(format!("rank 0 refused the program: {reason}"))),
        m => return Err(RackError::Bootstrap(format!("expected a welcome, got {m:?}"))),
    };
    let region = match map_region(&name, layout.shape(role.rank, threads, bulk), create) {
        Ok(r) => r,
        Err(e) => {
            let _ = control::send(&mut s, &Msg::Refuse { reason: e.to_string() });
            return Err(e);
        }
    };
    let unlink = create.then(|| name.clone());
    let _unlink = scopeguard(move || {
        if let Some(n) = unlink {
            shm::unlink(&n)
        }
    });
    control::send(&mut s, &Msg::Mapped).map_err(io_err("sending mapped"))?;

    let fabric = if layout.multi_host() {
        let local = match hosts::LocalEnd::new(region.bytes()) {
            Ok(l) => l,
            Err(e) => {
                let reason = format!("rank {} (host {}): {e}", role.rank, super::host_name());
                let _ = control::send(&mut s, &Msg::Refuse { reason: reason.clone() });
                return Err(RackError::Bootstrap(reason));
            }
        };
        control::send(&mut s, &Msg::FabricInfo(local.info())).map_err(io_err("sending the fabric address"))?;
        let peers = match control::recv_timeout(&mut s, STARTUP).map_err(io_err("waiting for the peers"))? {
            Msg::Peers(p) if p.len() == role.size => p,
            Msg::Refuse { reason } => {
                return Err(RackError::Bootstrap(format!("rank 0 refused the program: {reason}")))
            }
            m => return Err(RackError::Bootstrap(format!("expected the peers, got {m:?}"))),
        };
        Some(local.connect(role.rank, peers, layout.host_ranks()).map_err(|e| RackError::Bootstrap(e.to_string()))?)
    } else {
        None
    };
    drop(_unlink); // every process of the host has mapped it by now, or does not need to
    let rt = start_runtime(&role, &layout, region, key, fabric.clone())?;
    control::send(&mut s, &Msg::Ready).map_err(io_err("sending ready"))?;

    // Serve until rank 0 stops the program, or dies, or falls silent. On
    // another host than rank 0's, the flags that rank 0 sets in its region
    // arrive as messages.
    let shared = rt.shared();
    let leader =
        Leader { rank: role.rank, host: layout.host_names[layout.host_of_rank[0]].clone(), address: s.whereabouts() };
    let mut heard = Instant::now();
    let mut beat = Instant::now();
    loop {
        if shared.stopped() {
            break;
        }
        if beat.elapsed() >= control::heartbeat() {
            beat = Instant::now();
            if control::send(&mut s, &Msg::Heartbeat).is_err() {
                leader.gone("its control connection closed");
            }
        }
        match wait_message(&mut s, Duration::from_millis(2)) {
            Ok(None) => {
                if heard.elapsed() > control::silence() {
                    leader.gone(&format!(
                        "it stopped answering for {:?}, the heartbeat window (hung, or its host unreachable)",
                        control::silence()
                    ));
                }
                continue;
            }
            Ok(Some(())) => {}
            Err(_) => leader.gone("its control connection failed"),
        }
        heard = Instant::now();
        match control::recv(&mut s) {
            Ok(Msg::Probe(k)) => {
                shared.begin_stopping();
                let threads = shared
                    .local
                    .clone()
                    .map(|t| {
                        let d = shared.doorbell(t);
                        (t as u32, d.quiet.load(Ordering::SeqCst), d.epoch.load(Ordering::SeqCst))
                    })
                    .collect();
                if control::send(&mut s, &Msg::Status { probe: k, threads }).is_err() {
                    leader.gone("its control connection closed");
                }
            }
            Ok(Msg::Stop) => shared.stop_all(),
            Ok(Msg::Failed { rank, host, address, cause }) => {
                eprintln!(
                    "gossamer: rank {}: rank {rank} failed: {cause} (on host {host}{address}); the program stops",
                    role.rank
                );
                exit_now(1);
            }
            Ok(_) => {}
            Err(_) => leader.gone("its control connection closed"),
        }
    }
    rt.leave();
    if let Some(f) = fabric {
        f.close();
    }
    // The last hold on the fabric: UCX is torn down here, by this thread,
    // before the exit runs UCX's destructors (see `exit_now`).
    drop(shared);
    // The goodbye must reach rank 0, which takes a rank that goes without
    // one for failed: it leaves with an orderly end behind it, and this
    // process waits for rank 0 to close its end (once it has read both)
    // before exiting, as an exit with rank 0's heartbeats still unread
    // would reset the connection, and a reset discards a goodbye that a
    // lost frame left waiting for its retransmission.
    let _ = control::send(&mut s, &Msg::Bye);
    s.close_after_peer(control::silence());
    std::process::exit(0);
}

/// Ends this process of the program at once with `code`: what it printed
/// is flushed, and then it exits as `std::process::exit` does, but without
/// running exit handlers or library destructors. Fate sharing then takes
/// the program's other processes down (rank 0 ending the program; any
/// other rank failing it, named).
///
/// Call this, not `std::process::exit`, to end a program of several
/// processes from inside it while its threads run: between hosts, they
/// may be inside UCX (a worker progressing, an endpoint closing), and UCX
/// 1.13's destructors walk the objects it lists without a lock, so a
/// thread that removes one meanwhile makes the process abort in
/// `vfs_obj.c`, with a backtrace in place of the message it printed. The
/// runtime ends its own failing processes this way. The kernel releases
/// what the process held; a host's region is unlinked as soon as every
/// process of the host has mapped it.
///
/// ```no_run
/// fn gsm_main() {
///     if std::env::args().count() > 3 {
///         eprintln!("too many arguments");
///         gossamer::rack::exit_now(2);
///     }
/// }
/// # fn main() { gossamer::main(gsm_main, 2) }
/// ```
pub fn exit_now(code: i32) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: `_exit` ends the process without returning; nothing of ours
    // runs after it.
    unsafe { libc::_exit(code) }
}

/// Fate sharing for a panic in the program's main function: the program
/// ends now, as a process ends when its `main` panics. The panic's message
/// is printed with the rank (a panic resumed from another process or
/// fiber has not been printed yet), the other processes are stopped, and
/// rank 0 exits with a panic's status, 101 — without the orderly shutdown,
/// which would wait for a main function that is gone.
///
/// When another process has already failed, the monitor is stopping the
/// program with that process's rank and cause (stopping the workers is what
/// unwound the main function): that cause is the one to report, so this
/// thread leaves the exit to the monitor.
fn main_panicked(shared: &Shared, monitor: &Monitor, p: &(dyn std::any::Any + Send)) -> ! {
    if shared.region.header().failed.load(Ordering::SeqCst) != 0 {
        std::thread::sleep(Duration::from_secs(30));
        eprintln!("gossamer: rank 0: another process failed, and the program did not stop; stopping");
        exit_now(1);
    }
    let msg = crate::error::panic_message(p);
    eprintln!("gossamer: rank 0 failed: the program's main function panicked: {msg}; the program stops");
    monitor.abort();
    exit_now(101);
}

/// Rank 0 as a follower names it when it is lost.
struct Leader {
    /// The follower's own rank.
    rank: usize,
    /// Rank 0's host, and where it is as `Conn::whereabouts` says it.
    host: String,
    address: String,
}

impl Leader {
    /// Rank 0 is lost (`why`): the program stops, and so does this process.
    fn gone(&self, why: &str) -> ! {
        eprintln!(
            "gossamer: rank {}: rank 0 (on host {}{}) is gone: {why}; the program stops",
            self.rank, self.host, self.address
        );
        exit_now(1);
    }
}

/// Whether something (a message, or the end of the connection) arrives
/// within `t`.
fn wait_message(s: &mut Conn, t: Duration) -> io::Result<Option<()>> {
    use std::os::fd::AsRawFd;
    let mut fd = libc::pollfd { fd: s.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd for our own socket.
    let n = unsafe { libc::poll(&mut fd, 1, t.as_millis() as libc::c_int) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((n > 0 && fd.revents != 0).then_some(()))
}

/// Runs `f` when dropped.
fn scopeguard<F: FnOnce()>(f: F) -> impl Drop {
    struct G<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for G<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f()
            }
        }
    }
    G(Some(f))
}

#[cfg(all(test, not(miri)))]
mod tests {
    use super::{ranges, Layout};

    #[test]
    fn threads_are_laid_out_host_by_host() {
        let hosts: Vec<String> = ["a", "b", "a", "c", "b"].iter().map(|s| s.to_string()).collect();
        let l = Layout::new(10, &hosts);
        assert_eq!(l.host_names, vec!["a", "b", "c"]);
        assert_eq!(l.host_of_rank, vec![0, 1, 0, 2, 1]);
        assert_eq!(l.hosts, vec![0..4, 4..8, 8..10]);
        assert_eq!(l.ranks, vec![0..2, 4..6, 2..4, 8..10, 6..8]);
        assert_eq!(l.host_ranks(), vec![vec![0, 2], vec![1, 4], vec![3]]);
        let one = Layout::new(6, &["x".to_string(), "x".to_string(), "x".to_string()]);
        assert_eq!(one.ranks, ranges(6, 3), "one host: the layout of a single-host program");
    }

    #[test]
    fn threads_spread_evenly_over_ranks() {
        assert_eq!(ranges(6, 3), vec![0..2, 2..4, 4..6]);
        assert_eq!(ranges(7, 3), vec![0..3, 3..5, 5..7]);
        assert_eq!(ranges(1, 1), vec![0..1]);
    }
}
