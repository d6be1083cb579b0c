//! The closed-loop client: threads × connections × pipeline depth.
//!
//! Each thread polls its connections with `mio`. Every connection keeps
//! `depth` requests in flight: each reply read is timed (from the moment
//! its request was queued) and replaced by a new request. Only replies in
//! the measured window count.

use std::collections::VecDeque;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream as StdStream};
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use super::report::RunResult;
use super::workload::{key_name, Generator, Kind, Workload};

/// A parsed reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reply {
    Hit,
    Miss,
    Stored,
    Error,
}

/// Parses the reply to a request of `kind` at the start of `buf`: for a
/// get, every VALUE block up to END (a multi-key get counts as a hit when
/// any key was found).
fn parse(buf: &[u8], kind: Kind) -> Option<(usize, Reply)> {
    let nl = memchr::memchr(b'\n', buf)?;
    let line = &buf[..=nl];
    match kind {
        Kind::Set => Some((nl + 1, if line == b"STORED\r\n" { Reply::Stored } else { Reply::Error })),
        Kind::Get => {
            let (mut pos, mut hit) = (0, false);
            loop {
                let nl = pos + memchr::memchr(b'\n', &buf[pos..])?;
                let line = &buf[pos..=nl];
                if line == b"END\r\n" {
                    return Some((nl + 1, if hit { Reply::Hit } else { Reply::Miss }));
                }
                if !line.starts_with(b"VALUE ") {
                    return Some((nl + 1, Reply::Error));
                }
                let text = std::str::from_utf8(&line[..line.len().saturating_sub(2)]).ok();
                let Some(len) = text.and_then(|t| t.split(' ').nth(3)).and_then(|l| l.parse::<usize>().ok()) else {
                    return Some((nl + 1, Reply::Error));
                };
                let next = nl + 1 + len + 2;
                if buf.len() < next {
                    return None;
                }
                hit = true;
                pos = next;
            }
        }
    }
}

/// A non-blocking client connection: what is left to write, what was read
/// and not yet parsed, and the requests in flight (of kind `K`, with the
/// time each was queued).
pub(super) struct Client<K> {
    pub(super) stream: TcpStream,
    pub(super) wbuf: Vec<u8>,
    wpos: usize,
    pub(super) rbuf: Vec<u8>,
    pub(super) rlen: usize,
    pub(super) pending: VecDeque<(K, Instant)>,
}

impl<K> Client<K> {
    /// A client over `stream`, with nothing queued.
    pub(super) fn new(stream: TcpStream) -> Self {
        Client { stream, wbuf: Vec::new(), wpos: 0, rbuf: vec![0; 64 * 1024], rlen: 0, pending: VecDeque::new() }
    }

