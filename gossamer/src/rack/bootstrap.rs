//! Starting a multi-process program: rank 0 gathers every process over the
//! control socket, checks that all run the identical binary with the same
//! thread count, creates the shared region and tells everyone where it is;
//! then each process starts its workers over the region. At the end rank 0
//! shuts the whole program down and waits for every process to leave.

use std::io;
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::Child;
use std::time::{Duration, Instant};

use super::control::{self, Msg};
use super::launch::{self, Role};
use super::monitor::Monitor;
use super::{shm, RackError};
use crate::runtime::region::{bulk_bytes_for, Region};
use crate::runtime::shared::{new_program_key, Placement};
use crate::runtime::{Builder, Runtime};

/// How long processes wait for each other while starting.
const STARTUP: Duration = Duration::from_secs(60);

pub(super) fn run(gsm_main: fn(), threads: usize) -> Result<(), RackError> {
    let role = launch::detect()?;
    if role.size == 1 {
        let rt = Builder::default().workers(threads).build().map_err(|e| RackError::Launch(e.to_string()))?;
        rt.block_on(gsm_main);
        return Ok(());
    }
    if threads < role.size {
        return Err(RackError::Config(format!("{threads} threads cannot be spread over {} processes", role.size)));
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

fn start_runtime(role: &Role, threads: usize, region: Region, key: [u64; 2]) -> Result<Runtime, RackError> {
    let placement = Placement { rank: role.rank, ranks: ranges(threads, role.size), key };
    let config = Builder::default().workers(placement.local().len()).config();
    Runtime::start_with(config, placement, region).map_err(|e| RackError::Launch(e.to_string()))
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

fn leader(role: Role, gsm_main: fn(), threads: usize) -> Result<(), RackError> {
    let _ = std::fs::remove_file(&role.rendezvous);
    let listener = UnixListener::bind(&role.rendezvous).map_err(io_err("cannot listen on the rendezvous socket"))?;
    let socket_path = role.rendezvous.clone();
    let _remove_socket = scopeguard(move || {
        let _ = std::fs::remove_file(&socket_path);
    });
    let mut children = Children(if role.embedded { launch::spawn_children(&role)? } else { Vec::new() });
    let hash = exe_hash()?;

    // Gather every other rank.
    listener.set_nonblocking(true).map_err(io_err("rendezvous socket"))?;
    let mut conns: Vec<Option<UnixStream>> = (0..role.size).map(|_| None).collect();
    let mut hellos = vec![None; role.size];
    let deadline = Instant::now() + STARTUP;
    while conns.iter().skip(1).any(Option::is_none) {
        match listener.accept() {
            Ok((mut s, _)) => {
                s.set_nonblocking(false).map_err(io_err("control socket"))?;
                match control::recv_timeout(&mut s, Duration::from_secs(10)).map_err(io_err("reading a hello"))? {
                    Msg::Hello { rank, size, pid, exe_hash, threads: t } => {
                        let rank = rank as usize;
                        if rank == 0 || rank >= role.size || conns[rank].is_some() {
                            return Err(RackError::Bootstrap(format!("unexpected hello from rank {rank} (pid {pid})")));
                        }
                        hellos[rank] = Some((size as usize, pid, exe_hash, t as usize));
                        conns[rank] = Some(s);
                    }
                    m => return Err(RackError::Bootstrap(format!("expected a hello, got {m:?}"))),
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                for (i, c) in children.0.iter_mut().enumerate() {
                    if let Ok(Some(status)) = c.try_wait() {
                        return Err(RackError::Failed {
                            rank: i + 1,
                            cause: format!("exited during start-up ({status})"),
                        });
                    }
                }
                if Instant::now() > deadline {
                    let missing: Vec<_> = (1..role.size).filter(|r| conns[*r].is_none()).collect();
                    return Err(RackError::Bootstrap(format!("ranks {missing:?} did not connect within {STARTUP:?}")));
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(io_err("accepting a process")(e)),
        }
    }

    // Everyone must run this very binary, with the same shape.
    let mut refusal = None;
    for (rank, h) in hellos.iter().enumerate().skip(1) {
        let (size, pid, h_hash, t) = h.expect("every rank said hello");
        if h_hash != hash {
            refusal = Some(format!(
                "rank {rank} (pid {pid}) runs a different binary than rank 0 (executable hash {h_hash:016x}, rank 0 has \\
                 {hash:016x}); every process of a program must run the identical binary"
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

    // The shared region.
    let bulk = bulk_bytes_for(threads);
    let len = Region::size_for(threads, bulk);
    let nonce = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let shm_name = format!("/gossamer-{}-{nonce:08x}", std::process::id());
    let base = shm::map(&shm_name, len, true).map_err(io_err("cannot create the shared region"))?;
    let name2 = shm_name.clone();
    let _unlink = scopeguard(move || shm::unlink(&name2));
    // SAFETY: a fresh, zeroed mapping of `len` bytes that every process maps.
    let region = unsafe { Region::from_mapping(base, threads, bulk, true) };
    let ranks: Vec<(u32, u32)> = ranges(threads, role.size).iter().map(|r| (r.start as u32, r.end as u32)).collect();
    let key = new_program_key();
    for s in conns.iter_mut().flatten() {
        control::send(
            s,
            &Msg::Welcome { shm_name: shm_name.clone(), bulk_bytes: bulk as u64, ranks: ranks.clone(), key },
        )
        .map_err(io_err("sending the welcome"))?;
    }
    for (rank, s) in conns.iter_mut().enumerate().skip(1) {
        let s = s.as_mut().expect("connected");
        match control::recv_timeout(s, STARTUP) {
            Ok(Msg::Ready) => {}
            Ok(m) => return Err(RackError::Bootstrap(format!("rank {rank}: expected ready, got {m:?}"))),
            Err(e) => return Err(RackError::Failed { rank, cause: format!("did not get ready: {e}") }),
        }
    }
    drop(_unlink); // every process has mapped it

    let rt = start_runtime(&role, threads, region, key)?;
    let streams: Vec<UnixStream> = conns.into_iter().skip(1).map(|s| s.expect("connected")).collect();
    let monitor = Monitor::start(rt.shared(), streams, std::mem::take(&mut children.0));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rt.block_on(gsm_main)));
    if let Err(p) = r {
        monitor.abort();
        std::panic::resume_unwind(p);
    }
    monitor.finishing();
    let report = rt.shutdown();
    if !report.clean {
        tracing::warn!("the program did not wind down cleanly: {report:?}");
    }
    monitor.finish(Duration::from_secs(30))
}

fn follower(role: Role, threads: usize) -> Result<(), RackError> {
    let deadline = Instant::now() + STARTUP;
    let mut s = loop {
        match UnixStream::connect(&role.rendezvous) {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(io_err("cannot reach rank 0")(e)),
        }
    };
    let hello = Msg::Hello {
        rank: role.rank as u32,
        size: role.size as u32,
        pid: std::process::id(),
        exe_hash: exe_hash()?,
        threads: threads as u32,
    };
    control::send(&mut s, &hello).map_err(io_err("sending the hello"))?;
    let (shm_name, bulk, key) = match control::recv_timeout(&mut s, STARTUP).map_err(io_err("waiting for rank 0"))? {
        Msg::Welcome { shm_name, bulk_bytes, ranks, key } => {
            let expect: Vec<(u32, u32)> =
                ranges(threads, role.size).iter().map(|r| (r.start as u32, r.end as u32)).collect();
            if ranks != expect {
                return Err(RackError::Bootstrap(format!(
                    "rank 0 laid out threads as {ranks:?}, we expected {expect:?}"
                )));
            }
            (shm_name, bulk_bytes as usize, key)
        }
        Msg::Refuse { reason } => return Err(RackError::Bootstrap(format!("rank 0 refused the program: {reason}"))),
        m => return Err(RackError::Bootstrap(format!("expected a welcome, got {m:?}"))),
    };
    let len = Region::size_for(threads, bulk);
    let base = shm::map(&shm_name, len, false).map_err(io_err("cannot map the shared region"))?;
    // SAFETY: rank 0's mapping of `len` bytes, already initialised.
    let region = unsafe { Region::from_mapping(base, threads, bulk, false) };
    let rt = start_runtime(&role, threads, region, key)?;
    control::send(&mut s, &Msg::Ready).map_err(io_err("sending ready"))?;

    // Serve until rank 0 stops the program, or dies.
    let shared = rt.shared();
    loop {
        if shared.stopped() {
            break;
        }
        if peer_closed(&s) {
            eprintln!("gossamer: rank {}: rank 0 is gone; stopping", role.rank);
            std::process::exit(1);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    rt.leave();
    let _ = control::send(&mut s, &Msg::Bye);
    std::process::exit(0);
}

/// True when the other end of `s` has closed (without reading anything).
fn peer_closed(s: &UnixStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut b = [0u8; 1];
    // SAFETY: a one-byte peek into our buffer on our own socket.
    let n = unsafe { libc::recv(s.as_raw_fd(), b.as_mut_ptr().cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
    n == 0 || (n < 0 && io::Error::last_os_error().kind() != io::ErrorKind::WouldBlock)
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
    use super::ranges;

    #[test]
    fn threads_spread_evenly_over_ranks() {
        assert_eq!(ranges(6, 3), vec![0..2, 2..4, 4..6]);
        assert_eq!(ranges(7, 3), vec![0..3, 3..5, 5..7]);
        assert_eq!(ranges(1, 1), vec![0..1]);
    }
}
