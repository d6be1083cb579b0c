//! A bad network between simulated hosts (`netns::SimRack`): delay and
//! loss on the links, and links that go down without a word (no FIN, no
//! RST: the frames just stop).
//!
//! Delay and loss come from `tc netem` on every host's link where the
//! kernel has it (`sch_netem`). Where it does not (or `tc` is missing), a
//! relay in the test process does the same: the bridge's ports are taken
//! off the bridge, and the relay, holding a packet socket on each, passes
//! every frame to the other ports after the delay, dropping each with the
//! loss probability.
//! Either way a frame from one host to another is delayed once and lost
//! with the given probability, in each direction. Dropping the
//! [`BadNetwork`] takes the impairment away (qdiscs deleted, or the relay
//! stopped and the ports put back on the bridge).
#![allow(dead_code)]

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::netns::SimRack;

/// Runs `ip ARGS...`, or says why it failed.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip").args(args).output().map_err(|e| format!("cannot run ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// Takes host `host`'s link down at the bridge: its frames stop both ways,
/// and neither side is told (no FIN, no RST).
pub fn link_down(rack: &SimRack, host: usize) -> Result<(), String> {
    ip(&["-n", &rack.bridge_namespace(), "link", "set", "dev", &format!("v{host}"), "down"])
}

/// Brings host `host`'s link back up.
pub fn link_up(rack: &SimRack, host: usize) -> Result<(), String> {
    ip(&["-n", &rack.bridge_namespace(), "link", "set", "dev", &format!("v{host}"), "up"])
}

/// The shortest of a few round trips from host `from` to host `to`: TCP
/// connection attempts to a port where nothing listens, each answered by a
/// reset (attempts whose frames the network lost are left out).
pub fn round_trip(rack: &SimRack, from: usize, to: usize) -> Result<Duration, String> {
    let target = std::net::SocketAddr::from((rack.addr(to), 9));
    in_namespace(&rack.namespace(from), move || {
        let mut best: Option<Duration> = None;
        for _ in 0..10 {
            let start = Instant::now();
            match std::net::TcpStream::connect_timeout(&target, Duration::from_millis(500)) {
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    let took = start.elapsed();
                    best = Some(best.map_or(took, |b| b.min(took)));
                }
                Ok(_) => return Err(format!("something listens at {target}")),
                Err(_) => {} // lost: try again
            }
        }
        best.ok_or_else(|| format!("no answer from {target}"))
    })?
}

/// Runs `f` on a thread of its own that has entered network namespace `ns`
/// (a thread's network namespace is its own; sockets it makes keep theirs).
fn in_namespace<R: Send + 'static>(ns: &str, f: impl FnOnce() -> R + Send + 'static) -> Result<R, String> {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || -> Result<R, String> {
        let file = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
        // SAFETY: moves this thread (only) into the namespace `file` refers to.
        if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(format!("setns {path}: {}", std::io::Error::last_os_error()));
        }
        Ok(f())
    })
    .join()
    .map_err(|_| format!("a thread in {ns} panicked"))?
}

/// Delay and loss on every link of a rack, until dropped.
pub struct BadNetwork {
    how: How,
}

enum How {
    /// `tc netem` on each host's `eth0`: the namespaces, by name.
    Netem(Vec<String>),
    /// The relay, and why `tc netem` could not be used.
    Relay(Relay, String),
}

