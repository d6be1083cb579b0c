//! A plain text table with right-aligned columns.

/// Rows of cells under a header.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    /// Columns aligned to the left (text rather than numbers).
    left: Vec<usize>,
}

impl Table {
    pub fn new(header: Vec<String>) -> Table {
        Table { header, rows: Vec::new(), left: Vec::new() }
    }

    /// Aligns columns `cols` to the left.
    pub fn left(mut self, cols: &[usize]) -> Table {
        self.left = cols.to_vec();
        self
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as text, one line per row.
    pub fn render(&self) -> String {
        let cols = self.header.len();
        let mut width = vec![0; cols];
        for r in std::iter::once(&self.header).chain(&self.rows) {
            for (i, c) in r.iter().enumerate().take(cols) {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let line = |r: &Vec<String>| {
            r.iter()
                .enumerate()
                .map(|(i, c)| {
                    if self.left.contains(&i) {
                        format!("{c:<w$}", w = width[i])
                    } else {
                        format!("{c:>w$}", w = width[i])
                    }
                })
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_string()
        };
        let mut out = line(&self.header);
        out.push('\n');
        out.push_str(&width.iter().map(|&w| "-".repeat(w)).collect::<Vec<_>>().join("  "));
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        out
    }
}