    /// Writes what the socket takes now.
    pub(super) fn flush(&mut self) -> io::Result<()> {
        while self.wpos < self.wbuf.len() {
            match self.stream.write(&self.wbuf[self.wpos..]) {
                Ok(0) => return Err(io::Error::new(ErrorKind::WriteZero, "server closed the connection")),
                Ok(n) => self.wpos += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.wpos == self.wbuf.len() {
            self.wbuf.clear();
            self.wpos = 0;
        }
        Ok(())
    }

    /// Reads what is there; returns false at end of stream.
    pub(super) fn fill(&mut self) -> io::Result<bool> {
        loop {
            if self.rlen == self.rbuf.len() {
                let n = self.rbuf.len() * 2;
                self.rbuf.resize(n, 0);
            }
            match self.stream.read(&mut self.rbuf[self.rlen..]) {
                Ok(0) => return Ok(false),
                Ok(n) => self.rlen += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(true),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// A blocking connection with Nagle off (10 s to connect).
pub(super) fn connect_blocking(addr: SocketAddr) -> io::Result<StdStream> {
    let s = StdStream::connect_timeout(&addr, Duration::from_secs(10))?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// A non-blocking connection for `mio`.
pub(super) fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let s = connect_blocking(addr)?;
    s.set_nonblocking(true)?;
    Ok(TcpStream::from_std(s))
}

/// One client thread's share of the run.
fn drive(addr: SocketAddr, w: &Workload, seed: u64, measure_from: Instant, end: Instant) -> io::Result<RunResult> {
    let mut poll = Poll::new()?;
    let mut events = Events::with_capacity(256);
    let mut gen = Generator::new(w, seed);
    let mut clients = Vec::with_capacity(w.conns);
    let now = Instant::now();
    for i in 0..w.conns {
        let mut stream = connect(addr)?;
        poll.registry().register(&mut stream, Token(i), Interest::READABLE | Interest::WRITABLE)?;
        let mut c = Client::new(stream);
        for _ in 0..w.depth.max(1) {
            let k = gen.next(&mut c.wbuf);
            c.pending.push_back((k, now));
        }
        c.flush()?;
        clients.push(c);
    }
    let mut r = RunResult::new();
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        poll.poll(&mut events, Some((end - now).min(Duration::from_millis(10))))?;
        for ev in events.iter() {
            let c = &mut clients[ev.token().0];
            if ev.is_readable() || ev.is_read_closed() {
                if !c.fill()? {
                    return Err(io::Error::new(ErrorKind::UnexpectedEof, "server closed the connection"));
                }
                let t = Instant::now();
                let mut pos = 0;
                while let Some(&(kind, t0)) = c.pending.front() {
                    let Some((used, reply)) = parse(&c.rbuf[pos..c.rlen], kind) else { break };
                    pos += used;
                    c.pending.pop_front();
                    if t >= measure_from && t < end {
                        r.ops += 1;
                        let _ = r.latency.record((t - t0).as_nanos().max(1) as u64);
                        match reply {
                            Reply::Hit => {
                                r.gets += 1;
                                r.hits += 1;
                            }
                            Reply::Miss => r.gets += 1,
                            Reply::Stored => {}
                            Reply::Error => r.errors += 1,
                        }
                    }
                    let k = gen.next(&mut c.wbuf);
                    c.pending.push_back((k, t));
                }
                c.rbuf.copy_within(pos..c.rlen, 0);
                c.rlen -= pos;
            }
            c.flush()?;
        }
    }
    r.seconds = end.saturating_duration_since(measure_from).as_secs_f64();
    Ok(r)
}

/// Runs workload `w` against the server at `addr`.
pub fn run(addr: SocketAddr, w: &Workload) -> io::Result<RunResult> {
    let start = Instant::now();
    let measure_from = start + Duration::from_secs_f64(w.warmup);
    let end = measure_from + Duration::from_secs_f64(w.duration);
    let results: Vec<io::Result<RunResult>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..w.threads.max(1))
            .map(|t| s.spawn(move || drive(addr, w, 0x5eed + t as u64 * 7919, measure_from, end)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(io::Error::other("client thread panicked"))))
            .collect()
    });
    let mut total = RunResult::new();
    for r in results {
        total.merge(&r?);
    }
    Ok(total)
}

/// Stores every key once (`noreply` sets, synchronised with `mn`).
pub fn prefill(addr: SocketAddr, keys: u64, value_size: usize) -> io::Result<()> {
    let mut s = StdStream::connect_timeout(&addr, Duration::from_secs(10))?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    let value = vec![b'v'; value_size];
    let mut buf = Vec::new();
    let mut reply = Vec::new();
    let mut next = 0;
    while next < keys {
        buf.clear();
        let upto = (next + 2000).min(keys);
        for i in next..upto {
            buf.extend_from_slice(b"set ");
            key_name(&mut buf, i);
            write!(buf, " 0 0 {value_size} noreply\r\n")?;
            buf.extend_from_slice(&value);
            buf.extend_from_slice(b"\r\n");
        }
        buf.extend_from_slice(b"mn\r\n");
        s.write_all(&buf)?;
        reply.clear();
        let mut chunk = [0u8; 4096];
        while !reply.ends_with(b"MN\r\n") {
            let n = s.read(&mut chunk)?;
            if n == 0 {
                return Err(io::Error::new(ErrorKind::UnexpectedEof, "server closed the connection during prefill"));
            }
            reply.extend_from_slice(&chunk[..n]);
        }
        if reply.len() > 4 {
            return Err(io::Error::other(format!("prefill got {:?}", String::from_utf8_lossy(&reply))));
        }
        next = upto;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_replies() {
        assert_eq!(parse(b"STORED\r\n", Kind::Set), Some((8, Reply::Stored)));
        assert_eq!(parse(b"END\r\n", Kind::Get), Some((5, Reply::Miss)));
        let hit = b"VALUE k 0 3\r\nabc\r\nEND\r\nEND\r\n";
        assert_eq!(parse(hit, Kind::Get), Some((23, Reply::Hit)));
        assert_eq!(parse(&hit[..20], Kind::Get), None);
        assert_eq!(parse(b"SERVER_ERROR out of memory\r\n", Kind::Set), Some((28, Reply::Error)));
        let two = b"VALUE a 0 1\r\nx\r\nVALUE b 0 2\r\nyz\r\nEND\r\n";
        assert_eq!(parse(two, Kind::Get), Some((two.len(), Reply::Hit)));
        assert_eq!(parse(&two[..two.len() - 1], Kind::Get), None);
        assert_eq!(parse(b"ERROR\r\n", Kind::Get), Some((7, Reply::Error)));
    }
}
