//! Records on the wire: a 2-byte big-endian length, then the bytes. Reading
//! one is bounded in size before anything is stored, and in time by a
//! deadline that covers every byte (a peer sending one byte at a time does
//! not extend it).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use crate::SessionError;

/// The largest record (a Noise message): 65535 bytes.
pub const RECORD_MAX: usize = 65535;

/// A byte stream whose reads can be given a timeout.
pub trait TimedStream: Read + Write {
    /// As [`TcpStream::set_read_timeout`].
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()>;
}

impl TimedStream for TcpStream {
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        TcpStream::set_read_timeout(self, t)
    }
}

impl TimedStream for UnixStream {
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        UnixStream::set_read_timeout(self, t)
    }
}

/// Fills `buf`, giving up at `deadline` (if any). `Ok(false)`: the peer
/// closed before the first byte.
fn fill<S: TimedStream + ?Sized>(
    s: &mut S,
    buf: &mut [u8],
    deadline: Option<Instant>,
    what: &'static str,
) -> Result<bool, SessionError> {
    let mut at = 0;
    while at < buf.len() {
        if let Some(d) = deadline {
            let left = d.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(SessionError::Deadline(what));
            }
            s.set_read_timeout(Some(left))?;
        }
        match s.read(&mut buf[at..]) {
            Ok(0) if at == 0 => return Ok(false),
            Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()),
            Ok(n) => at += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) && deadline.is_some() => {
                return Err(SessionError::Deadline(what))
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(true)
}

/// Reads one record of at most `max` bytes, by `deadline` if one is given.
/// The stream's read timeout is left as the deadline set it (callers that
/// use deadlines set their own before blocking reads).
pub fn read_record<S: TimedStream + ?Sized>(
    s: &mut S,
    max: usize,
    deadline: Option<Instant>,
) -> Result<Vec<u8>, SessionError> {
    let mut len = [0u8; 2];
    if !fill(s, &mut len, deadline, "reading a record")? {
        return Err(SessionError::Closed);
    }
    let len = u16::from_be_bytes(len) as usize;
    if len > max {
        return Err(SessionError::TooLarge { what: "record", len, max });
    }
    let mut body = vec![0u8; len];
    if !fill(s, &mut body, deadline, "reading a record")? && len > 0 {
        return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
    }
    Ok(body)
}

/// Appends `body` as one record to `out`.
pub(crate) fn frame(out: &mut Vec<u8>, body: &[u8]) {
    debug_assert!(body.len() <= RECORD_MAX);
    out.extend_from_slice(&(body.len() as u16).to_be_bytes());
    out.extend_from_slice(body);
}

/// Writes bytes already framed.
pub(crate) fn write_all<W: Write + ?Sized>(w: &mut W, bytes: &[u8]) -> Result<(), SessionError> {
    w.write_all(bytes)?;
    w.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversized_record_is_refused_before_reading_it() {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        a.write_all(&[0xff, 0xff]).unwrap();
        assert!(matches!(read_record(&mut b, 1024, None), Err(SessionError::TooLarge { len: 65535, .. })));
    }

    #[test]
    fn a_slow_peer_does_not_extend_the_deadline() {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        let t = std::thread::spawn(move || {
            for _ in 0..20 {
                if a.write_all(&[1]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(40));
            }
        });
        let start = Instant::now();
        let r = read_record(&mut b, 1024, Some(start + Duration::from_millis(200)));
        assert!(matches!(r, Err(SessionError::Deadline(_))), "{r:?}");
        assert!(start.elapsed() < Duration::from_millis(600));
        drop(b);
        t.join().unwrap();
    }

    #[test]
    fn closed_at_a_boundary_is_closed() {
        let (a, mut b) = UnixStream::pair().unwrap();
        drop(a);
        assert!(matches!(read_record(&mut b, 10, None), Err(SessionError::Closed)));
    }
}
