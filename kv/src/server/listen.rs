//! Listening sockets and the descriptors connections need: binding with
//! memcached's listen backlog (`-b`, 1024 by default), and raising the
//! process's open-file limit to what `-c` connections take.

use std::net::ToSocketAddrs;
use std::os::fd::AsRawFd;

use crate::config::Config;
use crate::error::Error;

/// Descriptors a process needs besides its client connections: standard
/// streams, listeners, pollers and wakers, the runtime's shared memory and
/// the log and stats files.
const RESERVED_FDS: u64 = 256;

/// Binds `config`'s addresses on `port` and listens with its backlog.
///
/// The backlog goes to `listen(2)` as given, as memcached passes it; Linux
/// caps it at `net.core.somaxconn` (4096 by default since 5.4), and reads a
/// negative one as that cap.
pub fn bind(config: &Config, port: u16) -> Result<Vec<std::net::TcpListener>, Error> {
    let mut listeners = Vec::new();
    for host in config.listen.split(',').map(str::trim).filter(|h| !h.is_empty()) {
        let addrs =
            (host, port).to_socket_addrs().map_err(|source| Error::Resolve { addr: host.to_string(), source })?;
        for addr in addrs {
            let l = std::net::TcpListener::bind(addr).map_err(|source| Error::Bind { addr, source })?;
            // `bind` listened with a backlog of 128; listening again on a
            // listening socket only sets the new backlog.
            // SAFETY: `l` owns a valid socket descriptor for this call.
            if unsafe { libc::listen(l.as_raw_fd(), config.backlog) } != 0 {
                return Err(Error::Bind { addr, source: std::io::Error::last_os_error() });
            }
            l.set_nonblocking(true)?;
            listeners.push(l);
        }
    }
    if listeners.is_empty() {
        return Err(Error::Config(format!("no address to listen on in {:?}", config.listen)));
    }
    Ok(listeners)
}

/// Raises the open-file limit (`RLIMIT_NOFILE`) so that `connections`
/// clients can be served: the soft limit up to the hard one, and the hard
/// one too where the process may (as root). Where the limits stay too low
/// it warns and goes on; connections past the limit are then refused by
/// the kernel at `accept`.
pub fn raise_fd_limit(connections: usize) {
    let want = connections as u64 + RESERVED_FDS;
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the limits into `lim`, a valid rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        tracing::warn!("cannot read the open-file limit: {}", std::io::Error::last_os_error());
        return;
    }
    if lim.rlim_cur >= want {
        return;
    }
    let raised = libc::rlimit { rlim_cur: want, rlim_max: lim.rlim_max.max(want) };
    // SAFETY: setrlimit reads `raised`, a valid rlimit.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
        return;
    }
    let soft = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
    // SAFETY: as above; the soft limit may always rise to the hard one.
    let got = if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &soft) } == 0 { lim.rlim_max } else { lim.rlim_cur };
    tracing::warn!(
        "-c {connections} needs {want} open files but the limit is {got}: raise it (ulimit -n, or the service's \
         LimitNOFILE) or lower -c; connections past about {} will be refused",
        got.saturating_sub(RESERVED_FDS)
    );
}
