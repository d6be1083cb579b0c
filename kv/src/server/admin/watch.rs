//! Log watchers (`watch`): connections that receive a stream of log lines
//! in memcached's format instead of replies.
//!
//! Events are formatted on the thread that sees them and appended to each
//! interested watcher's bounded buffer (memcached's `watcher_logbuf_size`);
//! a line that does not fit is dropped and counted (`log_watcher_skipped`),
//! and the watcher is told `skipped=N` before its next line. Each watcher
//! has a writer thread that sends its buffer to the client. With no
//! watcher, the request path only reads one relaxed flag.

use std::io::{ErrorKind, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::protocol::text::admin::log;

/// memcached's `WATCHER_LIMIT`.
pub const WATCHER_LIMIT: usize = 20;

/// How long a writer waits for lines before checking whether its
/// connection is gone.
const IDLE_WAIT: Duration = Duration::from_millis(200);
/// Pause before retrying a write the socket did not take.
const FULL_WAIT: Duration = Duration::from_millis(2);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Debug, Default)]
struct Queue {
    buf: Vec<u8>,
    skipped: u64,
    closed: bool,
}

/// One watching connection.
#[derive(Debug)]
pub struct Watcher {
    mask: u16,
    queue: Mutex<Queue>,
    cond: Condvar,
}

impl Watcher {
    /// Stops the watcher (its connection is closing).
    pub fn close(&self) {
        lock(&self.queue).closed = true;
        self.cond.notify_all();
    }
}

/// The registry of watchers and memcached's logger counters.
#[derive(Debug)]
pub struct Watchers {
    /// Shared with the detail counters: bit 0 is theirs, the log type bits
    /// are the union of the watchers' masks.
    mask: Arc<AtomicU16>,
    list: Mutex<Vec<Arc<Watcher>>>,
    gid: AtomicU64,
    buf_size: usize,
    /// Lines handed to watchers (`log_watcher_sent`).
    pub sent: AtomicU64,
    /// Lines dropped for a full watcher buffer (`log_watcher_skipped`).
    pub skipped: AtomicU64,
    /// Events logged (`log_worker_written`).
    pub written: AtomicU64,
}

/// Why adding a watcher failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddError {
    /// [`WATCHER_LIMIT`] watchers already.
    TooMany,
}

/// memcached's `uriencode` of a key: unreserved characters as they are,
/// anything else as `%XX`.
pub fn uriencode(key: &[u8], out: &mut String) {
    use std::fmt::Write as _;
    for &b in key {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            write!(out, "%{b:02X}").expect("writing to a String cannot fail");
        }
    }
}

/// The `ts=` of a line: seconds and microseconds, as memcached prints them
/// (`%lld.%d`, the microseconds unpadded).
fn timestamp() -> String {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    format!("{}.{}", d.as_secs(), d.subsec_micros())
}

impl Watchers {
    /// No watchers; each will buffer up to `buf_size` bytes. The log type
    /// bits of `mask` are kept up to date; its bit 0 is left alone.
    pub fn new(buf_size: usize, mask: Arc<AtomicU16>) -> Watchers {
        Watchers {
            mask,
            list: Mutex::new(Vec::new()),
            gid: AtomicU64::new(1),
            buf_size,
            sent: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            written: AtomicU64::new(0),
        }
    }

    /// Whether some watcher takes lines of type `bit`.
    #[inline]
    pub fn wants(&self, bit: u16) -> bool {
        self.mask.load(Ordering::Relaxed) & bit != 0
    }

    /// Whether any watcher is registered.
    #[inline]
    pub fn any(&self) -> bool {
        self.mask.load(Ordering::Relaxed) & !1 != 0
    }

    /// Watchers registered (`log_watchers`).
    pub fn count(&self) -> usize {
        lock(&self.list).len()
    }

