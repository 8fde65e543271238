//! The offline commands' JSON Lines input: a file, or standard input for
//! `-`, read line by line with blank lines skipped, counting line numbers
//! (for problems) and bytes (for progress against the file's size).

use anyhow::Context;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

pub struct JsonLines {
    reader: BufReader<Box<dyn Read>>,
    path: PathBuf,
    /// The file's size, for a progress bar (unknown for stdin).
    pub total: Option<u64>,
    /// Lines read so far, blank ones included (the last line's number).
    pub line_no: u64,
    /// Bytes read so far.
    pub bytes: u64,
}

impl JsonLines {
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let (reader, total): (Box<dyn Read>, Option<u64>) = if path.as_os_str() == "-" {
            (Box::new(std::io::stdin().lock()), None)
        } else {
            let file = std::fs::File::open(path).with_context(|| format!("{}", path.display()))?;
            let len = file.metadata().ok().map(|m| m.len());
            (Box::new(file), len)
        };
        Ok(Self {
            reader: BufReader::with_capacity(1 << 20, reader),
            path: path.to_owned(),
            total,
            line_no: 0,
            bytes: 0,
        })
    }

    /// The next line that is not blank into `buf` (replacing what it held);
    /// its number (from 1), or `None` at the end of the input.
    pub fn next_into(&mut self, buf: &mut Vec<u8>) -> anyhow::Result<Option<u64>> {
        loop {
            buf.clear();
            let n = self.reader.read_until(b'\n', buf).with_context(|| {
                format!("{}: reading line {}", self.path.display(), self.line_no + 1)
            })?;
            if n == 0 {
                return Ok(None);
            }
            self.line_no += 1;
            self.bytes += n as u64;
            if !buf.iter().all(u8::is_ascii_whitespace) {
                return Ok(Some(self.line_no));
            }
        }
    }
}
