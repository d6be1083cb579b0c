//! A client of a runtime's `gossamer top` socket, for the tests of what it
//! shows and sets.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use gossamer::Runtime;

/// A connection to the socket of one runtime.
pub struct Top {
    pub reader: BufReader<UnixStream>,
    pub writer: UnixStream,
}

impl Top {
    pub fn connect(rt: &Runtime) -> Top {
        let path = rt.top_socket_path().expect("the runtime serves gossamer top");
        let s = UnixStream::connect(path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Top { writer: s.try_clone().unwrap(), reader: BufReader::new(s) }
    }

    /// Sends `cmd`; the first line of the answer (and, when it is not an
    /// error, the rest up to `end` when `multi`).
    pub fn ask(&mut self, cmd: &[u8], multi: bool) -> String {
        self.writer.write_all(cmd).unwrap();
        self.writer.write_all(b"\n").unwrap();
        let mut all = String::new();
        loop {
            let mut line = String::new();
            if self.reader.read_line(&mut line).unwrap() == 0 {
                return all;
            }
            all.push_str(&line);
            if !multi || line == "end\n" || line.starts_with("error ") {
                return all;
            }
        }
    }
}