    fn update_mask(&self, list: &[Arc<Watcher>]) {
        let union = list.iter().fold(0, |m, w| m | w.mask) & !1;
        let _ = self.mask.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |m| Some((m & 1) | union));
    }

    /// Registers a watcher of the log types in `mask`, its buffer starting
    /// with memcached's `OK`.
    pub fn add(&self, mask: u16) -> Result<Arc<Watcher>, AddError> {
        let mut list = lock(&self.list);
        if list.len() >= WATCHER_LIMIT {
            return Err(AddError::TooMany);
        }
        let w = Arc::new(Watcher {
            mask,
            queue: Mutex::new(Queue { buf: b"OK\r\n".to_vec(), ..Queue::default() }),
            cond: Condvar::new(),
        });
        list.push(w.clone());
        self.update_mask(&list);
        Ok(w)
    }

    fn remove(&self, w: &Arc<Watcher>) {
        let mut list = lock(&self.list);
        list.retain(|x| !Arc::ptr_eq(x, w));
        self.update_mask(&list);
    }

    /// Starts the thread that writes `w`'s lines to `sock` until the
    /// connection closes or a write fails.
    pub fn spawn_writer(self: &Arc<Self>, w: Arc<Watcher>, sock: TcpStream) {
        let me = self.clone();
        let ww = w.clone();
        let started = std::thread::Builder::new().name("kv-watch".into()).spawn(move || {
            me.write_loop(&ww, sock);
            me.remove(&ww);
        });
        if let Err(e) = started {
            tracing::warn!("cannot start a log watcher: {e}");
            self.remove(&w);
        }
    }

    fn write_loop(&self, w: &Watcher, mut sock: TcpStream) {
        let mut out = Vec::new();
        loop {
            {
                let mut q = lock(&w.queue);
                while q.buf.is_empty() && !q.closed {
                    q = w.cond.wait_timeout(q, IDLE_WAIT).unwrap_or_else(|e| e.into_inner()).0;
                }
                if q.closed {
                    return;
                }
                std::mem::swap(&mut out, &mut q.buf);
            }
            let mut at = 0;
            while at < out.len() {
                match sock.write(&out[at..]) {
                    Ok(0) => return,
                    Ok(n) => at += n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        if lock(&w.queue).closed {
                            return;
                        }
                        std::thread::sleep(FULL_WAIT);
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => {
                        tracing::debug!("log watcher write failed: {e}");
                        return;
                    }
                }
            }
            out.clear();
        }
    }

    /// Logs an event of type `bit`: `body` is the line after `ts=… gid=… `.
    fn log(&self, bit: u16, body: &str) {
        let gid = self.gid.fetch_add(1, Ordering::Relaxed) + 1;
        self.written.fetch_add(1, Ordering::Relaxed);
        let line = format!("ts={} gid={gid} {body}\n", timestamp());
        for w in lock(&self.list).iter().filter(|w| w.mask & bit != 0) {
            let mut q = lock(&w.queue);
            if q.buf.len() + line.len() > self.buf_size {
                q.skipped += 1;
                self.skipped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            if q.skipped > 0 {
                let note = format!("skipped={}\n", q.skipped);
                q.buf.extend_from_slice(note.as_bytes());
                q.skipped = 0;
            }
            q.buf.extend_from_slice(line.as_bytes());
            self.sent.fetch_add(1, Ordering::Relaxed);
            drop(q);
            w.cond.notify_one();
        }
    }

    /// A lookup (`fetchers`): status is memcached's `not_found`, `found`,
    /// `flushed` or `expired`.
    pub fn item_get(&self, key: &[u8], status: &str, clsid: u32, cfd: i32, size: usize) {
        let mut k = String::new();
        uriencode(key, &mut k);
        self.log(log::FETCHERS, &format!("type=item_get key={k} status={status} clsid={clsid} cfd={cfd} size={size}"));
    }

    /// A store (`mutations`).
    #[allow(clippy::too_many_arguments)]
    pub fn item_store(&self, key: &[u8], status: &str, cmd: &str, ttl: u32, clsid: u32, cfd: i32, size: usize) {
        let mut k = String::new();
        uriencode(key, &mut k);
        self.log(
            log::MUTATIONS,
            &format!("type=item_store key={k} status={status} cmd={cmd} ttl={ttl} clsid={clsid} cfd={cfd} size={size}"),
        );
    }

    /// An item evicted to make room (`evictions`).
    pub fn eviction(&self, e: &crate::store::events::Eviction<'_>) {
        let mut k = String::new();
        uriencode(e.key, &mut k);
        self.log(
            log::EVICTIONS,
            &format!(
                "type=eviction key={k} fetch={} ttl={} la={} clsid={} size={}",
                if e.fetched { "yes" } else { "no" },
                e.ttl,
                e.last_access,
                e.class,
                e.size
            ),
        );
    }

    /// A connection opened (`connevents`).
    pub fn conn_new(&self, peer: Option<SocketAddr>, cfd: i32) {
        let (rip, rport) = endpoint(peer);
        self.log(log::CONNEVENTS, &format!("type=conn_new rip={rip} rport={rport} transport=tcp cfd={cfd}"));
    }

    /// A connection closed (`connevents`); reason is `normal` or `error`.
    pub fn conn_close(&self, peer: Option<SocketAddr>, reason: &str, cfd: i32) {
        let (rip, rport) = endpoint(peer);
        self.log(
            log::CONNEVENTS,
            &format!("type=conn_close rip={rip} rport={rport} transport=tcp reason={reason} cfd={cfd}"),
        );
    }
}

fn endpoint(peer: Option<SocketAddr>) -> (String, u16) {
    match peer {
        Some(a) => (a.ip().to_string(), a.port()),
        None => (String::new(), 0),
    }
}

impl crate::store::events::Events for Watchers {
    fn wants_evictions(&self) -> bool {
        self.wants(log::EVICTIONS)
    }

    fn eviction(&self, e: &crate::store::events::Eviction<'_>) {
        Watchers::eviction(self, e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_uriencoded() {
        let mut s = String::new();
        uriencode(b"sp\x01c a-b.c_d~", &mut s);
        assert_eq!(s, "sp%01c%20a-b.c_d~");
    }

    #[test]
    fn full_buffers_skip_and_say_so() {
        let ws = Watchers::new(200, Arc::default());
        assert!(!ws.any());
        let w = ws.add(log::FETCHERS).unwrap();
        assert!(ws.wants(log::FETCHERS) && !ws.wants(log::MUTATIONS));
        for _ in 0..5 {
            ws.item_get(b"k", "found", 1, 7, 1);
        }
        assert!(ws.skipped.load(Ordering::Relaxed) > 0);
        let buf = std::mem::take(&mut lock(&w.queue).buf);
        let text = String::from_utf8(buf).unwrap();
        assert!(text.starts_with("OK\r\nts="), "{text}");
        assert!(text.contains(" type=item_get key=k status=found clsid=1 cfd=7 size=1\n"));
        ws.item_get(b"k", "found", 1, 7, 1);
        assert!(String::from_utf8(lock(&w.queue).buf.clone()).unwrap().starts_with("skipped="));
        ws.remove(&w);
        assert!(!ws.any());
        for _ in 0..WATCHER_LIMIT {
            ws.add(log::FETCHERS).unwrap();
        }
        assert_eq!(ws.add(log::FETCHERS).unwrap_err(), AddError::TooMany);
    }
}