impl BadNetwork {
    /// Every frame between two hosts of `rack` is delayed by `delay` and
    /// lost with probability `loss_percent` / 100, by `tc netem` where the
    /// kernel has it, else by the relay.
    pub fn impose(rack: &SimRack, delay: Duration, loss_percent: f64) -> Result<BadNetwork, String> {
        let spec = ["delay".to_string(), format!("{}us", delay.as_micros()), "loss".into(), format!("{loss_percent}%")];
        let mut done: Vec<String> = Vec::new();
        for h in 0..rack.hosts() {
            let ns = rack.namespace(h);
            let out = Command::new("ip")
                .args(["netns", "exec", &ns, "tc", "qdisc", "add", "dev", "eth0", "root", "netem"])
                .args(&spec)
                .output();
            let err = match out {
                Ok(o) if o.status.success() => {
                    done.push(ns);
                    continue;
                }
                Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_owned(),
                Err(e) => format!("cannot run tc: {e}"),
            };
            if h > 0 {
                // netem works here, yet not on this host: no fallback.
                drop(BadNetwork { how: How::Netem(done) });
                return Err(format!("tc qdisc add dev eth0 root netem {} in {ns}: {err}", spec.join(" ")));
            }
            // No netem on this machine (no sch_netem, or no tc): the relay.
            let relay = Relay::start(rack, delay, loss_percent / 100.0)?;
            return Ok(BadNetwork { how: How::Relay(relay, err) });
        }
        Ok(BadNetwork { how: How::Netem(done) })
    }

    /// What imposes it: `tc netem`, or the relay and why not netem.
    pub fn how(&self) -> String {
        match &self.how {
            How::Netem(_) => "tc netem".into(),
            How::Relay(_, why) => format!("a relay (tc netem: {why})"),
        }
    }

    /// Frames the relay dropped and passed on so far (`None` under netem).
    pub fn relay_counts(&self) -> Option<(u64, u64)> {
        match &self.how {
            How::Netem(_) => None,
            How::Relay(r, _) => Some((r.counts[0].load(Ordering::Relaxed), r.counts[1].load(Ordering::Relaxed))),
        }
    }
}

impl Drop for BadNetwork {
    fn drop(&mut self) {
        if let How::Netem(nss) = &self.how {
            for ns in nss {
                let _ = Command::new("ip")
                    .args(["netns", "exec", ns, "tc", "qdisc", "del", "dev", "eth0", "root"])
                    .output();
            }
        }
    }
}

/// The relay: one packet socket per bridge port, a reader thread per port
/// that drops or queues each frame for every other port, and a writer
/// thread per port that sends each frame when its delay is over.
struct Relay {
    bridge_ns: String,
    ports: Vec<String>,
    stop: Arc<AtomicBool>,
    /// Frames dropped, frames passed on.
    counts: Arc<[std::sync::atomic::AtomicU64; 2]>,
    threads: Vec<JoinHandle<()>>,
}

/// A frame and when it may leave.
type Due = (Instant, Vec<u8>);

