//! The ranks' output as `gossamer run` prints it. The daemons send bytes as
//! they arrive, cut anywhere; here they become whole lines again, each
//! prefixed with `[rank] ` (unless tagging is off), so that lines of
//! different ranks never mix. A rank's unfinished line is held, up to
//! [`LINE_MAX`] bytes per rank and stream: a longer line is passed on in
//! pieces of that size (tagged, each piece on a line of its own; untagged,
//! exactly as written), so memory stays bounded whatever a rank prints.

use std::collections::HashMap;
use std::io::Write;

use crate::proto::Stream;

/// The most bytes of one unfinished line held per rank and stream.
pub const LINE_MAX: usize = 64 << 10;

/// Reassembles and tags the ranks' lines.
pub struct Lines {
    tag: bool,
    held: HashMap<(u32, Stream), Vec<u8>>,
}

impl Lines {
    /// `tag`: prefix each line with `[rank] `.
    pub fn new(tag: bool) -> Lines {
        Lines { tag, held: HashMap::new() }
    }

    /// Bytes from `rank`'s `stream`: writes every line they complete to `out`.
    pub fn push(&mut self, rank: u32, stream: Stream, mut bytes: &[u8], out: &mut dyn Write) -> std::io::Result<()> {
        let mut buf = Vec::new();
        let held = self.held.entry((rank, stream)).or_default();
        while !bytes.is_empty() {
            match bytes.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    held.extend_from_slice(&bytes[..i]);
                    Self::line(self.tag, rank, held, true, &mut buf);
                    bytes = &bytes[i + 1..];
                }
                None => {
                    let room = LINE_MAX - held.len();
                    let take = room.min(bytes.len());
                    held.extend_from_slice(&bytes[..take]);
                    bytes = &bytes[take..];
                    if held.len() == LINE_MAX {
                        Self::line(self.tag, rank, held, false, &mut buf);
                    }
                }
            }
        }
        if buf.is_empty() {
            return Ok(());
        }
        out.write_all(&buf)?;
        out.flush()
    }

    /// A rank's stream ended (or the rank did): its unfinished line goes out.
    pub fn finish(&mut self, rank: u32, stream: Stream, out: &mut dyn Write) -> std::io::Result<()> {
        let mut buf = Vec::new();
        if let Some(mut held) = self.held.remove(&(rank, stream)) {
            if !held.is_empty() {
                Self::line(self.tag, rank, &mut held, false, &mut buf);
                out.write_all(&buf)?;
                out.flush()?;
            }
        }
        Ok(())
    }

    /// The ranks and streams with an unfinished line.
    pub fn unfinished(&self) -> Vec<(u32, Stream)> {
        self.held.iter().filter(|(_, v)| !v.is_empty()).map(|(k, _)| *k).collect()
    }

    /// Appends the held bytes as a line (`newline`: the rank ended it) and empties them.
    fn line(tag: bool, rank: u32, held: &mut Vec<u8>, newline: bool, buf: &mut Vec<u8>) {
        if tag {
            buf.extend_from_slice(format!("[{rank}] ").as_bytes());
        }
        buf.append(held);
        if tag || newline {
            buf.push(b'\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(tag: bool, pushes: &[(u32, &[u8])]) -> Vec<u8> {
        let mut l = Lines::new(tag);
        let mut out = Vec::new();
        for (r, b) in pushes {
            l.push(*r, Stream::Stdout, b, &mut out).unwrap();
        }
        for (r, s) in l.unfinished() {
            l.finish(r, s, &mut out).unwrap();
        }
        out
    }

    #[test]
    fn lines_cut_anywhere_come_out_whole_and_unmixed() {
        let out = run(true, &[(0, b"hel"), (1, b"wor"), (0, b"lo\nsec"), (1, b"ld\n"), (0, b"ond\n")]);
        assert_eq!(out, b"[0] hello\n[1] world\n[0] second\n");
    }

    #[test]
    fn untagged_output_is_exactly_what_was_written() {
        let out = run(false, &[(0, b"a\nb"), (0, b"c\n\n"), (0, b"tail")]);
        assert_eq!(out, b"a\nbc\n\ntail");
    }

    #[test]
    fn an_endless_line_is_passed_on_in_bounded_pieces() {
        let mut l = Lines::new(false);
        let mut out = Vec::new();
        let chunk = vec![b'x'; 10_000];
        for _ in 0..100 {
            l.push(3, Stream::Stderr, &chunk, &mut out).unwrap();
            assert!(l.held[&(3, Stream::Stderr)].len() < LINE_MAX);
        }
        l.finish(3, Stream::Stderr, &mut out).unwrap();
        assert_eq!(out.len(), 1_000_000);
        let tagged = run(true, &[(0, &vec![b'y'; LINE_MAX + 5])]);
        assert_eq!(tagged.len(), LINE_MAX + 5 + 2 * "[0] \n".len());
    }
}
