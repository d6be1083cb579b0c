//! A minimal CSV writer (RFC 4180 quoting) for result files.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

pub struct Csv {
    out: BufWriter<File>,
}

impl Csv {
    /// Creates (or truncates) `path` and writes the header.
    pub fn create(path: &Path, header: &[&str]) -> std::io::Result<Csv> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut c = Csv { out: BufWriter::new(File::create(path)?) };
        c.row(header)?;
        Ok(c)
    }

    pub fn row<S: AsRef<str>>(&mut self, cells: &[S]) -> std::io::Result<()> {
        let line: Vec<String> = cells.iter().map(|c| quote(c.as_ref())).collect();
        writeln!(self.out, "{}", line.join(","))
    }

    pub fn finish(mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

fn quote(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