impl Relay {
    fn start(rack: &SimRack, delay: Duration, loss: f64) -> Result<Relay, String> {
        let bridge_ns = rack.bridge_namespace();
        let ports: Vec<String> = (0..rack.hosts()).map(|h| format!("v{h}")).collect();
        let mut relay = Relay {
            bridge_ns: bridge_ns.clone(),
            ports: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            counts: Arc::new(Default::default()),
            threads: Vec::new(),
        };
        for p in &ports {
            ip(&["-n", &bridge_ns, "link", "set", "dev", p, "nomaster"])?;
            relay.ports.push(p.clone());
        }
        let fds = open_sockets(&bridge_ns, &ports)?;
        let fds: Vec<Arc<OwnedFd>> = fds.into_iter().map(Arc::new).collect();
        let mut queues = Vec::new();
        for fd in &fds {
            let (tx, rx) = mpsc::channel::<Due>();
            queues.push(tx);
            let fd = fd.clone();
            relay.threads.push(std::thread::spawn(move || {
                for (due, frame) in rx {
                    let now = Instant::now();
                    if due > now {
                        std::thread::sleep(due - now);
                    }
                    // SAFETY: sends `frame`'s bytes on our own socket.
                    unsafe { libc::send(fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
                }
            }));
        }
        for (i, fd) in fds.iter().enumerate() {
            let fd = fd.clone();
            let others: Vec<mpsc::Sender<Due>> =
                queues.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, q)| q.clone()).collect();
            let (stop, counts) = (relay.stop.clone(), relay.counts.clone());
            let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ ((i as u64 + 1) << 32) ^ std::process::id() as u64;
            relay.threads.push(std::thread::spawn(move || {
                let mut buf = vec![0u8; 1 << 17];
                while !stop.load(Ordering::Relaxed) {
                    // SAFETY: receives into `buf`, which is `buf.len()` bytes.
                    let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
                    if n <= 0 {
                        continue; // the receive timeout: look at `stop` again
                    }
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if ((x >> 11) as f64 / (1u64 << 53) as f64) < loss {
                        counts[0].fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    counts[1].fetch_add(1, Ordering::Relaxed);
                    let due = Instant::now() + delay;
                    for q in &others {
                        let _ = q.send((due, buf[..n as usize].to_vec()));
                    }
                }
            }));
        }
        Ok(relay)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        for p in &self.ports {
            let _ = ip(&["-n", &self.bridge_ns, "link", "set", "dev", p, "master", "br0"]);
        }
    }
}

/// `<linux/if_packet.h>`: frames carry a `virtio_net_hdr` first.
const PACKET_VNET_HDR: libc::c_int = 15;
/// `<linux/if_packet.h>`: do not receive what the socket's device sends.
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;

/// Packet sockets on `ports` of namespace `ns`. Each passes frames with their offload header (so that a
/// segmentation-offloaded frame larger than the link's MTU goes on as it
/// came), ignores what it sends itself, and times out its receives every
/// 50 ms.
fn open_sockets(ns: &str, ports: &[String]) -> Result<Vec<OwnedFd>, String> {
    let ports = ports.to_vec();
    let where_ = ns.to_owned();
    in_namespace(ns, move || -> Result<Vec<OwnedFd>, String> {
        let mut fds = Vec::new();
        for p in &ports {
            let name = std::ffi::CString::new(p.as_str()).expect("no NUL in a port name");
            // SAFETY: a NUL-terminated name.
            let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
            if index == 0 {
                return Err(format!("no port {p} in {where_}"));
            }
            let all = (libc::ETH_P_ALL as u16).to_be();
            // SAFETY: a plain socket call; the descriptor is owned below.
            let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, all as i32) };
            if raw < 0 {
                return Err(format!("packet socket: {}", std::io::Error::last_os_error()));
            }
            // SAFETY: `raw` is a descriptor we just opened and own.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            let one: libc::c_int = 1;
            let timeout = libc::timeval { tv_sec: 0, tv_usec: 50_000 };
            let addr = libc::sockaddr_ll {
                sll_family: libc::AF_PACKET as u16,
                sll_protocol: all,
                sll_ifindex: index as i32,
                sll_hatype: 0,
                sll_pkttype: 0,
                sll_halen: 0,
                sll_addr: [0; 8],
            };
            // SAFETY: options and an address of the sizes given, on our socket.
            let ok = unsafe {
                libc::setsockopt(
                    raw,
                    libc::SOL_PACKET,
                    PACKET_VNET_HDR,
                    (&one as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as u32,
                ) == 0
                    && libc::setsockopt(
                        raw,
                        libc::SOL_PACKET,
                        PACKET_IGNORE_OUTGOING,
                        (&one as *const libc::c_int).cast(),
                        std::mem::size_of::<libc::c_int>() as u32,
                    ) == 0
                    && libc::setsockopt(
                        raw,
                        libc::SOL_SOCKET,
                        libc::SO_RCVTIMEO,
                        (&timeout as *const libc::timeval).cast(),
                        std::mem::size_of::<libc::timeval>() as u32,
                    ) == 0
                    && libc::bind(
                        raw,
                        (&addr as *const libc::sockaddr_ll).cast(),
                        std::mem::size_of::<libc::sockaddr_ll>() as u32,
                    ) == 0
            };
            if !ok {
                return Err(format!("packet socket on {p}: {}", std::io::Error::last_os_error()));
            }
            fds.push(fd);
        }
        Ok(fds)
    })?
}
